//! Physical groups survive `tessera mesh convert`: the shared Gmsh bracket converted between
//! every pair of formats that hold groups keeps its groups (dimension, tag, name, count), its
//! cell count and orientation (no inverted cells), and the converted file solves through its
//! group names to the same displacement as the original.

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
        "tessera {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn bracket() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/bracket-7.9k.msh.gz")
}

/// (dim, tag, name, count) of every group, and the cell count.
fn groups(file: &Path) -> (Vec<(i64, i64, String, i64)>, i64) {
    let v: serde_json::Value =
        serde_json::from_str(&ok(&["mesh", "info", s(file), "--json"])).expect("mesh info --json");
    let g = v["groups"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|g| {
            (
                g["dim"].as_i64().unwrap(),
                g["tag"].as_i64().unwrap(),
                g["name"].as_str().unwrap_or("").to_string(),
                g["entities"].as_i64().unwrap(),
            )
        })
        .collect();
    (g, v["cells"].as_i64().unwrap())
}

/// The largest displacement of a p = 1 solve with `bolt_holes` fixed and a load on
/// `load_hole`.
fn solve(mesh: &Path, dir: &Path, name: &str) -> f64 {
    let toml = dir.join(format!("{name}.toml"));
    std::fs::write(
        &toml,
        format!(
            "title = \"{name}\"\norder = 1\n[mesh]\nfile = {:?}\n[material]\npreset = \"Ti-6Al-4V\"\n\
             [[fixed]]\nselector = {{ type = \"group\", name = \"bolt_holes\" }}\n\
             [[loads]]\ntype = \"traction\"\nselector = {{ type = \"group\", name = \"load_hole\" }}\n\
             traction = [0.0, 0.0, -20.0]\n[solver]\nmethod = \"cholesky\"\n",
            s(mesh)
        ),
    )
    .unwrap();
    let out = dir.join(format!("out-{name}"));
    let j: serde_json::Value = serde_json::from_str(&ok(&[
        "fem",
        "solve",
        s(&toml),
        "-o",
        s(&out),
        "--device",
        "cpu",
        "--json",
    ]))
    .unwrap();
    j["max_displacement"].as_f64().unwrap()
}

#[test]
fn convert_keeps_the_brackets_groups_and_solves_the_same() {
    let d = std::env::temp_dir().join(format!("tessera-groups-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let src = bracket();
    let (want, cells) = groups(&src);
    assert_eq!(want.len(), 3, "{want:?}");
    let u0 = solve(&src, &d, "original");
    assert!(u0 > 0.0);
    // every pair of the formats that hold named groups (msh -> msh included)
    let exts = ["msh", "vtu", "msh.gz"];
    for a in exts {
        let first = d.join(format!("first.{a}"));
        ok(&["mesh", "convert", s(&src), s(&first)]);
        for b in exts {
            let second = d.join(format!("from-{}.{b}", a.replace('.', "-")));
            let o = tessera(&["mesh", "convert", s(&first), s(&second)]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert!(
                !String::from_utf8_lossy(&o.stderr).contains("not written"),
                "{a} -> {b} dropped groups: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let (got, n) = groups(&second);
            assert_eq!(n, cells, "{a} -> {b}: cells");
            assert_eq!(got, want, "{a} -> {b}: groups");
            let q: serde_json::Value =
                serde_json::from_str(&ok(&["mesh", "quality", s(&second), "--json"])).unwrap();
            assert_eq!(q["inverted"], 0, "{a} -> {b}: orientation");
        }
        let u = solve(&first, &d, &format!("via-{}", a.replace('.', "-")));
        assert!(
            ((u - u0) / u0).abs() < 1e-9,
            "{a}: max displacement {u} vs the original's {u0}"
        );
    }
}
