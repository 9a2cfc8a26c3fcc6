//! Simulation sources for `tessera serve` by scene name (dissertation §6.3.2: the simulation
//! back-end provides named result fields): the 2D fluid scenes of `tessera-flow` (`cylinder2d`,
//! `smoke2d`: cut-cell MAC fluid with multigrid pressure projection), the shallow-water floods
//! (`shallow-water`: a dam break, `shallow-water-rain`; dissertation §6.3.5, with a 3D view of
//! terrain and water, [`scene3d`]) and `analytic`, the closed-form Taylor-Green source, on the
//! CPU or mirrored to a GPU, kept as the test source.

use std::sync::Arc;

use tessera_flow::{scene, AnalyticSource, Fluid, Simulation};
use tessera_gpu::Gpu;

use crate::StreamError;

/// Scene names `open` knows.
pub const SCENES: &[&str] = &[
    "cylinder2d",
    "smoke2d",
    "shallow-water",
    "shallow-water-rain",
    "analytic",
];

/// The 3D view of a scene, if it has one.
pub fn scene3d(scene: &str) -> Option<crate::rixel::Scene3D> {
    scene
        .starts_with("shallow-water")
        .then(crate::rixel::Scene3D::flood)
}

/// Parses `WxH`.
pub fn parse_grid(s: &str) -> Result<[usize; 2], StreamError> {
    let bad = || StreamError::Invalid(format!("grid `{s}`: expected WxH, like 1024x1024"));
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let w: usize = w.trim().parse().map_err(|_| bad())?;
    let h: usize = h.trim().parse().map_err(|_| bad())?;
    if w == 0 || h == 0 {
        return Err(bad());
    }
    Ok([w, h])
}

/// The simulation of `scene` on `grid` (the scene's default if `None`), on `gpu` when given.
pub fn open(
    scene: &str,
    grid: Option<[usize; 2]>,
    gpu: Option<Arc<Gpu>>,
) -> Result<Box<dyn Simulation>, StreamError> {
    match scene {
        "cylinder2d" | "smoke2d" => {
            let (setup, _) = scene::build(scene, grid.as_ref().map(|g| &g[..]), None)?;
            Ok(Box::new(Fluid::new(setup, gpu)?))
        }
        "shallow-water" | "shallow-water-rain" => {
            use tessera_flow::shallow_water::{Scene, ShallowWater};
            let [nx, ny] = grid.unwrap_or([512, 512]);
            if nx != ny {
                return Err(StreamError::Invalid(format!(
                    "--grid {nx}x{ny}: the shallow-water scenes are square (NxN)"
                )));
            }
            let s = if scene == "shallow-water" {
                Scene::DamBreak
            } else {
                Scene::Rain
            };
            let sim = ShallowWater::scene(s, nx, 1)?;
            Ok(match gpu {
                Some(g) => Box::new(sim.on_gpu(g)?),
                None => Box::new(sim),
            })
        }
        "analytic" => {
            let [nx, ny] = grid.unwrap_or([512, 512]);
            let s = AnalyticSource::new(nx, ny, 0.01)?;
            Ok(match gpu {
                Some(g) => Box::new(s.on_gpu(g)?),
                None => Box::new(s),
            })
        }
        _ => Err(StreamError::Invalid(format!(
            "unknown scene `{scene}` (known: {})",
            SCENES.join(", ")
        ))),
    }
}
