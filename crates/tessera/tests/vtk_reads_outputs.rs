//! Every kind of `.vtu` the CLI writes, read back two ways as a user would: `tessera mesh info`
//! opens it, and VTK's own reader (`vtkXMLUnstructuredGridReader`, what ParaView uses) reads the
//! default appended, zlib-compressed binary encoding with the same counts, arrays, component
//! names and values as Tessera's reader.
//!
//! VTK comes from Python (`TESSERA_VTK_PYTHON`, else `python3` when it imports vtk); `.ci/run`
//! installs it and sets `TESSERA_REQUIRE_VTK`, so in CI a missing VTK fails the test instead of
//! skipping it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tessera_mesh::io::read_vtu_grid;

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

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The repository root: the build-time path, or "." when packed test binaries run elsewhere
/// from the repository root.
fn root() -> PathBuf {
    let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    if p.join("examples").exists() {
        p.to_path_buf()
    } else {
        PathBuf::from(".")
    }
}

fn vtk_python() -> Option<String> {
    if let Some(p) = std::env::var_os("TESSERA_VTK_PYTHON") {
        return Some(p.to_string_lossy().into_owned());
    }
    let ok = Command::new("python3")
        .args(["-c", "import vtk"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    ok.then(|| "python3".to_string())
}

const VTK_SCRIPT: &str = r#"
import sys, vtk
from vtk.util.numpy_support import vtk_to_numpy
for path in sys.argv[1:]:
    r = vtk.vtkXMLUnstructuredGridReader()
    r.SetFileName(path); r.Update()
    if r.GetErrorCode() != 0: sys.exit("%s: vtk error %d" % (path, r.GetErrorCode()))
    g = r.GetOutput()
    print("file", path)
    print("counts", g.GetNumberOfPoints(), g.GetNumberOfCells())
    for loc, d in (("point", g.GetPointData()), ("cell", g.GetCellData()), ("field", g.GetFieldData())):
        for i in range(d.GetNumberOfArrays()):
            a = d.GetAbstractArray(i)
            v = vtk_to_numpy(a).ravel()
            names = ",".join(a.GetComponentName(k) or "" for k in range(a.GetNumberOfComponents()))
            print("array", loc, a.GetName(), a.GetNumberOfComponents(), a.GetNumberOfTuples(), repr(float(abs(v).sum())), names)
"#;

#[test]
fn every_vtu_the_cli_writes_opens_in_tessera_and_in_vtk() {
    let d = std::env::temp_dir().join(format!("tessera-vtk-outputs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let root = root();
    let bracket = root.join("examples/bracket-7.9k.msh.gz");
    let mut files: Vec<PathBuf> = Vec::new();

    // fem solve: order-2 Lagrange tetrahedra, nodal and cell results, named tensor components
    let toml = d.join("beam.toml");
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
"#,
    )
    .unwrap();
    let out = d.join("out");
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
    files.push(out.join("beam.vtu"));
    // query eval: the result file with a derived field added
    let derived = d.join("derived.vtu");
    ok(&[
        "query",
        "eval",
        "sqrt(DisplacementX^2+DisplacementY^2+DisplacementZ^2)",
        "--input",
        s(&out.join("beam.vtu")),
        "-o",
        s(&derived),
        "--name",
        "Magnitude",
    ]);
    files.push(derived);
    // mesh convert / smooth / subdivide: meshes with their physical groups
    let converted = d.join("bracket.vtu");
    ok(&["mesh", "convert", s(&bracket), s(&converted)]);
    files.push(converted.clone());
    let smoothed = d.join("smoothed.vtu");
    ok(&[
        "mesh",
        "smooth",
        s(&converted),
        "--iterations",
        "2",
        "-o",
        s(&smoothed),
    ]);
    files.push(smoothed);
    // generated mixed cells (tets, hexes, wedges, pyramids), then Catmull-Clark hexes
    let boxed = d.join("box.vtu");
    ok(&[
        "mesh",
        "generate",
        "box",
        "--kind",
        "mixed",
        "--n",
        "3",
        "2",
        "2",
        "-o",
        s(&boxed),
    ]);
    files.push(boxed.clone());
    let sub = d.join("subdivided.vtu");
    ok(&[
        "mesh",
        "subdivide",
        s(&boxed),
        "--levels",
        "1",
        "-o",
        s(&sub),
    ]);
    files.push(sub);

    // 1. Tessera opens every one of them
    for f in &files {
        let j: serde_json::Value =
            serde_json::from_str(&ok(&["mesh", "info", s(f), "--json"])).unwrap();
        assert!(
            j.get("vertices").is_some() || j.get("num_vertices").is_some(),
            "{}: {j}",
            f.display()
        );
    }

    // 2. VTK reads the same counts, arrays and values
    let Some(py) = vtk_python() else {
        if std::env::var_os("TESSERA_REQUIRE_VTK").is_some() {
            panic!("TESSERA_REQUIRE_VTK is set but no Python with vtk was found");
        }
        eprintln!("skipped the VTK half: no Python with vtk (set TESSERA_VTK_PYTHON)");
        return;
    };
    let o = Command::new(&py)
        .args(["-c", VTK_SCRIPT])
        .args(&files)
        .output()
        .expect("run python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let all = String::from_utf8_lossy(&o.stdout).into_owned();
    for f in &files {
        let head = format!("file {}\n", f.display());
        let start = all
            .find(&head)
            .unwrap_or_else(|| panic!("VTK did not read {}", f.display()))
            + head.len();
        let end = all[start..]
            .find("file ")
            .map(|i| start + i)
            .unwrap_or(all.len());
        let text = &all[start..end];
        let g = read_vtu_grid(f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            text.contains(&format!("counts {} {}\n", g.num_points(), g.num_cells())),
            "{name}: {text}"
        );
        let mut ours = 0;
        for (loc, arrays) in [
            ("point", &g.point_data),
            ("cell", &g.cell_data),
            ("field", &g.field_data),
        ] {
            for a in arrays {
                ours += 1;
                let line = text
                    .lines()
                    .find(|l| l.starts_with(&format!("array {loc} {} ", a.name)))
                    .unwrap_or_else(|| panic!("{name}: VTK lacks {loc} array {}: {text}", a.name));
                let parts: Vec<&str> = line.split(' ').collect();
                let k = parts.len();
                assert_eq!(parts[k - 4], a.components.to_string(), "{name}: {line}");
                assert_eq!(parts[k - 3], a.len().to_string(), "{name}: {line}");
                let sum: f64 = parts[k - 2].parse().unwrap();
                let want: f64 = a.values.iter().map(|v| v.abs()).sum();
                // f32 arrays are summed in f64 on both sides: equal up to rounding
                assert!(
                    (sum - want).abs() <= 1e-9 * want.abs().max(1.0),
                    "{name}: {line}: sum {sum} vs {want}"
                );
                if !a.component_names.is_empty() {
                    assert_eq!(parts[k - 1], a.component_names.join(","), "{name}: {line}");
                }
            }
        }
        let theirs = text.lines().filter(|l| l.starts_with("array ")).count();
        assert_eq!(theirs, ours, "{name}: VTK sees other arrays: {text}");
    }
    // the result file has what ParaView users look for
    let beam = read_vtu_grid(&out.join("beam.vtu")).unwrap();
    let names: Vec<&str> = beam.point_data.iter().map(|a| a.name.as_str()).collect();
    for want in ["Displacement", "Stress", "VonMises"] {
        assert!(
            names.iter().any(|n| n.starts_with(want)),
            "beam.vtu point data {names:?} lacks {want}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}
