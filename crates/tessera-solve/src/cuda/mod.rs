//! The solvers on CUDA (dissertation §4.4.2, Listing 4.1): device Bin-BCSR* matrices and
//! their SpMV, and the filtered PCG on device vectors.
//!
//! | step | GPU algorithm | CPU reference |
//! |---|---|---|
//! | SpMV | warp per bin, atomic bin counter (Listing 4.1) | [`BinBcsr::spmv`](tessera_sparse::binbcsr::BinBcsr::spmv) |
//! | PCG | filtered block-Jacobi PCG, deterministic two-pass dot products, scalars on the device | [`crate::pcg::pcg`] |
//! | PCG with a preconditioner | the same iteration with [`DevicePreconditioner`] | [`crate::pcg::pcg_with`] |
//! | AMG / p-multigrid cycle | block CSR SpMV (a lane group per block row), Chebyshev / Jacobi smoother steps, dense coarse inverse | [`crate::Amg::cycle`], [`crate::PMultigrid::cycle`] |
//! | AMG setup | [`DeviceAmg::setup`]: block norms, diagonal blocks, `λ_max` estimate, smoothed prolongator, transpose and Galerkin product on the device (block SpGEMM: expand, sort, compress; bit-identical to the host products); strength graph, MIS(2) aggregation and tentative prolongator on the host from the downloaded block norms | [`crate::Amg::setup`] |
//! | p-multigrid setup | [`DevicePmg::setup`]: the same, the Galerkin product to order 1 on the device | [`crate::PMultigrid::setup`] |
//! | partitioned SpMV and block-Jacobi PCG | [`DeviceDomains`]: pack, exchange (device copies; NCCL between devices) overlapped with the interior bins, boundary bins; per-domain partial sums reduced in domain order | [`crate::PartitionedOperator`], [`crate::pcg::pcg`] |
//! | partitioned PCG with domain-local AMG | [`DeviceDomainAmg`]: per domain the owned-owned block filtered on the device ([`owned_filtered_copy`]) and [`DeviceAmg::setup`]; one V-cycle per domain (additive Schwarz) | [`crate::DomainAmg`], [`crate::pcg::pcg_with`] |
//! | halo pack / unpack | [`halo::halo_pack`], [`halo::halo_unpack`]: one thread per value | [`halo::halo_pack_reference`], [`halo::halo_unpack_reference`] |
//! | filtered copy `S A S + (I − S)` | [`device_filtered_copy`], one thread per block row | [`crate::blockcsr::BlockCsr::from_binbcsr_filtered`] |
//!
//! Only `tessera-gpu` calls cudarc; this module launches its kernels through it. The CUDA
//! sources live beside it in `kernels/`.

pub mod halo;
mod matrix;
mod multigrid;
pub mod partitioned;
mod pcg;
mod setup;

pub use matrix::{DeviceBinBcsr, DeviceBinBcsrPattern, DeviceOperator};
pub use multigrid::{DeviceAmg, DeviceBlockCsr, DevicePmg, DevicePreconditioner};
pub use partitioned::{
    owned_filtered_copy, BinSchedule, DeviceApplyTimes, DeviceDomainAmg, DeviceDomainMatrix,
    DeviceDomains, DeviceDomainsOptions, DomainPreconditioner,
};
pub use pcg::{pcg_gpu, pcg_gpu_with};
pub use setup::{
    block_spgemm, block_transpose, device_filtered_copy, device_galerkin, device_smooth_prolongator,
};

use std::sync::{Arc, Mutex};
use tessera_gpu::{CompileOptions, DeviceBuffer, Element, Gpu, Kernel, LaunchConfig, Module};
use tessera_sparse::binbcsr::Scalar;

use crate::error::SolveError;

/// CUDA source of the solver kernels (deterministic: a constant): PCG and Bin-BCSR* SpMV,
/// then the multigrid kernels.
pub const SOURCE: &str = concat!(
    include_str!("kernels/solve.cu"),
    include_str!("kernels/multigrid.cu"),
    include_str!("kernels/setup.cu"),
    include_str!("kernels/domain.cu")
);

pub(crate) const BLOCK: u32 = 256;
/// Blocks of the first pass of the deterministic dot product (fixed, so sums do not depend
/// on the device).
pub(crate) const DOT_BLOCKS: u32 = 256;

/// A scalar type with GPU kernels: `f32` or `f64`.
pub trait GpuScalar: Scalar + Element {
    /// Kernel name suffix.
    const SUFFIX: &'static str;
}
impl GpuScalar for f32 {
    const SUFFIX: &'static str = "f32";
}
impl GpuScalar for f64 {
    const SUFFIX: &'static str = "f64";
}

/// The compiled solver kernels of one device.
pub struct SolveKernels<'g> {
    gpu: &'g Gpu,
    module: Arc<Module>,
    counter: Mutex<DeviceBuffer<u32>>,
    dot_partial: Mutex<DeviceBuffer<f64>>,
}

impl<'g> SolveKernels<'g> {
    /// Compile (once, then from the kernel caches) and load the solver kernels.
    pub fn new(gpu: &'g Gpu) -> Result<Self, SolveError> {
        let module = gpu.compile(SOURCE, &CompileOptions::named("tessera_solve.cu"))?;
        Ok(SolveKernels {
            gpu,
            module,
            counter: Mutex::new(gpu.zeros::<u32>(1)?),
            dot_partial: Mutex::new(gpu.zeros::<f64>(DOT_BLOCKS as usize)?),
        })
    }
    /// The device.
    pub fn gpu(&self) -> &'g Gpu {
        self.gpu
    }
    pub(crate) fn k(&self, name: &str) -> Result<Kernel, SolveError> {
        Ok(self.module.function(name)?)
    }
}

pub(crate) fn cfg(n: usize, threads: u32) -> Result<LaunchConfig, SolveError> {
    Ok(LaunchConfig::for_items(n, threads)?)
}

/// Upload, with a one-element placeholder for empty arrays (kernels never read it).
pub(crate) fn up<T: Element>(gpu: &Gpu, data: &[T]) -> Result<DeviceBuffer<T>, SolveError> {
    if data.is_empty() {
        Ok(gpu.upload(&[T::default()])?)
    } else {
        Ok(gpu.upload(data)?)
    }
}

pub(crate) fn to_u32(n: usize, what: &str) -> Result<u32, SolveError> {
    u32::try_from(n).map_err(|_| SolveError::TooLarge(format!("{what} = {n} does not fit 32 bits")))
}

/// Deterministic dot product `a · b` into `out[slot]`: a fixed grid of partial sums, then
/// one block sums the partials in a fixed order.
pub(crate) fn dot_into(
    k: &SolveKernels<'_>,
    len: u32,
    a: &DeviceBuffer<f64>,
    b: &DeviceBuffer<f64>,
    out: &DeviceBuffer<f64>,
    slot: u32,
) -> Result<(), SolveError> {
    let g = k.gpu;
    let partial = k.dot_partial.lock().unwrap_or_else(|e| e.into_inner());
    g.launch(&k.k("dot_partial")?, LaunchConfig::blocks(DOT_BLOCKS, 256))
        .arg(&len)
        .arg(a)
        .arg(b)
        .arg(&*partial)
        .run()?;
    g.launch(&k.k("dot_final")?, LaunchConfig::blocks(1, 256))
        .arg(&DOT_BLOCKS)
        .arg(&*partial)
        .arg(out)
        .arg(&slot)
        .run()?;
    Ok(())
}
