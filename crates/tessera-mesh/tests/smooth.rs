//! Safe and plain Laplacian smoothing (dissertation §3.4.2) and the cell validity checks
//! of `tessera_mesh::quality`, on jittered generated meshes (fixed seeds).

use tessera_core::Par;
use tessera_mesh::boundary::extract_boundary;
use tessera_mesh::generate::{box_mesh, bracket, BoxKind};
use tessera_mesh::quality::{self, cell_orientation, QualityStencil};
use tessera_mesh::smooth::{
    movable_vertices, safe_smoothed_positions, smooth, smoothed_positions, SafeSetup, SmoothMethod,
    SmoothParams,
};
use tessera_mesh::PolyMesh;

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    }
}

/// Inner vertices moved by up to `amount` voxel sizes `h` per axis.
fn jittered(mut m: PolyMesh, h: f64, amount: f64, seed: u64) -> PolyMesh {
    let fixed = extract_boundary(&m).vertex_mask(m.num_vertices());
    let mut r = Rng(seed);
    for (v, p) in m.positions_mut().iter_mut().enumerate() {
        if !fixed[v] {
            for x in p.iter_mut() {
                *x += amount * h * r.unit();
            }
        }
    }
    m
}

fn jittered_box() -> PolyMesh {
    jittered(
        box_mesh(BoxKind::Tet, [12, 10, 9], [1.2, 1.0, 0.9]),
        0.1,
        0.5,
        5,
    )
}

/// A 10 x 10 x 6 tetrahedral box whose top is pressed down by a smooth, deep dent
/// (`z -> z (1 - 0.9 exp(-r²/0.02))` around the centre): a valid mesh, graded and concave
/// at the top, where plain Laplacian smoothing folds cells over (36 after 5 iterations).
fn dented_box() -> PolyMesh {
    let mut m = box_mesh(BoxKind::Tet, [10, 10, 6], [1.0, 1.0, 1.0]);
    for p in m.positions_mut() {
        let phi = (-((p[0] - 0.5).powi(2) + (p[1] - 0.5).powi(2)) / 0.02).exp();
        p[2] *= 1.0 - 0.9 * phi;
    }
    m
}

#[test]
fn plain_smoothing_folds_cells_that_safe_smoothing_keeps() {
    let m = dented_box();
    let before = quality::validity(&m);
    let mut plain = m.clone();
    let rp = smooth(
        &mut plain,
        &SmoothParams {
            iterations: 5,
            method: SmoothMethod::Plain,
            ..Default::default()
        },
    );
    assert_eq!(rp.inverted_before, before.inverted);
    assert!(
        rp.inverted_after > rp.inverted_before,
        "the test mesh must make plain smoothing fold cells: {rp:?}"
    );
    // plain smoothing is the dissertation's iteration, unchanged
    assert_eq!(plain.positions(), smoothed_positions(&m, 5).as_slice());

    let mut safe = m.clone();
    let params = SmoothParams {
        iterations: 5,
        ..Default::default()
    };
    let rs = smooth(&mut safe, &params);
    assert_eq!(rs.method, SmoothMethod::Safe);
    assert!(rs.rejected_moves > 0, "{rs:?}");
    assert!(
        rs.max_displacement > 0.0,
        "safe smoothing still moves vertices"
    );
    assert!(rs.inverted_after <= rs.inverted_before, "{rs:?}");
    // per cell: the shape measure never falls below min(its value before, the threshold)
    let w = cell_orientation(&m);
    let st = QualityStencil::new(&m, &w);
    let tau = quality::q_of_mean_ratio(params.min_quality);
    for c in 0..m.num_cells() {
        let (q0, q1) = (st.q(c, m.positions()), st.q(c, safe.positions()));
        assert!(q1 >= q0.min(tau), "cell {c}: q {q0} -> {q1}");
    }
}

#[test]
fn safe_smoothing_is_the_same_sequential_and_parallel() {
    for (name, m) in [
        ("tet box", jittered_box()),
        ("dented box", dented_box()),
        (
            "mixed box",
            jittered(
                box_mesh(BoxKind::Mixed, [6, 5, 4], [1.0, 1.0, 1.0]),
                0.2,
                0.5,
                9,
            ),
        ),
        ("bracket", jittered(bracket(16).unwrap(), 7.5, 0.4, 1)),
    ] {
        let mut seq = m.clone();
        seq.set_par(Par::Seq);
        let mut par = m.clone();
        par.set_par(Par::Rayon);
        let (a, sa) = safe_smoothed_positions(&seq, &SafeSetup::new(&seq, 0.2), 6);
        let (b, sb) = safe_smoothed_positions(&par, &SafeSetup::new(&par, 0.2), 6);
        assert_eq!(a, b, "{name}");
        assert_eq!(sa, sb, "{name}");
        assert!(sa.rounds >= 6, "{name}: at least one round per iteration");
    }
}

#[test]
fn boundary_vertices_never_move() {
    let m = jittered(bracket(14).unwrap(), 8.0, 0.4, 2);
    let movable = movable_vertices(&m);
    for method in [SmoothMethod::Plain, SmoothMethod::Safe] {
        let mut s = m.clone();
        smooth(
            &mut s,
            &SmoothParams {
                iterations: 3,
                method,
                ..Default::default()
            },
        );
        for (v, (p, q)) in m.positions().iter().zip(s.positions()).enumerate() {
            if !movable[v] {
                assert_eq!(p, q, "{method:?}: fixed vertex {v} moved");
            }
        }
    }
}

#[test]
fn an_already_inverted_cell_may_improve_but_not_worsen() {
    // fold the cells around an inner vertex by pulling it out through the boundary
    let mut m = box_mesh(BoxKind::Tet, [3, 3, 3], [1.0, 1.0, 1.0]);
    let v = m
        .positions()
        .iter()
        .position(|p| {
            (p[0] - 1.0 / 3.0).abs() < 1e-12
                && (p[1] - 1.0 / 3.0).abs() < 1e-12
                && (p[2] - 1.0 / 3.0).abs() < 1e-12
        })
        .unwrap();
    m.positions_mut()[v] = [-0.2, 0.34, 0.33];
    let before = quality::validity(&m);
    assert!(before.inverted > 0, "{before:?}");
    let mut s = m.clone();
    let r = smooth(&mut s, &SmoothParams::default());
    assert!(r.inverted_after <= before.inverted, "{r:?}");
    assert_eq!(r.inverted_before, before.inverted);
}
