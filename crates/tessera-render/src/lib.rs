//! Hybrid remote rendering of 3D results with rixels (dissertation §6.3.5, evaluated in
//! §6.4.4, Fig. 6.10; compression as proposed in §7.1.3).
//!
//! For 3D results the server renders, per viewport pixel, whether a surface is visible, its
//! depth and the physical value there, and sends only the visible pixels: a one-bit mask,
//! 16- or 32-bit depths and 16-bit fixed-point values with the frame's min/max. The client
//! rebuilds world positions from the depths with the frame's matrices (Eqs. 6.5-6.6),
//! reprojects them for its current camera (Eq. 6.4) and color-maps the values itself.
//!
//! Pipeline: a [`Surface`] (triangles with a value per vertex) and a [`Camera`] (OpenGL view
//! and projection matrices) -> [`raster`] (per-pixel depth, value, triangle id; CPU
//! reference [`raster::rasterize_cpu`], CUDA compute rasterizer [`cuda::GpuRenderer`] with
//! the same coverage rules and bits) -> [`rixel`] encoder (mask, stream compaction,
//! quantization; CPU reference [`rixel::encode_cpu`], GPU encoder byte-identical, only the
//! compacted frame crosses PCIe) -> optional lossless [`compress`]ion -> the wire. The
//! decoder ([`rixel::decode`]) and [`rixel::DecodedFrame::world_positions`] are the client
//! side in Rust; `crates/tessera-stream/web/` holds the browser's.
//!
//! ```
//! use tessera_render::{camera::Orbit, raster::rasterize_cpu, rixel, Camera, Surface};
//! let sphere = Surface::sphere([0.0; 3], 1.0, 16, 32).unwrap();
//! let cam = Camera::orbit(&Orbit::framing([0.0; 3], 1.0, 30.0, 20.0), 1.0).unwrap();
//! let raster = rasterize_cpu(&sphere, &cam, 64, 64).unwrap();
//! let params = rixel::EncodeParams::new(1, rixel::DepthBits::B16);
//! let frame = rixel::encode_cpu(&raster, &cam, &params).unwrap();
//! // header + mask + 4 bytes per visible pixel
//! assert_eq!(frame.len(), 160 + 64 * 64 / 8 + 4 * raster.visible());
//! let decoded = rixel::decode(&frame).unwrap();
//! let points = decoded.world_positions().unwrap();
//! // every reconstructed point lies on the (tessellated) unit sphere
//! assert!(points.iter().all(|p| ((p[0]*p[0] + p[1]*p[1] + p[2]*p[2]).sqrt() - 1.0).abs() < 0.03));
//! ```

// `!(x > 0.0)` is deliberate: it is true for NaN too, exactly like the CUDA kernels' tests.
#![allow(clippy::neg_cmp_op_on_partial_ord)]
// Index loops mirror the CUDA kernels line by line.
#![allow(clippy::needless_range_loop)]

pub mod bench;
pub mod camera;
pub mod compress;
pub mod cuda;
pub mod error;
pub mod frame;
pub mod io;
pub mod raster;
pub mod rixel;
pub mod scene;
pub mod surface;

pub use camera::{Camera, Mat4, Orbit};
pub use error::RenderError;
pub use raster::Raster;
pub use rixel::{DecodedFrame, DepthBits, EncodeParams, FrameHeader};
pub use surface::Surface;
