//! `tessera bench shallow-water`: the flood simulation's step on active 16x16 tiles as cell
//! updates per second, beside the memory-bandwidth floor (dissertation §6.3.5).

use clap::Args;
use tessera_core::DeviceChoice;
use tessera_flow::shallow_water::bench as swb;
use tessera_render::bench::Table;

use crate::device::resolve;

#[derive(Args, Debug)]
pub struct BenchSwArgs {
    /// Grid sides (the dam-break scene, about 10 % of the area wet at the start).
    #[arg(long, value_delimiter = ',', default_value = "1024,4096")]
    sizes: Vec<usize>,
    /// Timed steps per size.
    #[arg(long, default_value_t = 200)]
    steps: usize,
    /// Untimed steps before.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: DeviceChoice,
}

pub fn run(a: BenchSwArgs) -> anyhow::Result<()> {
    let backend = resolve(a.device)?;
    println!("device: {}", backend.describe());
    let mut t = Table::new(
        "Shallow water (Kurganov-Petrova, SSP-RK2, f64 state), dam-break scene on active 16x16 tiles",
        &[
            "grid",
            "wet at start",
            "active tiles",
            "ms / step",
            "active cell updates/s",
            "floor ms",
            "est. GB/s",
            "simulated s",
        ],
    );
    for &n in &a.sizes {
        let r = swb::run(n, a.steps, a.warmup, backend.gpu().cloned())?;
        t.row(vec![
            format!("{n}x{n}"),
            format!("{:.1}%", 100.0 * r.wet_fraction),
            format!("{} / {}", r.active_tiles, r.total_tiles),
            format!("{:.4}", r.ms_per_step),
            format!("{:.3e}", r.cell_updates_per_s),
            format!("{:.4}", r.floor_ms),
            format!("{:.0}", r.achieved_gbs),
            format!("{:.2}", r.simulated_s),
        ]);
    }
    print!("{}", t.render());
    println!(
        "floor: {} B per active cell and step (state read + written once, bathymetry read) at 3.0 TB/s; \
         our traffic estimate {:.0} B per cell (two stages with 2-cell halos, float fields for the stream)",
        swb::MIN_BYTES_PER_CELL,
        swb::OUR_BYTES_PER_CELL
    );
    println!("target: a 4096x4096 step with ~10 % wet area under 0.5 ms");
    Ok(())
}
