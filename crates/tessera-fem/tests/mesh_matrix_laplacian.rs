//! The P1 tetrahedral Laplacian of the mesh matrix (seed 004 §6: the mapped SpGEMM with
//! `Q_tet`, Eq. 6, and the per-edge values `l cot θ / 6`) against the p = 1 scalar stiffness
//! built from this crate's element routines. tessera-fem has no scalar Laplace element, so two
//! scalar stiffnesses are formed from it and compared with the mesh matrix's:
//!
//! 1. `K_ab = |T| ∇ξ_a · ∇ξ_b` from [`CellGeometry`] (volume and barycentric gradients);
//! 2. the trace of the elasticity stiffness block with `λ = 0, μ = 1` over 4: the block is
//!    `μ (G_abᵀ + tr(G_ab) I)` with `G_ab = |T| ∇ξ_a ∇ξ_bᵀ`, whose trace is `4 |T| ∇ξ_a · ∇ξ_b`
//!    ([`ElementTemplate::stiffness_dense`], order 1).
//!
//! Both are assembled by explicit triplets (Matlab's `sparse`), independently of the mesh
//! matrix. Run on generated meshes always and on the shared meshes when present.

use tessera_fem::element::{CellGeometry, ElementTemplate};
use tessera_fem::material::Lame;
use tessera_mesh::generate::{box_mesh, bracket, BoxKind};
use tessera_mesh::mesh_matrix::spgemm::tet_laplacian;
use tessera_mesh::mesh_matrix::{Csr, MeshMatrix};
use tessera_mesh::simplex::SimplexMesh;

/// `(K from gradients, K from the elasticity trace)` by triplet assembly.
fn fem_laplacians(mesh: &SimplexMesh) -> (Csr, Csr) {
    let t = ElementTemplate::new(3, 1).unwrap();
    let loc = t.vertex_locals();
    let lame = Lame {
        lambda: 0.0,
        mu: 1.0,
    };
    let n = mesh.num_vertices();
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for c in 0..mesh.num_cells() {
        let cv = mesh.cell(c);
        let verts: Vec<[f64; 3]> = cv.iter().map(|&v| mesh.positions()[v as usize]).collect();
        let g = CellGeometry::new(3, &verts, c).unwrap();
        let k = t.stiffness_dense(&g, lame);
        let dofs = 3 * t.num_nodes();
        for a in 0..4 {
            for b in 0..4 {
                let ga = g.grads[a];
                let gb = g.grads[b];
                let v = g.volume * (ga[0] * gb[0] + ga[1] * gb[1] + ga[2] * gb[2]);
                ta.push((cv[a], cv[b], v));
                let (ra, rb) = (3 * loc[a], 3 * loc[b]);
                let tr = (0..3).map(|i| k[(ra + i) * dofs + rb + i]).sum::<f64>();
                tb.push((cv[a], cv[b], tr / 4.0));
            }
        }
    }
    (Csr::from_triplets(n, n, &ta), Csr::from_triplets(n, n, &tb))
}

fn compare(name: &str, mesh: &SimplexMesh) {
    let m = MeshMatrix::from_simplex_cells(mesh).unwrap();
    let l = tet_laplacian(&m, mesh.positions()).unwrap();
    let (ka, kb) = fem_laplacians(mesh);
    assert!(l.same_pattern(&ka), "{name}: pattern");
    assert!(l.same_pattern(&kb), "{name}: pattern");
    let scale = ka.values.iter().fold(0.0f64, |a, &b| a.max(b.abs()));
    let (da, db) = (l.max_abs_diff(&ka), l.max_abs_diff(&kb));
    eprintln!(
        "{name}: {} tets, {} entries; max |K_mm - K_grad| = {da:.2e}, |K_mm - K_trace| = {db:.2e} (max |K| {scale:.2e})",
        mesh.num_cells(),
        l.nnz()
    );
    assert!(da <= 1e-11 * scale, "{name}: {da} vs {scale}");
    assert!(db <= 1e-11 * scale, "{name}: {db} vs {scale}");
    assert!(l.asymmetry() <= 1e-12 * scale);
    for r in l.row_sums() {
        assert!(r.abs() <= 1e-11 * scale);
    }
}

#[test]
fn p1_tet_laplacian_equals_the_p1_scalar_stiffness_of_the_element_routines() {
    let b = SimplexMesh::from_poly(&box_mesh(BoxKind::Tet, [4, 3, 5], [1.0, 2.0, 0.7])).unwrap();
    compare("box 4x3x5", &b);
    let br = SimplexMesh::from_poly(&bracket(12).unwrap()).unwrap();
    compare("bracket(12)", &br);
}

/// `$TESSERA_SHARED_MESHES`, else the first `shared/meshes` beside an ancestor of the crate
/// (the checkout's `../shared`, also from a worktree further down).
fn shared_meshes() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("TESSERA_SHARED_MESHES") {
        return d.into();
    }
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .map(|a| a.join("shared/meshes"))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| here.join("../../../shared/meshes"))
}

#[test]
fn p1_tet_laplacian_on_the_small_shared_meshes() {
    let dir = shared_meshes();
    if !dir.is_dir() {
        eprintln!("skipping: {} is absent", dir.display());
        return;
    }
    for name in [
        "armadillo-3k.msh.gz",
        "bracket-7.9k.msh.gz",
        "bunny-50k.msh.gz",
    ] {
        let p = dir.join(name);
        if !p.exists() {
            eprintln!("skipping {name}: absent");
            continue;
        }
        let m = tessera_mesh::io::read_simplex_mesh(&p).unwrap().mesh;
        compare(name, &m);
    }
}

/// Every shared mesh (the dragon and the large brackets too): release only,
/// `cargo test --release -p tessera-fem --test mesh_matrix_laplacian -- --ignored --nocapture`.
#[test]
#[ignore = "release only: every shared mesh (up to 1.7M tetrahedra)"]
fn p1_tet_laplacian_on_every_shared_mesh() {
    let dir = shared_meshes();
    if !dir.is_dir() {
        eprintln!("skipping: {} is absent", dir.display());
        return;
    }
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".msh.gz"))
        .collect();
    files.sort();
    for p in files {
        let m = tessera_mesh::io::read_simplex_mesh(&p).unwrap().mesh;
        compare(&p.file_name().unwrap().to_string_lossy(), &m);
    }
}
