//! Streaming visualization (dissertation Chapter 6: §6.3.1 front-end, §6.3.3 protocol,
//! §6.4.1-6.4.2 results): a simulation runs on the server; clients receive floating-point
//! fields, not images, so color mapping, probing and 2D zoom/pan happen on the client without
//! a round trip; derived fields are computed on the server by the query compiler where the
//! data lives, so only the derived field crosses PCIe and the network.
//!
//! Pipeline: a [`tessera_flow::Simulation`] steps on its own thread ([`hub`]) -> after each step,
//! for every subscription a client is waiting for, [`frame`] copies the requested fields out of
//! the simulation, evaluates the query expression (GPU JIT next to device fields, CPU JIT
//! otherwise) and writes one aligned message ([`wire`]: protobuf header + raw arrays at 8-byte
//! aligned offsets, documented byte by byte in `proto/tessera_stream.proto`) -> each
//! connection's writer ([`server`]) sends the newest frame when the client has a frame request
//! outstanding (pull flow control: N requests outstanding, N = 2 double buffering) -> the
//! browser client ([`web`]) views the payload as a `Float32Array` without copying, uploads it
//! as an R32F texture and colors it in a fragment shader; the headless [`client`] does the
//! same in Rust for tests and [`bench`]marks.
//! Besides running simulations ([`source`]), [`results`] serves a finished `fem solve`: a slice
//! plane through its `.vtu` fields resampled to a grid, as a source that does not change.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tessera_flow::AnalyticSource;
//! use tessera_stream::{client::Client, pb::Encoding, serve, ServerConfig};
//! let rt = tokio::runtime::Runtime::new()?;
//! rt.block_on(async {
//!     let config = ServerConfig { bind: "127.0.0.1:0".parse()?, ..Default::default() };
//!     let server = serve(config, Box::new(AnalyticSource::new(64, 32, 0.01)?)).await?;
//!     let mut client = Client::connect(&server.ws_url()).await?;
//!     assert_eq!(client.hello.simulation, "analytic");
//!     client.subscribe(&["VelocityX"], "sqrt(VelocityX^2+VelocityY^2)", Encoding::F32, 1).await?;
//!     client.request(2).await?; // double buffering
//!     let frame = client.next_frame(std::time::Duration::from_secs(10)).await?;
//!     assert_eq!(frame.values(1).len(), 64 * 32); // the derived field, viewed in place
//!     server.shutdown().await;
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })
//! # }
//! ```

pub mod bench;
pub mod browser;
pub mod client;
pub mod error;
pub mod f16;
pub mod frame;
pub mod hub;
pub mod results;
pub mod rixel;
pub mod server;
pub mod source;
pub mod throttle;
pub mod web;
pub mod wire;

/// The generated protobuf types of `proto/tessera_stream.proto` (prost, compiled at build
/// time by protox: no `protoc` needed).
pub mod pb {
    #![allow(clippy::all)]
    include!(concat!(env!("OUT_DIR"), "/tessera.stream.v1.rs"));
}

/// The protocol definition, as served at `/tessera_stream.proto` for third-party clients.
pub const PROTO_SOURCE: &str = include_str!("../proto/tessera_stream.proto");

pub use error::StreamError;
pub use server::{serve, RunningServer, ServerConfig};
