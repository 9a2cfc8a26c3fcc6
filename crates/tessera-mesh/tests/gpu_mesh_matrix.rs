//! The GPU mesh matrix (seed 004 §7) against the CPU reference. Each test needs a CUDA GPU
//! (`#[ignore]`d; run on the device machine through `../shared/tools/device-pack -p
//! tessera-mesh`) and skips with a message when none is found; `TESSERA_REQUIRE_GPU=1` makes a
//! missing GPU a failure.
//!
//! Meshes (fixed seeds, well above warp size, uneven rows): an icosphere with jittered positions
//! and shuffled vertex numbers (5120 triangles), the same sliced by a plane (triangles and quads:
//! the rowind + colptr form), a disk of 150 triangles around one vertex next to a sphere (a row of
//! 150 corners: the long-row path of the segmented sort), quad meshes (Catmull-Clark of a cube, an
//! open grid), tetrahedra (the P1 Laplacian). Indices and patterns must match exactly; `f64`
//! values within 1e-12 (relative to the largest value), `f32` values within 1e-4 relative (1e-5
//! for SpGEMM, 1e-3 for the Catmull-Clark positions of two levels, 1e-2 for normals, whose Max
//! weights `1/(|e1|² |e2|²)` amplify the rounding of tiny triangles along the cut). The largest differences
//! are printed.

use tessera_gpu::Gpu;
use tessera_mesh::cuda::mesh_matrix::{
    download_mesh, download_points, upload_mesh, upload_points, MeshMatrixKernels, MmReal,
};
use tessera_mesh::generate::{box_mesh, BoxKind};
use tessera_mesh::mesh_matrix::normals::{vertex_normals, NormalWeights};
use tessera_mesh::mesh_matrix::shapes::{cube, grid, icosphere};
use tessera_mesh::mesh_matrix::slice::{slice, Plane};
use tessera_mesh::mesh_matrix::spgemm::{cotan_laplacian, mapped_spgemm, tet_laplacian};
use tessera_mesh::mesh_matrix::subdivide::{catmull_clark, catmull_clark_levels};
use tessera_mesh::mesh_matrix::{spmv, ActionMap, Csr, MeshMatrix, PairMap, PolygonMesh};
use tessera_mesh::simplex::SimplexMesh;

fn gpu() -> Option<Gpu> {
    match Gpu::probe() {
        Ok(g) => {
            eprintln!("running on {}", g.describe());
            Some(g)
        }
        Err(e) => {
            if std::env::var_os("TESSERA_REQUIRE_GPU").is_some() {
                panic!("TESSERA_REQUIRE_GPU is set but no GPU is usable: {e}");
            }
            eprintln!("skipped: no usable CUDA GPU ({e})");
            None
        }
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// The icosphere of level 4, jittered, vertices shuffled.
fn sphere(seed: u64) -> PolygonMesh {
    let mut s = icosphere(4);
    let mut r = Rng(seed);
    for p in &mut s.positions {
        for x in p.iter_mut() {
            *x *= 1.0 + 0.02 * r.unit();
        }
    }
    let n = s.num_vertices();
    let keys: Vec<u64> = (0..n).map(|_| r.next()).collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&v| keys[v as usize]);
    let mut new_of_old = vec![0u32; n];
    for (k, &o) in order.iter().enumerate() {
        new_of_old[o as usize] = k as u32;
    }
    s.renumber_vertices(&new_of_old).unwrap()
}

/// A sphere and, beside it, a disk of 150 triangles around one vertex (a row of 150 corners).
fn sphere_and_fan() -> PolygonMesh {
    let s = icosphere(3);
    let mut pos = s.positions.clone();
    let (mut off, mut verts) = s.matrix.to_face_table();
    let c = pos.len() as u32;
    pos.push([3.0, 0.0, 0.0]);
    let k = 150u32;
    for i in 0..k {
        let a = 2.0 * std::f64::consts::PI * i as f64 / k as f64;
        pos.push([3.0 + a.cos(), a.sin(), 0.1 * (3.0 * a).sin()]);
    }
    for i in 0..k {
        verts.extend_from_slice(&[c, c + 1 + i, c + 1 + (i + 1) % k]);
        off.push(verts.len() as u32);
    }
    PolygonMesh::new(pos, &off, &verts).unwrap()
}

/// Triangles and quads: the sphere sliced by a plane.
fn mixed(seed: u64) -> PolygonMesh {
    let s = sphere(seed);
    let r = slice(
        &s,
        &Plane {
            point: [0.1, 0.0, 0.05],
            normal: [0.3, -0.2, 1.0],
        },
    )
    .unwrap();
    assert!(r.mesh.matrix.uniform_size().is_none());
    r.mesh
}

fn meshes() -> Vec<(&'static str, PolygonMesh)> {
    vec![
        ("sphere", sphere(1)),
        ("sliced sphere (tri + quad)", mixed(2)),
        ("sphere + fan of 150", sphere_and_fan()),
        (
            "quads (cube, 3 levels)",
            catmull_clark_levels(&cube(), 3).unwrap(),
        ),
        ("open quad grid", grid(37, 23, false)),
    ]
}

/// Largest |a - b| over the largest |b| (0 when both are empty).
fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-300);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
        / scale
}

fn to_f64<T: MmReal>(v: Vec<T>) -> Vec<f64> {
    v.into_iter().map(|x| x.to_f64()).collect()
}

fn tol<T: MmReal>(f64_tol: f64, f32_tol: f64) -> f64 {
    if T::SUFFIX == "f64" {
        f64_tol
    } else {
        f32_tol
    }
}

fn spmv_case<T: MmReal>(g: &Gpu, k: &MeshMatrixKernels, name: &str, mesh: &PolygonMesh) {
    let m = &mesh.matrix;
    let mut r = Rng(7);
    let ev: Vec<f64> = (0..m.nnz()).map(|_| r.unit()).collect();
    let fw: Vec<f64> = (0..m.num_faces()).map(|_| r.unit()).collect();
    let maps = [
        ("M̄", ActionMap::binary()),
        ("(-1,1,0,..)", ActionMap::stencil(&[-1.0, 1.0, 0.0, 0.5])),
        ("values", ActionMap::binary().with_entry_values(&ev)),
        (
            "table x weights x 1/3",
            ActionMap::stencil(&[2.0, -1.0, 0.25, 1.5])
                .with_face_weights(&fw)
                .with_scale(1.0 / 3.0),
        ),
    ];
    let mut dm = k.upload(m).unwrap();
    // the transpose: indices exactly
    let t = k.transpose(&dm).unwrap();
    assert_eq!(
        g.download(&t.offsets).unwrap(),
        m.transpose().offsets,
        "{name}"
    );
    assert_eq!(
        g.download(&t.corners).unwrap(),
        m.transpose().corners,
        "{name}"
    );
    let mut worst = [0.0f64; 3];
    for (mname, map) in &maps {
        let dmap = k.upload_map::<T>(&dm, map).unwrap();
        for width in [1usize, 3] {
            let xv: Vec<f64> = (0..m.num_vertices() * width).map(|_| r.unit()).collect();
            let xf: Vec<f64> = (0..m.num_faces() * width).map(|_| r.unit()).collect();
            let up = |v: &[f64]| {
                g.upload(&v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>())
                    .unwrap()
            };
            let (dxv, dxf) = (up(&xv), up(&xf));
            let want_t = spmv::mtv(m, map, &xv, width).unwrap();
            let want = spmv::mv(m, map, &xf, width).unwrap();
            let got_t = to_f64(
                g.download(&k.mtv(&dm, &dmap, &dxv, width).unwrap())
                    .unwrap(),
            );
            let got_a = to_f64(
                g.download(&k.mv_atomic(&dm, &dmap, &dxf, width).unwrap())
                    .unwrap(),
            );
            let got_g = to_f64(
                g.download(&k.mv_gather(&mut dm, &dmap, &dxf, width).unwrap())
                    .unwrap(),
            );
            let d = [
                rel_diff(&got_t, &want_t),
                rel_diff(&got_a, &want),
                rel_diff(&got_g, &want),
            ];
            let lim = tol::<T>(1e-12, 1e-4);
            for (i, x) in d.iter().enumerate() {
                worst[i] = worst[i].max(*x);
                assert!(
                    *x <= lim,
                    "{name}, {} map {mname}, width {width}: op {i} differs by {x}",
                    T::SUFFIX
                );
            }
        }
    }
    eprintln!(
        "{name} ({}): max rel. diff Mᵀv {:.1e}, M v atomic {:.1e}, M v gather {:.1e}",
        T::SUFFIX,
        worst[0],
        worst[1],
        worst[2]
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mapped_spmv_matches_reference() {
    let Some(g) = gpu() else { return };
    let k = MeshMatrixKernels::new(&g).unwrap();
    for (name, mesh) in meshes() {
        spmv_case::<f64>(&g, &k, name, &mesh);
        spmv_case::<f32>(&g, &k, name, &mesh);
    }
    // widths other than 1 and 3 are refused on the GPU, not mis-computed
    let s = sphere(3);
    let dm = k.upload(&s.matrix).unwrap();
    let map = k.upload_map::<f64>(&dm, &ActionMap::binary()).unwrap();
    let x = g.zeros::<f64>(2 * s.num_vertices()).unwrap();
    assert!(k.mtv(&dm, &map, &x, 2).is_err());
}

fn spgemm_case<T: MmReal>(
    g: &Gpu,
    k: &MeshMatrixKernels,
    name: &str,
    m: &MeshMatrix,
    want: &Csr,
    map: &PairMap,
) {
    let mut dm = k.upload(m).unwrap();
    let got = k.spgemm::<T>(&mut dm, map).unwrap().download(g).unwrap();
    assert_eq!(
        got.rowptr,
        want.rowptr,
        "{name} ({}): row pointers",
        T::SUFFIX
    );
    assert_eq!(got.colind, want.colind, "{name} ({}): columns", T::SUFFIX);
    let d = rel_diff(&got.values, &want.values);
    eprintln!(
        "{name} ({}): {} x {}, {} entries, max rel. diff {d:.1e}",
        T::SUFFIX,
        want.nrows,
        want.ncols,
        want.nnz()
    );
    assert!(d <= tol::<T>(1e-12, 1e-5), "{name}: {d}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mapped_spgemm_matches_reference() {
    let Some(g) = gpu() else { return };
    let k = MeshMatrixKernels::new(&g).unwrap();
    let maps = [
        ("M̄ M̄ᵀ", PairMap::generalized_adjacency()),
        ("oriented Q_n", PairMap::oriented_adjacency()),
        ("boundary Q_n - Q_n^(n-1)", PairMap::boundary()),
        ("graph Laplacian", PairMap::graph_laplacian()),
    ];
    for (name, mesh) in meshes() {
        for (mname, map) in &maps {
            let want = mapped_spgemm(&mesh.matrix, map).unwrap();
            let n = format!("{name}: {mname}");
            spgemm_case::<f64>(&g, &k, &n, &mesh.matrix, &want, map);
            spgemm_case::<f32>(&g, &k, &n, &mesh.matrix, &want, map);
        }
    }
    // quad diagonals Q_4^2
    let q = catmull_clark_levels(&cube(), 3).unwrap();
    let map = PairMap::quad_diagonals();
    let want = mapped_spgemm(&q.matrix, &map).unwrap();
    spgemm_case::<f64>(&g, &k, "quads: Q_4^2", &q.matrix, &want, &map);
    // cotangent Laplacian (per-entry values) on triangle meshes, with the 150-fan
    for (name, mesh) in [("sphere", sphere(5)), ("sphere + fan", sphere_and_fan())] {
        let want = cotan_laplacian(&mesh.matrix, &mesh.positions).unwrap();
        let map = cotan_map(&mesh);
        spgemm_case::<f64>(
            &g,
            &k,
            &format!("{name}: cotangent"),
            &mesh.matrix,
            &want,
            &map,
        );
        spgemm_case::<f32>(
            &g,
            &k,
            &format!("{name}: cotangent"),
            &mesh.matrix,
            &want,
            &map,
        );
        // the cotangents computed on the device too
        let (mut dm, p) = upload_mesh::<f64>(&k, &mesh).unwrap();
        let got = k
            .cotan_laplacian(&mut dm, &p)
            .unwrap()
            .download(&g)
            .unwrap();
        assert!(got.same_pattern(&want));
        let d = rel_diff(&got.values, &want.values);
        eprintln!("{name}: cotangent Laplacian with device cotangents, max rel. diff {d:.1e}");
        assert!(d <= 1e-12);
    }
    // P1 tetrahedral Laplacian (Q_tet, 6 values per cell)
    let tets = SimplexMesh::from_poly(&box_mesh(BoxKind::Tet, [9, 7, 8], [1.0, 1.3, 0.9])).unwrap();
    let cells = MeshMatrix::from_simplex_cells(&tets).unwrap();
    let want = tet_laplacian(&cells, tets.positions()).unwrap();
    let map = tet_map(&cells, tets.positions());
    spgemm_case::<f64>(&g, &k, "tets: P1 Laplacian", &cells, &want, &map);
    spgemm_case::<f32>(&g, &k, "tets: P1 Laplacian", &cells, &want, &map);
    let mut dm = k.upload(&cells).unwrap();
    let p = upload_points::<f64>(&g, tets.positions()).unwrap();
    let got = k.tet_laplacian(&mut dm, &p).unwrap().download(&g).unwrap();
    assert!(got.same_pattern(&want));
    let d = rel_diff(&got.values, &want.values);
    eprintln!("tets: P1 Laplacian with device edge values, max rel. diff {d:.1e}");
    assert!(d <= 1e-12);
}

/// The map of [`cotan_laplacian`] (rebuilt here to pass it to the GPU).
fn cotan_map(mesh: &PolygonMesh) -> PairMap {
    tessera_mesh::mesh_matrix::spgemm::cotan_map(&mesh.matrix, &mesh.positions).unwrap()
}
fn tet_map(m: &MeshMatrix, p: &[[f64; 3]]) -> PairMap {
    tessera_mesh::mesh_matrix::spgemm::tet_map(m, p).unwrap()
}

fn normals_case<T: MmReal>(g: &Gpu, k: &MeshMatrixKernels, name: &str, mesh: &PolygonMesh) {
    let (mut dm, p) = upload_mesh::<T>(k, mesh).unwrap();
    for w in [
        NormalWeights::Area,
        NormalWeights::Angle,
        NormalWeights::Max,
    ] {
        let want: Vec<f64> = vertex_normals(&mesh.matrix, &mesh.positions, w)
            .unwrap()
            .into_iter()
            .flatten()
            .collect();
        for gather in [false, true] {
            let got: Vec<f64> = download_points(g, &k.normals(&mut dm, &p, w, gather).unwrap())
                .unwrap()
                .into_iter()
                .flatten()
                .collect();
            let d = rel_diff(&got, &want);
            eprintln!(
                "{name} ({}): {} normals, {}: max diff {d:.1e}",
                T::SUFFIX,
                w.name(),
                if gather { "gather" } else { "scatter" }
            );
            assert!(d <= tol::<T>(1e-12, 1e-2), "{name}: {d}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn normals_matches_reference() {
    let Some(g) = gpu() else { return };
    let k = MeshMatrixKernels::new(&g).unwrap();
    for (name, mesh) in meshes() {
        normals_case::<f64>(&g, &k, name, &mesh);
        normals_case::<f32>(&g, &k, name, &mesh);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn slice_matches_reference() {
    let Some(g) = gpu() else { return };
    let k = MeshMatrixKernels::new(&g).unwrap();
    let planes = [
        Plane {
            point: [0.1, 0.0, 0.05],
            normal: [0.3, -0.2, 1.0],
        },
        // through vertices of the unjittered sphere (d = 0 exactly)
        Plane {
            point: [0.0, 0.0, 0.0],
            normal: [0.0, 0.0, 1.0],
        },
        Plane {
            point: [2.9, 0.0, 0.0],
            normal: [1.0, 0.2, 0.0],
        },
    ];
    let mut ico = icosphere(4);
    ico.positions
        .iter_mut()
        .for_each(|p| p[2] = (p[2] * 1e6).round() / 1e6);
    for (name, mesh) in [
        ("sphere", sphere(4)),
        ("icosphere (vertices on the plane)", ico),
        ("sphere + fan", sphere_and_fan()),
        ("open grid", grid(40, 31, true)),
    ] {
        for plane in &planes {
            let want = slice(&mesh, plane).unwrap();
            let (mut dm, p) = upload_mesh::<f64>(&k, &mesh).unwrap();
            let got = k.slice(&mut dm, &p, plane).unwrap().download(&g).unwrap();
            assert_eq!(got.mesh.matrix, want.mesh.matrix, "{name}: faces");
            assert_eq!(got.face_side, want.face_side, "{name}: sides");
            assert_eq!(got.segments, want.segments, "{name}: segments");
            assert_eq!(got.polylines, want.polylines, "{name}: polylines");
            assert_eq!(got.cut_edges, want.cut_edges);
            let a: Vec<f64> = got.mesh.positions.iter().flatten().copied().collect();
            let b: Vec<f64> = want.mesh.positions.iter().flatten().copied().collect();
            let d = rel_diff(&a, &b);
            eprintln!(
                "{name}: {} cut edges, {} faces out, {} polylines, max position diff {d:.1e}",
                want.cut_edges,
                want.mesh.num_faces(),
                want.polylines.len()
            );
            assert!(d <= 1e-12);
            // f32: the same kind of result (classification may differ near the plane)
            let (mut dm, p) = upload_mesh::<f32>(&k, &mesh).unwrap();
            let got = k.slice(&mut dm, &p, plane).unwrap().download(&g).unwrap();
            assert_eq!(got.polylines.len(), want.polylines.len());
            assert_eq!(
                got.polylines.iter().map(|p| p.closed).collect::<Vec<_>>(),
                want.polylines.iter().map(|p| p.closed).collect::<Vec<_>>()
            );
        }
    }
    // quads are refused
    let c = cube();
    let (mut dm, p) = upload_mesh::<f64>(&k, &c).unwrap();
    assert!(k.slice(&mut dm, &p, &planes[0]).is_err());
}

fn cc_case<T: MmReal>(g: &Gpu, k: &MeshMatrixKernels, name: &str, mesh: &PolygonMesh) {
    let want1 = catmull_clark(mesh).unwrap();
    let want2 = catmull_clark(&want1).unwrap();
    let (mut dm, p) = upload_mesh::<T>(k, mesh).unwrap();
    let (mut d1, p1) = k.catmull_clark(&mut dm, &p).unwrap();
    let (d2, p2) = k.catmull_clark(&mut d1, &p1).unwrap();
    for (lvl, (dmx, px), want) in [(1, (&d1, &p1), &want1), (2, (&d2, &p2), &want2)] {
        let got = download_mesh(g, dmx, px).unwrap();
        assert_eq!(got.matrix, want.matrix, "{name}, level {lvl}: faces");
        let a: Vec<f64> = got.positions.iter().flatten().copied().collect();
        let b: Vec<f64> = want.positions.iter().flatten().copied().collect();
        let d = rel_diff(&a, &b);
        eprintln!(
            "{name} ({}), level {lvl}: V {} F {}, max position diff {d:.1e} of the extent",
            T::SUFFIX,
            want.num_vertices(),
            want.num_faces()
        );
        assert!(d <= tol::<T>(1e-12, 1e-3), "{name}: {d}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn surface_catmull_clark_matches_reference() {
    let Some(g) = gpu() else { return };
    let k = MeshMatrixKernels::new(&g).unwrap();
    for (name, mesh) in meshes() {
        cc_case::<f64>(&g, &k, name, &mesh);
        cc_case::<f32>(&g, &k, name, &mesh);
    }
    // non-manifold input: the CPU reference's error
    let p = vec![
        [0.0; 3],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, -1.0, 0.0],
        [0.0, 0.0, 1.0],
    ];
    let bad = PolygonMesh::new(p, &[0, 3, 6, 9], &[0, 1, 2, 1, 0, 3, 0, 1, 4]).unwrap();
    let want = catmull_clark(&bad).unwrap_err().to_string();
    let (mut dm, p) = upload_mesh::<f64>(&k, &bad).unwrap();
    let got = k.catmull_clark(&mut dm, &p).err().unwrap().to_string();
    assert_eq!(got, want);
    // a bowtie vertex (two fans)
    let p = vec![
        [0.0; 3],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [-1.0, 0.0, 0.0],
        [0.0, -1.0, 0.0],
    ];
    let bow = PolygonMesh::new(p, &[0, 3, 6], &[0, 1, 2, 0, 3, 4]).unwrap();
    let want = catmull_clark(&bow).unwrap_err().to_string();
    let (mut dm, p) = upload_mesh::<f64>(&k, &bow).unwrap();
    let got = k.catmull_clark(&mut dm, &p).err().unwrap().to_string();
    assert_eq!(got, want);
}

/// Runs everywhere: the inputs of the conformance tests are what they claim to be, and the CPU
/// reference runs on every one of them.
#[test]
fn conformance_inputs_are_valid() {
    let ms = meshes();
    assert!(ms[0].1.num_faces() > 5000);
    assert!(ms[1].1.matrix.uniform_size().is_none());
    let fan = &ms[2].1;
    assert!(fan.matrix.vertex_face_counts().iter().any(|&c| c == 150));
    for (name, mesh) in &ms {
        catmull_clark(mesh).unwrap_or_else(|e| panic!("{name}: {e}"));
        vertex_normals(&mesh.matrix, &mesh.positions, NormalWeights::Max).unwrap();
        mapped_spgemm(&mesh.matrix, &PairMap::graph_laplacian()).unwrap();
    }
    cotan_map(&sphere_and_fan());
    let r = slice(
        &sphere(4),
        &Plane {
            point: [0.1, 0.0, 0.05],
            normal: [0.3, -0.2, 1.0],
        },
    )
    .unwrap();
    assert_eq!(r.polylines.len(), 1);
}
