//! The SpMV benchmark suite without the full `tessera` program (same code as `tessera spmv
//! bench`): `spmv_bench [--quick] [--full] [--budget-s S] [--precision f32|f64|both]
//! [--matrices DIR] [--runs N] [--no-db]`. Prints Tables 5.1-5.3 and Table 9.

use std::path::PathBuf;

use tessera_spmv::bench::{run_bench, BenchOptions};
use tessera_spmv::gpu::SpmvGpu;
use tessera_spmv::tuning::{Search, TuningDb};
use tessera_spmv::Precision;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let val = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let precisions = match val("--precision").as_deref() {
        Some("f32") => vec![Precision::F32],
        Some("f64") => vec![Precision::F64],
        _ => Precision::ALL.to_vec(),
    };
    let dir = val("--matrices").map(PathBuf::from).or_else(|| {
        [
            "../shared/matrices",
            "shared/matrices",
            ".device/data/matrices",
        ]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_dir())
    });
    let opts = BenchOptions {
        search: if flag("--full") {
            Search::Full
        } else {
            Search::Fast
        },
        runs: val("--runs").and_then(|v| v.parse().ok()).unwrap_or(50),
        warmup: 5,
        memory_weight: 0.0,
        db: if flag("--no-db") {
            None
        } else {
            Some(TuningDb::default_path())
        },
        force: false,
    };
    let budget = val("--budget-s")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1e9);
    let g = match SpmvGpu::new(0) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("spmv_bench: {e}");
            std::process::exit(1);
        }
    };
    let mut out = std::io::stdout().lock();
    if let Err(e) = run_bench(
        &g,
        dir.as_deref(),
        flag("--quick"),
        &precisions,
        &opts,
        budget,
        &mut out,
    ) {
        eprintln!("spmv_bench: {e}");
        std::process::exit(1);
    }
}
