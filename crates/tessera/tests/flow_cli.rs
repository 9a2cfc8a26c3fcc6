//! `tessera flow ...` as a user runs it: a scene with snapshots, JSON step records, the
//! manufactured Poisson problem, and one clear error line for bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

fn tessera(args: &[&str]) -> Output {
    Command::new(
        std::env::var_os("TESSERA_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tessera").into()),
    )
    .args(args)
    .output()
    .expect("run tessera")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-flow-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The one `error: ...` line of a failed command (stderr without the device line).
fn error_line(args: &[&str]) -> String {
    let o = tessera(args);
    assert!(!o.status.success(), "tessera {args:?} succeeded");
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.starts_with("device: ")).collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    lines[0].to_string()
}

#[test]
fn run_writes_snapshots_and_json_records() {
    let d = scratch("run");
    let o = tessera(&[
        "flow",
        "run",
        "--scene",
        "smoke2d",
        "--grid",
        "32x32",
        "--steps",
        "4",
        "--device",
        "cpu",
        "-o",
        d.to_str().unwrap(),
        "--every",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 5, "four steps and a summary: {out}");
    for (k, l) in lines[..4].iter().enumerate() {
        assert_eq!(l["step"].as_u64(), Some(k as u64 + 1));
        assert!(l["cycles"].as_u64().unwrap() >= 1);
        assert!(l["residual"].as_f64().unwrap() <= 1e-5);
    }
    assert_eq!(lines[4]["snapshots"].as_array().unwrap().len(), 3);
    for s in [
        "smoke2d_000000.vti",
        "smoke2d_000002.vti",
        "smoke2d_000004.vti",
        "smoke2d.pvd",
    ] {
        assert!(d.join(s).is_file(), "{s}");
    }
    let vti = std::fs::read(d.join("smoke2d_000004.vti")).unwrap();
    let head = String::from_utf8_lossy(&vti[..600]);
    assert!(head.contains("WholeExtent=\"0 32 0 32 0 0\"") && head.contains("Name=\"Smoke\""));
    // no temporary files left behind
    let stray: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(stray.is_empty());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn poisson_reports_errors_and_orders() {
    let o = tessera(&[
        "flow", "poisson", "--case", "circle", "--n", "64", "--grids", "2", "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let a = v.as_array().unwrap();
    assert_eq!(a.len(), 2);
    assert!(a[1]["order_l2_interior"].as_f64().unwrap() > 1.8);
    assert!(a[1]["convergence_factor"].as_f64().unwrap() < 0.15);
    assert!(a[1]["converged"].as_bool().unwrap());
}

#[test]
fn bad_input_is_one_clear_error() {
    let e = error_line(&["flow", "run", "--scene", "hurricane", "--device", "cpu"]);
    assert!(e.contains("unknown scene `hurricane`"), "{e}");
    let e = error_line(&[
        "flow", "run", "--scene", "smoke2d", "--grid", "0x64", "--device", "cpu",
    ]);
    assert!(e.contains("must be positive"), "{e}");
    let e = error_line(&[
        "flow", "run", "--scene", "smoke2d", "--grid", "-8x64", "--device", "cpu",
    ]);
    assert!(e.contains("-8"), "{e}");
    let e = error_line(&["flow", "poisson", "--case", "torus"]);
    assert!(e.contains("unknown Poisson case"), "{e}");
    let d = scratch("mesh");
    let p = d.join("open.obj");
    std::fs::write(&p, "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\n").unwrap();
    let e = error_line(&[
        "flow",
        "run",
        "--scene",
        "bracket3d",
        "--grid",
        "16x8x8",
        "--mesh",
        p.to_str().unwrap(),
        "--device",
        "cpu",
    ]);
    assert!(e.contains("not closed"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}
