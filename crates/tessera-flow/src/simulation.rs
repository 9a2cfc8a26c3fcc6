//! The interface between simulation back-ends and their consumers (dissertation §6.3.1: the
//! simulation back-end provides named result fields, the front-end requests them).

use std::sync::Arc;

use tessera_gpu::{DeviceBuffer, Gpu};

use crate::FlowError;

/// A regular grid of cells: `dims = [nx, ny, nz]` (`nz = 1` in 2D), uniform `spacing`, and
/// the world position of the grid's lower corner. Fields are stored x fastest, then y, then z:
/// cell `(i, j, k)` is at index `i + nx * (j + ny * k)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    pub dims: [usize; 3],
    pub spacing: f64,
    pub origin: [f64; 3],
}

impl Grid {
    /// A 2D grid of `nx x ny` cells.
    pub fn new_2d(nx: usize, ny: usize, spacing: f64) -> Self {
        Grid {
            dims: [nx, ny, 1],
            spacing,
            origin: [0.0; 3],
        }
    }
    /// Number of cells.
    pub fn num_cells(&self) -> usize {
        self.dims[0] * self.dims[1] * self.dims[2]
    }
    /// 2 or 3.
    pub fn dimension(&self) -> usize {
        if self.dims[2] > 1 {
            3
        } else {
            2
        }
    }
}

/// Where on the grid a field's values sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldLocation {
    /// One value per cell (cell-centred; staggered quantities are averaged to centres).
    Cell,
}

/// The description of one named field, as the streaming protocol's hello lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldInfo {
    /// The identifier used in queries (`Pressure`, `VelocityX`, ...).
    pub name: String,
    /// Physical unit, SI (`Pa`, `m/s`, `1`).
    pub unit: String,
    pub location: FieldLocation,
}

impl FieldInfo {
    pub fn cell(name: &str, unit: &str) -> Self {
        FieldInfo {
            name: name.to_string(),
            unit: unit.to_string(),
            location: FieldLocation::Cell,
        }
    }
}

/// A field's current values where they live: `grid().num_cells()` values of f32.
pub enum FieldData<'a> {
    /// In host memory (CPU back-ends).
    Host(&'a [f32]),
    /// In device memory on [`Simulation::gpu`] (GPU back-ends); read it on that device.
    Device(&'a DeviceBuffer<f32>),
}

/// What one call of [`Simulation::step`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepReport {
    /// The time step taken (simulated seconds).
    pub dt: f64,
    /// Wall-clock milliseconds the step took.
    pub wall_ms: f64,
    /// Back-end specific counters in run order (for example `("cycles", 4.0)`).
    pub stats: Vec<(&'static str, f64)>,
}

/// A running simulation whose fields can be streamed and queried.
///
/// Contract: after `step` returns, every field returned by [`Simulation::field`] holds values
/// of the same simulated time [`Simulation::time`]; a field borrowed from the simulation stays
/// valid until the next `step` (the borrow checker enforces this).
pub trait Simulation: Send {
    /// The scene's name (`cylinder2d`, `analytic`, ...).
    fn name(&self) -> &str;
    /// The grid the fields live on.
    fn grid(&self) -> Grid;
    /// The fields this simulation provides, in a stable order.
    fn fields(&self) -> &[FieldInfo];
    /// Advance by one time step.
    fn step(&mut self) -> Result<StepReport, FlowError>;
    /// Simulated time in seconds.
    fn time(&self) -> f64;
    /// Number of steps taken so far.
    fn steps(&self) -> u64;
    /// The current values of field `name`.
    fn field(&self, name: &str) -> Result<FieldData<'_>, FlowError>;
    /// The GPU that holds [`FieldData::Device`] fields, `None` for a CPU simulation.
    fn gpu(&self) -> Option<&Arc<Gpu>>;
}

/// The error for a field name that `sim` does not have.
pub fn unknown_field(sim: &dyn Simulation, name: &str) -> FlowError {
    FlowError::UnknownField {
        name: name.to_string(),
        available: sim
            .fields()
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    }
}
