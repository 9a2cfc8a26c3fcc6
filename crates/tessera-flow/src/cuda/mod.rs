//! The fluid and its multigrid on CUDA (dissertation §6.3.2: "all computational kernels are
//! implemented in CUDA ... GPU-CPU transfers are only required for data that is sent to the
//! client").
//!
//! | stage | kernel (`kernels/flow.cu`) | CPU reference |
//! |---|---|---|
//! | red-black Gauss-Seidel pass | `mg_smooth` (a thread per cell pair of a row) | [`crate::poisson::Level::smooth`] |
//! | residual + restriction `R = P^T / 2` | `mg_restrict` (a thread per coarse cell) | `Level::residual` + `Level::restrict` |
//! | prolongation, scaled by `ω` | `mg_prolong` | `Level::prolong_add` |
//! | coarsest level | `mg_coarse_solve` (dense generalized inverse) | [`crate::poisson::CoarseSolver`] |
//! | MGPCG | `cg_residual`, `cg_apply_dot`, `cg_update`, `cg_dot`, `cg_direction` (scalars stay on the device) | [`crate::poisson::Multigrid::solve`] |
//! | enclosed regions | `region_sum`, `region_subtract` | [`crate::poisson::FloatingRegions`] |
//! | advection | `advect_sl`, `advect_mc` (+ smoke sources) | [`crate::fluid::mac`] |
//! | viscosity, forces, boundaries | `diffuse`, `forces` | `mac::diffuse`, `mac::forces_and_boundaries` |
//! | projection | `proj_rhs`, `proj_faces` | `mac::projection_rhs`, `mac::project_faces` |
//! | output fields, max speed | `outputs` | `Fluid` (CPU) |
//!
//! The only host synchronisations of a step are one read of the CG residuals after a batch
//! of iterations (as many as the previous step needed) and one read of the step's
//! statistics at its end.

mod fluid;
mod multigrid;

pub use fluid::GpuFluid;
pub use multigrid::{vcycle_bytes, GpuMultigrid};

use std::sync::Arc;

use tessera_gpu::{CompileOptions, Gpu, Kernel, LaunchConfig};

use crate::FlowError;

/// CUDA source of the fluid and multigrid kernels.
pub const SOURCE: &str = include_str!("kernels/flow.cu");

/// Threads per block.
pub(crate) const BLOCK: u32 = 256;

/// Blocks of the grid-stride reduction kernels (dot products, outputs).
pub(crate) fn reduce_blocks(gpu: &Gpu, n: usize) -> u32 {
    let want = n.div_ceil(BLOCK as usize).max(1);
    want.min(8 * gpu.sm_count().max(1) as usize) as u32
}

pub(crate) fn items(n: usize) -> Result<LaunchConfig, FlowError> {
    Ok(LaunchConfig::for_items(n.max(1), BLOCK)?)
}

/// The compiled kernels of one device.
pub struct FlowKernels {
    pub(crate) smooth: Kernel,
    pub(crate) restrict: Kernel,
    pub(crate) prolong: Kernel,
    pub(crate) coarse_solve: Kernel,
    pub(crate) cg_residual: Kernel,
    pub(crate) cg_apply_dot: Kernel,
    pub(crate) cg_update: Kernel,
    pub(crate) cg_dot: Kernel,
    pub(crate) cg_direction: Kernel,
    pub(crate) region_sum: Kernel,
    pub(crate) region_subtract: Kernel,
    pub(crate) advect_sl: Kernel,
    pub(crate) advect_mc: Kernel,
    pub(crate) apply_sources: Kernel,
    pub(crate) diffuse: Kernel,
    pub(crate) forces: Kernel,
    pub(crate) proj_rhs: Kernel,
    pub(crate) proj_faces: Kernel,
    pub(crate) outputs: Kernel,
    pub(crate) add_scaled: Kernel,
}

impl FlowKernels {
    /// Compile (once, then from the kernel caches) and resolve every kernel.
    pub fn new(gpu: &Gpu) -> Result<Arc<Self>, FlowError> {
        let m = gpu.compile(SOURCE, &CompileOptions::named("tessera_flow.cu"))?;
        let f = |n: &str| m.function(n);
        Ok(Arc::new(FlowKernels {
            smooth: f("mg_smooth")?,
            restrict: f("mg_restrict")?,
            prolong: f("mg_prolong")?,
            coarse_solve: f("mg_coarse_solve")?,
            cg_residual: f("cg_residual")?,
            cg_apply_dot: f("cg_apply_dot")?,
            cg_update: f("cg_update")?,
            cg_dot: f("cg_dot")?,
            cg_direction: f("cg_direction")?,
            region_sum: f("region_sum")?,
            region_subtract: f("region_subtract")?,
            advect_sl: f("advect_sl")?,
            advect_mc: f("advect_mc")?,
            apply_sources: f("apply_sources")?,
            diffuse: f("diffuse")?,
            forces: f("forces")?,
            proj_rhs: f("proj_rhs")?,
            proj_faces: f("proj_faces")?,
            outputs: f("outputs")?,
            add_scaled: f("add_scaled")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    /// The kernel source compiles with NVRTC wherever NVRTC is installed (no GPU needed):
    /// a syntax error surfaces here, not first on the device machine.
    #[test]
    fn kernels_compile_with_nvrtc_when_available() {
        if tessera_gpu::probe::probe_nvrtc().is_err() {
            eprintln!("NVRTC not found: skipped");
            return;
        }
        let args = tessera_gpu::CompileOptions::named("tessera_flow.cu").to_args(90);
        let ptx = tessera_gpu::compile::compile_to_ptx(super::SOURCE, "tessera_flow.cu", &args)
            .unwrap_or_else(|e| panic!("{e}"));
        for k in [
            "mg_smooth",
            "mg_restrict",
            "mg_prolong",
            "mg_coarse_solve",
            "cg_residual",
            "cg_apply_dot",
            "cg_update",
            "cg_dot",
            "cg_direction",
            "region_sum",
            "region_subtract",
            "advect_sl",
            "advect_mc",
            "apply_sources",
            "diffuse",
            "forces",
            "proj_rhs",
            "proj_faces",
            "outputs",
            "add_scaled",
        ] {
            assert!(
                ptx.contains(&format!(".entry {k}(")),
                "{k} missing from the PTX"
            );
        }
    }
}
