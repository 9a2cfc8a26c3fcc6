//! Surfaces of the back-ends (issue's scenes): a procedural terrain, the water surface of a
//! grid simulation (terrain plus water, dry cells without a value), and the default camera
//! that frames a surface.

use tessera_flow::shallow_water::terrain::valley_height;
use tessera_flow::Grid;

use crate::camera::{Camera, Orbit};
use crate::cuda::{GpuRenderer, GpuSurface, HeightfieldSource};
use crate::{RenderError, Surface};

/// Side of the terrain scenes' square domain (m).
pub const TERRAIN_SIDE: f64 = 4096.0;
/// Relief of the terrain scenes (m).
pub const TERRAIN_RELIEF: f64 = 40.0;

/// The procedural valley of the flood scenes as an `n x n` height field (`2 (n - 1)^2`
/// triangles: `n = 1024` gives 2.09 M), value = height, heights scaled by `z_scale`.
pub fn terrain_surface(n: usize, seed: u64, z_scale: f32) -> Result<Surface, RenderError> {
    if !(2..=8192).contains(&n) {
        return Err(RenderError::Invalid(format!(
            "terrain {n}x{n}: the side must be in 2..=8192"
        )));
    }
    let h = TERRAIN_SIDE / (n - 1) as f64;
    let z: Vec<f32> = (0..n * n)
        .map(|s| {
            let (x, y) = ((s % n) as f64 * h, (s / n) as f64 * h);
            valley_height(x, y, TERRAIN_SIDE, TERRAIN_SIDE, TERRAIN_RELIEF, seed) as f32
        })
        .collect();
    let zs: Vec<f32> = z.iter().map(|v| v * z_scale).collect();
    Surface::heightfield(n, n, h, [0.0, 0.0], &zs, &z)
}

/// The height field of a 2D grid simulation on the CPU: point `(i, j)` at the centre of
/// cell `(i, j)`, height `z_scale * z`, value `values`, `NaN` ("no value") where
/// `wet = Some((field, min))` is not above `min` (dry terrain).
pub fn grid_surface(
    grid: &Grid,
    z: &[f32],
    values: &[f32],
    wet: Option<(&[f32], f32)>,
    z_scale: f32,
) -> Result<Surface, RenderError> {
    let [nx, ny, _] = grid.dims;
    if grid.dimension() != 2 {
        return Err(RenderError::Invalid(
            "only 2D grids have a height-field surface".into(),
        ));
    }
    let n = nx * ny;
    if wet.is_some_and(|(w, _)| w.len() != n) {
        return Err(RenderError::Invalid(
            "wet mask length differs from the grid".into(),
        ));
    }
    let zs: Vec<f32> = z.iter().map(|v| z_scale * v).collect();
    let vals: Vec<f32> = match wet {
        Some((w, min)) => values
            .iter()
            .zip(w)
            .map(|(&v, &d)| if d > min { v } else { f32::NAN })
            .collect(),
        None => values.to_vec(),
    };
    let o = [
        grid.origin[0] + 0.5 * grid.spacing,
        grid.origin[1] + 0.5 * grid.spacing,
    ];
    Surface::heightfield(nx, ny, grid.spacing, o, &zs, &vals)
}

/// The same height field filled on the GPU from device fields into `out` (created by
/// [`GpuSurface::heightfield`]).
#[allow(clippy::too_many_arguments)]
pub fn grid_surface_gpu(
    renderer: &GpuRenderer,
    grid: &Grid,
    z: &tessera_gpu::DeviceBuffer<f32>,
    values: &tessera_gpu::DeviceBuffer<f32>,
    wet: Option<(&tessera_gpu::DeviceBuffer<f32>, f32)>,
    z_scale: f32,
    out: &mut GpuSurface,
) -> Result<(), RenderError> {
    let [nx, ny, _] = grid.dims;
    renderer.heightfield(
        &HeightfieldSource {
            nx,
            ny,
            spacing: grid.spacing,
            origin: [
                grid.origin[0] + 0.5 * grid.spacing,
                grid.origin[1] + 0.5 * grid.spacing,
            ],
            z_scale,
            z,
            value: values,
            wet,
        },
        out,
    )
}

/// The bounding sphere of a height field's domain with heights in `[zmin, zmax]`.
pub fn grid_bounds(grid: &Grid, zmin: f64, zmax: f64) -> ([f64; 3], f64) {
    let lx = grid.dims[0] as f64 * grid.spacing;
    let ly = grid.dims[1] as f64 * grid.spacing;
    let c = [
        grid.origin[0] + lx / 2.0,
        grid.origin[1] + ly / 2.0,
        (zmin + zmax) / 2.0,
    ];
    let r = 0.5 * (lx * lx + ly * ly + (zmax - zmin).powi(2)).sqrt();
    (c, r)
}

/// The default view of a surface: framing its bounding sphere from `yaw 225, pitch 35`
/// (looking from `-x, -y` and above), then the `--camera` specification applied.
pub fn camera_for(
    center: [f64; 3],
    radius: f64,
    aspect: f64,
    spec: &str,
) -> Result<(Camera, Orbit), RenderError> {
    let mut o = Orbit::framing(center, radius, 225.0, 35.0);
    o.apply_spec(spec, radius)?;
    Ok((Camera::orbit(&o, aspect)?, o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terrain_and_grid_surfaces() {
        let t = terrain_surface(16, 1, 2.0).unwrap();
        assert_eq!(t.num_triangles(), 2 * 15 * 15);
        assert_eq!(t.positions[5][2], 2.0 * t.values[5]);
        let g = Grid::new_2d(3, 2, 0.5);
        let z = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
        let wet = [1.0f32, 0.0, 1.0, 1.0, 0.0, 1.0];
        let s = grid_surface(&g, &z, &z, Some((&wet, 0.5)), 1.0).unwrap();
        assert_eq!(s.positions[0], [0.25, 0.25, 0.0]);
        assert!(s.values[1].is_nan() && s.values[2] == 2.0);
        assert!(terrain_surface(1, 1, 1.0).is_err());
        let (cam, o) = camera_for([0.0; 3], 1.0, 1.0, "yaw=10").unwrap();
        assert_eq!(o.yaw, 10.0);
        cam.validate().unwrap();
    }
}
