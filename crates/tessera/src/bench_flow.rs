//! `tessera bench flow`: time per fluid step and the pressure solve (issue tables in
//! BENCHMARKS.md); the measuring code and the tables live in `tessera_flow::bench`.

use clap::Args;
use tessera_core::DeviceChoice;
use tessera_flow::bench::{self, Case, NOMINAL_BANDWIDTH};

#[derive(Args, Debug)]
pub struct BenchFlowArgs {
    /// auto, cpu, cuda or cuda:N (the pressure-solve table needs a GPU).
    #[arg(long, default_value = "auto")]
    device: DeviceChoice,
    /// Step cases `SCENE@WxH[xD]` (repeatable; default: the resolutions).
    #[arg(long = "case")]
    cases: Vec<String>,
    /// Steps measured per case (after the warm-up).
    #[arg(long, default_value_t = 30)]
    steps: usize,
    /// Warm-up steps per case.
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Smaller cases (no 256^3).
    #[arg(long)]
    quick: bool,
    /// Skip the pressure-solve table.
    #[arg(long)]
    no_solves: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(a: BenchFlowArgs) -> anyhow::Result<()> {
    let backend = crate::device::resolve(a.device)?;
    eprintln!("device: {}", backend.describe());
    let gpu = backend.gpu().cloned();
    let cases: Vec<Case> = if a.cases.is_empty() {
        bench::default_step_cases(gpu.is_some(), a.quick)
    } else {
        a.cases
            .iter()
            .map(|s| {
                let (scene, grid) = s
                    .split_once('@')
                    .ok_or_else(|| anyhow::anyhow!("case `{s}`: expected SCENE@WxH[xD]"))?;
                Ok(Case::new(scene, &tessera_flow::scene::parse_grid(grid)?))
            })
            .collect::<anyhow::Result<_>>()?
    };
    let note = |m: &str| {
        if !a.json {
            eprintln!("{m}");
        }
    };
    let steps = bench::bench_steps(&cases, gpu.clone(), a.warmup, a.steps, note)?;
    let (solves, bandwidth) = match (&gpu, a.no_solves) {
        (Some(g), false) => {
            let bw = bench::copy_bandwidth(g)?;
            let rows =
                bench::bench_solves(&bench::default_solve_cases(a.quick), g.clone(), bw, note)?;
            (rows, bw)
        }
        _ => (Vec::new(), NOMINAL_BANDWIDTH),
    };
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "device": backend.describe(),
                "copy_bandwidth": bandwidth,
                "steps": steps,
                "solves": solves,
            })
        );
    } else {
        bench::print_steps(&steps);
        if !solves.is_empty() {
            bench::print_solves(&solves, bandwidth);
        }
    }
    Ok(())
}
