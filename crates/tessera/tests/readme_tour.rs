//! The README's tour runs: every command it shows (`tessera demo` and each row of "Tour of the
//! command line") has a small invocation here that must succeed, and a command added to the
//! README without one fails `every_readme_command_has_a_run`. Commands without a CPU path
//! (`spmv tune`, `spmv bench`) must refuse `--device cpu` with the explanation the README gives.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bin() -> std::ffi::OsString {
    std::env::var_os("TESSERA_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tessera").into())
}

fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run tessera")
}

fn ok_in(dir: &Path, args: &[&str]) -> String {
    let o = run_in(dir, args);
    assert!(
        o.status.success(),
        "tessera {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-tour-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The commands the README shows: `tessera` lines of its code blocks and the first column of
/// the tour table, as "group sub" keys (`mesh info`, `serve`); `a|b` alternatives expand.
fn readme_commands() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let mut spans: Vec<String> = Vec::new();
    let mut in_tour = false;
    for line in text.lines() {
        if line.starts_with("## ") {
            in_tour = line.contains("Tour of the command line");
        }
        if let Some(rest) = line.trim_start().strip_prefix("tessera ") {
            spans.push(rest.to_string());
        }
        if in_tour && line.starts_with("| `") {
            let first = line.split(" | ").next().unwrap_or("");
            for (i, part) in first.split('`').enumerate() {
                if i % 2 == 1 {
                    if let Some(rest) = part.strip_prefix("tessera ") {
                        // `a\|b` in a table cell is the alternative a|b
                        spans.push(rest.replace("\\|", "|"));
                    }
                }
            }
        }
    }
    let word = |w: &str| {
        !w.is_empty()
            && w.split('|').all(|a| {
                a.chars()
                    .all(|c| c.is_ascii_lowercase() || c == '-' || c.is_ascii_digit())
                    && a.starts_with(|c: char| c.is_ascii_lowercase())
            })
    };
    let mut keys = BTreeSet::new();
    for s in spans {
        let w: Vec<&str> = s.split_whitespace().collect();
        let Some(&g) = w.first() else { continue };
        if !word(g) {
            continue;
        }
        match w.get(1).filter(|x| word(x)) {
            Some(sub) => {
                for a in sub.split('|') {
                    keys.insert(format!("{g} {a}"));
                }
            }
            None => {
                keys.insert(g.to_string());
            }
        }
    }
    keys
}

/// The commands this file runs (keys as [`readme_commands`] makes them).
const COVERED: &[&str] = &[
    "demo",
    "mesh info",
    "mesh quality",
    "mesh convert",
    "mesh generate",
    "mesh boundary",
    "mesh smooth",
    "mesh subdivide",
    "mesh normals",
    "mesh laplacian",
    "mesh slice",
    "mesh subdivide-surface",
    "mesh reorder",
    "mesh collapse",
    "mesh partition",
    "render rixels",
    "render bench",
    "fem assemble",
    "fem solve",
    "spmv codegen",
    "spmv verify",
    "spmv tune",
    "spmv bench",
    "spmv memory",
    "flow run",
    "flow poisson",
    "flow strouhal",
    "query eval",
    "query bench",
    "serve",
    "stream bench",
    "bench mesh",
    "bench fem",
    "bench fem-solve",
    "bench flow",
    "bench meshmatrix",
    "bench partition",
    "bench shallow-water",
];

#[test]
fn every_readme_command_has_a_run() {
    let shown = readme_commands();
    assert!(
        shown.contains("demo") && shown.contains("mesh info"),
        "{shown:?}"
    );
    let covered: BTreeSet<String> = COVERED.iter().map(|s| s.to_string()).collect();
    let missing: Vec<&String> = shown.difference(&covered).collect();
    assert!(
        missing.is_empty(),
        "README commands without a run in tests/readme_tour.rs: {missing:?}"
    );
    let stale: Vec<&String> = covered.difference(&shown).collect();
    assert!(
        stale.is_empty(),
        "runs of commands the README no longer shows: {stale:?}"
    );
}

#[test]
fn tour_demo() {
    let d = scratch("demo");
    let out = ok_in(
        &d,
        &[
            "demo",
            "--device",
            "cpu",
            "--resolution",
            "12",
            "--iterations",
            "2",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["files"].as_array().is_some_and(|f| !f.is_empty()), "{v}");
    assert!(d.join("tessera-demo").is_dir());
}

#[test]
fn tour_mesh_and_fem() {
    let d = scratch("mesh");
    let ok = |a: &[&str]| ok_in(&d, a);
    ok(&[
        "mesh",
        "generate",
        "bracket",
        "--resolution",
        "12",
        "-o",
        "b.msh",
    ]);
    ok(&[
        "mesh", "generate", "box", "--kind", "hex", "--n", "2", "2", "2", "-o", "box.vtu",
    ]);
    let info: serde_json::Value =
        serde_json::from_str(&ok(&["mesh", "info", "b.msh", "--json"])).unwrap();
    assert!(info["cells"].as_u64().unwrap() > 1000, "{info}");
    ok(&["mesh", "info", "box.vtu"]);
    let q: serde_json::Value =
        serde_json::from_str(&ok(&["mesh", "quality", "b.msh", "--json"])).unwrap();
    assert_eq!(q["inverted"], 0, "{q}");
    ok(&["mesh", "convert", "b.msh", "b.vtu"]);
    ok(&["mesh", "convert", "b.vtu", "b.mesh"]);
    ok(&["mesh", "boundary", "b.msh", "-o", "s.obj"]);
    ok(&[
        "mesh",
        "smooth",
        "b.msh",
        "--iterations",
        "2",
        "-o",
        "sm.vtu",
    ]);
    ok(&["mesh", "info", "sm.vtu"]);
    let part: serde_json::Value = serde_json::from_str(&ok(&[
        "mesh",
        "partition",
        "b.msh",
        "--domains",
        "4",
        "--order",
        "2",
        "--json",
    ]))
    .unwrap();
    assert_eq!(
        part["owned_nodes"].as_array().map(Vec::len),
        Some(4),
        "{part}"
    );
    ok(&[
        "mesh",
        "subdivide",
        "box.vtu",
        "--levels",
        "1",
        "-o",
        "sub.vtu",
    ]);
    ok(&["mesh", "info", "sub.vtu"]);
    let a: serde_json::Value = serde_json::from_str(&ok(&[
        "fem",
        "assemble",
        "gen:bracket:12",
        "--order",
        "2",
        "--youngs",
        "200000",
        "--poisson",
        "0.3",
        "--device",
        "cpu",
        "--json",
    ]))
    .unwrap();
    assert!(a.is_object(), "{a}");
    ok(&[
        "fem", "assemble", "sm.vtu", "--order", "1", "--device", "cpu",
    ]);
}

#[test]
fn tour_fem_solve_and_query() {
    let d = scratch("solve");
    let ok = |a: &[&str]| ok_in(&d, a);
    let problem = root().join("examples/bracket-gmsh.toml");
    ok(&[
        "fem",
        "solve",
        problem.to_str().unwrap(),
        "--device",
        "cpu",
        "-o",
        "out",
    ]);
    let vtu = d.join("out/bracket-gmsh.vtu");
    assert!(vtu.is_file());
    ok(&["mesh", "info", "out/bracket-gmsh.vtu"]);
    ok(&[
        "query",
        "eval",
        "sqrt(DisplacementX^2+DisplacementY^2+DisplacementZ^2)",
        "--input",
        "out/bracket-gmsh.vtu",
        "-o",
        "out/magnitude.vtu",
    ]);
    ok(&[
        "query", "bench", "--sizes", "64", "--reps", "3", "--device", "cpu",
    ]);
}

#[test]
fn tour_spmv() {
    let d = scratch("spmv");
    let ok = |a: &[&str]| ok_in(&d, a);
    let src = ok(&[
        "spmv",
        "codegen",
        "--entry",
        "complex",
        "--layout",
        "csr-aos-aos",
    ]);
    assert!(src.contains("__global__"), "{src}");
    ok(&[
        "spmv",
        "verify",
        "gen:tetgrid:4",
        "--entry",
        "block3",
        "--device",
        "cpu",
    ]);
    ok(&["spmv", "memory", "gen:tetgrid:4", "--entry", "block3"]);
    for cmd in ["tune", "bench"] {
        let mut args = vec!["spmv", cmd];
        if cmd == "tune" {
            args.extend(["gen:tetgrid:4", "--entry", "block3"]);
        } else {
            args.push("--quick");
        }
        args.extend(["--device", "cpu"]);
        let o = run_in(&d, &args);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("no CPU path"), "spmv {cmd}: {err}");
    }
}

#[test]
fn tour_flow_serve_stream() {
    let d = scratch("flow");
    let ok = |a: &[&str]| ok_in(&d, a);
    ok(&[
        "flow",
        "run",
        "--scene",
        "cylinder2d",
        "--grid",
        "64x32",
        "--steps",
        "2",
        "--device",
        "cpu",
        "-o",
        "flow",
        "--every",
        "1",
        "--json",
    ]);
    ok(&[
        "flow", "poisson", "--case", "circle", "--n", "16", "--grids", "2", "--json",
    ]);
    ok(&[
        "flow", "strouhal", "--grid", "64x16", "--time", "0.3", "--skip", "0.1", "--device", "cpu",
        "--json",
    ]);
    ok(&[
        "serve",
        "--sim",
        "analytic",
        "--grid",
        "64x64",
        "--device",
        "cpu",
        "--bind",
        "127.0.0.1:0",
        "--seconds",
        "1",
    ]);
    ok(&[
        "serve",
        "--sim",
        "shallow-water",
        "--grid",
        "48x48",
        "--device",
        "cpu",
        "--bind",
        "127.0.0.1:0",
        "--seconds",
        "1",
    ]);
    ok(&[
        "stream",
        "bench",
        "--grid",
        "64x64",
        "--device",
        "cpu",
        "--seconds",
        "0.5",
        "--warmup",
        "0.2",
        "--reps",
        "3",
        "--json",
    ]);
}

#[test]
fn tour_benchmarks() {
    let d = scratch("bench");
    let ok = |a: &[&str]| ok_in(&d, a);
    ok(&[
        "bench",
        "mesh",
        "--resolution",
        "12",
        "--device",
        "cpu",
        "--levels",
        "0",
        "--json",
    ]);
    let rows = ok(&[
        "bench",
        "partition",
        "gen:bracket:12",
        "--domains",
        "2,3",
        "--orders",
        "1,2",
        "--partitioners",
        "metis,rcb",
        "--json",
    ]);
    assert_eq!(rows.lines().count(), 8, "{rows}");
    ok(&[
        "bench",
        "fem",
        "--resolutions",
        "12",
        "--orders",
        "1",
        "--repeat",
        "1",
        "--no-baseline",
        "--device",
        "cpu",
    ]);
    ok(&[
        "bench",
        "fem-solve",
        "--case",
        "gen:bracket:12@1",
        "--device",
        "cpu",
        "--repeat",
        "1",
    ]);
    ok(&[
        "bench",
        "flow",
        "--case",
        "smoke2d@32x32",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--device",
        "cpu",
        "--json",
    ]);
}

#[test]
fn tour_surfaces_and_rendering() {
    let d = scratch("surface");
    let ok = |a: &[&str]| ok_in(&d, a);
    ok(&[
        "mesh",
        "generate",
        "bracket",
        "--resolution",
        "12",
        "-o",
        "b.msh",
    ]);
    ok(&["mesh", "boundary", "b.msh", "-o", "s.obj"]);
    ok(&[
        "mesh",
        "normals",
        "s.obj",
        "-o",
        "n.ply",
        "--weights",
        "area",
    ]);
    ok(&[
        "mesh",
        "laplacian",
        "s.obj",
        "--kind",
        "cotan",
        "-o",
        "L.mtx",
    ]);
    ok(&["mesh", "laplacian", "b.msh", "--kind", "tet", "-o", "T.mtx"]);
    // a plane through the surface's bounding-box centre
    let obj = std::fs::read_to_string(d.join("s.obj")).unwrap();
    let (mut lo, mut hi) = ([f64::MAX; 3], [f64::MIN; 3]);
    for l in obj.lines().filter(|l| l.starts_with("v ")) {
        for (k, x) in l.split_whitespace().skip(1).take(3).enumerate() {
            let x: f64 = x.parse().unwrap();
            lo[k] = lo[k].min(x);
            hi[k] = hi[k].max(x);
        }
    }
    let plane = format!(
        "{},{},{},0,0,1",
        0.5 * (lo[0] + hi[0]),
        0.5 * (lo[1] + hi[1]),
        0.5 * (lo[2] + hi[2])
    );
    ok(&[
        "mesh",
        "slice",
        "s.obj",
        "--plane",
        &plane,
        "-o",
        "sl.obj",
        "--polylines",
        "cut.obj",
    ]);
    ok(&[
        "mesh",
        "subdivide-surface",
        "s.obj",
        "--levels",
        "1",
        "-o",
        "cc.ply",
    ]);
    ok(&["mesh", "reorder", "s.obj", "--rcm", "-o", "r.ply"]);
    // one edge of the first face: either a valid collapse or a refusal naming the edge
    let face = obj.lines().find(|l| l.starts_with("f ")).unwrap();
    let v: Vec<u64> = face
        .split_whitespace()
        .skip(1)
        .take(2)
        .map(|t| t.split('/').next().unwrap().parse::<u64>().unwrap() - 1)
        .collect();
    std::fs::write(d.join("edges.txt"), format!("{} {}\n", v[0], v[1])).unwrap();
    let o = run_in(
        &d,
        &[
            "mesh",
            "collapse",
            "s.obj",
            "--edges",
            "edges.txt",
            "-o",
            "c.obj",
        ],
    );
    assert!(
        o.status.success() || String::from_utf8_lossy(&o.stderr).contains("edge"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    ok(&[
        "bench",
        "meshmatrix",
        "s.obj",
        "--runs",
        "5",
        "--cpu-runs",
        "1",
        "--device",
        "cpu",
    ]);
    ok(&[
        "render", "rixels", "--scene", "sphere", "--size", "64x64", "--device", "cpu", "--out",
        "f.rix", "--json",
    ]);
    ok(&[
        "render", "bench", "--size", "64x64", "--rings", "16", "--runs", "1", "--device", "cpu",
    ]);
    // the shallow-water benchmark needs the GPU: on the CPU it says so in one line
    let o = run_in(
        &d,
        &[
            "bench",
            "shallow-water",
            "--sizes",
            "64",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--device",
            "cpu",
        ],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() || e.lines().count() == 1, "{e}");
}
