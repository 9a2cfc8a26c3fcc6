//! CUDA runtime for Tessera (DESIGN.md: "the only crate that touches cudarc").
//!
//! - [`probe`]: library discovery that never panics when `libcuda` or `libnvrtc` is absent;
//! - [`Gpu`]: a device with its context and stream; typed [`DeviceBuffer`]s with upload and
//!   download; NVRTC compilation with a persistent PTX cache ([`compile`]); launch helpers
//!   ([`Gpu::launch`]); CUDA-event timing ([`Gpu::time_ms`], [`Gpu::median_ms`]);
//! - [`nccl`]: NCCL loaded at run time (a missing `libnccl.so.2` is a typed error), a
//!   communicator over the devices of one process, grouped send/receive and all-reduce;
//! - [`primitives`]: the data-parallel building blocks of the dissertation's GPU
//!   algorithms (scan, reduce, compaction, histogram, segmented sort, radix sort, unique),
//!   each with a CPU reference in [`primitives::cpu`].
//!
//! cudarc is used with dynamic loading, so this crate builds and runs on machines without
//! CUDA; whether a GPU is used is decided at run time.

pub mod buffer_cache;
pub mod compile;
pub mod cusparse;
pub mod error;
pub mod nccl;
pub mod primitives;
pub mod probe;
pub mod runtime;

pub use buffer_cache::BufferCacheStats;
pub use compile::{cache_key, CompileOptions};
pub use error::{GpuError, GpuResult};
pub use nccl::{NcclComm, NcclLibrary, Transfer};
pub use primitives::{Primitives, SegOrder};
pub use runtime::{
    median, DeviceBuffer, Element, Event, EventTimer, Gpu, HostWords, Kernel, KernelArg, Launch,
    LaunchConfig, Module,
};
