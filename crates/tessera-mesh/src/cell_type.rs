//! Standard cell types and their local faces.
//!
//! Vertex orders follow VTK and Gmsh (which agree for tetrahedra, hexahedra and pyramids;
//! for prisms the two differ in the orientation of the first triangle). Local face loops
//! below are outward for a positively oriented reference cell. The builder checks each
//! cell's signed volume and flips all its face loops when the input is inverted, so either
//! prism convention (and inverted tets from other tools) ends up outward.

use serde::Serialize;

/// Classification of a polyhedral cell by its faces (used by `mesh info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CellType {
    Tetrahedron,
    Hexahedron,
    Prism,
    Pyramid,
    Polyhedron,
}

impl CellType {
    /// Name as used in JSON output.
    pub fn name(self) -> &'static str {
        match self {
            CellType::Tetrahedron => "tetrahedron",
            CellType::Hexahedron => "hexahedron",
            CellType::Prism => "prism",
            CellType::Pyramid => "pyramid",
            CellType::Polyhedron => "polyhedron",
        }
    }

    /// Number of vertices of a standard cell (None for general polyhedra).
    pub fn num_vertices(self) -> Option<usize> {
        match self {
            CellType::Tetrahedron => Some(4),
            CellType::Hexahedron => Some(8),
            CellType::Prism => Some(6),
            CellType::Pyramid => Some(5),
            CellType::Polyhedron => None,
        }
    }

    /// Outward local face loops (indices into the cell's vertex list) for standard types.
    pub fn local_faces(self) -> &'static [&'static [usize]] {
        match self {
            CellType::Tetrahedron => &[&[0, 2, 1], &[0, 1, 3], &[1, 2, 3], &[0, 3, 2]],
            CellType::Hexahedron => &[
                &[0, 3, 2, 1],
                &[4, 5, 6, 7],
                &[0, 1, 5, 4],
                &[1, 2, 6, 5],
                &[2, 3, 7, 6],
                &[3, 0, 4, 7],
            ],
            CellType::Prism => &[
                &[0, 2, 1],
                &[3, 4, 5],
                &[0, 1, 4, 3],
                &[1, 2, 5, 4],
                &[2, 0, 3, 5],
            ],
            CellType::Pyramid => &[
                &[0, 3, 2, 1],
                &[0, 1, 4],
                &[1, 2, 4],
                &[2, 3, 4],
                &[3, 0, 4],
            ],
            CellType::Polyhedron => &[],
        }
    }

    /// Classify a cell from the number of vertices of each of its faces.
    pub fn classify(face_sizes: &[usize]) -> CellType {
        let tris = face_sizes.iter().filter(|&&n| n == 3).count();
        let quads = face_sizes.iter().filter(|&&n| n == 4).count();
        match (face_sizes.len(), tris, quads) {
            (4, 4, 0) => CellType::Tetrahedron,
            (6, 0, 6) => CellType::Hexahedron,
            (5, 2, 3) => CellType::Prism,
            (5, 4, 1) => CellType::Pyramid,
            _ => CellType::Polyhedron,
        }
    }

    pub const ALL: [CellType; 5] = [
        CellType::Tetrahedron,
        CellType::Hexahedron,
        CellType::Prism,
        CellType::Pyramid,
        CellType::Polyhedron,
    ];
}
