//! The cut-cell MAC fluid of dissertation §6.3.2: an Eulerian incompressible flow solver
//! on a staggered regular grid with solid obstacles given by open face areas, whose pressure
//! projection is Eq. 6.3 solved by the Galerkin-consistent geometric multigrid of
//! [`crate::poisson`].
//!
//! One time step, in order (each stage a CPU function in [`mac`] and one GPU kernel):
//!
//! 1. `dt = min(cfl h / max|u|, dt_max)` from the previous step's velocity;
//! 2. advection of the face velocities and of the smoke by the velocity of the step's
//!    start: semi-Lagrangian with a midpoint back-trace, then the MacCormack correction,
//!    clamped to the interpolation stencil's range ([`mac::advect_maccormack`]);
//! 3. viscosity (explicit, sub-stepped so that `nu dt_sub / h^2 <= 0.9 / (2d)`);
//! 4. body forces (buoyancy of the smoke along the up axis), smoke sources, boundary values
//!    (walls: zero normal velocity; inflow: prescribed; solid faces: zero);
//! 5. projection: Eq. 6.3 for `psi = dt p / (rho h)`,
//!    `sum_f alpha_f (psi_c - psi_F) + D_c psi_c = -sum_f (+-) alpha_f u_f`
//!    (`alpha_f` the open fraction; weights relative to `h^(d-2)`), solved by MGPCG from the
//!    previous step's pressure, then `u_f -= psi_hi - psi_lo` on open faces;
//! 6. the cell-centred output fields.
//!
//! Fields: `Pressure` (Pa, with `rho = 1` by default), `VelocityX`, `VelocityY`, `VelocityZ`
//! (3D only; face velocities averaged to cell centres), `Smoke` (passive scalar),
//! `Divergence` (net outflow per cell volume after the projection, 1/s) and `Solid` (solid
//! volume fraction of the cell, 1 inside obstacles).

pub mod mac;

use std::sync::Arc;
use std::time::Instant;

use tessera_core::Par;
use tessera_gpu::Gpu;

use crate::geometry::{CutCells, Obstacles, Shape};
use crate::poisson::{finest_level, MgParams, Multigrid, SolveReport};
use crate::simulation::unknown_field;
use crate::{FieldData, FieldInfo, FlowError, Grid, Simulation, StepReport};
use mac::{Mac, SideKind, CELL};

/// What a side of the domain does (order of the sides: x-, x+, y-, y+, z-, z+).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Boundary {
    /// Free-slip solid wall.
    Wall,
    /// Inflow with this normal speed (positive into the domain).
    Inflow(f64),
    /// Outflow: pressure zero.
    Outflow,
}

/// Physical and numerical parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FluidParams {
    /// Courant number of the adaptive time step.
    pub cfl: f64,
    /// Upper bound of the time step.
    pub dt_max: f64,
    /// Speed assumed by the first step's CFL condition (the inflow speed, say).
    pub reference_speed: f64,
    /// Kinematic viscosity (0: inviscid).
    pub viscosity: f64,
    /// Density.
    pub density: f64,
    /// Buoyancy acceleration per unit smoke along the up axis (y in 2D, z in 3D).
    pub buoyancy: f64,
    /// MacCormack correction after the semi-Lagrangian step.
    pub maccormack: bool,
    /// Project twice: the second pass solves for the divergence the first left behind
    /// (iterative refinement). In f32 the pressure's rounding limits one pass to a
    /// divergence of about `eps |psi|`; the second pass's small correction is not limited so.
    pub refine_projection: bool,
    /// The pressure solver.
    pub multigrid: MgParams,
}

impl Default for FluidParams {
    fn default() -> Self {
        FluidParams {
            cfl: 1.0,
            dt_max: 1.0,
            reference_speed: 1.0,
            viscosity: 0.0,
            density: 1.0,
            buoyancy: 0.0,
            maccormack: true,
            refine_projection: false,
            multigrid: MgParams::default(),
        }
    }
}

/// Everything that defines a fluid run: the grid, the obstacles, the sides, the smoke
/// sources and the parameters. Scenes ([`crate::scene`]) build these by name.
#[derive(Clone, Debug)]
pub struct FluidSetup {
    pub name: String,
    /// Cells per axis (`dims[2] == 1` in 2D).
    pub dims: [usize; 3],
    /// 2 or 3.
    pub dim: usize,
    /// Cell size.
    pub h: f64,
    pub origin: [f64; 3],
    pub sides: [Boundary; 6],
    pub obstacles: Obstacles,
    /// Smoke sources: cells whose centre lies inside a shape get the value every step.
    pub smoke_sources: Vec<(Shape, f64)>,
    /// Initial velocity inside the domain.
    pub initial_velocity: [f64; 3],
    pub params: FluidParams,
}

/// Largest grid the fluid accepts.
pub const MAX_CELLS: usize = 1 << 28;

impl FluidSetup {
    /// Check sizes and parameters.
    pub fn validate(&self) -> Result<(), FlowError> {
        let d = self.dims;
        if !(self.dim == 2 || self.dim == 3) {
            return Err(FlowError::Invalid(format!(
                "dimension {}: must be 2 or 3",
                self.dim
            )));
        }
        if d[..self.dim].iter().any(|&n| n < 4) || (self.dim == 2 && d[2] != 1) {
            return Err(FlowError::Invalid(format!(
                "grid {}: every size must be at least 4",
                fmt_dims(d, self.dim)
            )));
        }
        if d.iter()
            .try_fold(1usize, |a, &n| a.checked_mul(n))
            .is_none_or(|c| c > MAX_CELLS)
        {
            return Err(FlowError::Invalid(format!(
                "grid {}: more than 2^28 cells",
                fmt_dims(d, self.dim)
            )));
        }
        let p = &self.params;
        if !(self.h > 0.0 && self.h.is_finite()) {
            return Err(FlowError::Invalid(format!("cell size {}", self.h)));
        }
        if !(p.cfl > 0.0 && p.dt_max > 0.0 && p.density > 0.0 && p.viscosity >= 0.0) {
            return Err(FlowError::Invalid(format!(
                "parameters: cfl {}, dt_max {}, density {}, viscosity {} (cfl, dt_max and density must be positive)",
                p.cfl, p.dt_max, p.density, p.viscosity
            )));
        }
        for s in &self.obstacles.shapes {
            s.validate()?;
        }
        Ok(())
    }
}

/// `512x128` or `64x64x64`.
pub fn fmt_dims(d: [usize; 3], dim: usize) -> String {
    d[..dim]
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

/// Field names in the order [`Simulation::fields`] lists them.
fn field_infos(dim: usize) -> Vec<FieldInfo> {
    let mut f = vec![
        FieldInfo::cell("Pressure", "Pa"),
        FieldInfo::cell("VelocityX", "m/s"),
        FieldInfo::cell("VelocityY", "m/s"),
    ];
    if dim == 3 {
        f.push(FieldInfo::cell("VelocityZ", "m/s"));
    }
    f.push(FieldInfo::cell("Smoke", "1"));
    f.push(FieldInfo::cell("Divergence", "1/s"));
    f.push(FieldInfo::cell("Solid", "1"));
    f
}

/// Timings and counters of the last step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepStats {
    pub dt: f64,
    /// Advection of velocity and smoke (with the smoke sources).
    pub advect_ms: f64,
    /// The pressure projection (right-hand side, solve, velocity update).
    pub project_ms: f64,
    /// Viscosity, forces, boundary values, output fields.
    pub other_ms: f64,
    /// The pressure solve.
    pub solve: SolveReport,
    /// Largest `|net outflow| / h` over active fluid cells before and after the projection.
    pub max_divergence_before: f64,
    pub max_divergence_after: f64,
}

/// The CPU state of a running fluid.
struct CpuState {
    vel: Vec<Vec<f32>>,
    smoke: Vec<f32>,
    psi: Vec<f32>,
    tmp_fwd: Vec<f32>,
    /// The MacCormack clamp's range per sample.
    tmp_range: Vec<[f32; 2]>,
    tmp_new: Vec<Vec<f32>>,
    smoke_new: Vec<f32>,
    rhs: Vec<f32>,
    active: Vec<bool>,
    mg: Multigrid<f32>,
}

/// A running cut-cell fluid (module docs); implements [`Simulation`].
pub struct Fluid {
    setup: FluidSetup,
    mac: Mac,
    sides: [SideKind; 6],
    /// Open face fractions per axis (f32, face arrays).
    open: Vec<Vec<f32>>,
    /// Fluid volume fraction per cell.
    fluid: Vec<f32>,
    /// Smoke source value per cell (0: none).
    source: Vec<f32>,
    infos: Vec<FieldInfo>,
    /// Output fields (cell-centred), in `infos` order (CPU fluids).
    out: Vec<Vec<f32>>,
    cpu: Option<CpuState>,
    gpu: Option<crate::cuda::GpuFluid>,
    time: f64,
    steps: u64,
    dt_prev: f64,
    speed: f64,
    last: StepStats,
}

fn slices<'a>(v: &'a [Vec<f32>], dim: usize) -> [&'a [f32]; 3] {
    let empty: &[f32] = &[];
    std::array::from_fn(|a| if a < dim { v[a].as_slice() } else { empty })
}

impl Fluid {
    /// Measure the obstacles, build the multigrid hierarchy and the initial state (on
    /// `gpu` when given, else on the CPU). An obstacle covering the whole domain is an
    /// error.
    pub fn new(setup: FluidSetup, gpu: Option<Arc<Gpu>>) -> Result<Fluid, FlowError> {
        setup.validate()?;
        let dim = setup.dim;
        let mac = Mac {
            dims: setup.dims,
            dim,
        };
        let cut = CutCells::measure(setup.dims, dim, setup.h, setup.origin, &setup.obstacles);
        if !cut.fluid.iter().any(|&f| f > 0.0) {
            return Err(FlowError::Invalid(format!(
                "scene `{}`: the obstacles cover the whole domain (no fluid cell)",
                setup.name
            )));
        }
        let mut dirichlet = [false; 6];
        let mut sides = [SideKind::Wall; 6];
        for s in 0..2 * dim {
            sides[s] = match setup.sides[s] {
                Boundary::Wall => SideKind::Wall,
                Boundary::Outflow => {
                    dirichlet[s] = true;
                    SideKind::Outflow
                }
                // the normal component: positive into the domain
                Boundary::Inflow(v) => SideKind::Inflow(if s % 2 == 0 { v } else { -v } as f32),
            };
        }
        let level = finest_level::<f32>(&cut, dirichlet);
        let active: Vec<bool> = (0..level.len()).map(|c| level.is_active(c)).collect();
        if !active.iter().any(|&a| a) {
            return Err(FlowError::Invalid(format!(
                "scene `{}`: no cell of the grid is connected to an open face",
                setup.name
            )));
        }
        let open: Vec<Vec<f32>> = cut
            .open
            .iter()
            .map(|v| v.iter().map(|&x| x as f32).collect())
            .collect();
        let fluid: Vec<f32> = cut.fluid.iter().map(|&x| x as f32).collect();
        let n = mac.cells();
        let mut source = vec![0.0f32; n];
        let h = setup.h;
        for (c, s) in source.iter_mut().enumerate() {
            let [nx, ny, _] = setup.dims;
            let (i, j, k) = (c % nx, (c / nx) % ny, c / (nx * ny));
            let p = [
                setup.origin[0] + (i as f64 + 0.5) * h,
                setup.origin[1] + (j as f64 + 0.5) * h,
                if dim == 3 {
                    setup.origin[2] + (k as f64 + 0.5) * h
                } else {
                    0.0
                },
            ];
            for (shape, v) in &setup.smoke_sources {
                if shape.distance(p) < 0.0 {
                    *s = *v as f32;
                }
            }
        }
        let mut vel: Vec<Vec<f32>> = (0..dim)
            .map(|a| vec![setup.initial_velocity[a] as f32; mac.faces(a)])
            .collect();
        let zero_smoke = vec![0.0f32; n];
        for (a, v) in vel.iter_mut().enumerate() {
            mac::forces_and_boundaries(&mac, a, &open[a], &zero_smoke, 0.0, dim - 1, sides, v);
        }
        let infos = field_infos(dim);
        let mut f = Fluid {
            speed: setup.params.reference_speed.abs(),
            mac,
            sides,
            open,
            fluid,
            source,
            infos,
            out: Vec::new(),
            cpu: None,
            gpu: None,
            time: 0.0,
            steps: 0,
            dt_prev: 0.0,
            last: StepStats::default(),
            setup,
        };
        let mg = Multigrid::new(level, f.setup.params.multigrid, Par::auto());
        match gpu {
            Some(g) => {
                f.gpu = Some(crate::cuda::GpuFluid::new(g, &f, &vel, &mg)?);
            }
            None => {
                f.out = f.infos.iter().map(|_| vec![0.0f32; n]).collect();
                let solid = f.infos.len() - 1;
                for (o, fl) in f.out[solid].iter_mut().zip(&f.fluid) {
                    *o = 1.0 - fl;
                }
                f.cpu = Some(CpuState {
                    smoke: vec![0.0; n],
                    psi: vec![0.0; n],
                    tmp_fwd: vec![0.0; (0..dim).map(|a| mac.faces(a)).max().unwrap_or(0).max(n)],
                    tmp_range: vec![
                        [0.0; 2];
                        (0..dim).map(|a| mac.faces(a)).max().unwrap_or(0).max(n)
                    ],
                    tmp_new: (0..dim).map(|a| vec![0.0; mac.faces(a)]).collect(),
                    smoke_new: vec![0.0; n],
                    rhs: vec![0.0; n],
                    active,
                    vel,
                    mg,
                });
                f.finish(0.0)?;
            }
        }
        Ok(f)
    }

    /// The setup this fluid runs.
    pub fn setup(&self) -> &FluidSetup {
        &self.setup
    }
    /// The MAC grid.
    pub fn mac(&self) -> Mac {
        self.mac
    }
    /// Boundary values of the sides, as the kernels see them.
    pub fn side_kinds(&self) -> [SideKind; 6] {
        self.sides
    }
    /// Open face fractions per axis.
    pub fn open(&self) -> &[Vec<f32>] {
        &self.open
    }
    /// Fluid volume fractions per cell.
    pub fn fluid_fraction(&self) -> &[f32] {
        &self.fluid
    }
    /// Smoke source values per cell.
    pub fn source(&self) -> &[f32] {
        &self.source
    }
    /// Statistics of the last step.
    pub fn last_stats(&self) -> &StepStats {
        &self.last
    }
    /// The GPU state (benchmarks).
    pub(crate) fn gpu_state_mut(&mut self) -> Option<&mut crate::cuda::GpuFluid> {
        self.gpu.as_mut()
    }
    /// Whether the state lives on a GPU.
    pub fn on_gpu(&self) -> bool {
        self.gpu.is_some()
    }
    /// Levels of the multigrid hierarchy.
    pub fn levels(&self) -> usize {
        match (&self.cpu, &self.gpu) {
            (Some(c), _) => c.mg.levels.len(),
            (_, Some(g)) => g.levels(),
            _ => 0,
        }
    }

    /// The face velocities (copied from the device on a GPU fluid).
    pub fn face_velocities(&self) -> Result<Vec<Vec<f32>>, FlowError> {
        match (&self.cpu, &self.gpu) {
            (Some(c), _) => Ok(c.vel.clone()),
            (_, Some(g)) => g.face_velocities(),
            _ => unreachable!("a fluid has a CPU or a GPU state"),
        }
    }
    /// The smoke (copied from the device on a GPU fluid).
    pub fn smoke(&self) -> Result<Vec<f32>, FlowError> {
        match (&self.cpu, &self.gpu) {
            (Some(c), _) => Ok(c.smoke.clone()),
            (_, Some(g)) => g.smoke(),
            _ => unreachable!("a fluid has a CPU or a GPU state"),
        }
    }
    /// `psi = dt p / (rho h)` of the last projection (copied from the device on a GPU fluid).
    pub fn psi(&self) -> Result<Vec<f32>, FlowError> {
        match (&self.cpu, &self.gpu) {
            (Some(c), _) => Ok(c.psi.clone()),
            (_, Some(g)) => g.psi(),
            _ => unreachable!("a fluid has a CPU or a GPU state"),
        }
    }
    /// Replace the face velocities and the smoke (tests compare back-ends from one state).
    pub fn set_state(&mut self, vel: &[Vec<f32>], smoke: &[f32]) -> Result<(), FlowError> {
        if vel.len() != self.mac.dim
            || (0..self.mac.dim).any(|a| vel[a].len() != self.mac.faces(a))
            || smoke.len() != self.mac.cells()
        {
            return Err(FlowError::Invalid("state of the wrong shape".into()));
        }
        match (&mut self.cpu, &mut self.gpu) {
            (Some(c), _) => {
                c.vel = vel.to_vec();
                c.smoke = smoke.to_vec();
            }
            (_, Some(g)) => g.set_state(vel, smoke)?,
            _ => unreachable!("a fluid has a CPU or a GPU state"),
        }
        self.speed = mac::max_speed(&vel.iter().map(|v| v.as_slice()).collect::<Vec<_>>())
            .max(self.setup.params.reference_speed as f32) as f64;
        Ok(())
    }

    /// The time step the next step takes.
    pub fn next_dt(&self) -> f64 {
        let p = &self.setup.params;
        let s = self.speed.max(1e-6);
        (p.cfl * self.setup.h / s).min(p.dt_max)
    }

    /// Viscosity sub-steps and their `lambda = nu dt_sub / h^2` for a step `dt`.
    pub fn viscosity_substeps(&self, dt: f64) -> (usize, f32) {
        let nu = self.setup.params.viscosity;
        if nu <= 0.0 {
            return (0, 0.0);
        }
        let lam = nu * dt / (self.setup.h * self.setup.h);
        let limit = 0.9 / (2.0 * self.mac.dim as f64);
        let n = (lam / limit).ceil().max(1.0) as usize;
        (n, (lam / n as f64) as f32)
    }

    /// Stage 2: advection of the face velocities and the smoke by the current velocity,
    /// then the smoke sources.
    pub fn advect(&mut self, dt: f64) -> Result<(), FlowError> {
        let mac = self.mac;
        let dim = mac.dim;
        let s = (dt / self.setup.h) as f32;
        let mc = self.setup.params.maccormack;
        if let Some(g) = &mut self.gpu {
            return g.advect(s, mc);
        }
        let st = self.cpu.as_mut().expect("CPU state");
        {
            let vref = slices(&st.vel, dim);
            for a in 0..dim {
                let n = mac.face_dims(a);
                let off = Mac::face_offset(a);
                let len = mac.faces(a);
                if mc {
                    mac::advect_sl_ranged(
                        &mac,
                        &vref,
                        s,
                        vref[a],
                        n,
                        off,
                        &mut st.tmp_fwd[..len],
                        &mut st.tmp_range[..len],
                    );
                    mac::advect_maccormack(
                        &mac,
                        &vref,
                        s,
                        vref[a],
                        &st.tmp_fwd[..len],
                        &st.tmp_range[..len],
                        n,
                        off,
                        &mut st.tmp_new[a],
                    );
                } else {
                    mac::advect_sl(&mac, &vref, s, vref[a], n, off, &mut st.tmp_new[a]);
                }
            }
            let n = mac.dims;
            let len = mac.cells();
            if mc {
                mac::advect_sl_ranged(
                    &mac,
                    &vref,
                    s,
                    &st.smoke,
                    n,
                    CELL,
                    &mut st.tmp_fwd[..len],
                    &mut st.tmp_range[..len],
                );
                mac::advect_maccormack(
                    &mac,
                    &vref,
                    s,
                    &st.smoke,
                    &st.tmp_fwd[..len],
                    &st.tmp_range[..len],
                    n,
                    CELL,
                    &mut st.smoke_new,
                );
            } else {
                mac::advect_sl(&mac, &vref, s, &st.smoke, n, CELL, &mut st.smoke_new);
            }
        }
        std::mem::swap(&mut st.vel, &mut st.tmp_new);
        std::mem::swap(&mut st.smoke, &mut st.smoke_new);
        mac::sources(&mut st.smoke, &self.source, &self.fluid);
        Ok(())
    }

    /// Stages 3-4: viscosity sub-steps, buoyancy, boundary values, solid faces.
    pub fn forces(&mut self, dt: f64) -> Result<(), FlowError> {
        let mac = self.mac;
        let dim = mac.dim;
        let (nsub, lam) = self.viscosity_substeps(dt);
        let bdt = (self.setup.params.buoyancy * dt) as f32;
        if let Some(g) = &mut self.gpu {
            return g.forces(nsub, lam, bdt, self.sides);
        }
        let st = self.cpu.as_mut().expect("CPU state");
        for _ in 0..nsub {
            for a in 0..dim {
                mac::diffuse(&mac, a, &self.open[a], &st.vel[a], lam, &mut st.tmp_new[a]);
                std::mem::swap(&mut st.vel[a], &mut st.tmp_new[a]);
            }
        }
        for a in 0..dim {
            mac::forces_and_boundaries(
                &mac,
                a,
                &self.open[a],
                &st.smoke,
                bdt,
                dim - 1,
                self.sides,
                &mut st.vel[a],
            );
        }
        Ok(())
    }

    /// Stage 5: the pressure projection with a time step `dt` (the previous step's
    /// pressure, scaled to `dt`, is the initial guess); returns the solve's report and
    /// records the largest divergence before it.
    pub fn project(&mut self, dt: f64) -> Result<SolveReport, FlowError> {
        let mac = self.mac;
        let dim = mac.dim;
        let ratio = if self.dt_prev > 0.0 {
            (dt / self.dt_prev) as f32
        } else {
            1.0
        };
        let refine = self.setup.params.refine_projection;
        let outflow = |a: usize| {
            [
                self.sides[2 * a] == SideKind::Outflow,
                self.sides[2 * a + 1] == SideKind::Outflow,
            ]
        };
        if let Some(g) = &mut self.gpu {
            let out: [[bool; 2]; 3] =
                std::array::from_fn(|a| if a < dim { outflow(a) } else { [false; 2] });
            // the divergence before is read with the step's statistics in `finish`
            return g.project(ratio, refine, out);
        }
        let st = self.cpu.as_mut().expect("CPU state");
        let oref = slices(&self.open, dim);
        mac::projection_rhs(&mac, &oref, &slices(&st.vel, dim), &mut st.rhs);
        let before = st
            .rhs
            .iter()
            .zip(&st.active)
            .filter(|(_, &a)| a)
            .map(|(x, _)| x.abs() as f64)
            .fold(0.0, f64::max);
        self.last.max_divergence_before = before / self.setup.h;
        st.psi.iter_mut().for_each(|v| *v *= ratio);
        let mut rep = st.mg.solve(&mut st.psi, &st.rhs);
        for a in 0..dim {
            mac::project_faces(&mac, a, &self.open[a], &st.psi, outflow(a), &mut st.vel[a]);
        }
        if refine {
            mac::projection_rhs(&mac, &oref, &slices(&st.vel, dim), &mut st.rhs);
            let mut dpsi = std::mem::take(&mut st.smoke_new);
            dpsi.iter_mut().for_each(|v| *v = 0.0);
            let r2 = st.mg.solve(&mut dpsi, &st.rhs);
            for a in 0..dim {
                mac::project_faces(&mac, a, &self.open[a], &dpsi, outflow(a), &mut st.vel[a]);
            }
            for (p, d) in st.psi.iter_mut().zip(&dpsi) {
                *p += d;
            }
            rep.iterations += r2.iterations;
            rep.converged &= r2.converged;
            rep.residuals.extend(r2.residuals.iter().skip(1));
            st.smoke_new = dpsi;
        }
        Ok(rep)
    }

    /// Stage 6: the output fields for a step of `dt`; returns the largest face speed and
    /// records the largest divergence left.
    fn finish(&mut self, dt: f64) -> Result<f64, FlowError> {
        let pscale = if dt > 0.0 {
            (self.setup.params.density * self.setup.h / dt) as f32
        } else {
            0.0
        };
        let inv_h = (1.0 / self.setup.h) as f32;
        if let Some(g) = &mut self.gpu {
            let (speed, after, before) = g.finish(pscale, inv_h)?;
            self.last.max_divergence_after = after;
            self.last.max_divergence_before = before / self.setup.h;
            return Ok(speed);
        }
        let mac = self.mac;
        let dim = mac.dim;
        let st = self.cpu.as_ref().expect("CPU state");
        let oref = slices(&self.open, dim);
        let vref = slices(&st.vel, dim);
        let (pressure, rest) = self.out.split_at_mut(1);
        for (o, (&p, &f)) in pressure[0].iter_mut().zip(st.psi.iter().zip(&self.fluid)) {
            *o = if f > 0.0 { pscale * p } else { 0.0 };
        }
        for a in 0..dim {
            mac::face_to_cell(&mac, a, &st.vel[a], &mut rest[a]);
        }
        rest[dim].copy_from_slice(&st.smoke);
        let div = &mut rest[dim + 1];
        let mut dmax = 0.0f32;
        for (c, d) in div.iter_mut().enumerate() {
            *d = if self.fluid[c] > 0.0 {
                mac::net_outflow(&mac, &oref, &vref, c) * inv_h
            } else {
                0.0
            };
            if self.fluid[c] > 0.0 && st.active[c] {
                dmax = dmax.max(d.abs());
            }
        }
        self.last.max_divergence_after = dmax as f64;
        Ok(mac::max_speed(&vref[..dim]) as f64)
    }
}

impl Simulation for Fluid {
    fn name(&self) -> &str {
        &self.setup.name
    }
    fn grid(&self) -> Grid {
        Grid {
            dims: self.setup.dims,
            spacing: self.setup.h,
            origin: self.setup.origin,
        }
    }
    fn fields(&self) -> &[FieldInfo] {
        &self.infos
    }
    fn step(&mut self) -> Result<StepReport, FlowError> {
        let t0 = Instant::now();
        let dt = self.next_dt();
        self.advect(dt)?;
        let t1 = Instant::now();
        self.forces(dt)?;
        let t2 = Instant::now();
        let solve = self.project(dt)?;
        let t3 = Instant::now();
        let speed = self.finish(dt)?;
        let t4 = Instant::now();
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
        let (advect_ms, project_ms, other_ms) = match &self.gpu {
            Some(g) => g.stage_ms()?,
            None => (ms(t0, t1), ms(t2, t3), ms(t1, t2) + ms(t3, t4)),
        };
        self.last.dt = dt;
        self.last.advect_ms = advect_ms;
        self.last.project_ms = project_ms;
        self.last.other_ms = other_ms;
        self.last.solve = solve;
        self.dt_prev = dt;
        self.speed = speed.max(1e-6);
        self.time += dt;
        self.steps += 1;
        if !self.speed.is_finite() {
            return Err(FlowError::Invalid(format!(
                "scene `{}`: the velocity became non-finite at step {}",
                self.setup.name, self.steps
            )));
        }
        let st = &self.last;
        Ok(StepReport {
            dt,
            wall_ms: t0.elapsed().as_secs_f64() * 1e3,
            stats: vec![
                ("advect_ms", st.advect_ms),
                ("project_ms", st.project_ms),
                ("other_ms", st.other_ms),
                ("cycles", st.solve.iterations as f64),
                ("residual", st.solve.relative_residual()),
            ],
        })
    }
    fn time(&self) -> f64 {
        self.time
    }
    fn steps(&self) -> u64 {
        self.steps
    }
    fn field(&self, name: &str) -> Result<FieldData<'_>, FlowError> {
        let k = self
            .infos
            .iter()
            .position(|f| f.name == name)
            .ok_or_else(|| unknown_field(self, name))?;
        Ok(match &self.gpu {
            Some(g) => FieldData::Device(g.field(k)),
            None => FieldData::Host(&self.out[k]),
        })
    }
    fn gpu(&self) -> Option<&Arc<Gpu>> {
        self.gpu.as_ref().map(|g| g.gpu())
    }
}
