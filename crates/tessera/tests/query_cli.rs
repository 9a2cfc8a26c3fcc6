//! `tessera query eval` as a user runs it: over the fields of a `fem solve` result file
//! (the dissertation's identifiers `DisplacementX`, `StressXX`, `VonMises`, §6.3.4), over
//! typed `.npy` files, and over raw files only when their precision is stated.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tessera_mesh::io::{read_vtu_grid, DataLocation};

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

fn fails(args: &[&str]) -> String {
    let o = tessera(args);
    assert!(!o.status.success(), "tessera {args:?} should fail");
    String::from_utf8(o.stderr).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-query-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A small static solve (a cantilever of 2 x 1 x 1 boxes, p = 2) into `dir`.
fn solve(dir: &Path) -> PathBuf {
    let toml = dir.join("beam.toml");
    std::fs::write(
        &toml,
        r#"title = "beam"
order = 2
[mesh]
generate = { box = { cells = [4, 1, 1], size = [4.0, 1.0, 1.0] } }
[material]
youngs = 1000.0
poisson = 0.3
[[fixed]]
selector = { type = "plane", point = [0, 0, 0], normal = [1, 0, 0], tolerance = 1e-6 }
[[loads]]
type = "traction"
selector = { type = "plane", point = [4, 0, 0], normal = [1, 0, 0], tolerance = 1e-6 }
traction = [0.0, 0.0, -1.0]
[solver]
method = "cholesky"
"#,
    )
    .unwrap();
    let out = dir.join("out");
    ok(&[
        "fem",
        "solve",
        s(&toml),
        "-o",
        s(&out),
        "--device",
        "cpu",
        "--json",
    ]);
    out.join("beam.vtu")
}

#[test]
fn magnitude_of_the_displacement_of_a_fem_result() {
    let d = scratch("fem");
    let vtu = solve(&d);
    let derived = d.join("derived.vtu");
    ok(&[
        "query",
        "eval",
        "sqrt(DisplacementX^2+DisplacementY^2+DisplacementZ^2)",
        "--input",
        s(&vtu),
        "-o",
        s(&derived),
        "--name",
        "Magnitude",
    ]);
    let g = read_vtu_grid(&derived).unwrap();
    let got = &g.array(DataLocation::Point, "Magnitude").unwrap().values;
    let want = &g
        .array(DataLocation::Point, "DisplacementMagnitude")
        .unwrap()
        .values;
    assert_eq!(got.len(), g.num_points());
    let max = want.iter().fold(0.0f64, |m, &x| m.max(x));
    assert!(max > 0.0);
    for (a, b) in got.iter().zip(want) {
        assert!((a - b).abs() <= 1e-12 * max, "{a} vs {b}");
    }
    // the result sits next to the arrays that were there
    let orig = read_vtu_grid(&vtu).unwrap();
    for a in &orig.point_data {
        assert_eq!(g.array(DataLocation::Point, &a.name), Some(a), "{}", a.name);
    }
    assert_eq!(g.connectivity, orig.connectivity);
    // the derived file is a mesh file like any other
    ok(&["mesh", "info", s(&derived)]);

    // cell data; .npy output with its type; the f32 path agrees to f32 rounding
    let npy = d.join("vm.npy");
    ok(&[
        "query",
        "eval",
        "CellVonMises*2",
        "-i",
        s(&vtu),
        "-o",
        s(&npy),
    ]);
    let a = tessera_query::npy::read_npy(&npy).unwrap();
    assert_eq!(a.ty, tessera_query::npy::NpyType::F64);
    let cvm = &orig
        .array(DataLocation::Cell, "CellVonMises")
        .unwrap()
        .values;
    assert_eq!(a.values, cvm.iter().map(|x| x * 2.0).collect::<Vec<_>>());
    ok(&[
        "query",
        "eval",
        "StressXX+StressYY+StressZZ",
        "-i",
        s(&vtu),
        "-o",
        s(&npy),
        "--precision",
        "f32",
    ]);
    let a = tessera_query::npy::read_npy(&npy).unwrap();
    assert_eq!(a.ty, tessera_query::npy::NpyType::F32);
    assert_eq!(a.values.len(), orig.num_points());

    // mistakes: point and cell data mixed, unknown names (listing the available ones)
    let e = fails(&[
        "query",
        "eval",
        "VonMises+CellVonMises",
        "-i",
        s(&vtu),
        "-o",
        s(&npy),
    ]);
    assert!(e.contains("mixes point data"), "{e}");
    let e = fails(&[
        "query",
        "eval",
        "Displacement_X",
        "-i",
        s(&vtu),
        "-o",
        s(&npy),
    ]);
    assert!(
        e.contains("unknown field") && e.contains("DisplacementX"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn npy_fields_are_typed_and_raw_fields_need_a_precision() {
    let d = scratch("npy");
    let vx = d.join("vx.npy");
    let vy = d.join("vy.npy");
    std::fs::write(
        &vx,
        tessera_query::npy::npy_bytes(&[3.0, 0.0, 1.5], tessera_query::npy::NpyType::F64),
    )
    .unwrap();
    std::fs::write(
        &vy,
        tessera_query::npy::npy_bytes(&[4.0, 2.0, 2.0], tessera_query::npy::NpyType::F32),
    )
    .unwrap();
    let out = d.join("speed.npy");
    ok(&[
        "query",
        "eval",
        "sqrt(VelocityX^2+VelocityY^2)",
        "--field",
        &format!("VelocityX={}", s(&vx)),
        "--field",
        &format!("VelocityY={}", s(&vy)),
        "-o",
        s(&out),
    ]);
    let a = tessera_query::npy::read_npy(&out).unwrap();
    assert_eq!(a.values, vec![5.0, 2.0, 2.5]);

    // a raw f64 file: refused without --precision, read right with it, and the size check
    // catches a raw f64 file read as ... an odd number of f32 values
    let raw = d.join("vx.bin");
    let bytes: Vec<u8> = [3.0f64, 0.0, 1.5]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(&raw, &bytes).unwrap();
    let field = format!("V={}", s(&raw));
    let e = fails(&["query", "eval", "V*2", "--field", &field, "-o", s(&out)]);
    assert!(
        e.contains("has no type") && e.contains("--precision"),
        "{e}"
    );
    ok(&[
        "query",
        "eval",
        "V*2",
        "--field",
        &field,
        "-o",
        s(&out),
        "--precision",
        "f64",
    ]);
    assert_eq!(
        tessera_query::npy::read_npy(&out).unwrap().values,
        vec![6.0, 0.0, 3.0]
    );
    std::fs::write(&raw, &bytes[..20]).unwrap();
    let e = fails(&[
        "query",
        "eval",
        "V*2",
        "--field",
        &field,
        "-o",
        s(&out),
        "--precision",
        "f64",
    ]);
    assert!(
        e.contains("not a whole number of 8-byte (f64) values"),
        "{e}"
    );
    // a truncated .npy names the byte counts
    let full = std::fs::read(&vx).unwrap();
    std::fs::write(&vx, &full[..full.len() - 4]).unwrap();
    let e = fails(&[
        "query",
        "eval",
        "V",
        "--field",
        &format!("V={}", s(&vx)),
        "-o",
        s(&out),
    ]);
    assert!(e.contains("3 <f8 values (24 bytes)"), "{e}");
    // outputs are checked before any work: a .vtu needs an --input, folders must exist
    let e = fails(&["query", "eval", "1", "-o", s(&d.join("x.vtu"))]);
    assert!(e.contains("--input"), "{e}");
    let e = fails(&["query", "eval", "1", "-o", "/nonexistent/dir/x.npy"]);
    assert!(e.contains("does not exist"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}
