//! Tests of the compact simplex mesh (dissertation §3.4.4): the example of Figs. 3.5/3.10 and
//! the table under Eq. 3.14, agreement with the polyhedral path on generated tetrahedral
//! meshes (edges, faces, ∂2, ∂3 with orientations, bottom-up transposes), the lossless round
//! trip, Seq == Rayon, and errors.

use std::collections::{BTreeMap, BTreeSet};
use tessera_core::Par;
use tessera_mesh::simplex::{facet_orientation, sort_swaps, SimplexMesh, TET_FACES};
use tessera_mesh::{CellType, MeshError, Point, PolyMesh, PolyMeshBuilder};
use tessera_sparse::tcsr::{col, decode, encode};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// A jittered grid of `n` cubes split into 6 Kuhn tetrahedra each (conforming), with
/// vertices relabelled at random, cells shuffled, each cell's vertex order permuted at
/// random and, if `drop` > 0, about that fraction of cells removed. Returns the cell
/// vertices (n x 4) and positions.
fn tet_grid(n: [usize; 3], seed: u64, drop: f64) -> (Vec<u32>, Vec<Point>) {
    let mut rng = Rng(seed);
    let idx = |i: usize, j: usize, k: usize| (i + (n[0] + 1) * (j + (n[1] + 1) * k)) as u32;
    let nv = (n[0] + 1) * (n[1] + 1) * (n[2] + 1);
    let mut perm: Vec<u32> = (0..nv as u32).collect();
    rng.shuffle(&mut perm);
    let mut pos = vec![[0.0; 3]; nv];
    for k in 0..=n[2] {
        for j in 0..=n[1] {
            for i in 0..=n[0] {
                let mut p = [i as f64, j as f64, k as f64];
                for x in &mut p {
                    *x += 0.2 * (rng.unit() - 0.5);
                }
                pos[perm[idx(i, j, k) as usize] as usize] = p;
            }
        }
    }
    let mut cells = Vec::new();
    let axes = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for k in 0..n[2] {
        for j in 0..n[1] {
            for i in 0..n[0] {
                for ax in axes {
                    let mut c = [i, j, k];
                    let mut t = vec![perm[idx(c[0], c[1], c[2]) as usize]];
                    for a in ax {
                        c[a] += 1;
                        t.push(perm[idx(c[0], c[1], c[2]) as usize]);
                    }
                    if drop > 0.0 && rng.unit() < drop {
                        continue;
                    }
                    rng.shuffle(&mut t);
                    cells.push(t);
                }
            }
        }
    }
    rng.shuffle(&mut cells);
    (cells.concat(), pos)
}

/// A jittered grid of squares split into 2 triangles each, relabelled and permuted like
/// [`tet_grid`].
fn tri_grid(n: [usize; 2], seed: u64, drop: f64) -> (Vec<u32>, Vec<Point>) {
    let mut rng = Rng(seed);
    let idx = |i: usize, j: usize| (i + (n[0] + 1) * j) as u32;
    let nv = (n[0] + 1) * (n[1] + 1);
    let mut perm: Vec<u32> = (0..nv as u32).collect();
    rng.shuffle(&mut perm);
    let mut pos = vec![[0.0; 3]; nv];
    for j in 0..=n[1] {
        for i in 0..=n[0] {
            pos[perm[idx(i, j) as usize] as usize] = [
                i as f64 + 0.2 * (rng.unit() - 0.5),
                j as f64 + 0.2 * (rng.unit() - 0.5),
                0.0,
            ];
        }
    }
    let mut cells = Vec::new();
    for j in 0..n[1] {
        for i in 0..n[0] {
            let q = [idx(i, j), idx(i + 1, j), idx(i + 1, j + 1), idx(i, j + 1)]
                .map(|v| perm[v as usize]);
            for mut t in [vec![q[0], q[1], q[2]], vec![q[0], q[2], q[3]]] {
                if drop > 0.0 && rng.unit() < drop {
                    continue;
                }
                rng.shuffle(&mut t);
                cells.push(t);
            }
        }
    }
    rng.shuffle(&mut cells);
    (cells.concat(), pos)
}

fn fig_3_5_positions() -> Vec<Point> {
    vec![
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, -1.0],
        [0.3, 0.3, 1.0],
    ]
}

fn builder_mesh(cells: &[u32], pos: &[Point]) -> PolyMesh {
    let mut b = PolyMeshBuilder::new(pos.to_vec());
    for t in cells.chunks(4) {
        b.add_typed_cell(CellType::Tetrahedron, t).unwrap();
    }
    b.build(Par::Seq).unwrap()
}

#[test]
fn fig_3_10_encoding_and_eq_3_14_table() {
    let m = SimplexMesh::new(3, vec![0, 1, 2, 3, 0, 2, 1, 4], fig_3_5_positions()).unwrap();
    assert_eq!(m.topology_bytes(), 2 * 4 * 4);
    assert_eq!(
        (
            m.num_vertices(),
            m.num_edges(),
            m.num_faces(),
            m.num_cells()
        ),
        (5, 9, 7, 2)
    );
    let d1: Vec<[u32; 2]> = vec![
        [0, 1],
        [0, 2],
        [0, 3],
        [0, 4],
        [1, 2],
        [1, 3],
        [1, 4],
        [2, 3],
        [2, 4],
    ];
    assert_eq!(m.edges(), &d1[..]);
    let faces: Vec<[u32; 3]> = vec![
        [0, 1, 2],
        [0, 1, 3],
        [0, 1, 4],
        [0, 2, 3],
        [0, 2, 4],
        [1, 2, 3],
        [1, 2, 4],
    ];
    assert_eq!(m.faces(), &faces[..]);

    // The table under Eq. 3.14 for c1 = (0, 2, 1, 4): combination, global, s, o.
    let table: [([usize; 3], [u32; 3], usize, i32); 4] = [
        ([0, 1, 2], [0, 2, 1], 1, -1),
        ([0, 1, 3], [0, 2, 4], 0, -1),
        ([0, 2, 3], [0, 1, 4], 0, 1),
        ([1, 2, 3], [2, 1, 4], 1, 1),
    ];
    let c1 = m.cell(1);
    for (i, (comb, global, s, o)) in table.iter().enumerate() {
        assert_eq!(*comb, TET_FACES[i]);
        assert_eq!([c1[comb[0]], c1[comb[1]], c1[comb[2]]], *global);
        assert_eq!(sort_swaps(global), *s);
        assert_eq!(facet_orientation(i, global), *o);
        let mut sorted = *global;
        sorted.sort_unstable();
        let f = m.find_face(sorted[0], sorted[1], sorted[2]).unwrap();
        assert_eq!(m.cell_facets_of(1)[i], encode(f, *o < 0), "facet {i} of c1");
    }
    // c0 = (0, 1, 2, 3): already sorted, o = (-1)^i
    assert_eq!(
        m.cell_facets_of(0),
        &[
            encode(0, false),
            encode(1, true),
            encode(3, false),
            encode(5, true)
        ]
    );
    assert_eq!(m.cell_faces(1), &[0, 4, 2, 6]);
    assert_eq!(m.cell_edges(0), &[0, 1, 2, 4, 5, 7]);
    // both cells of Fig. 3.5 have det(v1 - v0, v2 - v0, v3 - v0) < 0: outward by Eq. 3.14
    assert_eq!(m.cell_orientations(), vec![1, 1]);

    // ∂2 and ∂3 equal those of the polyhedral path (builder test fig_3_5_from_tets)
    let poly = m.to_poly().unwrap();
    let want_d2: Vec<Vec<i8>> = vec![
        vec![1, -1, 0, 0, 1, 0, 0, 0, 0],
        vec![1, 0, -1, 0, 0, 1, 0, 0, 0],
        vec![1, 0, 0, -1, 0, 0, 1, 0, 0],
        vec![0, 1, -1, 0, 0, 0, 0, 1, 0],
        vec![0, 1, 0, -1, 0, 0, 0, 0, 1],
        vec![0, 0, 0, 0, 1, -1, 0, 1, 0],
        vec![0, 0, 0, 0, 1, 0, -1, 0, 1],
    ];
    assert_eq!(poly.face_edges().to_dense(), want_d2);
    assert_eq!(
        poly.cell_faces().to_dense(),
        vec![vec![1, -1, 0, 1, 0, -1, 0], vec![-1, 0, 1, 0, -1, 0, 1]]
    );
    let b = builder_mesh(&[0, 1, 2, 3, 0, 1, 2, 4], &fig_3_5_positions());
    assert_eq!(poly.face_edges(), b.face_edges());
    assert_eq!(poly.cell_faces().to_dense(), b.cell_faces().to_dense());
    assert_eq!(SimplexMesh::from_poly(&poly).unwrap(), m);
}

#[test]
fn constant_row_lengths_eqs_3_11_to_3_13() {
    let (cv, pos) = tet_grid([2, 2, 1], 7, 0.0);
    let m = SimplexMesh::new(3, cv, pos).unwrap();
    let c = m.num_cells();
    // C(4, 2) = 6 edges, C(4, 3) = 4 faces per tetrahedron, C(3, 2) = 3 edges per face
    assert_eq!(m.cell_edges_array().len(), 6 * c);
    assert_eq!(m.cell_faces_array().len(), 4 * c);
    assert_eq!(m.cell_facets().len(), 4 * c);
    assert_eq!(m.face_edges().len(), 3 * m.num_faces());
    // a triangulated box is a ball
    assert_eq!(m.euler_characteristic(), 1);
    // every edge of a cell really joins two of its vertices, every face three
    for c in 0..c {
        let cv = m.cell(c);
        for (k, &e) in m.cell_edges(c).iter().enumerate() {
            let [i, j] = tessera_mesh::simplex::TET_EDGES[k];
            let mut want = [cv[i], cv[j]];
            want.sort_unstable();
            assert_eq!(m.edges()[e as usize], want);
        }
    }
}

/// Edges, faces, ∂2 and ∂3 (orientations included) and the bottom-up transposes of the
/// simplex path equal those of the polyhedral path (PolyMeshBuilder, which orients cells
/// outward by volume) on generated tetrahedral meshes.
#[test]
fn derived_simplices_equal_polyhedral_path() {
    let sizes = [[1, 1, 1], [2, 1, 1], [2, 2, 2], [3, 2, 1], [1, 1, 4]];
    for (t, n) in sizes.iter().enumerate() {
        for seed in 0..4u64 {
            let drop = if seed % 2 == 0 { 0.0 } else { 0.3 };
            let (cv, pos) = tet_grid(*n, 100 * t as u64 + seed, drop);
            if cv.is_empty() {
                continue;
            }
            let m = SimplexMesh::new(3, cv.clone(), pos.clone())
                .unwrap()
                .with_par(Par::Seq);
            let b = builder_mesh(&cv, &pos);
            // edges: same list, same orientation (small -> large)
            assert_eq!(m.edges(), b.edge_vertices());
            // faces: same numbering
            let bf = b.face_vertices();
            for (f, tri) in m.faces().iter().enumerate() {
                let mut s: Vec<u32> = bf.row(f).iter().map(|&v| v as u32).collect();
                s.sort_unstable();
                assert_eq!(&s[..], &tri[..], "face {f}");
            }
            // ∂2 with orientations: the same signed edges per face
            for f in 0..m.num_faces() {
                let a: BTreeSet<(u32, i32)> =
                    m.face_edges_of(f).iter().map(|&v| decode(v)).collect();
                let w: BTreeSet<(u32, i32)> = b.face_edges().row_decoded(f).collect();
                assert_eq!(a, w, "face {f}");
            }
            let poly = m.to_poly().unwrap();
            assert_eq!(poly.face_edges(), b.face_edges(), "∂2 in loop order");
            // ∂3 with orientations: equal up to each cell's orientation (Eq. 3.14 is outward
            // exactly for cells with det < 0; the builder always orients outward)
            let orient = m.cell_orientations();
            for c in 0..m.num_cells() {
                assert_ne!(orient[c], 0);
                let want: BTreeMap<u32, i32> = b.cell_faces().row_decoded(c).collect();
                let got: BTreeMap<u32, i32> = m
                    .cell_facets_of(c)
                    .iter()
                    .map(|&v| decode(v))
                    .map(|(f, s)| (f, s * orient[c] as i32))
                    .collect();
                assert_eq!(got, want, "cell {c}");
            }
            // bottom-up operators by transposition equal those of the polyhedral path
            assert_eq!(m.vertex_edges(), b.vertex_edges());
            assert_eq!(m.edge_faces(), b.edge_faces());
            assert_eq!(m.facet_cells(), poly.face_cells());
            let unsigned = |t: &tessera_sparse::Tcsr| -> Vec<Vec<u32>> {
                (0..t.nrows())
                    .map(|r| t.row(r).iter().map(|&v| col(v)).collect())
                    .collect()
            };
            assert_eq!(unsigned(m.face_cells()), unsigned(b.face_cells()));
            assert_eq!(unsigned(m.vertex_cells()), unsigned(b.vertex_cells()));
            assert_eq!(unsigned(m.edge_cells()), unsigned(b.edge_cells()));
            // from the builder's (outward) mesh: same vertex sets, orientation made outward
            let back = SimplexMesh::from_poly(&b).unwrap();
            assert_eq!(back.edges(), m.edges());
            assert_eq!(back.faces(), m.faces());
            assert!(back.cell_orientations().iter().all(|&o| o == 1));
            for c in 0..m.num_cells() {
                let mut x = back.cell(c).to_vec();
                let mut y = m.cell(c).to_vec();
                x.sort_unstable();
                y.sort_unstable();
                assert_eq!(x, y);
            }
        }
    }
}

#[test]
fn round_trip_is_exact() {
    for seed in 0..6u64 {
        let (cv, pos) = tet_grid([2, 2, 1 + seed as usize % 2], seed, 0.25);
        let m = SimplexMesh::new(3, cv, pos).unwrap();
        let p = m.to_poly().unwrap();
        p.validate().unwrap();
        let back = SimplexMesh::from_poly(&p).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.cell_vertices(), m.cell_vertices());
        assert_eq!(back.to_poly().unwrap().cell_faces(), p.cell_faces());

        let (cv, pos) = tri_grid([3, 2 + seed as usize], seed, 0.25);
        let m = SimplexMesh::new(2, cv, pos).unwrap();
        let p = m.to_poly().unwrap();
        p.validate().unwrap();
        assert_eq!(p.num_cells(), 0);
        assert_eq!(p.num_faces(), m.num_cells());
        assert_eq!(p.num_edges(), m.num_edges());
        let back = SimplexMesh::from_poly(&p).unwrap();
        assert_eq!(back, m);
    }
}

#[test]
fn triangle_mesh_edges_and_orientation() {
    for seed in 0..5u64 {
        let (cv, pos) = tri_grid([3, 4], seed, 0.0);
        let m = SimplexMesh::new(2, cv.clone(), pos).unwrap();
        // edges: brute force set of sorted pairs
        let mut want = BTreeSet::new();
        for t in cv.chunks(3) {
            for (i, j) in [(0, 1), (0, 2), (1, 2)] {
                want.insert([t[i].min(t[j]), t[i].max(t[j])]);
            }
        }
        assert_eq!(m.edges(), &want.into_iter().collect::<Vec<_>>()[..]);
        assert_eq!(m.euler_characteristic(), 1);
        assert!(m.faces().is_empty());
        // Eq. 3.14 on a triangle (v0, v1, v2) is the boundary of the loop v0 -> v1 -> v2:
        // after making all triangles counter-clockwise, each interior edge is used once with
        // each sign
        let orient = m.cell_orientations();
        let mut cv2 = cv.clone();
        for (c, t) in cv2.chunks_mut(3).enumerate() {
            if orient[c] < 0 {
                t.swap(0, 1);
            }
        }
        let m2 = SimplexMesh::new(2, cv2, m.positions().to_vec()).unwrap();
        assert!(m2.cell_orientations().iter().all(|&o| o == 1));
        let fc = m2.facet_cells();
        for e in 0..m2.num_edges() {
            let s: i32 = fc.row_decoded(e).map(|(_, s)| s).sum();
            match fc.row_len(e) {
                1 => assert_eq!(s.abs(), 1),
                2 => assert_eq!(s, 0, "edge {e}"),
                n => panic!("edge {e} in {n} triangles"),
            }
        }
    }
}

#[test]
fn tet_interior_faces_are_used_with_both_orientations() {
    let (cv, pos) = tet_grid([2, 2, 2], 3, 0.0);
    let m = SimplexMesh::new(3, cv.clone(), pos).unwrap();
    let orient = m.cell_orientations();
    let mut cv2 = cv;
    for (c, t) in cv2.chunks_mut(4).enumerate() {
        if orient[c] < 0 {
            t.swap(2, 3);
        }
    }
    let m2 = SimplexMesh::new(3, cv2, m.positions().to_vec()).unwrap();
    let fc = m2.facet_cells();
    let mut boundary = 0;
    for f in 0..m2.num_faces() {
        let s: i32 = fc.row_decoded(f).map(|(_, s)| s).sum();
        match fc.row_len(f) {
            1 => boundary += 1,
            2 => assert_eq!(s, 0, "face {f}"),
            n => panic!("face {f} in {n} cells"),
        }
    }
    // 6 sides of a 2x2x2 box, 2 x 4 triangles each
    assert_eq!(boundary, 6 * 8);
}

#[test]
fn seq_equals_rayon() {
    let (cv, pos) = tet_grid([6, 5, 4], 11, 0.1);
    let a = SimplexMesh::new(3, cv.clone(), pos.clone())
        .unwrap()
        .with_par(Par::Seq);
    let b = SimplexMesh::new(3, cv, pos).unwrap().with_par(Par::Rayon);
    assert_eq!(a.edges(), b.edges());
    assert_eq!(a.faces(), b.faces());
    assert_eq!(a.cell_edges_array(), b.cell_edges_array());
    assert_eq!(a.cell_faces_array(), b.cell_faces_array());
    assert_eq!(a.cell_facets(), b.cell_facets());
    assert_eq!(a.face_edges(), b.face_edges());
    assert_eq!(a.vertex_edges(), b.vertex_edges());
    assert_eq!(a.edge_faces(), b.edge_faces());
    assert_eq!(a.facet_cells(), b.facet_cells());
    assert_eq!(a.vertex_cells(), b.vertex_cells());
    assert_eq!(a.edge_cells(), b.edge_cells());
    assert_eq!(a.face_cells(), b.face_cells());
    assert_eq!(a.cell_orientations(), b.cell_orientations());
    let (pa, pb) = (a.to_poly().unwrap(), b.to_poly().unwrap());
    assert_eq!(pa.face_edges(), pb.face_edges());
    assert_eq!(pa.cell_faces(), pb.cell_faces());
    assert!(a.cached_bytes() > 0);
}

#[test]
fn invalid_input_is_an_error() {
    let pos = fig_3_5_positions();
    assert!(matches!(
        SimplexMesh::new(4, vec![0, 1, 2, 3, 4], pos.clone()),
        Err(MeshError::Unsupported(_))
    ));
    assert!(matches!(
        SimplexMesh::new(3, vec![0, 1, 2], pos.clone()),
        Err(MeshError::InvalidTopology(_))
    ));
    assert!(matches!(
        SimplexMesh::new(3, vec![0, 1, 2, 9], pos.clone()),
        Err(MeshError::IndexOutOfRange { index: 9, .. })
    ));
    assert!(matches!(
        SimplexMesh::new(3, vec![0, 1, 2, 1], pos.clone()),
        Err(MeshError::InvalidTopology(_))
    ));
    let mut bad = pos.clone();
    bad[4][0] = f64::INFINITY;
    assert!(matches!(
        SimplexMesh::new(2, vec![0, 1, 2], bad),
        Err(MeshError::NonFinitePosition { vertex: 4 })
    ));

    // a hexahedron is not a simplex
    let hex_pos: Vec<Point> = (0..8)
        .map(|i| [(i & 1) as f64, ((i >> 1) & 1) as f64, ((i >> 2) & 1) as f64])
        .collect();
    let mut b = PolyMeshBuilder::new(hex_pos);
    b.add_typed_cell(CellType::Hexahedron, &[0, 1, 3, 2, 4, 5, 7, 6])
        .unwrap();
    let hex = b.build(Par::Seq).unwrap();
    assert!(matches!(
        SimplexMesh::from_poly(&hex),
        Err(MeshError::InvalidTopology(_))
    ));

    // a pyramid has 5 faces
    let pyr_pos = vec![
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [1.0, 1.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.5, 0.5, 1.0],
    ];
    let mut b = PolyMeshBuilder::new(pyr_pos);
    b.add_typed_cell(CellType::Pyramid, &[0, 1, 2, 3, 4])
        .unwrap();
    assert!(SimplexMesh::from_poly(&b.build(Par::Seq).unwrap()).is_err());

    // a tetrahedron plus a free face: not a homogeneous simplicial complex
    let mut b = PolyMeshBuilder::new(fig_3_5_positions());
    b.add_typed_cell(CellType::Tetrahedron, &[0, 1, 2, 3])
        .unwrap();
    b.add_free_face(&[1, 2, 4]).unwrap();
    let e = SimplexMesh::from_poly(&b.build(Par::Seq).unwrap()).unwrap_err();
    assert!(e.to_string().contains("homogeneous"), "{e}");

    // inconsistently oriented faces: flip one sign of ∂3
    let m = SimplexMesh::new(3, vec![0, 1, 2, 3], fig_3_5_positions()).unwrap();
    let p = m.to_poly().unwrap();
    let (pos, ev, fe, cf) = p.into_parts();
    let (ncols, offs, mut cols) = cf.into_raw();
    cols[2] = !cols[2];
    let cf = tessera_sparse::Tcsr::new(ncols, offs, cols).unwrap();
    let bad = PolyMesh::from_operators(pos, ev, fe, cf).unwrap();
    let e = SimplexMesh::from_poly(&bad).unwrap_err();
    assert!(e.to_string().contains("inconsistently oriented"), "{e}");
}

/// Optional: the tetrahedral meshes in ../shared/meshes (skipped when absent) convert to
/// simplex meshes with the counts of the README table, keep their orientation outward, and
/// round-trip exactly.
#[test]
fn shared_meshes_convert_losslessly() {
    let dir = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/meshes"
    ));
    // (file, V, E, F, T)
    let files = [
        ("armadillo-3k.msh.gz", 994, 5055, 7275, 3213),
        ("bracket-13k.msh.gz", 3909, 20651, 30203, 13466),
    ];
    for (name, v, e, f, t) in files {
        let path = dir.join(name);
        if !path.exists() {
            eprintln!("skipping {}: not present", path.display());
            continue;
        }
        let poly = tessera_mesh::io::read_mesh(&path).unwrap().mesh;
        let m = SimplexMesh::from_poly(&poly).unwrap();
        assert_eq!(
            (
                m.num_vertices(),
                m.num_edges(),
                m.num_faces(),
                m.num_cells()
            ),
            (v, e, f, t),
            "{name}"
        );
        assert_eq!(m.edges(), poly.edge_vertices());
        assert!(
            m.cell_orientations().iter().all(|&o| o == 1),
            "{name}: cells outward by Eq. 3.14"
        );
        assert!(m.topology_bytes() < poly.topology_bytes());
        let back = SimplexMesh::from_poly(&m.to_poly().unwrap()).unwrap();
        assert_eq!(back, m);
    }
}

/// Morton renumbering permutes vertices and cells only: every cell keeps its vertex
/// positions in order (so orientations are unchanged), the derived edges and faces are the
/// renamed originals, and neighbouring vertices end up closer in index.
#[test]
fn renumber_morton_is_a_permutation_that_improves_locality() {
    use tessera_mesh::generate::{box_mesh, BoxKind};
    use tessera_mesh::simplex::SimplexMesh;
    let sm = SimplexMesh::from_poly(&box_mesh(BoxKind::Tet, [6, 5, 4], [1.0, 0.8, 0.7])).unwrap();
    // scramble the vertex numbering the way generators leave it: a fixed pseudo-random permutation
    let nv = sm.num_vertices();
    let mut perm: Vec<u32> = (0..nv as u32).collect();
    let mut state = 12345u64;
    for i in (1..nv).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        perm.swap(i, (state >> 33) as usize % (i + 1));
    }
    let mut pos = vec![[0.0; 3]; nv];
    for (old, &new) in perm.iter().enumerate() {
        pos[new as usize] = sm.positions()[old];
    }
    let cv: Vec<u32> = sm
        .cell_vertices()
        .iter()
        .map(|&v| perm[v as usize])
        .collect();
    let scrambled = SimplexMesh::new(3, cv, pos).unwrap();
    let spread = |m: &SimplexMesh| -> f64 {
        let e = m.edges();
        e.iter().map(|e| (e[1] - e[0]) as f64).sum::<f64>() / e.len() as f64
    };
    for par in [tessera_core::Par::Seq, tessera_core::Par::Rayon] {
        let mut r = scrambled.clone().with_par(par);
        let new_of_old = r.renumber_morton();
        assert_eq!(new_of_old.len(), nv);
        let mut seen = vec![false; nv];
        for &n in &new_of_old {
            assert!(!seen[n as usize]);
            seen[n as usize] = true;
        }
        for (old, &new) in new_of_old.iter().enumerate() {
            assert_eq!(r.positions()[new as usize], scrambled.positions()[old]);
        }
        // cells: the same set, each with its vertex order
        let mut a: Vec<Vec<u32>> = (0..scrambled.num_cells())
            .map(|c| {
                scrambled
                    .cell(c)
                    .iter()
                    .map(|&v| new_of_old[v as usize])
                    .collect()
            })
            .collect();
        let mut b: Vec<Vec<u32>> = (0..r.num_cells()).map(|c| r.cell(c).to_vec()).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        assert_eq!(r.num_edges(), scrambled.num_edges());
        assert_eq!(r.num_faces(), scrambled.num_faces());
        assert_eq!(r.euler_characteristic(), scrambled.euler_characteristic());
        assert!(
            spread(&r) < 0.5 * spread(&scrambled),
            "mean edge index span {} vs {}",
            spread(&r),
            spread(&scrambled)
        );
    }
}

/// `SimplexMesh::morton_ordered`: the same tetrahedral mesh (counts, boundary size, total
/// volume) under another numbering; a mesh that is not tetrahedral is an error.
#[test]
fn morton_ordered_is_the_same_mesh_renumbered() {
    use tessera_mesh::generate::{box_mesh, BoxKind};
    let m = box_mesh(BoxKind::Tet, [7, 5, 4], [1.0, 2.0, 3.0]);
    let r = SimplexMesh::morton_ordered(&m).unwrap();
    assert_eq!(
        (
            r.num_vertices(),
            r.num_edges(),
            r.num_faces(),
            r.num_cells()
        ),
        (
            m.num_vertices(),
            m.num_edges(),
            m.num_faces(),
            m.num_cells()
        )
    );
    let b = |x: &tessera_mesh::PolyMesh| {
        let b = tessera_mesh::boundary::extract_boundary(x);
        (b.faces.len(), b.edges.len(), b.vertices.len())
    };
    assert_eq!(b(&r), b(&m));
    assert_ne!(r.positions(), m.positions(), "the numbering changes");
    let mut a = m.positions().to_vec();
    let mut c = r.positions().to_vec();
    a.sort_by(|p, q| p.partial_cmp(q).unwrap());
    c.sort_by(|p, q| p.partial_cmp(q).unwrap());
    assert_eq!(a, c, "the same vertices");
    assert!(
        SimplexMesh::morton_ordered(&box_mesh(BoxKind::Hex, [2, 2, 2], [1.0, 1.0, 1.0])).is_err()
    );
}
