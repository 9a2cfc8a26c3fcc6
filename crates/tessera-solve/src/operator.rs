//! The operator abstraction of the solvers: a symmetric linear operator made of `e × e`
//! blocks (node blocks; `e = 3` for 3D elasticity, dissertation §4.3, Eq. 4.1), and the
//! preconditioner it is paired with.
//!
//! Bin-BCSR* ([`BinBcsr`], dissertation §4.4.2) and the coarse-level matrices of the
//! multigrid hierarchy ([`crate::BlockCsr`]) implement [`BlockOperator`]; their device
//! counterparts implement [`crate::cuda::DeviceOperator`]. Dot products go through
//! [`BlockOperator::dot`], so an operator distributed over several domains can replace the
//! local sum by a global reduction without touching the solvers.

use rayon::prelude::*;
use tessera_core::Par;
use tessera_sparse::binbcsr::BinBcsr;

/// A symmetric linear operator made of `e × e` blocks, as the solvers need it.
pub trait BlockOperator: Sync {
    /// Number of block rows (nodes).
    fn num_block_rows(&self) -> usize;
    /// Block size `e` (DOFs per node).
    fn block_size(&self) -> usize;
    /// `y = A x` (scalar vectors of length `num_block_rows() * block_size()`, node-major).
    fn apply(&self, x: &[f64], y: &mut [f64]);
    /// The diagonal block of node `i`, row-major, into `out` (`e * e` values).
    fn diagonal_block(&self, i: usize, out: &mut [f64]);
    /// `aᵀb` over the operator's vectors. The default is the deterministic local sum
    /// [`dot`]; a domain-partitioned operator overrides it with a global reduction.
    fn dot(&self, a: &[f64], b: &[f64]) -> f64 {
        dot(a, b)
    }
    /// Scalar DOFs `num_block_rows() * block_size()`.
    fn num_dofs(&self) -> usize {
        self.num_block_rows() * self.block_size()
    }
}

/// A preconditioner `M⁻¹` for PCG: `z = M⁻¹ r`. It must be symmetric positive definite on
/// the free DOFs for PCG to stay valid.
pub trait Preconditioner: Sync {
    /// `z = M⁻¹ r` (`z` is overwritten).
    fn apply(&self, r: &[f64], z: &mut [f64]);
}

/// Elements per chunk of the deterministic reductions: each chunk is summed in index order,
/// then the chunk sums in chunk order, so the result does not depend on the thread count.
pub const DOT_CHUNK: usize = 8192;

/// Deterministic `aᵀb` (fixed chunking, see [`DOT_CHUNK`]).
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.par_chunks(DOT_CHUNK)
        .zip(b.par_chunks(DOT_CHUNK))
        .map(|(x, y)| x.iter().zip(y).map(|(p, q)| p * q).sum::<f64>())
        .collect::<Vec<_>>()
        .iter()
        .sum()
}

/// Bin-BCSR* as the solvers' operator: `apply` is the bin-parallel CPU SpMV, the diagonal
/// blocks come from the separately stored dense block diagonal (dissertation §4.4.2).
impl BlockOperator for BinBcsr<f64> {
    fn num_block_rows(&self) -> usize {
        self.pattern().num_block_rows()
    }
    fn block_size(&self) -> usize {
        self.pattern().block_dim()
    }
    fn apply(&self, x: &[f64], y: &mut [f64]) {
        self.spmv(Par::Rayon, x, y)
            .expect("solver vectors have the operator's length");
    }
    fn diagonal_block(&self, i: usize, out: &mut [f64]) {
        let e = self.pattern().block_dim();
        out[..e * e].copy_from_slice(&self.diag()[i * e * e..(i + 1) * e * e]);
    }
}

/// The identity, as a (trivial) preconditioner.
pub struct Identity;

impl Preconditioner for Identity {
    fn apply(&self, r: &[f64], z: &mut [f64]) {
        z.copy_from_slice(r);
    }
}
