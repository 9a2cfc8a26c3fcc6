//! The cut-cell fluid on the CPU (dissertation §6.3.2): the projection leaves a divergence
//! below 1e-6 of the one it removed in every fluid cell (f32), scenes run and stay finite,
//! fields are named as the streaming server expects, and bad input is one clear error.

use tessera_flow::fluid::{Boundary, FluidSetup};
use tessera_flow::geometry::{Obstacles, Shape};
use tessera_flow::{scene, FieldData, Fluid, Simulation};

fn random_state(f: &Fluid, seed: u64) -> (Vec<Vec<f32>>, Vec<f32>) {
    let mut s = seed;
    let mut rnd = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    };
    let mac = f.mac();
    let vel = (0..mac.dim)
        .map(|a| (0..mac.faces(a)).map(|_| rnd()).collect())
        .collect();
    let smoke = (0..mac.cells()).map(|_| rnd().abs()).collect();
    (vel, smoke)
}

#[test]
fn projection_removes_the_divergence_in_every_cell() {
    for (name, grid) in [("cylinder2d", vec![96, 48]), ("sphere3d", vec![24, 16, 16])] {
        let (mut setup, _) = scene::build(name, Some(&grid), None).unwrap();
        setup.params.multigrid.tolerance = 1e-6;
        setup.params.refine_projection = true;
        let mut f = Fluid::new(setup, None).unwrap();
        let (v, s) = random_state(&f, 3);
        f.set_state(&v, &s).unwrap();
        f.step().unwrap();
        let st = f.last_stats();
        let ratio = st.max_divergence_after / st.max_divergence_before;
        eprintln!(
            "{name}: max divergence {:.3e} -> {:.3e} (ratio {ratio:.2e}), {} cycles, residual {:.2e}",
            st.max_divergence_before,
            st.max_divergence_after,
            st.solve.iterations,
            st.solve.relative_residual()
        );
        assert!(ratio < 1e-6, "{name}: ratio {ratio:e}");
    }
}

#[test]
fn scenes_run_and_expose_their_fields() {
    for (name, grid) in [
        ("cylinder2d", vec![128, 32]),
        ("smoke2d", vec![32, 32]),
        ("sphere3d", vec![32, 16, 16]),
        ("bracket3d", vec![24, 12, 12]),
    ] {
        let (setup, _) = scene::build(name, Some(&grid), None).unwrap();
        let mut f = Fluid::new(setup, None).unwrap();
        let names: Vec<String> = f.fields().iter().map(|i| i.name.clone()).collect();
        let mut expect = vec!["Pressure", "VelocityX", "VelocityY"];
        if grid.len() == 3 {
            expect.push("VelocityZ");
        }
        expect.extend(["Smoke", "Divergence", "Solid"]);
        assert_eq!(names, expect, "{name}");
        for _ in 0..3 {
            let r = f.step().unwrap();
            assert!(r.dt > 0.0);
        }
        assert_eq!(f.steps(), 3);
        let n = f.grid().num_cells();
        for info in f.fields() {
            let FieldData::Host(v) = f.field(&info.name).unwrap() else {
                panic!("CPU fluid gave a device field")
            };
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|x| x.is_finite()), "{name}: {}", info.name);
        }
        let FieldData::Host(solid) = f.field("Solid").unwrap() else {
            unreachable!()
        };
        assert!(solid.iter().any(|&x| x > 0.5), "{name}: no solid cell");
        assert!(f.last_stats().solve.converged, "{name}");
        assert!(f.field("Vorticity").is_err());
    }
}

#[test]
fn smoke_rises_in_smoke2d() {
    let (setup, _) = scene::build("smoke2d", Some(&[32, 32]), None).unwrap();
    let mut f = Fluid::new(setup, None).unwrap();
    for _ in 0..15 {
        f.step().unwrap();
    }
    let FieldData::Host(vy) = f.field("VelocityY").unwrap() else {
        unreachable!()
    };
    // above the source the plume goes up
    let up: f32 = (4..10).map(|j| vy[16 + 32 * j]).sum();
    assert!(up > 0.0, "mean upward velocity above the source {up}");
}

#[test]
fn an_obstacle_covering_the_domain_is_an_error() {
    let (mut setup, _) = scene::build("smoke2d", Some(&[16, 16]), None).unwrap();
    setup.obstacles = Obstacles::new(vec![Shape::circle(0.5, 0.5, 5.0)]);
    let e = Fluid::new(setup, None).err().unwrap().to_string();
    assert!(e.contains("cover the whole domain"), "{e}");
}

#[test]
fn a_closed_box_keeps_its_fluid() {
    // all walls, buoyant smoke: a floating region (pure Neumann) every step
    let (setup, _) = scene::build("smoke2d", Some(&[32, 32]), None).unwrap();
    let setup = FluidSetup {
        sides: [Boundary::Wall; 6],
        ..setup
    };
    let mut f = Fluid::new(setup, None).unwrap();
    for _ in 0..10 {
        f.step().unwrap();
        let st = f.last_stats();
        assert!(st.solve.converged, "{:?}", st.solve);
    }
}

#[test]
fn a_mesh_that_is_not_closed_is_an_error() {
    let dir = std::env::temp_dir().join(format!("tessera-flow-open-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("open.obj");
    // a tetrahedron with one face missing
    std::fs::write(
        &p,
        "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 2 3 4\n",
    )
    .unwrap();
    let e = scene::build("bracket3d", Some(&[16, 8, 8]), Some(&p))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("open.obj") && e.contains("not closed"), "{e}");
    let e = scene::build(
        "bracket3d",
        Some(&[16, 8, 8]),
        Some(&dir.join("missing.stl")),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("missing.stl"), "{e}");
    // a closed tetrahedron works
    std::fs::write(
        &p,
        "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 2 3 4\nf 1 4 3\n",
    )
    .unwrap();
    scene::build("bracket3d", Some(&[16, 8, 8]), Some(&p)).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
