//! Running a fluid for a number of steps with snapshots (`tessera flow run`): the loop, the
//! `.vti` series and its `.pvd` index, and one record per step for the caller to print.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::vtk::{write_pvd, write_vti};
use crate::{FieldData, FlowError, Fluid, Simulation};

/// What a run does besides stepping.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Steps to take.
    pub steps: usize,
    /// Output folder for `.vti` snapshots (none: no files).
    pub out: Option<PathBuf>,
    /// Write a snapshot every this many steps (and of the initial state); `None` with an
    /// output folder writes the final state only.
    pub every: Option<usize>,
}

/// One step's record.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StepLine {
    pub step: u64,
    pub time: f64,
    pub dt: f64,
    pub wall_ms: f64,
    pub advect_ms: f64,
    pub project_ms: f64,
    pub other_ms: f64,
    /// MGPCG iterations (one V-cycle each).
    pub cycles: usize,
    /// Final relative residual `|r| / |b|`.
    pub residual: f64,
    /// Mean residual reduction per cycle.
    pub factor: f64,
    /// Snapshot written after this step, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

/// Totals of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunSummary {
    pub scene: String,
    pub grid: Vec<usize>,
    pub device: String,
    pub steps: u64,
    pub time: f64,
    pub mean_step_ms: f64,
    pub mean_cycles: f64,
    pub max_residual: f64,
    pub snapshots: Vec<String>,
}

/// The current values of field `name` in host memory (downloaded from a GPU fluid).
pub fn host_field(sim: &dyn Simulation, name: &str) -> Result<Vec<f32>, FlowError> {
    match sim.field(name)? {
        FieldData::Host(v) => Ok(v.to_vec()),
        FieldData::Device(b) => {
            let g = sim
                .gpu()
                .ok_or_else(|| FlowError::Invalid("a device field without a GPU".into()))?;
            Ok(g.download(b)?)
        }
    }
}

fn snapshot(
    sim: &Fluid,
    dir: &Path,
    entries: &mut Vec<(f64, String)>,
) -> Result<String, FlowError> {
    let name = format!("{}_{:06}.vti", sim.name(), sim.steps());
    let fields: Vec<(String, Vec<f32>)> = sim
        .fields()
        .iter()
        .map(|f| host_field(sim, &f.name).map(|v| (f.name.clone(), v)))
        .collect::<Result<_, _>>()?;
    let refs: Vec<(&str, &[f32])> = fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect();
    let path = dir.join(&name);
    write_vti(&path, &sim.grid(), &refs)?;
    entries.push((sim.time(), name));
    write_pvd(&dir.join(format!("{}.pvd", sim.name())), entries)?;
    Ok(path.display().to_string())
}

/// Run `opts.steps` steps of `sim`, calling `on_step` after each.
pub fn run(
    sim: &mut Fluid,
    opts: &RunOptions,
    mut on_step: impl FnMut(&StepLine),
) -> Result<RunSummary, FlowError> {
    if let Some(dir) = &opts.out {
        std::fs::create_dir_all(dir).map_err(|e| FlowError::Io {
            path: dir.display().to_string(),
            msg: e.to_string(),
        })?;
    }
    if opts.every == Some(0) {
        return Err(FlowError::Invalid("--every must be at least 1".into()));
    }
    let g = sim.grid();
    let mut sum = RunSummary {
        scene: sim.name().to_string(),
        grid: g.dims[..g.dimension()].to_vec(),
        device: match sim.gpu() {
            Some(gpu) => gpu.describe(),
            None => format!("cpu ({} threads)", rayon::current_num_threads()),
        },
        ..Default::default()
    };
    let mut entries = Vec::new();
    if let (Some(dir), Some(_)) = (&opts.out, opts.every) {
        sum.snapshots.push(snapshot(sim, dir, &mut entries)?);
    }
    let mut total_ms = 0.0;
    let mut total_cycles = 0usize;
    for k in 0..opts.steps {
        let r = sim.step()?;
        let st = sim.last_stats().clone();
        let mut line = StepLine {
            step: sim.steps(),
            time: sim.time(),
            dt: r.dt,
            wall_ms: r.wall_ms,
            advect_ms: st.advect_ms,
            project_ms: st.project_ms,
            other_ms: st.other_ms,
            cycles: st.solve.iterations,
            residual: st.solve.relative_residual(),
            factor: st.solve.convergence_factor(),
            snapshot: None,
        };
        total_ms += r.wall_ms;
        total_cycles += st.solve.iterations;
        sum.max_residual = sum.max_residual.max(line.residual);
        if let Some(dir) = &opts.out {
            let due = match opts.every {
                Some(e) => (k + 1) % e == 0,
                None => k + 1 == opts.steps,
            };
            if due {
                let p = snapshot(sim, dir, &mut entries)?;
                sum.snapshots.push(p.clone());
                line.snapshot = Some(p);
            }
        }
        on_step(&line);
    }
    sum.steps = sim.steps();
    sum.time = sim.time();
    if opts.steps > 0 {
        sum.mean_step_ms = total_ms / opts.steps as f64;
        sum.mean_cycles = total_cycles as f64 / opts.steps as f64;
    }
    Ok(sum)
}
