//! Tessera core: index types, the `Par` execution choice, CPU parallel primitives
//! (count -> scan -> fill helpers) and the run-time device choice.
//!
//! Every algorithm in Tessera has a CPU reference implementation that takes a [`Par`]:
//! `Par::Seq` runs on the calling thread, `Par::Rayon` on the rayon pool. Both must give
//! bit-identical results (DESIGN.md, principle 1).

pub mod device;
pub mod par;
pub mod scan;
pub mod table;
pub mod trace;

pub use device::{DeviceChoice, DeviceParseError};
pub use par::Par;

/// Index type used for all topology arrays (dissertation §3.4: "32-bit integers for all
/// offsets and encoded values").
pub type Idx = u32;
