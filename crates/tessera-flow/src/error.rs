//! Errors of the simulation back-ends.

use tessera_gpu::GpuError;

/// Everything a simulation back-end can fail with.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// A parameter (grid size, scene name, obstacle, ...) is invalid; the message names it.
    #[error("{0}")]
    Invalid(String),
    /// A field name that the simulation does not have.
    #[error("unknown field `{name}` (this simulation has: {available})")]
    UnknownField { name: String, available: String },
    /// Reading or writing a file failed.
    #[error("{path}: {msg}")]
    Io { path: String, msg: String },
    /// A CUDA failure.
    #[error("GPU: {0}")]
    Gpu(#[from] GpuError),
}
