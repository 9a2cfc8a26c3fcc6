//! Errors of the renderer and the rixel codec (one enum for the crate).

use tessera_gpu::GpuError;

/// Everything rendering, encoding or decoding a rixel frame can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A parameter (viewport size, camera, scene, option) is invalid; the message names it.
    #[error("{0}")]
    Invalid(String),
    /// A surface violates its invariants; the message names the offending element.
    #[error("invalid surface: {0}")]
    Surface(String),
    /// A byte stream is not a valid rixel frame; `offset` is where reading stopped.
    #[error("bad rixel frame at byte {offset}: {msg}")]
    Frame { offset: usize, msg: String },
    /// A surface file could not be parsed (file, line, what was wrong).
    #[error("{path}:{line}: {msg}")]
    Parse {
        path: String,
        line: usize,
        msg: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// An input file refused before parsing (not a regular file, over the input limits); the
    /// message names the file.
    #[error(transparent)]
    Input(#[from] tessera_core::CoreError),
    /// A CUDA failure.
    #[error("GPU: {0}")]
    Gpu(#[from] GpuError),
}

impl RenderError {
    pub(crate) fn frame(offset: usize, msg: impl Into<String>) -> Self {
        RenderError::Frame {
            offset,
            msg: msg.into(),
        }
    }
}
