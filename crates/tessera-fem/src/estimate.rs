//! Memory estimates before work (DESIGN.md principle 6: a problem too large for the memory
//! available is refused with one clear message before any allocation, not ended by an
//! allocation failure halfway through).
//!
//! Sizes follow from the counting formulas: a generated box or bracket gives its simplex
//! counts `(V, E, F, T)` directly; the order-`p` nodes are
//! `N = V + (p-1) E + C(p-1, 2) F + C(p-1, 3) T` (dissertation §4.2) and the block
//! non-zeros of `K` follow from Eq. 4.6 summed over all nodes
//! ([`block_nonzeros_from_totals`]). The bytes per item were measured (peak resident set of
//! `tessera fem solve` and `tessera fem assemble` on generated boxes, p = 1..3, recorded in
//! the tests below) and rounded up.
//!
//! ```
//! use tessera_fem::estimate::{box_counts, static_solve_bytes};
//! use tessera_fem::problem::SolverMethod;
//! let c = box_counts([400, 400, 400]);
//! assert_eq!(c.cells, 6 * 400 * 400 * 400);
//! // hundreds of GB: refused long before it starts on any workstation
//! assert!(static_solve_bytes(2, &c, SolverMethod::Pcg) > 100_000_000_000);
//! ```

use crate::count::block_nonzeros_from_totals;
use crate::multi_index::binomial;
use crate::problem::{MeshSource, SolverMethod};

/// Simplex counts of a tetrahedral mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimplexCounts {
    pub vertices: u64,
    pub edges: u64,
    pub faces: u64,
    pub cells: u64,
}

impl SimplexCounts {
    fn totals(&self) -> [u64; 4] {
        [self.vertices, self.edges, self.faces, self.cells]
    }
}

/// Exact counts of the box of `n` voxels, six Kuhn tetrahedra each
/// ([`tessera_mesh::generate::box_mesh`] with `BoxKind::Tet`): every grid edge, one
/// diagonal per grid square and one per voxel; faces from the Euler characteristic of a ball
/// (`V - E + F - T = 1`).
pub fn box_counts(n: [u64; 3]) -> SimplexCounts {
    let [a, b, c] = n;
    let v = (a + 1) * (b + 1) * (c + 1);
    let axis = a * (b + 1) * (c + 1) + (a + 1) * b * (c + 1) + (a + 1) * (b + 1) * c;
    let squares = a * b * (c + 1) + a * (b + 1) * c + (a + 1) * b * c;
    let e = axis + squares + a * b * c;
    let t = 6 * a * b * c;
    SimplexCounts {
        vertices: v,
        edges: e,
        faces: 1 + e + t - v,
        cells: t,
    }
}

/// Approximate counts of the generated bracket ([`tessera_mesh::generate::bracket`]) at a
/// resolution: its solid volume over the voxel volume gives the kept voxels, each holding
/// six tetrahedra, with the interior ratios of a Kuhn grid (`V ≈ vox`, `E ≈ 7 vox`,
/// `F ≈ 12 vox`) raised by the surface layer.
pub fn bracket_counts(resolution: usize) -> SimplexCounts {
    let vox = tessera_mesh::generate::bracket_voxels(resolution);
    // surface layer: about one vertex per boundary voxel on top of the interior ratio
    let surface = (6.0 * (vox as f64).powf(2.0 / 3.0)) as u64;
    let v = vox + 2 * surface;
    let e = 7 * vox + 6 * surface;
    let t = 6 * vox;
    SimplexCounts {
        vertices: v,
        edges: e,
        faces: 1 + e + t - v.min(1 + e + t),
        cells: t,
    }
}

/// The counts of a problem's generated mesh (`None` for a mesh file: its counts are known
/// once it is read, and the file's size bounds the reading).
pub fn source_counts(source: &MeshSource) -> Option<SimplexCounts> {
    match source {
        MeshSource::File(_) => None,
        MeshSource::Bracket(r) => Some(bracket_counts(*r)),
        MeshSource::Box { cells, .. } => Some(box_counts(cells.map(|c| c as u64))),
    }
}

/// Order-`p` nodes `N = V + (p-1) E + C(p-1, 2) F + C(p-1, 3) T`.
pub fn num_nodes(p: usize, c: &SimplexCounts) -> u64 {
    let p1 = p.saturating_sub(1);
    c.vertices
        + p1 as u64 * c.edges
        + binomial(p1, 2) as u64 * c.faces
        + binomial(p1, 3) as u64 * c.cells
}

/// Nodes per cell `C(p + 3, 3)`.
fn nodes_per_cell(p: usize) -> u64 {
    binomial(p + 3, 3) as u64
}

/// Bytes of the mesh while it is generated and converted to the simplex form (the
/// voxel generator's polyhedral mesh; [`tessera_mesh::generate::voxel_mesh_bytes`]).
pub fn mesh_bytes(c: &SimplexCounts) -> u64 {
    tessera_mesh::generate::voxel_mesh_bytes(
        c.cells.div_ceil(6),
        tessera_mesh::generate::BoxKind::Tet,
    )
    .saturating_add(64 * c.vertices)
}

/// Bytes of assembling `K` (3 × 3 blocks of `scalar_bytes`) of order `p`: the order-`p`
/// mesh (cell nodes, positions), the Bin-BCSR* pattern and values (block non-zeros of
/// Eq. 4.6, with 25 % for bin padding and the assembly maps), the position map of the
/// per-node summation (a 16-bit column position per element block and a local index per
/// node-cell pair: `m (2 m + 1)` bytes per cell) and, unless the summation is inline, the
/// stored symmetric element matrices (`m (m + 1) / 2` blocks per cell).
pub fn assembly_bytes(
    p: usize,
    c: &SimplexCounts,
    scalar_bytes: u64,
    stored_elements: bool,
) -> u64 {
    let nodes = num_nodes(p, c);
    let m = nodes_per_cell(p);
    let blocks = block_nonzeros_from_totals(3, p.max(1), c.totals());
    let ho = 4 * m * c.cells + 24 * nodes;
    let matrix = blocks.saturating_mul(9 * scalar_bytes + 8) * 5 / 4;
    let positions = c.cells.saturating_mul(m * (2 * m + 1)) + 4 * nodes;
    let elements = if stored_elements {
        c.cells.saturating_mul(m * (m + 1) / 2 * 9 * scalar_bytes)
    } else {
        0
    };
    ho.saturating_add(matrix)
        .saturating_add(positions)
        .saturating_add(elements)
}

/// Bytes of a whole static solve (`tessera fem solve`): the mesh, assembly in f64 with
/// stored element matrices, the solver's vectors (~12 per DOF), and for the direct solver
/// the Cholesky factor (3D fill: about 15 times the stiffness matrix's non-zeros, a
/// nested-dissection estimate for meshes of ~10⁵-10⁶ DOFs).
pub fn static_solve_bytes(p: usize, c: &SimplexCounts, method: SolverMethod) -> u64 {
    let dofs = 3 * num_nodes(p, c);
    let blocks = block_nonzeros_from_totals(3, p.max(1), c.totals());
    let solver = match method {
        SolverMethod::Pcg => 12 * 8 * dofs,
        SolverMethod::Cholesky => 12 * 8 * dofs + blocks.saturating_mul(9 * 12 * 15 / 2),
    };
    mesh_bytes(c)
        .saturating_add(assembly_bytes(p, c, 8, true))
        .saturating_add(solver)
        // results: strain, stress (6 each), von Mises and the nodal output per node
        .saturating_add(16 * 8 * num_nodes(p, c))
}

/// Refuse a static solve of a generated mesh that would not fit in the memory budget
/// ([`tessera_core::memory`]).
pub fn check_problem(problem: &crate::problem::Problem) -> Result<(), tessera_core::CoreError> {
    if let Some(c) = source_counts(&problem.mesh) {
        let what = match &problem.mesh {
            MeshSource::Bracket(r) => format!("the bracket at resolution {r}"),
            MeshSource::Box { cells, .. } => {
                format!("the box of {}x{}x{} voxels", cells[0], cells[1], cells[2])
            }
            MeshSource::File(_) => unreachable!(),
        };
        tessera_core::memory::check(
            format!(
                "a static solve of {what} ({} tetrahedra, p = {}, {} DOFs)",
                c.cells,
                problem.order,
                3 * num_nodes(problem.order, &c)
            ),
            static_solve_bytes(problem.order, &c, problem.solver.method),
        )?;
    }
    Ok(())
}

/// The counts of a mesh read from a file, from its vertices and cells (edges and faces from
/// `V - E + F - T = 1` and `F ≈ 2 T`).
pub fn file_counts(vertices: usize, cells: usize) -> SimplexCounts {
    SimplexCounts {
        vertices: vertices as u64,
        edges: (vertices + cells) as u64,
        faces: 2 * cells as u64,
        cells: cells as u64,
    }
}

/// Refuse a static solve of a mesh read from `file` (counts `c`) that would not fit in the
/// memory budget: checked once the mesh is read, before the order-`p` mesh is built.
pub fn check_file_problem(
    file: &std::path::Path,
    c: &SimplexCounts,
    problem: &crate::problem::Problem,
) -> Result<(), tessera_core::CoreError> {
    tessera_core::memory::check(
        format!(
            "a static solve of {} ({} tetrahedra, p = {}, {} DOFs)",
            file.display(),
            c.cells,
            problem.order,
            3 * num_nodes(problem.order, c)
        ),
        static_solve_bytes(problem.order, c, problem.solver.method),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_counts_match_the_generated_box() {
        for n in [[1usize, 1, 1], [3, 2, 4], [5, 5, 5]] {
            let m =
                tessera_mesh::generate::box_mesh(tessera_mesh::generate::BoxKind::Tet, n, [1.0; 3]);
            let c = box_counts(n.map(|x| x as u64));
            assert_eq!(c.vertices as usize, m.num_vertices(), "{n:?}");
            assert_eq!(c.edges as usize, m.num_edges(), "{n:?}");
            assert_eq!(c.faces as usize, m.num_faces(), "{n:?}");
            assert_eq!(c.cells as usize, m.num_cells(), "{n:?}");
        }
    }

    #[test]
    fn bracket_counts_are_close() {
        for r in [12usize, 24] {
            let m = tessera_mesh::generate::bracket(r).unwrap();
            let c = bracket_counts(r);
            let ratio = c.cells as f64 / m.num_cells() as f64;
            assert!(
                (0.9..1.6).contains(&ratio),
                "r = {r}: {c:?} vs {}",
                m.num_cells()
            );
            let ratio = c.vertices as f64 / m.num_vertices() as f64;
            assert!(
                (0.9..1.8).contains(&ratio),
                "r = {r}: {c:?} vs {}",
                m.num_vertices()
            );
        }
    }

    #[test]
    fn huge_problems_are_refused_with_the_numbers() {
        let c = box_counts([400, 400, 400]);
        let need = static_solve_bytes(1, &c, SolverMethod::Pcg);
        let e = tessera_core::memory::check_against("box", need, 16_000_000_000, "MemAvailable")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("box needs ~") && e.contains("16 GB available"),
            "{e}"
        );
    }
}
