//! A GPU shallow-water flood simulation on active 16x16 tiles (dissertation §6.3.5: "a
//! GPU-based shallow water solver ... second order in time and space ... explicit, adaptive
//! time step ... only 16x16 subdomains that contain water, or are adjacent to cells that
//! contain water, are considered in the simulation kernels").
//!
//! The scheme is the well-balanced, positivity-preserving central-upwind scheme of Kurganov
//! and Petrova (2007) as used by Brodtkorb et al. (2012); [`reference`] states it formula by
//! formula. Reflecting walls bound the domain, so the water volume changes only by rain.
//! State is double precision (mass is conserved to about 1e-15 relative, a lake at rest stays
//! exactly at rest); the fields handed to consumers are single precision:
//!
//! | field | unit | meaning |
//! |---|---|---|
//! | `Depth` | m | water depth `h = w - B` |
//! | `MomentumX`, `MomentumY` | m²/s | `hu`, `hv` |
//! | `Surface` | m | water surface `w` (terrain where dry) |
//! | `Speed` | m/s | desingularized `|hu| / h` |
//! | `Terrain` | m | bathymetry `B` at the cell centre |
//!
//! One step on the GPU is five kernel launches without a host synchronisation ([`gpu`]); the
//! CPU reference performs the same operations in the same order, so both agree bit for bit
//! (test `shallow_water_step_matches_reference`).

// `!(x > 0.0)` mirrors the CUDA kernels' NaN-safe tests; index loops mirror the kernels too.
#![allow(clippy::neg_cmp_op_on_partial_ord, clippy::needless_range_loop)]

pub mod bench;
pub mod gpu;
pub mod reference;
pub mod terrain;

/// A state `(w, hu, hv)` in double precision.
pub type State = (Vec<f64>, Vec<f64>, Vec<f64>);

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use tessera_gpu::Gpu;

use crate::simulation::unknown_field;
use crate::{FieldData, FieldInfo, FlowError, Grid, Simulation, StepReport};
use reference::{clamp_cell, desing, tile_stage, StageInput, StageParams, T};

/// Field names in the order of [`ShallowWater::fields`].
pub const FIELDS: [&str; 6] = [
    "Depth",
    "MomentumX",
    "MomentumY",
    "Surface",
    "Speed",
    "Terrain",
];

/// Rain on a disc.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rain {
    /// m/s of water added.
    pub rate: f64,
    pub center: [f64; 2],
    pub radius: f64,
}

/// Physical and numerical parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwParams {
    /// Gravity (m/s²).
    pub g: f64,
    /// Minmod parameter in `[1, 2]` (1.3 as in KP07).
    pub theta: f64,
    /// Courant number (at most 1/4 for positivity in 2D).
    pub cfl: f64,
    /// Largest time step (s), also the step when nothing moves.
    pub dt_max: f64,
    /// Depth `kappa` (m) below which velocities are desingularized (`eps = kappa^4`) and
    /// cell momenta rebuilt from them.
    pub desing_depth: f64,
    /// Darcy-Weisbach bed friction factor (0: frictionless; 0.05 for the flood scenes).
    pub friction: f64,
    pub rain: Option<Rain>,
}

impl Default for SwParams {
    fn default() -> Self {
        SwParams {
            g: 9.81,
            theta: 1.3,
            cfl: 0.25,
            dt_max: 1.0,
            desing_depth: 1e-2,
            friction: 0.0,
            rain: None,
        }
    }
}

/// The built-in scenes of `--sim shallow-water`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scene {
    /// A reservoir in the upper valley released at `t = 0` (about 10 % of the area wet).
    DamBreak,
    /// Rain on a disc over a dry valley.
    Rain,
}

impl std::str::FromStr for Scene {
    type Err = FlowError;
    fn from_str(s: &str) -> Result<Scene, FlowError> {
        match s {
            "dam-break" | "dambreak" => Ok(Scene::DamBreak),
            "rain" => Ok(Scene::Rain),
            _ => Err(FlowError::Invalid(format!(
                "unknown shallow-water scene `{s}` (dam-break, rain)"
            ))),
        }
    }
}

/// The shallow-water simulation (CPU reference, or the same on a GPU).
pub struct ShallowWater {
    name: String,
    p: StageParams,
    corners: Vec<f32>,
    bc: Vec<f64>,
    w: Vec<f64>,
    hu: Vec<f64>,
    hv: Vec<f64>,
    r1: [Vec<f64>; 3],
    wet: [Vec<u32>; 2],
    forced: Vec<u32>,
    host_fields: Vec<Vec<f32>>,
    fields: Vec<FieldInfo>,
    time: f64,
    steps: u64,
    neg: f64,
    active_tiles: usize,
    dev: Option<gpu::GpuState>,
}

fn neumaier(values: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for v in values {
        let t = s + v;
        if s.abs() >= v.abs() {
            c += (s - t) + v;
        } else {
            c += (v - t) + s;
        }
        s = t;
    }
    s + c
}

impl ShallowWater {
    /// A simulation of `nx x ny` cells of size `dx` over corner bathymetry `corners`
    /// (`(nx + 1) x (ny + 1)`) with initial surface `w` and momenta (cell values). Cells with
    /// `w` below the bottom start dry.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &str,
        nx: usize,
        ny: usize,
        dx: f64,
        params: SwParams,
        corners: Vec<f32>,
        mut w: Vec<f64>,
        mut hu: Vec<f64>,
        mut hv: Vec<f64>,
    ) -> Result<ShallowWater, FlowError> {
        if nx < 2 || ny < 2 || nx > 1 << 15 || ny > 1 << 15 {
            return Err(FlowError::Invalid(format!(
                "shallow water grid {nx}x{ny}: each side must be in 2..=32768"
            )));
        }
        if !(dx.is_finite() && dx > 0.0) {
            return Err(FlowError::Invalid(format!(
                "cell size {dx}: must be positive"
            )));
        }
        let n = nx * ny;
        if corners.len() != (nx + 1) * (ny + 1) || w.len() != n || hu.len() != n || hv.len() != n {
            return Err(FlowError::Invalid(format!(
                "shallow water {nx}x{ny}: need {} corner heights and {n} values of w, hu, hv",
                (nx + 1) * (ny + 1)
            )));
        }
        if let Some(i) = corners.iter().position(|c| !c.is_finite()) {
            return Err(FlowError::Invalid(format!(
                "corner height {i} is not finite"
            )));
        }
        if let Some(i) =
            (0..n).position(|i| !(w[i].is_finite() && hu[i].is_finite() && hv[i].is_finite()))
        {
            return Err(FlowError::Invalid(format!(
                "initial state of cell {i} is not finite"
            )));
        }
        let pr = params;
        let ok = pr.g > 0.0
            && (1.0..=2.0).contains(&pr.theta)
            && pr.cfl > 0.0
            && pr.cfl <= 0.25
            && pr.dt_max > 0.0
            && pr.desing_depth > 0.0
            && pr.friction >= 0.0
            && pr.friction.is_finite();
        if !ok {
            return Err(FlowError::Invalid(format!(
                "shallow water parameters {pr:?}: need g > 0, theta in [1, 2], 0 < cfl <= 1/4, dt_max > 0, desing_depth > 0"
            )));
        }
        let c = |i: usize, j: usize| corners[i + (nx + 1) * j] as f64;
        let bc: Vec<f64> = (0..n)
            .map(|s| {
                let (i, j) = (s % nx, s / nx);
                0.25 * ((c(i, j) + c(i + 1, j)) + (c(i, j + 1) + c(i + 1, j + 1)))
            })
            .collect();
        let rain = pr.rain.unwrap_or(Rain {
            rate: 0.0,
            center: [0.0; 2],
            radius: 0.0,
        });
        let p = StageParams {
            nx,
            ny,
            dx,
            g: pr.g,
            theta: pr.theta,
            eps: pr.desing_depth.powi(4),
            cfl: pr.cfl,
            dt_max: pr.dt_max,
            rain: rain.rate,
            rain_x: rain.center[0],
            rain_y: rain.center[1],
            rain_r2: rain.radius * rain.radius,
            kappa: pr.desing_depth,
            friction: pr.friction,
        };
        let mut scratch = 0.0;
        for s in 0..n {
            clamp_cell(
                &mut w[s],
                &mut hu[s],
                &mut hv[s],
                bc[s],
                &p,
                0.0,
                &mut scratch,
            );
        }
        let (tx, ty) = (p.tiles_x(), p.tiles_y());
        let forced: Vec<u32> = (0..tx * ty)
            .map(|t| {
                if rain.rate <= 0.0 {
                    return 0;
                }
                // a tile touching the rain disc
                let (x0, y0) = (((t % tx) * T) as f64 * dx, ((t / tx) * T) as f64 * dx);
                let (x1, y1) = (x0 + T as f64 * dx, y0 + T as f64 * dx);
                let qx = rain.center[0].clamp(x0, x1) - rain.center[0];
                let qy = rain.center[1].clamp(y0, y1) - rain.center[1];
                (qx * qx + qy * qy <= rain.radius * rain.radius) as u32
            })
            .collect();
        let mut wet = vec![0u32; tx * ty];
        for s in 0..n {
            if w[s] - bc[s] > 0.0 {
                wet[(s % nx) / T + tx * ((s / nx) / T)] = 1;
            }
        }
        let mut sim = ShallowWater {
            name: name.to_string(),
            p,
            corners,
            host_fields: vec![vec![0.0; n]; 6],
            fields: vec![
                FieldInfo::cell("Depth", "m"),
                FieldInfo::cell("MomentumX", "m^2/s"),
                FieldInfo::cell("MomentumY", "m^2/s"),
                FieldInfo::cell("Surface", "m"),
                FieldInfo::cell("Speed", "m/s"),
                FieldInfo::cell("Terrain", "m"),
            ],
            r1: [vec![0.0; n], vec![0.0; n], vec![0.0; n]],
            wet: [wet.clone(), wet],
            forced,
            bc,
            w,
            hu,
            hv,
            time: 0.0,
            steps: 0,
            neg: 0.0,
            active_tiles: 0,
            dev: None,
        };
        sim.host_fields[5] = sim.bc.iter().map(|&b| b as f32).collect();
        sim.export_cells((0..n).collect::<Vec<_>>().as_slice());
        Ok(sim)
    }

    /// Moves the simulation to `gpu`; fields are then [`FieldData::Device`].
    pub fn on_gpu(mut self, gpu: Arc<Gpu>) -> Result<ShallowWater, FlowError> {
        self.dev = Some(gpu::GpuState::new(
            gpu,
            &self.p,
            &self.corners,
            &self.bc,
            &self.w,
            &self.hu,
            &self.hv,
            &self.forced,
            self.time,
        )?);
        Ok(self)
    }

    /// The built-in scene `scene` on an `n x n` grid over a 4096 m square valley (relief
    /// 40 m); deterministic for `seed`.
    pub fn scene(scene: Scene, n: usize, seed: u64) -> Result<ShallowWater, FlowError> {
        let dx = 4096.0 / n as f64;
        let corners = terrain::valley_corners(n, n, dx, 40.0, seed);
        let c = |i: usize, j: usize| corners[i + (n + 1) * j] as f64;
        let bc: Vec<f64> = (0..n * n)
            .map(|s| {
                let (i, j) = (s % n, s / n);
                0.25 * ((c(i, j) + c(i + 1, j)) + (c(i, j + 1) + c(i + 1, j + 1)))
            })
            .collect();
        let mut params = SwParams {
            friction: 0.05,
            ..SwParams::default()
        };
        let w = match scene {
            Scene::DamBreak => {
                // a reservoir in the upper 22 % of the valley, its level chosen so that
                // about 10 % of the whole domain is wet
                let upper: Vec<f64> = (0..n * n)
                    .filter(|s| (s % n) < n * 22 / 100)
                    .map(|s| bc[s])
                    .collect();
                let mut sorted = upper.clone();
                sorted.sort_by(f64::total_cmp);
                let k = ((0.10 * (n * n) as f64) as usize).min(sorted.len().saturating_sub(1));
                let level = sorted[k];
                (0..n * n)
                    .map(|s| {
                        if (s % n) < n * 22 / 100 && bc[s] < level {
                            level
                        } else {
                            bc[s]
                        }
                    })
                    .collect()
            }
            Scene::Rain => {
                params.rain = Some(Rain {
                    rate: 0.02,
                    center: [0.35 * 4096.0, 0.5 * 4096.0],
                    radius: 0.12 * 4096.0,
                });
                bc.clone()
            }
        };
        let name = match scene {
            Scene::DamBreak => "shallow-water dam-break",
            Scene::Rain => "shallow-water rain",
        };
        ShallowWater::new(
            name,
            n,
            n,
            dx,
            params,
            corners,
            w,
            vec![0.0; n * n],
            vec![0.0; n * n],
        )
    }

    fn export_cells(&mut self, cells: &[usize]) {
        let eps = self.p.eps;
        for &s in cells {
            let h = self.w[s] - self.bc[s];
            let q = (self.hu[s] * self.hu[s] + self.hv[s] * self.hv[s]).sqrt();
            self.host_fields[0][s] = h as f32;
            self.host_fields[1][s] = self.hu[s] as f32;
            self.host_fields[2][s] = self.hv[s] as f32;
            self.host_fields[3][s] = self.w[s] as f32;
            self.host_fields[4][s] = desing(h, q, eps) as f32;
        }
    }

    /// The grid's parameters.
    pub fn params(&self) -> &StageParams {
        &self.p
    }

    /// Simulates every tile, wet or not (validation of the active-tile restriction: the
    /// result must not change). Call before [`ShallowWater::on_gpu`].
    pub fn force_all_tiles(&mut self) {
        self.forced.fill(1);
    }

    /// Tiles simulated in the last step.
    pub fn active_tiles(&self) -> usize {
        self.active_tiles
    }

    /// Total tiles.
    pub fn total_tiles(&self) -> usize {
        self.p.tiles_x() * self.p.tiles_y()
    }

    /// The largest negative depth met and set dry so far (rounding; 0 in exact arithmetic).
    pub fn negative_depth(&self) -> f64 {
        self.neg
    }

    /// The state `(w, hu, hv)` (downloaded from the GPU when there).
    pub fn state(&self) -> Result<State, FlowError> {
        match &self.dev {
            Some(d) => d.download(),
            None => Ok((self.w.clone(), self.hu.clone(), self.hv.clone())),
        }
    }

    /// Cell-centre bathymetry.
    pub fn bathymetry(&self) -> &[f64] {
        &self.bc
    }

    /// Corner bathymetry.
    pub fn corners(&self) -> &[f32] {
        &self.corners
    }

    /// Water volume `sum(h) dx^2` (compensated sum).
    pub fn volume(&self) -> Result<f64, FlowError> {
        let (w, _, _) = self.state()?;
        let dx2 = self.p.dx * self.p.dx;
        Ok(neumaier(w.iter().zip(&self.bc).map(|(w, b)| w - b)) * dx2)
    }

    fn active_list(&self) -> (Vec<u32>, Vec<usize>) {
        let (tx, ty) = (self.p.tiles_x(), self.p.tiles_y());
        let mut flags = vec![0u32; tx * ty];
        let mut list = Vec::new();
        for t in 0..tx * ty {
            let (x, y) = ((t % tx) as i64, (t / tx) as i64);
            let mut a = self.forced[t];
            for dy in -1..=1i64 {
                for dxx in -1..=1i64 {
                    let (u, v) = (x + dxx, y + dy);
                    if u < 0 || v < 0 || u >= tx as i64 || v >= ty as i64 {
                        continue;
                    }
                    let k = u as usize + tx * v as usize;
                    a |= self.wet[0][k] | self.wet[1][k];
                }
            }
            if a != 0 {
                flags[t] = 1;
                list.push(t);
            }
        }
        (flags, list)
    }

    fn tile_cells(&self, t: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let tx = self.p.tiles_x();
        let (i0, j0) = ((t % tx) * T, (t / tx) * T);
        let (nx, ny) = (self.p.nx, self.p.ny);
        (0..T * T).filter_map(move |k| {
            let (i, j) = (i0 + k % T, j0 + k / T);
            (i < nx && j < ny).then_some((k, i + nx * j))
        })
    }

    /// One step of the CPU reference; returns `dt`.
    fn step_cpu(&mut self) -> f64 {
        let (flags, list) = self.active_list();
        self.active_tiles = list.len();
        let p = self.p;
        let inp = StageInput {
            w: &self.w,
            hu: &self.hu,
            hv: &self.hv,
            bc: &self.bc,
            corners: &self.corners,
            r1: None,
        };
        let outs: Vec<_> = list.par_iter().map(|&t| tile_stage(t, &p, &inp)).collect();
        let mut amax = 0.0f64;
        for (o, &t) in outs.iter().zip(&list) {
            amax = reference::dmax(amax, o.amax);
            self.neg = reference::dmax(self.neg, o.neg);
            let cells: Vec<(usize, usize)> = self.tile_cells(t).collect();
            for (k, s) in cells {
                self.r1[0][s] = o.cells[k][0];
                self.r1[1][s] = o.cells[k][1];
                self.r1[2][s] = o.cells[k][2];
            }
        }
        let dt = p.dt(amax);
        let inp = StageInput {
            w: &self.w,
            hu: &self.hu,
            hv: &self.hv,
            bc: &self.bc,
            corners: &self.corners,
            r1: Some((&self.r1[0], &self.r1[1], &self.r1[2], &flags, dt)),
        };
        let outs: Vec<_> = list.par_iter().map(|&t| tile_stage(t, &p, &inp)).collect();
        let parity = (self.steps % 2) as usize;
        let mut touched = Vec::new();
        for (o, &t) in outs.iter().zip(&list) {
            self.neg = reference::dmax(self.neg, o.neg);
            self.wet[parity][t] = o.wet as u32;
            let cells: Vec<(usize, usize)> = self.tile_cells(t).collect();
            for (k, s) in cells {
                self.w[s] = o.cells[k][0];
                self.hu[s] = o.cells[k][1];
                self.hv[s] = o.cells[k][2];
                touched.push(s);
            }
        }
        self.export_cells(&touched);
        self.time += dt;
        dt
    }

    /// `n` steps without a host synchronisation on the GPU (benchmarks); returns the wall
    /// time in milliseconds (GPU: CUDA events around the launches).
    pub fn advance(&mut self, n: usize) -> Result<f64, FlowError> {
        let t0 = Instant::now();
        match &mut self.dev {
            Some(d) => {
                let gpu = d.gpu.clone();
                let timer = tessera_gpu::EventTimer::new(&gpu)?;
                timer.start()?;
                for _ in 0..n {
                    d.step((self.steps % 2) as usize)?;
                    self.steps += 1;
                }
                let ms = timer.stop()? as f64;
                let (_, time) = d.dt_and_time()?;
                self.time = time;
                let (act, neg) = d.stats()?;
                self.active_tiles = act;
                self.neg = neg;
                Ok(ms)
            }
            None => {
                for _ in 0..n {
                    self.step_cpu();
                    self.steps += 1;
                }
                Ok(t0.elapsed().as_secs_f64() * 1e3)
            }
        }
    }
}

impl Simulation for ShallowWater {
    fn name(&self) -> &str {
        &self.name
    }
    fn grid(&self) -> Grid {
        Grid::new_2d(self.p.nx, self.p.ny, self.p.dx)
    }
    fn fields(&self) -> &[FieldInfo] {
        &self.fields
    }
    fn step(&mut self) -> Result<StepReport, FlowError> {
        let t0 = Instant::now();
        let dt = match &mut self.dev {
            Some(d) => {
                d.step((self.steps % 2) as usize)?;
                let (dt, time) = d.dt_and_time()?;
                self.time = time;
                let (act, neg) = d.stats()?;
                self.active_tiles = act;
                self.neg = neg;
                dt
            }
            None => self.step_cpu(),
        };
        self.steps += 1;
        Ok(StepReport {
            dt,
            wall_ms: t0.elapsed().as_secs_f64() * 1e3,
            stats: vec![
                ("active_tiles", self.active_tiles as f64),
                ("tiles", self.total_tiles() as f64),
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
        let k = FIELDS
            .iter()
            .position(|n| *n == name)
            .ok_or_else(|| unknown_field(self, name))?;
        Ok(match &self.dev {
            Some(d) => FieldData::Device(&d.fields[k]),
            None => FieldData::Host(&self.host_fields[k]),
        })
    }
    fn gpu(&self) -> Option<&Arc<Gpu>> {
        self.dev.as_ref().map(|d| &d.gpu)
    }
}

/// Ritter's solution of the dam break over a dry bed: depth at `x` (dam at `x0`, still
/// depth `h0` upstream) at time `t > 0`.
pub fn ritter_depth(x: f64, x0: f64, h0: f64, g: f64, t: f64) -> f64 {
    let c0 = (g * h0).sqrt();
    let xi = (x - x0) / t;
    if xi <= -c0 {
        h0
    } else if xi < 2.0 * c0 {
        let s = 2.0 * c0 - xi;
        s * s / (9.0 * g)
    } else {
        0.0
    }
}

/// A 1D dam break in a channel of `nx x 4` cells over `[0, length]`, water `h0` deep up to
/// the middle, dry downstream, flat bottom.
pub fn ritter_channel(nx: usize, length: f64, h0: f64) -> Result<ShallowWater, FlowError> {
    let ny = 4;
    let dx = length / nx as f64;
    let w: Vec<f64> = (0..nx * ny)
        .map(|s| if (s % nx) < nx / 2 { h0 } else { 0.0 })
        .collect();
    ShallowWater::new(
        "ritter",
        nx,
        ny,
        dx,
        SwParams {
            desing_depth: 1e-4,
            ..SwParams::default()
        },
        vec![0.0; (nx + 1) * (ny + 1)],
        w,
        vec![0.0; nx * ny],
        vec![0.0; nx * ny],
    )
}
