//! Errors of the mesh crate.

use std::path::PathBuf;

/// Errors of mesh construction, validation, operations and file IO.
#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    /// Topology that violates an invariant; `what` names the offending element.
    #[error("invalid topology: {0}")]
    InvalidTopology(String),
    /// A cell with zero (or non-finite) volume.
    #[error("degenerate cell {cell}: {reason}")]
    DegenerateCell { cell: usize, reason: String },
    /// A vertex position that is NaN or infinite.
    #[error("vertex {vertex} has a non-finite coordinate")]
    NonFinitePosition { vertex: usize },
    /// A NaN or infinite value found by a check of a pipeline stage (assembly, solve,
    /// results, writing), naming the first offending node or cell.
    #[error("{stage}: {what} is not finite ({value}) at {entity} {index}")]
    NonFiniteValue {
        stage: &'static str,
        what: String,
        entity: &'static str,
        index: usize,
        value: f64,
    },
    /// An index outside its range.
    #[error("{what} {index} out of range (there are {len})")]
    IndexOutOfRange {
        what: &'static str,
        index: u64,
        len: usize,
    },
    /// Errors from the TCSR layer.
    #[error(transparent)]
    Tcsr(#[from] tessera_sparse::TcsrError),
    /// A parse error with file, line (1-based; 0 when unknown) and, for binary files, byte offset.
    #[error("{}:{}: {msg}", path.display(), location)]
    Parse {
        path: PathBuf,
        location: String,
        msg: String,
    },
    /// An operating-system IO error on a path.
    #[error("{}: {}", path.display(), tessera_core::error::os_message(source))]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A topology violation found by `PolyMesh::validate`, naming the element (see
    /// [`crate::validate`]).
    #[error("invalid mesh: {entity} {index} {violation}")]
    Invalid {
        entity: crate::validate::Entity,
        index: usize,
        violation: crate::validate::Violation,
    },
    /// A refused input or output: not a regular file, a gzip stream over its limits, work
    /// larger than the memory available ([`tessera_core::CoreError`]).
    #[error(transparent)]
    Core(tessera_core::CoreError),
    /// Input the operation does not support (for example non-manifold input to subdivision).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A domain count the mesh cannot support ([`crate::partition`]).
    #[error("cannot split {cells} cells into {domains} domains: the domain count must be between 1 and the number of cells")]
    DomainCount { domains: usize, cells: usize },
    /// A domain that would hold no cell or own no node ([`crate::partition`]).
    #[error("domain {domain} of {domains} would own no {what}: use fewer domains for this mesh")]
    EmptyDomain {
        domain: usize,
        domains: usize,
        what: &'static str,
    },
    /// A partitioner failure or an inconsistent partition ([`crate::partition`]).
    #[error("partition: {0}")]
    Partition(String),
    /// A CUDA error from the GPU mesh operations ([`crate::cuda`]).
    #[error(transparent)]
    Gpu(#[from] tessera_gpu::GpuError),
}

impl From<tessera_core::CoreError> for MeshError {
    fn from(e: tessera_core::CoreError) -> Self {
        match e {
            tessera_core::CoreError::Io { path, err, .. } => MeshError::Io { path, source: err },
            other => MeshError::Core(other),
        }
    }
}

/// Longest message of a parse error, in characters (the file text it quotes is clipped).
const MAX_PARSE_MESSAGE: usize = 400;

impl MeshError {
    /// A parse error at a 1-based line.
    /// The message is kept to one line of bounded length (file text quoted in it may hold
    /// newlines or be arbitrarily long).
    pub fn parse_line(path: impl Into<PathBuf>, line: usize, msg: impl Into<String>) -> Self {
        MeshError::Parse {
            path: path.into(),
            location: format!("line {line}"),
            msg: tessera_core::error::clip(&msg.into(), MAX_PARSE_MESSAGE),
        }
    }
    /// A parse error at a byte offset (binary files).
    pub fn parse_offset(path: impl Into<PathBuf>, offset: u64, msg: impl Into<String>) -> Self {
        MeshError::Parse {
            path: path.into(),
            location: format!("byte {offset}"),
            msg: tessera_core::error::clip(&msg.into(), MAX_PARSE_MESSAGE),
        }
    }
}
