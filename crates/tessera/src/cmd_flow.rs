//! `tessera flow ...`: the cut-cell fluid back-end (dissertation §6.3.2).
//!
//! - `tessera flow run --scene NAME [--grid WxH[xD]] [--steps N] [--device D] [-o OUT/]
//!   [--every K] [--mesh FILE] [--json]` runs a built-in scene, prints per step the time,
//!   dt, multigrid cycles and residual reduction, and writes `.vti` snapshots (plus a `.pvd`
//!   series) for ParaView;
//! - `tessera flow poisson --case circle|sphere --n N [--json]` solves a manufactured
//!   cut-cell Poisson problem and reports the error norms, cycles and convergence factor.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use tessera_core::{DeviceChoice, Par};
use tessera_flow::poisson::manufactured::{solve_case, Case};
use tessera_flow::poisson::{Method, MgParams};
use tessera_flow::run::{run as run_fluid, RunOptions};
use tessera_flow::{scene, Fluid};

#[derive(Args, Debug)]
pub struct FlowArgs {
    #[command(subcommand)]
    cmd: FlowCmd,
}

#[derive(Subcommand, Debug)]
enum FlowCmd {
    /// Run a fluid scene (cylinder2d, smoke2d, sphere3d, bracket3d) and write .vti snapshots.
    Run(RunArgs),
    /// Solve a manufactured cut-cell Poisson problem (circle: 2D, sphere: 3D) and report errors.
    Poisson(PoissonArgs),
    /// Vortex-shedding frequency of cylinder2d (Re = 100): the Strouhal number.
    Strouhal(StrouhalArgs),
}

#[derive(Args, Debug)]
pub struct StrouhalArgs {
    /// Grid WxH of cylinder2d (cylinder diameter = H / 10).
    #[arg(long, default_value = "512x128", allow_hyphen_values = true)]
    grid: String,
    /// Simulated time to run (the cylinder diameter is 0.1, the inflow speed 1).
    #[arg(long, default_value_t = 30.0)]
    time: f64,
    /// Start of the analysed span (after the start-up transient).
    #[arg(long, default_value_t = 15.0)]
    skip: f64,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: DeviceChoice,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scene name: cylinder2d, smoke2d, sphere3d, bracket3d.
    #[arg(long)]
    scene: String,
    /// Grid size WxH (2D) or WxHxD (3D); the scene's default when absent.
    #[arg(long, allow_hyphen_values = true)]
    grid: Option<String>,
    /// Time steps to run.
    #[arg(long, default_value_t = 100)]
    steps: usize,
    /// auto, cpu, cuda or cuda:N (auto: CUDA device 0 when usable, else the CPU).
    #[arg(long, default_value = "auto")]
    device: DeviceChoice,
    /// Output folder for .vti snapshots and the .pvd series (none: no files).
    #[arg(short = 'o', long = "out")]
    out: Option<PathBuf>,
    /// Write a snapshot every K steps (and the initial state); default: the last step only.
    #[arg(long)]
    every: Option<usize>,
    /// Obstacle mesh for bracket3d (.msh/.mesh/... volume mesh, or .obj/.stl surface).
    #[arg(long)]
    mesh: Option<PathBuf>,
    /// One JSON object per step, then a summary object.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum MethodArg {
    Mgpcg,
    Vcycle,
}

#[derive(Args, Debug)]
pub struct PoissonArgs {
    /// circle (2D, disc in the unit square) or sphere (3D, ball in the unit cube).
    #[arg(long, default_value = "circle")]
    case: String,
    /// Cells per axis.
    #[arg(long, default_value_t = 128)]
    n: usize,
    /// Also solve on n/2, n/4, ... (this many grids in all) and print the observed orders.
    #[arg(long, default_value_t = 1)]
    grids: usize,
    /// MGPCG or stand-alone V-cycles.
    #[arg(long, value_enum, default_value = "mgpcg")]
    method: MethodArg,
    /// Relative residual to reach.
    #[arg(long, default_value_t = 1e-10)]
    tol: f64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(a: FlowArgs) -> anyhow::Result<()> {
    match a.cmd {
        FlowCmd::Run(r) => run_scene(r),
        FlowCmd::Poisson(p) => poisson(p),
        FlowCmd::Strouhal(s) => strouhal(s),
    }
}

fn run_scene(a: RunArgs) -> anyhow::Result<()> {
    let grid = a.grid.as_deref().map(scene::parse_grid).transpose()?;
    let (setup, info) = scene::build(&a.scene, grid.as_deref(), a.mesh.as_deref())?;
    let backend = crate::device::resolve(a.device)?;
    eprintln!("device: {}", backend.describe());
    let mut fluid = Fluid::new(setup, backend.gpu().cloned())?;
    let quiet = a.json || !std::io::stderr().is_terminal();
    let pb = if quiet {
        ProgressBar::hidden()
    } else {
        let pb = ProgressBar::new(a.steps as u64);
        pb.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} steps ({elapsed}, eta {eta})")
                .expect("static template"),
        );
        pb
    };
    if !a.json {
        let g = fluid.setup();
        println!(
            "scene {} grid {} ({} cells, h = {:.3e}), {} multigrid levels; Re = {}, obstacle {:.3}, blockage {:.3}",
            g.name,
            tessera_flow::fluid::fmt_dims(g.dims, g.dim),
            g.dims.iter().product::<usize>(),
            g.h,
            fluid.levels(),
            if info.reynolds.is_finite() {
                format!("{:.0}", info.reynolds)
            } else {
                "inviscid".into()
            },
            info.length,
            info.blockage
        );
        println!(
            "{:>6} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>6} {:>9} {:>7}",
            "step",
            "time",
            "dt",
            "ms",
            "advect",
            "project",
            "other",
            "cycles",
            "residual",
            "factor"
        );
    }
    let opts = RunOptions {
        steps: a.steps,
        out: a.out.clone(),
        every: a.every,
    };
    let summary = run_fluid(&mut fluid, &opts, |l| {
        if a.json {
            println!("{}", serde_json::to_string(l).unwrap_or_default());
        } else {
            pb.suspend(|| {
                println!(
                    "{:>6} {:>9.4} {:>9.3e} {:>9.2} {:>8.2} {:>8.2} {:>8.2} {:>6} {:>9.2e} {:>7.3}{}",
                    l.step,
                    l.time,
                    l.dt,
                    l.wall_ms,
                    l.advect_ms,
                    l.project_ms,
                    l.other_ms,
                    l.cycles,
                    l.residual,
                    l.factor,
                    l.snapshot
                        .as_deref()
                        .map(|s| format!("  -> {s}"))
                        .unwrap_or_default()
                );
            });
        }
        pb.inc(1);
    })?;
    pb.finish_and_clear();
    if a.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "{} steps to t = {:.4}: {:.2} ms per step, {:.2} cycles per step, worst residual {:.2e}; {} snapshot(s)",
            summary.steps,
            summary.time,
            summary.mean_step_ms,
            summary.mean_cycles,
            summary.max_residual,
            summary.snapshots.len()
        );
    }
    Ok(())
}

fn poisson(a: PoissonArgs) -> anyhow::Result<()> {
    let case = Case::from_name(&a.case)?;
    if a.grids == 0 {
        anyhow::bail!("--grids must be at least 1");
    }
    let params = MgParams {
        tolerance: a.tol,
        max_iterations: 100,
        method: match a.method {
            MethodArg::Mgpcg => Method::Mgpcg,
            MethodArg::Vcycle => Method::VCycle,
        },
        ..Default::default()
    };
    let mut rows = Vec::new();
    for g in (0..a.grids).rev() {
        let n = a.n >> g;
        let r = solve_case(case, n, params, Par::auto())?;
        rows.push((n, r));
    }
    let order = |e0: f64, e1: f64| (e0 / e1).log2();
    if a.json {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .enumerate()
            .map(|(i, (n, r))| {
                let mut v = serde_json::json!({
                    "case": case.name(), "n": n, "cells": r.cells, "levels": r.levels,
                    "method": format!("{:?}", a.method).to_lowercase(),
                    "cycles": r.report.iterations,
                    "convergence_factor": r.report.convergence_factor(),
                    "relative_residual": r.report.relative_residual(),
                    "converged": r.report.converged,
                    "error_max": r.errors.max, "error_l2": r.errors.l2,
                    "error_max_interior": r.errors.max_interior,
                    "error_l2_interior": r.errors.l2_interior,
                    "setup_ms": r.setup_ms, "solve_ms": r.solve_ms,
                });
                if i > 0 {
                    let p = &rows[i - 1].1.errors;
                    v["order_max"] = order(p.max, r.errors.max).into();
                    v["order_l2_interior"] = order(p.l2_interior, r.errors.l2_interior).into();
                }
                v
            })
            .collect();
        if list.len() == 1 {
            println!("{}", list[0]);
        } else {
            println!("{}", serde_json::Value::Array(list));
        }
    } else {
        println!(
            "manufactured cut-cell Poisson problem `{}` (dissertation Eq. 6.3; f64, CPU), {:?}",
            case.name(),
            a.method
        );
        println!(
            "{:>6} {:>10} {:>6} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7}",
            "n",
            "cells",
            "levels",
            "cycles",
            "factor",
            "residual",
            "err max",
            "err L2",
            "L2 inner",
            "ms",
            "ord max",
            "ord L2i"
        );
        for (i, (n, r)) in rows.iter().enumerate() {
            let (om, ol) = if i > 0 {
                let p = &rows[i - 1].1.errors;
                (
                    format!("{:.2}", order(p.max, r.errors.max)),
                    format!("{:.2}", order(p.l2_interior, r.errors.l2_interior)),
                )
            } else {
                ("-".into(), "-".into())
            };
            println!(
                "{:>6} {:>10} {:>6} {:>6} {:>8.4} {:>10.2e} {:>10.3e} {:>10.3e} {:>10.3e} {:>10.1} {:>7} {:>7}",
                n,
                r.cells,
                r.levels,
                r.report.iterations,
                r.report.convergence_factor(),
                r.report.relative_residual(),
                r.errors.max,
                r.errors.l2,
                r.errors.l2_interior,
                r.setup_ms + r.solve_ms,
                om,
                ol
            );
        }
    }
    Ok(())
}

fn strouhal(a: StrouhalArgs) -> anyhow::Result<()> {
    let grid = scene::parse_grid(&a.grid)?;
    let (setup, info) = scene::build("cylinder2d", Some(&grid), None)?;
    let backend = crate::device::resolve(a.device)?;
    eprintln!("device: {}", backend.describe());
    let mut fluid = Fluid::new(setup, backend.gpu().cloned())?;
    let quiet = a.json || !std::io::stderr().is_terminal();
    let pb = if quiet {
        ProgressBar::hidden()
    } else {
        let pb = ProgressBar::new((a.time * 100.0) as u64);
        pb.set_style(
            ProgressStyle::with_template("{bar:40} t = {msg} ({elapsed}, eta {eta})")
                .expect("static template"),
        );
        pb
    };
    let t0 = std::time::Instant::now();
    let r = tessera_flow::strouhal::measure(&mut fluid, &info, a.skip, a.time, |t| {
        pb.set_position((t * 100.0) as u64);
        pb.set_message(format!("{t:.2}"));
    })?;
    pb.finish_and_clear();
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        v["grid"] = serde_json::json!(grid);
        v["wall_s"] = t0.elapsed().as_secs_f64().into();
        println!("{v}");
    } else {
        println!(
            "cylinder2d {}: Re = {:.0}, D = {}, blockage D/H = {:.2}; {} steps to t = {:.2} ({:.1} s)",
            a.grid,
            r.reynolds,
            info.length,
            r.blockage,
            r.steps,
            r.t_end,
            t0.elapsed().as_secs_f64()
        );
        println!(
            "shedding over t = {:.1}..{:.1}: {} periods, f = {:.4}, St = f D / U = {:.4}, transverse velocity amplitude {:.3} at x = 2D behind the cylinder",
            r.t_start, r.t_end, r.periods, r.frequency, r.strouhal, r.amplitude
        );
    }
    Ok(())
}
