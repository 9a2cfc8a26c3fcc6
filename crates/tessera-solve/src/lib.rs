//! Linear solvers and preconditioners for block-sparse symmetric positive definite systems
//! (dissertation §4.1, §4.4.2): the static FEM system `K u = f` with Dirichlet constraints.
//!
//! Pipeline: an operator of `e × e` node blocks ([`BlockOperator`]: Bin-BCSR* of the
//! dissertation's §4.4.2, or a coarse-level matrix) and [`Constraints`] applied by a filter
//! -> a preconditioner ([`Preconditioner`]: [`BlockJacobi`]) -> the filtered PCG of Baraff
//! and Witkin ([`pcg`], [`pcg_with`]) -> a [`SolveReport`] with the residual history. The
//! direct sparse Cholesky ([`cholesky`]) solves the same constrained system by elimination.
//! Every algorithm has this CPU reference; [`cuda`] runs the same iteration on a GPU
//! ([`cuda::pcg_gpu`] over a [`cuda::DeviceOperator`]).
//!
//! ```
//! use std::sync::Arc;
//! use tessera_solve::{pcg, Constraints, PcgParams};
//! use tessera_sparse::binbcsr::{BinBcsr, BinBcsrPattern};
//! // a chain of three unit springs (e = 1): node 0 fixed at 0, a unit force on node 2
//! let rows = vec![vec![1], vec![0, 2], vec![1]];
//! let p = Arc::new(BinBcsrPattern::from_rows(1, &rows).unwrap());
//! let mut k = BinBcsr::<f64>::zeros(p.clone());
//! let idx: Vec<Vec<usize>> = (0..3)
//!     .map(|i| (0..rows[i].len()).map(|s| k.value_index(p.slot(i, s), 0, 0)).collect())
//!     .collect();
//! let (vals, diag) = k.values_diag_mut();
//! diag.copy_from_slice(&[1.0, 2.0, 1.0]);
//! for i in 0..3 {
//!     for &at in &idx[i] {
//!         vals[at] = -1.0;
//!     }
//! }
//! let mut cons = Constraints::none(3);
//! cons.fix(0, 1, 0, 0.0);
//! let mut u = Vec::new();
//! let report = pcg(&k, &[0.0, 0.0, 1.0], &cons, &PcgParams::default(), &mut u).unwrap();
//! assert!((u[2] - 2.0).abs() < 1e-9 && report.iterations <= 2);
//! ```

pub mod aggregation;
pub mod amg;
pub mod blockcsr;
pub mod cholesky;
pub mod constraints;
pub mod cuda;
pub mod dense;
pub mod domain_amg;
pub mod error;
pub mod jacobi;
pub mod matrix_market;
pub mod monitor;
pub mod nullspace;
pub mod operator;
pub mod partitioned;
pub mod pcg;
pub mod pmg;
pub mod smoother;

pub use amg::{Amg, AmgParams, Cycle};
pub use blockcsr::BlockCsr;
pub use constraints::Constraints;
pub use domain_amg::{CoarseCombination, TwoLevelDomainAmg};
pub use error::SolveError;
pub use jacobi::{invert_small, BlockJacobi};
pub use nullspace::NearNullSpace;
pub use operator::{dot, BlockOperator, Preconditioner};
pub use partitioned::{
    Communicator, DomainAmg, DomainMatrix, HaloPlan, InProcess, PartitionedOperator,
};
pub use pcg::{pcg, pcg_with, relative_residual, PcgParams, SolveReport};
pub use pmg::{PMultigrid, PmgParams};
pub use smoother::Smoother;
