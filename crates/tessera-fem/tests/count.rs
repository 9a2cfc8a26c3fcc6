//! Tests of Eq. 4.6 (dissertation §4.3, §4.4.1): exact non-zeros per row from coboundary
//! counts equal brute-force counting of node pairs that share a cell, on many generated
//! triangle and tetrahedral meshes for p = 1..5; Seq == Rayon; totals and Table 4.1.

use tessera_core::Par;
use tessera_fem::count::{
    block_nonzeros, block_nonzeros_from_totals, nonzero_summary, row_counts, simplex_counts,
    zayer_bound,
};
use tessera_fem::nodes::HoMesh;
use tessera_mesh::simplex::SimplexMesh;

mod common;
use common::*;
/// Row lengths of the node-node adjacency (nodes sharing a cell, diagonal included) by
/// brute force: collect every pair from `cell_nodes`, sort and deduplicate per row.
fn brute_force_rows(ho: &HoMesh) -> Vec<u32> {
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); ho.num_nodes()];
    let mut out = vec![0u32; ho.nodes_per_cell()];
    for c in 0..ho.num_cells() {
        ho.cell_nodes(c, &mut out);
        for &i in &out {
            rows[i as usize].extend_from_slice(&out);
        }
    }
    rows.into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            r.push(i as u32); // the diagonal (isolated vertices have only it)
            r.sort_unstable();
            r.dedup();
            r.len() as u32
        })
        .collect()
}

#[test]
fn eq_4_6_equals_brute_force() {
    let mut checked = 0;
    for seed in 0..10u64 {
        let drop = [0.0, 0.15, 0.4][seed as usize % 3];
        let n3 = [
            1 + seed as usize % 3,
            1 + (seed as usize / 3) % 2,
            1 + seed as usize % 2,
        ];
        let n2 = [2 + seed as usize % 4, 1 + seed as usize % 3, 0];
        for m in [
            grid_mesh(3, n3, seed, drop),
            grid_mesh(2, n2, 1000 + seed, drop),
        ] {
            if m.num_cells() == 0 {
                continue;
            }
            for p in 1..=5 {
                let ho = HoMesh::new(m.clone(), p).unwrap();
                let want = brute_force_rows(&ho);
                let got = row_counts(&ho, Par::Seq);
                assert_eq!(got, want, "d = {}, p = {p}, seed {seed}", m.dim());
                let total: u64 = want.iter().map(|&x| x as u64).sum();
                assert_eq!(block_nonzeros(&ho, Par::Seq), total);
                assert!(zayer_bound(&ho) >= total);
                checked += 1;
            }
        }
    }
    assert!(checked >= 90, "{checked}");
}

/// Non-manifold configurations: tetrahedra that share only a vertex, only an edge, and a
/// face; triangles that share only a vertex.
#[test]
fn eq_4_6_on_non_manifold_complexes() {
    let pos = vec![
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
        [-1.0, 0.0, 0.0],
        [0.0, -1.0, 0.0],
        [0.0, 0.0, -1.0],
        [1.0, 1.0, -1.0],
        [0.5, 0.5, 1.0],
    ];
    // t0, t1 share vertex 0 only; t2 shares edge (1, 2) with t0; t3 shares face (0, 1, 3)
    let tets = vec![0, 1, 2, 3, 0, 4, 5, 6, 1, 2, 7, 6, 0, 1, 3, 8];
    let m = SimplexMesh::new(3, tets, pos.clone()).unwrap();
    let tris = vec![0, 1, 2, 0, 4, 5, 1, 2, 7];
    let m2 = SimplexMesh::new(2, tris, pos).unwrap();
    for mesh in [m, m2] {
        for p in 1..=5 {
            let ho = HoMesh::new(mesh.clone(), p).unwrap();
            assert_eq!(
                row_counts(&ho, Par::Seq),
                brute_force_rows(&ho),
                "d = {}, p = {p}",
                mesh.dim()
            );
        }
    }
}

#[test]
fn seq_equals_rayon() {
    for d in [2, 3] {
        let m = grid_mesh(d, [8, 7, 5], 77, 0.1);
        for p in 1..=5 {
            let ho = HoMesh::new(m.clone(), p).unwrap();
            assert_eq!(
                simplex_counts(&ho, Par::Seq),
                simplex_counts(&ho, Par::Rayon)
            );
            assert_eq!(row_counts(&ho, Par::Seq), row_counts(&ho, Par::Rayon));
            assert_eq!(
                block_nonzeros(&ho, Par::Seq),
                block_nonzeros(&ho, Par::Rayon)
            );
        }
    }
}

/// The closed-form total from simplex counts equals the per-row sum, and the Zayer bound is
/// |T| C(p+d, d)^2.
#[test]
fn totals_and_bound() {
    for d in [2, 3] {
        let m = grid_mesh(d, [3, 3, 2], 5, 0.0);
        let n = [
            m.num_vertices() as u64,
            m.num_edges() as u64,
            m.num_faces() as u64,
            m.num_cells() as u64,
        ];
        for p in 1..=5 {
            let ho = HoMesh::new(m.clone(), p).unwrap();
            assert_eq!(
                block_nonzeros_from_totals(d, p, n),
                block_nonzeros(&ho, Par::Rayon),
                "d = {d}, p = {p}"
            );
            let npc = tessera_fem::multi_index::num_local_nodes(d, p) as u64;
            assert_eq!(zayer_bound(&ho), n[3.min(d)] * npc * npc);
            let s = nonzero_summary(&ho, Par::Seq);
            assert!((s.ratio - s.bound as f64 / s.exact as f64).abs() < 1e-15);
        }
    }
    // closed forms quoted in the docs
    assert_eq!(
        block_nonzeros_from_totals(3, 1, [10, 20, 30, 40]),
        10 + 2 * 20
    );
    assert_eq!(
        block_nonzeros_from_totals(3, 2, [10, 20, 30, 40]),
        10 + 7 * 20 + 12 * 30 + 6 * 40
    );
    assert_eq!(block_nonzeros_from_totals(3, 3, [1, 0, 0, 0]), 1);
    assert_eq!(block_nonzeros_from_totals(3, 3, [0, 1, 1, 1]), 14 + 55 + 92);
}

/// Table 4.1 of the dissertation, rows 1-7: V, E, F, C and (Exact, Bound) for p = 1, 2, 3,
/// all printed with one decimal in k or M. Eq. 4.6 summed from the table's own simplex
/// counts reproduces "Exact", and |T| C(p+3, 3)^2 reproduces "Bound", within the table's
/// rounding: half a unit of the last printed digit of the result plus the effect of half
/// a unit of each printed input count.
#[test]
fn reproduces_table_4_1() {
    let rows: [([f64; 4], [(f64, f64); 3]); 7] = [
        (
            [2.9e3, 13.5e3, 18.3e3, 7.7e3],
            [(29.8e3, 124.0e3), (363.9e3, 774.9e3), (1.9e6, 3.1e6)],
        ),
        (
            [11.7e3, 64.2e3, 96.7e3, 44.2e3],
            [(140.0e3, 707.7e3), (1.9e6, 4.4e6), (10.3e6, 17.7e6)],
        ),
        (
            [21.7e3, 125.5e3, 194.3e3, 90.6e3],
            [(272.8e3, 1.4e6), (3.8e6, 9.1e6), (20.8e6, 36.2e6)],
        ),
        (
            [30.8e3, 181.4e3, 283.9e3, 133.3e3],
            [(393.7e3, 2.1e6), (5.5e6, 13.3e6), (30.4e6, 53.3e6)],
        ),
        (
            [47.1e3, 284.2e3, 450.5e3, 213.4e3],
            [(615.6e3, 3.4e6), (8.7e6, 21.3e6), (48.4e6, 85.4e6)],
        ),
        (
            [59.7e3, 364.1e3, 580.7e3, 276.3e3],
            [(787.9e3, 4.4e6), (11.2e6, 27.6e6), (62.5e6, 110.5e6)],
        ),
        (
            [77.6e3, 479.4e3, 769.4e3, 367.6e3],
            [(1.0e6, 5.9e6), (14.9e6, 36.8e6), (82.9e6, 147.0e6)],
        ),
    ];
    // half a unit of the last printed digit ("12.3 k" or "1.2 M")
    let half_unit = |x: f64| if x >= 1e6 { 0.05e6 } else { 0.05e3 };
    for (r, (n, cols)) in rows.iter().enumerate() {
        let nn = n.map(|x| x as u64);
        for (i, &(exact, bound)) in cols.iter().enumerate() {
            let p = i + 1;
            // Eq. 4.6 summed is linear in (V, E, F, C): propagate the inputs' rounding
            let mut tol = half_unit(exact);
            for l in 0..4 {
                let mut unit = [0u64; 4];
                unit[l] = 1;
                tol += block_nonzeros_from_totals(3, p, unit) as f64 * half_unit(n[l]);
            }
            let e = block_nonzeros_from_totals(3, p, nn) as f64;
            assert!(
                (e - exact).abs() <= tol,
                "row {r}, p = {p}: {e} vs {exact} (tolerance {tol})"
            );
            let m = tessera_fem::multi_index::num_local_nodes(3, p) as f64;
            let b = n[3] * m * m;
            let btol = half_unit(bound) + m * m * half_unit(n[3]);
            assert!(
                (b - bound).abs() <= btol,
                "row {r}, p = {p}: bound {b} vs {bound}"
            );
        }
    }
    // the last row's p = 3 "Exact" (329.3 M) disagrees with its own counts and ratio:
    // Eq. 4.6 gives about 378.6 M = 681.1 M / 1.8
    let last = block_nonzeros_from_totals(3, 3, [326_200, 2_100_000, 3_500_000, 1_700_000]) as f64;
    assert!((last / 1e6 - 378.6).abs() < 0.5, "{last}");
}

/// Optional: Eq. 4.6 equals brute force on the armadillo mesh of ../shared/meshes for
/// p = 1..3 (skipped when absent).
#[test]
fn eq_4_6_on_shared_armadillo() {
    let path = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/meshes/armadillo-3k.msh.gz"
    ));
    if !path.exists() {
        eprintln!("skipping {}: not present", path.display());
        return;
    }
    let poly = tessera_mesh::io::read_mesh(path).unwrap().mesh;
    let m = SimplexMesh::from_poly(&poly).unwrap();
    for p in 1..=3 {
        let ho = HoMesh::new(m.clone(), p).unwrap();
        let want = brute_force_rows(&ho);
        assert_eq!(row_counts(&ho, Par::Rayon), want, "p = {p}");
        let s = nonzero_summary(&ho, Par::Rayon);
        eprintln!(
            "armadillo-3k p = {p}: exact {} bound {} ratio {:.2}",
            s.exact, s.bound, s.ratio
        );
    }
}
