//! The static solve on a domain-decomposed mesh (dissertation §7.1.2; the stages of
//! [`crate::static_solve`] with the matrix split into domains):
//!
//! 1. `load` and `preprocess` as in the single-domain solve (the constraints and the load
//!    vector are evaluated from the problem's selections on the whole boundary, then split
//!    into the domains' owned parts - vectors, not matrices);
//! 2. `partition`: cells into `k` domains ([`tessera_mesh::partition`]) and the
//!    [`DomainLayout`] (ownership, local numbering, halo plans);
//! 3. `assemble`: every domain assembles the rows of its owned nodes from its local cells
//!    ([`assemble_domains`]); no global matrix is formed;
//! 4. `setup`: block Jacobi (the same inverses as on the global matrix), or the domain-local
//!    AMG ([`DomainAmg`]) for `amg` and `pmg` problems;
//! 5. `solve`: the filtered PCG on the [`PartitionedOperator`] (halo exchange + local SpMV,
//!    dot products reduced over the domains), then the true residual is checked and the
//!    displacement gathered into global node order, so the results and the `.vtu` are those
//!    of a single-domain run.
//!
//! The domains run in this process on the CPU ([`InProcess`] communicator), or, with
//! [`StaticOptions::devices`], on CUDA devices ([`crate::domain_gpu`]: block-Jacobi PCG on
//! device copies of the domains' matrices, NCCL between devices).

use std::time::Instant;

use tessera_core::DeviceChoice;
use tessera_mesh::partition::{partition_cells, PartitionParams, Partitioner};
use tessera_mesh::MeshError;
use tessera_solve::{
    pcg_with, relative_residual, BlockJacobi, Communicator, Constraints, DomainAmg, InProcess,
    PartitionedOperator, PcgParams, Preconditioner, SolveError,
};

use crate::assemble::{AssemblyStats, Operator};
use crate::domain::{assemble_domains, DomainLayout};
use crate::problem::{PreconditionerKind, Problem, SolverMethod};
use crate::static_solve::{
    first_non_finite_row, load_stage, preprocess, SolverInfo, StaticError, StaticOptions,
    StaticSolution,
};

/// How to split a solve into domains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DomainOptions {
    /// Number of domains `k >= 1`.
    pub domains: usize,
    pub partitioner: Partitioner,
}

impl Default for DomainOptions {
    fn default() -> Self {
        Self {
            domains: 1,
            partitioner: Partitioner::Metis,
        }
    }
}

/// Per-domain sizes and times of a domain-decomposed solve.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DomainStats {
    /// Cells of the domain (partition), and local cells (with the ghost layer).
    pub cells: u64,
    pub local_cells: u64,
    pub owned_nodes: u64,
    pub interior_nodes: u64,
    pub halo_nodes: u64,
    pub neighbours: usize,
    /// Exact block non-zeros of the owned rows (diagonal included).
    pub block_nonzeros: u64,
    /// Bytes of the domain's Bin-BCSR* matrix.
    pub matrix_bytes: u64,
    /// Local mesh, pattern and summation of the domain, ms.
    pub assemble_ms: f64,
    /// Local SpMV during the solve (interior and boundary bins), ms.
    pub spmv_ms: f64,
    /// Packing the send buffers during the solve, ms.
    pub pack_ms: f64,
}

/// What a domain-decomposed solve reports beside the single-domain summary.
#[derive(Clone, Debug, PartialEq)]
pub struct DomainSolveInfo {
    pub domains: usize,
    pub partitioner: Partitioner,
    /// The communicator (`in-process`).
    pub communicator: String,
    /// Facets between cells of different domains.
    pub edge_cut: u64,
    /// `max owned DOFs / mean - 1`.
    pub imbalance: f64,
    /// Bytes one halo exchange moves (all domains), i.e. per PCG iteration (one SpMV each).
    pub halo_bytes_per_iteration: u64,
    /// Operator applications during the solve (iterations + the initial residual).
    pub applies: u64,
    /// Halo exchanges during the solve, ms (all domains).
    pub exchange_ms: f64,
    pub per_domain: Vec<DomainStats>,
    /// The device solve's placement, communication and stage times (`--devices`).
    pub device: Option<crate::domain_gpu::DeviceDomainsReport>,
}

impl DomainSolveInfo {
    /// As JSON (for the run summary).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "domains": self.domains,
            "partitioner": self.partitioner.name(),
            "communicator": self.communicator,
            "edge_cut": self.edge_cut,
            "imbalance": self.imbalance,
            "halo_bytes_per_iteration": self.halo_bytes_per_iteration,
            "applies": self.applies,
            "exchange_ms": self.exchange_ms,
            "per_domain": self.per_domain.iter().map(|d| serde_json::json!({
                "cells": d.cells,
                "local_cells": d.local_cells,
                "owned_nodes": d.owned_nodes,
                "interior_nodes": d.interior_nodes,
                "halo_nodes": d.halo_nodes,
                "neighbours": d.neighbours,
                "block_nonzeros": d.block_nonzeros,
                "matrix_bytes": d.matrix_bytes,
                "assemble_ms": d.assemble_ms,
                "spmv_ms": d.spmv_ms,
                "pack_ms": d.pack_ms,
            })).collect::<Vec<_>>(),
            "device": self.device.as_ref().map(|d| d.to_json()),
        })
    }
}

fn stage<R>(
    list: &mut Vec<(String, f64)>,
    progress: &mut dyn FnMut(&str),
    name: &str,
    f: impl FnOnce() -> R,
) -> R {
    progress(name);
    let t = Instant::now();
    let r = f();
    list.push((name.to_string(), t.elapsed().as_secs_f64() * 1e3));
    r
}

/// Solve `problem` with the matrix split into `dd.domains` domains (see the
/// [module docs](self)). Errors as [`crate::static_solve::solve_problem`], and for a domain
/// count the mesh cannot support, a CUDA device (the domains run on the CPU), or the direct
/// solver.
pub fn solve_domains(
    problem: &Problem,
    opts: &StaticOptions,
    dd: &DomainOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<StaticSolution, StaticError> {
    problem.material.validate()?;
    if let (DeviceChoice::Cuda(_), true) = (opts.device, opts.devices.is_empty()) {
        return Err(StaticError::Unsupported(format!(
            "--domains runs the {} domains in this process on the CPU; use --device cpu, or --devices cuda:N[,cuda:M...] to run them on GPUs",
            dd.domains
        )));
    }
    if problem.solver.method == SolverMethod::Cholesky {
        return Err(StaticError::Unsupported(
            "--domains solves with the PCG; the direct solver (method = \"cholesky\") needs the whole matrix".into(),
        ));
    }
    let cpu = StaticOptions {
        device: DeviceChoice::Cpu,
        gpu: None,
        ..opts.clone()
    };
    let mut st: Vec<(String, f64)> = Vec::new();
    let gpus = if opts.devices.is_empty() {
        Vec::new()
    } else {
        stage(&mut st, progress, "gpu_init", || {
            crate::domain_gpu::open_devices(&opts.devices)
        })?
    };
    let loaded = stage(&mut st, progress, "load", || load_stage(problem, &cpu))?;
    let mut mesh = loaded.mesh;
    if let Some((file, _)) = &mesh.source {
        let c = crate::estimate::file_counts(mesh.mesh.num_vertices(), mesh.mesh.num_cells());
        crate::estimate::check_file_problem(file, &c, problem)?;
    }
    mesh.source = None;
    let prep = stage(&mut st, progress, "preprocess", || {
        preprocess(problem, mesh)
    })?;
    let ho = &prep.ho;
    let (layout, report) = stage(&mut st, progress, "partition", || {
        let part = partition_cells(
            ho.mesh(),
            &PartitionParams {
                domains: dd.domains,
                order: ho.order(),
                partitioner: dd.partitioner,
            },
        )?;
        let report = part.report(ho.mesh(), ho.order());
        let layout = DomainLayout::new(ho, &part)?;
        Ok::<_, StaticError>((layout, report))
    })?;
    let lame = problem.material.lame()?;
    let doms = stage(&mut st, progress, "assemble", || {
        assemble_domains(ho, &layout, Operator::Stiffness(lame), opts.par)
    })?;
    for (d, da) in doms.iter().enumerate() {
        if let Some((row, value)) = first_non_finite_row(&da.matrix.matrix) {
            return Err(StaticError::Mesh(MeshError::NonFiniteValue {
                stage: "assembly",
                what: format!("the stiffness matrix (domain {d})"),
                entity: "node",
                index: layout.domains[d].local_to_global[row] as usize,
                value,
            }));
        }
    }
    let mut assembly = AssemblyStats::default();
    let mut per_domain: Vec<DomainStats> = Vec::with_capacity(doms.len());
    for (d, da) in doms.iter().enumerate() {
        let dm = &layout.domains[d];
        assembly.dofs += da.stats.dofs;
        assembly.block_nonzeros += da.stats.block_nonzeros;
        assembly.bytes_allocated += da.stats.bytes_allocated;
        assembly.padding_blocks += da.stats.padding_blocks;
        assembly.zayer_bound += da.stats.zayer_bound;
        for (k, v) in &da.stats.stages_ms {
            *assembly.stages_ms.entry(k.clone()).or_insert(0.0) += v;
        }
        per_domain.push(DomainStats {
            cells: report.cells_per_domain[d],
            local_cells: dm.cells.len() as u64,
            owned_nodes: dm.num_owned as u64,
            interior_nodes: dm.num_interior as u64,
            halo_nodes: dm.num_halo() as u64,
            neighbours: dm.halo.neighbours.len(),
            block_nonzeros: da.stats.block_nonzeros,
            matrix_bytes: da.stats.bytes_allocated,
            assemble_ms: da.total_ms,
            ..Default::default()
        });
    }
    let op = PartitionedOperator::new(doms.into_iter().map(|d| d.matrix).collect(), InProcess)?;
    let cons = Constraints {
        fixed: layout.scatter(&prep.constraints.fixed, 3),
        values: layout.scatter(&prep.constraints.values, 3),
    };
    let f = layout.scatter(&prep.f, 3);
    if !gpus.is_empty() {
        // block Jacobi on the devices (the domain-local AMG runs on the CPU only)
        let params = PcgParams {
            tolerance: problem.solver.tolerance,
            max_iterations: problem.solver.max_iterations,
            ..Default::default()
        };
        let (us, report_pcg, dev) = stage(&mut st, progress, "solve", || {
            crate::domain_gpu::solve_on_devices(
                &gpus,
                &opts.devices,
                op.domains(),
                &f,
                &cons,
                &params,
            )
        })?;
        // the same acceptance as a single-domain run: the true residual (CPU operator)
        let true_res = relative_residual(&op, &f, &cons, &us);
        let limit = (100.0 * problem.solver.tolerance).max(1e-10);
        if true_res.is_nan() || true_res > limit || us.iter().any(|x| !x.is_finite()) {
            return Err(StaticError::Solve(SolveError::InvalidInput {
                what: "solve",
                message: format!(
                    "the device PCG reported convergence (relative residual {:.3e}) but the returned displacement has a true relative residual of {true_res:.3e} (> {limit:.1e})",
                    report_pcg.final_residual
                ),
            }));
        }
        for (d, s) in per_domain.iter_mut().enumerate() {
            s.spmv_ms = dev.spmv_ms[d];
        }
        let info = single(match problem.solver.preconditioner_for(ho.order()) {
            PreconditionerKind::BlockJacobi => "block-jacobi",
            _ => "block-jacobi (the domain-local AMG runs on the CPU only)",
        });
        let u = layout.gather(&us, 3);
        let nonzeros = assembly.block_nonzeros * 9;
        let info_dd = DomainSolveInfo {
            domains: layout.num_domains(),
            partitioner: dd.partitioner,
            communicator: dev.communicator.clone(),
            edge_cut: report.edge_cut,
            imbalance: report.imbalance,
            halo_bytes_per_iteration: dev.halo_bytes_per_iteration,
            applies: report_pcg.iterations as u64 + 1,
            exchange_ms: dev.exchange_ms * (report_pcg.iterations as f64 + 1.0),
            per_domain,
            device: Some(dev.clone()),
        };
        return Ok(StaticSolution {
            ho: prep.ho,
            u,
            f: prep.f,
            constraints: prep.constraints,
            report: report_pcg,
            assembly,
            matrix: None,
            device_matrix: None,
            device: crate::domain_gpu::list(&opts.devices),
            stages_ms: st,
            nonzeros,
            solver: info,
            domains: Some(info_dd),
        });
    }
    let kind = problem.solver.preconditioner_for(ho.order());
    let (prec, info): (Box<dyn Preconditioner>, SolverInfo) =
        stage(&mut st, progress, "setup", || -> Result<_, StaticError> {
            Ok(match kind {
                PreconditionerKind::BlockJacobi => (
                    Box::new(BlockJacobi::new(&op, &cons)?) as Box<dyn Preconditioner>,
                    single("block-jacobi"),
                ),
                PreconditionerKind::Amg | PreconditionerKind::Pmg => {
                    let pos = layout.owned_positions(&ho.node_positions());
                    let amg =
                        DomainAmg::setup(&op, &cons.fixed, &pos, &problem.solver.multigrid.amg)?;
                    let h = amg.hierarchies();
                    let info = SolverInfo {
                        preconditioner: "domain-amg".into(),
                        levels: h.iter().map(|a| a.num_levels()).max().unwrap_or(1),
                        operator_complexity: h
                            .iter()
                            .map(|a| a.stats.operator_complexity)
                            .fold(0.0, f64::max),
                        grid_complexity: h
                            .iter()
                            .map(|a| a.stats.grid_complexity)
                            .fold(0.0, f64::max),
                        hierarchy_bytes: h.iter().map(|a| a.stats.hierarchy_bytes).sum(),
                        level_dofs: Vec::new(),
                        setup_stages_ms: Vec::new(),
                    };
                    (Box::new(amg) as Box<dyn Preconditioner>, info)
                }
            })
        })?;
    let params = PcgParams {
        tolerance: problem.solver.tolerance,
        max_iterations: problem.solver.max_iterations,
        ..Default::default()
    };
    let mut us = Vec::new();
    let report_pcg = stage(&mut st, progress, "solve", || {
        pcg_with(&op, &*prec, &f, &cons, &params, &mut us, &mut |_, _| {})
    })?;
    drop(prec);
    // the same acceptance as a single-domain run: the true residual of the returned solution
    let true_res = relative_residual(&op, &f, &cons, &us);
    let limit = (100.0 * problem.solver.tolerance).max(1e-10);
    if true_res.is_nan() || true_res > limit {
        return Err(StaticError::Solve(SolveError::InvalidInput {
            what: "solve",
            message: format!(
                "the PCG reported convergence (relative residual {:.3e}) but the returned displacement has a true relative residual of {true_res:.3e} (> {limit:.1e}): the system is singular or too badly conditioned",
                report_pcg.final_residual
            ),
        }));
    }
    if us.iter().any(|x| !x.is_finite()) {
        return Err(StaticError::Solve(SolveError::NonFinite {
            what: "displacement",
            iteration: report_pcg.iterations,
        }));
    }
    let times = op.times();
    for (d, s) in per_domain.iter_mut().enumerate() {
        s.spmv_ms = times.spmv_ms[d];
        s.pack_ms = times.pack_ms[d];
    }
    let u = layout.gather(&us, 3);
    let nonzeros = assembly.block_nonzeros * 9;
    let info_dd = DomainSolveInfo {
        domains: layout.num_domains(),
        partitioner: dd.partitioner,
        communicator: op.communicator().name().to_string(),
        edge_cut: report.edge_cut,
        imbalance: report.imbalance,
        halo_bytes_per_iteration: op.halo_bytes_per_apply(),
        applies: times.applies,
        exchange_ms: times.exchange_ms,
        per_domain,
        device: None,
    };
    Ok(StaticSolution {
        ho: prep.ho,
        u,
        f: prep.f,
        constraints: prep.constraints,
        report: report_pcg,
        assembly,
        matrix: None,
        device_matrix: None,
        device: "cpu".into(),
        stages_ms: st,
        nonzeros,
        solver: info,
        domains: Some(info_dd),
    })
}

fn single(name: &str) -> SolverInfo {
    SolverInfo {
        preconditioner: name.to_string(),
        levels: 1,
        operator_complexity: 1.0,
        grid_complexity: 1.0,
        hierarchy_bytes: 0,
        level_dofs: Vec::new(),
        setup_stages_ms: Vec::new(),
    }
}
