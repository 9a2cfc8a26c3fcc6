//! `tessera mesh normals|laplacian|slice|subdivide-surface|reorder|collapse` and
//! `tessera bench meshmatrix` run as a user runs them (CPU; on a GPU machine the same commands
//! run on the device and must give the same files).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

fn json(args: &[&str]) -> serde_json::Value {
    let out = ok(args);
    assert_eq!(out.trim().lines().count(), 1, "one JSON line: {out}");
    serde_json::from_str(&out).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-cli-mm-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// An octahedron, refined: a closed triangle surface written as OBJ.
fn write_sphere(dir: &Path) -> PathBuf {
    let p = dir.join("sphere.obj");
    let mut t = String::new();
    for v in [
        [1.0, 0.0, 0.0],
        [-1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, -1.0, 0.0],
        [0.0, 0.0, 1.0],
        [0.0, 0.0, -1.0],
    ] {
        t.push_str(&format!("v {} {} {}\n", v[0], v[1], v[2]));
    }
    for f in [
        [1, 3, 5],
        [3, 2, 5],
        [2, 4, 5],
        [4, 1, 5],
        [3, 1, 6],
        [2, 3, 6],
        [4, 2, 6],
        [1, 4, 6],
    ] {
        t.push_str(&format!("f {} {} {}\n", f[0], f[1], f[2]));
    }
    std::fs::write(&p, t).unwrap();
    p
}

#[test]
fn surface_commands_end_to_end() {
    let d = scratch("surface");
    let sphere = write_sphere(&d);
    // subdivide twice (quads), then back to the triangle commands on the octahedron
    let cc = d.join("cc.ply");
    let v = json(&[
        "mesh",
        "subdivide-surface",
        s(&sphere),
        "--levels",
        "2",
        "-o",
        s(&cc),
        "--json",
    ]);
    // V' = V + E + F: 6 + 12 + 8 = 26, then 26 + 48 + 24 = 98; F' = 24, then 96
    assert_eq!(v["vertices"], 98);
    assert_eq!(v["faces"], 96);
    let n = d.join("n.obj");
    let v = json(&[
        "mesh",
        "normals",
        s(&cc),
        "-o",
        s(&n),
        "--weights",
        "angle",
        "--json",
    ]);
    assert_eq!(v["vertices"], 98);
    assert!(std::fs::read_to_string(&n).unwrap().contains("\nvn "));
    for kind in ["uniform", "cotan"] {
        let l = d.join(format!("{kind}.mtx"));
        let v = json(&[
            "mesh",
            "laplacian",
            s(&sphere),
            "--kind",
            kind,
            "-o",
            s(&l),
            "--json",
        ]);
        assert_eq!(v["detail"]["rows"], 6);
        let text = std::fs::read_to_string(&l).unwrap();
        assert!(text.starts_with("%%MatrixMarket matrix coordinate real general"));
        // 6 diagonal entries + 24 off-diagonal (12 edges both ways)
        assert_eq!(v["detail"]["nonzeros"], 30);
    }
    let sl = d.join("sliced.off");
    let pl = d.join("cut.obj");
    let v = json(&[
        "mesh",
        "slice",
        s(&sphere),
        "--plane",
        "0,0,0.2,0,0,1",
        "-o",
        s(&sl),
        "--polylines",
        s(&pl),
        "--json",
    ]);
    assert_eq!(v["detail"]["polylines"], 1);
    assert_eq!(v["detail"]["closed_polylines"], 1);
    assert!(std::fs::read_to_string(&pl).unwrap().contains("\nl "));
    let above = d.join("above.obj");
    let v = json(&[
        "mesh",
        "slice",
        s(&sphere),
        "--plane",
        "0,0,0.2,0,0,-1",
        "--keep",
        "above",
        "-o",
        s(&above),
        "--json",
    ]);
    assert!(v["faces"].as_u64().unwrap() > 4);
    let r = d.join("r.ply");
    let v = json(&["mesh", "reorder", s(&cc), "--rcm", "-o", s(&r), "--json"]);
    assert!(
        v["detail"]["bandwidth_after"].as_u64().unwrap()
            <= v["detail"]["bandwidth_before"].as_u64().unwrap()
    );
    // collapse one edge of the refined sphere (triangulated by the slice? use the quads)
    let edges = d.join("edges.txt");
    std::fs::write(&edges, "# one edge\n0 8\n").unwrap();
    let c = d.join("c.obj");
    let o = tessera(&[
        "mesh",
        "collapse",
        s(&cc),
        "--edges",
        s(&edges),
        "-o",
        s(&c),
        "--json",
    ]);
    if o.status.success() {
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["detail"]["euler_before"], v["detail"]["euler_after"]);
    } else {
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("edge 0 (0, 8)"), "{e}");
    }
}

#[test]
fn bad_inputs_give_one_clear_line() {
    let d = scratch("bad");
    let sphere = write_sphere(&d);
    let bad = d.join("bad.obj");
    std::fs::write(&bad, "v 0 0 0\nv 1 0 0\nf 1 2 7\n").unwrap();
    let o = tessera(&["mesh", "normals", s(&bad), "-o", s(&d.join("x.ply"))]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("bad.obj:line 3"), "{e}");
    // one error line (besides the line naming the device the command ran on)
    let lines = e.trim().lines().filter(|l| !l.starts_with("device: "));
    assert_eq!(lines.count(), 1, "{e}");
    // an invalid batch names the edge: (0, 1) of the octahedron is fine, but (0, 2), (2, 4)
    // share their neighbourhoods
    let edges = d.join("e.txt");
    std::fs::write(&edges, "0 2\n2 4\n").unwrap();
    let o = tessera(&[
        "mesh",
        "collapse",
        s(&sphere),
        "--edges",
        s(&edges),
        "-o",
        s(&d.join("c.obj")),
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("edge 0 (0, 2)") && e.contains("edge 1 (2, 4)"),
        "{e}"
    );
    // a bad plane
    let o = tessera(&[
        "mesh",
        "slice",
        s(&sphere),
        "--plane",
        "0,0,0,0,0,0",
        "-o",
        s(&d.join("s.obj")),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("normal is zero"));
    // quads are not sliced
    let cube = d.join("cube.obj");
    std::fs::write(
        &cube,
        "v -1 -1 -1\nv 1 -1 -1\nv -1 1 -1\nv 1 1 -1\nv -1 -1 1\nv 1 -1 1\nv -1 1 1\nv 1 1 1\n\
         f 1 3 4 2\nf 5 6 8 7\nf 1 2 6 5\nf 3 7 8 4\nf 1 5 7 3\nf 2 4 8 6\n",
    )
    .unwrap();
    let o = tessera(&[
        "mesh",
        "slice",
        s(&cube),
        "--plane",
        "0,0,0,0,0,1",
        "-o",
        s(&d.join("s.obj")),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs a triangle mesh"));
}

#[test]
fn bench_meshmatrix_prints_a_table_with_the_seed_figures() {
    let d = scratch("bench");
    let sphere = write_sphere(&d);
    let out = ok(&[
        "bench",
        "meshmatrix",
        s(&sphere),
        "--triangles",
        "2000",
        "--runs",
        "5",
        "--cpu-runs",
        "1",
        "--device",
        "cpu",
    ]);
    assert!(out.contains("refined to 2000 triangles"), "{out}");
    assert!(
        out.contains("| Mᵀ v |") && out.contains("| Catmull-Clark, 1 step |"),
        "{out}"
    );
    assert!(out.contains("Embreea Orchid"), "{out}");
    let v = json(&[
        "bench",
        "meshmatrix",
        s(&sphere),
        "--runs",
        "5",
        "--cpu-runs",
        "1",
        "--device",
        "cpu",
        "--json",
    ]);
    assert_eq!(v[0]["triangles"], 8);
}
