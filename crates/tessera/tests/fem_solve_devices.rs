//! `tessera fem solve --devices` (the domain-decomposed solve on GPUs): clear errors for
//! device lists that cannot run, and, with a GPU, the same displacement as the CPU run.

use std::process::Command;

fn tessera() -> Command {
    Command::new(
        std::env::var_os("TESSERA_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tessera").into()),
    )
}

fn root() -> &'static str {
    if std::path::Path::new(env!("CARGO_MANIFEST_DIR")).exists() {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
    } else {
        "."
    }
}

fn solve(args: &[&str], tag: &str) -> std::process::Output {
    let out = std::env::temp_dir().join(format!("tessera-devices-{tag}-{}", std::process::id()));
    let o = tessera()
        .args([
            "fem",
            "solve",
            &format!("{}/examples/cantilever.toml", root()),
        ])
        .args(args)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&out);
    o
}

#[test]
fn device_lists_that_cannot_run_are_clear_errors() {
    let o = solve(&["--devices", "cuda:0,cuda:0", "--json"], "dup");
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("cuda:0 is listed twice"), "{e}");
    let o = solve(&["--devices", "cpu", "--json"], "cpu");
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--devices takes CUDA devices"), "{e}");
    // more devices than there are (none here without a driver; cuda:63 on a GPU machine)
    let o = solve(&["--devices", "cuda:63", "--json"], "many");
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("no CUDA device is usable")
            || e.contains("cuda:63 does not exist; this machine has"),
        "{e}"
    );
}

/// Four domains on one GPU give the displacement of the CPU run (the cantilever, block
/// Jacobi) to the solver tolerance, and report placement and bytes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn devices_solve_matches_cpu() {
    if tessera_gpu::Gpu::probe().is_err() {
        eprintln!("skipped: no usable CUDA GPU");
        return;
    }
    let cpu = solve(&["--device", "cpu", "--json"], "ref");
    assert!(
        cpu.status.success(),
        "{}",
        String::from_utf8_lossy(&cpu.stderr)
    );
    let o = solve(&["--devices", "cuda:0", "--domains", "4", "--json"], "gpu");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let a: serde_json::Value = serde_json::from_slice(&cpu.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (da, db) = (
        a["max_displacement"].as_f64().unwrap(),
        b["max_displacement"].as_f64().unwrap(),
    );
    assert!((da - db).abs() <= 1e-6 * da.abs(), "{da} vs {db}");
    let dev = &b["domains"]["device"];
    assert_eq!(dev["placement"].as_array().unwrap().len(), 4, "{b}");
    assert!(dev["halo_bytes_per_iteration"].as_u64().unwrap() > 0);
    assert_eq!(dev["remote_bytes_per_iteration"].as_u64().unwrap(), 0);
}
