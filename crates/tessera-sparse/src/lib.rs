//! Sparse matrix formats of the dissertation (Ch. 2.2, §3.4, §4.4.2).
//!
//! - [`tcsr`]: ternary CSR, the storage of the boundary operators of a polyhedral mesh
//!   (dissertation §3.4): entries in {-1, 0, 1}, the sign stored in the column index.

pub mod binbcsr;
pub mod tcsr;
pub mod transpose;

pub use tcsr::{decode, encode, Tcsr, TcsrError};
