//! GPU conformance: the CUDA rasterizer and encoder against the CPU reference (bitwise).

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tessera_gpu::Gpu;
use tessera_render::camera::{Camera, Orbit};
use tessera_render::cuda::{GpuRenderer, GpuSurface, HeightfieldSource};
use tessera_render::raster::{rasterize_cpu, Raster};
use tessera_render::rixel::{encode_cpu, DepthBits, EncodeParams};
use tessera_render::{bench, Surface};

fn gpu() -> Arc<Gpu> {
    Arc::new(Gpu::probe().expect("a CUDA GPU"))
}

fn first_difference(a: &Raster, b: &Raster) -> String {
    for p in 0..a.triangle.len() {
        if a.triangle[p] != b.triangle[p]
            || a.depth[p].to_bits() != b.depth[p].to_bits()
            || a.value[p].to_bits() != b.value[p].to_bits()
        {
            return format!(
                "pixel {p} ({}, {}): gpu (tri {}, depth {:e}, value {:e}) cpu (tri {}, depth {:e}, value {:e})",
                p as u32 % a.width,
                p as u32 / a.width,
                a.triangle[p],
                a.depth[p],
                a.value[p],
                b.triangle[p],
                b.depth[p],
                b.value[p]
            );
        }
    }
    "none".into()
}

/// Random triangle soup: tiny, medium and screen-filling triangles, some crossing the near
/// plane, some degenerate, values with NaNs.
fn soup(n: usize, seed: u64) -> Surface {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut s = Surface::default();
    for t in 0..n {
        let scale = match t % 10 {
            0 => 3.0,
            1..=3 => 0.3,
            _ => 0.02,
        };
        let c: [f32; 3] = [
            rng.random_range(-1.5..1.5),
            rng.random_range(-1.5..1.5),
            rng.random_range(-1.5..1.5),
        ];
        let base = s.positions.len() as u32;
        for _ in 0..3 {
            s.positions.push([
                c[0] + scale * rng.random_range(-1.0f32..1.0),
                c[1] + scale * rng.random_range(-1.0f32..1.0),
                c[2] + scale * rng.random_range(-1.0f32..1.0),
            ]);
            s.values.push(if rng.random_bool(0.02) {
                f32::NAN
            } else {
                rng.random_range(-5.0..5.0)
            });
        }
        if t % 97 == 0 {
            // degenerate: a repeated vertex
            s.triangles.push([base, base, base + 1]);
        } else {
            s.triangles.push([base, base + 1, base + 2]);
        }
    }
    s
}

fn scenes() -> Vec<(&'static str, Surface, Camera, u32, u32)> {
    let mut v = Vec::new();
    // a sphere of 2 * 48 * 95 triangles, uneven viewport
    let sphere = bench::bench_sphere(48).unwrap();
    v.push((
        "sphere",
        sphere.clone(),
        Camera::orbit(&Orbit::framing([0.0; 3], 1.0, 30.0, 20.0), 333.0 / 257.0).unwrap(),
        333,
        257,
    ));
    // the sphere filling the viewport, camera close (large triangles, clipping at the near plane)
    let mut close = Orbit::framing([0.0; 3], 1.0, 10.0, 5.0);
    close.distance = 1.3;
    close.near = 0.05;
    close.far = 5.0;
    v.push((
        "sphere close",
        sphere,
        Camera::orbit(&close, 1.5).unwrap(),
        300,
        200,
    ));
    // a ground plane through the camera's near plane, guard-band clipping
    let mut ground = Surface::plane(
        [-40.0, -40.0, 0.0],
        [80.0, 0.0, 0.0],
        [0.0, 80.0, 0.0],
        7,
        5,
    )
    .unwrap();
    ground.set_values(|p| (p[0] * 0.3).sin() + p[1] * 0.01);
    let low = Orbit {
        target: [0.0; 3],
        distance: 1.0,
        yaw: 15.0,
        pitch: 12.0,
        fovy: 70.0,
        near: 0.1,
        far: 200.0,
        ortho_height: None,
    };
    v.push((
        "ground",
        ground,
        Camera::orbit(&low, 1.25).unwrap(),
        250,
        200,
    ));
    // triangle soup, perspective and orthographic
    let s = soup(20_000, 7);
    v.push((
        "soup",
        s.clone(),
        Camera::orbit(&Orbit::framing([0.0; 3], 2.0, -40.0, 30.0), 1.0).unwrap(),
        317,
        317,
    ));
    let mut o = Orbit::framing([0.0; 3], 2.5, 120.0, -35.0);
    o.ortho_height = Some(4.0);
    v.push(("soup ortho", s, Camera::orbit(&o, 0.75).unwrap(), 150, 200));
    v
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn rasterize_matches_reference() {
    let g = gpu();
    for (name, s, cam, w, h) in scenes() {
        let mut r = GpuRenderer::new(g.clone(), w, h).unwrap();
        let gs = GpuSurface::upload(&g, &s).unwrap();
        r.rasterize(&gs, &cam).unwrap();
        let got = r.download_raster().unwrap();
        let want = rasterize_cpu(&s, &cam, w, h).unwrap();
        assert!(
            want.visible() > 0,
            "{name}: the reference sees nothing (bad scene)"
        );
        assert!(
            got.bitwise_eq(&want),
            "{name}: GPU raster differs from the reference; first difference: {}",
            first_difference(&got, &want)
        );
        eprintln!(
            "rasterize_matches_reference {name}: {w}x{h}, {} triangles, {} visible, bitwise equal",
            s.num_triangles(),
            want.visible()
        );
    }
    // a height field filled on the device from device fields, with a dry mask
    let (nx, ny) = (97usize, 61usize);
    let z: Vec<f32> = (0..nx * ny)
        .map(|i| ((i % nx) as f32 * 0.1).sin() * 0.3 + ((i / nx) as f32 * 0.07).cos() * 0.2)
        .collect();
    let val: Vec<f32> = (0..nx * ny).map(|i| (i % 13) as f32 * 0.5).collect();
    let wet: Vec<f32> = (0..nx * ny)
        .map(|i| if i % 7 == 0 { 0.0 } else { 0.2 })
        .collect();
    let expect_val: Vec<f32> = val
        .iter()
        .zip(&wet)
        .map(|(&v, &w)| if w > 1e-3 { v } else { f32::NAN })
        .collect();
    let cpu_s = Surface::heightfield(nx, ny, 0.05, [-2.4, -1.5], &z, &expect_val).unwrap();
    let (dz, dv, dw) = (
        g.upload(&z).unwrap(),
        g.upload(&val).unwrap(),
        g.upload(&wet).unwrap(),
    );
    let mut gs = GpuSurface::heightfield(&g, nx, ny).unwrap();
    let mut r = GpuRenderer::new(g.clone(), 211, 173).unwrap();
    r.heightfield(
        &HeightfieldSource {
            nx,
            ny,
            spacing: 0.05,
            origin: [-2.4, -1.5],
            z_scale: 1.0,
            z: &dz,
            value: &dv,
            wet: Some((&dw, 1e-3)),
        },
        &mut gs,
    )
    .unwrap();
    let cam = Camera::orbit(
        &Orbit::framing([0.0, 0.0, 0.0], 2.8, 200.0, 35.0),
        211.0 / 173.0,
    )
    .unwrap();
    r.rasterize(&gs, &cam).unwrap();
    let got = r.download_raster().unwrap();
    let want = rasterize_cpu(&cpu_s, &cam, 211, 173).unwrap();
    assert!(
        got.bitwise_eq(&want),
        "height field: first difference {}",
        first_difference(&got, &want)
    );
    // the scene is non-trivial: a fifth of the viewport, dry (no-value) pixels among them
    let dry = (0..want.triangle.len())
        .filter(|&p| want.triangle[p] != u32::MAX && want.value[p].is_nan())
        .count();
    assert!(
        want.visible() > 5_000 && dry > 1_000,
        "{} {dry}",
        want.visible()
    );
    eprintln!(
        "rasterize_matches_reference height field from device fields: {} visible ({dry} without a value), bitwise equal",
        want.visible()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn rixel_encode_matches_reference() {
    let g = gpu();
    let mut checked = 0;
    for (name, s, cam, w, h) in scenes() {
        let mut r = GpuRenderer::new(g.clone(), w, h).unwrap();
        let gs = GpuSurface::upload(&g, &s).unwrap();
        for bits in [DepthBits::B16, DepthBits::B32] {
            for range in [None, Some((-1.0f32, 2.5f32))] {
                let params = EncodeParams {
                    frame_id: 41 + checked,
                    depth: bits,
                    value_range: range,
                };
                let frame = r.render(&gs, &cam, &params).unwrap().to_vec();
                let raster = r.download_raster().unwrap();
                let want = encode_cpu(&raster, &cam, &params).unwrap();
                assert_eq!(frame.len(), want.len(), "{name} {bits:?} {range:?}: length");
                if let Some(i) = frame.iter().zip(&want).position(|(a, b)| a != b) {
                    panic!(
                        "{name} {bits:?} {range:?}: byte {i} differs (gpu {}, cpu {})",
                        frame[i], want[i]
                    );
                }
                // and the same bytes as encoding the CPU raster
                let cpu =
                    encode_cpu(&rasterize_cpu(&s, &cam, w, h).unwrap(), &cam, &params).unwrap();
                assert_eq!(frame, cpu, "{name}: frame of the CPU raster differs");
                checked += 1;
            }
        }
        eprintln!("rixel_encode_matches_reference {name}: 4 frames byte-identical");
    }
    // an empty frame (camera looking away) and a 1x1 viewport
    let s = bench::bench_sphere(8).unwrap();
    let mut away = Orbit::framing([0.0; 3], 1.0, 0.0, 0.0);
    away.target = [100.0, 0.0, 0.0];
    away.distance = 5.0;
    let cam = Camera::orbit(&away, 1.0).unwrap();
    let gs = GpuSurface::upload(&g, &s).unwrap();
    for (w, h) in [(64u32, 64u32), (1, 1), (1000, 3)] {
        let mut r = GpuRenderer::new(g.clone(), w, h).unwrap();
        let p = EncodeParams::new(1, DepthBits::B16);
        let frame = r.render(&gs, &cam, &p).unwrap().to_vec();
        let want = encode_cpu(&rasterize_cpu(&s, &cam, w, h).unwrap(), &cam, &p).unwrap();
        assert_eq!(frame, want, "{w}x{h} frame");
    }
}
