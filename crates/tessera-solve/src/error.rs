//! Errors of the linear solvers and preconditioners (one enum for the crate).

use tessera_sparse::binbcsr::BinBcsrError;

/// Solver, preconditioner and device failures.
#[derive(Debug, thiserror::Error)]
pub enum SolveError {
    #[error("vector length {found} does not match the operator's {expected} DOFs")]
    Dimension { expected: usize, found: usize },
    #[error("the problem is unconstrained: no Dirichlet DOF is fixed, so the stiffness matrix is singular (rigid-body modes); fix some boundary region")]
    Unconstrained,
    /// The fixed DOFs leave rigid-body motions of the body unconstrained.
    #[error("the stiffness matrix is singular: the constraints leave rigid-body modes free ({free}: {modes}); fix more components or regions")]
    RigidModesFree { free: usize, modes: String },
    #[error("the system is singular on the free DOFs (cᵀAc = {value:e} at iteration {iteration}): the constraints do not remove all rigid-body modes, or the material is invalid")]
    Singular { iteration: usize, value: f64 },
    #[error("the stiffness matrix on the free DOFs is not positive definite (Cholesky pivot {index}): the constraints do not remove all rigid-body modes")]
    NotPositiveDefinite { index: usize },
    #[error("diagonal block of node {node} is singular: a node with no stiffness (unused node or zero material)")]
    SingularBlock { node: usize },
    #[error("non-finite value in the {what} at iteration {iteration}")]
    NonFinite {
        what: &'static str,
        iteration: usize,
    },
    #[error("PCG diverged: relative residual {residual:e} at iteration {iteration}")]
    Diverged { iteration: usize, residual: f64 },
    #[error("PCG did not converge in {iterations} iterations: relative residual {residual:e} > tolerance {tolerance:e}")]
    NotConverged {
        iterations: usize,
        residual: f64,
        tolerance: f64,
    },
    /// A preconditioner setting outside its range, or an input the method cannot use.
    #[error("{what}: {message}")]
    InvalidInput { what: &'static str, message: String },
    /// A size that does not fit the 32-bit indices of the hierarchy.
    #[error("too large: {0}")]
    TooLarge(String),
    /// The device could not run an operation.
    #[error("device {device}: {reason}")]
    Device { device: String, reason: String },
    /// Bin-BCSR* errors.
    #[error(transparent)]
    Sparse(#[from] BinBcsrError),
}

impl From<tessera_gpu::GpuError> for SolveError {
    fn from(e: tessera_gpu::GpuError) -> Self {
        SolveError::Device {
            device: "cuda".into(),
            reason: e.to_string(),
        }
    }
}
