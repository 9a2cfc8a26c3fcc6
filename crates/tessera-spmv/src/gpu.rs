//! Running generated SpMV variants on a CUDA device through `tessera-gpu` (dissertation
//! §5.3.3: "the generated variants are built ... passing the compute capability ... linked to
//! a benchmarking fixture that calls and measures the runtime of the SpMV"). Here NVRTC
//! compiles one module per layout holding the kernels of all requested schedules, through the
//! kernel cache of `tessera-gpu`; timing uses CUDA events (median of many runs after warm-up).

use std::sync::Arc;

use tessera_core::Par;
use tessera_gpu::{CompileOptions, DeviceBuffer, Gpu, GpuError, Kernel, LaunchConfig, Module};

use crate::codegen::generate;
use crate::entry::EntrySpec;
use crate::error::{Result, SpmvError};
use crate::layout::{
    compare, default_rtol, pack_vector, unpack_vector, CsrMatrix, Layout, LayoutMatrix,
};
use crate::matrices::hash_value;
use crate::scalar::{Precision, Scalar};
use crate::schedule::{DeviceLimits, Schedule, ScheduleKind};

impl From<GpuError> for SpmvError {
    fn from(e: GpuError) -> Self {
        match e {
            GpuError::NoDriver(m) | GpuError::NoDevice(m) | GpuError::NoNvrtc(m) => {
                SpmvError::NoGpu(m)
            }
            other => SpmvError::Gpu(other.to_string()),
        }
    }
}

/// Per-SM limits by compute capability (CUDA C++ Programming Guide, "Features and Technical
/// Specifications"): (max resident threads per SM, max resident blocks per SM).
pub fn sm_limits(cc: (u32, u32)) -> (u32, u32) {
    match cc {
        (7, 5) => (1024, 16),
        (8, 6) | (8, 7) => (1536, 16),
        (8, 9) => (1536, 24),
        (12, _) => (1536, 32),
        (m, _) if m < 7 => (2048, 32),
        _ => (2048, 32),
    }
}

/// A CUDA device prepared for SpMV variants.
pub struct SpmvGpu {
    pub gpu: Gpu,
    pub limits: DeviceLimits,
}

impl SpmvGpu {
    /// Opens CUDA device `ordinal`; [`SpmvError::NoGpu`] when there is none.
    pub fn new(ordinal: usize) -> Result<Self> {
        let gpu = Gpu::new(ordinal)?;
        let cc = (gpu.sm() / 10, gpu.sm() % 10);
        let (tps, bps) = sm_limits(cc);
        let limits = DeviceLimits {
            name: gpu.name().to_string(),
            cc,
            n_sm: gpu.sm_count(),
            warp: 32,
            max_threads_per_block: 1024,
            max_threads_per_sm: tps,
            max_blocks_per_sm: bps,
        };
        Ok(SpmvGpu { gpu, limits })
    }

    /// "CUDA a.b" from the NVRTC version (a tuning-key component).
    pub fn cuda_version(&self) -> String {
        let (a, b) = self.gpu.nvrtc_version();
        format!("{a}.{b}")
    }

    /// Compiles the variants of one layout (one module, one kernel per schedule).
    pub fn compile(
        &self,
        spec: &EntrySpec,
        p: Precision,
        layout: Layout,
        schedules: &[Schedule],
    ) -> Result<CompiledLayout> {
        for s in schedules {
            self.limits.check(s)?;
        }
        let src = generate(spec, p, layout, schedules)?;
        let opts = CompileOptions::named(format!("spmv_{}_{}_{}.cu", spec.name, p, layout));
        let module = self.gpu.compile(&src, &opts)?;
        let kernels = schedules
            .iter()
            .map(|s| module.function(&s.kernel_name()).map(|k| (*s, k)))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(CompiledLayout {
            layout,
            module,
            kernels,
        })
    }

    /// Generates and NVRTC-compiles the given layouts' modules in parallel (rayon) into the
    /// persistent kernel cache of `tessera-gpu`, so that the later [`SpmvGpu::compile`] calls
    /// only load PTX. Does nothing when the kernel cache is disabled.
    pub fn prewarm(
        &self,
        spec: &EntrySpec,
        p: Precision,
        work: &[(Layout, Vec<Schedule>)],
    ) -> Result<()> {
        use rayon::prelude::*;
        let Some(dir) = tessera_gpu::compile::cache_dir() else {
            return Ok(());
        };
        let sm = self.gpu.sm();
        let ver = self.gpu.nvrtc_version();
        work.par_iter()
            .try_for_each(|(layout, scheds)| -> Result<()> {
                let src = generate(spec, p, *layout, scheds)?;
                let opts = CompileOptions::named(format!("spmv_{}_{}_{}.cu", spec.name, p, layout));
                let args = opts.to_args(sm);
                let key = tessera_gpu::compile::cache_key(&src, &args, sm, ver);
                if tessera_gpu::compile::cache_read(&dir, &key).is_none() {
                    let ptx = tessera_gpu::compile::compile_to_ptx(&src, &opts.name, &args)?;
                    let _ = tessera_gpu::compile::cache_write(&dir, &key, &ptx);
                }
                Ok(())
            })
    }

    /// Uploads a layout matrix.
    pub fn upload<T: Scalar>(&self, m: &LayoutMatrix<T>) -> Result<GpuMatrix<T>> {
        Ok(GpuMatrix {
            layout: m.layout,
            n_rows: m.n_rows as u32,
            n_cols: m.n_cols as u32,
            slots: m.slots as u32,
            ell_stride: m.ell_stride as u32,
            outer: self.gpu.upload(&m.outer)?,
            cols: self.gpu.upload(&m.cols)?,
            vals: self.gpu.upload(&m.vals)?,
            sched: self.gpu.zeros::<u32>(2)?,
        })
    }

    /// Enqueues one SpMV `y = A x` with `kernel` (grid n_s * n_b blocks of n_t threads).
    pub fn launch<T: Scalar>(
        &self,
        kernel: &Kernel,
        s: &Schedule,
        a: &GpuMatrix<T>,
        x: &DeviceBuffer<T>,
        y: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        let cfg = LaunchConfig::blocks(self.limits.n_sm * s.n_b, s.n_t);
        self.gpu
            .launch(kernel, cfg)
            .arg(&a.n_rows)
            .arg(&a.outer)
            .arg(&a.cols)
            .arg(&a.vals)
            .arg(&a.slots)
            .arg(&a.ell_stride)
            .arg(x)
            .arg(&a.n_cols)
            .arg(&*y)
            .arg(&a.sched)
            .run()?;
        Ok(())
    }

    /// Median time (ms) of `runs` CUDA-event-timed SpMVs after `warmup` untimed ones.
    pub fn time<T: Scalar>(
        &self,
        kernel: &Kernel,
        s: &Schedule,
        a: &GpuMatrix<T>,
        x: &DeviceBuffer<T>,
        y: &mut DeviceBuffer<T>,
        runs: usize,
        warmup: usize,
    ) -> Result<f64> {
        let mut err = None;
        let t = self.gpu.median_ms(runs, warmup, || {
            self.launch(kernel, s, a, x, y).map_err(|e| {
                let m = e.to_string();
                err = Some(e);
                GpuError::InvalidArgument(m)
            })
        });
        match (t, err) {
            (_, Some(e)) => Err(e),
            (Ok(t), None) => Ok(t),
            (Err(e), None) => Err(e.into()),
        }
    }
}

/// A compiled layout: its module and one kernel per schedule.
pub struct CompiledLayout {
    pub layout: Layout,
    pub module: Arc<Module>,
    pub kernels: Vec<(Schedule, Kernel)>,
}

/// A layout matrix in device memory, with the dynamic schedule's counter pair.
pub struct GpuMatrix<T: Scalar> {
    pub layout: Layout,
    pub n_rows: u32,
    pub n_cols: u32,
    pub slots: u32,
    pub ell_stride: u32,
    pub outer: DeviceBuffer<u32>,
    pub cols: DeviceBuffer<u32>,
    pub vals: DeviceBuffer<T>,
    /// `sched[0]`: next chunk, `sched[1]`: finished blocks (reset by the last block).
    pub sched: DeviceBuffer<u32>,
}

/// The schedules the conformance test and `verify` run: both families, a few n_b / n_t
/// (including n_t = 32 with many chunks and n_t = 1024 with few).
pub fn conformance_schedules() -> Vec<Schedule> {
    let mk = |kind, n_b, n_t| Schedule { kind, n_b, n_t };
    vec![
        mk(ScheduleKind::Static, 1, 32),
        mk(ScheduleKind::Static, 3, 256),
        mk(ScheduleKind::Dynamic, 2, 1024),
        mk(ScheduleKind::Dynamic, 12, 96),
    ]
}

/// A deterministic input vector (natural AoS) with values in [-1, 1).
pub fn test_vector<T: Scalar>(n: usize, len: usize, seed: u64) -> Vec<T> {
    (0..n * len)
        .map(|k| T::from_f64(hash_value(k as u64, 0, 99, seed)))
        .collect()
}

/// Outcome of one variant in [`verify_cpu`] / [`verify_gpu`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct VariantCheck {
    pub layout: String,
    /// `None` for the CPU layouts.
    pub schedule: Option<String>,
    /// Largest `|y - y_ref| / (|y_ref| + sum |a x|)`.
    pub max_rel_err: f64,
    pub ok: bool,
}

/// Runs the CPU reference of every layout (sequential and rayon, which must agree bit for bit)
/// against the plain CSR-AoS reference.
pub fn verify_cpu<T: Scalar>(
    spec: &EntrySpec,
    a64: &CsrMatrix<f64>,
    layouts: &[Layout],
) -> Result<Vec<VariantCheck>> {
    let a: CsrMatrix<T> = a64.cast();
    let (vl, n) = (spec.vector_len(), a.n_rows);
    let x = test_vector::<T>(a.n_cols, vl, 1);
    let y_ref = a.spmv(spec, &x, Par::Seq);
    let scale = a.spmv_abs(spec, &x);
    let rtol = default_rtol(T::PRECISION);
    let mut out = Vec::new();
    for &l in layouts {
        let m = LayoutMatrix::from_csr(&a, l)?;
        let xp = pack_vector(&x, a.n_cols, vl, l.vector);
        let ys = m.spmv(spec, &xp, Par::Seq);
        let yr = m.spmv(spec, &xp, Par::Rayon);
        let y = unpack_vector(&ys, n, vl, l.vector);
        let (err, ok) = compare(&y, &y_ref, &scale, rtol);
        out.push(VariantCheck {
            layout: l.to_string(),
            schedule: None,
            max_rel_err: err,
            ok: ok && ys == yr,
        });
    }
    Ok(out)
}

/// Runs every layout x schedule variant on the device against the plain CSR-AoS CPU
/// reference. Each kernel runs twice (the output cleared in between), so a dynamic schedule
/// whose chunk counter were not reset would fail the second run.
pub fn verify_gpu<T: Scalar>(
    g: &SpmvGpu,
    spec: &EntrySpec,
    a64: &CsrMatrix<f64>,
    layouts: &[Layout],
    schedules: &[Schedule],
) -> Result<Vec<VariantCheck>> {
    let a: CsrMatrix<T> = a64.cast();
    let (vl, n) = (spec.vector_len(), a.n_rows);
    let x = test_vector::<T>(a.n_cols, vl, 1);
    let y_ref = a.spmv(spec, &x, Par::Seq);
    let scale = a.spmv_abs(spec, &x);
    let rtol = default_rtol(T::PRECISION);
    let mut out = Vec::new();
    for &l in layouts {
        let m = LayoutMatrix::from_csr(&a, l)?;
        let dm = g.upload(&m)?;
        let dx = g.gpu.upload(&pack_vector(&x, a.n_cols, vl, l.vector))?;
        let mut dy = g.gpu.zeros::<T>(n * vl)?;
        let c = g.compile(spec, T::PRECISION, l, schedules)?;
        for (s, k) in &c.kernels {
            g.launch(k, s, &dm, &dx, &mut dy)?;
            g.gpu.memset_zero(&mut dy)?;
            g.launch(k, s, &dm, &dx, &mut dy)?;
            let y = unpack_vector(&g.gpu.download(&dy)?, n, vl, l.vector);
            let (err, ok) = compare(&y, &y_ref, &scale, rtol);
            out.push(VariantCheck {
                layout: l.to_string(),
                schedule: Some(s.to_string()),
                max_rel_err: err,
                ok,
            });
            g.gpu.memset_zero(&mut dy)?;
        }
    }
    Ok(out)
}

/// The GPU [`crate::tuning::VariantTimer`]: converts the matrix to each layout, uploads it,
/// compiles the layout's schedules into one module and times each kernel (median of `runs`
/// CUDA-event-timed SpMVs after `warmup`).
pub struct GpuTimer<'a, T: Scalar> {
    pub g: &'a SpmvGpu,
    pub spec: &'a EntrySpec,
    pub a: &'a CsrMatrix<T>,
    pub runs: usize,
    pub warmup: usize,
    /// The input vector (natural AoS), packed per layout before timing.
    pub x: Vec<T>,
}

impl<'a, T: Scalar> GpuTimer<'a, T> {
    pub fn new(
        g: &'a SpmvGpu,
        spec: &'a EntrySpec,
        a: &'a CsrMatrix<T>,
        runs: usize,
        warmup: usize,
    ) -> Self {
        let x = test_vector::<T>(a.n_cols, spec.vector_len(), 3);
        GpuTimer {
            g,
            spec,
            a,
            runs,
            warmup,
            x,
        }
    }
}

impl<T: Scalar> crate::tuning::VariantTimer for GpuTimer<'_, T> {
    fn time(&mut self, layout: Layout, schedules: &[Schedule]) -> Result<Vec<f64>> {
        let vl = self.spec.vector_len();
        let m = LayoutMatrix::from_csr(self.a, layout)?;
        let dm = self.g.upload(&m)?;
        let dx = self
            .g
            .gpu
            .upload(&pack_vector(&self.x, self.a.n_cols, vl, layout.vector))?;
        let mut dy = self.g.gpu.zeros::<T>(self.a.n_rows * vl)?;
        let c = self.g.compile(self.spec, T::PRECISION, layout, schedules)?;
        c.kernels
            .iter()
            .map(|(s, k)| self.g.time(k, s, &dm, &dx, &mut dy, self.runs, self.warmup))
            .collect()
    }
}
