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
//! 4. `setup`: block Jacobi (the same inverses as on the global matrix), or for `amg` and
//!    `pmg` problems the two-level domain AMG ([`TwoLevelDomainAmg`]: the domain-local
//!    hierarchies plus a coarse correction gathered onto one place, [`CoarseChoice`]), or the
//!    one-level domain-local AMG alone ([`DomainAmg`], `--coarse none`);
//! 5. `solve`: the filtered PCG on the [`PartitionedOperator`] (halo exchange + local SpMV,
//!    dot products reduced over the domains), then the true residual is checked and the
//!    displacement gathered into global node order, so the results and the `.vtu` are those
//!    of a single-domain run.
//!
//! The domains run in this process on the CPU ([`InProcess`] communicator), or, with
//! [`StaticOptions::devices`], on CUDA devices ([`crate::domain_gpu`]: each domain assembled
//! on its device, block-Jacobi or domain-AMG PCG there, NCCL between devices).

use std::time::Instant;

use tessera_core::DeviceChoice;
use tessera_mesh::partition::{partition_cells, PartitionParams, Partitioner};
use tessera_mesh::MeshError;
use tessera_solve::{
    pcg_with, relative_residual, BlockJacobi, CoarseCombination, Communicator, Constraints,
    DomainAmg, InProcess, PartitionedOperator, PcgParams, Preconditioner, SolveError,
    TwoLevelDomainAmg,
};

use crate::assemble::{AssemblyStats, Operator};
use crate::domain::{assemble_domains, DomainLayout};
use crate::problem::{PreconditionerKind, Problem, SolverMethod};
use crate::static_solve::{
    first_non_finite_row, load_stage, preprocess, SolverInfo, StaticError, StaticOptions,
    StaticSolution,
};

/// The coarse level of the domain-decomposed AMG (`--coarse`, [`tessera_solve::domain_amg`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CoarseChoice {
    /// One-level: the domain-local hierarchies only (block Jacobi over domains).
    None,
    /// Domain-local cycles plus the coarse correction, added.
    Additive,
    /// Coarse correction, domain-local cycles on the remaining residual, coarse again.
    #[default]
    Hybrid,
}

impl CoarseChoice {
    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            CoarseChoice::None => "none",
            CoarseChoice::Additive => "additive",
            CoarseChoice::Hybrid => "hybrid",
        }
    }
    /// The two-level combination, `None` for the one-level method.
    pub fn combination(self) -> Option<CoarseCombination> {
        match self {
            CoarseChoice::None => None,
            CoarseChoice::Additive => Some(CoarseCombination::Additive),
            CoarseChoice::Hybrid => Some(CoarseCombination::Hybrid),
        }
    }
}

impl std::str::FromStr for CoarseChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(CoarseChoice::None),
            "additive" => Ok(CoarseChoice::Additive),
            "hybrid" => Ok(CoarseChoice::Hybrid),
            _ => Err(format!(
                "unknown coarse level `{s}`: use hybrid, additive or none"
            )),
        }
    }
}

impl std::fmt::Display for CoarseChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How to split a solve into domains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DomainOptions {
    /// Number of domains `k >= 1`.
    pub domains: usize,
    pub partitioner: Partitioner,
    /// The coarse level of the domain AMG (`amg` and `pmg` problems on the CPU).
    pub coarse: CoarseChoice,
    /// With devices: assemble the domains on the CPU and upload the matrices instead of
    /// assembling each on its device (for comparison).
    pub host_assembly: bool,
}

impl Default for DomainOptions {
    fn default() -> Self {
        Self {
            domains: 1,
            partitioner: Partitioner::Metis,
            coarse: CoarseChoice::default(),
            host_assembly: false,
        }
    }
}

/// The coarse level of a two-level domain AMG solve.
#[derive(Clone, Debug, PartialEq)]
pub struct CoarseInfo {
    /// `additive` or `hybrid`.
    pub combination: String,
    /// DOFs of the gathered coarse operator, and per domain its own share.
    pub coarse_dofs: usize,
    pub coarse_dofs_per_domain: Vec<usize>,
    /// Coarse DOFs each domain's prolongator touches (received per coarse correction).
    pub touched_dofs_per_domain: Vec<usize>,
    /// Stored `3 × 3` blocks of the coarse operator, and levels of its hierarchy.
    pub coarse_blocks: usize,
    pub coarse_levels: usize,
    /// Setup stages, ms.
    pub setup_ms: Vec<(String, f64)>,
    /// Preconditioner applications, and their time in the domain-local cycles, the coarse
    /// corrections and the operator applications of the hybrid form, ms.
    pub applies: u64,
    pub local_ms: f64,
    pub coarse_ms: f64,
    pub operator_ms: f64,
}

impl CoarseInfo {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "combination": self.combination,
            "coarse_dofs": self.coarse_dofs,
            "coarse_dofs_per_domain": self.coarse_dofs_per_domain,
            "touched_dofs_per_domain": self.touched_dofs_per_domain,
            "coarse_blocks": self.coarse_blocks,
            "coarse_levels": self.coarse_levels,
            "setup_ms": self.setup_ms.iter().map(|(k, v)| (k.clone(), serde_json::json!(v))).collect::<serde_json::Map<String, serde_json::Value>>(),
            "applies": self.applies,
            "local_ms": self.local_ms,
            "coarse_ms": self.coarse_ms,
            "operator_ms": self.operator_ms,
        })
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
    /// Operator applications during the solve (iterations + the initial residual, and those
    /// of the hybrid two-level preconditioner).
    pub applies: u64,
    /// Halo exchanges during the solve, ms (all domains).
    pub exchange_ms: f64,
    pub per_domain: Vec<DomainStats>,
    /// The device solve's placement, communication and stage times (`--devices`).
    pub device: Option<crate::domain_gpu::DeviceDomainsReport>,
    /// The coarse level of the two-level domain AMG.
    pub coarse: Option<CoarseInfo>,
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
            "coarse": self.coarse.as_ref().map(|c| c.to_json()),
        })
    }
}

pub(crate) fn stage<R>(
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
    if !gpus.is_empty() {
        return crate::domain_gpu::solve_prepared_on_devices(
            problem, opts, dd, prep, layout, report, &gpus, st, progress,
        );
    }
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
    let kind = problem.solver.preconditioner_for(ho.order());
    let pos = || layout.owned_positions(&ho.node_positions());
    let amg_params = &problem.solver.multigrid.amg;
    let (prec, info): (Prec<'_>, SolverInfo) =
        stage(&mut st, progress, "setup", || -> Result<_, StaticError> {
            Ok(match (kind, dd.coarse.combination()) {
                (PreconditionerKind::BlockJacobi, _) => (
                    Prec::Other(Box::new(BlockJacobi::new(&op, &cons)?)),
                    single("block-jacobi"),
                ),
                (PreconditionerKind::Amg | PreconditionerKind::Pmg, None) => {
                    let amg = DomainAmg::setup(&op, &cons.fixed, &pos(), amg_params)?;
                    let info = domain_amg_info(&amg, "domain-amg (no coarse level)".into());
                    (Prec::Other(Box::new(amg)), info)
                }
                (PreconditionerKind::Amg | PreconditionerKind::Pmg, Some(c)) => {
                    let amg = TwoLevelDomainAmg::setup(&op, &cons.fixed, &pos(), amg_params, c)?;
                    let mut info = domain_amg_info(
                        amg.local(),
                        format!(
                            "domain-amg + coarse ({} coarse DOFs, {})",
                            amg.coarse_dofs(),
                            c.name()
                        ),
                    );
                    info.level_dofs = amg.coarse().stats.dofs.clone();
                    info.setup_stages_ms = amg.stats().setup_ms.clone();
                    info.hierarchy_bytes += amg.coarse().stats.hierarchy_bytes;
                    (Prec::TwoLevel(Box::new(amg)), info)
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
        pcg_with(
            &op,
            prec.as_dyn(),
            &f,
            &cons,
            &params,
            &mut us,
            &mut |_, _| {},
        )
    })?;
    let coarse = match &prec {
        Prec::TwoLevel(m) => {
            let (s, t) = (m.stats(), m.times());
            Some(CoarseInfo {
                combination: m.combination().name().into(),
                coarse_dofs: m.coarse_dofs(),
                coarse_dofs_per_domain: s.coarse_dofs_per_domain.clone(),
                touched_dofs_per_domain: m.touched_coarse_dofs(),
                coarse_blocks: s.coarse_blocks,
                coarse_levels: s.coarse_levels,
                setup_ms: s.setup_ms.clone(),
                applies: t.applies,
                local_ms: t.local_ms,
                coarse_ms: t.coarse_ms,
                operator_ms: t.operator_ms,
            })
        }
        Prec::Other(_) => None,
    };
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
        coarse,
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

/// The preconditioner of a CPU domain solve.
enum Prec<'a> {
    TwoLevel(Box<TwoLevelDomainAmg<'a, InProcess>>),
    Other(Box<dyn Preconditioner>),
}

impl Prec<'_> {
    fn as_dyn(&self) -> &dyn Preconditioner {
        match self {
            Prec::TwoLevel(m) => &**m,
            Prec::Other(m) => &**m,
        }
    }
}

/// The summary of the domain-local hierarchies (the largest levels and complexities, the
/// summed bytes).
fn domain_amg_info(amg: &DomainAmg, name: String) -> SolverInfo {
    let h = amg.hierarchies();
    SolverInfo {
        preconditioner: name,
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
    }
}

pub(crate) fn single(name: &str) -> SolverInfo {
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
