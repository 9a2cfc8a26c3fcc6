//! The domain-decomposed solve on GPUs (`fem solve --devices cuda:0,cuda:1 [--domains K]`;
//! dissertation §7.1.2): the domains of [`crate::domain_solve`] are placed on the listed devices
//! round-robin (domain `d` on `devices[d % n]`), each domain's assembled owned rows are uploaded
//! to its device, and the filtered block-Jacobi PCG runs on
//! [`tessera_solve::cuda::DeviceDomains`]: halo exchange by device copies between domains of one
//! device and by NCCL between devices, dot products reduced over the domains in domain order.
//!
//! The per-domain assembly runs on the domain's device ([`assemble_domains_gpu`]): the
//! exact-allocation Bin-BCSR* count, pattern and per-node summation of
//! [`crate::cuda::GpuAssembler`] restricted to the domain's owned rows over its local cells
//! (owned cells and the ghost layer), columns in the local numbering (owned, then halo). The
//! host builds the local sub-mesh and its node tables ([`DomainLayout::local_mesh`]) and
//! uploads the mesh, as the one-GPU assembly does; counts, bins, column indices, element
//! matrices and values are formed on the device, and the matrix stays there: no host matrix,
//! no upload of values. (The host path, [`crate::domain::assemble_domains`] with an upload,
//! remains for comparison.)
//!
//! With `preconditioner = "amg"` the PCG is preconditioned by the domain-local AMG on the
//! devices ([`DeviceDomainAmg`]: one hierarchy per domain, set up from the device matrix's
//! owned-owned block with the solver crate's device AMG setup).

use std::time::Instant;

use tessera_gpu::Gpu;
use tessera_solve::cuda::{
    DeviceDomainAmg, DeviceDomainMatrix, DeviceDomains, DeviceDomainsOptions, DomainPreconditioner,
};
use tessera_solve::{AmgParams, Constraints, DomainMatrix, PcgParams, SolveReport};

use tessera_mesh::partition::PartitionReport;
use tessera_mesh::MeshError;
use tessera_solve::SolveError;

use crate::assemble::{AssemblyStats, Operator, Summation};
use crate::cuda::{DeviceHoMesh, FemKernels, GpuAssembler};
use crate::domain::{assemble_domains, DomainLayout};
use crate::domain_solve::{
    single, stage, CoarseChoice, DomainOptions, DomainSolveInfo, DomainStats,
};
use crate::error::FemError;
use crate::nodes::HoMesh;
use crate::problem::{PreconditionerKind, Problem};
use crate::static_solve::{
    first_non_finite_row, Prepared, StaticError, StaticOptions, StaticSolution,
};

/// One domain's rows assembled on its device, and the times of the stages.
pub struct DeviceDomainAssembly {
    pub matrix: DeviceDomainMatrix,
    /// Pattern and summation statistics; `stages_ms` are CUDA-event times of the device
    /// stages (`count_contributions`, `bin_offsets`, `alloc_final`, `column_indices`,
    /// `alloc_element_matrices`, `element_matrices`, `summation`).
    pub stats: AssemblyStats,
    /// Host part: the local sub-mesh, its node tables and their upload, ms (wall clock).
    pub mesh_ms: f64,
    /// Device part: the sum of the device stages, ms.
    pub device_ms: f64,
    /// Wall time of the whole domain (mesh, upload, device stages, synchronized), ms.
    pub total_ms: f64,
    /// Device memory in use at the end of the domain's assembly, its buffers still held
    /// (total minus free, `cuMemGetInfo`), bytes.
    pub memory_in_use: u64,
}

/// Assemble the owned rows of every domain of `layout` on its device (`placement[d]`; see the
/// [module docs](self)). One host thread per device assembles that device's domains one after
/// another, so the devices work at the same time; the matrices stay on the devices.
pub fn assemble_domains_gpu(
    placement: &[&Gpu],
    ho: &HoMesh,
    layout: &DomainLayout,
    op: Operator,
) -> Result<Vec<DeviceDomainAssembly>, FemError> {
    if placement.len() != layout.num_domains() {
        return Err(FemError::InvalidInput(format!(
            "{} domains placed on {} devices",
            layout.num_domains(),
            placement.len()
        )));
    }
    // one host thread per device, each assembling its domains in order: the devices work at
    // the same time (and the hosts' local meshes are built in parallel)
    let mut devices: Vec<usize> = Vec::new();
    for g in placement {
        if !devices.contains(&g.ordinal()) {
            devices.push(g.ordinal());
        }
    }
    let mut slots: Vec<Option<Result<DeviceDomainAssembly, FemError>>> =
        (0..placement.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = devices
            .iter()
            .map(|&o| {
                scope.spawn(move || {
                    placement
                        .iter()
                        .enumerate()
                        .filter(|(_, g)| g.ordinal() == o)
                        .map(|(d, g)| (d, assemble_one(g, ho, layout, d, op)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            match h.join() {
                Ok(list) => {
                    for (d, r) in list {
                        slots[d] = Some(r);
                    }
                }
                Err(_) => {
                    // a panicking thread leaves its domains unfilled; reported below
                }
            }
        }
    });
    slots
        .into_iter()
        .enumerate()
        .map(|(d, r)| {
            r.unwrap_or_else(|| {
                Err(FemError::InvalidInput(format!(
                    "the assembly of domain {d} did not finish (its device thread stopped)"
                )))
            })
        })
        .collect()
}

/// Domain `d` of `layout` assembled on `g` (see [`assemble_domains_gpu`]).
fn assemble_one(
    g: &Gpu,
    ho: &HoMesh,
    layout: &DomainLayout,
    d: usize,
    op: Operator,
) -> Result<DeviceDomainAssembly, FemError> {
    let t = Instant::now();
    let (lho, rows) = layout.local_mesh(ho, d)?;
    let kern = FemKernels::new(g)?;
    let dmesh = DeviceHoMesh::upload_rows(g, &lho, &rows)?;
    g.synchronize().map_err(gpu_err)?;
    let mesh_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut asm = GpuAssembler::new(&kern, &dmesh, Summation::PerNode)?;
    let matrix = asm.assemble::<f64>(op)?;
    g.synchronize().map_err(gpu_err)?;
    // with the assembler's buffers still held: the assembly's peak on this device
    let memory_in_use = g.memory_in_use().map_err(gpu_err)? as u64;
    let stats = asm.stats().clone();
    drop(asm);
    let device_ms = stats.stages_ms.values().sum();
    let dm = &layout.domains[d];
    let matrix = DeviceDomainMatrix::new(matrix, dm.num_interior, dm.num_halo(), dm.halo.clone())?;
    Ok(DeviceDomainAssembly {
        matrix,
        stats,
        mesh_ms,
        device_ms,
        total_ms: t.elapsed().as_secs_f64() * 1e3,
        memory_in_use,
    })
}

fn gpu_err(e: tessera_gpu::GpuError) -> FemError {
    FemError::Device {
        device: "cuda".into(),
        reason: e.to_string(),
    }
}

/// The device of every domain: `devices[d % devices.len()]` (round-robin).
pub fn round_robin(devices: &[usize], domains: usize) -> Vec<usize> {
    (0..domains).map(|d| devices[d % devices.len()]).collect()
}

/// Open the listed CUDA devices (distinct ordinals). More devices than the machine has, or a
/// device listed twice, is an error that says what there is.
pub fn open_devices(devices: &[usize]) -> Result<Vec<Gpu>, StaticError> {
    if devices.is_empty() {
        return Err(StaticError::Unsupported("--devices lists no device".into()));
    }
    for (i, a) in devices.iter().enumerate() {
        if devices[..i].contains(a) {
            return Err(StaticError::Unsupported(format!(
                "cuda:{a} is listed twice in --devices; NCCL runs one rank per device, so put \
                 several domains on one device with --domains K instead"
            )));
        }
    }
    let count = Gpu::device_count().map_err(|e| {
        StaticError::Unsupported(format!(
            "--devices {}: no CUDA device is usable ({e})",
            list(devices)
        ))
    })?;
    if let Some(&bad) = devices.iter().find(|&&o| o >= count) {
        return Err(StaticError::Unsupported(format!(
            "--devices {}: cuda:{bad} does not exist; this machine has {count} CUDA device{} (cuda:0{})",
            list(devices),
            if count == 1 { "" } else { "s" },
            if count > 1 {
                format!("..cuda:{}", count - 1)
            } else {
                String::new()
            }
        )));
    }
    devices
        .iter()
        .map(|&o| {
            Gpu::new(o).map_err(|e| {
                StaticError::Unsupported(format!("cuda:{o}: {}", e.to_string().replace('\n', " ")))
            })
        })
        .collect()
}

/// `cuda:0,cuda:1`.
pub fn list(devices: &[usize]) -> String {
    devices
        .iter()
        .map(|o| format!("cuda:{o}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// What the device solve measured (per application of the operator: medians of timed
/// applications after the solve, each stage alone and waited for).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceDomainsReport {
    /// The devices, as listed.
    pub devices: Vec<usize>,
    /// Device ordinal of every domain.
    pub placement: Vec<usize>,
    /// `nccl` when domains on several devices exchange through NCCL, else `device copies`.
    pub communicator: String,
    /// Where the domains were assembled: `device` (on each domain's GPU) or `host` (CPU
    /// assembly, matrices uploaded).
    pub assembly: String,
    /// `block-jacobi` or `domain-amg`.
    pub preconditioner: String,
    /// Bytes of the halo exchange per PCG iteration (one application): all of it, and the part
    /// that crosses devices.
    pub halo_bytes_per_iteration: u64,
    pub remote_bytes_per_iteration: u64,
    /// Bytes of the reductions per iteration: three partial sums per domain.
    pub reduction_bytes_per_iteration: u64,
    /// Host-assembled domains: the upload of their matrices, ms (0 for device assembly).
    pub upload_ms: f64,
    /// Per domain: the local sub-mesh (host; with device assembly also its upload), ms.
    pub assemble_mesh_ms: Vec<f64>,
    /// Per domain: the assembler's stages (counts, pattern, element matrices, summation):
    /// CUDA-event times on the device, or CPU wall times for host assembly, ms.
    pub assemble_stages_ms: Vec<f64>,
    /// Per domain: the preconditioner's setup (domain AMG hierarchy), ms.
    pub setup_ms: Vec<f64>,
    /// Per domain with the domain AMG: levels, operator complexity, grid complexity and
    /// device bytes of the hierarchy.
    pub amg_levels: Vec<usize>,
    pub amg_operator_complexity: Vec<f64>,
    pub amg_grid_complexity: Vec<f64>,
    pub amg_bytes: Vec<u64>,
    /// Pack kernels of all domains per application, ms.
    pub pack_ms: f64,
    /// The exchange alone per application, ms.
    pub exchange_ms: f64,
    /// Local SpMV of each domain alone (interior and boundary bins), ms.
    pub spmv_ms: Vec<f64>,
    /// One whole application (exchange overlapped with the interior bins), ms.
    pub apply_ms: f64,
    /// Solve time per PCG iteration, ms.
    pub iteration_ms: f64,
    /// Per device of `devices`: the largest device memory in use seen at the end of each
    /// domain's assembly (its buffers still held), after the operator and the preconditioner
    /// were set up, and once the PCG had its vectors (total minus free, `cuMemGetInfo`: the
    /// process's allocations, the blocks its memory pool keeps, the contexts), bytes.
    pub peak_memory_bytes: Vec<u64>,
    /// Per device of `devices`: its total memory, bytes.
    pub device_memory_bytes: Vec<u64>,
}

impl DeviceDomainsReport {
    /// As JSON (for the run summary).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "devices": list(&self.devices),
            "placement": self.placement.iter().map(|o| format!("cuda:{o}")).collect::<Vec<_>>(),
            "communicator": self.communicator,
            "assembly": self.assembly,
            "preconditioner": self.preconditioner,
            "halo_bytes_per_iteration": self.halo_bytes_per_iteration,
            "remote_bytes_per_iteration": self.remote_bytes_per_iteration,
            "reduction_bytes_per_iteration": self.reduction_bytes_per_iteration,
            "upload_ms": self.upload_ms,
            "assemble_mesh_ms": self.assemble_mesh_ms,
            "assemble_stages_ms": self.assemble_stages_ms,
            "setup_ms": self.setup_ms,
            "amg_levels": self.amg_levels,
            "amg_operator_complexity": self.amg_operator_complexity,
            "amg_grid_complexity": self.amg_grid_complexity,
            "amg_bytes": self.amg_bytes,
            "pack_ms": self.pack_ms,
            "exchange_ms": self.exchange_ms,
            "spmv_ms": self.spmv_ms,
            "apply_ms": self.apply_ms,
            "iteration_ms": self.iteration_ms,
            "peak_memory_bytes": self.peak_memory_bytes,
            "device_memory_bytes": self.device_memory_bytes,
        })
    }
}

/// The domains' matrices for [`solve_on_devices`]: on the devices already (device assembly),
/// or host matrices to upload.
pub enum DomainMatrices<'a> {
    Device(Vec<DeviceDomainMatrix>),
    Host(&'a [DomainMatrix]),
}

/// The device of every domain of the placement, as references into `gpus` (opened in the
/// order of `devices`).
pub fn placement_refs<'g>(gpus: &'g [Gpu], devices: &[usize], domains: usize) -> Vec<&'g Gpu> {
    round_robin(devices, domains)
        .iter()
        .map(|o| {
            let at = devices.iter().position(|d| d == o).unwrap_or(0);
            &gpus[at]
        })
        .collect()
}

/// Solve on the devices (see the [module docs](self)): `f`, `cons` and the returned
/// displacement are concatenated over the domains' owned nodes. With `amg = Some((positions,
/// params))` (owned node positions, concatenated) the PCG is preconditioned by the domain AMG
/// set up on the devices, else by block Jacobi. The returned relative residual is the true one
/// of the returned displacement, computed with the device operator.
#[allow(clippy::type_complexity)]
pub fn solve_on_devices(
    gpus: &[Gpu],
    devices: &[usize],
    domains: DomainMatrices<'_>,
    f: &[f64],
    cons: &Constraints,
    params: &PcgParams,
    amg: Option<(&[[f64; 3]], &AmgParams)>,
) -> Result<(Vec<f64>, SolveReport, f64, DeviceDomainsReport), StaticError> {
    let k = match &domains {
        DomainMatrices::Device(v) => v.len(),
        DomainMatrices::Host(v) => v.len(),
    };
    let placement = round_robin(devices, k);
    let refs = placement_refs(gpus, devices, k);
    let t = Instant::now();
    let (dd, assembly) = match domains {
        DomainMatrices::Device(v) => (
            DeviceDomains::from_device(v, &refs, DeviceDomainsOptions::default())?,
            "device",
        ),
        DomainMatrices::Host(v) => (
            DeviceDomains::new(v, &refs, DeviceDomainsOptions::default())?,
            "host",
        ),
    };
    dd.synchronize()?;
    let upload_ms = if assembly == "host" {
        t.elapsed().as_secs_f64() * 1e3
    } else {
        0.0
    };
    let hier = match amg {
        Some((pos, ap)) => Some(DeviceDomainAmg::setup(&dd, &cons.fixed, pos, ap).map_err(
            |e| {
                // the domain AMG aggregates the order-p matrix itself (there is no p-multigrid
                // across domains): at p = 3 on large domains its Galerkin products outgrow the
                // device's 32-bit offsets and memory
                StaticError::Solve(SolveError::InvalidInput {
                    what: "domain AMG",
                    message: format!(
                        "the set-up of the domain AMG on the devices failed: {e}. The domain AMG \
                         runs smoothed aggregation on each domain's order-p matrix (there is no \
                         p-multigrid across domains); for large p >= 2 domains set \
                         preconditioner = \"block-jacobi\" in [solver], or use more domains"
                    ),
                })
            },
        )?),
        None => None,
    };
    let prec = match &hier {
        Some(h) => DomainPreconditioner::Amg(h),
        None => DomainPreconditioner::BlockJacobi,
    };
    let t = Instant::now();
    let mut us = Vec::new();
    let report = dd.pcg_with(f, cons, params, prec, &mut us)?;
    let solve_ms = t.elapsed().as_secs_f64() * 1e3;
    // the true residual of the returned displacement, and the stage times per application
    let x = dd.upload(&us)?;
    let mut y = dd.zeros()?;
    dd.apply(&x, &mut y)?;
    let ku = dd.download(&y)?;
    let z = dd.upload(&cons.start_vector())?;
    dd.apply(&z, &mut y)?;
    let kz = dd.download(&y)?;
    let norm = |ky: &[f64]| -> f64 {
        ky.iter()
            .zip(f)
            .zip(&cons.fixed)
            .filter(|(_, &fx)| !fx)
            .map(|((a, b), _)| (b - a) * (b - a))
            .sum::<f64>()
            .sqrt()
    };
    let (r, r0) = (norm(&ku), norm(&kz));
    let true_res = if r0 > 0.0 { r / r0 } else { r };
    let times = dd.timed_apply(&x, &mut y, 5)?;
    let peak = dd.peak_memory();
    let hs = hier.as_ref().map_or(&[][..], |h| h.hierarchies());
    let stat = |f: fn(&tessera_solve::amg::AmgStats) -> f64| -> Vec<f64> {
        hs.iter().map(|a| a.stats().map_or(f64::NAN, f)).collect()
    };
    Ok((
        us,
        report.clone(),
        true_res,
        DeviceDomainsReport {
            devices: devices.to_vec(),
            placement,
            communicator: if dd.uses_nccl() {
                "nccl".into()
            } else {
                "device copies".into()
            },
            assembly: assembly.into(),
            preconditioner: if hier.is_some() {
                "domain-amg".into()
            } else {
                "block-jacobi".into()
            },
            halo_bytes_per_iteration: dd.halo_bytes_per_apply(),
            remote_bytes_per_iteration: dd.remote_bytes_per_apply(),
            reduction_bytes_per_iteration: 3 * 8 * k as u64,
            upload_ms,
            assemble_mesh_ms: Vec::new(),
            assemble_stages_ms: Vec::new(),
            setup_ms: hier
                .as_ref()
                .map_or_else(Vec::new, |h| h.setup_ms().to_vec()),
            amg_levels: hs.iter().map(|a| a.num_levels()).collect(),
            amg_operator_complexity: stat(|s| s.operator_complexity),
            amg_grid_complexity: stat(|s| s.grid_complexity),
            amg_bytes: hs.iter().map(|a| a.bytes() as u64).collect(),
            pack_ms: times.pack_ms,
            exchange_ms: times.exchange_ms,
            spmv_ms: times.spmv_ms,
            apply_ms: times.apply_ms,
            iteration_ms: solve_ms / report.iterations.max(1) as f64,
            peak_memory_bytes: devices
                .iter()
                .map(|o| peak.iter().find(|p| p.0 == *o).map_or(0, |p| p.1))
                .collect(),
            device_memory_bytes: devices
                .iter()
                .map(|o| peak.iter().find(|p| p.0 == *o).map_or(0, |p| p.2))
                .collect(),
        },
    ))
}

/// The device branch of [`crate::domain_solve::solve_domains`], after the partition stage:
/// `assemble` (each domain on its device, or on the CPU with `dd.host_assembly`), `setup`
/// (the operator on the devices; the domain AMG hierarchies for `amg` and `pmg` problems),
/// `solve` (the device PCG, the true residual with the device operator), results gathered
/// into global node order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn solve_prepared_on_devices(
    problem: &Problem,
    opts: &StaticOptions,
    dd: &DomainOptions,
    prep: Prepared,
    layout: DomainLayout,
    report: PartitionReport,
    gpus: &[Gpu],
    mut st: Vec<(String, f64)>,
    progress: &mut dyn FnMut(&str),
) -> Result<StaticSolution, StaticError> {
    let ho = &prep.ho;
    let k = layout.num_domains();
    let lame = problem.material.lame()?;
    let op = Operator::Stiffness(lame);
    let refs = placement_refs(gpus, &opts.devices, k);
    // per domain: stats, total ms, host mesh ms, device ms
    let mut asm_stats: Vec<(AssemblyStats, f64, f64, f64)> = Vec::with_capacity(k);
    let mut host_mats = Vec::new();
    let mut dev_mats = Vec::new();
    // (device ordinal, memory in use at the end of the domain's assembly) per domain
    let mut asm_memory: Vec<(usize, u64)> = Vec::with_capacity(k);
    stage(
        &mut st,
        progress,
        "assemble",
        || -> Result<(), StaticError> {
            if dd.host_assembly {
                for (d, da) in assemble_domains(ho, &layout, op, opts.par)?
                    .into_iter()
                    .enumerate()
                {
                    if let Some((row, value)) = first_non_finite_row(&da.matrix.matrix) {
                        return Err(StaticError::Mesh(MeshError::NonFiniteValue {
                            stage: "assembly",
                            what: format!("the stiffness matrix (domain {d})"),
                            entity: "node",
                            index: layout.domains[d].local_to_global[row] as usize,
                            value,
                        }));
                    }
                    let stages: f64 = da.stats.stages_ms.values().sum();
                    asm_stats.push((
                        da.stats,
                        da.total_ms,
                        (da.total_ms - stages).max(0.0),
                        stages,
                    ));
                    host_mats.push(da.matrix);
                }
            } else {
                for (d, da) in assemble_domains_gpu(&refs, ho, &layout, op)?
                    .into_iter()
                    .enumerate()
                {
                    asm_memory.push((refs[d].ordinal(), da.memory_in_use));
                    asm_stats.push((da.stats, da.total_ms, da.mesh_ms, da.device_ms));
                    dev_mats.push(da.matrix);
                }
            }
            Ok(())
        },
    )?;
    let mut assembly = AssemblyStats::default();
    let mut per_domain: Vec<DomainStats> = Vec::with_capacity(k);
    for (d, (stats, total_ms, _, _)) in asm_stats.iter().enumerate() {
        let dm = &layout.domains[d];
        assembly.dofs += stats.dofs;
        assembly.block_nonzeros += stats.block_nonzeros;
        assembly.bytes_allocated += stats.bytes_allocated;
        assembly.padding_blocks += stats.padding_blocks;
        assembly.zayer_bound += stats.zayer_bound;
        for (name, v) in &stats.stages_ms {
            *assembly.stages_ms.entry(name.clone()).or_insert(0.0) += v;
        }
        per_domain.push(DomainStats {
            cells: report.cells_per_domain[d],
            local_cells: dm.cells.len() as u64,
            owned_nodes: dm.num_owned as u64,
            interior_nodes: dm.num_interior as u64,
            halo_nodes: dm.num_halo() as u64,
            neighbours: dm.halo.neighbours.len(),
            block_nonzeros: stats.block_nonzeros,
            matrix_bytes: stats.bytes_allocated,
            assemble_ms: *total_ms,
            ..Default::default()
        });
    }
    let cons = Constraints {
        fixed: layout.scatter(&prep.constraints.fixed, 3),
        values: layout.scatter(&prep.constraints.values, 3),
    };
    let f = layout.scatter(&prep.f, 3);
    let params = PcgParams {
        tolerance: problem.solver.tolerance,
        max_iterations: problem.solver.max_iterations,
        ..Default::default()
    };
    let kind = problem.solver.preconditioner_for(ho.order());
    let positions = match kind {
        PreconditionerKind::BlockJacobi => None,
        PreconditionerKind::Amg | PreconditionerKind::Pmg => {
            Some(layout.owned_positions(&ho.node_positions()))
        }
    };
    let amg_params = &problem.solver.multigrid.amg;
    let matrices = if dd.host_assembly {
        DomainMatrices::Host(&host_mats)
    } else {
        DomainMatrices::Device(dev_mats)
    };
    // the operator's set-up, the hierarchies (if any) and the PCG run inside one device
    // session; setup and solve are timed inside and reported as stages
    let t = Instant::now();
    progress("solve");
    let (us, report_pcg, true_res, mut dev) = solve_on_devices(
        gpus,
        &opts.devices,
        matrices,
        &f,
        &cons,
        &params,
        positions.as_deref().map(|p| (p, amg_params)),
    )?;
    let total = t.elapsed().as_secs_f64() * 1e3;
    let solve = dev.iteration_ms * report_pcg.iterations.max(1) as f64;
    let setup: f64 = dev.setup_ms.iter().sum::<f64>() + dev.upload_ms;
    st.push(("setup".into(), setup));
    st.push(("solve".into(), solve));
    st.push(("check".into(), (total - setup - solve).max(0.0)));
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
    dev.assemble_mesh_ms = asm_stats.iter().map(|a| a.2).collect();
    for (p, o) in dev.peak_memory_bytes.iter_mut().zip(&opts.devices) {
        for &(_, m) in asm_memory.iter().filter(|a| a.0 == *o) {
            *p = (*p).max(m);
        }
    }
    dev.assemble_stages_ms = asm_stats.iter().map(|a| a.3).collect();
    let mut info = match (&positions, dd.coarse) {
        (None, _) => single("block-jacobi"),
        (Some(_), CoarseChoice::None) => single("domain-amg (no coarse level)"),
        // the two-level method's coarse correction runs on the CPU only so far
        (Some(_), c) => single(&format!(
            "domain-amg (no coarse level: --coarse {} runs on the CPU only)",
            c.name()
        )),
    };
    if positions.is_some() {
        let max = |v: &[f64]| v.iter().copied().fold(1.0, f64::max);
        info.levels = dev.amg_levels.iter().copied().max().unwrap_or(1);
        info.operator_complexity = max(&dev.amg_operator_complexity);
        info.grid_complexity = max(&dev.amg_grid_complexity);
        info.hierarchy_bytes = dev.amg_bytes.iter().sum::<u64>() as usize;
    }
    let u = layout.gather(&us, 3);
    let nonzeros = assembly.block_nonzeros * 9;
    let info_dd = DomainSolveInfo {
        domains: k,
        partitioner: dd.partitioner,
        communicator: dev.communicator.clone(),
        edge_cut: report.edge_cut,
        imbalance: report.imbalance,
        halo_bytes_per_iteration: dev.halo_bytes_per_iteration,
        applies: report_pcg.iterations as u64 + 1,
        exchange_ms: dev.exchange_ms * (report_pcg.iterations as f64 + 1.0),
        per_domain,
        device: Some(dev),
        coarse: None,
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
        device: list(&opts.devices),
        stages_ms: st,
        nonzeros,
        solver: info,
        domains: Some(info_dd),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_go_round_robin() {
        assert_eq!(round_robin(&[0, 1], 5), vec![0, 1, 0, 1, 0]);
        assert_eq!(round_robin(&[3], 2), vec![3, 3]);
        assert_eq!(list(&[0, 1]), "cuda:0,cuda:1");
    }

    #[test]
    fn duplicate_or_missing_devices_are_clear_errors() {
        let e = open_devices(&[0, 0]).unwrap_err().to_string();
        assert!(e.contains("cuda:0 is listed twice"), "{e}");
        assert!(open_devices(&[]).is_err());
        // no driver here: a clear error; with one, cuda:64 does not exist
        let e = open_devices(&[64]).unwrap_err().to_string();
        assert!(
            e.contains("no CUDA device is usable") || e.contains("cuda:64 does not exist"),
            "{e}"
        );
    }
}
