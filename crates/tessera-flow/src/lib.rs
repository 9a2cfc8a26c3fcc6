//! Simulation back-ends for streaming visualization (dissertation Chapter 6).
//!
//! The streaming server (§6.3.1) and the query compiler (§6.3.4) consume simulations through
//! one interface, [`Simulation`]: advance a step, report the simulated time, describe the
//! grid, and hand out named fields where they live (host slices on the CPU, device buffers on
//! the GPU), so that a derived field is computed next to the data and only what a client asked
//! for is copied.
//!
//! - [`simulation`]: the interface and its vocabulary ([`Grid`], [`FieldInfo`], [`FieldData`]);
//! - [`analytic`]: a closed-form, time-varying 2D source (a travelling Taylor-Green vortex
//!   lattice) that the server and its tests use when no solver is wanted.

pub mod analytic;
pub mod error;
pub mod simulation;

pub use analytic::AnalyticSource;
pub use error::FlowError;
pub use simulation::{FieldData, FieldInfo, FieldLocation, Grid, Simulation, StepReport};
