//! The fluid's state and time step on a GPU: the stages of [`crate::fluid`] as kernel
//! launches on device-resident arrays; the output fields are device buffers that the
//! streaming server reads in place ([`crate::FieldData::Device`]).

use std::sync::Arc;

use tessera_gpu::{DeviceBuffer, Event, Gpu, LaunchConfig};

use super::multigrid::GpuMultigrid;
use super::{items, reduce_blocks, FlowKernels, BLOCK};
use crate::fluid::mac::{Mac, SideKind, CELL};
use crate::fluid::Fluid;
use crate::poisson::{Multigrid, SolveReport};
use crate::FlowError;

/// A running fluid on a GPU.
pub struct GpuFluid {
    gpu: Arc<Gpu>,
    k: Arc<FlowKernels>,
    mac: Mac,
    open: [DeviceBuffer<f32>; 3],
    fluid: DeviceBuffer<f32>,
    source: DeviceBuffer<f32>,
    vel: [DeviceBuffer<f32>; 3],
    vel_new: [DeviceBuffer<f32>; 3],
    fwd: DeviceBuffer<f32>,
    smoke: DeviceBuffer<f32>,
    smoke_new: DeviceBuffer<f32>,
    psi: DeviceBuffer<f32>,
    dpsi: DeviceBuffer<f32>,
    rhs: DeviceBuffer<f32>,
    pub(crate) mg: GpuMultigrid,
    /// Output fields in [`crate::Simulation::fields`] order; the smoke slot is a dummy
    /// (the smoke state itself is the field).
    out: Vec<DeviceBuffer<f32>>,
    smoke_index: usize,
    /// [max |u| over faces, max |div| over active fluid cells, max |b| before the
    /// projection] as float bits.
    stats: DeviceBuffer<u32>,
    events: [Event; 5],
}

impl GpuFluid {
    pub(crate) fn new(
        gpu: Arc<Gpu>,
        f: &Fluid,
        vel: &[Vec<f32>],
        mg: &Multigrid<f32>,
    ) -> Result<Self, FlowError> {
        let k = FlowKernels::new(&gpu)?;
        let mac = f.mac();
        let dim = mac.dim;
        let n = mac.cells();
        let dummy = || gpu.zeros::<f32>(1);
        let per_axis = |make: &dyn Fn(usize) -> Result<DeviceBuffer<f32>, FlowError>| -> Result<[DeviceBuffer<f32>; 3], FlowError> {
            Ok([make(0)?, make(1)?, make(2)?])
        };
        let open = per_axis(&|a| {
            Ok(if a < dim {
                gpu.upload(&f.open()[a])?
            } else {
                dummy()?
            })
        })?;
        let vel_d = per_axis(&|a| {
            Ok(if a < dim {
                gpu.upload(&vel[a])?
            } else {
                dummy()?
            })
        })?;
        let vel_new = per_axis(&|a| {
            Ok(if a < dim {
                gpu.zeros(mac.faces(a))?
            } else {
                dummy()?
            })
        })?;
        let biggest = (0..dim).map(|a| mac.faces(a)).max().unwrap_or(0).max(n);
        let infos = crate::Simulation::fields(f);
        let smoke_index = dim + 1;
        let mut out = Vec::with_capacity(infos.len());
        for (i, info) in infos.iter().enumerate() {
            out.push(if i == smoke_index {
                dummy()?
            } else if info.name == "Solid" {
                let s: Vec<f32> = f.fluid_fraction().iter().map(|v| 1.0 - v).collect();
                gpu.upload(&s)?
            } else {
                gpu.zeros(n)?
            });
        }
        let mgd = GpuMultigrid::upload(gpu.clone(), k.clone(), mg)?;
        let events = [
            gpu.new_event()?,
            gpu.new_event()?,
            gpu.new_event()?,
            gpu.new_event()?,
            gpu.new_event()?,
        ];
        let mut g = GpuFluid {
            fluid: gpu.upload(f.fluid_fraction())?,
            source: gpu.upload(f.source())?,
            fwd: gpu.zeros(biggest)?,
            smoke: gpu.zeros(n)?,
            smoke_new: gpu.zeros(n)?,
            psi: gpu.zeros(n)?,
            dpsi: gpu.zeros(n)?,
            rhs: gpu.zeros(n)?,
            stats: gpu.zeros(3)?,
            mg: mgd,
            open,
            vel: vel_d,
            vel_new,
            out,
            smoke_index,
            events,
            mac,
            k,
            gpu,
        };
        g.finish(0.0, (1.0 / f.setup().h) as f32)?;
        Ok(g)
    }

    pub(crate) fn levels(&self) -> usize {
        self.mg.levels()
    }
    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
    pub(crate) fn field(&self, k: usize) -> &DeviceBuffer<f32> {
        if k == self.smoke_index {
            &self.smoke
        } else {
            &self.out[k]
        }
    }
    pub(crate) fn face_velocities(&self) -> Result<Vec<Vec<f32>>, FlowError> {
        (0..self.mac.dim)
            .map(|a| Ok(self.gpu.download(&self.vel[a])?))
            .collect()
    }
    pub(crate) fn smoke(&self) -> Result<Vec<f32>, FlowError> {
        Ok(self.gpu.download(&self.smoke)?)
    }
    pub(crate) fn psi(&self) -> Result<Vec<f32>, FlowError> {
        Ok(self.gpu.download(&self.psi)?)
    }
    pub(crate) fn set_state(&mut self, vel: &[Vec<f32>], smoke: &[f32]) -> Result<(), FlowError> {
        for (a, v) in vel.iter().enumerate() {
            self.gpu.copy_to_device(v, &mut self.vel[a])?;
        }
        self.gpu.copy_to_device(smoke, &mut self.smoke)?;
        Ok(())
    }

    fn dims(&self) -> (i32, i32, i32, i32) {
        let [nx, ny, nz] = self.mac.dims;
        (nx as i32, ny as i32, nz as i32, self.mac.dim as i32)
    }

    /// Semi-Lagrangian step (and MacCormack correction) of `q` into `out`.
    #[allow(clippy::too_many_arguments)]
    fn advect_one(
        &self,
        s: f32,
        mc: bool,
        q: &DeviceBuffer<f32>,
        n: [usize; 3],
        off: [f32; 3],
        sources: bool,
        out: &DeviceBuffer<f32>,
    ) -> Result<(), FlowError> {
        let (nx, ny, nz, dim) = self.dims();
        let count = n[0] * n[1] * n[2];
        let qn = n.map(|v| v as i32);
        let sl_out = if mc { &self.fwd } else { out };
        self.gpu
            .launch(&self.k.advect_sl, items(count)?)
            .arg(&nx)
            .arg(&ny)
            .arg(&nz)
            .arg(&dim)
            .arg(&s)
            .arg(&self.vel[0])
            .arg(&self.vel[1])
            .arg(&self.vel[2])
            .arg(q)
            .arg(&qn[0])
            .arg(&qn[1])
            .arg(&qn[2])
            .arg(&off[0])
            .arg(&off[1])
            .arg(&off[2])
            .arg(sl_out)
            .run()?;
        if mc {
            self.gpu
                .launch(&self.k.advect_mc, items(count)?)
                .arg(&nx)
                .arg(&ny)
                .arg(&nz)
                .arg(&dim)
                .arg(&s)
                .arg(&self.vel[0])
                .arg(&self.vel[1])
                .arg(&self.vel[2])
                .arg(q)
                .arg(&self.fwd)
                .arg(&qn[0])
                .arg(&qn[1])
                .arg(&qn[2])
                .arg(&off[0])
                .arg(&off[1])
                .arg(&off[2])
                .arg(&(sources as i32))
                .arg(&self.source)
                .arg(&self.fluid)
                .arg(out)
                .run()?;
        } else if sources {
            self.gpu
                .launch(&self.k.apply_sources, items(count)?)
                .arg(&(count as i64))
                .arg(&self.source)
                .arg(&self.fluid)
                .arg(out)
                .run()?;
        }
        Ok(())
    }

    /// Stage 2 (see [`Fluid::advect`]); `s = dt / h`.
    pub(crate) fn advect(&mut self, s: f32, mc: bool) -> Result<(), FlowError> {
        self.events[0].record(&self.gpu)?;
        let mac = self.mac;
        for a in 0..mac.dim {
            self.advect_one(
                s,
                mc,
                &self.vel[a],
                mac.face_dims(a),
                Mac::face_offset(a),
                false,
                &self.vel_new[a],
            )?;
        }
        self.advect_one(s, mc, &self.smoke, mac.dims, CELL, true, &self.smoke_new)?;
        for a in 0..mac.dim {
            std::mem::swap(&mut self.vel[a], &mut self.vel_new[a]);
        }
        std::mem::swap(&mut self.smoke, &mut self.smoke_new);
        self.events[1].record(&self.gpu)?;
        Ok(())
    }

    /// Stages 3-4 (see [`Fluid::forces`]).
    pub(crate) fn forces(
        &mut self,
        nsub: usize,
        lambda: f32,
        buoyancy_dt: f32,
        sides: [SideKind; 6],
    ) -> Result<(), FlowError> {
        let (nx, ny, nz, dim) = self.dims();
        let mac = self.mac;
        for _ in 0..nsub {
            for a in 0..mac.dim {
                self.gpu
                    .launch(&self.k.diffuse, items(mac.faces(a))?)
                    .arg(&nx)
                    .arg(&ny)
                    .arg(&nz)
                    .arg(&dim)
                    .arg(&(a as i32))
                    .arg(&self.open[a])
                    .arg(&self.vel[a])
                    .arg(&lambda)
                    .arg(&self.vel_new[a])
                    .run()?;
                std::mem::swap(&mut self.vel[a], &mut self.vel_new[a]);
            }
        }
        let mut kind = [0i32; 6];
        let mut val = [0.0f32; 6];
        for s in 0..6 {
            match sides[s] {
                SideKind::Wall => kind[s] = 0,
                SideKind::Inflow(v) => {
                    kind[s] = 1;
                    val[s] = v;
                }
                SideKind::Outflow => kind[s] = 2,
            }
        }
        let up = dim - 1;
        for a in 0..mac.dim {
            self.gpu
                .launch(&self.k.forces, items(mac.faces(a))?)
                .arg(&nx)
                .arg(&ny)
                .arg(&nz)
                .arg(&dim)
                .arg(&(a as i32))
                .arg(&self.open[a])
                .arg(&self.smoke)
                .arg(&buoyancy_dt)
                .arg(&up)
                .arg(&kind[0])
                .arg(&kind[1])
                .arg(&kind[2])
                .arg(&kind[3])
                .arg(&kind[4])
                .arg(&kind[5])
                .arg(&val[0])
                .arg(&val[1])
                .arg(&val[2])
                .arg(&val[3])
                .arg(&val[4])
                .arg(&val[5])
                .arg(&self.vel[a])
                .run()?;
        }
        self.events[2].record(&self.gpu)?;
        Ok(())
    }

    fn rhs(&self, x: &DeviceBuffer<f32>, ratio: f32) -> Result<(), FlowError> {
        let (nx, ny, nz, dim) = self.dims();
        let f = self.mg.finest();
        let n = self.mac.cells();
        let cfg = LaunchConfig::blocks(reduce_blocks(&self.gpu, n), BLOCK);
        self.gpu
            .launch(&self.k.proj_rhs, cfg)
            .arg(&nx)
            .arg(&ny)
            .arg(&nz)
            .arg(&dim)
            .arg(&f.d)
            .arg(&f.w[0])
            .arg(&f.w[1])
            .arg(&f.w[2])
            .arg(&self.open[0])
            .arg(&self.open[1])
            .arg(&self.open[2])
            .arg(&self.vel[0])
            .arg(&self.vel[1])
            .arg(&self.vel[2])
            .arg(&self.rhs)
            .arg(x)
            .arg(&ratio)
            .arg(&self.stats)
            .run()?;
        Ok(())
    }

    fn faces(&self, x: &DeviceBuffer<f32>, outflow: [[bool; 2]; 3]) -> Result<(), FlowError> {
        let (nx, ny, nz, _) = self.dims();
        for a in 0..self.mac.dim {
            self.gpu
                .launch(&self.k.proj_faces, items(self.mac.faces(a))?)
                .arg(&nx)
                .arg(&ny)
                .arg(&nz)
                .arg(&(a as i32))
                .arg(&self.open[a])
                .arg(x)
                .arg(&(outflow[a][0] as i32))
                .arg(&(outflow[a][1] as i32))
                .arg(&self.vel[a])
                .run()?;
        }
        Ok(())
    }

    /// Stage 5 (see [`Fluid::project`]): `ratio` scales the warm start.
    pub(crate) fn project(
        &mut self,
        ratio: f32,
        refine: bool,
        outflow: [[bool; 2]; 3],
    ) -> Result<SolveReport, FlowError> {
        self.gpu.memset_zero(&mut self.stats)?;
        self.rhs(&self.psi, ratio)?;
        let mut rep = self.mg.solve(&self.psi, &self.rhs)?;
        self.faces(&self.psi, outflow)?;
        if refine {
            self.rhs(&self.dpsi, 0.0)?;
            let r2 = self.mg.solve(&self.dpsi, &self.rhs)?;
            self.faces(&self.dpsi, outflow)?;
            let n = self.mac.cells();
            self.gpu
                .launch(&self.k.add_scaled, items(n)?)
                .arg(&(n as i64))
                .arg(&1.0f32)
                .arg(&self.dpsi)
                .arg(&self.psi)
                .run()?;
            rep.iterations += r2.iterations;
            rep.converged &= r2.converged;
            rep.residuals.extend(r2.residuals.iter().skip(1));
        }
        self.events[3].record(&self.gpu)?;
        Ok(rep)
    }

    /// Stage 6: output fields; returns (max |u|, max |div| after, max |b| before / 1).
    pub(crate) fn finish(&mut self, pscale: f32, inv_h: f32) -> Result<(f64, f64, f64), FlowError> {
        let (nx, ny, nz, dim) = self.dims();
        let f = self.mg.finest();
        let n = self.mac.cells();
        let cfg = LaunchConfig::blocks(reduce_blocks(&self.gpu, n), BLOCK);
        let vz = if dim == 3 { 3 } else { 0 };
        let div = self.smoke_index + 1;
        self.gpu
            .launch(&self.k.outputs, cfg)
            .arg(&nx)
            .arg(&ny)
            .arg(&nz)
            .arg(&dim)
            .arg(&f.d)
            .arg(&f.w[0])
            .arg(&f.w[1])
            .arg(&f.w[2])
            .arg(&self.open[0])
            .arg(&self.open[1])
            .arg(&self.open[2])
            .arg(&self.vel[0])
            .arg(&self.vel[1])
            .arg(&self.vel[2])
            .arg(&self.fluid)
            .arg(&self.psi)
            .arg(&pscale)
            .arg(&inv_h)
            .arg(&self.out[0])
            .arg(&self.out[1])
            .arg(&self.out[2])
            .arg(&self.out[if vz == 3 { 3 } else { self.smoke_index }])
            .arg(&self.out[div])
            .arg(&self.stats)
            .run()?;
        self.events[4].record(&self.gpu)?;
        let st = self.gpu.download(&self.stats)?;
        let v = |i: usize| f32::from_bits(st[i]) as f64;
        Ok((v(0), v(1), v(2)))
    }

    /// Benchmark support: the projection's right-hand side from the current velocity and a
    /// zero initial guess.
    pub(crate) fn pressure_problem(&mut self) -> Result<(), FlowError> {
        self.gpu.memset_zero(&mut self.stats)?;
        self.rhs(&self.psi, 0.0)
    }
    /// Benchmark support: solve the pressure problem in place.
    pub(crate) fn solve_pressure(&mut self) -> Result<SolveReport, FlowError> {
        self.mg.solve(&self.psi, &self.rhs)
    }
    /// Benchmark support: median milliseconds of one V-cycle (batches of `per` cycles
    /// between two events, `reps` batches, one warm-up batch).
    pub(crate) fn time_vcycles(&self, per: usize, reps: usize) -> Result<f64, FlowError> {
        let (a, b) = (&self.events[0], &self.events[1]);
        let mut v = Vec::new();
        for r in 0..=reps {
            a.record(&self.gpu)?;
            for _ in 0..per {
                self.mg.vcycle(&self.psi, &self.rhs, false)?;
            }
            b.record(&self.gpu)?;
            let ms = a.elapsed_ms(b)? as f64 / per as f64;
            if r > 0 {
                v.push(ms);
            }
        }
        Ok(tessera_gpu::median(&mut v))
    }

    /// Milliseconds of (advection, projection, other) of the last step (after `finish`).
    pub(crate) fn stage_ms(&self) -> Result<(f64, f64, f64), FlowError> {
        let e = &self.events;
        let adv = e[0].elapsed_ms(&e[1])? as f64;
        let forces = e[1].elapsed_ms(&e[2])? as f64;
        let proj = e[2].elapsed_ms(&e[3])? as f64;
        let out = e[3].elapsed_ms(&e[4])? as f64;
        Ok((adv, proj, forces + out))
    }
}
