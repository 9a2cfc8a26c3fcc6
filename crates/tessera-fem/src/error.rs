//! Errors of FEM setup and assembly (dissertation Chapter 4).

/// Errors of element computation, pattern construction and assembly.
#[derive(Debug, thiserror::Error)]
pub enum FemError {
    /// Material parameters outside their physical range.
    #[error("invalid material: {0}")]
    InvalidMaterial(String),
    /// Polynomial order outside the supported range.
    #[error("polynomial order p = {0} is not supported (need 1 <= p <= 12)")]
    InvalidOrder(usize),
    /// Simplex dimension other than 2 (triangles) or 3 (tetrahedra).
    #[error("simplex dimension d = {0} is not supported (need 2 or 3)")]
    UnsupportedDimension(usize),
    /// A cell with zero or non-finite volume.
    #[error("degenerate cell {cell}: volume {volume:e}")]
    DegenerateCell { cell: usize, volume: f64 },
    /// A triangle of a 2D (plane strain) problem that does not lie in a plane z = const.
    #[error(
        "cell {cell}: triangles must lie in a plane z = const for 2D (plane strain) elasticity"
    )]
    NotPlanar { cell: usize },
    /// Eq. 4.6 and the column-index fill disagree (a corrupt or non-conforming mesh).
    #[error("row {row}: Eq. 4.6 predicts {expected} non-zero blocks, the cells give {found}")]
    PatternMismatch {
        row: usize,
        expected: u32,
        found: u32,
    },
    /// A size that does not fit 32-bit indices.
    #[error("too large: {0}")]
    TooLarge(String),
    /// The requested device cannot run this operation.
    #[error("device {device}: {reason}")]
    Device { device: String, reason: String },
    /// Inconsistent input to an assembly step (for example a row subset that is not a
    /// permutation of the mesh's nodes).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Bin-BCSR* errors.
    #[error(transparent)]
    Sparse(#[from] tessera_sparse::binbcsr::BinBcsrError),
    /// Device matrix and solver errors.
    #[error(transparent)]
    Solve(#[from] tessera_solve::SolveError),
    /// Mesh errors.
    #[error(transparent)]
    Mesh(#[from] tessera_mesh::MeshError),
}
