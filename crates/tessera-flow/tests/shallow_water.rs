//! Shallow water: well-balancedness, conservation, positivity, Ritter's dam break, the
//! active-tile restriction, and the GPU against the CPU reference.

use std::sync::Arc;

use tessera_flow::shallow_water::{
    ritter_channel, ritter_depth, terrain, Scene, ShallowWater, SwParams,
};
use tessera_flow::{FieldData, Simulation};

fn bumps(nx: usize, ny: usize, dx: f64, amp: f64) -> Vec<f32> {
    let mut c = Vec::new();
    for j in 0..=ny {
        for i in 0..=nx {
            let (x, y) = (i as f64 * dx, j as f64 * dx);
            c.push(
                (amp * ((0.31 * x).sin() * (0.23 * y).cos() + 0.5 * (0.7 * x + 0.4 * y).sin()))
                    as f32,
            );
        }
    }
    c
}

fn lake(nx: usize, ny: usize, level: f64, amp: f64) -> ShallowWater {
    let dx = 1.0;
    let corners = bumps(nx, ny, dx, amp);
    let w = vec![level; nx * ny];
    ShallowWater::new(
        "lake",
        nx,
        ny,
        dx,
        SwParams::default(),
        corners,
        w,
        vec![0.0; nx * ny],
        vec![0.0; nx * ny],
    )
    .unwrap()
}

#[test]
fn lake_at_rest_stays_exactly_at_rest() {
    // bumps of amplitude up to 0.9 m under a surface at 1 m: fully submerged
    let mut s = lake(45, 37, 1.0, 0.6);
    let (w0, _, _) = s.state().unwrap();
    for _ in 0..300 {
        s.step().unwrap();
    }
    let (w, hu, hv) = s.state().unwrap();
    let dw = w
        .iter()
        .zip(&w0)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let m = hu.iter().chain(&hv).map(|v| v.abs()).fold(0.0, f64::max);
    eprintln!(
        "lake at rest after 300 steps (t = {:.2} s): max |w - w0| = {dw:e}, max |hu|,|hv| = {m:e}",
        s.time()
    );
    assert_eq!(dw, 0.0, "surface moved");
    assert_eq!(m, 0.0, "momentum appeared");
    assert!(s.time() > 10.0);
}

#[test]
fn lake_at_rest_with_islands_conserves_volume() {
    // Bumps pierce the surface. KP07's positivity correction in cells cut by the shoreline
    // moves their opposite face, so the scheme is well balanced only where the water covers
    // the bottom (Bollermann et al. 2013 fix this with a different wet/dry reconstruction);
    // the spurious motion is measured and bounded here, the volume must stay exact.
    let mut s = lake(45, 37, 0.3, 0.8);
    let (w0, _, _) = s.state().unwrap();
    let v0 = s.volume().unwrap();
    for _ in 0..300 {
        s.step().unwrap();
    }
    let (w, hu, hv) = s.state().unwrap();
    let bc = s.bathymetry().to_vec();
    let dw = w
        .iter()
        .zip(&w0)
        .zip(&bc)
        .filter(|((a, _), b)| *a - *b > 1e-3)
        .map(|((a, b), _)| (a - b).abs())
        .fold(0.0, f64::max);
    let m = hu.iter().chain(&hv).map(|v| v.abs()).fold(0.0, f64::max);
    let rel = (s.volume().unwrap() - v0).abs() / v0;
    eprintln!(
        "lake with islands after 300 steps: max |w - w0| (wet cells) = {dw:e}, max momentum = {m:e}, volume drift {rel:e}"
    );
    assert!(dw < 0.1 && m < 1.0, "{dw} {m}");
    assert!(rel < 1e-12);
    assert!(s.negative_depth() < 1e-12);
}

#[test]
fn mass_is_conserved_and_depths_stay_non_negative_over_wet_dry_fronts() {
    // a dam break on the valley terrain: fronts running over dry ground, 1000 steps
    let n = 48;
    let dx = 8.0;
    let corners = terrain::valley_corners(n, n, dx, 6.0, 3);
    let c = |i: usize, j: usize| corners[i + (n + 1) * j] as f64;
    let w: Vec<f64> = (0..n * n)
        .map(|s| {
            let (i, j) = (s % n, s / n);
            let b = 0.25 * ((c(i, j) + c(i + 1, j)) + (c(i, j + 1) + c(i + 1, j + 1)));
            if i < n / 4 {
                b.max(4.0)
            } else {
                b
            }
        })
        .collect();
    let mut s = ShallowWater::new(
        "dam",
        n,
        n,
        dx,
        SwParams::default(),
        corners,
        w,
        vec![0.0; n * n],
        vec![0.0; n * n],
    )
    .unwrap();
    let v0 = s.volume().unwrap();
    let mut min_h = f64::INFINITY;
    let mut max_wet = 0usize;
    let wet0 = {
        let (w, _, _) = s.state().unwrap();
        w.iter()
            .zip(s.bathymetry())
            .filter(|(w, b)| *w - *b > 0.0)
            .count()
    };
    for k in 0..1000 {
        s.step().unwrap();
        if k % 50 == 49 {
            let (w, _, _) = s.state().unwrap();
            let h: Vec<f64> = w.iter().zip(s.bathymetry()).map(|(w, b)| w - b).collect();
            min_h = min_h.min(h.iter().cloned().fold(f64::INFINITY, f64::min));
            max_wet = max_wet.max(h.iter().filter(|&&x| x > 0.0).count());
        }
    }
    let rel = (s.volume().unwrap() - v0).abs() / v0;
    eprintln!(
        "dam break over terrain, 1000 steps (t = {:.1} s): relative volume change {rel:e}, min depth {min_h:e}, \
         largest negative depth set dry {:e}, wet cells {wet0} -> up to {max_wet} of {}",
        s.time(),
        s.negative_depth(),
        n * n
    );
    assert!(rel <= 1e-12, "volume changed by {rel:e}");
    assert!(min_h >= 0.0);
    assert!(s.negative_depth() < 1e-12, "{}", s.negative_depth());
    assert!(
        max_wet > wet0 + 40,
        "the front did not advance over dry ground"
    );
    assert!(max_wet < n * n, "everything wet: no front");
}

#[test]
fn ritter_dam_break_error_decreases_with_resolution() {
    let (len, h0, t_end, g) = (10.0, 1.0, 0.4, 9.81);
    let mut errs = Vec::new();
    for nx in [50usize, 100, 200, 400] {
        let mut s = ritter_channel(nx, len, h0).unwrap();
        while s.time() < t_end {
            s.step().unwrap();
        }
        // L1 error of the depth along the channel (row 1) at the time reached
        let (w, _, _) = s.state().unwrap();
        let dx = len / nx as f64;
        let t = s.time();
        let err: f64 = (0..nx)
            .map(|i| {
                (w[i + nx] - ritter_depth((i as f64 + 0.5) * dx, len / 2.0, h0, g, t)).abs() * dx
            })
            .sum();
        errs.push((nx, err, s.steps()));
    }
    for (nx, e, steps) in &errs {
        eprintln!("Ritter dam break, {nx} cells, {steps} steps: L1 depth error {e:.3e} m^2");
    }
    for w in errs.windows(2) {
        assert!(w[1].1 < w[0].1, "error did not decrease: {errs:?}");
    }
    let order = (errs[0].1 / errs[3].1).log2() / 3.0;
    eprintln!("observed order {order:.2}");
    assert!(order > 0.5, "{order}");
    // 400 cells: about 1e-2 m^2 over a 10 m channel (mean depth 0.5 m), error of 0.2 %
    assert!(errs[3].1 < 0.02);
}

#[test]
fn active_tiles_do_not_change_the_result() {
    let mut a = ShallowWater::scene(Scene::DamBreak, 96, 5).unwrap();
    let mut b = ShallowWater::scene(Scene::DamBreak, 96, 5).unwrap();
    b.force_all_tiles();
    for _ in 0..40 {
        a.step().unwrap();
        b.step().unwrap();
    }
    assert!(a.active_tiles() < b.active_tiles());
    assert_eq!(b.active_tiles(), b.total_tiles());
    assert_eq!(a.state().unwrap(), b.state().unwrap());
    assert_eq!(a.time(), b.time());
}

#[test]
fn scenes_have_the_stated_wet_area_and_rain_adds_its_volume() {
    let s = ShallowWater::scene(Scene::DamBreak, 256, 1).unwrap();
    let FieldData::Host(h) = s.field("Depth").unwrap() else {
        panic!()
    };
    let wet = h.iter().filter(|&&x| x > 0.0).count() as f64 / h.len() as f64;
    assert!((0.08..0.12).contains(&wet), "wet fraction {wet}");
    let mut r = ShallowWater::scene(Scene::Rain, 64, 1).unwrap();
    let v0 = r.volume().unwrap();
    for _ in 0..20 {
        r.step().unwrap();
    }
    let p = *r.params();
    let cells = (0..64 * 64)
        .filter(|s| {
            let x = ((s % 64) as f64 + 0.5) * p.dx - p.rain_x;
            let y = ((s / 64) as f64 + 0.5) * p.dx - p.rain_y;
            x * x + y * y <= p.rain_r2
        })
        .count() as f64;
    let expect = p.rain * cells * p.dx * p.dx * r.time();
    let got = r.volume().unwrap() - v0;
    assert!(
        ((got - expect) / expect).abs() < 1e-9,
        "rain added {got}, expected {expect}"
    );
    assert!(s.field("Vorticity").is_err());
}

type Make = Box<dyn Fn() -> ShallowWater>;

#[test]
#[ignore = "needs a CUDA GPU"]
fn shallow_water_step_matches_reference() {
    let gpu = Arc::new(tessera_gpu::Gpu::probe().expect("a CUDA GPU"));
    let cases: Vec<(&str, Make, usize)> = vec![
        (
            "dam-break 200x200 (partial tiles)",
            Box::new(|| ShallowWater::scene(Scene::DamBreak, 200, 9).unwrap()),
            80,
        ),
        (
            "rain 96x96",
            Box::new(|| ShallowWater::scene(Scene::Rain, 96, 2).unwrap()),
            60,
        ),
        (
            "ritter 300x4",
            Box::new(|| ritter_channel(300, 10.0, 1.0).unwrap()),
            200,
        ),
        (
            "lake with islands 45x37",
            Box::new(|| lake(45, 37, 0.3, 0.8)),
            100,
        ),
    ];
    for (name, make, steps) in cases {
        let mut cpu = make();
        let mut dev = make().on_gpu(gpu.clone()).unwrap();
        for _ in 0..steps {
            let a = cpu.step().unwrap();
            let b = dev.step().unwrap();
            assert_eq!(a.dt, b.dt, "{name}: time step differs");
        }
        let (cw, cu, cv) = cpu.state().unwrap();
        let (gw, gu, gv) = dev.state().unwrap();
        let diff = |a: &[f64], b: &[f64]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max)
        };
        let (dw, du, dv) = (diff(&cw, &gw), diff(&cu, &gu), diff(&cv, &gv));
        eprintln!(
            "shallow_water_step_matches_reference {name}: {steps} steps, active tiles {} / {}, max |dw| {dw:e}, |dhu| {du:e}, |dhv| {dv:e}",
            dev.active_tiles(),
            dev.total_tiles()
        );
        // tolerance 1e-12 (m, m^2/s); the kernels mirror the reference, so 0 is expected
        assert!(dw <= 1e-12 && du <= 1e-12 && dv <= 1e-12, "{name}");
        assert_eq!(
            cpu.active_tiles(),
            dev.active_tiles(),
            "{name}: active tiles"
        );
        assert_eq!(cpu.time(), dev.time(), "{name}: time");
        for f in [
            "Depth",
            "MomentumX",
            "MomentumY",
            "Surface",
            "Speed",
            "Terrain",
        ] {
            let FieldData::Host(h) = cpu.field(f).unwrap() else {
                panic!()
            };
            let FieldData::Device(d) = dev.field(f).unwrap() else {
                panic!()
            };
            let d = gpu.download(d).unwrap();
            let scale = 1.0 + h.iter().fold(0.0f32, |a, b| a.max(b.abs()));
            let m = h
                .iter()
                .zip(&d)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(m <= 1e-6 * scale, "{name}: field {f} differs by {m}");
        }
        let rel = (dev.volume().unwrap() - cpu.volume().unwrap()).abs()
            / cpu.volume().unwrap().max(1e-300);
        assert!(rel < 1e-13, "{name}: volume");
    }
}
