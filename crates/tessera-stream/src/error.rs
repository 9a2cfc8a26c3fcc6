//! Errors of the streaming server, its protocol and its clients.

use tessera_flow::FlowError;

/// Everything the streaming crate can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// A server message that does not follow the framing of `tessera_stream.proto`.
    #[error("malformed server message: {0}")]
    Framing(String),
    /// A protobuf message that does not decode.
    #[error("protobuf decode: {0}")]
    Decode(#[from] prost::DecodeError),
    /// The peer sent something the protocol does not allow at this point.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The server refused a request (its `Error` message).
    #[error("server error ({code}): {message}")]
    Server { code: String, message: String },
    /// A query expression that did not compile (its `QueryError` message).
    #[error("query `{expression}`: {message}")]
    Query {
        expression: String,
        message: String,
        span: Option<(u32, u32)>,
    },
    /// A WebSocket failure (connection refused, closed, handshake rejected, ...).
    #[error("websocket: {0}")]
    WebSocket(String),
    /// An I/O failure (binding, connecting, files).
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A simulation back-end failure.
    #[error("simulation: {0}")]
    Flow(#[from] FlowError),
    /// A bad argument (URL, grid, option); the message names it.
    #[error("{0}")]
    Invalid(String),
    /// Waiting for the peer took longer than allowed.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The headless browser could not be driven (missing, crashed, page error).
    #[error("browser: {0}")]
    Browser(String),
}

impl StreamError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        StreamError::Io {
            context: context.into(),
            source,
        }
    }
}

impl From<tokio_tungstenite::tungstenite::Error> for StreamError {
    fn from(e: tokio_tungstenite::tungstenite::Error) -> Self {
        StreamError::WebSocket(e.to_string())
    }
}
