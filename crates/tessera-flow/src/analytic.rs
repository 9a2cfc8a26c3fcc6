//! A closed-form, time-varying 2D source for the streaming server and its tests.
//!
//! The Taylor-Green vortex lattice carried by a uniform stream `U0` along x is an exact
//! solution of the incompressible Navier-Stokes equations (density 1, kinematic viscosity
//! `nu`) on the periodic square `[0, 2 pi)^2`. With `x' = x - U0 t` and `d = exp(-2 nu t)`:
//!
//! ```text
//! VelocityX = U0 + sin(x') cos(y) d        VelocityY = -cos(x') sin(y) d
//! Pressure  = -(cos(2x') + cos(2y)) d^2 / 4
//! Vorticity = dVelocityY/dx - dVelocityX/dy = 2 sin(x') sin(y) d
//! ```
//!
//! Values are evaluated at the cell centres of an `nx x ny` grid of spacing
//! `2 pi / max(nx, ny)`, so every field is known exactly at every step: a derived field can be
//! checked against the formula, and frames of different steps differ.

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use tessera_gpu::{DeviceBuffer, Gpu};

use crate::simulation::unknown_field;
use crate::{FieldData, FieldInfo, FlowError, Grid, Simulation, StepReport};

const NAMES: [&str; 4] = ["VelocityX", "VelocityY", "Pressure", "Vorticity"];

/// The analytic Taylor-Green source (see the module docs).
pub struct AnalyticSource {
    grid: Grid,
    fields: Vec<FieldInfo>,
    host: Vec<Vec<f32>>,
    device: Option<(Arc<Gpu>, Vec<DeviceBuffer<f32>>)>,
    time: f64,
    steps: u64,
    dt: f64,
    stream_speed: f64,
    viscosity: f64,
}

impl AnalyticSource {
    /// An `nx x ny` source on the CPU, time step `dt`.
    pub fn new(nx: usize, ny: usize, dt: f64) -> Result<Self, FlowError> {
        if nx == 0 || ny == 0 {
            return Err(FlowError::Invalid(format!(
                "grid {nx}x{ny}: both sizes must be at least 1"
            )));
        }
        if nx.checked_mul(ny).is_none_or(|n| n > (1 << 28)) {
            return Err(FlowError::Invalid(format!(
                "grid {nx}x{ny}: more than 2^28 cells"
            )));
        }
        if !(dt.is_finite() && dt > 0.0) {
            return Err(FlowError::Invalid(format!(
                "time step {dt}: must be positive"
            )));
        }
        let mut s = AnalyticSource {
            grid: Grid::new_2d(nx, ny, 2.0 * std::f64::consts::PI / nx.max(ny) as f64),
            fields: vec![
                FieldInfo::cell("VelocityX", "m/s"),
                FieldInfo::cell("VelocityY", "m/s"),
                FieldInfo::cell("Pressure", "Pa"),
                FieldInfo::cell("Vorticity", "1/s"),
            ],
            host: vec![vec![0.0; nx * ny]; NAMES.len()],
            device: None,
            time: 0.0,
            steps: 0,
            dt,
            stream_speed: 0.5,
            viscosity: 0.01,
        };
        s.evaluate();
        Ok(s)
    }

    /// The same source with its fields mirrored into device buffers on `gpu` after every
    /// step, so consumers see [`FieldData::Device`] as from a GPU back-end.
    pub fn on_gpu(mut self, gpu: Arc<Gpu>) -> Result<Self, FlowError> {
        let bufs = self
            .host
            .iter()
            .map(|h| gpu.upload(h))
            .collect::<Result<Vec<_>, _>>()?;
        self.device = Some((gpu, bufs));
        Ok(self)
    }

    /// The exact values of the four fields at world position `(x, y)` and time `t`, in the
    /// order VelocityX, VelocityY, Pressure, Vorticity.
    pub fn exact(&self, x: f64, y: f64, t: f64) -> [f64; 4] {
        let xs = x - self.stream_speed * t;
        let d = (-2.0 * self.viscosity * t).exp();
        let (sx, cx) = xs.sin_cos();
        let (sy, cy) = y.sin_cos();
        [
            self.stream_speed + sx * cy * d,
            -cx * sy * d,
            -((2.0 * xs).cos() + (2.0 * y).cos()) * d * d / 4.0,
            2.0 * sx * sy * d,
        ]
    }

    fn evaluate(&mut self) {
        let [nx, _, _] = self.grid.dims;
        let h = self.grid.spacing;
        let t = self.time;
        let mut host = std::mem::take(&mut self.host);
        let (a, rest) = host.split_at_mut(1);
        let (b, rest) = rest.split_at_mut(1);
        let (c, d) = rest.split_at_mut(1);
        a[0].par_chunks_mut(nx)
            .zip(b[0].par_chunks_mut(nx))
            .zip(c[0].par_chunks_mut(nx))
            .zip(d[0].par_chunks_mut(nx))
            .enumerate()
            .for_each(|(j, (((u, v), p), w))| {
                let y = (j as f64 + 0.5) * h;
                for i in 0..nx {
                    let x = (i as f64 + 0.5) * h;
                    let e = self.exact(x, y, t);
                    u[i] = e[0] as f32;
                    v[i] = e[1] as f32;
                    p[i] = e[2] as f32;
                    w[i] = e[3] as f32;
                }
            });
        self.host = host;
    }
}

impl Simulation for AnalyticSource {
    fn name(&self) -> &str {
        "analytic"
    }
    fn grid(&self) -> Grid {
        self.grid
    }
    fn fields(&self) -> &[FieldInfo] {
        &self.fields
    }
    fn step(&mut self) -> Result<StepReport, FlowError> {
        let t0 = Instant::now();
        self.steps += 1;
        self.time = self.steps as f64 * self.dt;
        self.evaluate();
        if let Some((gpu, bufs)) = &mut self.device {
            for (h, b) in self.host.iter().zip(bufs.iter_mut()) {
                gpu.copy_to_device(h, b)?;
            }
        }
        Ok(StepReport {
            dt: self.dt,
            wall_ms: t0.elapsed().as_secs_f64() * 1e3,
            stats: Vec::new(),
        })
    }
    fn time(&self) -> f64 {
        self.time
    }
    fn steps(&self) -> u64 {
        self.steps
    }
    fn field(&self, name: &str) -> Result<FieldData<'_>, FlowError> {
        let k = NAMES
            .iter()
            .position(|n| *n == name)
            .ok_or_else(|| unknown_field(self, name))?;
        Ok(match &self.device {
            Some((_, bufs)) => FieldData::Device(&bufs[k]),
            None => FieldData::Host(&self.host[k]),
        })
    }
    fn gpu(&self) -> Option<&Arc<Gpu>> {
        self.device.as_ref().map(|(g, _)| g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_match_the_formula_and_change_with_time() {
        let mut s = AnalyticSource::new(64, 32, 0.1).unwrap();
        let h = s.grid().spacing;
        let before = match s.field("VelocityX").unwrap() {
            FieldData::Host(v) => v.to_vec(),
            FieldData::Device(_) => unreachable!("CPU source"),
        };
        s.step().unwrap();
        assert_eq!(s.steps(), 1);
        for (k, name) in NAMES.iter().enumerate() {
            let FieldData::Host(v) = s.field(name).unwrap() else {
                panic!("CPU source gave a device field");
            };
            for (idx, &val) in v.iter().enumerate() {
                let (i, j) = (idx % 64, idx / 64);
                let e = s.exact((i as f64 + 0.5) * h, (j as f64 + 0.5) * h, 0.1)[k];
                assert!(
                    (val as f64 - e).abs() < 1e-6,
                    "{name}[{idx}] = {val}, exact {e}"
                );
            }
        }
        let FieldData::Host(after) = s.field("VelocityX").unwrap() else {
            unreachable!()
        };
        assert!(before.iter().zip(after).any(|(a, b)| a != b));
    }

    #[test]
    fn vorticity_is_the_curl_of_the_velocity() {
        // Central differences of the exact velocity against the stored vorticity formula.
        let s = AnalyticSource::new(8, 8, 0.1).unwrap();
        let (x, y, t, e) = (0.7, 1.9, 0.3, 1e-5);
        let dv_dx = (s.exact(x + e, y, t)[1] - s.exact(x - e, y, t)[1]) / (2.0 * e);
        let du_dy = (s.exact(x, y + e, t)[0] - s.exact(x, y - e, t)[0]) / (2.0 * e);
        assert!((dv_dx - du_dy - s.exact(x, y, t)[3]).abs() < 1e-8);
    }

    #[test]
    fn bad_parameters_and_unknown_fields_are_errors() {
        assert!(AnalyticSource::new(0, 4, 0.1).is_err());
        assert!(AnalyticSource::new(4, 4, 0.0).is_err());
        let s = AnalyticSource::new(4, 4, 0.1).unwrap();
        let err = s.field("Speed").err().unwrap().to_string();
        assert!(err.contains("Speed") && err.contains("VelocityX"), "{err}");
    }
}
