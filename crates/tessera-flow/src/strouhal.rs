//! Vortex-shedding frequency of a scene with a bluff obstacle (`tessera flow strouhal`):
//! the transverse velocity at the scene's probe point (two diameters behind the obstacle on
//! the channel's centre line) is recorded every step; after the start-up transient the
//! upward zero crossings of its deviation from the mean give the period, and
//! `St = f D / U`.

use serde::Serialize;

use crate::scene::SceneInfo;
use crate::{FieldData, FlowError, Fluid, Simulation};

/// The measured shedding.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Shedding {
    /// Simulated time span analysed.
    pub t_start: f64,
    pub t_end: f64,
    /// Full periods between the first and the last upward crossing.
    pub periods: usize,
    pub frequency: f64,
    pub strouhal: f64,
    /// Amplitude of the transverse velocity (half the peak-to-peak) over the span.
    pub amplitude: f64,
    pub steps: u64,
    pub reynolds: f64,
    pub blockage: f64,
}

/// Run `fluid` to simulated time `t_end` and analyse the probe signal after `t_start`.
pub fn measure(
    fluid: &mut Fluid,
    info: &SceneInfo,
    t_start: f64,
    t_end: f64,
    mut progress: impl FnMut(f64),
) -> Result<Shedding, FlowError> {
    if !(t_end > t_start && t_start >= 0.0) {
        return Err(FlowError::Invalid(format!(
            "time span {t_start}..{t_end}: the end must follow the start"
        )));
    }
    let g = fluid.grid();
    let h = g.spacing;
    let idx =
        |p: f64, a: usize| (((p - g.origin[a]) / h).floor().max(0.0) as usize).min(g.dims[a] - 1);
    let cell = idx(info.probe[0], 0)
        + g.dims[0]
            * (idx(info.probe[1], 1)
                + g.dims[1]
                    * if g.dims[2] > 1 {
                        idx(info.probe[2], 2)
                    } else {
                        0
                    });
    let mut samples: Vec<(f64, f64)> = Vec::new();
    while fluid.time() < t_end {
        fluid.step()?;
        progress(fluid.time());
        if fluid.time() >= t_start {
            let v = match fluid.field("VelocityY")? {
                FieldData::Host(h) => h[cell],
                FieldData::Device(b) => fluid
                    .gpu()
                    .expect("a device field has its GPU")
                    .download_at(b, cell)?,
            } as f64;
            samples.push((fluid.time(), v));
        }
    }
    let mean = samples.iter().map(|s| s.1).sum::<f64>() / samples.len().max(1) as f64;
    let (lo, hi) = samples
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), s| {
            (a.min(s.1), b.max(s.1))
        });
    let mut ups = Vec::new();
    for w in samples.windows(2) {
        let (a, b) = (w[0].1 - mean, w[1].1 - mean);
        if a < 0.0 && b >= 0.0 {
            let t = w[0].0 + (w[1].0 - w[0].0) * (-a / (b - a));
            ups.push(t);
        }
    }
    let mut out = Shedding {
        t_start,
        t_end: fluid.time(),
        steps: fluid.steps(),
        amplitude: 0.5 * (hi - lo),
        reynolds: info.reynolds,
        blockage: info.blockage,
        ..Default::default()
    };
    if ups.len() >= 2 {
        out.periods = ups.len() - 1;
        out.frequency = out.periods as f64 / (ups[ups.len() - 1] - ups[0]);
        out.strouhal = out.frequency * info.length / info.speed;
    }
    Ok(out)
}
