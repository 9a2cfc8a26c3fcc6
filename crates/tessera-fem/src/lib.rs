//! Higher-order simplex FEM assembly (dissertation Chapter 4; paper: seed 001).

pub mod assemble;
pub mod element;
pub mod error;
pub mod material;
pub mod count;
pub mod multi_index;
pub mod nodes;
pub mod pattern;
pub mod quadrature;
pub mod solve;
