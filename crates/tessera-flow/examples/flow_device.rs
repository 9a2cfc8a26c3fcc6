//! The measurements of `tessera bench flow` and `tessera flow strouhal` on a GPU, from this
//! crate alone (the same library code as the CLI: [`tessera_flow::bench`],
//! [`tessera_flow::strouhal`]), for a device machine that gets a packed binary without the
//! whole command-line program.
//!
//! ```text
//! cargo run --release -p tessera-flow --example flow_device -- bench [--quick]
//! cargo run --release -p tessera-flow --example flow_device -- strouhal 1024x256 30 15
//! ```

use std::sync::Arc;

use tessera_flow::bench;
use tessera_flow::{scene, Fluid};
use tessera_gpu::Gpu;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let gpu = Arc::new(Gpu::probe()?);
    eprintln!("device: {}", gpu.name());
    match args.first().map(String::as_str) {
        Some("bench") => {
            let quick = args.iter().any(|a| a == "--quick");
            let note = |m: &str| eprintln!("{m}");
            let steps = bench::bench_steps(
                &bench::default_step_cases(true, quick),
                Some(gpu.clone()),
                10,
                30,
                note,
            )?;
            bench::print_steps(&steps);
            let bw = bench::copy_bandwidth(&gpu)?;
            let solves =
                bench::bench_solves(&bench::default_solve_cases(quick), gpu.clone(), bw, note)?;
            bench::print_solves(&solves, bw);
        }
        Some("strouhal") => {
            let grid = scene::parse_grid(args.get(1).map_or("1024x256", String::as_str))?;
            let t_end: f64 = args.get(2).map_or(Ok(30.0), |s| s.parse())?;
            let t_start: f64 = args.get(3).map_or(Ok(15.0), |s| s.parse())?;
            let (setup, info) = scene::build("cylinder2d", Some(&grid), None)?;
            let mut fluid = Fluid::new(setup, Some(gpu))?;
            let t0 = std::time::Instant::now();
            let r = tessera_flow::strouhal::measure(&mut fluid, &info, t_start, t_end, |_| {})?;
            println!(
                "cylinder2d {grid:?}: Re = {:.0}, blockage D/H = {:.2}, {} steps to t = {:.2} in {:.1} s; {} periods over t = {:.1}..{:.1}: f = {:.4}, St = {:.4}, transverse amplitude {:.3}",
                r.reynolds,
                r.blockage,
                r.steps,
                r.t_end,
                t0.elapsed().as_secs_f64(),
                r.periods,
                r.t_start,
                r.t_end,
                r.frequency,
                r.strouhal,
                r.amplitude
            );
        }
        _ => {
            eprintln!("usage: flow_device bench [--quick] | strouhal WxH T_END T_START");
            std::process::exit(2);
        }
    }
    Ok(())
}
