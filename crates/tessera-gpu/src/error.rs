//! Errors of the CUDA runtime (one enum for the crate).

use std::path::PathBuf;

/// Everything that can go wrong between Tessera and a CUDA device.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// The CUDA driver library (`libcuda.so.1`) could not be found or loaded.
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    /// The driver loaded but there is no usable device with that ordinal.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// The NVRTC run-time compiler library (`libnvrtc.so*`) could not be found or loaded.
    #[error("no NVRTC (CUDA run-time compiler): {0}")]
    NoNvrtc(String),
    /// A CUDA driver call failed.
    #[error("CUDA {op} failed: {msg}")]
    Driver { op: &'static str, msg: String },
    /// NVRTC rejected a kernel source; keeps the compile log and the options used.
    #[error("NVRTC could not compile `{name}` (options: {}):\n{log}", options.join(" "))]
    Compile {
        name: String,
        options: Vec<String>,
        log: String,
    },
    /// A loaded module has no function of that name.
    #[error("module `{module}` has no kernel named `{name}`")]
    MissingKernel { module: String, name: String },
    /// The on-disk kernel cache could not be read or written.
    #[error("kernel cache {}: {msg}", path.display())]
    Cache { path: PathBuf, msg: String },
    /// An argument out of the supported range (sizes, lengths, launch shapes).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The NCCL library (`libnccl.so.2`) could not be found or loaded.
    #[error("{0}")]
    NoNccl(String),
    /// An NCCL call failed.
    #[error("NCCL {op} failed: {msg}")]
    Nccl { op: &'static str, msg: String },
    /// A CUDA library call panicked (cudarc panics on missing symbols); caught, never propagated.
    #[error("CUDA library panicked in {op}: {msg}")]
    Panicked { op: &'static str, msg: String },
}

impl GpuError {
    pub(crate) fn driver(op: &'static str, e: impl std::fmt::Display) -> Self {
        GpuError::Driver {
            op,
            msg: e.to_string(),
        }
    }
}

/// Result alias of this crate.
pub type GpuResult<T> = Result<T, GpuError>;

/// Run a closure that calls into cudarc, turning a panic into [`GpuError::Panicked`]
/// (second line of defence behind the library probe, see [`crate::probe`]).
pub(crate) fn guard<T>(op: &'static str, f: impl FnOnce() -> GpuResult<T>) -> GpuResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = if let Some(s) = p.downcast_ref::<&str>() {
                (*s).to_string()
            } else if let Some(s) = p.downcast_ref::<String>() {
                s.clone()
            } else {
                "unknown panic payload".to_string()
            };
            Err(GpuError::Panicked { op, msg })
        }
    }
}
