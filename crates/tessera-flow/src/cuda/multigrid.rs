//! The Galerkin-consistent multigrid and MGPCG on the GPU (f32), uploaded from a CPU
//! [`Multigrid`] hierarchy so both run the same levels and the same coarsest-level inverse.

use std::sync::Arc;

use tessera_gpu::{DeviceBuffer, Gpu, LaunchConfig};

use super::{items, reduce_blocks, FlowKernels};
use crate::poisson::{Method, MgParams, Multigrid, SolveReport};
use crate::FlowError;

/// One level on the device.
pub(crate) struct GpuLevel {
    pub(crate) dims: [i32; 3],
    pub(crate) dim: i32,
    pub(crate) d: DeviceBuffer<f32>,
    /// Face weights per axis (the z buffer is a one-element dummy in 2D).
    pub(crate) w: [DeviceBuffer<f32>; 3],
    /// Solution and right-hand side of the coarse problem (unused on the finest level).
    x: DeviceBuffer<f32>,
    b: DeviceBuffer<f32>,
}

impl GpuLevel {
    fn cells(&self) -> usize {
        self.dims.iter().map(|&v| v as usize).product()
    }
}

struct Regions {
    label: DeviceBuffer<i32>,
    count: DeviceBuffer<i32>,
    sums: DeviceBuffer<f64>,
}

/// The multigrid hierarchy and the CG vectors on a GPU.
pub struct GpuMultigrid {
    gpu: Arc<Gpu>,
    k: Arc<FlowKernels>,
    pub params: MgParams,
    pub(crate) levels: Vec<GpuLevel>,
    coarse_n: usize,
    coarse_cells: DeviceBuffer<i32>,
    coarse_m: DeviceBuffer<f32>,
    regions: Option<Regions>,
    r: DeviceBuffer<f32>,
    z: DeviceBuffer<f32>,
    d: DeviceBuffer<f32>,
    q: DeviceBuffer<f32>,
    acc: DeviceBuffer<f64>,
    /// Iterations the last solve needed (the next solve's first batch).
    pub needed: usize,
    /// Bytes one V-cycle must move ([`vcycle_bytes`]).
    pub vcycle_bytes: f64,
}

/// Bytes one V-cycle must move on a hierarchy, kernel by kernel as implemented (each
/// smoothing pass reads `x`, `b`, `D` and the weights once and writes the colour's `x`;
/// the residual-restriction reads the same and writes the coarse `b` and `x`; the
/// prolongation reads the coarse `x` and reads and writes the fine `x`; the coarsest
/// solve reads its dense inverse): the numerator of the bandwidth floor.
pub fn vcycle_bytes(mg: &Multigrid<f32>) -> f64 {
    let p = mg.params;
    let last = mg.levels.len() - 1;
    let mut bytes = 0.0;
    for (l, lev) in mg.levels.iter().enumerate() {
        let n = lev.len() as f64;
        let arrays = 3.0 + lev.dim as f64; // x, b, D, weights
        if l == last {
            let m = mg.coarse.cells.len() as f64;
            bytes += 4.0 * m * m + 12.0 * m;
            continue;
        }
        let nc = mg.levels[l + 1].len() as f64;
        let sweeps = (p.pre_smooth + p.post_smooth) as f64;
        // a colour pass reads every array once and writes half of x
        bytes += sweeps * 2.0 * (4.0 * arrays * n + 2.0 * n);
        bytes += 4.0 * arrays * n + 8.0 * nc; // residual + restriction
        bytes += 8.0 * n + 4.0 * nc; // prolongation
    }
    bytes
}

impl GpuMultigrid {
    /// Upload the levels, the coarsest inverse and the region labels of `mg`.
    pub fn upload(
        gpu: Arc<Gpu>,
        k: Arc<FlowKernels>,
        mg: &Multigrid<f32>,
    ) -> Result<Self, FlowError> {
        if mg.params.pre_smooth == 0 {
            return Err(FlowError::Invalid(
                "the GPU multigrid needs at least one pre-smoothing sweep".into(),
            ));
        }
        let mut levels = Vec::with_capacity(mg.levels.len());
        for (l, lev) in mg.levels.iter().enumerate() {
            let n = lev.len();
            let w = |a: usize| -> Result<DeviceBuffer<f32>, FlowError> {
                Ok(if a < lev.dim {
                    gpu.upload(&lev.weights[a])?
                } else {
                    gpu.zeros(1)?
                })
            };
            levels.push(GpuLevel {
                dims: lev.dims.map(|v| v as i32),
                dim: lev.dim as i32,
                d: gpu.upload(&lev.dirichlet)?,
                w: [w(0)?, w(1)?, w(2)?],
                x: gpu.zeros(if l == 0 { 1 } else { n })?,
                b: gpu.zeros(if l == 0 { 1 } else { n })?,
            });
        }
        let cn = mg.coarse.cells.len();
        let cells: Vec<i32> = mg.coarse.cells.iter().map(|&c| c as i32).collect();
        let m: Vec<f32> = mg.coarse.inverse.iter().map(|&v| v as f32).collect();
        let regions = if mg.floating.any() {
            let label: Vec<i32> = mg
                .floating
                .label
                .iter()
                .map(|&l| if l == u32::MAX { -1 } else { l as i32 })
                .collect();
            let count: Vec<i32> = mg.floating.count.iter().map(|&c| c as i32).collect();
            Some(Regions {
                label: gpu.upload(&label)?,
                count: gpu.upload(&count)?,
                sums: gpu.zeros(count.len())?,
            })
        } else {
            None
        };
        let n0 = mg.levels[0].len();
        let slots = 3 * (mg.params.max_iterations + 2) + 1;
        Ok(GpuMultigrid {
            coarse_n: cn,
            coarse_cells: gpu.upload(&cells)?,
            coarse_m: gpu.upload(&m)?,
            regions,
            r: gpu.zeros(n0)?,
            z: gpu.zeros(n0)?,
            d: gpu.zeros(n0)?,
            q: gpu.zeros(n0)?,
            acc: gpu.zeros(slots)?,
            needed: 3,
            vcycle_bytes: vcycle_bytes(mg),
            params: mg.params,
            levels,
            k,
            gpu,
        })
    }

    /// Number of levels.
    pub fn levels(&self) -> usize {
        self.levels.len()
    }
    /// Cells of the finest level.
    pub fn cells(&self) -> usize {
        self.levels[0].cells()
    }
    pub(crate) fn finest(&self) -> &GpuLevel {
        &self.levels[0]
    }

    fn smooth(
        &self,
        l: usize,
        x: &DeviceBuffer<f32>,
        b: &DeviceBuffer<f32>,
        color: i32,
        zero_init: bool,
    ) -> Result<(), FlowError> {
        let lev = &self.levels[l];
        let [nx, ny, nz] = lev.dims;
        let half = ((nx + 1) / 2) as usize * ny as usize * nz as usize;
        self.gpu
            .launch(&self.k.smooth, items(half)?)
            .arg(&nx)
            .arg(&ny)
            .arg(&nz)
            .arg(&lev.dim)
            .arg(&color)
            .arg(&(zero_init as i32))
            .arg(&lev.d)
            .arg(&lev.w[0])
            .arg(&lev.w[1])
            .arg(&lev.w[2])
            .arg(b)
            .arg(x)
            .run()?;
        Ok(())
    }

    fn coarse_solve(&self, x: &DeviceBuffer<f32>, b: &DeviceBuffer<f32>) -> Result<(), FlowError> {
        let n = self.coarse_n;
        if n == 0 {
            return Ok(());
        }
        let t = 128u32;
        let cfg = LaunchConfig::blocks(n.div_ceil(t as usize) as u32, t).with_shared(4 * n as u32);
        self.gpu
            .launch(&self.k.coarse_solve, cfg)
            .arg(&(n as i32))
            .arg(&self.coarse_cells)
            .arg(&self.coarse_m)
            .arg(b)
            .arg(x)
            .run()?;
        Ok(())
    }

    /// One V-cycle on the finest level improving `x` for `A x = b`; with `zero_init` the
    /// cycle starts from `x = 0` whatever `x` holds (the preconditioner).
    pub fn vcycle(
        &self,
        x: &DeviceBuffer<f32>,
        b: &DeviceBuffer<f32>,
        zero_init: bool,
    ) -> Result<(), FlowError> {
        let last = self.levels.len() - 1;
        let p = self.params;
        if last == 0 {
            return self.coarse_solve(x, b);
        }
        for l in 0..last {
            let lev = &self.levels[l];
            let (xl, bl) = if l == 0 { (x, b) } else { (&lev.x, &lev.b) };
            for s in 0..p.pre_smooth {
                self.smooth(l, xl, bl, 0, zero_init && l == 0 && s == 0)?;
                self.smooth(l, xl, bl, 1, false)?;
            }
            let c = &self.levels[l + 1];
            let [nx, ny, nz] = lev.dims;
            let [cx, cy, cz] = c.dims;
            self.gpu
                .launch(&self.k.restrict, items(c.cells())?)
                .arg(&nx)
                .arg(&ny)
                .arg(&nz)
                .arg(&lev.dim)
                .arg(&lev.d)
                .arg(&lev.w[0])
                .arg(&lev.w[1])
                .arg(&lev.w[2])
                .arg(xl)
                .arg(bl)
                .arg(&cx)
                .arg(&cy)
                .arg(&cz)
                .arg(&c.b)
                .arg(&c.x)
                .arg(&0.5f32)
                .run()?;
        }
        let lc = &self.levels[last];
        self.coarse_solve(&lc.x, &lc.b)?;
        let omega = p.correction as f32;
        for l in (0..last).rev() {
            let lev = &self.levels[l];
            let (xl, bl) = if l == 0 { (x, b) } else { (&lev.x, &lev.b) };
            let c = &self.levels[l + 1];
            let [nx, ny, nz] = lev.dims;
            self.gpu
                .launch(&self.k.prolong, items(lev.cells())?)
                .arg(&nx)
                .arg(&ny)
                .arg(&nz)
                .arg(xl)
                .arg(&c.dims[0])
                .arg(&c.dims[1])
                .arg(&c.x)
                .arg(&omega)
                .run()?;
            for _ in 0..p.post_smooth {
                self.smooth(l, xl, bl, 1, false)?;
                self.smooth(l, xl, bl, 0, false)?;
            }
        }
        Ok(())
    }

    /// Subtract each enclosed region's mean from `v` (the region sums must be zero).
    fn project_regions(&self, v: &DeviceBuffer<f32>) -> Result<(), FlowError> {
        let Some(reg) = &self.regions else {
            return Ok(());
        };
        let n = self.cells();
        self.gpu
            .launch(&self.k.region_sum, items(n)?)
            .arg(&(n as i64))
            .arg(&reg.label)
            .arg(v)
            .arg(&reg.sums)
            .run()?;
        self.gpu
            .launch(&self.k.region_subtract, items(n)?)
            .arg(&(n as i64))
            .arg(&reg.label)
            .arg(&reg.sums)
            .arg(&reg.count)
            .arg(v)
            .run()?;
        Ok(())
    }

    fn stencil_args<'a>(&'a self, l: tessera_gpu::Launch<'a>) -> tessera_gpu::Launch<'a> {
        let f = self.finest();
        l.arg(&f.dims[0])
            .arg(&f.dims[1])
            .arg(&f.dims[2])
            .arg(&f.dim)
            .arg(&f.d)
            .arg(&f.w[0])
            .arg(&f.w[1])
            .arg(&f.w[2])
    }

    /// Solve `A x = b` on the finest level from the initial guess in `x` (MGPCG or
    /// V-cycles, [`MgParams::method`]); `b` is projected onto the compatible space in
    /// place when there are enclosed regions.
    pub fn solve(
        &mut self,
        x: &DeviceBuffer<f32>,
        b: &DeviceBuffer<f32>,
    ) -> Result<SolveReport, FlowError> {
        let p = self.params;
        let n = self.cells();
        let m = p.max_iterations + 2;
        let (rz, dq, rr, bb) = (0usize, m, 2 * m, 3 * m);
        let gpu = self.gpu.clone();
        gpu.memset_zero(&mut self.acc)?;
        if let Some(reg) = &mut self.regions {
            gpu.memset_zero(&mut reg.sums)?;
        }
        self.project_regions(b)?;
        let rb = reduce_blocks(&gpu, n);
        let red = LaunchConfig::blocks(rb, super::BLOCK);
        self.stencil_args(gpu.launch(&self.k.cg_residual, red))
            .arg(x)
            .arg(b)
            .arg(&self.r)
            .arg(&self.acc)
            .arg(&(rr as i32))
            .arg(&(bb as i32))
            .run()?;
        let mut executed = 0usize;
        let mut first_batch = true;
        let report = loop {
            let batch = if first_batch { self.needed.max(1) } else { 1 };
            first_batch = false;
            let batch = batch.min(p.max_iterations.saturating_sub(executed));
            for _ in 0..batch {
                let kk = executed;
                match p.method {
                    Method::Mgpcg => {
                        self.vcycle(&self.z, &self.r, true)?;
                        gpu.launch(&self.k.cg_dot, red)
                            .arg(&(n as i64))
                            .arg(&self.r)
                            .arg(&self.z)
                            .arg(&self.acc)
                            .arg(&((rz + kk) as i32))
                            .run()?;
                        gpu.launch(&self.k.cg_direction, red)
                            .arg(&(n as i64))
                            .arg(&self.d)
                            .arg(&self.z)
                            .arg(&self.acc)
                            .arg(&((rz + kk) as i32))
                            .arg(&((rz + kk.max(1) - 1) as i32))
                            .arg(&((kk == 0) as i32))
                            .run()?;
                        self.stencil_args(gpu.launch(&self.k.cg_apply_dot, red))
                            .arg(&self.d)
                            .arg(&self.q)
                            .arg(&self.acc)
                            .arg(&((dq + kk) as i32))
                            .run()?;
                        gpu.launch(&self.k.cg_update, red)
                            .arg(&(n as i64))
                            .arg(x)
                            .arg(&self.r)
                            .arg(&self.d)
                            .arg(&self.q)
                            .arg(&self.acc)
                            .arg(&((rz + kk) as i32))
                            .arg(&((dq + kk) as i32))
                            .arg(&((rr + kk + 1) as i32))
                            .run()?;
                    }
                    Method::VCycle => {
                        self.vcycle(x, b, false)?;
                        self.stencil_args(gpu.launch(&self.k.cg_residual, red))
                            .arg(x)
                            .arg(b)
                            .arg(&self.r)
                            .arg(&self.acc)
                            .arg(&((rr + kk + 1) as i32))
                            .arg(&-1i32)
                            .run()?;
                    }
                }
                executed += 1;
            }
            let acc = gpu.download_range(&self.acc, 0..3 * m + 1)?;
            let bnorm = acc[bb].max(0.0).sqrt();
            let res: Vec<f64> = (0..=executed)
                .map(|i| acc[rr + i].max(0.0).sqrt())
                .collect();
            let tol = p.tolerance * bnorm;
            let hit = res.iter().position(|&r| r <= tol);
            let stop_unconverged =
                executed >= p.max_iterations || res.last().is_some_and(|r| !r.is_finite());
            let report = SolveReport {
                iterations: executed,
                rhs_norm: bnorm,
                residuals: res,
                converged: hit.is_some(),
            };
            if let Some(h) = hit {
                self.needed = h.max(1);
                break report;
            }
            if stop_unconverged {
                self.needed = executed.max(1);
                break report;
            }
        };
        if self.regions.is_some() {
            if let Some(reg) = &mut self.regions {
                gpu.memset_zero(&mut reg.sums)?;
            }
            self.project_regions(x)?;
        }
        Ok(report)
    }
}
