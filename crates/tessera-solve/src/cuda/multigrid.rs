//! The multigrid cycles on a device: smoothed-aggregation AMG ([`DeviceAmg`]) and
//! p-multigrid ([`DevicePmg`]) as PCG preconditioners ([`DevicePreconditioner`]).
//!
//! The hierarchy is either built on the host ([`Amg::setup`], [`PMultigrid::setup`]) and
//! uploaded ([`DeviceAmg::upload`], [`DevicePmg::upload`]), or set up with its sparse
//! products on the device ([`DeviceAmg::setup`], [`DevicePmg::setup`]: block SpGEMM of
//! [`super::setup`] for the smoothed prolongators, restrictions and Galerkin operators, the
//! eigenvalue estimates on the device; the strength graph, aggregation and tentative
//! prolongators on the host from downloaded block norms). Either way the device holds coarse operators,
//! prolongators and restrictions as block CSR of `3 × 3` blocks ([`DeviceBlockCsr`]), the
//! inverted diagonal blocks, the Chebyshev intervals and the dense coarse inverse. The finest level runs on the device operator the PCG uses (Bin-BCSR*,
//! dissertation §4.4.2) with the constraint filter `S A S + (I − S)`, so the fine matrix is
//! not stored twice. The cycle is the CPU reference's step for step ([`Amg::cycle`],
//! [`PMultigrid::cycle`]): the same smoother recurrences, restriction, coarse solve and
//! prolongation; only the summation order inside a SpMV row differs.

use std::sync::Mutex;

use tessera_gpu::{DeviceBuffer, Gpu};

use std::time::Instant;

use super::setup::{
    device_galerkin, device_smooth_prolongator, download_block_norms, download_diagonal_blocks,
};
use rayon::prelude::*;

use super::{cfg, dot_into, to_u32, up, DeviceOperator, SolveKernels, BLOCK};
use crate::aggregation::{aggregate_mis2, strength_graph_of_norms, Aggregates};
use crate::amg::{
    coarse_inverse, inverse_diagonal_blocks, level_smoother, stats_from_sizes,
    tentative_prolongator, Amg, AmgParams, AmgStats, Cycle, Timer,
};
use crate::blockcsr::BlockCsr;
use crate::error::SolveError;
use crate::jacobi::{identity_on_fixed, invert_small};
use crate::nullspace::rigid_body_modes;
use crate::operator::BlockOperator;
use crate::pmg::PMultigrid;
use crate::pmg::{filter_prolongation, PmgParams};
#[allow(unused_imports)]
use crate::smoother::{lambda_max_estimate, lanczos_max, start_vector};
use crate::smoother::{LevelSmoother, Smoother};

/// A preconditioner `z = M⁻¹ r` on device vectors, for [`super::pcg_gpu_with`].
pub trait DevicePreconditioner {
    /// `z = M⁻¹ r` (`z` is overwritten).
    fn apply(
        &self,
        k: &SolveKernels<'_>,
        r: &DeviceBuffer<f64>,
        z: &mut DeviceBuffer<f64>,
    ) -> Result<(), SolveError>;
}

/// A block CSR matrix of `3 × 3` blocks in device memory ([`BlockCsr`] uploaded).
pub struct DeviceBlockCsr {
    pub(crate) nrows: usize,
    pub(crate) ncols: usize,
    pub(crate) nnz: usize,
    /// Lanes per block row of the SpMV (a power of two, 2..=32, from the mean row length).
    group: u32,
    pub(crate) row_ptr: DeviceBuffer<u32>,
    pub(crate) cols: DeviceBuffer<u32>,
    pub(crate) vals: DeviceBuffer<f64>,
}

impl DeviceBlockCsr {
    /// Upload a host matrix.
    pub fn upload(gpu: &Gpu, m: &BlockCsr) -> Result<Self, SolveError> {
        DeviceBlockCsr::from_parts(
            m.nrows,
            m.ncols,
            m.nnz(),
            up(gpu, &m.row_ptr)?,
            up(gpu, &m.cols)?,
            up(gpu, &m.vals)?,
        )
    }

    /// A matrix from device arrays built on the device (`nrows + 1` offsets, `nnz` sorted
    /// columns, `9 nnz` values).
    pub(crate) fn from_parts(
        nrows: usize,
        ncols: usize,
        nnz: usize,
        row_ptr: DeviceBuffer<u32>,
        cols: DeviceBuffer<u32>,
        vals: DeviceBuffer<f64>,
    ) -> Result<Self, SolveError> {
        to_u32(3 * nrows.max(ncols), "block CSR DOFs")?;
        let mean = nnz.div_ceil(nrows.max(1));
        let group = mean.next_power_of_two().clamp(2, 32) as u32;
        Ok(DeviceBlockCsr {
            nrows,
            ncols,
            nnz,
            group,
            row_ptr,
            cols,
            vals,
        })
    }

    /// Copy back to the host.
    pub fn download(&self, gpu: &Gpu) -> Result<BlockCsr, SolveError> {
        let row_ptr = gpu.download_range(&self.row_ptr, 0..self.nrows + 1)?;
        let (cols, vals) = if self.nnz == 0 {
            (Vec::new(), Vec::new())
        } else {
            (
                gpu.download_range(&self.cols, 0..self.nnz)?,
                gpu.download_range(&self.vals, 0..9 * self.nnz)?,
            )
        };
        Ok(BlockCsr {
            nrows: self.nrows,
            ncols: self.ncols,
            row_ptr,
            cols,
            vals,
        })
    }

    /// Stored blocks.
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// Block rows.
    pub fn num_block_rows(&self) -> usize {
        self.nrows
    }
    /// Block columns.
    pub fn num_block_cols(&self) -> usize {
        self.ncols
    }
    /// Device bytes.
    pub fn bytes(&self) -> usize {
        4 * (self.nrows + 1) + self.nnz * (4 + 72)
    }
    /// `y = A x` (`add = false`) or `y += A x` (`add = true`).
    pub fn spmv(
        &self,
        k: &SolveKernels<'_>,
        x: &DeviceBuffer<f64>,
        y: &DeviceBuffer<f64>,
        add: bool,
    ) -> Result<(), SolveError> {
        if x.len() < 3 * self.ncols || y.len() < 3 * self.nrows {
            return Err(SolveError::Dimension {
                expected: 3 * self.ncols,
                found: x.len(),
            });
        }
        if self.nrows == 0 {
            return Ok(());
        }
        let threads = self.nrows * self.group as usize;
        let n = self.nrows as u32;
        let add = u32::from(add);
        k.gpu
            .launch(
                &k.k(&format!("bcsr_spmv_{}", self.group))?,
                cfg(threads, BLOCK)?,
            )
            .arg(&n)
            .arg(&self.row_ptr)
            .arg(&self.cols)
            .arg(&self.vals)
            .arg(x)
            .arg(y)
            .arg(&add)
            .run()?;
        Ok(())
    }
}

/// The operator of a level: the finest one is the PCG's device operator with the
/// constraint filter (`y = A x`, then `y = x` on the constrained DOFs: `S A S + (I − S)` for
/// vectors that vanish there, as every vector of the cycle does); coarse ones are block CSR.
enum LevelOp<'a> {
    Fine {
        a: &'a dyn DeviceOperator,
        fixed: DeviceBuffer<u32>,
        nfixed: u32,
    },
    Csr(DeviceBlockCsr),
}

impl LevelOp<'_> {
    fn apply(
        &self,
        k: &SolveKernels<'_>,
        x: &DeviceBuffer<f64>,
        y: &mut DeviceBuffer<f64>,
    ) -> Result<(), SolveError> {
        match self {
            LevelOp::Fine { a, fixed, nfixed } => {
                a.apply(k, x, y)?;
                if *nfixed > 0 {
                    k.gpu
                        .launch(&k.k("mg_set_fixed")?, cfg(*nfixed as usize, BLOCK)?)
                        .arg(nfixed)
                        .arg(fixed)
                        .arg(x)
                        .arg(&*y)
                        .run()?;
                }
                Ok(())
            }
            LevelOp::Csr(m) => m.spmv(k, x, y, false),
        }
    }
    fn bytes(&self) -> usize {
        match self {
            LevelOp::Fine { fixed, .. } => fixed.bytes(),
            LevelOp::Csr(m) => m.bytes(),
        }
    }
}

fn fine_op<'a>(
    gpu: &Gpu,
    a: &'a dyn DeviceOperator,
    fixed: &[bool],
) -> Result<LevelOp<'a>, SolveError> {
    if a.block_size() != 3 || fixed.len() != 3 * a.num_block_rows() {
        return Err(SolveError::Dimension {
            expected: 3 * a.num_block_rows(),
            found: fixed.len(),
        });
    }
    let idx: Vec<u32> = (0..fixed.len())
        .filter(|&i| fixed[i])
        .map(|i| i as u32)
        .collect();
    Ok(LevelOp::Fine {
        a,
        nfixed: idx.len() as u32,
        fixed: up(gpu, &idx)?,
    })
}

/// Vectors of one level of the cycle.
struct Vectors {
    n: u32,
    b: DeviceBuffer<f64>,
    x: DeviceBuffer<f64>,
    r: DeviceBuffer<f64>,
    d: DeviceBuffer<f64>,
    q: DeviceBuffer<f64>,
    w: DeviceBuffer<f64>,
}

impl Vectors {
    fn new(gpu: &Gpu, n: usize) -> Result<Self, SolveError> {
        let z = || gpu.zeros::<f64>(n.max(1));
        Ok(Vectors {
            n: to_u32(n, "level DOFs")?,
            b: z()?,
            x: z()?,
            r: z()?,
            d: z()?,
            q: z()?,
            w: z()?,
        })
    }
}

fn vec_kernel(
    k: &SolveKernels<'_>,
    name: &str,
    n: u32,
    a: &DeviceBuffer<f64>,
    b: &DeviceBuffer<f64>,
) -> Result<(), SolveError> {
    k.gpu
        .launch(&k.k(name)?, cfg(n as usize, BLOCK)?)
        .arg(&n)
        .arg(a)
        .arg(b)
        .run()?;
    Ok(())
}

/// The smoother of [`LevelSmoother::smooth`] on device vectors: `x` from `b` (from zero with
/// `zero_start`), `r = b − A x` on return when `want_residual`.
#[allow(clippy::too_many_arguments)]
fn smooth(
    k: &SolveKernels<'_>,
    sm: &LevelSmoother,
    op: &LevelOp<'_>,
    dinv: &DeviceBuffer<f64>,
    v: &mut Vectors,
    zero_start: bool,
    want_residual: bool,
) -> Result<(), SolveError> {
    let n = v.n;
    if zero_start {
        vec_kernel(k, "mg_copy", n, &v.b, &v.r)?;
    } else {
        op.apply(k, &v.x, &mut v.q)?;
        k.gpu
            .launch(&k.k("mg_sub")?, cfg(n as usize, BLOCK)?)
            .arg(&n)
            .arg(&v.b)
            .arg(&v.q)
            .arg(&v.r)
            .run()?;
    }
    let steps: Vec<(f64, f64)> = match sm.kind {
        Smoother::Chebyshev { degree } => sm.chebyshev_coefficients(degree.max(1)),
        Smoother::Jacobi { sweeps, omega } => vec![(0.0, omega); sweeps.max(1)],
    };
    let last = steps.len() - 1;
    let nodes = n / 3;
    let step = k.k("mg_smooth_step")?;
    for (i, &(c_old, c_new)) in steps.iter().enumerate() {
        let x_zero = u32::from(zero_start && i == 0);
        k.gpu
            .launch(&step, cfg(nodes as usize, BLOCK)?)
            .arg(&nodes)
            .arg(dinv)
            .arg(&v.r)
            .arg(&v.d)
            .arg(&v.x)
            .arg(&c_old)
            .arg(&c_new)
            .arg(&x_zero)
            .run()?;
        if i < last || want_residual {
            op.apply(k, &v.d, &mut v.q)?;
            vec_kernel(k, "mg_sub_assign", n, &v.q, &v.r)?;
        }
    }
    Ok(())
}

/// The estimate of [`lambda_max_estimate`] on the device: the same CG steps of block-Jacobi
/// preconditioned CG with the level operator `apply` from the same start vector (zero on
/// `fixed`),
/// with deterministic device dot products; the Lanczos matrix's largest eigenvalue on the
/// host ([`lanczos_max`]). Equal to the host estimate up to rounding.
#[allow(clippy::type_complexity)]
fn device_lambda_max(
    k: &SolveKernels<'_>,
    apply: &dyn Fn(&DeviceBuffer<f64>, &mut DeviceBuffer<f64>) -> Result<(), SolveError>,
    dinv: &DeviceBuffer<f64>,
    n_dofs: usize,
    steps: usize,
    fixed: Option<&[bool]>,
) -> Result<f64, SolveError> {
    let gpu = k.gpu;
    let n = to_u32(n_dofs, "level DOFs")?;
    let nodes = n / 3;
    let r = up(gpu, &start_vector(n_dofs, fixed))?;
    let z = gpu.zeros::<f64>(n_dofs.max(1))?;
    let mut q = gpu.zeros::<f64>(n_dofs.max(1))?;
    let out = gpu.zeros::<f64>(1)?;
    let jacobi = k.k("lanczos_jacobi")?;
    let axpy = k.k("lanczos_axpy")?;
    let xpby = k.k("lanczos_xpby")?;
    let precondition = |r: &DeviceBuffer<f64>, z: &DeviceBuffer<f64>| -> Result<(), SolveError> {
        gpu.launch(&jacobi, cfg(nodes as usize, BLOCK)?)
            .arg(&nodes)
            .arg(dinv)
            .arg(r)
            .arg(z)
            .run()?;
        Ok(())
    };
    let dot = |a: &DeviceBuffer<f64>, b: &DeviceBuffer<f64>| -> Result<f64, SolveError> {
        dot_into(k, n, a, b, &out, 0)?;
        Ok(gpu.download_at(&out, 0)?)
    };
    precondition(&r, &z)?;
    let p = gpu.duplicate(&z)?;
    let mut rz = dot(&r, &z)?;
    let (mut alphas, mut betas) = (Vec::new(), Vec::new());
    for _ in 0..steps.max(1) {
        if !(rz > 0.0) {
            break;
        }
        apply(&p, &mut q)?;
        let pq = dot(&p, &q)?;
        if !(pq > 0.0) {
            break;
        }
        let alpha = rz / pq;
        gpu.launch(&axpy, cfg(n as usize, BLOCK)?)
            .arg(&n)
            .arg(&alpha)
            .arg(&q)
            .arg(&r)
            .run()?;
        precondition(&r, &z)?;
        let rz_new = dot(&r, &z)?;
        let beta = rz_new / rz;
        alphas.push(alpha);
        betas.push(beta);
        gpu.launch(&xpby, cfg(n as usize, BLOCK)?)
            .arg(&n)
            .arg(&z)
            .arg(&beta)
            .arg(&p)
            .run()?;
        rz = rz_new;
    }
    Ok(lanczos_max(&alphas, &betas))
}

struct DeviceLevel<'a> {
    a: LevelOp<'a>,
    dinv: DeviceBuffer<f64>,
    smoother: LevelSmoother,
    p: DeviceBlockCsr,
    r: DeviceBlockCsr,
}

/// A smoothed-aggregation hierarchy on a device (see the module docs), built from a host
/// [`Amg`] ([`DeviceAmg::upload`]) or set up on the device ([`DeviceAmg::setup`]).
pub struct DeviceAmg<'a> {
    levels: Vec<DeviceLevel<'a>>,
    coarse_n: u32,
    coarse_inverse: DeviceBuffer<f64>,
    cycle: Cycle,
    bytes: usize,
    vectors: Mutex<Vec<Vectors>>,
    /// The aggregates of every level with smoothing (set up on the device only).
    aggregates: Vec<Aggregates>,
    /// Statistics of a device setup (set up on the device only).
    stats: Option<AmgStats>,
}

impl<'a> DeviceAmg<'a> {
    /// Upload `amg`. With `fine = Some((a, fixed))` the finest level runs on the device
    /// operator `a` (the unfiltered matrix whose filtered copy `amg` was built from, with its
    /// constrained DOFs `fixed`); otherwise the finest level's block CSR is uploaded too.
    pub fn upload(
        gpu: &Gpu,
        amg: &Amg,
        fine: Option<(&'a dyn DeviceOperator, &[bool])>,
    ) -> Result<Self, SolveError> {
        let mut levels = Vec::with_capacity(amg.levels.len());
        let mut vectors = Vec::new();
        let mut bytes = 0;
        for (l, lev) in amg.levels.iter().enumerate() {
            let a = match (l, fine) {
                (0, Some((op, fixed))) => {
                    if op.num_block_rows() != lev.a.nrows {
                        return Err(SolveError::Dimension {
                            expected: 3 * lev.a.nrows,
                            found: 3 * op.num_block_rows(),
                        });
                    }
                    fine_op(gpu, op, fixed)?
                }
                _ => LevelOp::Csr(DeviceBlockCsr::upload(gpu, &lev.a)?),
            };
            let level = DeviceLevel {
                a,
                dinv: up(gpu, lev.dinv.inverses())?,
                smoother: lev.smoother,
                p: DeviceBlockCsr::upload(gpu, &lev.p)?,
                r: DeviceBlockCsr::upload(gpu, &lev.r)?,
            };
            bytes += level.a.bytes() + level.p.bytes() + level.r.bytes() + level.dinv.bytes();
            levels.push(level);
            vectors.push(Vectors::new(gpu, 3 * lev.a.nrows)?);
        }
        let nc = 3 * amg.coarse.nrows;
        vectors.push(Vectors::new(gpu, nc)?);
        let coarse_inverse = up(gpu, &amg.coarse_inverse)?;
        bytes += coarse_inverse.bytes();
        Ok(DeviceAmg {
            levels,
            coarse_n: to_u32(nc, "coarse DOFs")?,
            coarse_inverse,
            cycle: amg.params.cycle,
            bytes,
            vectors: Mutex::new(vectors),
            aggregates: Vec::new(),
            stats: None,
        })
    }

    /// Set up the hierarchy of the filtered fine operator `a0` on the device (from
    /// [`super::device_filtered_copy`]) with the algorithm of [`Amg::setup`], stage for stage:
    /// `fixed` marks the constrained DOFs, `positions` the nodes of the rigid-body modes.
    /// Per level, the device computes the block norms and diagonal blocks of the level
    /// operator, the `λ_max` estimate (the same CG steps as [`lambda_max_estimate`]), the
    /// smoothed prolongator, its transpose and the Galerkin product
    /// ([`super::device_smooth_prolongator`], [`super::device_galerkin`]); the host runs the
    /// strength graph and MIS(2) aggregation on the downloaded block norms (pattern and
    /// `‖A_k‖²`, an eighth of the operator's bytes), inverts the `3 × 3` diagonal blocks and
    /// builds the tentative prolongator (uploaded). Only the coarsest operator comes back
    /// whole, for its dense inverse. The aggregates equal the host's exactly; `P`, `R` and the
    /// coarse operators equal them up to the rounding of the `λ_max` estimate. With `fine`,
    /// the finest level's cycle runs on that device operator (the unfiltered matrix `a0` was
    /// filtered from) and `a0` is freed after the first Galerkin product. Stage times (ms,
    /// device stages synchronized) are in [`DeviceAmg::stats`].
    pub fn setup(
        k: &SolveKernels<'_>,
        a0: DeviceBlockCsr,
        fixed: &[bool],
        positions: &[[f64; 3]],
        params: &AmgParams,
        fine: Option<&'a dyn DeviceOperator>,
    ) -> Result<Self, SolveError> {
        params.validate()?;
        let gpu = k.gpu;
        let n0 = a0.nrows;
        if positions.len() != n0
            || fixed.len() != 3 * n0
            || a0.ncols != n0
            || fine.is_some_and(|f| f.num_block_rows() != n0)
        {
            return Err(SolveError::Dimension {
                expected: n0,
                found: positions.len(),
            });
        }
        let prim = gpu.primitives()?;
        let m = params.near_null_space.dim();
        let mut b = rigid_body_modes(positions, fixed, params.near_null_space);
        let mut times = Timer::default();
        let mut levels: Vec<DeviceLevel<'a>> = Vec::new();
        let mut vectors = Vec::new();
        let mut aggregates_all = Vec::new();
        let (mut dofs, mut blocks) = (Vec::new(), Vec::new());
        let mut hierarchy_bytes = 0usize;
        let mut bytes = 0usize;
        let mut a = a0;
        let mut group = 1usize;
        while levels.len() + 1 < params.max_levels && 3 * a.nrows > params.coarse_size {
            let t = Instant::now();
            let norms = download_block_norms(k, &a)?;
            times.add("norms_device", t);
            let t = Instant::now();
            let graph = strength_graph_of_norms(&norms, group, params.strength);
            drop(norms);
            let aggregates = aggregate_mis2(&graph);
            drop(graph);
            times.add("aggregation", t);
            let na = aggregates.num_aggregates();
            if na == 0 || na * m >= 3 * a.nrows * 9 / 10 {
                break;
            }
            let t = Instant::now();
            let (pt, bc) = tentative_prolongator(&aggregates, group, &b, m)?;
            let pt = DeviceBlockCsr::upload(gpu, &pt)?;
            times.add("tentative", t);
            let t = Instant::now();
            let diag = download_diagonal_blocks(k, &a)?;
            let dinv = inverse_diagonal_blocks(a.nrows, |i| {
                let mut d = [0.0; 9];
                d.copy_from_slice(&diag[9 * i..9 * i + 9]);
                d
            })?;
            drop(diag);
            let dinv = up(gpu, dinv.inverses())?;
            let lambda = device_lambda_max(
                k,
                &|x, y| a.spmv(k, x, y, false),
                &dinv,
                3 * a.nrows,
                params.eigen_steps,
                None,
            )?;
            times.add("eigenvalues_device", t);
            let t = Instant::now();
            let omega = params.prolongation_damping / lambda;
            let p = device_smooth_prolongator(k, &prim, &a, &dinv, &pt, omega)?;
            drop(pt);
            gpu.synchronize()?;
            times.add("smoothing_device", t);
            let t = Instant::now();
            let (r, ac) = device_galerkin(k, &prim, &a, &p)?;
            gpu.synchronize()?;
            times.add("galerkin_device", t);
            dofs.push(3 * a.nrows);
            blocks.push(a.nnz);
            let first = levels.is_empty();
            let level_dofs = 3 * a.nrows;
            let a_op = std::mem::replace(&mut a, ac);
            hierarchy_bytes += (if first { 0 } else { a_op.bytes() }) + p.bytes() + r.bytes();
            hierarchy_bytes += dinv.bytes();
            let op = match (first, fine) {
                (true, Some(f)) => {
                    drop(a_op);
                    fine_op(gpu, f, fixed)?
                }
                _ => LevelOp::Csr(a_op),
            };
            bytes += op.bytes() + p.bytes() + r.bytes() + dinv.bytes();
            vectors.push(Vectors::new(gpu, level_dofs)?);
            levels.push(DeviceLevel {
                a: op,
                dinv,
                smoother: level_smoother(params, lambda),
                p,
                r,
            });
            aggregates_all.push(aggregates);
            b = bc;
            group = m / 3;
        }
        let t = Instant::now();
        let coarse = a.download(gpu)?;
        let inv = coarse_inverse(&coarse)?;
        let nc = 3 * coarse.nrows;
        let coarse_inv = up(gpu, &inv)?;
        times.add("coarse", t);
        dofs.push(nc);
        blocks.push(coarse.nnz());
        if !levels.is_empty() {
            hierarchy_bytes += coarse.bytes();
        }
        hierarchy_bytes += 8 * inv.len();
        bytes += coarse_inv.bytes();
        vectors.push(Vectors::new(gpu, nc)?);
        drop(a);
        Ok(DeviceAmg {
            levels,
            coarse_n: to_u32(nc, "coarse DOFs")?,
            coarse_inverse: coarse_inv,
            cycle: params.cycle,
            bytes,
            vectors: Mutex::new(vectors),
            aggregates: aggregates_all,
            stats: Some(stats_from_sizes(dofs, blocks, hierarchy_bytes, times.0)),
        })
    }

    /// Number of levels (the coarsest included).
    pub fn num_levels(&self) -> usize {
        self.levels.len() + 1
    }

    /// Statistics of a hierarchy set up by [`DeviceAmg::setup`] (`None` when uploaded).
    pub fn stats(&self) -> Option<&AmgStats> {
        self.stats.as_ref()
    }

    /// The aggregates of every level with smoothing, finest first (set up by
    /// [`DeviceAmg::setup`]; empty when uploaded).
    pub fn aggregates(&self) -> &[Aggregates] {
        &self.aggregates
    }

    /// Host copies of level `l`'s prolongator, restriction and, for levels stored as block
    /// CSR, operator (`None` for a finest level on the PCG's operator); for conformance
    /// tests against [`Amg`].
    #[allow(clippy::type_complexity)]
    pub fn download_level(
        &self,
        gpu: &Gpu,
        l: usize,
    ) -> Result<(BlockCsr, BlockCsr, Option<BlockCsr>), SolveError> {
        let lev = self.levels.get(l).ok_or(SolveError::Dimension {
            expected: self.levels.len(),
            found: l,
        })?;
        let a = match &lev.a {
            LevelOp::Csr(m) => Some(m.download(gpu)?),
            LevelOp::Fine { .. } => None,
        };
        Ok((lev.p.download(gpu)?, lev.r.download(gpu)?, a))
    }

    /// Host copy of the dense coarse inverse.
    pub fn download_coarse_inverse(&self, gpu: &Gpu) -> Result<Vec<f64>, SolveError> {
        let n = self.coarse_n as usize;
        Ok(gpu.download_range(&self.coarse_inverse, 0..n * n)?)
    }

    /// Device bytes of the hierarchy (vectors excluded; the finest operator excluded when
    /// it is the PCG's).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// One cycle for `A x = b` from `x = 0` on device vectors of the finest level's length.
    pub fn cycle(
        &self,
        k: &SolveKernels<'_>,
        b: &DeviceBuffer<f64>,
        x: &DeviceBuffer<f64>,
    ) -> Result<(), SolveError> {
        let mut v = self.vectors.lock().unwrap_or_else(|e| e.into_inner());
        let n = v[0].n;
        vec_kernel(k, "mg_copy", n, b, &v[0].b)?;
        self.cycle_at(k, 0, &mut v)?;
        vec_kernel(k, "mg_copy", n, &v[0].x, x)
    }

    fn cycle_at(
        &self,
        k: &SolveKernels<'_>,
        l: usize,
        v: &mut [Vectors],
    ) -> Result<(), SolveError> {
        if l == self.levels.len() {
            let n = self.coarse_n;
            let sc = &v[l];
            k.gpu
                .launch(&k.k("mg_dense_mv")?, cfg(32 * n as usize, BLOCK)?)
                .arg(&n)
                .arg(&self.coarse_inverse)
                .arg(&sc.b)
                .arg(&sc.x)
                .run()?;
            return Ok(());
        }
        let lev = &self.levels[l];
        smooth(k, &lev.smoother, &lev.a, &lev.dinv, &mut v[l], true, true)?;
        {
            let (lo, hi) = v.split_at_mut(l + 1);
            lev.r.spmv(k, &lo[l].r, &hi[0].b, false)?;
        }
        self.cycle_at(k, l + 1, v)?;
        if self.cycle == Cycle::W && l + 1 < self.levels.len() {
            // second visit on the remaining coarse residual
            {
                let ac = &self.levels[l + 1].a;
                let sc = &mut v[l + 1];
                vec_kernel(k, "mg_copy", sc.n, &sc.x, &sc.w)?;
                ac.apply(k, &sc.x, &mut sc.q)?;
                vec_kernel(k, "mg_sub_assign", sc.n, &sc.q, &sc.b)?;
            }
            self.cycle_at(k, l + 1, v)?;
            let sc = &v[l + 1];
            vec_kernel(k, "mg_add_assign", sc.n, &sc.w, &sc.x)?;
        }
        {
            let (lo, hi) = v.split_at_mut(l + 1);
            lev.p.spmv(k, &hi[0].x, &lo[l].x, true)?;
        }
        smooth(k, &lev.smoother, &lev.a, &lev.dinv, &mut v[l], false, false)
    }
}

impl DevicePreconditioner for DeviceAmg<'_> {
    fn apply(
        &self,
        k: &SolveKernels<'_>,
        r: &DeviceBuffer<f64>,
        z: &mut DeviceBuffer<f64>,
    ) -> Result<(), SolveError> {
        self.cycle(k, r, z)
    }
}

/// p-multigrid on a device (see the module docs), built from a host [`PMultigrid`]: the
/// order-`p` level on the PCG's device operator, the order-1 level by [`DeviceAmg`].
pub struct DevicePmg<'a> {
    fine: LevelOp<'a>,
    dinv: DeviceBuffer<f64>,
    smoother: LevelSmoother,
    p: DeviceBlockCsr,
    r: DeviceBlockCsr,
    /// The AMG of the order-1 level.
    pub amg: DeviceAmg<'static>,
    bytes: usize,
    vectors: Mutex<(Vectors, DeviceBuffer<f64>, DeviceBuffer<f64>)>,
    /// Setup stages of [`DevicePmg::setup`] (ms; empty when uploaded).
    pub setup_ms: Vec<(String, f64)>,
}

impl<'a> DevicePmg<'a> {
    /// Upload `pmg`; `a` is the order-`p` device operator (the matrix `pmg` was set up for,
    /// unfiltered) and `fixed` its constrained DOFs.
    pub fn upload<A: BlockOperator + ?Sized>(
        gpu: &Gpu,
        pmg: &PMultigrid<'_, A>,
        a: &'a dyn DeviceOperator,
        fixed: &[bool],
    ) -> Result<Self, SolveError> {
        let fine = fine_op(gpu, a, fixed)?;
        let dinv = up(gpu, pmg.fine_dinv().inverses())?;
        let p = DeviceBlockCsr::upload(gpu, &pmg.p)?;
        let r = DeviceBlockCsr::upload(gpu, &pmg.r)?;
        let amg = DeviceAmg::upload(gpu, &pmg.amg, None)?;
        let bytes = fine.bytes() + dinv.bytes() + p.bytes() + r.bytes() + amg.bytes();
        let nc = 3 * pmg.p.ncols;
        Ok(DevicePmg {
            vectors: Mutex::new((
                Vectors::new(gpu, 3 * a.num_block_rows())?,
                gpu.zeros::<f64>(nc.max(1))?,
                gpu.zeros::<f64>(nc.max(1))?,
            )),
            fine,
            dinv,
            smoother: pmg.smoother,
            p,
            r,
            amg,
            bytes,
            setup_ms: Vec::new(),
        })
    }

    /// Set up p-multigrid with the products on the device, without a host copy of the
    /// order-`p` matrix: `a` is the order-`p` device operator (unfiltered), `a_filtered` its
    /// filtered copy on the device ([`super::device_filtered_copy`]; freed after the
    /// Galerkin product), `prolongation` the degree elevation (fine nodes × order-1 nodes),
    /// `fixed` the constrained DOFs of the order-`p` level, `coarse_fixed` and
    /// `coarse_positions` those of the order-1 level. The same algorithm as
    /// [`PMultigrid::setup`]: the inverted diagonal blocks from the downloaded block diagonal,
    /// `λ_max(D⁻¹Ā_p)` by the same CG steps on the device, the Galerkin product
    /// `P̄ᵀ Ā_p P̄` on the device ([`super::device_galerkin`]), then [`DeviceAmg::setup`] on
    /// the order-1 operator.
    #[allow(clippy::too_many_arguments)]
    pub fn setup(
        k: &SolveKernels<'_>,
        a: &'a dyn DeviceOperator,
        a_filtered: DeviceBlockCsr,
        prolongation: &BlockCsr,
        fixed: &[bool],
        coarse_fixed: &[bool],
        coarse_positions: &[[f64; 3]],
        params: &PmgParams,
    ) -> Result<Self, SolveError> {
        params.amg.validate()?;
        let gpu = k.gpu;
        let n = a.num_block_rows();
        if a.block_size() != 3
            || prolongation.nrows != n
            || a_filtered.nrows != n
            || fixed.len() != 3 * n
            || coarse_fixed.len() != 3 * prolongation.ncols
            || coarse_positions.len() != prolongation.ncols
        {
            return Err(SolveError::Dimension {
                expected: 3 * n,
                found: fixed.len(),
            });
        }
        let prim = gpu.primitives()?;
        let mut times = Timer::default();
        let t = Instant::now();
        // the inverted diagonal blocks, identity on constrained DOFs (as BlockJacobi::new)
        let diag = gpu.download_range(a.diagonal(), 0..9 * n)?;
        let inv: Vec<Result<Vec<f64>, SolveError>> = (0..n)
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| {
                let mut b = diag[9 * i..9 * i + 9].to_vec();
                identity_on_fixed(&mut b, 3, &fixed[3 * i..3 * i + 3]);
                invert_small(&b, 3).ok_or(SolveError::SingularBlock { node: i })
            })
            .collect();
        let mut flat = Vec::with_capacity(9 * n);
        for b in inv {
            flat.extend(b?);
        }
        drop(diag);
        let dinv = up(gpu, &flat)?;
        drop(flat);
        let fine = fine_op(gpu, a, fixed)?;
        let lambda = device_lambda_max(
            k,
            &|x, y| fine.apply(k, x, y),
            &dinv,
            3 * n,
            params.amg.eigen_steps,
            Some(fixed),
        )?;
        let smoother = LevelSmoother {
            kind: params.smoother,
            ..level_smoother(&params.amg, lambda)
        };
        times.add("fine_smoother", t);
        let t = Instant::now();
        let p = filter_prolongation(prolongation, fixed, coarse_fixed);
        let p = DeviceBlockCsr::upload(gpu, &p)?;
        let (r, a1) = device_galerkin(k, &prim, &a_filtered, &p)?;
        drop(a_filtered);
        gpu.synchronize()?;
        times.add("galerkin_p_device", t);
        let amg = DeviceAmg::setup(k, a1, coarse_fixed, coarse_positions, &params.amg, None)?;
        if let Some(st) = amg.stats() {
            times.0.extend(st.setup_ms.iter().cloned());
        }
        let bytes = fine.bytes() + dinv.bytes() + p.bytes() + r.bytes() + amg.bytes();
        let nc = 3 * prolongation.ncols;
        Ok(DevicePmg {
            vectors: Mutex::new((
                Vectors::new(gpu, 3 * n)?,
                gpu.zeros::<f64>(nc.max(1))?,
                gpu.zeros::<f64>(nc.max(1))?,
            )),
            fine,
            dinv,
            smoother,
            p,
            r,
            amg,
            bytes,
            setup_ms: times.0,
        })
    }

    /// Levels: the order-`p` level and the AMG's.
    pub fn num_levels(&self) -> usize {
        1 + self.amg.num_levels()
    }

    /// Device bytes of the transfer `P̄` and `P̄ᵀ`.
    pub fn transfer_bytes(&self) -> usize {
        self.p.bytes() + self.r.bytes()
    }

    /// The smoother of the order-`p` level with its Chebyshev interval.
    pub fn smoother(&self) -> &LevelSmoother {
        &self.smoother
    }

    /// Device bytes of the hierarchy (vectors and the order-`p` operator excluded).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// One cycle for `Ā x = b` from `x = 0`.
    pub fn cycle(
        &self,
        k: &SolveKernels<'_>,
        b: &DeviceBuffer<f64>,
        x: &DeviceBuffer<f64>,
    ) -> Result<(), SolveError> {
        let mut guard = self.vectors.lock().unwrap_or_else(|e| e.into_inner());
        let (v, bc, xc) = &mut *guard;
        let n = v.n;
        vec_kernel(k, "mg_copy", n, b, &v.b)?;
        smooth(k, &self.smoother, &self.fine, &self.dinv, v, true, true)?;
        self.r.spmv(k, &v.r, bc, false)?;
        self.amg.cycle(k, bc, xc)?;
        self.p.spmv(k, xc, &v.x, true)?;
        smooth(k, &self.smoother, &self.fine, &self.dinv, v, false, false)?;
        vec_kernel(k, "mg_copy", n, &v.x, x)
    }
}

impl DevicePreconditioner for DevicePmg<'_> {
    fn apply(
        &self,
        k: &SolveKernels<'_>,
        r: &DeviceBuffer<f64>,
        z: &mut DeviceBuffer<f64>,
    ) -> Result<(), SolveError> {
        self.cycle(k, r, z)
    }
}
