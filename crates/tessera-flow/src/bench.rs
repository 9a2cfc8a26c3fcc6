//! `tessera bench flow`: the fluid back-end's time per step and its pressure solver against
//! the anchors of the issue and the hardware floor.
//!
//! - **Steps**: for each scene and grid, the median wall time of a full step (advection,
//!   viscosity/forces, projection by MGPCG to 1e-5 relative residual from the previous
//!   pressure, output fields; host synchronisations included), split into stages (CUDA
//!   events on the GPU), the mean MGPCG iterations, and the pressure solve's throughput.
//! - **Pressure solve** (GPU): on the divergence left by one advection step from rest, from a
//!   zero initial guess: the stand-alone V-cycle's mean residual reduction per cycle (to
//!   1e-5, and to 1e-3 where f32 rounding does not yet limit the true residual), MGPCG
//!   iterations and factor to reduce the residual by 1e-5, the solve's time and cells per
//!   second, and the time of one V-cycle next to its floor (the bytes it must move,
//!   [`crate::cuda::vcycle_bytes`], over the measured device-to-device copy bandwidth).
//!
//! Anchors: a step of 2D 1024^2 in under 2 ms (100+ frames/s for the streaming server); a
//! 256^3 pressure solve at >= 500M cells/s; the best published GPU cut-cell pressure solve,
//! Wang et al. 2026 (octree multigrid), at about 70M cells/s on an RTX 4090.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tessera_gpu::Gpu;

use crate::poisson::Method;
use crate::{scene, FlowError, Fluid, Simulation};

/// Nominal H100 copy bandwidth (bytes read + written per second) used when no GPU measures one.
pub const NOMINAL_BANDWIDTH: f64 = 3.0e12;
/// Anchor: Wang et al. 2026, cut-cell pressure solve on an RTX 4090 (cells per second).
pub const ANCHOR_WANG_CELLS_PER_S: f64 = 70e6;
/// Target of the issue for a 256^3 solve (cells per second).
pub const TARGET_3D_CELLS_PER_S: f64 = 500e6;
/// Target of the issue for a 2D 1024^2 step (ms).
pub const TARGET_2D_STEP_MS: f64 = 2.0;

/// One scene at one resolution.
#[derive(Clone, Debug)]
pub struct Case {
    pub scene: String,
    pub grid: Vec<usize>,
}

impl Case {
    pub fn new(scene: &str, grid: &[usize]) -> Self {
        Case {
            scene: scene.to_string(),
            grid: grid.to_vec(),
        }
    }
    fn label(&self) -> String {
        format!(
            "{} {}",
            self.scene,
            self.grid
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join("x")
        )
    }
}

/// The default step cases on a GPU and on the CPU.
pub fn default_step_cases(gpu: bool, quick: bool) -> Vec<Case> {
    if !gpu {
        return vec![
            Case::new("smoke2d", &[512, 512]),
            Case::new("cylinder2d", &[512, 512]),
        ];
    }
    let mut v = vec![
        Case::new("smoke2d", &[256, 256]),
        Case::new("smoke2d", &[512, 512]),
        Case::new("smoke2d", &[1024, 1024]),
        Case::new("cylinder2d", &[1024, 1024]),
        Case::new("sphere3d", &[128, 64, 64]),
    ];
    if !quick {
        v.push(Case::new("sphere3d", &[256, 128, 128]));
    }
    v
}

/// The default pressure-solve cases (circle and sphere obstacles, growing grids).
pub fn default_solve_cases(quick: bool) -> Vec<Case> {
    let mut v: Vec<Case> = [64usize, 128, 256, 512, 1024]
        .iter()
        .map(|&n| Case::new("cylinder2d", &[n, n]))
        .collect();
    let top = if quick { 128 } else { 256 };
    for n in [32usize, 64, 128, 256] {
        if n <= top {
            v.push(Case::new("sphere3d", &[n, n, n]));
        }
    }
    v
}

/// One row of the step table.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StepRow {
    pub case: String,
    pub device: String,
    pub cells: usize,
    pub levels: usize,
    pub steps: usize,
    /// Median wall time of a whole step.
    pub step_ms: f64,
    pub advect_ms: f64,
    pub project_ms: f64,
    pub other_ms: f64,
    /// Mean MGPCG iterations (one V-cycle each) per step.
    pub cycles: f64,
    /// Worst final relative residual over the measured steps.
    pub max_residual: f64,
    /// Cells per second of the projection (cells / median projection time).
    pub solve_cells_per_s: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    tessera_gpu::median(&mut v)
}

/// Time `steps` steps of each case after `warmup` steps.
pub fn bench_steps(
    cases: &[Case],
    gpu: Option<Arc<Gpu>>,
    warmup: usize,
    steps: usize,
    mut note: impl FnMut(&str),
) -> Result<Vec<StepRow>, FlowError> {
    let mut rows = Vec::new();
    for c in cases {
        note(&format!("steps: {}", c.label()));
        let (setup, _) = scene::build(&c.scene, Some(&c.grid), None)?;
        let mut f = Fluid::new(setup, gpu.clone())?;
        for _ in 0..warmup {
            f.step()?;
        }
        let mut wall = Vec::new();
        let (mut adv, mut proj, mut other) = (Vec::new(), Vec::new(), Vec::new());
        let mut cycles = 0usize;
        let mut worst = 0.0f64;
        for _ in 0..steps.max(1) {
            let r = f.step()?;
            let st = f.last_stats();
            wall.push(r.wall_ms);
            adv.push(st.advect_ms);
            proj.push(st.project_ms);
            other.push(st.other_ms);
            cycles += st.solve.iterations;
            worst = worst.max(st.solve.relative_residual());
        }
        let cells = f.grid().num_cells();
        let pm = median(proj.clone());
        rows.push(StepRow {
            case: c.label(),
            device: match &gpu {
                Some(g) => g.name().to_string(),
                None => format!("cpu, {} threads", rayon::current_num_threads()),
            },
            cells,
            levels: f.levels(),
            steps: wall.len(),
            step_ms: median(wall),
            advect_ms: median(adv),
            project_ms: pm,
            other_ms: median(other),
            cycles: cycles as f64 / steps.max(1) as f64,
            max_residual: worst,
            solve_cells_per_s: cells as f64 / (pm * 1e-3),
        });
    }
    Ok(rows)
}

/// One row of the pressure-solve table.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SolveRow {
    pub case: String,
    pub cells: usize,
    pub levels: usize,
    /// Stand-alone V-cycles to reduce the residual by 1e-5, and their mean factor.
    pub vcycles: usize,
    pub vcycle_factor: f64,
    /// Mean factor of the stand-alone V-cycles until the residual first drops by 1e-3: the
    /// cycle's rate before f32 rounding floors the true residual (near 3e-5 relative on the
    /// largest grids, where the 1e-5 target is then not reached and `vcycle_factor` measures
    /// the stall, not the cycle).
    pub vcycle_factor_1e3: f64,
    /// MGPCG iterations to reduce the residual by 1e-5, and their mean factor.
    pub pcg_iterations: usize,
    pub pcg_factor: f64,
    /// Median wall time of the MGPCG solve (host synchronisation included).
    pub solve_ms: f64,
    pub cells_per_s: f64,
    /// One V-cycle: measured, floor (bytes / bandwidth), and their ratio.
    pub vcycle_ms: f64,
    pub vcycle_bytes: f64,
    pub floor_ms: f64,
    pub floor_ratio: f64,
}

/// Device-to-device copy bandwidth (bytes read + written per second) of `gpu`.
pub fn copy_bandwidth(gpu: &Gpu) -> Result<f64, FlowError> {
    let n = 1usize << 28; // 1 GiB of f32
    let a = gpu.zeros::<f32>(n)?;
    let mut b = gpu.zeros::<f32>(n)?;
    gpu.copy_device(&a, &mut b)?;
    let ms = gpu.median_ms(5, 1, || gpu.copy_device(&a, &mut b))?;
    Ok(2.0 * 4.0 * n as f64 / (ms * 1e-3))
}

/// Measure the pressure solve of each case on `gpu` (`bandwidth`: bytes per second of the
/// floor).
pub fn bench_solves(
    cases: &[Case],
    gpu: Arc<Gpu>,
    bandwidth: f64,
    mut note: impl FnMut(&str),
) -> Result<Vec<SolveRow>, FlowError> {
    let mut rows = Vec::new();
    for c in cases {
        note(&format!("pressure solve: {}", c.label()));
        let (mut setup, _) = scene::build(&c.scene, Some(&c.grid), None)?;
        setup.params.multigrid.tolerance = 1e-5;
        setup.params.multigrid.max_iterations = 40;
        let mut f = Fluid::new(setup, Some(gpu.clone()))?;
        let dt = f.next_dt();
        f.advect(dt)?;
        f.forces(dt)?;
        let cells = f.grid().num_cells();
        let levels = f.levels();
        let g = f.gpu_state_mut().expect("a GPU fluid");
        // stand-alone V-cycles
        g.pressure_problem()?;
        g.mg.params.method = Method::VCycle;
        g.mg.needed = 1;
        let rv = g.solve_pressure()?;
        let hit = |r: &crate::poisson::SolveReport| {
            let tol = r.rhs_norm * 1e-5;
            r.residuals.iter().position(|&x| x <= tol)
        };
        let vk = hit(&rv).unwrap_or(rv.iterations);
        let mean_factor = |r: &crate::poisson::SolveReport, k: usize| {
            if k > 0 && r.residuals[0] > 0.0 {
                (r.residuals[k] / r.residuals[0]).powf(1.0 / k as f64)
            } else {
                0.0
            }
        };
        let vf = mean_factor(&rv, vk);
        let vk3 = rv
            .residuals
            .iter()
            .position(|&x| x <= 1e-3 * rv.residuals[0])
            .unwrap_or(rv.iterations);
        let vf3 = mean_factor(&rv, vk3);
        // MGPCG: learn the count, then time with that batch (one synchronisation)
        g.mg.params.method = Method::Mgpcg;
        g.pressure_problem()?;
        g.mg.needed = 1;
        let rp = g.solve_pressure()?;
        let pk = hit(&rp).unwrap_or(rp.iterations);
        let pf = mean_factor(&rp, pk);
        let mut times = Vec::new();
        for _ in 0..5 {
            g.pressure_problem()?;
            g.mg.needed = pk.max(1);
            gpu.synchronize()?;
            let t0 = Instant::now();
            g.solve_pressure()?;
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        let solve_ms = median(times);
        let vcycle_ms = g.time_vcycles(10, 5)?;
        let bytes = g.mg.vcycle_bytes;
        let floor_ms = bytes / bandwidth * 1e3;
        rows.push(SolveRow {
            case: c.label(),
            cells,
            levels,
            vcycles: vk,
            vcycle_factor: vf,
            vcycle_factor_1e3: vf3,
            pcg_iterations: pk,
            pcg_factor: pf,
            solve_ms,
            cells_per_s: cells as f64 / (solve_ms * 1e-3),
            vcycle_ms,
            vcycle_bytes: bytes,
            floor_ms,
            floor_ratio: vcycle_ms / floor_ms,
        });
    }
    Ok(rows)
}

/// Print the step table.
pub fn print_steps(rows: &[StepRow]) {
    println!(
        "Fluid step (advection + forces + projection to 1e-5 relative residual + output fields); target: 2D 1024^2 < {TARGET_2D_STEP_MS} ms on the H100, CPU 512^2 < 100 ms on 2 threads"
    );
    println!(
        "{:<26} {:>10} {:>6} {:>9} {:>8} {:>8} {:>8} {:>7} {:>9} {:>10}",
        "case",
        "cells",
        "levels",
        "step ms",
        "advect",
        "project",
        "other",
        "cycles",
        "residual",
        "Mcells/s"
    );
    for r in rows {
        println!(
            "{:<26} {:>10} {:>6} {:>9.3} {:>8.3} {:>8.3} {:>8.3} {:>7.2} {:>9.1e} {:>10.0}",
            r.case,
            r.cells,
            r.levels,
            r.step_ms,
            r.advect_ms,
            r.project_ms,
            r.other_ms,
            r.cycles,
            r.max_residual,
            r.solve_cells_per_s / 1e6
        );
    }
    if let Some(r) = rows.first() {
        println!("device: {}", r.device);
    }
}

/// Print the pressure-solve table.
pub fn print_solves(rows: &[SolveRow], bandwidth: f64) {
    println!();
    println!(
        "Pressure solve from zero to 1e-5 relative residual (f32, GPU); anchors: Wang et al. 2026 {:.0}M cells/s (RTX 4090), target >= {:.0}M cells/s at 256^3; V-cycle floor = bytes / {:.2} TB/s (measured copy)",
        ANCHOR_WANG_CELLS_PER_S / 1e6,
        TARGET_3D_CELLS_PER_S / 1e6,
        bandwidth / 1e12
    );
    println!(
        "{:<26} {:>10} {:>6} {:>4} {:>7} {:>7} {:>4} {:>7} {:>9} {:>9} {:>9} {:>9} {:>6}",
        "case",
        "cells",
        "levels",
        "V",
        "factor",
        "to 1e-3",
        "PCG",
        "factor",
        "solve ms",
        "Mcells/s",
        "V ms",
        "floor ms",
        "x floor"
    );
    for r in rows {
        println!(
            "{:<26} {:>10} {:>6} {:>4} {:>7.3} {:>7.3} {:>4} {:>7.3} {:>9.3} {:>9.0} {:>9.3} {:>9.3} {:>6.2}",
            r.case,
            r.cells,
            r.levels,
            r.vcycles,
            r.vcycle_factor,
            r.vcycle_factor_1e3,
            r.pcg_iterations,
            r.pcg_factor,
            r.solve_ms,
            r.cells_per_s / 1e6,
            r.vcycle_ms,
            r.floor_ms,
            r.floor_ratio
        );
    }
}
