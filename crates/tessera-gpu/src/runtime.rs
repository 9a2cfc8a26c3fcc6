//! Device, typed buffers, modules, kernels, launches and CUDA-event timing.
//!
//! One [`Gpu`] owns a CUDA context (the device's primary context) and one stream; every
//! upload, launch and download is ordered on that stream, so callers never synchronise by
//! hand: a download waits for everything launched before it.

use crate::buffer_cache::{self, BufferCacheStats, FreeList};
use crate::compile::{self, CompileOptions};
use crate::error::{guard, GpuError, GpuResult};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits,
};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex, Weak};

/// Element types that can live in a [`DeviceBuffer`] and be passed to kernels.
pub trait Element:
    DeviceRepr + ValidAsZeroBits + Copy + Default + Send + Sync + std::fmt::Debug + 'static
{
}
impl Element for u8 {}
impl Element for i8 {}
impl Element for u16 {}
impl Element for i16 {}
impl Element for u32 {}
impl Element for i32 {}
impl Element for u64 {}
impl Element for i64 {}
impl Element for f32 {}
impl Element for f64 {}

/// Let the device's default memory pool (which serves every [`Gpu::alloc`] through
/// `cuMemAllocAsync`) keep up to an eighth of the device memory after a synchronisation
/// instead of unmapping it (the pool's default release threshold is 0): a chain of
/// launches called again, as a solver step or a benchmark run is, then reuses its buffers'
/// memory without mapping new pages. `TESSERA_GPU_POOL_KEEP=BYTES` sets another threshold
/// (`0`: the driver's default, memory unmapped at every synchronisation). Best effort: a
/// device without memory pools keeps the driver's defaults.
fn keep_pool_memory(ctx: &CudaContext, total_mem: usize) {
    use cudarc::driver::sys;
    if !ctx.has_async_alloc() {
        return;
    }
    let mut keep = std::env::var("TESSERA_GPU_POOL_KEEP")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or((total_mem / 8) as u64);
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` is a valid out-pointer and the device handle comes from a live context.
    let r = unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) };
    if r != sys::CUresult::CUDA_SUCCESS || pool.is_null() {
        return;
    }
    // SAFETY: the release threshold attribute takes a pointer to a `cuuint64_t`, which
    // `keep` is and outlives the call; `pool` is the device's default pool from above.
    let _ = unsafe {
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut keep as *mut u64 as *mut std::ffi::c_void,
        )
    };
}

/// A CUDA device with its context, stream and loaded-module cache.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    ordinal: usize,
    name: String,
    cc: (i32, i32),
    total_mem: usize,
    sm_count: u32,
    nvrtc: Option<(i32, i32)>,
    modules: Mutex<HashMap<String, Arc<Module>>>,
    buffers: Arc<BufferCache>,
}

/// The freed buffers of one [`Gpu`]'s stream, kept for reuse (see [`buffer_cache`]); what it
/// still holds is freed, with the context current, when the last reference goes.
pub(crate) struct BufferCache {
    ctx: Arc<CudaContext>,
    list: Mutex<FreeList<Box<dyn Any + Send>>>,
}

impl BufferCache {
    fn new(ctx: &Arc<CudaContext>, limit_bytes: usize) -> Arc<Self> {
        Arc::new(BufferCache {
            ctx: ctx.clone(),
            list: Mutex::new(FreeList::new(limit_bytes)),
        })
    }
    fn list(&self) -> std::sync::MutexGuard<'_, FreeList<Box<dyn Any + Send>>> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Free `bufs` with the context current.
    fn free(&self, bufs: Vec<Box<dyn Any + Send>>) {
        if !bufs.is_empty() {
            with_current(&self.ctx, move || drop(bufs));
        }
    }
}

impl Drop for BufferCache {
    fn drop(&mut self) {
        let all = self.list().clear();
        self.free(all);
    }
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ordinal)
            .field("name", &self.name)
            .field("sm", &self.sm())
            .field("total_mem", &self.total_mem)
            .finish()
    }
}

impl Gpu {
    /// Open CUDA device `ordinal`. Never panics: a missing driver, a missing device or a
    /// missing NVRTC is a [`GpuError`] with the reason.
    pub fn new(ordinal: usize) -> GpuResult<Gpu> {
        crate::probe::probe_driver()?;
        let count = guard("cuDeviceGetCount", || {
            CudaContext::device_count()
                .map_err(|e| GpuError::NoDevice(format!("the driver reports {e}")))
        })?;
        if count <= 0 {
            return Err(GpuError::NoDevice("the driver reports 0 devices".into()));
        }
        if ordinal >= count as usize {
            return Err(GpuError::NoDevice(format!(
                "device {ordinal} requested, but there are {count}"
            )));
        }
        let nvrtc = compile::nvrtc_version()?;
        guard("context creation", || {
            let ctx = CudaContext::new(ordinal)
                .map_err(|e| GpuError::NoDevice(format!("cuda:{ordinal}: {e}")))?;
            let name = ctx
                .name()
                .map_err(|e| GpuError::driver("cuDeviceGetName", e))?;
            let cc = ctx
                .compute_capability()
                .map_err(|e| GpuError::driver("compute capability", e))?;
            let total_mem = ctx
                .total_mem()
                .map_err(|e| GpuError::driver("cuDeviceTotalMem", e))?;
            let sm_count = ctx
                .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(|e| GpuError::driver("cuDeviceGetAttribute", e))? as u32;
            let stream = ctx.default_stream();
            keep_pool_memory(&ctx, total_mem);
            let buffers = BufferCache::new(&ctx, buffer_cache::default_limit(total_mem));
            Ok(Gpu {
                buffers,
                ctx,
                stream,
                ordinal,
                name,
                cc,
                total_mem,
                sm_count,
                nvrtc: Some(nvrtc),
                modules: Mutex::new(HashMap::new()),
            })
        })
    }

    /// Open device 0 (see [`Gpu::new`]).
    pub fn probe() -> GpuResult<Gpu> {
        Gpu::new(0)
    }

    /// The device a `--device` choice asks for (DESIGN.md): `None` for `cpu`, and for `auto`
    /// when device 0 is not usable; device `N` for `cuda:N`, or the reason it cannot be used.
    pub fn open(choice: tessera_core::DeviceChoice) -> GpuResult<Option<Gpu>> {
        use tessera_core::DeviceChoice;
        match choice {
            DeviceChoice::Cpu => Ok(None),
            DeviceChoice::Auto => Ok(Gpu::probe().ok()),
            DeviceChoice::Cuda(n) => Gpu::new(n).map(Some),
        }
    }

    /// Device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
    /// Device name (for example `NVIDIA H100 80GB HBM3`).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Compute capability as `major * 10 + minor` (90 for Hopper).
    pub fn sm(&self) -> u32 {
        (self.cc.0 * 10 + self.cc.1) as u32
    }
    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// The most shared memory (bytes) one block may use after opting in
    /// (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`: 227 KiB on Hopper); 0 when
    /// the driver does not say.
    pub fn max_shared_per_block_optin(&self) -> u32 {
        self.ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )
            .map_or(0, |v| v.max(0) as u32)
    }

    /// Whether the device takes cooperative launches ([`Launch::run_cooperative`]:
    /// `CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`); `false` when the driver does not say.
    pub fn supports_cooperative_launch(&self) -> bool {
        self.ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH,
            )
            .is_ok_and(|v| v != 0)
    }

    /// Total device memory in bytes.
    pub fn total_memory(&self) -> usize {
        self.total_mem
    }
    /// Free device memory in bytes (queried now).
    pub fn free_memory(&self) -> GpuResult<usize> {
        guard("cuMemGetInfo", || {
            self.ctx
                .mem_get_info()
                .map(|m| m.0)
                .map_err(|e| GpuError::driver("cuMemGetInfo", e))
        })
    }
    /// Device memory in use in bytes (queried now): total minus free as the driver reports it,
    /// i.e. this process's allocations, the blocks its memory pool keeps, the contexts, and
    /// anything else on the device.
    pub fn memory_in_use(&self) -> GpuResult<usize> {
        Ok(self.total_mem.saturating_sub(self.free_memory()?))
    }
    /// NVRTC version `(major, minor)`.
    pub fn nvrtc_version(&self) -> (i32, i32) {
        self.nvrtc.unwrap_or((0, 0))
    }
    /// One line: `cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB, NVRTC 13.0)`.
    pub fn describe(&self) -> String {
        let (a, b) = self.nvrtc_version();
        format!(
            "cuda:{} {} (sm_{}, {} SMs, {:.1} GiB, NVRTC {a}.{b})",
            self.ordinal,
            self.name,
            self.sm(),
            self.sm_count,
            self.total_mem as f64 / (1u64 << 30) as f64
        )
    }

    /// The stream every operation of this `Gpu` is ordered on.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The same device and context with a second, independent stream: work launched through
    /// the returned `Gpu` may overlap with work on this one (for example a halo exchange with
    /// the interior rows of an SpMV). Kernels resolved through either `Gpu` launch on both;
    /// order the two streams with [`Event::record`] and [`Gpu::wait_event`].
    pub fn fork_stream(&self) -> GpuResult<Gpu> {
        self.fork_stream_with(false)
    }

    /// [`Gpu::fork_stream`] with the device's highest stream priority when `high`: when
    /// multiprocessors free up, the block scheduler starts this stream's pending blocks
    /// before those of normal-priority streams (a halo exchange and the rows waiting for it,
    /// beside a long SpMV).
    pub fn fork_stream_with(&self, high: bool) -> GpuResult<Gpu> {
        guard("cuStreamCreate", || {
            let stream = if high {
                // the priority range is a property of the current context: bind ours first
                // (a thread that never touched this device has none, or another device's)
                self.ctx
                    .bind_to_thread()
                    .map_err(|e| GpuError::driver("cuCtxSetCurrent", e))?;
                let (_, greatest) = cudarc::driver::result::stream::get_priority_range()
                    .map_err(|e| GpuError::driver("cuCtxGetStreamPriorityRange", e))?;
                self.ctx.new_stream_with_priority(greatest)
            } else {
                self.ctx.new_stream()
            }
            .map_err(|e| GpuError::driver("cuStreamCreate", e))?;
            let limit = self.buffers.list().stats().limit_bytes;
            Ok(Gpu {
                buffers: BufferCache::new(&self.ctx, limit),
                ctx: self.ctx.clone(),
                stream,
                ordinal: self.ordinal,
                name: self.name.clone(),
                cc: self.cc,
                total_mem: self.total_mem,
                sm_count: self.sm_count,
                nvrtc: self.nvrtc,
                modules: Mutex::new(HashMap::new()),
            })
        })
    }

    /// Make this `Gpu`'s stream wait (on the device, without blocking the host) until the
    /// work recorded in `event` has completed.
    pub fn wait_event(&self, event: &Event) -> GpuResult<()> {
        guard("cuStreamWaitEvent", || {
            self.stream
                .wait(&event.ev)
                .map_err(|e| GpuError::driver("cuStreamWaitEvent", e))
        })
    }

    /// Number of CUDA devices the driver reports (an error when there is no driver).
    pub fn device_count() -> GpuResult<usize> {
        crate::probe::probe_driver()?;
        guard("cuDeviceGetCount", || {
            CudaContext::device_count()
                .map(|n| n.max(0) as usize)
                .map_err(|e| GpuError::NoDevice(format!("the driver reports {e}")))
        })
    }

    /// Wait for all work on this device's stream.
    pub fn synchronize(&self) -> GpuResult<()> {
        guard("synchronize", || {
            self.stream
                .synchronize()
                .map_err(|e| GpuError::driver("cuStreamSynchronize", e))
        })
    }

    // ---------------------------------------------------------------- buffers

    /// A device allocation of `cap` elements with unspecified contents: a buffer of this
    /// type and capacity from the cache of freed buffers when it holds one, else a new one
    /// from the driver's pool (after freeing the cache once if the device is out of memory).
    fn take_or_alloc<T: Element>(&self, cap: usize) -> GpuResult<CudaSlice<T>> {
        let key = (TypeId::of::<T>(), cap);
        if let Some(b) = self.buffers.list().take(key) {
            match b.downcast::<CudaSlice<T>>() {
                Ok(s) => return Ok(*s),
                // not reached (the key holds the type); freed with the context current
                Err(other) => self.buffers.free(vec![other]),
            }
        }
        // SAFETY: the memory is uninitialised device memory of plain-old-data elements;
        // Tessera kernels write before they read, and a host read of unwritten elements
        // returns arbitrary but valid bit patterns of `T` (all `Element`s accept any bits).
        match unsafe { self.stream.alloc::<T>(cap) } {
            Ok(s) => Ok(s),
            Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                self.trim_buffer_cache();
                // SAFETY: as above
                unsafe { self.stream.alloc::<T>(cap) }
                    .map_err(|e| GpuError::driver("cuMemAlloc", e))
            }
            Err(e) => Err(GpuError::driver("cuMemAlloc", e)),
        }
    }

    /// Free every buffer the cache of freed buffers holds (see [`Gpu::buffer_cache_stats`]).
    pub fn trim_buffer_cache(&self) {
        let all = self.buffers.list().clear();
        self.buffers.free(all);
    }

    /// Set the byte limit of the cache of freed buffers (`0`: no cache; the default is a
    /// sixteenth of the device memory, at most 1 GiB, or `TESSERA_GPU_BUFFER_CACHE`).
    pub fn set_buffer_cache_limit(&self, bytes: usize) {
        let out = self.buffers.list().set_limit(bytes);
        self.buffers.free(out);
    }

    /// The counters of this stream's cache of freed buffers: a dropped [`DeviceBuffer`]
    /// returns there, and the next allocation of its element type and capacity on this
    /// `Gpu` reuses it without a driver call (module [`crate::buffer_cache`]).
    pub fn buffer_cache_stats(&self) -> BufferCacheStats {
        self.buffers.list().stats()
    }

    fn buffer<T: Element>(&self, slice: CudaSlice<T>, len: usize) -> DeviceBuffer<T> {
        DeviceBuffer {
            slice: ManuallyDrop::new(slice),
            len,
            cache: Arc::downgrade(&self.buffers),
        }
    }

    /// Copy `data` to a new device buffer.
    pub fn upload<T: Element>(&self, data: &[T]) -> GpuResult<DeviceBuffer<T>> {
        if data.is_empty() {
            return self.zeros(0);
        }
        guard("upload", || {
            let mut slice = self.take_or_alloc::<T>(data.len())?;
            self.stream
                .memcpy_htod(data, &mut slice)
                .map_err(|e| GpuError::driver("cuMemcpyHtoD", e))?;
            Ok(self.buffer(slice, data.len()))
        })
    }

    /// A new device buffer of `n` zeros.
    pub fn zeros<T: Element>(&self, n: usize) -> GpuResult<DeviceBuffer<T>> {
        guard("alloc", || {
            let mut slice = self.take_or_alloc::<T>(n.max(1))?;
            self.stream
                .memset_zeros(&mut slice)
                .map_err(|e| GpuError::driver("cuMemsetD8", e))?;
            Ok(self.buffer(slice, n))
        })
    }

    /// A new device buffer of `n` elements whose contents are unspecified (no memset).
    pub fn alloc<T: Element>(&self, n: usize) -> GpuResult<DeviceBuffer<T>> {
        guard("alloc", || {
            let slice = self.take_or_alloc::<T>(n.max(1))?;
            Ok(self.buffer(slice, n))
        })
    }

    /// Copy a device buffer back to the host (waits for earlier work on the stream).
    pub fn download<T: Element>(&self, buf: &DeviceBuffer<T>) -> GpuResult<Vec<T>> {
        if buf.len == 0 {
            return Ok(Vec::new());
        }
        guard("download", || {
            self.stream
                .clone_dtoh(&buf.slice.slice(0..buf.len))
                .map_err(|e| GpuError::driver("cuMemcpyDtoH", e))
        })
    }

    /// Copy elements `range` of a device buffer back to the host.
    pub fn download_range<T: Element>(
        &self,
        buf: &DeviceBuffer<T>,
        range: std::ops::Range<usize>,
    ) -> GpuResult<Vec<T>> {
        if range.start > range.end || range.end > buf.len {
            return Err(GpuError::InvalidArgument(format!(
                "range {range:?} of a buffer of {}",
                buf.len
            )));
        }
        if range.is_empty() {
            return Ok(Vec::new());
        }
        guard("download", || {
            self.stream
                .clone_dtoh(&buf.slice.slice(range.clone()))
                .map_err(|e| GpuError::driver("cuMemcpyDtoH", e))
        })
    }

    /// Copy a device buffer into an existing host slice of the same length (waits for earlier
    /// work on the stream and for the copy). Reusing one host buffer from frame to frame avoids
    /// the page faults that a fresh allocation ([`Gpu::download`]) takes during every copy.
    pub fn download_into<T: Element>(&self, buf: &DeviceBuffer<T>, dst: &mut [T]) -> GpuResult<()> {
        if dst.len() != buf.len {
            return Err(GpuError::InvalidArgument(format!(
                "a buffer of {} into {} host elements",
                buf.len,
                dst.len()
            )));
        }
        if dst.is_empty() {
            return Ok(());
        }
        guard("download", || {
            self.stream
                .memcpy_dtoh(&buf.slice.slice(0..buf.len), dst)
                .map_err(|e| GpuError::driver("cuMemcpyDtoH", e))?;
            self.stream
                .synchronize()
                .map_err(|e| GpuError::driver("cuStreamSynchronize", e))
        })
    }

    /// A page-locked (pinned) host buffer of `n` zeros: the destination of the fastest
    /// downloads ([`Gpu::download_pinned`]), reused from frame to frame.
    pub fn alloc_pinned<T: Element>(&self, n: usize) -> GpuResult<PinnedBuffer<T>> {
        guard("alloc", || {
            // SAFETY: the memory is filled with zeros (valid for every `Element`) before use
            let mut host = unsafe { self.ctx.alloc_pinned_with_flags::<T>(n.max(1), 0) }
                .map_err(|e| GpuError::driver("cuMemHostAlloc", e))?;
            host.as_mut_slice()
                .map_err(|e| GpuError::driver("cuEventSynchronize", e))?
                .fill(T::default());
            Ok(PinnedBuffer {
                host: ManuallyDrop::new(host),
                len: n,
            })
        })
    }

    /// Copy a device buffer into a pinned host buffer of the same length (waits for earlier
    /// work on the stream and for the copy).
    pub fn download_pinned<T: Element>(
        &self,
        buf: &DeviceBuffer<T>,
        dst: &mut PinnedBuffer<T>,
    ) -> GpuResult<()> {
        if dst.len != buf.len {
            return Err(GpuError::InvalidArgument(format!(
                "a buffer of {} into a pinned buffer of {}",
                buf.len, dst.len
            )));
        }
        if buf.len == 0 {
            return Ok(());
        }
        guard("download", || {
            self.stream
                .memcpy_dtoh(&buf.slice.slice(0..buf.len), &mut *dst.host)
                .map_err(|e| GpuError::driver("cuMemcpyDtoH", e))?;
            self.stream
                .synchronize()
                .map_err(|e| GpuError::driver("cuStreamSynchronize", e))
        })
    }

    /// Copy the first `n` elements of a device buffer into the start of a pinned host buffer
    /// and wait for the copy: the download of a result whose length is known only after the
    /// kernels ran (a compacted frame), without moving the rest of the allocation.
    pub fn download_prefix_pinned<T: Element>(
        &self,
        buf: &DeviceBuffer<T>,
        n: usize,
        dst: &mut PinnedBuffer<T>,
    ) -> GpuResult<()> {
        if n > buf.len || n > dst.len {
            return Err(GpuError::InvalidArgument(format!(
                "{n} elements of a buffer of {} into a pinned buffer of {}",
                buf.len, dst.len
            )));
        }
        if n == 0 {
            return Ok(());
        }
        guard("download", || {
            let host = dst
                .host
                .as_mut_slice()
                .map_err(|e| GpuError::driver("cuEventSynchronize", e))?;
            self.stream
                .memcpy_dtoh(&buf.slice.slice(0..n), &mut host[..n])
                .map_err(|e| GpuError::driver("cuMemcpyDtoH", e))?;
            self.stream
                .synchronize()
                .map_err(|e| GpuError::driver("cuStreamSynchronize", e))
        })
    }

    /// One element of a device buffer.
    pub fn download_at<T: Element>(&self, buf: &DeviceBuffer<T>, i: usize) -> GpuResult<T> {
        Ok(self.download_range(buf, i..i + 1)?[0])
    }

    /// Overwrite a device buffer with host data of the same length.
    pub fn copy_to_device<T: Element>(
        &self,
        data: &[T],
        buf: &mut DeviceBuffer<T>,
    ) -> GpuResult<()> {
        if data.len() != buf.len {
            return Err(GpuError::InvalidArgument(format!(
                "{} host elements into a buffer of {}",
                data.len(),
                buf.len
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        guard("upload", || {
            let mut v = buf.slice.slice_mut(0..data.len());
            self.stream
                .memcpy_htod(data, &mut v)
                .map_err(|e| GpuError::driver("cuMemcpyHtoD", e))
        })
    }

    /// Device-to-device copy of a whole buffer into a new buffer.
    pub fn duplicate<T: Element>(&self, buf: &DeviceBuffer<T>) -> GpuResult<DeviceBuffer<T>> {
        guard("copy", || {
            let mut slice = self.take_or_alloc::<T>(buf.slice.len())?;
            self.stream
                .memcpy_dtod(&*buf.slice, &mut slice)
                .map_err(|e| GpuError::driver("cuMemcpyDtoD", e))?;
            Ok(self.buffer(slice, buf.len))
        })
    }

    /// Device-to-device copy of `src` into `dst` (equal lengths).
    pub fn copy_device<T: Element>(
        &self,
        src: &DeviceBuffer<T>,
        dst: &mut DeviceBuffer<T>,
    ) -> GpuResult<()> {
        if src.len != dst.len {
            return Err(GpuError::InvalidArgument(format!(
                "copy of {} elements into {}",
                src.len, dst.len
            )));
        }
        if src.len == 0 {
            return Ok(());
        }
        guard("copy", || {
            let s = src.slice.slice(0..src.len);
            let mut d = dst.slice.slice_mut(0..src.len);
            self.stream
                .memcpy_dtod(&s, &mut d)
                .map_err(|e| GpuError::driver("cuMemcpyDtoD", e))
        })
    }

    /// Device-to-device copy of `n` elements: `src[src_at..src_at + n]` into
    /// `dst[dst_at..dst_at + n]` (both buffers on this device; ordered on this stream).
    pub fn copy_device_range<T: Element>(
        &self,
        src: &DeviceBuffer<T>,
        src_at: usize,
        dst: &mut DeviceBuffer<T>,
        dst_at: usize,
        n: usize,
    ) -> GpuResult<()> {
        if src_at + n > src.len || dst_at + n > dst.len {
            return Err(GpuError::InvalidArgument(format!(
                "copy of {n} elements from {src_at} of {} into {dst_at} of {}",
                src.len, dst.len
            )));
        }
        if n == 0 {
            return Ok(());
        }
        guard("copy", || {
            let s = src.slice.slice(src_at..src_at + n);
            let mut d = dst.slice.slice_mut(dst_at..dst_at + n);
            self.stream
                .memcpy_dtod(&s, &mut d)
                .map_err(|e| GpuError::driver("cuMemcpyDtoD", e))
        })
    }

    /// Set every byte of a buffer to zero.
    pub fn memset_zero<T: Element>(&self, buf: &mut DeviceBuffer<T>) -> GpuResult<()> {
        guard("memset", || {
            self.stream
                .memset_zeros(&mut *buf.slice)
                .map_err(|e| GpuError::driver("cuMemsetD8", e))
        })
    }

    // ---------------------------------------------------------------- modules

    /// Compile CUDA C++ with NVRTC (through the in-memory and on-disk caches) and load it.
    /// `kernels` are the `extern "C"` function names to resolve now.
    pub fn compile(&self, source: &str, opts: &CompileOptions) -> GpuResult<Arc<Module>> {
        let args = opts.to_args(self.sm());
        let key = compile::cache_key(
            source,
            &args,
            opts.arch.unwrap_or(self.sm()),
            self.nvrtc_version(),
        );
        if let Some(m) = self
            .modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(m.clone());
        }
        let dir = compile::cache_dir();
        let ptx = match dir.as_deref().and_then(|d| compile::cache_read(d, &key)) {
            Some(p) => p,
            None => {
                let p = compile::compile_to_ptx(source, &opts.name, &args)?;
                if let Some(d) = dir.as_deref() {
                    // a read-only cache folder is not an error: the kernel still runs
                    let _ = compile::cache_write(d, &key, &p);
                }
                p
            }
        };
        self.load_module(&ptx, &opts.name, key)
    }

    /// Load PTX text generated elsewhere (for example by the query compiler) through the
    /// in-memory module cache; the PTX is also stored in the disk cache under its key.
    pub fn load_ptx(&self, ptx: &str, name: &str) -> GpuResult<Arc<Module>> {
        if ptx.contains('\0') {
            return Err(GpuError::InvalidArgument(format!(
                "PTX `{name}` contains a NUL byte"
            )));
        }
        let key = compile::ptx_cache_key(ptx, self.sm(), self.nvrtc_version());
        if let Some(m) = self
            .modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(m.clone());
        }
        if let Some(d) = compile::cache_dir() {
            if compile::cache_read(&d, &key).is_none() {
                let _ = compile::cache_write(&d, &key, ptx);
            }
        }
        self.load_module(ptx, name, key)
    }

    fn load_module(&self, ptx: &str, name: &str, key: String) -> GpuResult<Arc<Module>> {
        let m = guard("cuModuleLoadData", || {
            self.ctx
                .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
                .map_err(|e| GpuError::Driver {
                    op: "cuModuleLoadData",
                    msg: format!("`{name}`: {e}"),
                })
        })?;
        let module = Arc::new(Module {
            inner: m,
            name: name.to_string(),
            key: key.clone(),
        });
        self.modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, module.clone());
        Ok(module)
    }

    // ---------------------------------------------------------------- launches

    /// Start a kernel launch; add arguments with [`Launch::arg`] in the kernel's parameter
    /// order, then [`Launch::run`].
    pub fn launch<'a>(&'a self, kernel: &'a Kernel, cfg: LaunchConfig) -> Launch<'a> {
        Launch {
            gpu: self,
            cfg,
            args: ArgList(self.stream.launch_builder(&kernel.func)),
            kernel,
        }
    }

    // ---------------------------------------------------------------- timing

    /// Time the device work enqueued by `f` with CUDA events, in milliseconds.
    pub fn time_ms(&self, f: impl FnOnce() -> GpuResult<()>) -> GpuResult<f32> {
        let t = EventTimer::new(self)?;
        t.start()?;
        f()?;
        t.stop()
    }

    /// Median of `runs` CUDA-event timings of `f` after `warmup` untimed calls (ms).
    pub fn median_ms(
        &self,
        runs: usize,
        warmup: usize,
        mut f: impl FnMut() -> GpuResult<()>,
    ) -> GpuResult<f64> {
        for _ in 0..warmup {
            f()?;
        }
        self.synchronize()?;
        let t = EventTimer::new(self)?;
        let mut v = Vec::with_capacity(runs.max(1));
        for _ in 0..runs.max(1) {
            t.start()?;
            f()?;
            v.push(t.stop()? as f64);
        }
        Ok(median(&mut v))
    }
}

/// Median of a list (mean of the two middle values for an even count; 0 for none).
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// A CUDA event on a [`Gpu`]'s stream that is recorded without waiting, so a sequence of
/// stages can be timed and read back after the next synchronising call.
pub struct Event {
    ev: cudarc::driver::CudaEvent,
}

impl Gpu {
    /// A new event (record it with [`Event::record`]).
    pub fn new_event(&self) -> GpuResult<Event> {
        guard("cuEventCreate", || {
            let fl = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
            let ev = self
                .ctx
                .new_event(fl)
                .map_err(|e| GpuError::driver("cuEventCreate", e))?;
            Ok(Event { ev })
        })
    }
}

impl Event {
    /// Record the event at the current position of `gpu`'s stream (does not wait).
    pub fn record(&self, gpu: &Gpu) -> GpuResult<()> {
        guard("cuEventRecord", || {
            self.ev
                .record(&gpu.stream)
                .map_err(|e| GpuError::driver("cuEventRecord", e))
        })
    }
    /// Milliseconds from `self` to `later` (waits for `later`).
    pub fn elapsed_ms(&self, later: &Event) -> GpuResult<f32> {
        guard("cuEventElapsedTime", || {
            later
                .ev
                .synchronize()
                .map_err(|e| GpuError::driver("cuEventSynchronize", e))?;
            self.ev
                .elapsed_ms(&later.ev)
                .map_err(|e| GpuError::driver("cuEventElapsedTime", e))
        })
    }
}

/// A pair of CUDA events for timing device work on a [`Gpu`]'s stream.
pub struct EventTimer<'a> {
    gpu: &'a Gpu,
    start: cudarc::driver::CudaEvent,
    stop: cudarc::driver::CudaEvent,
}

impl<'a> EventTimer<'a> {
    pub fn new(gpu: &'a Gpu) -> GpuResult<Self> {
        guard("cuEventCreate", || {
            let fl = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
            let start = gpu
                .ctx
                .new_event(fl)
                .map_err(|e| GpuError::driver("cuEventCreate", e))?;
            let stop = gpu
                .ctx
                .new_event(fl)
                .map_err(|e| GpuError::driver("cuEventCreate", e))?;
            Ok(EventTimer { gpu, start, stop })
        })
    }
    /// Record the start event.
    pub fn start(&self) -> GpuResult<()> {
        guard("cuEventRecord", || {
            self.start
                .record(&self.gpu.stream)
                .map_err(|e| GpuError::driver("cuEventRecord", e))
        })
    }
    /// Record the stop event, wait for it and return the elapsed milliseconds.
    pub fn stop(&self) -> GpuResult<f32> {
        guard("cuEventElapsedTime", || {
            self.stop
                .record(&self.gpu.stream)
                .map_err(|e| GpuError::driver("cuEventRecord", e))?;
            self.stop
                .synchronize()
                .map_err(|e| GpuError::driver("cuEventSynchronize", e))?;
            self.start
                .elapsed_ms(&self.stop)
                .map_err(|e| GpuError::driver("cuEventElapsedTime", e))
        })
    }
}

/// A typed buffer in device memory (wraps a cudarc `CudaSlice`). Empty buffers hold one
/// unused element so every buffer has a valid device address.
///
/// Dropping it returns the allocation to the cache of freed buffers of the [`Gpu`] that
/// made it ([`crate::buffer_cache`]), or frees it with the device's context current on the
/// dropping thread (and the thread's previous context restored): cudarc's own free does
/// not bind the context, so a buffer dropped on a thread that had not used the device
/// failed with `CUDA_ERROR_INVALID_CONTEXT`, which cudarc keeps and returns from the
/// context's next call on any thread.
pub struct DeviceBuffer<T: Element> {
    slice: ManuallyDrop<CudaSlice<T>>,
    len: usize,
    cache: Weak<BufferCache>,
}

impl<T: Element> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: `slice` is taken exactly once, here, and `self` is not used afterwards.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        // with other streams on the context, one of them may still use the buffer: free it
        // (cudarc's free waits for their uses), do not hand it to this stream's next alloc
        if let Some(cache) = self.cache.upgrade() {
            if !slice.context().is_in_multi_stream_mode() {
                let key = (TypeId::of::<T>(), slice.len());
                let bytes = slice.num_bytes();
                let out = cache.list().put(key, bytes, Box::new(slice));
                cache.free(out);
                return;
            }
        }
        let ctx = slice.context().clone();
        with_current(&ctx, move || drop(slice));
    }
}

impl<T: Element> DeviceBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bytes of the elements.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    /// Shrink the logical length (the allocation stays); used after compaction.
    pub fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n);
    }
    /// Capacity of the allocation in elements (at least 1).
    pub fn capacity(&self) -> usize {
        self.slice.len()
    }
    pub(crate) fn cuda_slice(&self) -> &CudaSlice<T> {
        &self.slice
    }
    pub(crate) fn cuda_slice_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.slice
    }
}

/// Page-locked host memory of `len` elements (from [`Gpu::alloc_pinned`]), the destination of
/// [`Gpu::download_pinned`]: the copy engine writes it directly, without the driver's staging
/// copy that pageable memory needs.
///
/// Dropped with the context current on the dropping thread, as [`DeviceBuffer`].
pub struct PinnedBuffer<T: Element> {
    host: ManuallyDrop<cudarc::driver::PinnedHostSlice<T>>,
    len: usize,
}

impl<T: Element> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: `host` is taken exactly once, here, and `self` is not used afterwards.
        let host = unsafe { ManuallyDrop::take(&mut self.host) };
        let ctx = host.context().clone();
        with_current(&ctx, move || drop(host));
    }
}

impl<T: Element> PinnedBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The host data (waits for a copy into it that is still in flight).
    pub fn as_slice(&self) -> GpuResult<&[T]> {
        let s = self
            .host
            .as_slice()
            .map_err(|e| GpuError::driver("cuEventSynchronize", e))?;
        Ok(&s[..self.len])
    }
}

/// A few `u32` words of page-locked host memory mapped into the device's address space
/// (`cuMemHostAlloc` with `CU_MEMHOSTALLOC_DEVICEMAP`), passed to kernels as a `u32*` to
/// the first word: a kernel raises a flag or leaves a total there with plain stores and the
/// host reads them after a synchronisation, with no memset before the launch and no copy
/// after it (the flags and the boundary's totals of the mesh operations; a device word cost
/// a memset and a download, about 12 µs of host time per call). Kernels must write them
/// with plain stores (atomics on mapped host memory need platform support that is not
/// assumed).
pub struct HostWords {
    ctx: Arc<CudaContext>,
    host: *mut u32,
    len: usize,
    dev: u64,
}

// SAFETY: the words are page-locked host memory owned by this value until its drop; the
// host side reads and writes them with volatile accesses (the device writes them through
// `dev`).
unsafe impl Send for HostWords {}
// SAFETY: as for `Send`: concurrent volatile accesses to aligned words are well defined.
unsafe impl Sync for HostWords {}

impl HostWords {
    /// Set every word to 0 (before the launches that may write them).
    pub fn clear(&self) {
        for i in 0..self.len {
            // SAFETY: `host` points to `len` live, aligned, page-locked words (see
            // `Gpu::host_words`), and `i < len`.
            unsafe { std::ptr::write_volatile(self.host.add(i), 0) }
        }
    }
    /// Set word `i` to `v` (a signal to a running kernel that polls it); nothing past the
    /// end.
    pub fn set(&self, i: usize, v: u32) {
        if i < self.len {
            // SAFETY: as in `clear`, and `i < len`.
            unsafe { std::ptr::write_volatile(self.host.add(i), v) }
        }
    }
    /// Word `i` as the kernels left it (call after a synchronisation of the stream that
    /// ran them); 0 past the end.
    pub fn get(&self, i: usize) -> u32 {
        if i >= self.len {
            return 0;
        }
        // SAFETY: as in `clear`.
        unsafe { std::ptr::read_volatile(self.host.add(i)) }
    }
    /// Number of words.
    pub fn len(&self) -> usize {
        self.len
    }
    /// The device address of word `i` (a kernel argument that points at that one word), or
    /// `None` past the end.
    pub fn device_address(&self, i: usize) -> Option<u64> {
        (i < self.len).then(|| self.dev + 4 * i as u64)
    }
    /// Whether there are no words (never: at least one is allocated).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for HostWords {
    fn drop(&mut self) {
        let host = self.host;
        with_current(&self.ctx, || {
            // SAFETY: `host` came from cuMemHostAlloc in `Gpu::host_words` and is freed
            // once; kernels that wrote it were synchronised by the calls that read it, or
            // (`Gpu::wait_word`) write nothing to it after the word waited for.
            unsafe {
                cudarc::driver::sys::cuMemFreeHost(host as *mut std::ffi::c_void);
            }
        });
    }
}

/// Make `c` the current context of this thread; returns the thread's previous one (`None`:
/// none). Without cudarc's `bind_to_thread`, which first takes the context's kept error and
/// returns it (a destructor would lose it).
pub(crate) fn make_current(
    c: &CudaContext,
) -> Result<Option<cudarc::driver::sys::CUcontext>, cudarc::driver::DriverError> {
    use cudarc::driver::result::ctx;
    let cu = c.cu_ctx();
    let prev = ctx::get_current()?;
    if prev != Some(cu) {
        // SAFETY: `cu` is a live context (the caller holds it); making it current only
        // changes this thread's binding.
        unsafe { ctx::set_current(cu) }?;
    }
    Ok(prev)
}

/// Run `f` with `c` current on this thread, then restore the thread's previous context.
fn with_current(c: &CudaContext, f: impl FnOnce()) {
    let prev = make_current(c).ok().flatten();
    f();
    if prev != Some(c.cu_ctx()) {
        // SAFETY: `prev` was this thread's current context (or none) a moment ago.
        let _ = unsafe {
            cudarc::driver::result::ctx::set_current(prev.unwrap_or(std::ptr::null_mut()))
        };
    }
}

impl std::fmt::Debug for HostWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w: Vec<u32> = (0..self.len).map(|i| self.get(i)).collect();
        write!(f, "HostWords({w:?})")
    }
}

/// How often [`Gpu::wait_word`] asks the stream whether its work has ended.
const WAIT_WORD_QUERY: std::time::Duration = std::time::Duration::from_micros(20);

impl Gpu {
    /// Wait until word `i` of `words` is non-zero, without waiting for the launch that writes
    /// it to end: a kernel on this stream that writes its results into the words before `i`,
    /// then a system-scope fence (`__threadfence_system`), then a non-zero word `i`, hands
    /// those results to the host as soon as they are final, while its other blocks still
    /// finish (a stream synchronisation would wait for the launch's end and the driver's
    /// wake-up). Spins on the word and asks the stream every 20 µs whether its work has
    /// ended; when it has and the word is still 0, no kernel wrote it: `Ok(false)` (the
    /// caller synchronises, or decides). An error of the stream's work found by the query is
    /// returned as [`Gpu::synchronize`] returns it. Work still running after `Ok(true)` stays
    /// ordered before later work on the stream; its errors surface at the next
    /// synchronisation.
    pub fn wait_word(&self, words: &HostWords, i: usize) -> GpuResult<bool> {
        use cudarc::driver::sys;
        if i >= words.len() {
            return Err(GpuError::InvalidArgument(format!(
                "word {i} of {} mapped words",
                words.len()
            )));
        }
        let mut asked = std::time::Instant::now();
        loop {
            if words.get(i) != 0 {
                // the words before `i` were written before it (the kernel's fence)
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                return Ok(true);
            }
            if asked.elapsed() >= WAIT_WORD_QUERY {
                let r = guard("cuStreamQuery", || {
                    make_current(&self.ctx).map_err(|e| GpuError::driver("cuCtxSetCurrent", e))?;
                    // SAFETY: the stream is live for as long as `self` is.
                    Ok(unsafe { sys::cuStreamQuery(self.stream.cu_stream()) })
                })?;
                match r {
                    sys::CUresult::CUDA_ERROR_NOT_READY => {}
                    sys::CUresult::CUDA_SUCCESS => {
                        let marked = words.get(i) != 0;
                        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                        return Ok(marked);
                    }
                    _ => {
                        // the stream's error, as a synchronisation reports it
                        self.synchronize()?;
                        return Err(GpuError::Driver {
                            op: "cuStreamQuery",
                            msg: format!("{r:?}"),
                        });
                    }
                }
                asked = std::time::Instant::now();
            }
            std::hint::spin_loop();
        }
    }

    /// `n` (at least 1) new mapped host words, cleared (see [`HostWords`]).
    pub fn host_words(&self, n: usize) -> GpuResult<HostWords> {
        use cudarc::driver::sys;
        let n = n.max(1);
        guard("cuMemHostAlloc", || {
            make_current(&self.ctx).map_err(|e| GpuError::driver("cuCtxSetCurrent", e))?;
            let mut host: *mut std::ffi::c_void = std::ptr::null_mut();
            // SAFETY: out-pointer to a local; `4 n` bytes with the device-map flag.
            let r =
                unsafe { sys::cuMemHostAlloc(&mut host, 4 * n, sys::CU_MEMHOSTALLOC_DEVICEMAP) };
            if r != sys::CUresult::CUDA_SUCCESS || host.is_null() {
                return Err(GpuError::Driver {
                    op: "cuMemHostAlloc",
                    msg: format!("{r:?}"),
                });
            }
            let mut dev: sys::CUdeviceptr = 0;
            // SAFETY: `host` is the mapped allocation from above; flags must be 0.
            let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, host, 0) };
            let words = HostWords {
                ctx: self.ctx.clone(),
                host: host as *mut u32,
                len: n,
                dev,
            };
            if r != sys::CUresult::CUDA_SUCCESS || dev == 0 {
                return Err(GpuError::Driver {
                    op: "cuMemHostGetDevicePointer",
                    msg: format!("{r:?}"),
                });
            }
            words.clear();
            Ok(words)
        })
    }
}

impl sealed::Sealed for HostWords {}
impl KernelArg for HostWords {
    fn push_to<'a>(&'a self, list: &mut ArgList<'a>) {
        use cudarc::driver::PushKernelArg;
        list.0.arg(&self.dev);
    }
}

impl<T: Element> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PinnedBuffer<{}>({})",
            std::any::type_name::<T>(),
            self.len
        )
    }
}

impl<T: Element> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>[{}]",
            std::any::type_name::<T>(),
            self.len
        )
    }
}

/// A loaded PTX module.
pub struct Module {
    inner: Arc<CudaModule>,
    name: String,
    key: String,
}

impl Module {
    /// Resolve an `extern "C"` kernel of this module.
    pub fn function(&self, name: &str) -> GpuResult<Kernel> {
        if name.contains('\0') {
            return Err(GpuError::InvalidArgument(format!(
                "kernel name {name:?} contains a NUL byte"
            )));
        }
        guard("cuModuleGetFunction", || {
            let func = self
                .inner
                .load_function(name)
                .map_err(|_| GpuError::MissingKernel {
                    module: self.name.clone(),
                    name: name.to_string(),
                })?;
            Ok(Kernel {
                func,
                name: name.to_string(),
            })
        })
    }
    /// Program name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Cache key it was loaded under.
    pub fn cache_key(&self) -> &str {
        &self.key
    }
}

/// A kernel function of a loaded module.
#[derive(Clone)]
pub struct Kernel {
    func: CudaFunction,
    name: String,
}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }
    /// How many blocks of `threads` threads (no dynamic shared memory) of this kernel one
    /// multiprocessor holds at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`).
    pub fn max_active_blocks_per_sm(&self, threads: u32) -> GpuResult<u32> {
        self.max_active_blocks_per_sm_with_shared(threads, 0)
    }
    /// [`Kernel::max_active_blocks_per_sm`] for launches with `shared` bytes of dynamic
    /// shared memory.
    pub fn max_active_blocks_per_sm_with_shared(
        &self,
        threads: u32,
        shared: u32,
    ) -> GpuResult<u32> {
        guard("cuOccupancyMaxActiveBlocksPerMultiprocessor", || {
            self.func
                .occupancy_max_active_blocks_per_multiprocessor(threads, shared as usize, None)
                .map_err(|e| GpuError::driver("cuOccupancyMaxActiveBlocksPerMultiprocessor", e))
        })
    }
    /// Let launches of this kernel take up to `bytes` of dynamic shared memory
    /// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`; above 48 KiB a kernel must opt in,
    /// up to [`Gpu::max_shared_per_block_optin`]).
    pub fn set_max_dynamic_shared(&self, bytes: u32) -> GpuResult<()> {
        guard("cuFuncSetAttribute", || {
            self.func
                .set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes.min(i32::MAX as u32) as i32,
                )
                .map_err(|e| GpuError::driver("cuFuncSetAttribute", e))
        })
    }
}

/// Grid, block and dynamic shared memory of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
}

impl LaunchConfig {
    /// A 1-D launch of `blocks` blocks of `threads` threads.
    pub fn blocks(blocks: u32, threads: u32) -> Self {
        LaunchConfig {
            grid: [blocks, 1, 1],
            block: [threads, 1, 1],
            shared: 0,
        }
    }
    /// A 1-D launch with one thread per item: `ceil(n / threads)` blocks.
    pub fn for_items(n: usize, threads: u32) -> GpuResult<Self> {
        let b = n.div_ceil(threads as usize);
        if b > i32::MAX as usize {
            return Err(GpuError::InvalidArgument(format!(
                "{n} items need {b} blocks of {threads}"
            )));
        }
        Ok(Self::blocks(b as u32, threads))
    }
    /// With `bytes` of dynamic shared memory.
    pub fn with_shared(mut self, bytes: u32) -> Self {
        self.shared = bytes;
        self
    }
}

#[doc(hidden)]
pub struct ArgList<'a>(cudarc::driver::LaunchArgs<'a>);

mod sealed {
    pub trait Sealed {}
}

/// Values that can be kernel arguments: device buffers (passed as the element pointer)
/// and plain scalars.
pub trait KernelArg: sealed::Sealed {
    #[doc(hidden)]
    fn push_to<'a>(&'a self, list: &mut ArgList<'a>);
}

impl<T: Element> sealed::Sealed for DeviceBuffer<T> {}
impl<T: Element> KernelArg for DeviceBuffer<T> {
    fn push_to<'a>(&'a self, list: &mut ArgList<'a>) {
        use cudarc::driver::PushKernelArg;
        list.0.arg(&*self.slice);
    }
}

macro_rules! scalar_arg {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl KernelArg for $t {
            fn push_to<'a>(&'a self, list: &mut ArgList<'a>) {
                use cudarc::driver::PushKernelArg;
                list.0.arg(self);
            }
        }
    )*};
}
scalar_arg!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

/// A kernel launch being assembled (see [`Gpu::launch`]).
pub struct Launch<'a> {
    gpu: &'a Gpu,
    kernel: &'a Kernel,
    cfg: LaunchConfig,
    args: ArgList<'a>,
}

impl<'a> Launch<'a> {
    /// Append the next kernel argument.
    pub fn arg<A: KernelArg + ?Sized>(mut self, a: &'a A) -> Self {
        a.push_to(&mut self.args);
        self
    }

    /// Enqueue the kernel on the device's stream. A grid with a zero dimension launches
    /// nothing (empty inputs). Errors from the kernel itself surface at the next
    /// synchronising call (download, [`Gpu::synchronize`]).
    pub fn run(self) -> GpuResult<()> {
        self.enqueue(false)
    }

    /// Enqueue the kernel as a cooperative launch (`cuLaunchCooperativeKernel`): every block
    /// is resident at once, so the kernel may synchronise the whole grid (grid barriers
    /// between the phases of a chain). The grid must not exceed
    /// [`Kernel::max_active_blocks_per_sm`] times the multiprocessors; the driver refuses a
    /// larger one with an error (no hang).
    pub fn run_cooperative(self) -> GpuResult<()> {
        self.enqueue(true)
    }

    fn enqueue(mut self, cooperative: bool) -> GpuResult<()> {
        let c = self.cfg;
        if c.grid.contains(&0) {
            return Ok(());
        }
        if c.block.contains(&0) || c.block.iter().product::<u32>() > 1024 {
            return Err(GpuError::InvalidArgument(format!(
                "block {:?} for kernel `{}`",
                c.block, self.kernel.name
            )));
        }
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (c.grid[0], c.grid[1], c.grid[2]),
            block_dim: (c.block[0], c.block[1], c.block[2]),
            shared_mem_bytes: c.shared,
        };
        let name = self.kernel.name.clone();
        let _ = self.gpu;
        guard("cuLaunchKernel", move || {
            // SAFETY: the launch is the one unsafe step (DESIGN.md). Arguments were pushed
            // through `KernelArg`, which only admits device buffers (valid device pointers
            // that the borrow keeps alive until the launch is enqueued; frees are
            // stream-ordered after it) and plain scalars. The caller's kernel signature
            // must match the argument list in count and types; every call site in Tessera
            // passes its kernel's parameters in declaration order, checked by the
            // conformance tests.
            unsafe {
                if cooperative {
                    self.args.0.launch_cooperative(cfg)
                } else {
                    self.args.0.launch(cfg)
                }
            }
            .map(|_| ())
            .map_err(|e| GpuError::Driver {
                op: if cooperative {
                    "cuLaunchCooperativeKernel"
                } else {
                    "cuLaunchKernel"
                },
                msg: format!("`{name}`: {e}"),
            })
        })
    }
}
