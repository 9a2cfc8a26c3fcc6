//! Mesh operations on hand-checkable inputs: the two-tetrahedron mesh of dissertation
//! Fig. 3.5 (operators, TCSR arrays, boundary), boxes (boundary counts computed by hand),
//! Laplacian smoothing (fixed boundary, convergence) and `validate()` on corrupted meshes.

use tessera_core::Par;
use tessera_mesh::boundary::extract_boundary;
use tessera_mesh::generate::{box_mesh, bracket, bracket_geometry, non_manifold_example, BoxKind};
use tessera_mesh::smooth::laplacian_smooth;
use tessera_mesh::validate::{Entity, Violation};
use tessera_mesh::{CellType, MeshError, Point, PolyMesh, PolyMeshBuilder};
use tessera_sparse::tcsr::encode;
use tessera_sparse::Tcsr;

/// Dissertation Fig. 3.5: two tetrahedra c0 = (v0 v1 v2 v3) and c1 = (v0 v1 v2 v4) sharing
/// face f0 = (v0 v1 v2); v3 lies below and v4 above the plane of f0.
fn fig_3_5() -> PolyMesh {
    let pos = vec![
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, -1.0],
        [0.3, 0.3, 1.0],
    ];
    let mut b = PolyMeshBuilder::new(pos);
    b.add_typed_cell(CellType::Tetrahedron, &[0, 1, 2, 3])
        .unwrap();
    b.add_typed_cell(CellType::Tetrahedron, &[0, 1, 2, 4])
        .unwrap();
    b.build(Par::Seq).unwrap()
}

fn n(c: u32) -> i32 {
    encode(c, true)
}

#[test]
fn fig_3_5_operators_are_those_of_the_figure() {
    let m = fig_3_5();
    // ∂1 (edges x vertices), the figure's d1
    let d1: Vec<Vec<i8>> = vec![
        vec![-1, 1, 0, 0, 0],
        vec![-1, 0, 1, 0, 0],
        vec![-1, 0, 0, 1, 0],
        vec![-1, 0, 0, 0, 1],
        vec![0, -1, 1, 0, 0],
        vec![0, -1, 0, 1, 0],
        vec![0, -1, 0, 0, 1],
        vec![0, 0, -1, 1, 0],
        vec![0, 0, -1, 0, 1],
    ];
    let mut got_d1 = vec![vec![0i8; 5]; 9];
    for (e, &[a, b]) in m.edge_vertices().iter().enumerate() {
        got_d1[e][a as usize] -= 1;
        got_d1[e][b as usize] += 1;
    }
    assert_eq!(got_d1, d1);
    let d2: Vec<Vec<i8>> = vec![
        vec![1, -1, 0, 0, 1, 0, 0, 0, 0],
        vec![1, 0, -1, 0, 0, 1, 0, 0, 0],
        vec![1, 0, 0, -1, 0, 0, 1, 0, 0],
        vec![0, 1, -1, 0, 0, 0, 0, 1, 0],
        vec![0, 1, 0, -1, 0, 0, 0, 0, 1],
        vec![0, 0, 0, 0, 1, -1, 0, 1, 0],
        vec![0, 0, 0, 0, 1, 0, -1, 0, 1],
    ];
    assert_eq!(m.face_edges().to_dense(), d2);
    let d3: Vec<Vec<i8>> = vec![vec![1, -1, 0, 1, 0, -1, 0], vec![-1, 0, 1, 0, -1, 0, 1]];
    assert_eq!(m.cell_faces().to_dense(), d3);
    // ∂1 ∂2 = 0 and ∂2 ∂3 = 0 (dissertation §3.3)
    let mul = |a: &[Vec<i8>], b: &[Vec<i8>]| -> Vec<Vec<i32>> {
        a.iter()
            .map(|r| {
                (0..b[0].len())
                    .map(|j| {
                        r.iter()
                            .zip(b)
                            .map(|(&x, row)| x as i32 * row[j] as i32)
                            .sum()
                    })
                    .collect()
            })
            .collect()
    };
    assert!(mul(&d2, &d1).iter().flatten().all(|&x| x == 0));
    assert!(mul(&d3, &d2).iter().flatten().all(|&x| x == 0));
    m.validate().unwrap();
}

/// The in-memory TCSR arrays (dissertation Fig. 3.6) of the Fig. 3.5 mesh.
///
/// Row order conventions (see `builder.rs`): a face's loop starts at its smallest vertex and
/// runs toward the smaller neighbour (`a -> b -> c` for a triangle `a < b < c`), and its ∂2
/// row lists the edges **in loop order**: `(a,b)+, (b,c)+, (a,c)-`. A cell's ∂3 row lists its
/// faces in the input order of the cell's local faces (tetrahedron: `(0 2 1), (0 1 3),
/// (1 2 3), (0 3 2)`). The entries of each row are those of Fig. 3.6; only their order
/// within a row follows these conventions rather than column order.
#[test]
fn fig_3_5_tcsr_arrays() {
    let m = fig_3_5();
    let fe = m.face_edges();
    assert_eq!(fe.offsets(), &[0, 3, 6, 9, 12, 15, 18, 21]);
    #[rustfmt::skip]
    let want_fe = vec![
        0, 4, n(1),   // f0 = v0 v1 v2
        0, 5, n(2),   // f1 = v0 v1 v3
        0, 6, n(3),   // f2 = v0 v1 v4
        1, 7, n(2),   // f3 = v0 v2 v3
        1, 8, n(3),   // f4 = v0 v2 v4
        4, 7, n(5),   // f5 = v1 v2 v3
        4, 8, n(6),   // f6 = v1 v2 v4
    ];
    assert_eq!(fe.columns(), &want_fe[..]);
    assert_eq!(fe.columns()[..3], [0, 4, -2]);
    let cf = m.cell_faces();
    assert_eq!(cf.offsets(), &[0, 4, 8]);
    assert_eq!(cf.columns(), &[0, n(1), n(5), 3, n(0), 2, 6, n(4)]);
    assert_eq!(cf.columns(), &[0, -2, -6, 3, -1, 2, 6, -5]);
    // Fig. 3.6 lists rows by column: the same entries
    let mut sorted = cf.clone();
    sorted.sort_rows(Par::Seq);
    assert_eq!(sorted.columns(), &[0, -2, 3, -6, -1, 2, -5, 6]);
    // face vertex loops follow the ∂2 rows
    let fv = m.face_vertices();
    assert_eq!(fv.row(0), &[0, 1, 2]);
    assert_eq!(fv.row(5), &[1, 2, 3]);
    // topology bytes (items 1-5 of §3.4): ∂3 (3 + 8) + ∂2 (8 + 21) int32 + ∂1 9 pairs
    assert_eq!(m.topology_bytes(), (3 + 8 + 8 + 21) * 4 + 9 * 8);
}

fn signed_volume_of_surface(s: &tessera_mesh::boundary::SurfaceMesh) -> f64 {
    let mut v = 0.0;
    for i in 0..s.num_polygons() {
        let p = s.polygon(i);
        let a = s.positions[p[0] as usize];
        for k in 1..p.len() - 1 {
            let b = s.positions[p[k] as usize];
            let c = s.positions[p[k + 1] as usize];
            v += a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
                + a[2] * (b[0] * c[1] - b[1] * c[0]);
        }
    }
    v / 6.0
}

#[test]
fn fig_3_5_boundary() {
    let m = fig_3_5();
    let b = extract_boundary(&m);
    // every face but the shared f0; sign = the orientation of its only cell (outward)
    assert_eq!(b.faces, vec![n(1), 2, 3, n(4), n(5), 6]);
    assert_eq!(b.edges, (0..9).collect::<Vec<u32>>());
    assert_eq!(b.vertices, vec![0, 1, 2, 3, 4]);
    assert!(b.manifold);
    let s = b.surface(&m);
    assert_eq!(s.num_polygons(), 6);
    assert_eq!(s.vertex_map, vec![0, 1, 2, 3, 4]);
    assert!(s.surface_boundary().is_empty());
    assert_eq!(s.euler_characteristic(), 2);
    // outward: the divergence theorem over the surface gives the volume, 1/6 + 1/6
    assert!((signed_volume_of_surface(&s) - 1.0 / 3.0).abs() < 1e-12);
    // f1 = (v0 v1 v3) is used by c0 with -1: its polygon is the reversed loop v0 v3 v1
    assert_eq!(s.polygon(0), &[0, 3, 1]);
}

#[test]
fn hex_box_boundary_counts() {
    let m = box_mesh(BoxKind::Hex, [2, 3, 4], [2.0, 3.0, 4.0]);
    // V = 3*4*5, E = 2*4*5 + 3*3*5 + 3*4*4, F = 3*3*4 + 2*4*4 + 2*3*5, C = 24
    assert_eq!(
        (
            m.num_vertices(),
            m.num_edges(),
            m.num_faces(),
            m.num_cells()
        ),
        (60, 133, 98, 24)
    );
    assert_eq!(m.euler_characteristic(), 1);
    let b = extract_boundary(&m);
    // faces 2 (2*3 + 3*4 + 2*4) = 52; interior vertices 1*2*3 = 6; quad surface: E = 2F
    assert_eq!(
        (b.faces.len(), b.vertices.len(), b.edges.len()),
        (52, 54, 104)
    );
    assert!(b.manifold);
    let s = b.surface(&m);
    assert!(s.surface_boundary().is_empty());
    assert_eq!(s.euler_characteristic(), 2);
    assert!((signed_volume_of_surface(&s) - 24.0).abs() < 1e-9);
}

#[test]
fn tet_box_boundary_counts() {
    let m = box_mesh(BoxKind::Tet, [2, 2, 2], [1.0, 1.0, 1.0]);
    // 27 grid vertices; edges: 54 grid + 36 face diagonals + 8 body diagonals;
    // faces: 72 on grid squares + 6 inner per voxel; 48 tets
    assert_eq!(
        (
            m.num_vertices(),
            m.num_edges(),
            m.num_faces(),
            m.num_cells()
        ),
        (27, 98, 120, 48)
    );
    assert_eq!(m.euler_characteristic(), 1);
    let b = extract_boundary(&m);
    // 24 boundary squares x 2 triangles; 26 vertices; triangle surface: E = 3F / 2
    assert_eq!(
        (b.faces.len(), b.vertices.len(), b.edges.len()),
        (48, 26, 72)
    );
    let s = b.surface(&m);
    assert!(s.surface_boundary().is_empty());
    assert!((signed_volume_of_surface(&s) - 1.0).abs() < 1e-12);
}

#[test]
fn mixed_box_has_all_cell_types_and_is_valid() {
    let m = box_mesh(BoxKind::Mixed, [2, 2, 2], [1.0, 1.0, 1.0]);
    m.validate().unwrap();
    // voxels (i,j) = (0,0): 6 tets; (1,0): 2 prisms; (0,1): 2 prisms; (1,1): hex at k=0, 6 pyramids at k=1
    let mut counts = std::collections::BTreeMap::new();
    for c in 0..m.num_cells() {
        let sizes: Vec<usize> = m
            .cell_faces()
            .row(c)
            .iter()
            .map(|&f| {
                m.face_edges()
                    .row_len(tessera_sparse::tcsr::col(f) as usize)
            })
            .collect();
        *counts.entry(CellType::classify(&sizes)).or_insert(0) += 1;
    }
    let want: std::collections::BTreeMap<CellType, i32> = [
        (CellType::Tetrahedron, 12),
        (CellType::Hexahedron, 1),
        (CellType::Prism, 8),
        (CellType::Pyramid, 6),
    ]
    .into();
    assert_eq!(counts, want);
    // 27 grid vertices + 1 pyramid apex
    assert_eq!(m.num_vertices(), 28);
    assert_eq!(m.euler_characteristic(), 1);
    let b = extract_boundary(&m);
    assert!(b.manifold);
    let s = b.surface(&m);
    assert!(s.surface_boundary().is_empty());
    assert_eq!(s.euler_characteristic(), 2);
    assert!((signed_volume_of_surface(&s) - 1.0).abs() < 1e-12);
}

#[test]
fn non_manifold_boundary() {
    let m = non_manifold_example();
    m.validate().unwrap();
    assert_eq!(
        (
            m.num_vertices(),
            m.num_edges(),
            m.num_faces(),
            m.num_cells()
        ),
        (16, 26, 13, 2)
    );
    assert_eq!(m.euler_characteristic(), 1);
    let b = extract_boundary(&m);
    assert!(!b.manifold);
    // 12 hex faces once, the free face on both sides
    assert_eq!(b.faces.len(), 14);
    let free: Vec<i32> = b
        .faces
        .iter()
        .copied()
        .filter(|&f| {
            m.face_cells()
                .row_len(tessera_sparse::tcsr::col(f) as usize)
                == 0
        })
        .collect();
    assert_eq!(free.len(), 2);
    assert_eq!(free[0], !free[1]);
    assert_eq!(b.vertices.len(), 16);
    assert_eq!(b.edges.len(), 26);
    // the free face's two sides cancel; the hex surfaces are closed
    let s = b.surface(&m);
    assert!(s.surface_boundary().is_empty());
}

#[test]
fn overlapping_cells_are_non_manifold_boundary() {
    // the same tetrahedron twice: each face used twice in the same orientation
    let pos = vec![
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
    ];
    let mut b = PolyMeshBuilder::new(pos);
    b.add_typed_cell(CellType::Tetrahedron, &[0, 1, 2, 3])
        .unwrap();
    b.add_typed_cell(CellType::Tetrahedron, &[0, 1, 2, 3])
        .unwrap();
    let m = b.build(Par::Seq).unwrap();
    m.validate().unwrap();
    let bd = extract_boundary(&m);
    assert!(!bd.manifold);
    assert_eq!(bd.faces.len(), 4);
    let s = bd.surface(&m);
    assert!((signed_volume_of_surface(&s) - 1.0 / 6.0).abs() < 1e-12);
}

/// A deterministic pseudo-random perturbation in [-a, a]^3.
fn jitter(v: usize, a: f64) -> Point {
    let mut x = (v as u64)
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    std::array::from_fn(|_| {
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51afd7ed558ccd);
        x ^= x >> 29;
        ((x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * a
    })
}

fn max_dist(a: &[Point], b: &[Point]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(p, q)| (0..3).map(|d| (p[d] - q[d]).abs()).fold(0.0, f64::max))
        .fold(0.0, f64::max)
}

#[test]
fn smoothing_keeps_boundary_and_converges() {
    for kind in [BoxKind::Hex, BoxKind::Tet] {
        let mut m = box_mesh(kind, [4, 4, 4], [1.0, 1.0, 1.0]);
        let grid = m.positions().to_vec();
        let inner = extract_boundary(&m).vertex_mask(m.num_vertices());
        // the regular grid is a fixed point (every neighbour offset d comes with -d)
        let mut m2 = m.clone();
        laplacian_smooth(&mut m2, 3);
        assert!(max_dist(m2.positions(), &grid) < 1e-14, "{kind:?}");
        for (v, p) in m.positions_mut().iter_mut().enumerate() {
            if !inner[v] {
                let j = jitter(v, 0.08);
                for d in 0..3 {
                    p[d] += j[d];
                }
            }
        }
        let start = max_dist(m.positions(), &grid);
        assert!(start > 0.01);
        let mut prev = start;
        for _ in 0..6 {
            laplacian_smooth(&mut m, 10);
            // boundary vertices are bit-identical
            for v in 0..m.num_vertices() {
                if inner[v] {
                    assert_eq!(m.positions()[v], grid[v]);
                }
            }
            let d = max_dist(m.positions(), &grid);
            assert!(
                d < prev,
                "{kind:?}: smoothing must approach the grid ({d} >= {prev})"
            );
            prev = d;
        }
        // Jacobi on this grid contracts by at least cos(pi/4) per step: 60 steps < 1e-8
        assert!(prev < 1e-8, "{kind:?}: not converged: {prev}");
    }
}

#[test]
fn smoothing_seq_equals_rayon() {
    let mut a = box_mesh(BoxKind::Mixed, [14, 12, 10], [1.0, 1.0, 1.0]);
    for (v, p) in a.positions_mut().iter_mut().enumerate() {
        let j = jitter(v, 0.01);
        for d in 0..3 {
            p[d] += j[d];
        }
    }
    let mut b = a.clone();
    a.set_par(Par::Seq);
    b.set_par(Par::Rayon);
    laplacian_smooth(&mut a, 5);
    laplacian_smooth(&mut b, 5);
    assert_eq!(a.positions(), b.positions());
}

// ---- validate() on corrupted meshes -------------------------------------------------

fn expect_invalid(m: &PolyMesh, entity: Entity, index: usize, check: impl Fn(&Violation) -> bool) {
    for par in [Par::Seq, Par::Rayon] {
        match m.validate_with(par) {
            Err(MeshError::Invalid {
                entity: e,
                index: i,
                violation,
            }) => {
                assert_eq!((e, i), (entity, index), "{violation}");
                assert!(check(&violation), "unexpected violation {violation:?}");
                let msg = MeshError::Invalid {
                    entity: e,
                    index: i,
                    violation,
                }
                .to_string();
                assert!(msg.contains(&format!("{entity} {index}")), "{msg}");
            }
            other => panic!("expected a violation at {entity} {index}, got {other:?}"),
        }
    }
}

/// Replace ∂2 (`face_edges = true`) or ∂3 by arrays edited with `edit`.
fn edit_operator(
    m: &mut PolyMesh,
    face_edges: bool,
    edit: impl FnOnce(&mut Vec<u32>, &mut Vec<i32>, &mut usize),
) {
    let (_, fe, cf) = m.operators_mut();
    let t: &mut Tcsr = if face_edges { fe } else { cf };
    let (mut ncols, mut offs, mut cols) = std::mem::take(t).into_raw();
    edit(&mut offs, &mut cols, &mut ncols);
    *t = Tcsr::from_raw_unchecked(ncols, offs, cols);
}

#[test]
fn validate_catches_index_ranges() {
    let mut m = fig_3_5();
    m.operators_mut().0[3] = [0, 99];
    expect_invalid(&m, Entity::Edge, 3, |v| {
        matches!(
            v,
            Violation::IndexOutOfRange {
                what: "vertex",
                index: 99,
                ..
            }
        )
    });

    let mut m = fig_3_5();
    edit_operator(&mut m, true, |_, c, _| c[7] = 42);
    expect_invalid(&m, Entity::Face, 2, |v| {
        matches!(
            v,
            Violation::IndexOutOfRange {
                what: "edge",
                index: 42,
                ..
            }
        )
    });

    let mut m = fig_3_5();
    edit_operator(&mut m, false, |_, c, _| c[5] = n(7));
    expect_invalid(&m, Entity::Cell, 1, |v| {
        matches!(
            v,
            Violation::IndexOutOfRange {
                what: "face",
                index: 7,
                ..
            }
        )
    });

    let mut m = fig_3_5();
    edit_operator(&mut m, false, |_, _, nc| *nc = 8);
    expect_invalid(&m, Entity::Operator, 3, |v| {
        matches!(
            v,
            Violation::Shape {
                operator: "∂3",
                ncols: 8,
                expected: 7
            }
        )
    });

    let mut m = fig_3_5();
    edit_operator(&mut m, false, |o, _, _| o[1] = 9);
    expect_invalid(&m, Entity::Operator, 0, |v| {
        matches!(v, Violation::BadOffsets { operator: "∂3" })
    });
}

#[test]
fn validate_catches_bad_positions_and_edges() {
    let mut m = fig_3_5();
    m.positions_mut()[2][1] = f64::NAN;
    expect_invalid(&m, Entity::Vertex, 2, |v| {
        *v == Violation::NonFinitePosition
    });

    let mut m = fig_3_5();
    m.operators_mut().0[5] = [1, 1];
    expect_invalid(&m, Entity::Edge, 5, |v| {
        *v == Violation::DegenerateEdge { vertex: 1 }
    });

    let mut m = fig_3_5();
    m.operators_mut().0[8] = [2, 0]; // same pair as e1 = (0, 2)
    expect_invalid(&m, Entity::Edge, 8, |v| {
        *v == Violation::DuplicateEdge { of: 1 }
    });
}

#[test]
fn validate_catches_open_and_repeated_faces() {
    // flipping one edge of f3 leaves its loop open: ∂1 ∂2 ≠ 0
    let mut m = fig_3_5();
    edit_operator(&mut m, true, |_, c, _| c[10] = !c[10]);
    expect_invalid(&m, Entity::Face, 3, |v| {
        matches!(v, Violation::OpenFaceLoop { .. })
    });

    let mut m = fig_3_5();
    edit_operator(&mut m, true, |_, c, _| c[4] = 0); // f1 = (e0, e0, -e2)
    expect_invalid(&m, Entity::Face, 1, |v| {
        *v == Violation::RepeatedFacet { facet: 0 }
    });

    // an empty face row
    let mut m = fig_3_5();
    edit_operator(&mut m, true, |o, c, _| {
        c.drain(6..9); // f2's edges
        *o = vec![0, 3, 6, 6, 9, 12, 15, 18];
    });
    expect_invalid(&m, Entity::Face, 2, |v| *v == Violation::Empty);

    // a duplicate of f0, appended as an eighth face
    let mut m = fig_3_5();
    edit_operator(&mut m, true, |o, c, _| {
        c.extend_from_slice(&[4, n(1), 0]);
        o.push(c.len() as u32);
    });
    edit_operator(&mut m, false, |_, _, nc| *nc = 8);
    expect_invalid(&m, Entity::Face, 7, |v| {
        *v == Violation::DuplicateFace { of: 0 }
    });
}

/// A mesh of six vertices and two triangles' edges, with one face made of `rows`.
fn loops_mesh(face: Vec<i32>, shared_vertex: bool) -> PolyMesh {
    let pos: Vec<Point> = (0..6).map(|i| [i as f64, (i * i) as f64, 0.0]).collect();
    // triangle A = 0 1 2, triangle B = 3 4 5 (or 2 4 5 when sharing vertex 2)
    let b0 = if shared_vertex { 2 } else { 3 };
    let edges = vec![[0, 1], [1, 2], [0, 2], [b0, 4], [4, 5], [b0, 5]];
    let fe = Tcsr::new(6, vec![0, face.len() as u32], face).unwrap();
    PolyMesh::from_operators(pos, edges, fe, Tcsr::empty(0, 1)).unwrap()
}

#[test]
fn validate_catches_multiple_and_pinched_loops() {
    let two = vec![0, 1, n(2), 3, 4, n(5)];
    let m = loops_mesh(two.clone(), false);
    expect_invalid(&m, Entity::Face, 0, |v| {
        *v == Violation::MultipleLoops { loops: 2 }
    });
    let m = loops_mesh(two, true);
    expect_invalid(&m, Entity::Face, 0, |v| {
        *v == Violation::PinchedFaceLoop { vertex: 2 }
    });
    // a single triangle is fine (vertex 3.. unused)
    let m = loops_mesh(vec![0, 1, n(2)], false);
    m.validate().unwrap();
}

#[test]
fn validate_catches_open_inconsistent_and_repeated_cells() {
    // c0 without its last face f3: open
    let mut m = fig_3_5();
    edit_operator(&mut m, false, |o, c, _| {
        c.remove(3);
        o[1] = 3;
        o[2] = 7;
    });
    expect_invalid(&m, Entity::Cell, 0, |v| {
        matches!(v, Violation::OpenCell { .. })
    });

    // c1 uses f2 inverted: its edges run the same way twice
    let mut m = fig_3_5();
    edit_operator(&mut m, false, |_, c, _| c[5] = !c[5]);
    expect_invalid(&m, Entity::Cell, 1, |v| {
        matches!(v, Violation::InconsistentOrientation { .. })
    });

    let mut m = fig_3_5();
    edit_operator(&mut m, false, |_, c, _| c[1] = 0);
    expect_invalid(&m, Entity::Cell, 0, |v| {
        *v == Violation::RepeatedFacet { facet: 0 }
    });

    let mut m = fig_3_5();
    edit_operator(&mut m, false, |o, c, _| {
        c.drain(0..4);
        *o = vec![0, 0, 4];
    });
    expect_invalid(&m, Entity::Cell, 0, |v| *v == Violation::Empty);
}

#[test]
fn validate_catches_non_manifold_cell() {
    // one "cell" made of two tetrahedra that share only the edge v0 v1: that edge is used
    // by four of its faces
    let pos = vec![
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
        [0.0, -1.0, 0.0],
        [0.0, 0.0, -1.0],
    ];
    let mut b = PolyMeshBuilder::new(pos);
    let tet = CellType::Tetrahedron.local_faces();
    let loops: Vec<Vec<u32>> = [[0u32, 1, 2, 3], [0, 1, 4, 5]]
        .iter()
        .flat_map(|t| {
            tet.iter()
                .map(move |f| f.iter().map(|&l| t[l]).collect::<Vec<u32>>())
        })
        .collect();
    let refs: Vec<&[u32]> = loops.iter().map(|l| &l[..]).collect();
    b.add_cell(&refs).unwrap();
    let m = b.build(Par::Seq).unwrap();
    expect_invalid(&m, Entity::Cell, 0, |v| {
        matches!(
            v,
            Violation::NonManifoldCell {
                positive: 2,
                negative: 2,
                ..
            }
        )
    });
}

#[test]
fn generated_meshes_validate() {
    for kind in [BoxKind::Tet, BoxKind::Hex, BoxKind::Mixed] {
        box_mesh(kind, [3, 2, 4], [1.0, 2.0, 3.0])
            .validate()
            .unwrap();
    }
    non_manifold_example().validate().unwrap();
    fig_3_5().validate().unwrap();
}

/// Signed volume of cell `c` from its outward face loops (divergence theorem).
fn cell_volume(m: &PolyMesh, c: usize) -> f64 {
    let p = m.positions();
    let mut v = 0.0;
    for (f, s) in m.cell_faces().row_decoded(c) {
        let l = m.face_vertices().row(f as usize);
        let a = p[l[0] as usize];
        for k in 1..l.len() - 1 {
            let b = p[l[k] as usize];
            let cc = p[l[k + 1] as usize];
            let t = a[0] * (b[1] * cc[2] - b[2] * cc[1]) - a[1] * (b[0] * cc[2] - b[2] * cc[0])
                + a[2] * (b[0] * cc[1] - b[1] * cc[0]);
            v += s as f64 * t / 6.0;
        }
    }
    v
}

#[test]
fn generated_cells_have_positive_volume() {
    for kind in [BoxKind::Tet, BoxKind::Hex, BoxKind::Mixed] {
        let m = box_mesh(kind, [3, 3, 2], [3.0, 3.0, 2.0]);
        let total: f64 = (0..m.num_cells()).map(|c| cell_volume(&m, c)).sum();
        assert!(
            (0..m.num_cells()).all(|c| cell_volume(&m, c) > 0.0),
            "{kind:?}"
        );
        assert!((total - 18.0).abs() < 1e-12, "{kind:?}: {total}");
    }
}

#[test]
fn bracket_is_a_valid_solid_with_five_tunnels() {
    assert!(bracket(11).is_err());
    assert!(bracket(1001).is_err());
    let r = 24;
    let m = bracket(r).unwrap();
    let g = bracket_geometry(r);
    let h = g.voxel_size;
    assert_eq!(h, 5.0);
    m.validate().unwrap();
    // six Kuhn tetrahedra per voxel whose centre is inside the solid
    let mut voxels = 0;
    for k in 0..g.grid[2] {
        for j in 0..g.grid[1] {
            for i in 0..g.grid[0] {
                voxels += g.keeps_voxel([i, j, k]) as usize;
            }
        }
    }
    assert_eq!(m.num_cells(), 6 * voxels);
    assert_eq!(m.num_cells(), 10_848);
    // every tetrahedron has volume h^3 / 6; the total is within 10% of the solid's
    // 120*80*16 - 4*pi*6^2*16 + 80*16*60 - pi*12^2*16 mm^3
    for c in 0..m.num_cells() {
        assert!((cell_volume(&m, c) - h * h * h / 6.0).abs() < 1e-9);
    }
    let exact = 120.0 * 80.0 * 16.0 - 4.0 * std::f64::consts::PI * 36.0 * 16.0 + 80.0 * 16.0 * 60.0
        - std::f64::consts::PI * 144.0 * 16.0;
    let vol = voxels as f64 * h * h * h;
    assert!((vol - exact).abs() < 0.1 * exact, "{vol} vs {exact}");
    // a ball with 5 tunnels: χ = 1 - 5; its surface has genus 5: χ = 2 - 2 * 5
    assert_eq!(m.euler_characteristic(), -4);
    let b = extract_boundary(&m);
    assert!(b.manifold);
    let s = b.surface(&m);
    assert!(s.surface_boundary().is_empty());
    assert_eq!(s.euler_characteristic(), -8);
    // boundary-condition faces can be selected geometrically: every bolt hole and the
    // load hole have wall faces, and the selections do not overlap
    let mut per_hole = [0usize; 4];
    let mut load = 0;
    for i in 0..s.num_polygons() {
        let poly = s.polygon(i);
        let mut c = [0.0; 3];
        for &v in poly {
            for d in 0..3 {
                c[d] += s.positions[v as usize][d] / poly.len() as f64;
            }
        }
        let bolt = g.bolt_hole_at(c, h);
        if let Some(k) = bolt {
            per_hole[k] += 1;
        }
        if g.on_load_hole(c, h) {
            load += 1;
            assert!(bolt.is_none());
        }
    }
    assert!(per_hole.iter().all(|&n| n >= 8), "{per_hole:?}");
    // the four holes are mirror images of each other
    assert!(per_hole.iter().all(|&n| n == per_hole[0]), "{per_hole:?}");
    assert!(load >= 16, "{load}");
}
