//! The mesh matrix with action maps (seed 004) on the CPU: storage forms, mapped SpMV and
//! SpGEMM against independent constructions (explicit matrices, triplet assembly), and the
//! applications (normals, slicing, surface Catmull-Clark, collapses, RCM).

use tessera_mesh::mesh_matrix::collapse::{collapse_edges, collapse_faces, remove_vertices};
use tessera_mesh::mesh_matrix::edges::half_edges;
use tessera_mesh::mesh_matrix::normals::{face_normals, vertex_normals, NormalWeights};
use tessera_mesh::mesh_matrix::rcm::{adjacency_bandwidth, reorder_rcm};
use tessera_mesh::mesh_matrix::shapes::{cube, grid, icosphere, torus};
use tessera_mesh::mesh_matrix::slice::{slice, Plane};
use tessera_mesh::mesh_matrix::spgemm::{
    cotan_laplacian, generalized_adjacency, mapped_spgemm, oriented_adjacency, uniform_laplacian,
};
use tessera_mesh::mesh_matrix::subdivide::{catmull_clark, catmull_clark_levels, step_counts};
use tessera_mesh::mesh_matrix::{
    spmv, ActionMap, Csr, MeshMatrix, PairMap, PolygonMesh, StorageForm,
};

/// A small mixed mesh: a quad, two triangles and a pentagon, one boundary loop.
fn mixed() -> PolygonMesh {
    let p = vec![
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [2.0, 0.0, 0.1],
        [0.0, 1.0, 0.0],
        [1.0, 1.0, 0.2],
        [2.0, 1.0, 0.0],
        [0.5, 2.0, 0.0],
        [1.5, 2.2, 0.1],
        [3.0, 0.5, 0.0],
    ];
    let offsets = vec![0, 4, 7, 10, 15];
    let verts = vec![0, 1, 4, 3, 1, 2, 5, 1, 5, 4, 3, 4, 5, 7, 6];
    let mut m = PolygonMesh::new(p, &offsets, &verts).unwrap();
    // one more triangle on the side of vertex 2
    let (mut o, mut v) = m.matrix.to_face_table();
    v.extend_from_slice(&[2, 8, 5]);
    o.push(v.len() as u32);
    m = PolygonMesh::new(m.positions.clone(), &o, &v).unwrap();
    m
}

fn flat(p: &[[f64; 3]]) -> Vec<f64> {
    p.iter().flatten().copied().collect()
}

/// A deterministic pseudo-random sequence in [-1, 1).
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

// ------------------------------------------------------------------ storage (seed §3-§4)

#[test]
fn storage_forms_take_12_and_16_bytes_per_triangle() {
    let s = icosphere(2);
    let m = &s.matrix;
    assert_eq!(m.form(), StorageForm::RowindOnly);
    assert_eq!(m.bytes(), 12 * m.num_faces());
    assert_eq!(m.bytes_per_face(), 12.0);
    let c = m.with_colptr();
    assert_eq!(c.form(), StorageForm::RowindColptr);
    assert_eq!(c.bytes(), 16 * m.num_faces() + 4);
    assert_eq!(c.bytes_per_face(), 16.0);
    assert_eq!(&c, m, "the same matrix in both forms");
    // the explicit CSC with 32-bit values: 28 bytes per triangle (seed §4)
    let (cp, ri, va) = m.to_csc();
    assert_eq!(4 * (cp.len() - 1 + ri.len() + va.len()), 28 * m.num_faces());
    // a mixed mesh keeps colptr
    let mx = mixed();
    assert_eq!(mx.matrix.form(), StorageForm::RowindColptr);
    assert_eq!(
        mx.matrix.bytes(),
        4 * mx.matrix.nnz() + 4 * (mx.num_faces() + 1)
    );
}

#[test]
fn face_table_is_recovered_from_the_csc_of_the_seed_example() {
    // the first four faces of seed Fig. 1 (1-based in the seed): f1 = (1,2,11,13),
    // f2 = (2,3,6,9,10,11), f3 = (4,5,6,3), f4 = (5,7,6)
    let faces: [&[u32]; 4] = [
        &[1, 2, 11, 13],
        &[2, 3, 6, 9, 10, 11],
        &[4, 5, 6, 3],
        &[5, 7, 6],
    ];
    let mut offsets = vec![0u32];
    let mut verts = Vec::new();
    for f in faces {
        verts.extend(f.iter().map(|v| v - 1));
        offsets.push(verts.len() as u32);
    }
    let m = MeshMatrix::from_faces(15, &offsets, &verts).unwrap();
    let (colptr, rowind, values) = m.to_csc();
    // the seed's sorted CSC: values = [1 2 3 4 | 1 2 3 4 5 6 | 4 1 2 3 | 1 3 2]
    assert_eq!(
        values,
        vec![1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 4, 1, 2, 3, 1, 3, 2]
    );
    let seed_rowind: Vec<u32> = [1, 2, 11, 13, 2, 3, 6, 9, 10, 11, 3, 4, 5, 6, 5, 6, 7]
        .iter()
        .map(|r| r - 1)
        .collect();
    assert_eq!(rowind, seed_rowind);
    assert_eq!(colptr, vec![0, 4, 10, 14, 17]);
    let back = MeshMatrix::from_csc(15, &colptr, &rowind, &values).unwrap();
    assert_eq!(back.face(2), &[3, 4, 5, 2]);
    assert_eq!(back, m);
    // values are the position in the face
    assert_eq!(m.value(10), 1);
    assert_eq!(m.value(13), 4);
    // bad values are rejected
    let mut bad = values.clone();
    bad[0] = 2;
    assert!(MeshMatrix::from_csc(15, &colptr, &rowind, &bad).is_err());
}

#[test]
fn construction_rejects_bad_faces() {
    assert!(MeshMatrix::from_faces(3, &[0, 2], &[0, 1]).is_err());
    assert!(MeshMatrix::from_faces(3, &[0, 3], &[0, 1, 3]).is_err());
    let e = MeshMatrix::from_faces(3, &[0, 3], &[0, 1, 1]).unwrap_err();
    assert!(e.to_string().contains("face 0"), "{e}");
}

// ------------------------------------------------------------------ SpMV (seed §5.1)

/// `M_Q` as an explicit CSR (vertex rows) for checking the mapped products.
fn explicit(m: &MeshMatrix, map: &ActionMap) -> Csr {
    let mut t = Vec::new();
    for f in 0..m.num_faces() {
        for (k, e) in m.face_range(f).enumerate() {
            t.push((m.rowind()[e], f as u32, map.value(e, k + 1, f)));
        }
    }
    Csr::from_triplets(m.num_vertices(), m.num_faces(), &t)
}

#[test]
fn mapped_spmv_equals_products_with_the_explicit_matrix() {
    for mesh in [mixed(), icosphere(2), grid(5, 4, false)] {
        let m = &mesh.matrix;
        let ev = noise(m.nnz(), 3);
        let fw = noise(m.num_faces(), 4);
        let maps = [
            ActionMap::binary(),
            ActionMap::stencil(&[-1.0, 1.0, 0.0, 0.5]),
            ActionMap::identity(m.max_face_size()),
            ActionMap::binary().with_entry_values(&ev),
            ActionMap::stencil(&[2.0, -1.0, 0.25])
                .with_face_weights(&fw)
                .with_scale(0.5),
        ];
        for map in &maps {
            let a = explicit(m, map);
            let at = a.transpose();
            for width in [1, 3] {
                let xv = noise(m.num_vertices() * width, 7);
                let xf = noise(m.num_faces() * width, 8);
                let y = spmv::mtv(m, map, &xv, width).unwrap();
                let y2 = spmv::mv(m, map, &xf, width).unwrap();
                let y3 = spmv::mv_serial(m, map, &xf, width).unwrap();
                assert_eq!(y2, y3, "parallel M v sums in the serial order");
                for w in 0..width {
                    let xs: Vec<f64> = (0..m.num_vertices()).map(|i| xv[i * width + w]).collect();
                    let r = at.mul_vec(&xs);
                    for f in 0..m.num_faces() {
                        assert!((r[f] - y[f * width + w]).abs() < 1e-13);
                    }
                    let xs: Vec<f64> = (0..m.num_faces()).map(|i| xf[i * width + w]).collect();
                    let r = a.mul_vec(&xs);
                    for v in 0..m.num_vertices() {
                        assert!((r[v] - y2[v * width + w]).abs() < 1e-13);
                    }
                }
            }
        }
    }
}

#[test]
fn barycentres_and_edge_vectors_by_maps() {
    let s = icosphere(1);
    let m = &s.matrix;
    let p = flat(&s.positions);
    let b = spmv::mtv(m, &ActionMap::binary().with_scale(1.0 / 3.0), &p, 3).unwrap();
    let e = spmv::mtv(m, &ActionMap::stencil(&[-1.0, 1.0, 0.0]), &p, 3).unwrap();
    for f in 0..m.num_faces() {
        let v = m.face(f);
        for k in 0..3 {
            let want = (0..3).map(|i| s.positions[v[i] as usize][k]).sum::<f64>() / 3.0;
            assert!((b[3 * f + k] - want).abs() < 1e-15);
            let want = s.positions[v[1] as usize][k] - s.positions[v[0] as usize][k];
            assert!((e[3 * f + k] - want).abs() < 1e-15);
        }
    }
    // wrong lengths are errors, not panics
    assert!(spmv::mtv(m, &ActionMap::binary(), &p[1..], 3).is_err());
    let short = vec![1.0; 3];
    assert!(spmv::mv(m, &ActionMap::binary().with_face_weights(&short), &p, 1).is_err());
}

// ------------------------------------------------------------------ SpGEMM (seed §5.2, §6)

/// Explicit `A B` of two CSR matrices (dense accumulator per row).
fn product(a: &Csr, b: &Csr) -> Csr {
    let mut t = Vec::new();
    for i in 0..a.nrows {
        let (ca, va) = a.row(i);
        let mut acc = std::collections::BTreeMap::new();
        for (&k, &x) in ca.iter().zip(va) {
            let (cb, vb) = b.row(k as usize);
            for (&j, &y) in cb.iter().zip(vb) {
                *acc.entry(j).or_insert(0.0) += x * y;
            }
        }
        for (j, v) in acc {
            t.push((i as u32, j, v));
        }
    }
    Csr::from_triplets(a.nrows, b.ncols, &t)
}

#[test]
fn generalized_adjacency_equals_the_explicit_product() {
    for mesh in [mixed(), icosphere(2), torus(7, 5, 1.0, 0.3, false)] {
        let mb = mesh.matrix.binary();
        let want = product(&mb, &mb.transpose());
        let got = generalized_adjacency(&mesh.matrix).unwrap();
        assert!(got.same_pattern(&want));
        assert_eq!(got.values, want.values, "integer counts exactly");
        // the diagonal counts the faces of each vertex
        let counts = mesh.matrix.vertex_face_counts();
        for (v, &c) in counts.iter().enumerate() {
            assert_eq!(got.get(v, v), Some(c as f64));
        }
    }
}

/// The oriented adjacency by hand: one count per face in which `j` follows `i`.
fn oriented_by_hand(m: &MeshMatrix) -> Csr {
    let mut t = Vec::new();
    for f in 0..m.num_faces() {
        let v = m.face(f);
        for k in 0..v.len() {
            t.push((v[k], v[(k + 1) % v.len()], 1.0));
        }
    }
    Csr::from_triplets(m.num_vertices(), m.num_vertices(), &t)
}

#[test]
fn oriented_adjacency_and_boundary_loops() {
    for mesh in [mixed(), grid(4, 3, true), icosphere(1)] {
        let m = &mesh.matrix;
        let a = oriented_adjacency(m).unwrap();
        assert_eq!(a, oriented_by_hand(m));
        // Q_n - Q_n^{n-1} is A - Aᵀ: antisymmetric, nonzero exactly on boundary edges
        let b = mapped_spgemm(m, &PairMap::boundary()).unwrap();
        let at = a.transpose();
        for i in 0..b.nrows {
            let (c, v) = b.row(i);
            for (&j, &x) in c.iter().zip(v) {
                let want =
                    a.get(i, j as usize).unwrap_or(0.0) - at.get(i, j as usize).unwrap_or(0.0);
                assert_eq!(x, want);
                assert_eq!(b.get(j as usize, i), Some(-x), "antisymmetric");
            }
        }
        let he = half_edges(m).unwrap();
        let nonzero = b.values.iter().filter(|&&x| x != 0.0).count();
        assert_eq!(nonzero, 2 * he.num_boundary_edges());
        // +1 entries follow the counter-clockwise boundary loops: every boundary vertex has
        // exactly one successor
        let mut succ = vec![0; m.num_vertices()];
        for i in 0..b.nrows {
            let (_, v) = b.row(i);
            succ[i] = v.iter().filter(|&&x| x == 1.0).count();
        }
        assert!(succ.iter().all(|&s| s <= 1));
        assert_eq!(succ.iter().sum::<usize>(), he.num_boundary_edges());
    }
}

#[test]
fn quad_diagonals_by_q4_squared() {
    let g = grid(3, 2, false);
    let d = mapped_spgemm(&g.matrix, &PairMap::quad_diagonals()).unwrap();
    let mut t = Vec::new();
    for f in 0..g.num_faces() {
        let v = g.matrix.face(f);
        for k in 0..4 {
            t.push((v[k], v[(k + 2) % 4], 1.0));
        }
    }
    assert_eq!(d, Csr::from_triplets(12, 12, &t));
    // a table map on triangles is refused
    assert!(mapped_spgemm(&icosphere(0).matrix, &PairMap::quad_diagonals()).is_err());
}

/// `D - (A ∨ Aᵀ)` from the explicit edge list.
fn graph_laplacian_by_triplets(m: &MeshMatrix) -> Csr {
    let mut edges = Vec::new();
    for f in 0..m.num_faces() {
        let v = m.face(f);
        for k in 0..v.len() {
            let (a, b) = (v[k], v[(k + 1) % v.len()]);
            edges.push((a.min(b), a.max(b)));
        }
    }
    edges.sort_unstable();
    edges.dedup();
    let mut t = Vec::new();
    for (a, b) in edges {
        t.push((a, b, -1.0));
        t.push((b, a, -1.0));
        t.push((a, a, 1.0));
        t.push((b, b, 1.0));
    }
    Csr::from_triplets(m.num_vertices(), m.num_vertices(), &t)
}

#[test]
fn uniform_laplacian_equals_triplet_assembly() {
    for mesh in [
        mixed(),
        icosphere(2),
        grid(4, 5, true),
        torus(6, 5, 1.0, 0.4, false),
    ] {
        let l = uniform_laplacian(&mesh.matrix).unwrap();
        let want = graph_laplacian_by_triplets(&mesh.matrix);
        assert!(l.same_pattern(&want));
        assert_eq!(l.values, want.values);
        assert!(l.row_sums().iter().all(|&s| s == 0.0));
        assert_eq!(l.asymmetry(), 0.0);
    }
}

/// The cotangent Laplacian by per-triangle element matrices (the constant strain triangle).
fn cotan_by_triplets(mesh: &PolygonMesh) -> Csr {
    let m = &mesh.matrix;
    let p = &mesh.positions;
    let mut t = Vec::new();
    for f in 0..m.num_faces() {
        let v = m.face(f);
        for k in 0..3 {
            let (o, i, j) = (v[k], v[(k + 1) % 3], v[(k + 2) % 3]);
            let a = [
                p[i as usize][0] - p[o as usize][0],
                p[i as usize][1] - p[o as usize][1],
                p[i as usize][2] - p[o as usize][2],
            ];
            let b = [
                p[j as usize][0] - p[o as usize][0],
                p[j as usize][1] - p[o as usize][1],
                p[j as usize][2] - p[o as usize][2],
            ];
            let d = a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
            let c = [
                a[1] * b[2] - a[2] * b[1],
                a[2] * b[0] - a[0] * b[2],
                a[0] * b[1] - a[1] * b[0],
            ];
            let w = 0.5 * d / (c[0] * c[0] + c[1] * c[1] + c[2] * c[2]).sqrt();
            t.push((i, j, -w));
            t.push((j, i, -w));
            t.push((i, i, w));
            t.push((j, j, w));
        }
    }
    Csr::from_triplets(m.num_vertices(), m.num_vertices(), &t)
}

#[test]
fn cotan_laplacian_equals_triplet_assembly_is_symmetric_with_zero_row_sums() {
    let mut s = icosphere(3);
    let n = noise(3 * s.num_vertices(), 11);
    for (v, p) in s.positions.iter_mut().enumerate() {
        for k in 0..3 {
            p[k] *= 1.0 + 0.05 * n[3 * v + k];
        }
    }
    for mesh in [s, grid(5, 4, true)] {
        let l = cotan_laplacian(&mesh.matrix, &mesh.positions).unwrap();
        let want = cotan_by_triplets(&mesh);
        assert!(l.same_pattern(&want));
        let scale = want.values.iter().fold(0.0f64, |a, &b| a.max(b.abs()));
        assert!(
            l.max_abs_diff(&want) <= 1e-13 * scale,
            "{}",
            l.max_abs_diff(&want)
        );
        assert!(l.asymmetry() <= 1e-14 * scale);
        for r in l.row_sums() {
            assert!(r.abs() <= 1e-13 * scale);
        }
    }
    // quads are refused with a clear error
    assert!(cotan_laplacian(&cube().matrix, &cube().positions).is_err());
}

#[test]
fn cotan_laplacian_reproduces_the_spectrum_of_a_regular_grid() {
    // a k x k interior grid of unit squares split into right triangles, in a tilted plane:
    // restricted to the interior vertices (Dirichlet) the cotangent Laplacian is the 5-point
    // stencil, eigenvalues 4 - 2 cos(p π/(k+1)) - 2 cos(q π/(k+1)) with eigenvectors
    // sin(p π i/(k+1)) sin(q π j/(k+1)), p, q = 1..k
    let k = 7;
    let mut g = grid(k + 1, k + 1, true);
    let (c, s) = (0.6f64, 0.8f64);
    for p in &mut g.positions {
        *p = [p[0], c * p[1], s * p[1]];
    }
    let l = cotan_laplacian(&g.matrix, &g.positions).unwrap();
    let id = |i: usize, j: usize| j * (k + 2) + i;
    let h = std::f64::consts::PI / (k + 1) as f64;
    let mut found = 0;
    for p in 1..=k {
        for q in 1..=k {
            let lambda = 4.0 - 2.0 * (p as f64 * h).cos() - 2.0 * (q as f64 * h).cos();
            let mut u = vec![0.0; g.num_vertices()];
            for j in 1..=k {
                for i in 1..=k {
                    u[id(i, j)] = (p as f64 * h * i as f64).sin() * (q as f64 * h * j as f64).sin();
                }
            }
            let lu = l.mul_vec(&u);
            for j in 1..=k {
                for i in 1..=k {
                    assert!((lu[id(i, j)] - lambda * u[id(i, j)]).abs() < 1e-12);
                }
            }
            found += 1;
        }
    }
    assert_eq!(found, k * k, "the whole spectrum of the interior block");
}

// ------------------------------------------------------------------ normals (seed §5.1, §9)

#[test]
fn area_weighted_normals_equal_the_explicit_loop() {
    let mesh = mixed();
    let n = vertex_normals(&mesh.matrix, &mesh.positions, NormalWeights::Area).unwrap();
    let fnrm = face_normals(&mesh.matrix, &mesh.positions).unwrap();
    let mut want = vec![[0.0; 3]; mesh.num_vertices()];
    for f in 0..mesh.num_faces() {
        for &v in mesh.matrix.face(f) {
            for k in 0..3 {
                want[v as usize][k] += fnrm[f][k];
            }
        }
    }
    for (a, w) in n.iter().zip(&want) {
        let l = (w[0] * w[0] + w[1] * w[1] + w[2] * w[2]).sqrt();
        for k in 0..3 {
            assert!((a[k] - w[k] / l).abs() < 1e-14);
        }
    }
    // the cube's corners: by symmetry (±1, ±1, ±1)/√3
    let c = cube();
    let n = vertex_normals(&c.matrix, &c.positions, NormalWeights::Angle).unwrap();
    for (p, q) in c.positions.iter().zip(&n) {
        for k in 0..3 {
            assert!((q[k] - p[k] / 3f64.sqrt()).abs() < 1e-15);
        }
    }
}

#[test]
fn max_weights_are_exact_for_a_mesh_inscribed_in_a_sphere() {
    // N. Max (1999): the weights give the exact normal for vertices on a sphere
    let mut s = icosphere(3);
    let n = noise(3 * s.num_vertices(), 5);
    for (v, p) in s.positions.iter_mut().enumerate() {
        // move vertices along the sphere (not radially) to make the triangles irregular
        let q = [
            p[0] + 0.05 * n[3 * v],
            p[1] + 0.05 * n[3 * v + 1],
            p[2] + 0.05 * n[3 * v + 2],
        ];
        let l = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2]).sqrt();
        *p = [q[0] / l, q[1] / l, q[2] / l];
    }
    let nm = vertex_normals(&s.matrix, &s.positions, NormalWeights::Max).unwrap();
    let na = vertex_normals(&s.matrix, &s.positions, NormalWeights::Area).unwrap();
    let (mut emax, mut earea) = (0.0f64, 0.0f64);
    for ((p, a), b) in s.positions.iter().zip(&nm).zip(&na) {
        for k in 0..3 {
            emax = emax.max((a[k] - p[k]).abs());
            earea = earea.max((b[k] - p[k]).abs());
        }
    }
    assert!(emax < 1e-12, "Max weights on a sphere: {emax}");
    assert!(earea > 1e-4, "area weights are not exact there ({earea})");
}

// ------------------------------------------------------------------ slicing (seed §9)

#[test]
fn slicing_a_sphere_gives_a_closed_polyline_converging_to_the_circumference() {
    let h = 0.1234;
    let plane = Plane {
        point: [0.0, 0.0, h],
        normal: [0.1, 0.05, 1.0],
    };
    let nn = (0.01f64 + 0.0025 + 1.0).sqrt();
    // distance from the centre to the plane, radius of the cut circle
    let dist = h / nn;
    let exact = 2.0 * std::f64::consts::PI * (1.0 - dist * dist).sqrt();
    let mut last_err = f64::INFINITY;
    for level in 2..=5 {
        let s = icosphere(level);
        let r = slice(&s, &plane).unwrap();
        assert_eq!(r.polylines.len(), 1, "one cut loop");
        let pl = &r.polylines[0];
        assert!(pl.closed, "closed on a closed mesh");
        assert_eq!(pl.vertices.len(), r.cut_edges);
        let len = pl.length(&r.mesh.positions);
        let err = (exact - len).abs();
        assert!(
            err < 0.5 * last_err,
            "level {level}: error {err} after {last_err}"
        );
        last_err = err;
        // counts: each cut triangle becomes a triangle and a quad
        let cut = r.segments.len();
        assert_eq!(r.mesh.num_faces(), s.num_faces() + cut);
        assert_eq!(r.mesh.num_vertices(), s.num_vertices() + r.cut_edges);
        assert_eq!(r.mesh.euler_characteristic(), 2);
        // faces lie on their side of the plane
        let d = |p: [f64; 3]| p[0] * 0.1 + p[1] * 0.05 + (p[2] - h);
        for f in 0..r.mesh.num_faces() {
            for &v in r.mesh.matrix.face(f) {
                let x = d(r.mesh.positions[v as usize]);
                assert!(x * r.face_side[f] as f64 >= -1e-12);
            }
        }
        // the positive side is a cap (a disk)
        let cap = r.side(1).unwrap();
        assert_eq!(cap.euler_characteristic(), 1);
    }
    assert!(last_err < 1e-3);
}

#[test]
fn slicing_an_open_grid_gives_an_open_polyline() {
    let g = grid(6, 4, true);
    let r = slice(
        &g,
        &Plane {
            point: [2.5, 0.0, 0.0],
            normal: [1.0, 0.3, 0.0],
        },
    )
    .unwrap();
    assert_eq!(r.polylines.len(), 1);
    assert!(!r.polylines[0].closed);
    assert!(slice(
        &cube(),
        &Plane {
            point: [0.0; 3],
            normal: [0.0, 0.0, 1.0]
        }
    )
    .is_err());
}

// ------------------------------------------------------------------ Catmull-Clark (seed §9)

#[test]
fn catmull_clark_counts_on_closed_open_and_mixed_meshes() {
    for mesh in [
        cube(),
        grid(3, 2, false),
        grid(3, 3, true),
        mixed(),
        icosphere(1),
    ] {
        let he = half_edges(&mesh.matrix).unwrap();
        let want = step_counts(&mesh, &he);
        let (v, e, f, nnz) = (
            mesh.num_vertices(),
            he.num_edges(),
            mesh.num_faces(),
            mesh.matrix.nnz(),
        );
        let s = catmull_clark(&mesh).unwrap();
        assert_eq!(s.num_vertices(), v + e + f);
        assert_eq!(want.vertices, v + e + f);
        assert_eq!(s.num_faces(), nnz, "one quad per corner: Σ valences");
        assert_eq!(s.matrix.uniform_size(), Some(4));
        assert_eq!(half_edges(&s.matrix).unwrap().num_edges(), want.edges);
        assert_eq!(s.euler_characteristic(), mesh.euler_characteristic());
    }
}

#[test]
fn catmull_clark_of_a_cube_approaches_its_known_limit() {
    // the first step moves the corners to (5/9, 5/9, 5/9) (vertex rule with n = 3)
    let s1 = catmull_clark(&cube()).unwrap();
    for k in 0..3 {
        assert!((s1.positions[7][k] - 5.0 / 9.0).abs() < 1e-15);
    }
    // limit positions (valence-n limit rule applied to level 1): corners at (1/2, 1/2, 1/2),
    // face centres at distance 68/81
    let s = catmull_clark_levels(&cube(), 7).unwrap();
    let corner = s.positions[7];
    for k in 0..3 {
        assert!((corner[k] - 0.5).abs() < 2e-3, "corner {corner:?}");
    }
    let nv0 = 8 + 12; // face points of level 1 are vertices 20..26
    let face_centre = s.positions[nv0 + 1]; // the +z face (second face of the cube)
    assert!(
        (face_centre[2] - 68.0 / 81.0).abs() < 2e-3,
        "{face_centre:?}"
    );
    assert!(face_centre[0].abs() < 1e-12 && face_centre[1].abs() < 1e-12);
    // the limit surface is a rounded cube, not a sphere: radii between 0.84 and 0.87
    for p in &s.positions {
        let r = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
        assert!((0.83..0.88).contains(&r), "{r}");
    }
}

#[test]
fn catmull_clark_boundary_rules_keep_a_plane_and_its_straight_border() {
    // an irregular open planar quad mesh: the result stays in the plane, the boundary stays on
    // the border lines, and a regular grid's interior vertices keep their places
    let g = grid(4, 3, false);
    let s = catmull_clark(&g).unwrap();
    for p in &s.positions {
        assert_eq!(p[2], 0.0);
        assert!(p[0] >= 0.0 && p[0] <= 4.0 && p[1] >= 0.0 && p[1] <= 3.0);
    }
    // boundary vertex rule: (3/4) S + (1/8)(b1 + b2) keeps straight borders; the corner (0, 0)
    // has boundary neighbours (1, 0) and (0, 1): it moves to (1/8, 1/8)
    let c0 = s.positions[0];
    assert!((c0[0] - 0.125).abs() < 1e-15 && (c0[1] - 0.125).abs() < 1e-15);
    // a border vertex (2, 0) stays at (2, 0); an interior vertex (1, 1) stays at (1, 1)
    assert_eq!(s.positions[2], [2.0, 0.0, 0.0]);
    assert_eq!(s.positions[6], [1.0, 1.0, 0.0]);
    // edge points on the border are midpoints
    let he = half_edges(&g.matrix).unwrap();
    for (e, &c) in he.edge_corner.iter().enumerate() {
        if he.twin[c as usize] == u32::MAX {
            let [a, b] = he.edge_vertices(&g.matrix, e);
            let (pa, pb) = (g.positions[a as usize], g.positions[b as usize]);
            let q = s.positions[g.num_vertices() + e];
            for k in 0..3 {
                assert!((q[k] - 0.5 * (pa[k] + pb[k])).abs() < 1e-15);
            }
        }
    }
    // non-manifold input is refused
    let p = vec![[0.0; 3]; 5];
    let bad = PolygonMesh::new(p, &[0, 3, 6, 9], &[0, 1, 2, 1, 0, 3, 0, 1, 4]).unwrap();
    assert!(catmull_clark(&bad).is_err());
}

// ------------------------------------------------------------------ collapses (seed §8)

#[test]
fn batched_collapses_keep_the_euler_characteristic() {
    for mesh in [icosphere(3), torus(12, 9, 1.0, 0.35, true)] {
        let chi = mesh.euler_characteristic();
        let he = half_edges(&mesh.matrix).unwrap();
        // a greedy batch of independent edges (no shared faces around their vertices)
        let m = &mesh.matrix;
        let t = m.transpose();
        let mut taken = vec![false; m.num_faces()];
        let mut batch = Vec::new();
        for e in 0..he.num_edges() {
            let [a, b] = he.edge_vertices(m, e);
            let star: Vec<usize> = [a, b]
                .iter()
                .flat_map(|&v| t.row(v as usize).iter().map(|&c| m.corner_face(c as usize)))
                .collect();
            if star.iter().any(|&f| taken[f]) {
                continue;
            }
            // neighbours of the star too, so that link conditions stay independent
            for &f in &star {
                taken[f] = true;
            }
            batch.push([a, b]);
            if batch.len() == 20 {
                break;
            }
        }
        let out = collapse_edges(&mesh, &batch).unwrap();
        assert_eq!(out.num_vertices(), mesh.num_vertices() - batch.len());
        assert_eq!(out.num_faces(), mesh.num_faces() - 2 * batch.len());
        assert_eq!(out.euler_characteristic(), chi);
        // face collapses and vertex removals
        let fc = collapse_faces(&mesh, &[[0, mesh.matrix.face(0)[0]]]).unwrap();
        assert_eq!(fc.euler_characteristic(), chi);
        assert_eq!(fc.num_vertices(), mesh.num_vertices() - 2);
        let v0 = mesh.matrix.face(0)[0];
        let far = (0..mesh.num_vertices() as u32)
            .find(|&v| {
                let nb = t.row(v as usize).len();
                nb >= 3
                    && t.row(v as usize).iter().all(|&c| {
                        !m.face(m.corner_face(c as usize)).contains(&v0)
                            && m.face(m.corner_face(c as usize)).iter().all(|&w| {
                                t.row(w as usize)
                                    .iter()
                                    .all(|&d| !m.face(m.corner_face(d as usize)).contains(&v0))
                            })
                    })
            })
            .unwrap();
        let vr = remove_vertices(&mesh, &[v0, far]).unwrap();
        assert_eq!(vr.euler_characteristic(), chi);
        assert_eq!(vr.num_vertices(), mesh.num_vertices() - 2);
    }
    // on a quad mesh too: an edge collapse turns its two quads into triangles
    let g = grid(4, 4, false);
    let out = collapse_edges(&g, &[[6, 7]]).unwrap();
    assert_eq!(out.euler_characteristic(), 1);
}

#[test]
fn invalid_collapse_batches_are_rejected_naming_the_edge() {
    // a torus of 3 segments around: the ring vertices (0, j), (1, j), (2, j) are pairwise
    // neighbours, but (0, j), (1, j), (2, j) is not a face: collapsing (0, 0)-(1, 0) would
    // make the edge to (2, 0) non-manifold
    let t = torus(3, 6, 1.0, 0.3, true);
    let e = collapse_edges(&t, &[[0, 1]]).unwrap_err().to_string();
    assert!(
        e.contains("edge 0 (0, 1)") && e.contains("neighbour 2"),
        "{e}"
    );
    // two edges whose neighbourhoods overlap are not independent
    let s = icosphere(2);
    let f = s.matrix.face(0);
    let e = collapse_edges(&s, &[[f[0], f[1]], [f[1], f[2]]])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not independent"), "{e}");
    // not an edge
    let e = collapse_edges(&s, &[[0, 100]]).unwrap_err().to_string();
    assert!(e.contains("edge 0 (0, 100) is not an edge"), "{e}");
    // an interior edge between two boundary vertices would pinch the surface
    let g = grid(2, 1, true);
    // vertices: row 0: 0 1 2, row 1: 3 4 5; the diagonal (0, 4) is interior, both ends on the border
    let e = collapse_edges(&g, &[[0, 4]]).unwrap_err().to_string();
    assert!(e.contains("pinch"), "{e}");
}

// ------------------------------------------------------------------ RCM (seed §9)

#[test]
fn rcm_reduces_the_bandwidth_of_a_shuffled_grid() {
    let g = grid(20, 15, true);
    // shuffle the vertices
    let n = g.num_vertices();
    let r = noise(n, 9);
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by(|&a, &b| r[a as usize].total_cmp(&r[b as usize]));
    let mut new_of_old = vec![0u32; n];
    for (k, &o) in order.iter().enumerate() {
        new_of_old[o as usize] = k as u32;
    }
    let shuffled = g.renumber_vertices(&new_of_old).unwrap();
    let before = adjacency_bandwidth(&shuffled).unwrap();
    let (re, perm) = reorder_rcm(&shuffled).unwrap();
    let after = adjacency_bandwidth(&re).unwrap();
    assert!(after <= 45, "bandwidth {before} -> {after}");
    assert!(before > 5 * after);
    let mut seen = perm.clone();
    seen.sort_unstable();
    assert_eq!(seen, (0..n as u32).collect::<Vec<_>>());
    assert_eq!(re.euler_characteristic(), 1);
    // positions moved along
    for (old, &new) in perm.iter().enumerate() {
        assert_eq!(re.positions[new as usize], shuffled.positions[old]);
    }
}

// ------------------------------------------------------------------ benchmark inputs

#[test]
fn tet_boundary_is_a_closed_outward_surface_and_refine_to_hits_the_count() {
    use tessera_mesh::mesh_matrix::bench::{refine_to, tet_boundary};
    let tets = tessera_mesh::simplex::SimplexMesh::from_poly(&tessera_mesh::generate::box_mesh(
        tessera_mesh::generate::BoxKind::Tet,
        [3, 4, 2],
        [1.5, 2.0, 1.0],
    ))
    .unwrap();
    let s = tet_boundary(&tets).unwrap();
    half_edges(&s.matrix).unwrap();
    assert_eq!(s.euler_characteristic(), 2);
    // the enclosed volume by the divergence theorem: positive (outward) and the box's
    let fnrm = face_normals(&s.matrix, &s.positions).unwrap();
    let vol: f64 = (0..s.num_faces())
        .map(|f| {
            let p = s.positions[s.matrix.face(f)[0] as usize];
            (p[0] * fnrm[f][0] + p[1] * fnrm[f][1] + p[2] * fnrm[f][2]) / 6.0
        })
        .sum();
    assert!((vol - 3.0).abs() < 1e-12, "{vol}");
    for target in [s.num_faces(), 1000, 4321] {
        let r = refine_to(&s, target).unwrap();
        assert!(
            r.num_faces() >= target && r.num_faces() <= target + 1,
            "{target}: {}",
            r.num_faces()
        );
        half_edges(&r.matrix).unwrap();
        assert_eq!(r.euler_characteristic(), 2);
    }
}

#[test]
fn morton_renumber_keeps_the_surface_and_orders_it_along_the_curve() {
    use tessera_mesh::mesh_matrix::bench::{morton_renumber, refine_to, tet_boundary};
    let tets = tessera_mesh::simplex::SimplexMesh::from_poly(&tessera_mesh::generate::box_mesh(
        tessera_mesh::generate::BoxKind::Tet,
        [3, 4, 2],
        [1.5, 2.0, 1.0],
    ))
    .unwrap();
    let s = refine_to(&tet_boundary(&tets).unwrap(), 2000).unwrap();
    let r = morton_renumber(&s).unwrap();
    assert_eq!(r.num_vertices(), s.num_vertices());
    assert_eq!(r.num_faces(), s.num_faces());
    assert_eq!(r.euler_characteristic(), s.euler_characteristic());
    half_edges(&r.matrix).unwrap();
    // the same triangles (as sets of positions, with their orientation), in another order
    let key = |m: &PolygonMesh, f: usize| {
        // the corner positions as bits, rotated to start at the smallest (orientation kept)
        let t = m.matrix.face(f);
        let c: Vec<[u64; 3]> = t
            .iter()
            .map(|&v| m.positions[v as usize].map(f64::to_bits))
            .collect();
        let i = (0..3).min_by_key(|&j| c[j]).unwrap();
        [c[i], c[(i + 1) % 3], c[(i + 2) % 3]]
    };
    let mut a: Vec<_> = (0..s.num_faces()).map(|f| key(&s, f)).collect();
    let mut b: Vec<_> = (0..r.num_faces()).map(|f| key(&r, f)).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    // faces sorted by their smallest vertex
    let mins: Vec<u32> = (0..r.num_faces())
        .map(|f| *r.matrix.face(f).iter().min().unwrap())
        .collect();
    assert!(mins.windows(2).all(|w| w[0] <= w[1]));
}
