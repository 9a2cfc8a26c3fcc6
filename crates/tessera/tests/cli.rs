//! Command-line tests: `tessera mesh ...` and `tessera demo` run as a user runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Stderr without the `device: ...` line that commands print when they run on a GPU.
fn without_device_line(err: &str) -> String {
    err.lines()
        .filter(|l| !l.starts_with("device: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn tessera(args: &[&str]) -> Output {
    Command::new(
        std::env::var_os("TESSERA_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tessera").into()),
    )
    .args(args)
    .output()
    .expect("run tessera")
}

fn ok(args: &[&str]) -> String {
    let o = tessera(args);
    assert!(
        o.status.success(),
        "tessera {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn info_json(file: &Path) -> serde_json::Value {
    let out = ok(&["mesh", "info", s(file), "--json"]);
    assert_eq!(out.trim().lines().count(), 1, "one JSON object on one line");
    serde_json::from_str(&out).expect("valid JSON")
}

fn int(v: &serde_json::Value, k: &str) -> i64 {
    v[k].as_i64()
        .unwrap_or_else(|| panic!("`{k}` is not an integer in {v}"))
}

#[test]
fn info_json_on_a_generated_mixed_box() {
    let d = scratch("info");
    let f = d.join("box.msh");
    ok(&[
        "mesh",
        "generate",
        "box",
        "--kind",
        "mixed",
        "--n",
        "2",
        "2",
        "2",
        "-o",
        s(&f),
    ]);
    let v = info_json(&f);
    let (nv, ne, nf, nc) = (
        int(&v, "vertices"),
        int(&v, "edges"),
        int(&v, "faces"),
        int(&v, "cells"),
    );
    assert_eq!(int(&v, "euler_characteristic"), nv - ne + nf - nc);
    assert_eq!(int(&v, "euler_characteristic"), 1, "a box is a ball");
    for k in [
        "boundary_faces",
        "boundary_edges",
        "boundary_vertices",
        "topology_bytes",
    ] {
        assert!(int(&v, k) > 0, "{k}");
    }
    assert_eq!(v["manifold"], serde_json::Value::Bool(true));
    // the surface of a ball: Vb - Eb + Fb = 2
    assert_eq!(
        int(&v, "boundary_vertices") - int(&v, "boundary_edges") + int(&v, "boundary_faces"),
        2
    );
    let t = &v["cell_types"];
    let types = [
        "tetrahedron",
        "hexahedron",
        "prism",
        "pyramid",
        "polyhedron",
    ];
    let sum: i64 = types.iter().map(|k| int(t, k)).sum();
    assert_eq!(sum, nc);
    for k in &types[..4] {
        assert!(int(t, k) > 0, "a mixed box has {k}s");
    }
    assert_eq!(int(t, "polyhedron"), 0);
    // text output too
    let text = ok(&["mesh", "info", s(&f)]);
    assert!(text.contains("Euler characteristic V-E+F-C = 1"), "{text}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bracket_convert_boundary_smooth() {
    let d = scratch("pipeline");
    let msh = d.join("b.msh.gz");
    ok(&[
        "mesh",
        "generate",
        "bracket",
        "--resolution",
        "12",
        "-o",
        s(&msh),
    ]);
    let v = info_json(&msh);
    assert!(int(&v, "cells") > 1000);
    assert_eq!(
        int(&v["cell_types"], "tetrahedron"),
        int(&v, "cells"),
        "the bracket is all tetrahedra"
    );
    for out in ["b.vtu", "b.ovm", "b.mesh"] {
        let p = d.join(out);
        ok(&["mesh", "convert", s(&msh), s(&p)]);
        assert!(p.exists());
    }
    // the .ovm reads back with the same counts
    let w = info_json(&d.join("b.ovm"));
    for k in [
        "vertices",
        "edges",
        "faces",
        "cells",
        "boundary_faces",
        "euler_characteristic",
    ] {
        assert_eq!(v[k], w[k], "{k}");
    }
    let obj = d.join("surf.obj");
    let out = ok(&["mesh", "boundary", s(&msh), "-o", s(&obj)]);
    assert!(
        out.contains(&format!("{} polygons", int(&v, "boundary_faces"))),
        "{out}"
    );
    let text = std::fs::read_to_string(&obj).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.starts_with("f ")).count() as i64,
        int(&v, "boundary_faces")
    );
    ok(&["mesh", "boundary", s(&msh), "-o", s(&d.join("surf.vtu"))]);
    let sm = d.join("smooth.msh");
    ok(&["mesh", "smooth", s(&msh), "--iterations", "3", "-o", s(&sm)]);
    let u = info_json(&sm);
    assert_eq!(v["edges"], u["edges"], "smoothing keeps the topology");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_input_exits_non_zero_with_one_line_naming_the_file() {
    // the build-time path, or (test binaries run elsewhere, from the repository root) the relative one
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = if dir.exists() {
        dir
    } else {
        Path::new("crates/tessera")
    };
    let bad = dir.join("../tessera-mesh/tests/fixtures/malformed/m41-nan.msh");
    let o = tessera(&["mesh", "info", s(&bad), "--json"]);
    assert!(!o.status.success());
    assert!(o.stdout.is_empty());
    let err = String::from_utf8(o.stderr).unwrap();
    // on a GPU machine `--device auto` first names the device it picked on its own line
    let err = without_device_line(&err);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("m41-nan.msh") && err.contains("line 44") && err.contains("not finite"),
        "{err}"
    );

    let o = tessera(&["mesh", "info", "/nonexistent/x.msh"]);
    assert!(!o.status.success());
    let err = String::from_utf8(o.stderr).unwrap();
    let err = without_device_line(&err);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/x.msh"), "{err}");

    let o = tessera(&["mesh", "convert", s(&bad), "/tmp/never-written.vtu"]);
    assert!(!o.status.success());
    assert!(!Path::new("/tmp/never-written.vtu").exists());
}

#[test]
fn cuda_without_a_backend_is_one_clear_line() {
    let d = scratch("cuda");
    let f = d.join("box.msh");
    ok(&["mesh", "generate", "box", "--n", "1", "1", "1", "-o", s(&f)]);
    let o = tessera(&["mesh", "info", s(&f), "--device", "cuda"]);
    let err = String::from_utf8(o.stderr).unwrap();
    if o.status.success() {
        // a machine with a usable GPU: the command names it
        assert!(err.starts_with("device: cuda:0 "), "{err}");
    } else {
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains("no CUDA device available"), "{err}");
    }
    let o = tessera(&["mesh", "info", s(&f), "--device", "tpu"]);
    assert!(!o.status.success());
    ok(&["mesh", "info", s(&f), "--device", "cpu"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn demo_writes_vtu_files_and_a_json_summary() {
    let d = scratch("demo");
    let out = ok(&["demo", "--json", "--resolution", "12", "--out", s(&d)]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
    // auto: the CPU here, the GPU on a machine with one
    let dev = v["device"].as_str().unwrap();
    assert!(
        dev.starts_with("cpu") || dev.starts_with("cuda:0 "),
        "{dev}"
    );
    // the same bracket as `mesh generate bracket`
    let g = d.join("g.msh");
    ok(&[
        "mesh",
        "generate",
        "bracket",
        "--resolution",
        "12",
        "-o",
        s(&g),
    ]);
    let info = info_json(&g);
    for k in [
        "vertices",
        "edges",
        "faces",
        "cells",
        "boundary_faces",
        "boundary_vertices",
        "euler_characteristic",
    ] {
        assert_eq!(v["mesh"][k], info[k], "{k}");
    }
    let stages: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(stages[0], "generate bracket");
    assert!(stages.iter().any(|s| s.starts_with("smooth")));
    for f in v["files"].as_array().unwrap() {
        let p = Path::new(f.as_str().unwrap());
        let bytes = std::fs::read(p).unwrap();
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]);
        assert!(
            head.contains("<VTKFile type=\"UnstructuredGrid\""),
            "{}",
            p.display()
        );
        // every .vtu Tessera writes reads back
        ok(&["mesh", "info", s(p)]);
    }
    // bracket, boundary, smoothed, subdivided, and the FEM results
    assert!(v["files"].as_array().unwrap().len() >= 4, "{}", v["files"]);
    let text = ok(&["demo", "--resolution", "12", "--out", s(&d)]);
    assert!(
        text.contains("tessera demo") && text.contains("total"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn help_everywhere() {
    for args in [
        &["mesh", "--help"][..],
        &["mesh", "info", "--help"],
        &["mesh", "convert", "--help"],
        &["mesh", "boundary", "--help"],
        &["mesh", "smooth", "--help"],
        &["mesh", "generate", "--help"],
        &["mesh", "generate", "bracket", "--help"],
        &["mesh", "generate", "box", "--help"],
        &["demo", "--help"],
    ] {
        let out = ok(args);
        assert!(out.contains("Usage"), "{args:?}: {out}");
    }
}
