//! `tessera fem assemble ... -o K.mtx` read by scipy: the Matrix Market files load with
//! `scipy.io.mmread`, `K` is symmetric, `K @ B ≈ 0` for the rigid-body modes `B` of an
//! unconstrained mesh, and scipy's direct solution of the exported constrained system equals
//! the static solve's to 1e-6 relative. Needs Python with scipy (`TESSERA_PYTHON`, else
//! `python3`); without it the test says so and passes, unless `TESSERA_REQUIRE_SCIPY=1`
//! (CI installs scipy via .ci/run and sets it).

use std::process::Command;

fn tessera() -> Command {
    Command::new(
        std::env::var_os("TESSERA_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tessera").into()),
    )
}

fn python() -> Option<String> {
    let py = std::env::var("TESSERA_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&py)
        .args(["-c", "import scipy.io, scipy.sparse.linalg"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        Some(py)
    } else {
        assert!(
            std::env::var("TESSERA_REQUIRE_SCIPY").as_deref() != Ok("1"),
            "{py} has no scipy but TESSERA_REQUIRE_SCIPY=1"
        );
        eprintln!("skipping the scipy checks: {py} cannot import scipy");
        None
    }
}

const CHECK: &str = r##"
import sys, numpy as np, scipy.io, scipy.sparse as sp, scipy.sparse.linalg as sla
d = sys.argv[1]
K = scipy.io.mmread(d + "/K.mtx").tocsr()
assert scipy.io.mminfo(d + "/K.mtx")[4:6] == ("real", "symmetric"), scipy.io.mminfo(d + "/K.mtx")
B = np.asarray(scipy.io.mmread(d + "/B.mtx"))
b = np.asarray(scipy.io.mmread(d + "/b.mtx")).ravel()
n = K.shape[0]
assert K.shape == (n, n) and B.shape == (n, 6) and b.shape == (n,)
assert abs(K - K.T).max() == 0.0
# the unconstrained K annihilates the rigid-body modes
kb = np.linalg.norm(K @ B) / (sla.norm(K) * np.linalg.norm(B))
print("K@B relative", kb)
assert kb < 1e-12, kb
# the constrained system: eliminate the fixed DOFs
fixed = np.loadtxt(d + "/fixed.txt", comments="#", ndmin=2)
idx = fixed[:, 0].astype(np.int64)
u = np.zeros(n)
u[idx] = fixed[:, 1]
free = np.setdiff1d(np.arange(n), idx)
rhs = b[free] - K[free][:, idx] @ u[idx]
u[free] = sla.spsolve(K[free][:, free].tocsc(), rhs)
np.savetxt(d + "/u_scipy.txt", u, fmt="%.17e")
"##;

#[test]
fn exported_system_reads_in_scipy_and_matches_the_static_solve() {
    let Some(py) = python() else { return };
    let dir = std::env::temp_dir().join(format!("tessera-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // the generated bracket at p = 1 (bolt holes fixed, traction on the load hole)
    let g = tessera_mesh::generate::bracket_geometry(12);
    let h = g.voxel_size;
    let mut text = String::from(
        "order = 1\n[mesh]\ngenerate = { bracket = 12 }\n[material]\npreset = \"Ti-6Al-4V\"\n[solver]\ntolerance = 1e-12\n",
    );
    for c in g.bolt_hole_centres {
        text += &format!(
            "[[fixed]]\nselector = {{ type = \"cylinder\", point = [{:?}, {:?}, 0.0], axis = [0, 0, 1], radius = {:?}, tolerance = {h:?} }}\n",
            c[0], c[1], g.bolt_hole_radius
        );
    }
    let c = g.load_hole_centre;
    text += &format!(
        "[[loads]]\ntype = \"traction\"\nselector = {{ type = \"cylinder\", point = [{:?}, {:?}, {:?}], axis = [0, 1, 0], radius = {:?}, tolerance = {h:?} }}\ntraction = [0.0, 0.0, -20.0]\n",
        c[0], c[1], c[2], g.load_hole_radius
    );
    let problem_path = dir.join("bracket.toml");
    std::fs::write(&problem_path, &text).unwrap();
    let o = tessera()
        .args(["fem", "assemble"])
        .arg(&problem_path)
        .arg("-o")
        .arg(dir.join("K.mtx"))
        .arg("--rhs")
        .arg(dir.join("b.mtx"))
        .arg("--nullspace")
        .arg(dir.join("B.mtx"))
        .arg("--fixed")
        .arg(dir.join("fixed.txt"))
        .arg("--json")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["fixed_dofs"].as_u64().unwrap() > 0, "{j}");
    let o = Command::new(&py)
        .args(["-c", CHECK])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "scipy check failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    println!("{}", String::from_utf8_lossy(&o.stdout));
    let u_scipy: Vec<f64> = std::fs::read_to_string(dir.join("u_scipy.txt"))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    // the static solve of the same problem file (default preconditioner: AMG)
    let problem = tessera_fem::problem::Problem::from_file(&problem_path).unwrap();
    let sol = tessera_fem::static_solve::solve_problem(
        &problem,
        &tessera_fem::static_solve::StaticOptions {
            device: tessera_core::DeviceChoice::Cpu,
            ..Default::default()
        },
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(sol.solver.preconditioner, "amg");
    assert_eq!(u_scipy.len(), sol.u.len());
    let num: f64 = u_scipy
        .iter()
        .zip(&sol.u)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    let den: f64 = u_scipy.iter().map(|a| a * a).sum::<f64>().sqrt();
    println!("scipy vs tessera: relative difference {:.3e}", num / den);
    assert!(num / den <= 1e-6, "relative difference {:e}", num / den);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An output into a folder that does not exist is refused before the assembly, for each of
/// the export's files.
#[test]
fn export_into_a_missing_folder_fails_before_assembling() {
    for flag in ["-o", "--rhs", "--nullspace", "--fixed"] {
        let mut args = vec!["fem", "assemble", "gen:bracket:60"];
        if flag != "-o" {
            args.extend(["-o", "/tmp/tessera-export-ok.mtx"]);
        }
        args.extend([flag, "/nonexistent-tessera-folder/out.mtx"]);
        let t = std::time::Instant::now();
        let o = tessera().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains("does not exist"), "{args:?}: {err}");
        assert!(
            t.elapsed().as_secs_f64() < 1.0,
            "{args:?}: refused only after {:?}",
            t.elapsed()
        );
        assert!(!std::path::Path::new("/tmp/tessera-export-ok.mtx").exists());
    }
}
