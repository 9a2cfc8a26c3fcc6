//! The command line under hostile conditions: broken pipes, concurrent runs into one
//! output folder, planted symlinks, SIGKILL and SIGTERM in the middle of a run, results
//! that are not finite, floating bodies, problems too large for the memory available, and
//! errors that must say their fact once on one bounded line.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn tessera() -> Command {
    Command::new(
        std::env::var_os("TESSERA_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tessera").into()),
    )
}

fn root() -> PathBuf {
    let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    if p.exists() {
        p.to_path_buf()
    } else {
        PathBuf::from(".")
    }
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-rel-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A box problem whose solve takes a noticeable moment (the kill tests need a window).
fn box_problem(dir: &Path, name: &str, cells: [usize; 3], order: usize, extra: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(
        &p,
        format!(
            r#"title = "result"
order = {order}
[mesh]
generate = {{ box = {{ cells = [{}, {}, {}], size = [4.0, 1.0, 1.0] }} }}
[material]
youngs = 200e3
poisson = 0.3
[[fixed]]
selector = {{ type = "plane", point = [0, 0, 0], normal = [1, 0, 0] }}
[[loads]]
type = "traction"
selector = {{ type = "plane", point = [4, 0, 0], normal = [1, 0, 0] }}
traction = [0.0, 0.0, -1.0]
{extra}"#,
            cells[0], cells[1], cells[2]
        ),
    )
    .unwrap();
    p
}

fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The run id in a result `.vtu` (the comment after its header) and in its summary.
fn ids(out: &Path) -> (String, String) {
    let vtu = std::fs::read(out.join("result.vtu")).unwrap();
    assert!(vtu.ends_with(b"</VTKFile>\n"), "a truncated .vtu");
    let head = String::from_utf8_lossy(&vtu[..vtu.len().min(200)]).into_owned();
    let v = head
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("<!-- tessera run "))
        .and_then(|l| l.strip_suffix(" -->"))
        .unwrap_or_default()
        .to_string();
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    (v, s["run_id"].as_str().unwrap_or_default().to_string())
}

fn solve(problem: &Path, out: &Path) -> std::process::Output {
    tessera()
        .args(["fem", "solve", "--device", "cpu", "--json", "-o"])
        .arg(out)
        .arg(problem)
        .output()
        .unwrap()
}

#[test]
fn broken_pipe_ends_quietly() {
    // `tessera mesh info F | head -c1`: the reader goes away; no panic message, no status 101
    let mut child = tessera()
        .args(["mesh", "info"])
        .arg(root().join("crates/tessera-mesh/tests/fixtures/mixed-v41.msh"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // close the read end at once
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let st = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert!(
        st.success() || st.signal() == Some(libc_sigpipe()),
        "status {st:?}, stderr: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

fn libc_sigpipe() -> i32 {
    13
}

#[test]
fn concurrent_runs_into_one_folder_never_mix() {
    let d = tmpdir("concurrent");
    let out = d.join("out");
    let a = box_problem(&d, "a", [6, 3, 3], 1, "");
    let b = box_problem(&d, "b", [3, 2, 2], 2, "");
    for round in 0..4 {
        let ca = tessera()
            .args(["fem", "solve", "--device", "cpu", "--json", "-o"])
            .arg(&out)
            .arg(&a)
            .output();
        let cb = std::thread::spawn({
            let (out, b) = (out.clone(), b.clone());
            move || solve(&b, &out)
        });
        let (oa, ob) = (ca.unwrap(), cb.join().unwrap());
        assert!(
            oa.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&oa.stderr)
        );
        assert!(
            ob.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&ob.stderr)
        );
        let (v, s) = ids(&out);
        assert!(
            !v.is_empty() && v == s,
            "round {round}: .vtu {v} with summary {s}"
        );
        assert_eq!(names(&out), ["result.vtu", "summary.json"], "round {round}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn planted_symlink_at_an_output_is_replaced_not_followed() {
    let d = tmpdir("symlink");
    let out = d.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let victim = d.join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, out.join("summary.json")).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("result.vtu")).unwrap();
    let p = box_problem(&d, "p", [2, 1, 1], 1, "");
    let o = solve(&p, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let (v, s) = ids(&out);
    assert_eq!(v, s);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn sigkill_at_any_point_keeps_the_old_output_and_the_next_run_cleans_up() {
    let d = tmpdir("sigkill");
    let out = d.join("out");
    let p = box_problem(&d, "p", [8, 4, 4], 2, "");
    let o = solve(&p, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let first = ids(&out);
    // how long a run takes, then kills spread over it
    let t = Instant::now();
    assert!(solve(&p, &out).status.success());
    let full = t.elapsed();
    let mut pairs = vec![first.clone(), ids(&out)];
    for k in 1..=8u32 {
        let mut child = tessera()
            .args(["fem", "solve", "--device", "cpu", "--json", "-o"])
            .arg(&out)
            .arg(&p)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(full.mul_f64(k as f64 / 8.0));
        let _ = child.kill(); // SIGKILL
        let st = child.wait().unwrap();
        // whatever the moment: a complete pair from one run (the old one, or the new one
        // when the kill came after the publish), or, when the kill fell between the two
        // renames, the new .vtu beside the old summary and the journal of the set, which
        // the next write into the folder replays (here called directly)
        let (mut v, mut s) = ids(&out);
        if v != s {
            assert!(
                names(&out)
                    .iter()
                    .any(|n| n.starts_with(tessera_core::atomic::JOURNAL_MARK)),
                "kill {k} ({st:?}) left a mixed pair without a journal: {:?}",
                names(&out)
            );
            tessera_core::atomic::complete_interrupted(&out);
            (v, s) = ids(&out);
        }
        assert_eq!(v, s, "kill {k} ({st:?}) left a mixed pair");
        if !pairs.iter().any(|p| p.0 == v) {
            pairs.push((v, s));
        }
    }
    // the next run removes what killed runs left
    assert!(solve(&p, &out).status.success());
    assert_eq!(names(&out), ["result.vtu", "summary.json"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn sigterm_removes_temporary_files_and_ends_by_the_signal() {
    let d = tmpdir("sigterm");
    let out = d.join("out");
    let p = box_problem(&d, "p", [10, 5, 5], 2, "");
    // a converted mesh is written while the process is terminated: the writes in progress
    // leave nothing behind
    for k in 0..6u64 {
        let mut child = tessera()
            .args(["fem", "solve", "--device", "cpu", "--json", "-o"])
            .arg(&out)
            .arg(&p)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(150 + 150 * k));
        let pid = child.id() as i32;
        // SAFETY: sends SIGTERM to our own child.
        unsafe { kill(pid, 15) };
        let st = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(
            st.success() || st.signal() == Some(15),
            "SIGTERM {k}: {st:?}"
        );
        if out.exists() {
            let left: Vec<String> = names(&out)
                .into_iter()
                .filter(|n| n.contains(".tessera-tmp."))
                .collect();
            assert!(left.is_empty(), "SIGTERM {k} left {left:?}");
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn non_finite_results_fail_and_write_nothing() {
    let d = tmpdir("nonfinite");
    let out = d.join("out");
    // a Young's modulus so large that the stiffness overflows to infinity
    let p = d.join("inf.toml");
    let text = std::fs::read_to_string(box_problem(&d, "base", [2, 1, 1], 1, "")).unwrap();
    std::fs::write(&p, text.replace("youngs = 200e3", "youngs = 1e308")).unwrap();
    let o = solve(&p, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("not finite"), "{err}");
    assert!(
        err.lines().filter(|l| l.starts_with("error:")).count() == 1,
        "{err}"
    );
    assert!(!out.join("result.vtu").exists() && !out.join("summary.json").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn floating_body_is_an_error_for_every_method() {
    let d = tmpdir("floating");
    // two separate tetrahedra: the first fixed, the second held by nothing
    let mesh = d.join("two.msh");
    std::fs::write(
        &mesh,
        "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n8\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n\
         5 5 0 0\n6 6 0 0\n7 5 1 0\n8 5 0 1\n$EndNodes\n$Elements\n2\n1 4 0 1 2 3 4\n2 4 0 5 6 7 8\n$EndElements\n",
    )
    .unwrap();
    for method in ["pcg", "cholesky"] {
        let p = d.join(format!("{method}.toml"));
        std::fs::write(
            &p,
            format!(
                r#"title = "result"
order = 1
[mesh]
file = "two.msh"
[material]
youngs = 1000.0
poisson = 0.3
[[fixed]]
selector = {{ type = "box", min = [-0.1, -0.1, -0.1], max = [1.1, 1.1, 1.1] }}
[[loads]]
type = "traction"
selector = {{ type = "box", min = [-0.1, -0.1, -0.1], max = [1.1, 1.1, 0.1] }}
traction = [0.0, 0.0, -1.0]
[solver]
method = "{method}"
"#
            ),
        )
        .unwrap();
        let o = solve(&p, &d.join("out"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{method}: {err}");
        assert!(
            err.contains("body 2 of 2") && err.contains("floating"),
            "{method}: {err}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn too_large_problems_are_refused_before_work() {
    let d = tmpdir("large");
    for (what, args) in [
        (
            "cells",
            vec!["fem", "solve", "--device", "cpu", "-o"]
                .into_iter()
                .map(String::from)
                .chain([d.join("out").display().to_string()])
                .chain([box_problem(&d, "big", [400, 400, 400], 2, "")
                    .display()
                    .to_string()])
                .collect::<Vec<_>>(),
        ),
        (
            "gen:box",
            [
                "fem",
                "assemble",
                "gen:box:400",
                "--order",
                "3",
                "--device",
                "cpu",
            ]
            .map(String::from)
            .to_vec(),
        ),
        (
            "levels",
            vec![
                "mesh".to_string(),
                "subdivide".into(),
                root()
                    .join("crates/tessera-mesh/tests/fixtures/mixed-v41.msh")
                    .display()
                    .to_string(),
                "-l".into(),
                "12".into(),
                "-o".into(),
                d.join("sub.vtu").display().to_string(),
            ],
        ),
    ] {
        let t = Instant::now();
        let o = tessera().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{what}: {err}");
        assert!(
            err.contains("needs ~") && err.contains("GB available") && err.contains("--max-memory"),
            "{what}: {err}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{what}: {:?}",
            t.elapsed()
        );
    }
    // --max-memory sets the budget: a small problem is refused under a tiny one
    let p = box_problem(&d, "small", [10, 5, 5], 1, "");
    let o = tessera()
        .args([
            "--max-memory",
            "1M",
            "fem",
            "solve",
            "--device",
            "cpu",
            "-o",
        ])
        .arg(d.join("out"))
        .arg(&p)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("0.001 GB available (--max-memory)"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn errors_say_their_fact_once_on_one_bounded_line() {
    let d = tmpdir("messages");
    // a mesh error reached through fem solve: the file and line once
    let mesh = d.join("bad.msh");
    let good =
        std::fs::read_to_string(root().join("crates/tessera-mesh/tests/fixtures/mixed-v22.msh"))
            .unwrap();
    std::fs::write(
        &mesh,
        good.replace("4 4 2 1 1 20 100 60 120", "4 4 2 1 1 20 100 60 999"),
    )
    .unwrap();
    let p = d.join("p.toml");
    std::fs::write(
        &p,
        "order = 1\n[mesh]\nfile = \"bad.msh\"\n[material]\nyoungs = 1.0\npoisson = 0.3\n[[fixed]]\nselector = { type = \"boundary\" }\n",
    )
    .unwrap();
    let o = solve(&p, &d.join("out"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(err.matches("line 32").count(), 1, "{err}");
    // an OS error: its reason once, without `(os error N)`
    let o = tessera().args(["mesh", "info"]).arg(&d).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("os error"), "{err}");
    // a long query: a clipped excerpt, not the whole expression
    let long = format!("{} + )", "Pressure + ".repeat(10_000));
    let o = tessera()
        .args(["query", "eval", &long, "--field"])
        .arg(format!("Pressure={}", d.join("none.bin").display()))
        .arg("--out")
        .arg(d.join("o.bin"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.len() < 1200 && err.lines().count() == 1,
        "{} bytes: {err}",
        err.len()
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `fem assemble MESH -p 9` on a mesh whose order-9 matrix cannot fit: refused once the
/// file is read, with the estimate and the memory available, before any order-p work (it
/// used to run two minutes and abort on a 27 GB allocation). The budget is set so the
/// outcome does not depend on the machine; the mesh is read in well under a second.
#[test]
fn high_order_assembly_is_refused_at_once_with_the_estimate() {
    let mesh = root().join("examples/bracket-7.9k.msh.gz");
    let k = std::env::temp_dir()
        .join(format!("tessera-rel-K-{}.mtx", std::process::id()))
        .display()
        .to_string();
    for extra in [&[][..], &["-o", k.as_str()][..]] {
        let t = Instant::now();
        let o = tessera()
            .args(["--max-memory", "4G", "fem", "assemble"])
            .arg(&mesh)
            .args(["--order", "9", "--device", "cpu"])
            .args(extra)
            .output()
            .unwrap();
        let el = t.elapsed();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {err}");
        assert!(
            err.contains("p = 9")
                && err.contains("needs ~")
                && err.contains("GB available (--max-memory)"),
            "{extra:?}: {err}"
        );
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error")).count(),
            1,
            "{err}"
        );
        assert!(el < Duration::from_secs(1), "{extra:?}: {el:?}");
        assert!(!Path::new(&k).exists());
    }
}

/// clap echoes an unknown or invalid argument; a 100 KB one is clipped, not printed whole.
#[test]
fn overlong_arguments_are_clipped_in_usage_errors() {
    let huge = "x".repeat(100_000);
    for args in [
        vec![huge.clone()],
        vec!["mesh".into(), "info".into(), format!("--{huge}")],
        vec![
            "fem".into(),
            "assemble".into(),
            "gen:box:2".into(),
            "--order".into(),
            huge.clone(),
        ],
    ] {
        let o = tessera().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}", &err[..err.len().min(300)]);
        assert!(err.len() < 4000, "{} bytes", err.len());
        assert!(err.contains("more characters"), "{err}");
    }
    // help still prints whole and succeeds
    let o = tessera().arg("--help").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Usage"));
}
