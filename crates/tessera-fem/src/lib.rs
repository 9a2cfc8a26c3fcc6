//! Higher-order simplex FEM assembly (dissertation Chapter 4; paper: seed 001).

pub mod multi_index;
pub mod solve;
