//! The shallow-water step on the GPU (`shallow_water.cu`): one step is five launches and no
//! host synchronisation. `sw_begin` resets the counters, `sw_active` lists the tiles with
//! water (this or the last step) in their 3x3 neighbourhood, `sw_stage(1)` computes
//! `L(U^n)` and the largest wave speed on them, `sw_dt` turns it into the CFL time step on
//! the device, `sw_stage(2)` builds `U*` while loading and writes `U^{n+1}`, the wet flags
//! and the float fields the consumers read.

use std::sync::Arc;

use tessera_gpu::{CompileOptions, DeviceBuffer, Gpu, Kernel, LaunchConfig, Module};

use super::reference::StageParams;
use crate::FlowError;

/// Threads per tile of `sw_stage` (`NT` in the source): 16 x 18, one per reconstructed cell.
const STAGE_THREADS: u32 = 288;

/// CUDA source of the solver.
pub const SOURCE: &str = include_str!("shallow_water.cu");

struct Kernels {
    begin: Kernel,
    active: Kernel,
    stage: Kernel,
    dt: Kernel,
    init_wet: Kernel,
    export_all: Kernel,
}

/// The solver's device state.
pub struct GpuState {
    pub(crate) gpu: Arc<Gpu>,
    _module: Arc<Module>,
    k: Kernels,
    nx: i32,
    ny: i32,
    prm: DeviceBuffer<f64>,
    pub(crate) w: [DeviceBuffer<f64>; 2],
    pub(crate) hu: [DeviceBuffer<f64>; 2],
    pub(crate) hv: [DeviceBuffer<f64>; 2],
    pub(crate) cur: usize,
    bc: DeviceBuffer<f64>,
    corners: DeviceBuffer<f32>,
    r1: [DeviceBuffer<f64>; 3],
    wet: [DeviceBuffer<u32>; 2],
    forced: DeviceBuffer<u32>,
    active: DeviceBuffer<u32>,
    list: DeviceBuffer<u32>,
    counters: DeviceBuffer<u32>,
    stats: DeviceBuffer<u64>,
    dt: DeviceBuffer<f64>,
    time: DeviceBuffer<f64>,
    /// Depth, MomentumX, MomentumY, Surface, Speed, Terrain.
    pub(crate) fields: Vec<DeviceBuffer<f32>>,
    ntiles: usize,
    blocks: u32,
}

impl GpuState {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: Arc<Gpu>,
        p: &StageParams,
        corners: &[f32],
        bc: &[f64],
        w: &[f64],
        hu: &[f64],
        hv: &[f64],
        forced: &[u32],
        time: f64,
    ) -> Result<GpuState, FlowError> {
        let mut o = CompileOptions::named("tessera_shallow_water.cu");
        // the CPU reference's bits: no contraction into fused multiply-adds
        o.extra.push("--fmad=false".into());
        let module = gpu.compile(SOURCE, &o)?;
        let k = Kernels {
            begin: module.function("sw_begin")?,
            active: module.function("sw_active")?,
            stage: module.function("sw_stage")?,
            dt: module.function("sw_dt")?,
            init_wet: module.function("sw_init_wet")?,
            export_all: module.function("sw_export_all")?,
        };
        let n = p.nx * p.ny;
        let ntiles = p.tiles_x() * p.tiles_y();
        let terrain: Vec<f32> = bc.iter().map(|&b| b as f32).collect();
        let mut fields = Vec::with_capacity(6);
        for _ in 0..5 {
            fields.push(gpu.zeros::<f32>(n)?);
        }
        fields.push(gpu.upload(&terrain)?);
        let blocks = (gpu.sm_count() * 5).clamp(1, ntiles.max(1) as u32);
        let s = GpuState {
            prm: gpu.upload(&p.param_block())?,
            w: [gpu.upload(w)?, gpu.upload(w)?],
            hu: [gpu.upload(hu)?, gpu.upload(hu)?],
            hv: [gpu.upload(hv)?, gpu.upload(hv)?],
            cur: 0,
            bc: gpu.upload(bc)?,
            corners: gpu.upload(corners)?,
            r1: [gpu.zeros(n)?, gpu.zeros(n)?, gpu.zeros(n)?],
            wet: [gpu.zeros(ntiles)?, gpu.zeros(ntiles)?],
            forced: gpu.upload(forced)?,
            active: gpu.zeros(ntiles)?,
            list: gpu.zeros(ntiles)?,
            counters: gpu.zeros(1)?,
            stats: gpu.zeros(2)?,
            dt: gpu.zeros(1)?,
            time: gpu.upload(&[time])?,
            fields,
            ntiles,
            blocks,
            nx: p.nx as i32,
            ny: p.ny as i32,
            k,
            _module: module,
            gpu,
        };
        let g = &s.gpu;
        g.launch(&s.k.init_wet, LaunchConfig::blocks(ntiles as u32, 256))
            .arg(&s.nx)
            .arg(&s.ny)
            .arg(&s.prm)
            .arg(&s.w[0])
            .arg(&s.bc)
            .arg(&s.wet[0])
            .arg(&s.wet[1])
            .run()?;
        g.launch(&s.k.export_all, LaunchConfig::for_items(n, 256)?)
            .arg(&s.nx)
            .arg(&s.ny)
            .arg(&s.prm)
            .arg(&s.w[0])
            .arg(&s.hu[0])
            .arg(&s.hv[0])
            .arg(&s.bc)
            .arg(&s.fields[0])
            .arg(&s.fields[1])
            .arg(&s.fields[2])
            .arg(&s.fields[3])
            .arg(&s.fields[4])
            .run()?;
        g.synchronize()?;
        Ok(s)
    }

    /// Enqueues one step (`parity` = steps taken so far mod 2 selects the wet flags written).
    pub fn step(&mut self, parity: usize) -> Result<(), FlowError> {
        let g = &self.gpu;
        let (cur, nxt) = (self.cur, 1 - self.cur);
        g.launch(&self.k.begin, LaunchConfig::blocks(1, 1))
            .arg(&self.counters)
            .arg(&self.stats)
            .run()?;
        g.launch(&self.k.active, LaunchConfig::for_items(self.ntiles, 256)?)
            .arg(&self.nx)
            .arg(&self.ny)
            .arg(&self.wet[0])
            .arg(&self.wet[1])
            .arg(&self.forced)
            .arg(&self.active)
            .arg(&self.list)
            .arg(&self.counters)
            .run()?;
        for stage in [1i32, 2] {
            if stage == 2 {
                g.launch(&self.k.dt, LaunchConfig::blocks(1, 1))
                    .arg(&self.nx)
                    .arg(&self.ny)
                    .arg(&self.prm)
                    .arg(&self.stats)
                    .arg(&self.dt)
                    .arg(&self.time)
                    .run()?;
            }
            g.launch(
                &self.k.stage,
                LaunchConfig::blocks(self.blocks, STAGE_THREADS),
            )
            .arg(&stage)
            .arg(&self.nx)
            .arg(&self.ny)
            .arg(&self.prm)
            .arg(&self.w[cur])
            .arg(&self.hu[cur])
            .arg(&self.hv[cur])
            .arg(&self.bc)
            .arg(&self.corners)
            .arg(&self.r1[0])
            .arg(&self.r1[1])
            .arg(&self.r1[2])
            .arg(&self.active)
            .arg(&self.list)
            .arg(&self.counters)
            .arg(&self.dt)
            .arg(&self.w[nxt])
            .arg(&self.hu[nxt])
            .arg(&self.hv[nxt])
            .arg(&self.wet[parity])
            .arg(&self.fields[0])
            .arg(&self.fields[1])
            .arg(&self.fields[2])
            .arg(&self.fields[3])
            .arg(&self.fields[4])
            .arg(&self.stats)
            .run()?;
        }
        self.cur = nxt;
        Ok(())
    }

    /// The last step's `dt` and the simulated time (synchronises).
    pub fn dt_and_time(&self) -> Result<(f64, f64), FlowError> {
        Ok((
            self.gpu.download_at(&self.dt, 0)?,
            self.gpu.download_at(&self.time, 0)?,
        ))
    }

    /// Active tiles of the last step and the largest negative depth clamped so far.
    pub fn stats(&self) -> Result<(usize, f64), FlowError> {
        let n = self.gpu.download_at(&self.counters, 0)? as usize;
        let neg = f64::from_bits(self.gpu.download_at(&self.stats, 1)?);
        Ok((n, neg))
    }

    /// The current state `(w, hu, hv)`.
    pub fn download(&self) -> Result<super::State, FlowError> {
        let c = self.cur;
        Ok((
            self.gpu.download(&self.w[c])?,
            self.gpu.download(&self.hu[c])?,
            self.gpu.download(&self.hv[c])?,
        ))
    }
}
