//! GPU primitives: the data-parallel building blocks of the dissertation's GPU algorithms
//! (§3.4.1: "count -> scan -> fill"; "sort, mark duplicates, compact").
//!
//! | operation | GPU | CPU reference |
//! |---|---|---|
//! | exclusive / inclusive scan (u32, u64, wrapping) | [`Primitives::exclusive_scan`] | [`cpu::exclusive_scan_u32`] |
//! | CSR offsets from counts (overflow-checked) | [`Primitives::offsets_from_counts`] | [`cpu::offsets_from_counts`] |
//! | sum (u32 -> u64, u64, f64), max | [`Primitives::reduce_sum_u32`] ... | [`cpu::reduce_sum_u32`] ... |
//! | stream compaction by flags (stable) | [`Primitives::compact`] | [`cpu::compact`] |
//! | histogram / count | [`Primitives::histogram`] | [`cpu::histogram`] |
//! | segmented sort of short rows | [`Primitives::segmented_sort`] | [`cpu::segmented_sort`] |
//! | LSD radix sort of u32/u64 keys (+ u32 values, stable) | [`Primitives::radix_sort`] | [`cpu::sort_pairs`] |
//! | unique (with run ids) | [`Primitives::unique`] | [`cpu::unique_with_ids`] |
//!
//! The kernels are hand-written CUDA C++ in `primitives.cu` (no CUB, so NVRTC needs no
//! headers), compiled once per device through the kernel cache. Sizes are 64-bit inside the
//! kernels; every operation is correct from 0 elements to beyond 2^27.

pub mod cpu;

use crate::error::{GpuError, GpuResult};
use crate::runtime::{DeviceBuffer, Element, Gpu, Kernel, LaunchConfig, Module};
use crate::CompileOptions;
use std::sync::Arc;

/// CUDA source of the primitives (deterministic: a constant). Compiled after [`PRELUDE`]
/// ([`module_source`]).
pub const SOURCE: &str = include_str!("primitives.cu");

/// CUDA source of what the primitives and the mesh kernels share (the row sorts: keys,
/// one-thread insertion sort, one-block bitonic sort, the middle class of rows one block
/// each; the block-wide scan and sum): prepended to both modules' sources, so there is one
/// definition.
pub const PRELUDE: &str = include_str!("prelude.cuh");

/// The primitives module's whole source: [`PRELUDE`] then [`SOURCE`].
pub fn module_source() -> &'static str {
    static S: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("{PRELUDE}{SOURCE}"));
    &S
}

const BLOCK: u32 = 256;
const TILE: usize = 256 * 8;
const RTILE: usize = 256 * 16;
const RADIX: usize = 256;
/// Rows up to this length are sorted one thread per row.
pub const SHORT_ROW: u32 = 64;
/// When no row is longer than this, the rows above [`SHORT_ROW`] are sorted one block per row
/// in shared memory; otherwise the whole array goes through a radix sort.
pub const MID_ROW: u32 = 2048;

/// Keys and scan elements: `u32` and `u64`.
pub trait Key: Element + Ord {
    #[doc(hidden)]
    const SUFFIX: &'static str;
    /// Bits of the key.
    const BITS: u32;
}
impl Key for u32 {
    const SUFFIX: &'static str = "u32";
    const BITS: u32 = 32;
}
impl Key for u64 {
    const SUFFIX: &'static str = "u64";
    const BITS: u32 = 64;
}

/// 32-bit element types moved as raw bits (values of sorts, rows of segmented sorts).
pub trait Bits32: Element {}
impl Bits32 for u32 {}
impl Bits32 for i32 {}
impl Bits32 for f32 {}

/// Row order of [`Primitives::segmented_sort`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegOrder {
    /// As unsigned 32-bit integers.
    Unsigned,
    /// As signed 32-bit integers.
    Signed,
    /// TCSR entries (dissertation §3.4) by decoded column, then by value: the row order of
    /// Tessera's coboundaries (`SortRows` of Listing 3.1).
    TcsrColumn,
}

impl SegOrder {
    fn mode(self) -> u32 {
        match self {
            SegOrder::Unsigned => 0,
            SegOrder::Signed => 1,
            SegOrder::TcsrColumn => 2,
        }
    }
}

/// The primitives of one device (see [`Gpu::primitives`]).
pub struct Primitives<'g> {
    gpu: &'g Gpu,
    module: Arc<Module>,
}

impl Gpu {
    /// Load the primitives module (compiled once, then from the caches).
    pub fn primitives(&self) -> GpuResult<Primitives<'_>> {
        let module = self.compile(
            module_source(),
            &CompileOptions::named("tessera_primitives.cu"),
        )?;
        Ok(Primitives { gpu: self, module })
    }
}

fn items_cfg(n: usize) -> GpuResult<LaunchConfig> {
    LaunchConfig::for_items(n, BLOCK)
}

fn u32_len(n: usize, what: &str) -> GpuResult<()> {
    if n > u32::MAX as usize {
        return Err(GpuError::InvalidArgument(format!(
            "{what}: {n} elements exceed the 32-bit index range"
        )));
    }
    Ok(())
}

impl<'g> Primitives<'g> {
    /// The device.
    pub fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    fn k(&self, name: &str) -> GpuResult<Kernel> {
        self.module.function(name)
    }

    // ------------------------------------------------------------ scan

    /// Scan `n` elements of `input` into `out` (may be the same buffer). With `write_total`
    /// the total is written to `out[n]` (out needs n + 1 elements).
    fn scan_raw<T: Key>(
        &self,
        input: &DeviceBuffer<T>,
        out: &DeviceBuffer<T>,
        n: usize,
        inclusive: bool,
        write_total: bool,
    ) -> GpuResult<()> {
        if n == 0 {
            return Ok(());
        }
        let tiles = n.div_ceil(TILE);
        let tiles_k = self.k(&format!("scan_tiles_{}", T::SUFFIX))?;
        let cfg = LaunchConfig::blocks(tiles as u32, BLOCK);
        let (inc, wt, nn) = (inclusive as u32, write_total as u32, n as u64);
        if tiles == 1 {
            let zero = 0u32;
            return self
                .gpu
                .launch(&tiles_k, cfg)
                .arg(input)
                .arg(out)
                .arg(&nn)
                .arg(input)
                .arg(&zero)
                .arg(&inc)
                .arg(&wt)
                .run();
        }
        let sums = self.gpu.alloc::<T>(tiles)?;
        let sums_k = self.k(&format!("scan_tile_sums_{}", T::SUFFIX))?;
        self.gpu
            .launch(&sums_k, cfg)
            .arg(input)
            .arg(&nn)
            .arg(&sums)
            .run()?;
        self.scan_raw(&sums, &sums, tiles, false, false)?;
        let one = 1u32;
        self.gpu
            .launch(&tiles_k, cfg)
            .arg(input)
            .arg(out)
            .arg(&nn)
            .arg(&sums)
            .arg(&one)
            .arg(&inc)
            .arg(&wt)
            .run()
    }

    /// Exclusive prefix sum (wrapping): `out[i] = sum(input[..i])`.
    pub fn exclusive_scan<T: Key>(&self, input: &DeviceBuffer<T>) -> GpuResult<DeviceBuffer<T>> {
        let out = self.gpu.alloc::<T>(input.len())?;
        self.scan_raw(input, &out, input.len(), false, false)?;
        Ok(out)
    }

    /// Inclusive prefix sum (wrapping): `out[i] = sum(input[..=i])`.
    pub fn inclusive_scan<T: Key>(&self, input: &DeviceBuffer<T>) -> GpuResult<DeviceBuffer<T>> {
        let out = self.gpu.alloc::<T>(input.len())?;
        self.scan_raw(input, &out, input.len(), true, false)?;
        Ok(out)
    }

    /// In-place exclusive scan.
    pub fn exclusive_scan_in_place<T: Key>(&self, buf: &mut DeviceBuffer<T>) -> GpuResult<()> {
        self.scan_raw(buf, buf, buf.len(), false, false)
    }

    /// In-place inclusive scan.
    pub fn inclusive_scan_in_place<T: Key>(&self, buf: &mut DeviceBuffer<T>) -> GpuResult<()> {
        self.scan_raw(buf, buf, buf.len(), true, false)
    }

    /// Exclusive scan with the total appended (`n + 1` elements), no overflow check.
    pub fn exclusive_scan_with_total<T: Key>(
        &self,
        input: &DeviceBuffer<T>,
    ) -> GpuResult<DeviceBuffer<T>> {
        let n = input.len();
        if n == 0 {
            return self.gpu.zeros::<T>(1);
        }
        let out = self.gpu.alloc::<T>(n + 1)?;
        self.scan_raw(input, &out, n, false, true)?;
        Ok(out)
    }

    /// CSR offsets (`n + 1` entries, `offsets[0] = 0`, last = total) from row lengths; an
    /// error when the total does not fit in 32 bits (dissertation §3.4: 32-bit offsets).
    pub fn offsets_from_counts(&self, counts: &DeviceBuffer<u32>) -> GpuResult<DeviceBuffer<u32>> {
        let total = self.reduce_sum_u32(counts)?;
        if total > u32::MAX as u64 {
            return Err(GpuError::InvalidArgument(format!(
                "{total} entries exceed 32-bit offsets"
            )));
        }
        self.exclusive_scan_with_total(counts)
    }

    // ------------------------------------------------------------ reductions

    fn reduce_grid(&self, n: usize) -> u32 {
        (n.div_ceil(BLOCK as usize)).clamp(1, (self.gpu.sm_count().max(1) * 8) as usize) as u32
    }

    /// Sum of u32 values, exact in u64.
    pub fn reduce_sum_u32(&self, v: &DeviceBuffer<u32>) -> GpuResult<u64> {
        if v.is_empty() {
            return Ok(0);
        }
        let g = self.reduce_grid(v.len());
        let parts = self.gpu.alloc::<u64>(g as usize)?;
        let n = v.len() as u64;
        self.gpu
            .launch(&self.k("reduce_sum_u32")?, LaunchConfig::blocks(g, BLOCK))
            .arg(v)
            .arg(&n)
            .arg(&parts)
            .run()?;
        self.finish_sum_u64(&parts)
    }

    fn finish_sum_u64(&self, parts: &DeviceBuffer<u64>) -> GpuResult<u64> {
        let out = self.gpu.alloc::<u64>(1)?;
        let n = parts.len() as u64;
        self.gpu
            .launch(&self.k("reduce_sum_u64")?, LaunchConfig::blocks(1, BLOCK))
            .arg(parts)
            .arg(&n)
            .arg(&out)
            .run()?;
        self.gpu.download_at(&out, 0)
    }

    /// Sum of u64 values (wrapping).
    pub fn reduce_sum_u64(&self, v: &DeviceBuffer<u64>) -> GpuResult<u64> {
        if v.is_empty() {
            return Ok(0);
        }
        let g = self.reduce_grid(v.len());
        let parts = self.gpu.alloc::<u64>(g as usize)?;
        let n = v.len() as u64;
        self.gpu
            .launch(&self.k("reduce_sum_u64")?, LaunchConfig::blocks(g, BLOCK))
            .arg(v)
            .arg(&n)
            .arg(&parts)
            .run()?;
        self.finish_sum_u64(&parts)
    }

    /// Sum of f64 values (fixed reduction tree: deterministic for a given device).
    pub fn reduce_sum_f64(&self, v: &DeviceBuffer<f64>) -> GpuResult<f64> {
        if v.is_empty() {
            return Ok(0.0);
        }
        let g = self.reduce_grid(v.len());
        let parts = self.gpu.alloc::<f64>(g as usize)?;
        let out = self.gpu.alloc::<f64>(1)?;
        let k = self.k("reduce_sum_f64")?;
        let (n, np) = (v.len() as u64, g as u64);
        self.gpu
            .launch(&k, LaunchConfig::blocks(g, BLOCK))
            .arg(v)
            .arg(&n)
            .arg(&parts)
            .run()?;
        self.gpu
            .launch(&k, LaunchConfig::blocks(1, BLOCK))
            .arg(&parts)
            .arg(&np)
            .arg(&out)
            .run()?;
        self.gpu.download_at(&out, 0)
    }

    /// Maximum of u32 values (0 when empty).
    pub fn reduce_max_u32(&self, v: &DeviceBuffer<u32>) -> GpuResult<u32> {
        if v.is_empty() {
            return Ok(0);
        }
        let g = self.reduce_grid(v.len());
        let parts = self.gpu.alloc::<u32>(g as usize)?;
        let n = v.len() as u64;
        self.gpu
            .launch(&self.k("reduce_max_u32")?, LaunchConfig::blocks(g, BLOCK))
            .arg(v)
            .arg(&n)
            .arg(&parts)
            .run()?;
        self.finish_max(&parts)
    }

    fn finish_max(&self, parts: &DeviceBuffer<u32>) -> GpuResult<u32> {
        let out = self.gpu.alloc::<u32>(1)?;
        let n = parts.len() as u64;
        self.gpu
            .launch(&self.k("reduce_max_u32")?, LaunchConfig::blocks(1, BLOCK))
            .arg(parts)
            .arg(&n)
            .arg(&out)
            .run()?;
        self.gpu.download_at(&out, 0)
    }

    /// Longest row of a CSR offsets array (`nrows + 1` entries).
    pub fn max_row_len(&self, offsets: &DeviceBuffer<u32>) -> GpuResult<u32> {
        let nrows = offsets.len().saturating_sub(1);
        if nrows == 0 {
            return Ok(0);
        }
        let g = self.reduce_grid(nrows);
        let parts = self.gpu.alloc::<u32>(g as usize)?;
        let n = nrows as u64;
        self.gpu
            .launch(&self.k("row_len_max")?, LaunchConfig::blocks(g, BLOCK))
            .arg(offsets)
            .arg(&n)
            .arg(&parts)
            .run()?;
        self.finish_max(&parts)
    }

    // ------------------------------------------------------------ compaction

    /// Positions (exclusive scan of 0/1 flags, with the total appended) and the total.
    fn flag_positions(
        &self,
        flags: &DeviceBuffer<u32>,
        normalise: bool,
    ) -> GpuResult<(DeviceBuffer<u32>, usize)> {
        let n = flags.len();
        u32_len(n, "compaction")?;
        let pos = if normalise {
            let f01 = self.gpu.alloc::<u32>(n)?;
            let nn = n as u64;
            self.gpu
                .launch(&self.k("flags_to_01")?, items_cfg(n)?)
                .arg(flags)
                .arg(&nn)
                .arg(&f01)
                .run()?;
            self.exclusive_scan_with_total(&f01)?
        } else {
            self.exclusive_scan_with_total(flags)?
        };
        let total = self.gpu.download_at(&pos, n)? as usize;
        Ok((pos, total))
    }

    /// Stable stream compaction: the elements of `values` whose flag is non-zero, in order.
    /// `T` must be 4 or 8 bytes wide.
    pub fn compact<T: Element>(
        &self,
        values: &DeviceBuffer<T>,
        flags: &DeviceBuffer<u32>,
    ) -> GpuResult<DeviceBuffer<T>> {
        let n = values.len();
        if flags.len() != n {
            return Err(GpuError::InvalidArgument(format!(
                "compact: {n} values but {} flags",
                flags.len()
            )));
        }
        let kname = match std::mem::size_of::<T>() {
            4 => "compact_scatter_b32",
            8 => "compact_scatter_b64",
            s => {
                return Err(GpuError::InvalidArgument(format!(
                    "compact: elements of {s} bytes (4 or 8 supported)"
                )))
            }
        };
        let (pos, total) = self.flag_positions(flags, true)?;
        let out = self.gpu.alloc::<T>(total)?;
        // the scatter reads raw flags; non-zero means keep, matching the normalised scan
        let nn = n as u64;
        self.gpu
            .launch(&self.k(kname)?, items_cfg(n)?)
            .arg(values)
            .arg(flags)
            .arg(&pos)
            .arg(&nn)
            .arg(&out)
            .run()?;
        Ok(out)
    }

    /// Indices `i` with `flags[i] != 0`, increasing.
    pub fn compact_indices(&self, flags: &DeviceBuffer<u32>) -> GpuResult<DeviceBuffer<u32>> {
        let n = flags.len();
        let (pos, total) = self.flag_positions(flags, true)?;
        let out = self.gpu.alloc::<u32>(total)?;
        let nn = n as u64;
        self.gpu
            .launch(&self.k("compact_indices")?, items_cfg(n)?)
            .arg(flags)
            .arg(&pos)
            .arg(&nn)
            .arg(&out)
            .run()?;
        Ok(out)
    }

    // ------------------------------------------------------------ histogram

    /// Count of each key below `nbins` (larger keys are ignored).
    pub fn histogram(&self, keys: &DeviceBuffer<u32>, nbins: u32) -> GpuResult<DeviceBuffer<u32>> {
        let bins = self.gpu.zeros::<u32>(nbins as usize)?;
        self.histogram_into(keys, &bins)?;
        Ok(bins)
    }

    /// Add the counts of `keys` to `bins` (keys >= `bins.len()` are ignored).
    pub fn histogram_into(
        &self,
        keys: &DeviceBuffer<u32>,
        bins: &DeviceBuffer<u32>,
    ) -> GpuResult<()> {
        let n = keys.len();
        let nbins = bins.len();
        u32_len(nbins, "histogram bins")?;
        if n == 0 || nbins == 0 {
            return Ok(());
        }
        let nn = n as u64;
        let nb = nbins as u32;
        if nbins <= 12 * 1024 {
            let g = n
                .div_ceil(BLOCK as usize)
                .clamp(1, (self.gpu.sm_count().max(1) * 4) as usize) as u32;
            let cfg = LaunchConfig::blocks(g, BLOCK).with_shared(nb * 4);
            self.gpu
                .launch(&self.k("histogram_shared")?, cfg)
                .arg(keys)
                .arg(&nn)
                .arg(bins)
                .arg(&nb)
                .run()
        } else {
            let g = n.div_ceil(BLOCK as usize).clamp(1, 1 << 16) as u32;
            self.gpu
                .launch(&self.k("histogram_global")?, LaunchConfig::blocks(g, BLOCK))
                .arg(keys)
                .arg(&nn)
                .arg(bins)
                .arg(&nb)
                .run()
        }
    }

    // ------------------------------------------------------------ radix sort

    /// Stable LSD radix sort of `keys` (8-bit digits) on their low `bits` bits (`None`: all),
    /// carrying `values` along when given. Keys with bits set above `bits` are sorted by
    /// their low bits only.
    pub fn radix_sort<K: Key, V: Bits32>(
        &self,
        keys: &mut DeviceBuffer<K>,
        values: Option<&mut DeviceBuffer<V>>,
        bits: Option<u32>,
    ) -> GpuResult<()> {
        let n = keys.len();
        u32_len(n, "radix sort")?;
        if let Some(v) = values.as_deref() {
            if v.len() != n {
                return Err(GpuError::InvalidArgument(format!(
                    "radix sort: {n} keys but {} values",
                    v.len()
                )));
            }
        }
        let bits = bits.unwrap_or(K::BITS);
        if bits > K::BITS {
            return Err(GpuError::InvalidArgument(format!(
                "radix sort on {bits} bits of {}-bit keys",
                K::BITS
            )));
        }
        if n <= 1 || bits == 0 {
            return Ok(());
        }
        let passes = bits.div_ceil(8);
        let nblocks = n.div_ceil(RTILE);
        let counts = self.gpu.alloc::<u32>(RADIX * nblocks)?;
        let mut alt_k = self.gpu.alloc::<K>(n)?;
        let has_vals = values.is_some() as u32;
        let mut alt_v = self.gpu.alloc::<V>(if values.is_some() { n } else { 1 })?;
        let dummy = self.gpu.alloc::<V>(1)?;
        let count_k = self.k(&format!("radix_count_{}", K::SUFFIX))?;
        let scatter_k = self.k(&format!("radix_scatter_{}", K::SUFFIX))?;
        let cfg = LaunchConfig::blocks(nblocks as u32, BLOCK);
        let nn = n as u64;
        let mut in_orig = true;
        for p in 0..passes {
            let shift = 8 * p;
            let (src_k, dst_k): (&DeviceBuffer<K>, &DeviceBuffer<K>) = if in_orig {
                (keys, &alt_k)
            } else {
                (&alt_k, keys)
            };
            let (src_v, dst_v): (&DeviceBuffer<V>, &DeviceBuffer<V>) = match values.as_deref() {
                Some(v) => {
                    if in_orig {
                        (v, &alt_v)
                    } else {
                        (&alt_v, v)
                    }
                }
                None => (&dummy, &dummy),
            };
            self.gpu
                .launch(&count_k, cfg)
                .arg(src_k)
                .arg(&nn)
                .arg(&shift)
                .arg(&counts)
                .run()?;
            self.scan_raw(&counts, &counts, RADIX * nblocks, false, false)?;
            self.gpu
                .launch(&scatter_k, cfg)
                .arg(src_k)
                .arg(src_v)
                .arg(dst_k)
                .arg(dst_v)
                .arg(&has_vals)
                .arg(&nn)
                .arg(&shift)
                .arg(&counts)
                .run()?;
            in_orig = !in_orig;
        }
        if !in_orig {
            std::mem::swap(keys, &mut alt_k);
            if let Some(v) = values {
                std::mem::swap(v, &mut alt_v);
            }
        }
        Ok(())
    }

    /// Stable sort of keys only (see [`Primitives::radix_sort`]).
    pub fn radix_sort_keys<K: Key>(
        &self,
        keys: &mut DeviceBuffer<K>,
        bits: Option<u32>,
    ) -> GpuResult<()> {
        self.radix_sort::<K, u32>(keys, None, bits)
    }

    // ------------------------------------------------------------ segmented sort

    /// Sort every row `offsets[r]..offsets[r + 1]` of `vals` by `order`. Rows up to
    /// [`SHORT_ROW`] entries are sorted one thread per row, rows up to [`MID_ROW`] one block
    /// per row (bitonic, in shared memory); when a longer row exists the whole array is
    /// sorted by the composite key `(row, key)` with the radix sort.
    pub fn segmented_sort<T: Bits32>(
        &self,
        vals: &mut DeviceBuffer<T>,
        offsets: &DeviceBuffer<u32>,
        order: SegOrder,
    ) -> GpuResult<()> {
        let nrows = offsets.len().saturating_sub(1);
        if nrows == 0 || vals.is_empty() {
            return Ok(());
        }
        let last = self.gpu.download_at(offsets, nrows)? as usize;
        if last != vals.len() {
            return Err(GpuError::InvalidArgument(format!(
                "segmented sort: offsets end at {last} but there are {} values",
                vals.len()
            )));
        }
        let maxlen = self.max_row_len(offsets)?;
        self.segmented_sort_known(vals, offsets, order, maxlen)
    }

    /// Sort every row of `vals` by `order` one thread per row (insertion sort), whatever the
    /// row lengths: no host synchronisation, for rows the caller expects to be short (faces
    /// of a 3-manifold bound at most two cells). Correct for any row; a long row costs its
    /// thread time quadratic in its length.
    pub fn segmented_sort_short<T: Bits32>(
        &self,
        vals: &mut DeviceBuffer<T>,
        offsets: &DeviceBuffer<u32>,
        order: SegOrder,
    ) -> GpuResult<()> {
        let nrows = offsets.len().saturating_sub(1);
        if nrows == 0 || vals.is_empty() {
            return Ok(());
        }
        let (nr, mode, skip_above) = (nrows as u64, order.mode(), u32::MAX);
        self.gpu
            .launch(&self.k("segsort_rows")?, items_cfg(nrows)?)
            .arg(&*vals)
            .arg(offsets)
            .arg(&nr)
            .arg(&mode)
            .arg(&skip_above)
            .run()
    }

    /// [`Primitives::segmented_sort`] for a caller that knows the longest row (`max_len`, at
    /// least the true one) and that `offsets` end at `vals.len()`: no host synchronisation.
    pub fn segmented_sort_known<T: Bits32>(
        &self,
        vals: &mut DeviceBuffer<T>,
        offsets: &DeviceBuffer<u32>,
        order: SegOrder,
        maxlen: u32,
    ) -> GpuResult<()> {
        let nrows = offsets.len().saturating_sub(1);
        if nrows == 0 || vals.is_empty() || maxlen <= 1 {
            return Ok(());
        }
        let nr = nrows as u64;
        let mode = order.mode();
        if maxlen <= MID_ROW {
            let skip_above = if maxlen <= SHORT_ROW {
                u32::MAX
            } else {
                SHORT_ROW
            };
            self.gpu
                .launch(&self.k("segsort_rows")?, items_cfg(nrows)?)
                .arg(&*vals)
                .arg(offsets)
                .arg(&nr)
                .arg(&mode)
                .arg(&skip_above)
                .run()?;
            if maxlen <= SHORT_ROW {
                return Ok(());
            }
            let grid = nrows
                .div_ceil(BLOCK as usize)
                .clamp(1, (self.gpu.sm_count().max(1) * 4) as usize) as u32;
            let short_row = SHORT_ROW;
            return self
                .gpu
                .launch(
                    &self.k("segsort_mid_rows")?,
                    LaunchConfig::blocks(grid, BLOCK),
                )
                .arg(&*vals)
                .arg(offsets)
                .arg(&nr)
                .arg(&mode)
                .arg(&short_row)
                .run();
        }
        let mut keys = self.gpu.alloc::<u64>(vals.len())?;
        self.gpu
            .launch(&self.k("segsort_keys")?, items_cfg(nrows)?)
            .arg(&*vals)
            .arg(offsets)
            .arg(&nr)
            .arg(&mode)
            .arg(&keys)
            .run()?;
        let row_bits = 64 - ((nrows - 1) as u64).leading_zeros();
        self.radix_sort(&mut keys, Some(vals), Some(32 + row_bits))
    }

    // ------------------------------------------------------------ unique

    /// Unique keys of a sorted buffer, and for every input element the index of its run
    /// (dissertation §3.4.1: "sort, mark duplicates, compact").
    pub fn unique_with_ids<K: Key>(
        &self,
        sorted: &DeviceBuffer<K>,
    ) -> GpuResult<(DeviceBuffer<K>, DeviceBuffer<u32>)> {
        let n = sorted.len();
        u32_len(n, "unique")?;
        let flags = self.gpu.alloc::<u32>(n)?;
        let nn = n as u64;
        self.gpu
            .launch(
                &self.k(&format!("unique_flags_{}", K::SUFFIX))?,
                items_cfg(n)?,
            )
            .arg(sorted)
            .arg(&nn)
            .arg(&flags)
            .run()?;
        let (pos, total) = self.flag_positions(&flags, false)?;
        let out = self.gpu.alloc::<K>(total)?;
        let kname = if K::BITS == 32 {
            "compact_scatter_b32"
        } else {
            "compact_scatter_b64"
        };
        self.gpu
            .launch(&self.k(kname)?, items_cfg(n)?)
            .arg(sorted)
            .arg(&flags)
            .arg(&pos)
            .arg(&nn)
            .arg(&out)
            .run()?;
        let ids = self.gpu.alloc::<u32>(n)?;
        self.gpu
            .launch(&self.k("unique_ids")?, items_cfg(n)?)
            .arg(&flags)
            .arg(&pos)
            .arg(&nn)
            .arg(&ids)
            .run()?;
        Ok((out, ids))
    }

    /// Unique keys of a sorted buffer.
    pub fn unique<K: Key>(&self, sorted: &DeviceBuffer<K>) -> GpuResult<DeviceBuffer<K>> {
        Ok(self.unique_with_ids(sorted)?.0)
    }

    // ------------------------------------------------------------ helpers

    /// `start, start + 1, ...` (n values).
    pub fn iota(&self, n: usize, start: u32) -> GpuResult<DeviceBuffer<u32>> {
        let out = self.gpu.alloc::<u32>(n)?;
        let nn = n as u64;
        self.gpu
            .launch(&self.k("iota_u32")?, items_cfg(n)?)
            .arg(&out)
            .arg(&nn)
            .arg(&start)
            .run()?;
        Ok(out)
    }

    /// A buffer of `n` copies of `value`.
    pub fn fill(&self, n: usize, value: u32) -> GpuResult<DeviceBuffer<u32>> {
        let out = self.gpu.alloc::<u32>(n)?;
        let nn = n as u64;
        self.gpu
            .launch(&self.k("fill_u32")?, items_cfg(n)?)
            .arg(&out)
            .arg(&nn)
            .arg(&value)
            .run()?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs without a GPU: every kernel the Rust side launches is defined in the source
    /// (a misspelt name would otherwise surface only on the device).
    #[test]
    fn every_launched_kernel_is_defined() {
        for n in [
            "reduce_sum_u32",
            "reduce_sum_u64",
            "reduce_sum_f64",
            "reduce_max_u32",
            "row_len_max",
            "compact_scatter_b32",
            "compact_scatter_b64",
            "compact_indices",
            "flags_to_01",
            "histogram_shared",
            "histogram_global",
            "segsort_rows",
            "segsort_mid_rows",
            "segsort_keys",
            "unique_flags_u32",
            "unique_flags_u64",
            "unique_ids",
            "iota_u32",
            "fill_u32",
        ] {
            // `void name(` or, with launch bounds, `__launch_bounds__(BLOCK) name(`
            let defined = SOURCE.contains(&format!("void {n}("))
                || SOURCE.contains(&format!("__launch_bounds__(BLOCK) {n}("));
            assert!(defined, "kernel {n} is not defined in primitives.cu");
        }
        for base in [
            "scan_tile_sums_",
            "scan_tiles_",
            "radix_count_",
            "radix_scatter_",
        ] {
            assert!(
                SOURCE.contains(&format!("{base}##S(")),
                "kernel family {base}* is not defined"
            );
        }
        for inst in [
            "SCAN_INSTANCES(u32, u32)",
            "SCAN_INSTANCES(u64, u64)",
            "RADIX_INSTANCES(u32, u32)",
            "RADIX_INSTANCES(u64, u64)",
        ] {
            assert!(SOURCE.contains(inst), "{inst} missing");
        }
        assert_eq!(<u32 as Key>::SUFFIX, "u32");
        assert_eq!(<u64 as Key>::SUFFIX, "u64");
    }

    #[test]
    fn seg_keys_order_like_the_cpu_reference() {
        use tessera_core::Idx;
        // TCSR order: by decoded column, -c before +c
        let enc = |c: Idx, neg: bool| ((c as i32) ^ -(neg as i32)) as u32;
        let mut v = vec![
            enc(5, false),
            enc(2, true),
            enc(5, true),
            enc(0, false),
            enc(2, false),
        ];
        let n = v.len() as u32;
        cpu::segmented_sort(&mut v, &[0, n], SegOrder::TcsrColumn);
        assert_eq!(
            v,
            vec![
                enc(0, false),
                enc(2, true),
                enc(2, false),
                enc(5, true),
                enc(5, false)
            ]
        );
        let mut s = vec![3u32, (-1i32) as u32, 0, (-7i32) as u32];
        cpu::segmented_sort(&mut s, &[0, 4], SegOrder::Signed);
        assert_eq!(s, vec![(-7i32) as u32, (-1i32) as u32, 0, 3]);
    }
}
