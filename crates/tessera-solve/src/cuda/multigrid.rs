//! The multigrid cycles on a device: smoothed-aggregation AMG ([`DeviceAmg`]) and
//! p-multigrid ([`DevicePmg`]) as PCG preconditioners ([`DevicePreconditioner`]).
//!
//! The hierarchy is built on the host ([`Amg::setup`], [`PMultigrid::setup`]) and uploaded:
//! coarse operators, prolongators and restrictions as block CSR of `3 × 3` blocks
//! ([`DeviceBlockCsr`]), the inverted diagonal blocks, the Chebyshev intervals and the dense
//! coarse inverse. The finest level runs on the device operator the PCG uses (Bin-BCSR*,
//! dissertation §4.4.2) with the constraint filter `S A S + (I − S)`, so the fine matrix is
//! not stored twice. The cycle is the CPU reference's step for step ([`Amg::cycle`],
//! [`PMultigrid::cycle`]): the same smoother recurrences, restriction, coarse solve and
//! prolongation; only the summation order inside a SpMV row differs.

use std::sync::Mutex;

use tessera_gpu::{DeviceBuffer, Gpu};

use super::{cfg, to_u32, up, DeviceOperator, SolveKernels, BLOCK};
use crate::amg::{Amg, Cycle};
use crate::blockcsr::BlockCsr;
use crate::error::SolveError;
use crate::operator::BlockOperator;
use crate::pmg::PMultigrid;
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
    nrows: usize,
    ncols: usize,
    nnz: usize,
    /// Lanes per block row of the SpMV (a power of two, 2..=32, from the mean row length).
    group: u32,
    row_ptr: DeviceBuffer<u32>,
    cols: DeviceBuffer<u32>,
    vals: DeviceBuffer<f64>,
}

impl DeviceBlockCsr {
    /// Upload a host matrix.
    pub fn upload(gpu: &Gpu, m: &BlockCsr) -> Result<Self, SolveError> {
        to_u32(3 * m.nrows.max(m.ncols), "block CSR DOFs")?;
        let mean = m.nnz().div_ceil(m.nrows.max(1));
        let group = mean.next_power_of_two().clamp(2, 32) as u32;
        Ok(DeviceBlockCsr {
            nrows: m.nrows,
            ncols: m.ncols,
            nnz: m.nnz(),
            group,
            row_ptr: up(gpu, &m.row_ptr)?,
            cols: up(gpu, &m.cols)?,
            vals: up(gpu, &m.vals)?,
        })
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

struct DeviceLevel<'a> {
    a: LevelOp<'a>,
    dinv: DeviceBuffer<f64>,
    smoother: LevelSmoother,
    p: DeviceBlockCsr,
    r: DeviceBlockCsr,
}

/// A smoothed-aggregation hierarchy on a device (see the module docs), built from a host
/// [`Amg`].
pub struct DeviceAmg<'a> {
    levels: Vec<DeviceLevel<'a>>,
    coarse_n: u32,
    coarse_inverse: DeviceBuffer<f64>,
    cycle: Cycle,
    bytes: usize,
    vectors: Mutex<Vec<Vectors>>,
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
        })
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
        })
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
