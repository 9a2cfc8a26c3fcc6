//! Measuring code of `tessera bench shallow-water`: steps of the dam-break scene on active
//! tiles, as cell updates per second beside the memory-bandwidth floor.

use std::sync::Arc;

use tessera_gpu::Gpu;

use super::{Scene, ShallowWater};
use crate::{FieldData, FlowError, Simulation};

/// Nominal H100 memory bandwidth (read + write) used for the floor.
pub const FLOOR_BANDWIDTH: f64 = 3.0e12;
/// Bytes per active cell and step that any scheme must move: the state (3 doubles) read
/// and written once, the cell's bathymetry read once.
pub const MIN_BYTES_PER_CELL: f64 = 3.0 * 8.0 * 2.0 + 8.0;
/// Bytes per active cell and step this implementation moves (estimate): stage 1 reads the
/// state and bathymetry with a 2-cell halo (x 25/16) and corners, writes `L(U)`; stage 2 reads
/// state, `L(U)` and bathymetry with the halo, writes the state and five float fields.
pub const OUR_BYTES_PER_CELL: f64 =
    (24.0 + 8.0) * 1.5625 + 5.6 + 24.0 + (48.0 + 8.0) * 1.5625 + 5.6 + 24.0 + 24.0 + 20.0;

/// One row of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct SwBench {
    pub n: usize,
    pub device: String,
    pub steps: usize,
    pub wet_fraction: f64,
    pub active_tiles: usize,
    pub total_tiles: usize,
    pub ms_per_step: f64,
    /// Active cells updated per second.
    pub cell_updates_per_s: f64,
    /// `active cells * MIN_BYTES_PER_CELL / FLOOR_BANDWIDTH` per step.
    pub floor_ms: f64,
    /// Our traffic estimate over the step time.
    pub achieved_gbs: f64,
    pub simulated_s: f64,
}

/// Runs the dam-break scene on an `n x n` grid: `warmup` steps, then `steps` timed steps
/// (CUDA events around the launches, no host synchronisation per step).
pub fn run(
    n: usize,
    steps: usize,
    warmup: usize,
    gpu: Option<Arc<Gpu>>,
) -> Result<SwBench, FlowError> {
    let mut sim = ShallowWater::scene(Scene::DamBreak, n, 1)?;
    let wet_fraction = match sim.field("Depth")? {
        FieldData::Host(h) => h.iter().filter(|&&x| x > 0.0).count() as f64 / h.len() as f64,
        FieldData::Device(_) => 0.0,
    };
    let device = match &gpu {
        Some(g) => g.describe(),
        None => format!("cpu ({} threads)", rayon::current_num_threads()),
    };
    if let Some(g) = gpu {
        sim = sim.on_gpu(g)?;
    }
    sim.advance(warmup)?;
    let t0 = sim.time();
    let ms = sim.advance(steps.max(1))?;
    let per = ms / steps.max(1) as f64;
    let active = sim.active_tiles();
    let cells = (active * 256) as f64;
    Ok(SwBench {
        n,
        device,
        steps,
        wet_fraction,
        active_tiles: active,
        total_tiles: sim.total_tiles(),
        ms_per_step: per,
        cell_updates_per_s: cells / (per * 1e-3),
        floor_ms: cells * MIN_BYTES_PER_CELL / FLOOR_BANDWIDTH * 1e3,
        achieved_gbs: cells * OUR_BYTES_PER_CELL / (per * 1e-3) / 1e9,
        simulated_s: sim.time() - t0,
    })
}
