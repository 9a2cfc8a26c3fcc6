//! Higher-order simplex FEM assembly (dissertation Chapter 4; paper: seed 001). The linear
//! solvers live in `tessera-solve`.

pub mod assemble;
pub mod count;
pub mod cuda;
pub mod domain;
pub mod domain_gpu;
pub mod domain_solve;
pub mod element;
pub mod error;
pub mod estimate;
pub mod loads;
pub mod material;
pub mod multi_index;
pub mod multigrid;
pub mod nodes;
pub mod pattern;
pub mod problem;
pub mod quadrature;
pub mod results;
pub mod static_solve;
pub mod vtk_ho;
