//! A mesh of cells of one shape with two open cells, shared by the GPU test binaries
//! (`#[path]`-included by `gpu.rs` and `gpu_subdivide.rs` only).

use tessera_mesh::generate::{box_mesh, BoxKind};
use tessera_mesh::PolyMesh;
use tessera_sparse::Tcsr;

/// Cells of one shape (tetrahedra, hexahedra: the fixed-stride register kernels) of which two
/// are not closed: one face of each replaced by a face of the far end of the box. Their rows
/// have more distinct vertices and other edges, so the device must notice and take the
/// general path.
pub fn open_cells(kind: BoxKind) -> PolyMesh {
    let m = box_mesh(kind, [6, 5, 4], [1.0, 1.0, 1.0]);
    let cf = m.cell_faces();
    let k = cf.row_len(0);
    assert!((0..m.num_cells()).all(|c| cf.row_len(c) == k));
    let mut cols = cf.columns().to_vec();
    let nf = m.num_faces() as i32;
    cols[3 * k + 1] = nf - 1;
    cols[7 * k + 2] = !(nf - 2);
    let cf = Tcsr::new(cf.ncols(), cf.offsets().to_vec(), cols).unwrap();
    PolyMesh::from_operators(
        m.positions().to_vec(),
        m.edge_vertices().to_vec(),
        m.face_edges().clone(),
        cf,
    )
    .unwrap()
}
