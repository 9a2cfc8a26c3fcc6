//! Tessera core: index types, the `Par` execution choice, CPU parallel primitives
//! (count -> scan -> fill helpers) and the run-time device choice.
//!
//! Every algorithm in Tessera has a CPU reference implementation that takes a [`Par`]:
//! `Par::Seq` runs on the calling thread, `Par::Rayon` on the rayon pool. Both must give
//! bit-identical results (DESIGN.md, principle 1).
//!
//! The crate also holds the services every reader and writer shares (DESIGN.md,
//! principle 6: bad input gets a clear error and loses nothing): [`atomic`] writes
//! (private temporary file, `O_EXCL`, fsync, rename; multi-file publish), [`input`]
//! (regular files only, bounded gzip inflation) and [`memory`] estimates checked against
//! the memory available before work starts.

pub mod atomic;
pub mod bulk;
pub mod device;
pub mod error;
pub mod input;
pub mod memory;
pub mod par;
pub mod scan;
pub mod table;
pub mod trace;

pub use device::{DeviceChoice, DeviceParseError};
pub use error::CoreError;
pub use par::Par;

/// Index type used for all topology arrays (dissertation §3.4: "32-bit integers for all
/// offsets and encoded values").
pub type Idx = u32;
