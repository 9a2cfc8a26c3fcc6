//! Tests of the order-p node numbering (dissertation §4.3, §4.4.1, Eq. 4.4): node counts,
//! local node order, canonical edge/face node numbering shared by neighbouring cells
//! (global indices and positions agree), node positions, node -> cell maps, Seq == Rayon.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use tessera_core::Par;
use tessera_fem::error::FemError;
use tessera_fem::multi_index::{binomial, multi_indices};
use tessera_fem::nodes::{rank_desc_lex, HoMesh, NodeLocation};
use tessera_mesh::simplex::SimplexMesh;

mod common;
use common::*;
fn meshes() -> Vec<SimplexMesh> {
    let mut v = Vec::new();
    for seed in 0..3u64 {
        let drop = if seed == 0 { 0.0 } else { 0.3 };
        v.push(grid_mesh(3, [2, 2, 1 + seed as usize], seed, drop));
        v.push(grid_mesh(2, [3, 2 + seed as usize, 0], seed, drop));
    }
    v
}

#[test]
fn rank_matches_multi_index_order() {
    for m in 1..=4 {
        for s in 0..=6 {
            let d = m - 1;
            if d == 0 {
                assert_eq!(rank_desc_lex(&[s as u8]), 0);
                continue;
            }
            for (r, a) in multi_indices(d, s).iter().enumerate() {
                assert_eq!(rank_desc_lex(&a[..m]), r as u32, "{a:?}");
            }
        }
    }
}

#[test]
fn node_counts_follow_eq_4_4() {
    for m in meshes() {
        let d = m.dim();
        let counts = [
            m.num_vertices(),
            m.num_edges(),
            m.num_faces(),
            m.num_cells(),
        ];
        for p in 1..=5 {
            let ho = HoMesh::new(m.clone(), p).unwrap();
            let mut want = 0;
            for k in 0..=d {
                let nk = if k == d { m.num_cells() } else { counts[k] };
                want += binomial(p - 1, k) * nk;
                assert_eq!(ho.num_nodes_of_dim(k), binomial(p - 1, k) * nk);
            }
            assert_eq!(ho.num_nodes(), want, "d = {d}, p = {p}");
            assert_eq!(ho.nodes_per_cell(), binomial(p + d, d));
            // storage: cellVertices, + cellEdges for p >= 2, + cellFaces for p >= 3 (d = 3)
            let c = m.num_cells();
            let ne = if d == 3 { 6 } else { 3 };
            let mut bytes = 4 * c * (d + 1);
            if p >= 2 {
                bytes += 4 * c * ne;
            }
            if p >= 3 && d == 3 {
                bytes += 16 * c;
            }
            assert_eq!(ho.topology_bytes(), bytes);
        }
    }
}

/// Every cell's local nodes map to distinct global nodes, every global node is used, and
/// a node seen from different cells (shared vertices, edges, faces) has one global index
/// and one position: the point Σ α_i v_i / p computed from each cell's own vertices equals
/// `node_positions()[global]`, and distinct points get distinct indices.
#[test]
fn shared_nodes_agree_on_index_and_position() {
    for m in meshes() {
        let d = m.dim();
        for p in 1..=5 {
            let ho = HoMesh::new(m.clone(), p).unwrap();
            let pos = ho.node_positions();
            assert_eq!(pos.len(), ho.num_nodes());
            let locals = multi_indices(d, p);
            let mut out = vec![0u32; ho.nodes_per_cell()];
            let mut used = vec![false; ho.num_nodes()];
            let mut by_point: HashMap<[i64; 3], u32> = HashMap::new();
            for c in 0..m.num_cells() {
                ho.cell_nodes(c, &mut out);
                let cv = m.cell(c);
                let set: BTreeSet<u32> = out.iter().copied().collect();
                assert_eq!(set.len(), out.len(), "cell {c}: repeated node");
                for (l, &g) in out.iter().enumerate() {
                    assert!((g as usize) < ho.num_nodes());
                    used[g as usize] = true;
                    let mut x = [0.0f64; 3];
                    for i in 0..=d {
                        let v = m.positions()[cv[i] as usize];
                        for k in 0..3 {
                            x[k] += locals[l][i] as f64 * v[k] / p as f64;
                        }
                    }
                    for k in 0..3 {
                        assert!(
                            (x[k] - pos[g as usize][k]).abs() <= 1e-12,
                            "cell {c}, local {l}, node {g}"
                        );
                    }
                    let key = x.map(|t| (t * 1e6).round() as i64);
                    let prev = *by_point.entry(key).or_insert(g);
                    assert_eq!(prev, g, "one point, two global nodes");
                }
            }
            // only vertices that belong to no cell (after dropping cells) are unused
            let vc = m.vertex_cells();
            let isolated = (0..m.num_vertices())
                .filter(|&v| vc.row_len(v) == 0)
                .count();
            for (g, &u) in used.iter().enumerate() {
                assert!(
                    u || (g < m.num_vertices() && vc.row_len(g) == 0),
                    "d = {d}, p = {p}: unused node {g}"
                );
            }
            assert_eq!(
                by_point.len() + isolated,
                ho.num_nodes(),
                "distinct nodes at distinct points"
            );
        }
    }
}

#[test]
fn local_order_and_canonical_edge_order() {
    let m = grid_mesh(3, [2, 1, 1], 5, 0.0);
    let ho1 = HoMesh::new(m.clone(), 1).unwrap();
    let mut out = vec![0u32; 4];
    for c in 0..m.num_cells() {
        ho1.cell_nodes(c, &mut out);
        assert_eq!(&out[..], m.cell(c));
    }
    // p = 4: edge nodes of edge [a, b] (a < b) run from a to b; vertex slots first
    let p = 4;
    let ho = HoMesh::new(m.clone(), p).unwrap();
    let mut out = vec![0u32; ho.nodes_per_cell()];
    let locals = multi_indices(3, p);
    for c in 0..m.num_cells() {
        ho.cell_nodes(c, &mut out);
        let cv = m.cell(c);
        for (l, a) in locals.iter().enumerate() {
            let support: Vec<usize> = (0..4).filter(|&i| a[i] > 0).collect();
            let loc = ho.node_location(out[l]);
            assert_eq!(loc.dim as usize + 1, support.len());
            if support.len() == 2 {
                let (i, j) = (support[0], support[1]);
                let (lo, hi) = if cv[i] < cv[j] { (i, j) } else { (j, i) };
                let e = m.find_edge(cv[i], cv[j]).unwrap();
                assert_eq!(
                    loc,
                    NodeLocation {
                        dim: 1,
                        simplex: e,
                        rank: (p - 1 - a[lo] as usize) as u32
                    }
                );
                assert_eq!(a[lo] as usize + a[hi] as usize, p);
            }
            if support.len() == 4 {
                assert_eq!(loc.simplex as usize, c);
            }
        }
    }
}

/// node_cells equals the brute-force transpose of cell_nodes; node_cells_tcsr equals the view.
#[test]
fn node_cells_is_the_transpose_of_cell_nodes() {
    for m in meshes() {
        for p in 1..=4 {
            let ho = HoMesh::new(m.clone(), p).unwrap();
            let mut want: Vec<Vec<i32>> = vec![Vec::new(); ho.num_nodes()];
            let mut out = vec![0u32; ho.nodes_per_cell()];
            for c in 0..m.num_cells() {
                ho.cell_nodes(c, &mut out);
                for &g in &out {
                    want[g as usize].push(c as i32);
                }
            }
            let nc = ho.node_cells();
            assert_eq!(nc.num_rows(), ho.num_nodes());
            let t = ho.node_cells_tcsr();
            for (g, w) in want.iter().enumerate() {
                assert_eq!(nc.row(g as u32), &w[..], "node {g}");
                assert_eq!(t.row(g), &w[..]);
            }
        }
    }
}

#[test]
fn seq_equals_rayon() {
    let m = grid_mesh(3, [4, 3, 3], 9, 0.1);
    for p in [1, 3, 5] {
        let a = HoMesh::new(m.clone().with_par(Par::Seq), p).unwrap();
        let b = HoMesh::new(m.clone().with_par(Par::Rayon), p).unwrap();
        assert_eq!(a.node_positions(), b.node_positions());
        assert_eq!(a.node_cells_tcsr(), b.node_cells_tcsr());
        let (mut x, mut y) = (
            vec![0u32; a.nodes_per_cell()],
            vec![0u32; a.nodes_per_cell()],
        );
        for c in 0..m.num_cells() {
            a.cell_nodes(c, &mut x);
            b.cell_nodes(c, &mut y);
            assert_eq!(x, y);
        }
    }
}

#[test]
fn invalid_order_is_an_error() {
    let m = grid_mesh(2, [1, 1, 0], 1, 0.0);
    assert!(matches!(
        HoMesh::new(m.clone(), 0),
        Err(FemError::InvalidOrder(0))
    ));
    assert!(matches!(
        HoMesh::new(m, 13),
        Err(FemError::InvalidOrder(13))
    ));
}

#[test]
fn node_location_round_trip() {
    let m = grid_mesh(3, [2, 2, 2], 4, 0.0);
    let ho = HoMesh::new(m.clone(), 5).unwrap();
    let mut seen: BTreeMap<(u8, u32, u32), u32> = BTreeMap::new();
    for g in 0..ho.num_nodes() as u32 {
        let l = ho.node_location(g);
        let per = binomial(4, l.dim as usize) as u32;
        assert!(l.rank < per);
        assert_eq!(
            ho.node_base(l.dim as usize) as u32 + l.simplex * per + l.rank,
            g
        );
        assert!(seen.insert((l.dim, l.simplex, l.rank), g).is_none());
    }
}

/// Reordering the vertices of every cell changes only the local order: the global nodes,
/// their positions and each cell's node set stay the same (p = 1..6, so tetrahedra have
/// cell-interior nodes too).
#[test]
fn global_numbering_is_invariant_to_cell_vertex_order() {
    for m in meshes() {
        let d = m.dim();
        let mut cv = m.cell_vertices().to_vec();
        let mut rng = Rng(99);
        for t in cv.chunks_mut(d + 1) {
            rng.shuffle(t);
        }
        let m2 = SimplexMesh::new(d, cv, m.positions().to_vec()).unwrap();
        for p in 1..=6 {
            let a = HoMesh::new(m.clone(), p).unwrap();
            let b = HoMesh::new(m2.clone(), p).unwrap();
            assert_eq!(a.num_nodes(), b.num_nodes());
            assert_eq!(a.node_positions(), b.node_positions(), "d = {d}, p = {p}");
            let (mut x, mut y) = (
                vec![0u32; a.nodes_per_cell()],
                vec![0u32; a.nodes_per_cell()],
            );
            for c in 0..m.num_cells() {
                a.cell_nodes(c, &mut x);
                b.cell_nodes(c, &mut y);
                x.sort_unstable();
                y.sort_unstable();
                assert_eq!(x, y, "cell {c}");
            }
        }
    }
}
