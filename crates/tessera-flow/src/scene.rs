//! Built-in fluid scenes, selectable by name and runnable at any resolution
//! (`--grid 1024x1024`, `--grid 256x128x128`). Lengths are in units of the domain height
//! (the y extent is 1, the cell size `1 / ny`); the other extents follow the grid's aspect.
//!
//! | scene | dim | default grid | what |
//! |---|---|---|---|
//! | `cylinder2d` | 2 | 512x128 | channel flow past a cylinder (D = 0.1, blockage 0.1) at Re = 100: a von Kármán vortex street; a smoke band from the inlet marks the wake |
//! | `smoke2d` | 2 | 256x256 | a buoyant plume from a source at the bottom rising around a disc, a plate and a second disc; open top |
//! | `sphere3d` | 3 | 128x64x64 | wind-tunnel flow past a sphere (D = 0.2) at Re = 300 |
//! | `bracket3d` | 3 | 128x64x64 | wind around the bracket, voxelized from its tetrahedral mesh's boundary (a file with `--mesh`, or the generated bracket) |

use std::path::Path;
use std::sync::Arc;

use crate::fluid::{Boundary, FluidParams, FluidSetup};
use crate::geometry::{Obstacles, Shape};
use crate::surface::{LatticeSdf, TriangleSurface};
use crate::FlowError;

/// Names of the built-in scenes.
pub const SCENES: [&str; 4] = ["cylinder2d", "smoke2d", "sphere3d", "bracket3d"];

/// Reference quantities of a scene (for Strouhal and Reynolds numbers).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SceneInfo {
    /// Obstacle size (diameter).
    pub length: f64,
    /// Free-stream speed.
    pub speed: f64,
    /// Where to record the transverse velocity for the shedding frequency.
    pub probe: [f64; 3],
    /// Obstacle size over channel height.
    pub blockage: f64,
    /// `speed * length / viscosity` (infinite for inviscid scenes).
    pub reynolds: f64,
}

/// Parse `WxH` or `WxHxD` (positive integers).
pub fn parse_grid(s: &str) -> Result<Vec<usize>, FlowError> {
    let parts: Vec<&str> = s.split(['x', 'X']).collect();
    if !(parts.len() == 2 || parts.len() == 3) {
        return Err(FlowError::Invalid(format!(
            "grid `{s}`: expected WxH or WxHxD"
        )));
    }
    parts
        .iter()
        .map(|p| match p.trim().parse::<i64>() {
            Ok(v) if v > 0 => Ok(v as usize),
            Ok(v) => Err(FlowError::Invalid(format!(
                "grid `{s}`: size {v} must be positive"
            ))),
            Err(_) => Err(FlowError::Invalid(format!(
                "grid `{s}`: `{p}` is not a whole number"
            ))),
        })
        .collect()
}

/// Build scene `name` on `grid` (its default when `None`); `mesh` replaces the bracket of
/// `bracket3d`.
pub fn build(
    name: &str,
    grid: Option<&[usize]>,
    mesh: Option<&Path>,
) -> Result<(FluidSetup, SceneInfo), FlowError> {
    let (dim, default): (usize, &[usize]) = match name {
        "cylinder2d" => (2, &[512, 128]),
        "smoke2d" => (2, &[256, 256]),
        "sphere3d" => (3, &[128, 64, 64]),
        "bracket3d" => (3, &[128, 64, 64]),
        _ => {
            return Err(FlowError::Invalid(format!(
                "unknown scene `{name}` (known: {})",
                SCENES.join(", ")
            )))
        }
    };
    if mesh.is_some() && name != "bracket3d" {
        return Err(FlowError::Invalid(format!(
            "scene `{name}` takes no mesh (only bracket3d does)"
        )));
    }
    let g = grid.unwrap_or(default);
    if g.len() != dim {
        return Err(FlowError::Invalid(format!(
            "scene `{name}` is {dim}D: give a grid of {dim} sizes (like {}), not {}",
            default
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join("x"),
            g.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join("x")
        )));
    }
    if let Some(z) = g.iter().find(|&&n| n < 4) {
        return Err(FlowError::Invalid(format!(
            "grid size {z}: every size must be at least 4"
        )));
    }
    let dims = [g[0], g[1], if dim == 3 { g[2] } else { 1 }];
    if dims
        .iter()
        .try_fold(1usize, |a, &n| a.checked_mul(n))
        .is_none_or(|c| c > crate::fluid::MAX_CELLS)
    {
        return Err(FlowError::Invalid(format!(
            "grid {}: more than 2^28 cells",
            crate::fluid::fmt_dims(dims, dim)
        )));
    }
    let h = 1.0 / dims[1] as f64;
    let width = dims[0] as f64 * h;
    let depth = dims[2] as f64 * h;
    let mut setup = FluidSetup {
        name: name.to_string(),
        dims,
        dim,
        h,
        origin: [0.0; 3],
        sides: [Boundary::Wall; 6],
        obstacles: Obstacles::default(),
        smoke_sources: Vec::new(),
        initial_velocity: [0.0; 3],
        params: FluidParams::default(),
    };
    let info = match name {
        "cylinder2d" => {
            let (d, u, re) = (0.1, 1.0, 100.0);
            let c = [(0.25 * width).min(1.0), 0.5 + 0.01, 0.0];
            setup.sides[0] = Boundary::Inflow(u);
            setup.sides[1] = Boundary::Outflow;
            setup.obstacles = Obstacles::new(vec![Shape::circle(c[0], c[1], 0.5 * d)]);
            setup.smoke_sources = vec![(Shape::rect([-1.0, 0.45], [3.0 * h, 0.55]), 1.0)];
            setup.initial_velocity = [u, 0.0, 0.0];
            setup.params.viscosity = u * d / re;
            setup.params.reference_speed = u;
            setup.params.dt_max = 0.02;
            SceneInfo {
                length: d,
                speed: u,
                probe: [c[0] + 2.0 * d, 0.5, 0.0],
                blockage: d,
                reynolds: re,
            }
        }
        "smoke2d" => {
            let m = 0.5 * width;
            setup.sides[3] = Boundary::Outflow;
            setup.obstacles = Obstacles::new(vec![
                Shape::circle(m + 0.08, 0.4, 0.07),
                Shape::rect([m - 0.3, 0.6], [m - 0.08, 0.64]),
                Shape::circle(m + 0.25, 0.72, 0.05),
            ]);
            setup.smoke_sources = vec![(Shape::circle(m, 0.1, 0.05), 1.0)];
            setup.params.buoyancy = 1.0;
            setup.params.reference_speed = 0.5;
            setup.params.dt_max = 0.02;
            SceneInfo {
                length: 0.14,
                speed: 0.5,
                probe: [m + 0.08, 0.55, 0.0],
                blockage: 0.14 / width,
                reynolds: f64::INFINITY,
            }
        }
        "sphere3d" => {
            let (d, u, re) = (0.2, 1.0, 300.0);
            let c = [(0.25 * width).min(1.0), 0.5, 0.5 * depth];
            setup.sides[0] = Boundary::Inflow(u);
            setup.sides[1] = Boundary::Outflow;
            setup.obstacles = Obstacles::new(vec![Shape::Sphere {
                center: c,
                radius: 0.5 * d,
            }]);
            setup.smoke_sources = vec![(
                Shape::Box {
                    min: [-1.0, 0.45, c[2] - 0.05],
                    max: [3.0 * h, 0.55, c[2] + 0.05],
                },
                1.0,
            )];
            setup.initial_velocity = [u, 0.0, 0.0];
            setup.params.viscosity = u * d / re;
            setup.params.reference_speed = u;
            setup.params.dt_max = 0.02;
            SceneInfo {
                length: d,
                speed: u,
                probe: [c[0] + 2.0 * d, 0.5, c[2]],
                blockage: std::f64::consts::PI * 0.25 * d * d / depth,
                reynolds: re,
            }
        }
        "bracket3d" => {
            let surface = match mesh {
                Some(p) => TriangleSurface::read(p)?,
                None => {
                    let m = tessera_mesh::generate::bracket(40)
                        .map_err(|e| FlowError::Invalid(e.to_string()))?;
                    TriangleSurface::from_poly_mesh(&m)?
                }
            };
            surface.check_closed().map_err(|e| match mesh {
                Some(p) => FlowError::Invalid(format!("{}: {e}", p.display())),
                None => e,
            })?;
            let (lo, hi) = surface.bounds();
            let e = [hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]];
            if e.iter().any(|&x| !(x > 0.0 && x.is_finite())) {
                return Err(FlowError::Invalid(format!(
                    "the mesh is flat or not finite (extent {e:?})"
                )));
            }
            let s = (0.6 / e[1]).min(0.6 * depth / e[2]).min(0.5 * width / e[0]);
            let off = [
                0.35 * width - s * 0.5 * (lo[0] + hi[0]),
                0.5 - s * 0.5 * (lo[1] + hi[1]),
                0.05 * depth - s * lo[2],
            ];
            let placed = surface.transformed(s, off);
            let sdf = LatticeSdf::from_surface(
                &placed,
                setup.origin,
                h,
                [dims[0] + 1, dims[1] + 1, dims[2] + 1],
            )?;
            let u = 1.0;
            setup.sides[0] = Boundary::Inflow(u);
            setup.sides[1] = Boundary::Outflow;
            setup.obstacles = Obstacles::new(vec![Shape::Mesh(Arc::new(sdf))]);
            let zc = 0.05 * depth + 0.5 * s * e[2];
            setup.smoke_sources = vec![(
                Shape::Box {
                    min: [-1.0, 0.3, zc - 0.05],
                    max: [3.0 * h, 0.7, zc + 0.05],
                },
                1.0,
            )];
            setup.initial_velocity = [u, 0.0, 0.0];
            setup.params.reference_speed = u;
            setup.params.dt_max = 0.02;
            SceneInfo {
                length: s * e[2],
                speed: u,
                probe: [0.35 * width + s * e[0], 0.5, zc],
                blockage: s * e[1] * s * e[2] / depth,
                reynolds: f64::INFINITY,
            }
        }
        _ => unreachable!("checked above"),
    };
    Ok((setup, info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_parse_and_bad_ones_are_errors() {
        assert_eq!(parse_grid("64x32").unwrap(), vec![64, 32]);
        assert_eq!(parse_grid("8x8X8").unwrap(), vec![8, 8, 8]);
        for bad in ["0x4", "-3x8", "axb", "4", "4x4x4x4", "4x"] {
            assert!(parse_grid(bad).is_err(), "{bad}");
        }
        let e = parse_grid("64x0").unwrap_err().to_string();
        assert!(e.contains("must be positive"), "{e}");
    }

    #[test]
    fn unknown_scenes_and_wrong_grids_are_one_clear_error() {
        let e = build("tornado", None, None).unwrap_err().to_string();
        assert!(
            e.contains("unknown scene `tornado`") && e.contains("cylinder2d"),
            "{e}"
        );
        let e = build("cylinder2d", Some(&[64, 32, 32]), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2D"), "{e}");
        let e = build("smoke2d", Some(&[64, 2]), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least 4"), "{e}");
        let e = build("sphere3d", Some(&[100000, 100000, 100000]), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2^28"), "{e}");
    }
}
