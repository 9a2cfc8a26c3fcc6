//! The polyhedral mesh stored as boundary operators (dissertation §3.3, §3.4).

use crate::relations::Relations;
use crate::{MeshError, Point};
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
#[derive(Clone, Debug)]
pub struct PolyMesh {
    pub(crate) edge_vertices: Vec<[u32; 2]>,
    pub(crate) face_edges: Tcsr,
    pub(crate) cell_faces: Tcsr,
    pub(crate) positions: Vec<Point>,
    pub(crate) nvertices: usize,
    pub(crate) par: Par,
    pub(crate) cache: Relations,
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
