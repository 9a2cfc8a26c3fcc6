//! CUDA back-end of the fluid (placeholder until the kernels land).

use std::sync::Arc;

use tessera_gpu::{DeviceBuffer, Gpu};

use crate::fluid::mac::SideKind;
use crate::fluid::{Fluid, FluidSetup, StepStats};
use crate::poisson::Multigrid;
use crate::FlowError;

/// The fluid's state on a GPU.
pub struct GpuFluid {
    gpu: Arc<Gpu>,
    fields: Vec<DeviceBuffer<f32>>,
}

impl GpuFluid {
    pub(crate) fn new(
        _gpu: Arc<Gpu>,
        _fluid: &Fluid,
        _vel: &[Vec<f32>],
        _mg: &Multigrid<f32>,
    ) -> Result<Self, FlowError> {
        Err(FlowError::Invalid(
            "the CUDA fluid back-end is not built yet; use --device cpu".into(),
        ))
    }
    pub(crate) fn levels(&self) -> usize {
        0
    }
    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
    pub(crate) fn field(&self, k: usize) -> &DeviceBuffer<f32> {
        &self.fields[k]
    }
    pub(crate) fn face_velocities(&self) -> Result<Vec<Vec<f32>>, FlowError> {
        unreachable!()
    }
    pub(crate) fn smoke(&self) -> Result<Vec<f32>, FlowError> {
        unreachable!()
    }
    pub(crate) fn set_state(&mut self, _vel: &[Vec<f32>], _smoke: &[f32]) -> Result<(), FlowError> {
        unreachable!()
    }
    pub(crate) fn step(
        &mut self,
        _dt: f64,
        _dt_prev: f64,
        _setup: &FluidSetup,
        _sides: [SideKind; 6],
        _visc: (usize, f32),
    ) -> Result<(StepStats, f64), FlowError> {
        unreachable!()
    }
}
