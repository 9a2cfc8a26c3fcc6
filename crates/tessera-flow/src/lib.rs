//! Simulation back-ends for streaming visualization (dissertation Chapter 6).
//!
//! The streaming server (§6.3.1) and the query compiler (§6.3.4) consume simulations through
//! one interface, [`Simulation`]: advance a step, report the simulated time, describe the
//! grid, and hand out named fields where they live (host slices on the CPU, device buffers on
//! the GPU), so that a derived field is computed next to the data and only what a client asked
//! for is copied.
//!
//! The fluid back-end (§6.3.2) is a pipeline of small stages: a [`scene`] names a
//! [`FluidSetup`] (grid, sides, obstacles as signed distances, smoke sources) ->
//! [`geometry`] measures the cut cells (open face areas, fluid volumes; [`surface`] turns a
//! closed mesh into a distance lattice first) -> [`poisson`] builds Eq. 6.3 on the grid and
//! rediscretizes it level by level into the Galerkin-consistent multigrid hierarchy ->
//! [`Fluid`] steps (advection, forces, projection by MGPCG; [`fluid::mac`] holds the CPU
//! reference of every stage, [`cuda`] the GPU kernels) -> [`run`] / [`vtk`] write snapshots,
//! [`bench`] measures (`tessera bench flow`).
//!
//! - [`analytic`]: a closed-form, time-varying 2D source (a travelling Taylor-Green vortex
//!   lattice) that the server and its tests use when no solver is wanted;
//! - [`shallow_water`]: the GPU flood simulation of §6.3.5 (Kurganov-Petrova on active
//!   16x16 tiles) with its CPU reference.
//!
//! ```
//! use tessera_flow::{scene, Fluid, Simulation, FieldData};
//! let (setup, _info) = scene::build("smoke2d", Some(&[32, 32]), None).unwrap();
//! let mut fluid = Fluid::new(setup, None).unwrap(); // CPU
//! let report = fluid.step().unwrap();
//! assert!(report.dt > 0.0 && fluid.steps() == 1);
//! let FieldData::Host(p) = fluid.field("Pressure").unwrap() else { unreachable!() };
//! assert_eq!(p.len(), 32 * 32);
//! ```

// Index loops mirror the CUDA kernels' indexing; iterators would obscure the stencils.
#![allow(clippy::needless_range_loop)]

pub mod analytic;
pub mod bench;
pub mod cuda;
pub mod error;
pub mod fluid;
pub mod geometry;
pub mod poisson;
pub mod real;
pub mod run;
pub mod scene;
pub mod shallow_water;
pub mod simulation;
pub mod strouhal;
pub mod surface;
pub mod vtk;

pub use analytic::AnalyticSource;
pub use error::FlowError;
pub use fluid::{Fluid, FluidParams, FluidSetup};
pub use simulation::{FieldData, FieldInfo, FieldLocation, Grid, Simulation, StepReport};
