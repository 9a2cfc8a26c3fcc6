//! Errors of the query compiler (dissertation §6.3.4). Every error about the expression
//! carries the byte span it refers to (DESIGN.md principle 6).

use std::fmt;

/// A half-open byte range `start..end` into the expression text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bytes {}..{}", self.start, self.end)
    }
}

/// Everything that can go wrong when compiling or evaluating a query.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The text does not follow the grammar.
    #[error("syntax error at {span}: expected {expected}, found {found}")]
    Syntax {
        span: Span,
        expected: String,
        found: String,
    },
    /// An identifier that is neither a field, a constant nor a function.
    #[error("unknown field `{name}` at {span}; available fields: {}", list(.available))]
    UnknownField {
        span: Span,
        name: String,
        available: Vec<String>,
    },
    /// A call of a function that the language does not have.
    #[error("unknown function `{name}` at {span}; available functions: {}", crate::ast::FUNCTION_NAMES.join(", "))]
    UnknownFunction { span: Span, name: String },
    /// A known function called with the wrong number of arguments.
    #[error("function `{name}` at {span} takes {expected} argument(s), got {got}")]
    Arity {
        span: Span,
        name: String,
        expected: usize,
        got: usize,
    },
    /// A numeric literal that is not finite in f64 (or malformed).
    #[error("numeric literal `{text}` at {span} is out of range (must be finite in f64)")]
    LiteralOutOfRange { span: Span, text: String },
    /// Expression text longer than [`crate::limits::MAX_EXPR_LEN`].
    #[error("expression too long: {len} bytes (limit {max}) at {span}")]
    TooLong { span: Span, len: usize, max: usize },
    /// Nesting deeper than [`crate::limits::MAX_DEPTH`].
    #[error("expression nested too deeply at {span} (limit {max} levels)")]
    TooDeep { span: Span, max: usize },
    /// More syntax-tree nodes than [`crate::limits::MAX_NODES`].
    #[error("expression has too many terms at {span} (limit {max} nodes)")]
    TooManyNodes { span: Span, max: usize },
    /// A field name given by the caller that cannot be used as an identifier.
    #[error("invalid field name `{name}`: {why}")]
    InvalidFieldName { name: String, why: &'static str },
    /// Evaluation was given the wrong number of input arrays.
    #[error("query over {expected} field(s) got {got} input array(s)")]
    FieldCount { expected: usize, got: usize },
    /// Input and output arrays must all have the same length.
    #[error("input `{field}` has {got} values, output has {expected}")]
    LengthMismatch {
        field: String,
        expected: usize,
        got: usize,
    },

    /// The Cranelift back end failed (a bug or an unsupported host).
    #[error("CPU JIT: {0}")]
    Jit(String),
    /// The GPU back end failed (no device, driver or PTX load error).
    #[error("GPU: {0}")]
    Gpu(String),
    /// A field file (`.npy`) that cannot be read as stated.
    #[error("{}: {msg}", path.display())]
    FieldFile {
        path: std::path::PathBuf,
        msg: String,
    },
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "(none)".to_string()
    } else {
        v.join(", ")
    }
}

impl QueryError {
    /// The span in the expression this error refers to, if any.
    pub fn span(&self) -> Option<Span> {
        use QueryError::*;
        match self {
            Syntax { span, .. }
            | UnknownField { span, .. }
            | UnknownFunction { span, .. }
            | Arity { span, .. }
            | LiteralOutOfRange { span, .. }
            | TooLong { span, .. }
            | TooDeep { span, .. }
            | TooManyNodes { span, .. } => Some(*span),
            _ => None,
        }
    }
}
