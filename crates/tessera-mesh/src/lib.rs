//! Volumetric meshes of dissertation Chapter 3.
//!
//! A [`PolyMesh`] stores a general polyhedral mesh by its boundary operators
//! (dissertation §3.3, §3.4): ∂1 as ordered vertex pairs, ∂2 (faces -> signed edges) and
//! ∂3 (cells -> signed faces) as ternary CSR matrices, plus vertex positions. Coboundaries
//! and indirect relations are derived on request and cached.

pub mod boundary;
pub mod builder;
pub mod cell_type;
pub mod cuda;
pub mod error;
pub mod generate;
pub mod io;
pub mod mesh_matrix;
pub mod partition;
pub mod poly;
pub mod quality;
pub mod relations;
pub mod simplex;
pub mod smooth;
pub mod subdivide;
pub mod validate;

pub use builder::PolyMeshBuilder;
pub use cell_type::CellType;
pub use error::MeshError;
pub use poly::PolyMesh;

/// A position in R^3.
pub type Point = [f64; 3];
