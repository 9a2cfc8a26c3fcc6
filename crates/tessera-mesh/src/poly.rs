//! The polyhedral mesh stored as boundary operators (dissertation §3.3, §3.4).

use crate::relations::Relations;
use crate::{MeshError, Point};
use std::sync::OnceLock;
use tessera_core::Par;
use tessera_sparse::Tcsr;

/// A general polyhedral mesh (dissertation §3.4, items 1-7).
///
/// Always stored (items 1-6):
/// - `edge_vertices`: ∂1 as ordered pairs `[from, to]` (∂1 has -1 at `from`, +1 at `to`);
/// - `face_edges`: ∂2 in TCSR, each row the signed edges of a face **in loop order**
///   (a positive entry traverses the edge `from -> to`);
/// - `cell_faces`: ∂3 in TCSR, each row the signed faces of a cell (+1 where the face's
///   orientation is outward for that cell);
/// - `positions`.
///
/// Derived relations (item 7) live in a [`Relations`] cache, computed on request and
/// dropped on any mutable access to the operators they depend on.
///
/// The mesh also remembers whether its cells are **known closed**
/// ([`PolyMesh::cells_known_closed`]), which lets the gathers over cells read fewer rows.
#[derive(Clone, Debug)]
pub struct PolyMesh {
    pub(crate) edge_vertices: Vec<[u32; 2]>,
    pub(crate) face_edges: Tcsr,
    pub(crate) cell_faces: Tcsr,
    pub(crate) positions: Vec<Point>,
    pub(crate) nvertices: usize,
    pub(crate) par: Par,
    pub(crate) cache: Relations,
    /// Set once every cell is known closed (see [`PolyMesh::cells_known_closed`]); reset
    /// by mutable access to the operators.
    pub(crate) cells_closed: OnceLock<()>,
}

impl PolyMesh {
    /// Assemble a mesh from its operators. Checks array shapes and index ranges; call
    /// [`PolyMesh::validate`] for the full topological check.
    pub fn from_operators(
        positions: Vec<Point>,
        edge_vertices: Vec<[u32; 2]>,
        face_edges: Tcsr,
        cell_faces: Tcsr,
    ) -> Result<Self, MeshError> {
        let nv = positions.len();
        for (e, ev) in edge_vertices.iter().enumerate() {
            for &v in ev {
                if v as usize >= nv {
                    return Err(MeshError::InvalidTopology(format!(
                        "edge {e} references vertex {v}, but the mesh has {nv} vertices"
                    )));
                }
            }
        }
        if face_edges.ncols() != edge_vertices.len() {
            return Err(MeshError::InvalidTopology(format!(
                "∂2 has {} columns but there are {} edges",
                face_edges.ncols(),
                edge_vertices.len()
            )));
        }
        if cell_faces.ncols() != face_edges.nrows() {
            return Err(MeshError::InvalidTopology(format!(
                "∂3 has {} columns but there are {} faces",
                cell_faces.ncols(),
                face_edges.nrows()
            )));
        }
        Ok(PolyMesh {
            edge_vertices,
            face_edges,
            cell_faces,
            nvertices: nv,
            positions,
            par: Par::auto(),
            cache: Relations::default(),
            cells_closed: OnceLock::new(),
        })
    }

    pub fn num_vertices(&self) -> usize {
        self.nvertices
    }
    pub fn num_edges(&self) -> usize {
        self.edge_vertices.len()
    }
    pub fn num_faces(&self) -> usize {
        self.face_edges.nrows()
    }
    pub fn num_cells(&self) -> usize {
        self.cell_faces.nrows()
    }

    /// ∂1 as ordered vertex pairs.
    pub fn edge_vertices(&self) -> &[[u32; 2]] {
        &self.edge_vertices
    }
    /// ∂2 in TCSR (faces x edges).
    pub fn face_edges(&self) -> &Tcsr {
        &self.face_edges
    }
    /// ∂3 in TCSR (cells x faces).
    pub fn cell_faces(&self) -> &Tcsr {
        &self.cell_faces
    }
    pub fn positions(&self) -> &[Point] {
        &self.positions
    }

    /// Mutable positions. Topology caches stay valid (they do not depend on geometry).
    pub fn positions_mut(&mut self) -> &mut Vec<Point> {
        &mut self.positions
    }

    /// Mutable access to all operators; drops every cached relation (dissertation §3.4,
    /// item 7: caches are "invalidated by mutable access to any operator").
    pub fn operators_mut(&mut self) -> (&mut Vec<[u32; 2]>, &mut Tcsr, &mut Tcsr) {
        self.cache = Relations::default();
        self.cells_closed = OnceLock::new();
        (
            &mut self.edge_vertices,
            &mut self.face_edges,
            &mut self.cell_faces,
        )
    }

    /// Drop all cached derived relations.
    pub fn purge_caches(&mut self) {
        self.cache = Relations::default();
    }

    /// Whether every cell is known to be **closed**: its faces are simple loops of
    /// distinct edges, no two edges join the same vertex pair, no two faces have the same
    /// edge set, and every edge of the cell's faces is used by exactly two of them
    /// (dissertation §3.3: `∂2 ∂3 = 0` per cell, up to orientation). Known after a
    /// successful [`PolyMesh::validate`], and for meshes that the [`crate::PolyMeshBuilder`]
    /// built from typed tetrahedra only (closed by construction); forgotten on
    /// [`PolyMesh::operators_mut`]. `false` means "not known", not "open".
    ///
    /// A closed cell of four triangles is a tetrahedron with four distinct vertices, so
    /// its vertices follow from two of its faces and three of their edges
    /// ([`crate::relations::compute_cell_vertices`] and the GPU's cell vertices read those
    /// instead of all four faces and six edges; the rows are the same).
    pub fn cells_known_closed(&self) -> bool {
        self.cells_closed.get().is_some()
    }

    /// Record that every cell is closed (see [`PolyMesh::cells_known_closed`]); callers
    /// have established it (validation, construction).
    pub(crate) fn mark_cells_closed(&self) {
        let _ = self.cells_closed.set(());
    }

    /// The execution choice used when cached relations are computed.
    pub fn par(&self) -> Par {
        self.par
    }
    /// Set the execution choice for derived relations (results are identical either way).
    pub fn set_par(&mut self, par: Par) {
        self.par = par;
    }

    /// Bytes of the always-stored arrays (items 1-6 of §3.4; caches excluded).
    pub fn topology_bytes(&self) -> usize {
        self.cell_faces.bytes() + self.face_edges.bytes() + self.edge_vertices.len() * 8
    }

    /// Bytes of the positions array (f64).
    pub fn geometry_bytes(&self) -> usize {
        self.positions.len() * 24
    }

    /// Euler characteristic V - E + F - C.
    pub fn euler_characteristic(&self) -> i64 {
        self.num_vertices() as i64 - self.num_edges() as i64 + self.num_faces() as i64
            - self.num_cells() as i64
    }

    /// The relations cache (compute-on-request accessors live in [`crate::relations`]).
    pub fn relations(&self) -> &Relations {
        &self.cache
    }

    /// Take the stored arrays `(positions, edge_vertices, face_edges, cell_faces)`.
    pub fn into_parts(self) -> (Vec<Point>, Vec<[u32; 2]>, Tcsr, Tcsr) {
        (
            self.positions,
            self.edge_vertices,
            self.face_edges,
            self.cell_faces,
        )
    }
}
