//! GPU evaluation through `tessera-gpu` (the only crate that touches cudarc): the PTX of
//! [`crate::ptx`] is loaded with [`Gpu::load_ptx`] (kernel cache keyed by the PTX text, i.e.
//! by the normalized IR), and launched over device buffers, so only the derived field
//! needs to cross PCIe (dissertation §6.4.3, Table 6.3).

use crate::error::QueryError;
use crate::math::{Precision, Real};
use crate::Query;
use tessera_gpu::{DeviceBuffer, Element, Gpu, Kernel, LaunchConfig};

pub use tessera_gpu::Gpu as Device;

/// Threads per block of the generated kernels.
pub const THREADS: u32 = 256;

/// A loaded GPU kernel of a query.
#[derive(Clone)]
pub struct GpuKernel {
    pub kernel: Kernel,
    pub precision: Precision,
    pub n_fields: usize,
}

fn gerr(e: tessera_gpu::GpuError) -> QueryError {
    QueryError::Gpu(e.to_string())
}

impl Query {
    /// Loads the PTX kernel of this query on `gpu` (cached by the driver-module cache).
    pub fn gpu_kernel(&self, gpu: &Gpu, p: Precision) -> Result<GpuKernel, QueryError> {
        let m = crate::ptx::emit_for(self.ir(p), gpu.sm().max(crate::ptx::DEFAULT_SM));
        let module = gpu.load_ptx(&m.text, &m.name).map_err(gerr)?;
        let kernel = module.function(&m.name).map_err(gerr)?;
        Ok(GpuKernel {
            kernel,
            precision: p,
            n_fields: self.fields().len(),
        })
    }

    /// Compiles the CUDA C rendering with NVRTC (the cross-check path) and loads it.
    pub fn nvrtc_kernel(&self, gpu: &Gpu, p: Precision) -> Result<GpuKernel, QueryError> {
        let c = crate::cuda_c::emit(self.ir(p));
        let opts = tessera_gpu::CompileOptions::named(format!("{}.cu", c.name));
        let module = gpu.compile(&c.source, &opts).map_err(gerr)?;
        let kernel = module.function(&c.name).map_err(gerr)?;
        Ok(GpuKernel {
            kernel,
            precision: p,
            n_fields: self.fields().len(),
        })
    }

    /// Evaluates with the PTX back end on device buffers (`fields` in the query's field order).
    pub fn eval_gpu<T: Real + Element>(
        &self,
        gpu: &Gpu,
        fields: &[&DeviceBuffer<T>],
        out: &mut DeviceBuffer<T>,
    ) -> Result<(), QueryError> {
        let k = self.gpu_kernel(gpu, T::PRECISION)?;
        self.launch(gpu, &k, fields, out)
    }

    /// Launches a loaded kernel (PTX or NVRTC) of this query on device buffers.
    pub fn launch<T: Real + Element>(
        &self,
        gpu: &Gpu,
        k: &GpuKernel,
        fields: &[&DeviceBuffer<T>],
        out: &mut DeviceBuffer<T>,
    ) -> Result<(), QueryError> {
        if k.precision != T::PRECISION {
            return Err(QueryError::Gpu(format!(
                "kernel compiled for {}, buffers are {}",
                k.precision.name(),
                T::PRECISION.name()
            )));
        }
        if fields.len() != self.fields().len() {
            return Err(QueryError::FieldCount {
                expected: self.fields().len(),
                got: fields.len(),
            });
        }
        for (f, name) in fields.iter().zip(self.fields()) {
            if f.len() != out.len() {
                return Err(QueryError::LengthMismatch {
                    field: name.clone(),
                    expected: out.len(),
                    got: f.len(),
                });
            }
        }
        let n = out.len() as u64;
        if n == 0 {
            return Ok(());
        }
        let blocks =
            (out.len().div_ceil(THREADS as usize)).min(gpu.sm_count().max(1) as usize * 32) as u32;
        let mut l = gpu.launch(&k.kernel, LaunchConfig::blocks(blocks, THREADS));
        for f in fields {
            l = l.arg(*f);
        }
        let out_ref: &DeviceBuffer<T> = out;
        l.arg(out_ref).arg(&n).run().map_err(gerr)
    }
}
