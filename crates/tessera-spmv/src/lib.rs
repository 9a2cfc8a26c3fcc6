//! SpMV code generation and joint schedule/layout autotuning for sparse matrices with
//! compound entries (dissertation Chapter 5; extended analysis in seed 002).
//!
//! - [`entry`]: compound entry specifications (§5.3.2): built-ins and user TOML specs.
//! - [`layout`]: outer (CSR, ELLPACK-R, Sliced ELLPACK), inner and vector (AoS/SoA) layouts,
//!   conversion from host CSR, a CPU reference SpMV per layout, memory overhead (seed 002 Table 9).
//! - [`schedule`]: static and dynamic schedules, n_b / n_t candidate sets (§5.3.3).
//! - [`codegen`]: minijinja templates rendering the CUDA source deterministically.
//! - [`matrices`]: Matrix Market reader, quaternionic Dirac operators of triangle meshes,
//!   3x3-block elasticity matrices of tetrahedral grids, the 4x4 real expansion (Eq. 5.1).
//! - [`tuning`]: the autotuner (full joint and fast diagonal search) and its persistent database.
//! - [`gpu`]: running generated variants on a CUDA device through `tessera-gpu`.

pub mod bench;
pub mod codegen;
pub mod entry;
pub mod error;
pub mod gpu;
pub mod layout;
pub mod matrices;
pub mod scalar;
pub mod schedule;
pub mod tuning;

pub use entry::{EntrySpec, Term};
pub use error::{Result, SpmvError};
pub use layout::{Aos, CsrMatrix, Layout, LayoutMatrix, Outer};
pub use scalar::{Precision, Scalar};
pub use schedule::{DeviceLimits, Schedule, ScheduleKind};
