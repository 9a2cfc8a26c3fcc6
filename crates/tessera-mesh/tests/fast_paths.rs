//! The fixed-row-length fast paths of the relations against the general paths on random
//! meshes (dissertation §3.4.1, §3.4.4): transposes of ∂3 (4 faces per tetrahedron) and ∂2
//! (3 edges per triangle) with implicit offsets against the transpose with explicit
//! offsets; the simplex paths of cell vertices, cell edges and face vertices against the
//! general count -> scan -> fill paths; single-threaded against several threads.
//!
//! Meshes: tetrahedral boxes of random sizes with a random permutation of the cells and of
//! the faces inside each cell row, and random damage that the fast paths must detect and
//! hand to the general path: a flipped cell orientation, a face replaced by another one
//! (the cell is no longer a tetrahedron), a ∂2 row rotated out of loop order, and mixed
//! meshes (hexahedra, prisms, pyramids) where no fast path applies. Meshes that validate
//! are then known closed, and their cell vertices take the closed path as well.

use proptest::prelude::*;
use tessera_core::Par;
use tessera_mesh::generate::{box_mesh, BoxKind};
use tessera_mesh::relations::{
    cell_edges_general, cell_vertices_general, compute_cell_edges, compute_cell_vertices,
    compute_face_cells, compute_face_vertices, face_vertices_general, transpose_edge_vertices,
};
use tessera_mesh::PolyMesh;
use tessera_sparse::tcsr::negate;
use tessera_sparse::transpose::{
    transpose_entries, transpose_two_sided, StridedEntries, TcsrEntries, TransposeParams,
    TransposeSplit,
};
use tessera_sparse::Tcsr;

/// The transpose through the general source (explicit offsets), one thread.
fn general_transpose(m: &Tcsr) -> Tcsr {
    let (o, c) = transpose_entries(
        &TcsrEntries {
            offsets: m.offsets(),
            columns: m.columns(),
        },
        m.ncols(),
        false,
        TransposeParams::default(),
    );
    Tcsr::new(m.nrows(), o, c).unwrap()
}

/// Several threads with the parallel path forced on small inputs.
fn forced(chunks: usize, split: TransposeSplit, bucket_bits: u32) -> TransposeParams {
    TransposeParams {
        chunks,
        split,
        bucket_bits,
        min_parallel_nnz: 0,
    }
}

/// Local rayon pools of the given numbers of threads.
fn thread_pools(threads: &[usize]) -> Vec<rayon::ThreadPool> {
    threads
        .iter()
        .map(|&t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
        })
        .collect()
}

/// Local rayon pools of 1, 2, 3 and 7 threads (built once).
fn pools() -> &'static [rayon::ThreadPool] {
    static POOLS: std::sync::OnceLock<Vec<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOLS.get_or_init(|| thread_pools(&[1, 2, 3, 7]))
}

/// Damage applied to a tetrahedral box before the comparison.
#[derive(Clone, Copy, Debug)]
enum Damage {
    None,
    /// Negate one ∂3 entry: the cell is inconsistently oriented (cell edges must fall back).
    FlipFace(usize),
    /// Replace one ∂3 entry by another face: the cell spans more than 4 vertices.
    ForeignFace(usize, usize),
    /// Rotate one ∂2 row: still a loop, but not starting at the first edge.
    RotateFace(usize),
    /// Swap two entries of one ∂2 row: out of loop order (chained by the general path).
    SwapFaceEdges(usize),
    /// Append a copy of one cell: its faces bound three cells, or two alike (non-manifold;
    /// the two-slot δ3 must fall back).
    DuplicateCell(usize),
}

/// A tetrahedral box with its cells permuted and each ∂3 row shuffled, then damaged.
fn tet_mesh(n: [usize; 3], seed: u64, damage: Damage) -> PolyMesh {
    let m = box_mesh(BoxKind::Tet, n, [1.0, 1.0, 1.0]);
    let (pos, ev, fe, cf) = m.into_parts();
    let nc = cf.nrows();
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut order: Vec<usize> = (0..nc).collect();
    for i in (1..nc).rev() {
        order.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    let mut cols: Vec<i32> = Vec::with_capacity(cf.nnz());
    for &c in &order {
        let mut row = cf.row(c).to_vec();
        for i in (1..row.len()).rev() {
            row.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        cols.extend(row);
    }
    let mut fe_cols = fe.columns().to_vec();
    match damage {
        Damage::None => {}
        Damage::FlipFace(i) => {
            let i = i % cols.len();
            cols[i] = negate(cols[i]);
        }
        Damage::ForeignFace(i, f) => {
            let i = i % cols.len();
            let c = i / 4;
            let f = (f % fe.nrows()) as i32;
            if !cols[4 * c..4 * c + 4]
                .iter()
                .any(|&x| x == f || x == negate(f))
            {
                cols[i] = f;
            }
        }
        Damage::RotateFace(f) => {
            let f = f % fe.nrows();
            fe_cols[3 * f..3 * f + 3].rotate_left(1);
        }
        Damage::SwapFaceEdges(f) => {
            let f = f % fe.nrows();
            fe_cols.swap(3 * f, 3 * f + 1);
        }
        Damage::DuplicateCell(c) => {
            let c = c % nc;
            cols.extend_from_within(4 * c..4 * c + 4);
        }
    }
    let nc = cols.len() / 4;
    let offsets: Vec<u32> = (0..=nc as u32).map(|c| 4 * c).collect();
    let cf = Tcsr::new(cf.ncols(), offsets, cols).unwrap();
    let fe = Tcsr::new(fe.ncols(), fe.offsets().to_vec(), fe_cols).unwrap();
    PolyMesh::from_operators(pos, ev, fe, cf).unwrap()
}

/// Every fast path equals its general path, with one thread and with three.
fn check(m: &PolyMesh) -> Result<(), TestCaseError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let fv = face_vertices_general(m, Par::Seq);
    let ce = cell_edges_general(m, Par::Seq);
    let cv = cell_vertices_general(m, Par::Seq);
    let d3 = general_transpose(m.cell_faces());
    let d2 = general_transpose(m.face_edges());
    for par in [Par::Seq, Par::Rayon] {
        let (a, b, c) = pool.install(|| {
            (
                compute_face_vertices(m, par),
                compute_cell_edges(m, par),
                compute_cell_vertices(m, par),
            )
        });
        prop_assert_eq!(&a, &fv, "face vertices, {:?}", par);
        prop_assert_eq!(&b, &ce, "cell edges, {:?}", par);
        prop_assert_eq!(&c, &cv, "cell vertices, {:?}", par);
        prop_assert_eq!(&pool.install(|| m.cell_faces().transpose(par)), &d3);
        prop_assert_eq!(&pool.install(|| compute_face_cells(m, par)), &d3);
        prop_assert_eq!(&pool.install(|| m.face_edges().transpose(par)), &d2);
        prop_assert_eq!(
            &pool.install(|| face_vertices_general(m, par)),
            &fv,
            "general face vertices, {:?}",
            par
        );
    }
    // the parallel transposes as chosen for 1, 2, 3 and 7 threads (forced on small
    // meshes), and each parallel algorithm at those thread counts
    for pool in pools() {
        let t = pool.current_num_threads();
        for split in [
            TransposeSplit::Auto,
            TransposeSplit::Counters,
            TransposeSplit::Buckets,
        ] {
            let p = forced(0, split, 0);
            prop_assert_eq!(
                &pool.install(|| m.cell_faces().transpose_with(Par::Rayon, p)),
                &d3,
                "d3, {} threads, {:?}",
                t,
                split
            );
            prop_assert_eq!(
                &pool.install(|| m.cell_faces().transpose_two_sided_with(Par::Rayon, p)),
                &d3,
                "two-slot d3, {} threads, {:?}",
                t,
                split
            );
            prop_assert_eq!(
                &pool.install(|| m.face_edges().transpose_with(Par::Rayon, p)),
                &d2,
                "d2, {} threads, {:?}",
                t,
                split
            );
            let ev = m.edge_vertices();
            let (o, c) = pool.install(|| {
                transpose_entries(
                    &tessera_sparse::transpose::EdgePairEntries {
                        flat: ev.as_flattened(),
                    },
                    m.num_vertices(),
                    true,
                    p,
                )
            });
            prop_assert_eq!(
                &Tcsr::new(ev.len(), o, c).unwrap(),
                &transpose_edge_vertices(ev, m.num_vertices(), Par::Seq),
                "d1, {} threads, {:?}",
                t,
                split
            );
        }
    }
    for (chunks, split, bits) in [
        (1, TransposeSplit::Auto, 0),
        (300, TransposeSplit::Auto, 0),
        (2, TransposeSplit::Buckets, 1),
        (3, TransposeSplit::Buckets, 4),
        (8, TransposeSplit::Buckets, 0),
        (2, TransposeSplit::Counters, 0),
        (3, TransposeSplit::Counters, 0),
        (7, TransposeSplit::Counters, 0),
        (0, TransposeSplit::Auto, 0),
    ] {
        let p = forced(chunks, split, bits);
        prop_assert_eq!(
            &pool.install(|| m.cell_faces().transpose_with(Par::Rayon, p)),
            &d3
        );
        prop_assert_eq!(
            &pool.install(|| m.cell_faces().transpose_two_sided_with(Par::Rayon, p)),
            &d3
        );
        prop_assert_eq!(
            &pool.install(|| m.face_edges().transpose_with(Par::Rayon, p)),
            &d2
        );
        let ev = m.edge_vertices();
        let (o, c) = pool.install(|| {
            transpose_entries(
                &tessera_sparse::transpose::EdgePairEntries {
                    flat: ev.as_flattened(),
                },
                m.num_vertices(),
                true,
                p,
            )
        });
        prop_assert_eq!(
            &Tcsr::new(ev.len(), o, c).unwrap(),
            &transpose_edge_vertices(ev, m.num_vertices(), Par::Seq)
        );
    }
    // cells known closed (after a validation that passes: undamaged meshes, rotated or
    // swapped ∂2 rows, duplicated cells) take the closed path of cell vertices, which
    // reads two faces and three edges a cell: the same rows
    let closed = m.validate().is_ok();
    prop_assert_eq!(m.cells_known_closed(), closed);
    if closed {
        for par in [Par::Seq, Par::Rayon] {
            prop_assert_eq!(
                &pool.install(|| compute_cell_vertices(m, par)),
                &cv,
                "cell vertices of closed cells, {:?}",
                par
            );
        }
    }
    Ok(())
}

fn arb_damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        2 => Just(Damage::None),
        1 => any::<usize>().prop_map(Damage::FlipFace),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(i, f)| Damage::ForeignFace(i, f)),
        1 => any::<usize>().prop_map(Damage::RotateFace),
        1 => any::<usize>().prop_map(Damage::SwapFaceEdges),
        1 => any::<usize>().prop_map(Damage::DuplicateCell),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn simplex_paths_equal_general_paths(
        n in (1usize..6, 1usize..6, 1usize..5),
        seed in any::<u64>(),
        damage in arb_damage(),
    ) {
        check(&tet_mesh([n.0, n.1, n.2], seed, damage))?;
    }

    #[test]
    fn mixed_meshes_take_the_general_paths(n in (2usize..5, 2usize..5, 1usize..4)) {
        check(&box_mesh(BoxKind::Mixed, [n.0, n.1, n.2], [1.0, 2.0, 1.0]))?;
    }
}

/// Larger than one parallel chunk of rows (4096), so the rows are split between tasks.
#[test]
fn large_tet_box_several_chunks() {
    let m = tet_mesh([16, 12, 12], 7, Damage::None);
    assert!(m.num_cells() > 3 * 4096);
    check(&m).unwrap();
    let m = tet_mesh([16, 12, 12], 11, Damage::FlipFace(12345));
    check(&m).unwrap();
}

/// The fast paths detect damage: the general result differs from what a tetrahedron gives.
#[test]
fn damage_changes_the_general_result() {
    let m = tet_mesh([3, 3, 3], 5, Damage::ForeignFace(17, 100));
    let cv = compute_cell_vertices(&m, Par::Seq);
    assert!(
        cv.nnz() > 4 * m.num_cells(),
        "a cell spans more than 4 vertices"
    );
    let m = tet_mesh([3, 3, 3], 5, Damage::FlipFace(17));
    let ce = compute_cell_edges(&m, Par::Seq);
    assert_ne!(
        ce.nnz(),
        6 * m.num_cells(),
        "an inconsistent cell uses other edges"
    );
}

/// The two-slot δ3 is taken on a consistently oriented manifold tetrahedral mesh, declined
/// on a non-manifold one (a duplicated cell) and on a cell oriented against its neighbours,
/// and the result equals the general transpose in every case.
#[test]
fn two_slot_d3_only_on_consistently_oriented_manifolds() {
    let two_slot = |m: &PolyMesh, parallel| {
        transpose_two_sided(
            &StridedEntries::<4> {
                columns: m.cell_faces().columns(),
            },
            m.num_faces(),
            parallel,
            forced(2, TransposeSplit::Auto, 0),
        )
    };
    let ok = tet_mesh([4, 3, 3], 3, Damage::None);
    let dup = tet_mesh([4, 3, 3], 3, Damage::DuplicateCell(5));
    // flip every face of one cell: its interior faces are seen alike by both cells
    let (pos, ev, fe, cf) = ok.clone().into_parts();
    let mut cols = cf.columns().to_vec();
    for v in &mut cols[4 * 40..4 * 41] {
        *v = negate(*v);
    }
    let cf = Tcsr::new(cf.ncols(), cf.offsets().to_vec(), cols).unwrap();
    let flipped = PolyMesh::from_operators(pos, ev, fe, cf).unwrap();
    for parallel in [false, true] {
        assert!(two_slot(&ok, parallel).is_some());
        assert!(two_slot(&dup, parallel).is_none());
        assert!(two_slot(&flipped, parallel).is_none());
    }
    for m in [&ok, &dup, &flipped] {
        let want = general_transpose(m.cell_faces());
        for pool in pools() {
            assert_eq!(pool.install(|| compute_face_cells(m, Par::Rayon)), want);
        }
        assert_eq!(compute_face_cells(m, Par::Seq), want);
        assert_eq!(m.face_cells(), &want);
    }
}

/// Every relation the thread-scaling example times, on meshes large enough for the
/// default parameters to take the parallel paths (more than 2^16 entries in ∂1, ∂2 and
/// ∂3): bit-identical with 1, 2 and 4 threads (a tetrahedral box: the fixed-length and
/// two-slot paths; the same box with one cell flipped: the general δ3; a mixed box: the
/// general paths).
#[test]
fn relations_identical_on_1_2_and_4_threads() {
    use tessera_mesh::boundary::extract_boundary;
    let tets = tet_mesh([20, 16, 16], 9, Damage::None);
    let flipped = tet_mesh([20, 16, 16], 9, Damage::FlipFace(4321));
    let mixed = box_mesh(BoxKind::Mixed, [24, 20, 20], [1.0, 2.0, 1.0]);
    let pools = thread_pools(&[1, 2, 4]);
    for m in [&tets, &flipped, &mixed] {
        assert!(m.cell_faces().nnz() > 1 << 16 && m.face_edges().nnz() > 1 << 16);
        assert!(2 * m.num_edges() > 1 << 16);
        let all = |pool: &rayon::ThreadPool, par: Par| {
            let mut m = m.clone();
            m.purge_caches();
            m.set_par(par);
            pool.install(|| {
                (
                    [
                        transpose_edge_vertices(m.edge_vertices(), m.num_vertices(), par),
                        m.face_edges().transpose(par),
                        compute_face_cells(&m, par),
                        m.cell_faces().transpose(par),
                        compute_face_vertices(&m, par),
                        compute_cell_edges(&m, par),
                        compute_cell_vertices(&m, par),
                        m.vertex_cells().clone(),
                        m.edge_cells().clone(),
                    ],
                    extract_boundary(&m),
                )
            })
        };
        let want = all(&pools[0], Par::Seq);
        assert_eq!(want.0[2], want.0[3], "two-slot and general δ3");
        for pool in &pools {
            let got = all(pool, Par::Rayon);
            let t = pool.current_num_threads();
            for (i, (g, w)) in got.0.iter().zip(&want.0).enumerate() {
                assert!(g == w, "relation {i}, {t} threads");
            }
            assert_eq!(got.1, want.1, "boundary, {t} threads");
        }
    }
}

/// Which meshes are known closed: the builder's tetrahedra, simplex meshes' tetrahedra,
/// validated meshes; not the
/// builder's other cells or raw operators until validated, and not after `operators_mut`.
#[test]
fn cells_known_closed_from_construction_and_validation() {
    let tets = box_mesh(BoxKind::Tet, [3, 2, 2], [1.0, 1.0, 1.0]);
    assert!(tets.cells_known_closed(), "typed tetrahedra are closed");
    let cv = cell_vertices_general(&tets, Par::Seq);
    assert_eq!(compute_cell_vertices(&tets, Par::Seq), cv);
    let mut copy = tets.clone();
    assert!(copy.cells_known_closed(), "a copy keeps it");
    copy.purge_caches();
    assert!(copy.cells_known_closed(), "the caches are not the topology");
    let _ = copy.operators_mut();
    assert!(!copy.cells_known_closed(), "forgotten on mutable access");
    assert_eq!(compute_cell_vertices(&copy, Par::Seq), cv, "checked path");
    copy.validate().unwrap();
    assert!(copy.cells_known_closed(), "known again after validation");

    let bracket = tessera_mesh::generate::bracket(12).unwrap();
    assert!(bracket.cells_known_closed(), "the bracket's tetrahedra");
    assert_eq!(
        compute_cell_vertices(&bracket, Par::Rayon),
        cell_vertices_general(&bracket, Par::Seq)
    );

    let morton =
        tessera_mesh::simplex::SimplexMesh::morton_ordered(&tet_mesh([3, 2, 2], 5, Damage::None))
            .unwrap();
    assert!(morton.cells_known_closed(), "tetrahedra of a simplex mesh");
    assert_eq!(
        compute_cell_vertices(&morton, Par::Seq),
        cell_vertices_general(&morton, Par::Seq)
    );

    let mixed = box_mesh(BoxKind::Mixed, [2, 2, 2], [1.0, 1.0, 1.0]);
    assert!(!mixed.cells_known_closed(), "quadrilaterals may be twisted");
    mixed.validate().unwrap();
    assert!(mixed.cells_known_closed());

    let raw = tet_mesh([2, 2, 2], 3, Damage::None);
    assert!(
        !raw.cells_known_closed(),
        "raw operators are not known closed"
    );
    let open = tet_mesh([2, 2, 2], 3, Damage::ForeignFace(5, 40));
    assert!(open.validate().is_err());
    assert!(
        !open.cells_known_closed(),
        "a failed validation says nothing"
    );
}

/// The boundary extraction's branch-free compaction (chunks of 2^14 faces, boundary and
/// interior faces interleaved) against a face-by-face reference read off δ3, ∂2 and ∂1:
/// the half-faces (`+f` when no cell sees the face negatively, `-f` when none sees it
/// positively), their edges and vertices sorted and unique, and manifoldness; sequential
/// and in pools of 2, 3 and 7 threads, on consistent, flipped and duplicated-cell boxes.
#[test]
fn boundary_equals_a_face_by_face_reference() {
    use tessera_mesh::boundary::{extract_boundary, Boundary};
    use tessera_sparse::tcsr::{decode, encode};
    let reference = |m: &PolyMesh| -> Boundary {
        let fc = m.cell_faces().transpose(Par::Seq);
        let (mut faces, mut manifold) = (Vec::new(), true);
        for f in 0..m.num_faces() {
            let row = fc.row(f);
            let minus = row.iter().filter(|&&c| c < 0).count();
            let plus = row.len() - minus;
            if minus == 0 {
                faces.push(encode(f as u32, false));
            }
            if plus == 0 {
                faces.push(encode(f as u32, true));
            }
            manifold &= matches!((plus, minus), (1, 0) | (0, 1) | (1, 1));
        }
        let mut edges: Vec<u32> = faces
            .iter()
            .flat_map(|&hf| m.face_edges().row(decode(hf).0 as usize))
            .map(|&e| decode(e).0)
            .collect();
        edges.sort_unstable();
        edges.dedup();
        let mut vertices: Vec<u32> = edges
            .iter()
            .flat_map(|&e| m.edge_vertices()[e as usize])
            .collect();
        vertices.sort_unstable();
        vertices.dedup();
        Boundary {
            faces,
            edges,
            vertices,
            manifold,
        }
    };
    for (seed, damage) in [
        (3, Damage::None),
        (5, Damage::FlipFace(777)),
        (7, Damage::DuplicateCell(4242)),
    ] {
        let m = tet_mesh([20, 16, 16], seed, damage);
        assert!(m.num_faces() > 3 << 14, "several chunks of faces");
        let want = reference(&m);
        assert!(!want.faces.is_empty() && want.faces.len() < m.num_faces() / 4);
        let mut seq = m.clone();
        seq.set_par(Par::Seq);
        assert_eq!(extract_boundary(&seq), want, "sequential, {damage:?}");
        for pool in &pools()[1..] {
            let mut par = m.clone();
            par.purge_caches();
            par.set_par(Par::Rayon);
            let got = pool.install(|| extract_boundary(&par));
            let t = pool.current_num_threads();
            assert_eq!(got, want, "{t} threads, {damage:?}");
        }
    }
}
