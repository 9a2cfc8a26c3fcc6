//! Transposition of ternary sparse operators by count -> scan -> fill (dissertation
//! Listing 3.1, §3.4.1), deterministic and parallel.
//!
//! The transpose of an `nrows x ncols` TCSR matrix has one row per input column; the entry
//! `(r, c)` with sign `s` becomes the entry `(c, r)` with the same sign. Every output row
//! lists its entries **in input order** (input row ascending, then position within the
//! row); since a TCSR row never repeats a column, this is the order by decoded column, the
//! `SortRows` order of Listing 3.1. The order does not depend on the thread count.
//!
//! Inputs ([`Entries`]) are TCSR rows with explicit offsets, rows of one fixed length with
//! implicit offsets (`∂3` of a tetrahedral mesh: 4 faces per cell; `∂2` of a triangle-faced
//! mesh: 3 edges per face; Eqs. 3.11-3.13), or `∂1` stored as ordered vertex pairs.
//!
//! - **One thread**: count into the offsets array, exclusive scan in place, then fill with
//!   the offsets themselves as cursors (after the fill, `offsets[c + 1]` has advanced from
//!   the start to the end of row `c`, which is the start of row `c + 1`): no cursor array,
//!   no searching, and rows come out ordered without a sort.
//! - **Several threads, per-chunk counters** (count -> scan -> fill that scales): the
//!   input rows are cut into one contiguous chunk per thread, of about equal entry counts.
//!   Each chunk counts its entries per output row into counters of its own (the last chunk
//!   into the offsets array itself), and per range of output rows (for the scan). An
//!   exclusive scan over (output row, chunk), chunk order inside each output row, run on
//!   ranges of output rows in parallel, turns the counters into write positions: chunk
//!   `k`'s entries of output row `c` go after those of chunks `0..k`. Each chunk then
//!   fills its entries in input order from its own positions, and the last chunk's
//!   positions end at the next row's offsets. Inside every output row the entries come
//!   chunk after chunk, each chunk in input order: the input order, exactly as with one
//!   thread. Every output position has one writer; there is no atomic read-modify-write,
//!   no sort and no intermediate copy of the entries.
//! - **Several threads, column buckets** (when the counters of all chunks would outweigh
//!   the entries: many output rows against the entries, and many threads; see
//!   [`split_for`]): the output rows are cut into column buckets (ranges of output rows)
//!   and the input rows into one chunk per thread. Each chunk counts its entries per
//!   bucket, then copies them (output row, value) into a bucketed buffer, chunk after
//!   chunk inside each bucket, so each bucket keeps the input order. Then every bucket runs
//!   the one-thread algorithm on its own column range, writing a disjoint part of the
//!   offsets and entry arrays (whose start is the number of entries of the buckets before
//!   it). Every write has exactly one owner; there are no atomics and no sort.
//! - **At most one entry of each sign per output row** ([`transpose_two_sided`]; δ3 of a
//!   consistently oriented manifold mesh, where a face bounds at most two cells with
//!   opposite orientations): no counting. Every entry stores its input row into one of two
//!   slots of its output row, picked by its sign; the slots are then compacted into rows.
//!   One pass over the entries instead of two, on any number of threads; an input where
//!   some output row has two entries of one sign is detected and declined.

use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Instant;
use tessera_core::bulk::{advise_huge_pages, filled};
use tessera_core::trace::{self, Tracer};
use tessera_core::Par;

/// A source of entries for [`transpose_entries`]: rows of entries, each entry with the
/// output row it goes to (its decoded column) and its sign.
///
/// Sealed: the parallel fill writes its output uninitialised and relies on every method
/// returning the same values in the count pass and in the fill pass, which the three
/// sources here guarantee (they read slices borrowed for the whole call).
pub trait Entries: Sync + sealed::Sealed {
    /// Number of input rows (the columns of the result).
    fn nrows(&self) -> usize;
    /// Number of entries.
    fn nnz(&self) -> usize;
    /// Index of the first entry of row `r` (`r <= nrows`; `row_start(nrows) = nnz`).
    fn row_start(&self, r: usize) -> usize;
    /// Output row of entry `i` (its decoded column).
    fn col(&self, i: usize) -> u32;
    /// Sign mask of entry `i`: 0 for +1, -1 (all bits) for -1.
    fn sign_mask(&self, i: usize) -> i32;
    /// The row holding entry `i` for `i < nnz` (the last row starting at or before `i`;
    /// used only at chunk boundaries).
    fn row_of(&self, i: usize) -> usize;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::TcsrEntries<'_> {}
    impl<const K: usize> Sealed for super::StridedEntries<'_, K> {}
    impl Sealed for super::EdgePairEntries<'_> {}
}

/// TCSR rows with explicit offsets.
pub struct TcsrEntries<'a> {
    pub offsets: &'a [u32],
    pub columns: &'a [i32],
}

impl Entries for TcsrEntries<'_> {
    fn nrows(&self) -> usize {
        self.offsets.len() - 1
    }
    fn nnz(&self) -> usize {
        self.columns.len()
    }
    #[inline(always)]
    fn row_start(&self, r: usize) -> usize {
        self.offsets[r] as usize
    }
    #[inline(always)]
    fn col(&self, i: usize) -> u32 {
        let v = self.columns[i];
        (v ^ (v >> 31)) as u32
    }
    #[inline(always)]
    fn sign_mask(&self, i: usize) -> i32 {
        self.columns[i] >> 31
    }
    fn row_of(&self, i: usize) -> usize {
        // last r with offsets[r] <= i (empty rows before i are skipped)
        self.offsets.partition_point(|&o| o as usize <= i) - 1
    }
}

/// TCSR rows of one fixed length `K` with implicit offsets (Eqs. 3.11-3.13).
pub struct StridedEntries<'a, const K: usize> {
    pub columns: &'a [i32],
}

impl<const K: usize> Entries for StridedEntries<'_, K> {
    fn nrows(&self) -> usize {
        self.columns.len() / K
    }
    fn nnz(&self) -> usize {
        self.columns.len()
    }
    #[inline(always)]
    fn row_start(&self, r: usize) -> usize {
        r * K
    }
    #[inline(always)]
    fn col(&self, i: usize) -> u32 {
        let v = self.columns[i];
        (v ^ (v >> 31)) as u32
    }
    #[inline(always)]
    fn sign_mask(&self, i: usize) -> i32 {
        self.columns[i] >> 31
    }
    fn row_of(&self, i: usize) -> usize {
        i / K
    }
}

/// `∂1` as ordered vertex pairs `[from, to]`: -1 at `from`, +1 at `to` (dissertation
/// §3.4.1, the edge-pair variant of the transposition).
pub struct EdgePairEntries<'a> {
    /// The pairs, flattened (`2 * edges` vertex indices).
    pub flat: &'a [u32],
}

impl Entries for EdgePairEntries<'_> {
    fn nrows(&self) -> usize {
        self.flat.len() / 2
    }
    fn nnz(&self) -> usize {
        self.flat.len()
    }
    #[inline(always)]
    fn row_start(&self, r: usize) -> usize {
        2 * r
    }
    #[inline(always)]
    fn col(&self, i: usize) -> u32 {
        self.flat[i]
    }
    #[inline(always)]
    fn sign_mask(&self, i: usize) -> i32 {
        ((i & 1) as i32) - 1
    }
    fn row_of(&self, i: usize) -> usize {
        i / 2
    }
}

/// The parallel algorithm of [`transpose_entries`] (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TransposeSplit {
    /// Chosen from the size and the threads ([`split_for`]).
    #[default]
    Auto,
    /// Per-chunk counters, a scan over (output row, chunk), a fill from each chunk's own
    /// positions.
    Counters,
    /// Column buckets: entries copied into per-bucket pieces, then each bucket transposed
    /// on its own.
    Buckets,
}

/// Knobs of [`transpose_entries`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransposeParams {
    /// Input chunks (0: one per thread of the current rayon pool). One chunk runs the
    /// one-thread algorithm.
    pub chunks: usize,
    /// The parallel algorithm.
    pub split: TransposeSplit,
    /// Output rows per column bucket of [`TransposeSplit::Buckets`], as a power of two
    /// (0: chosen from the size).
    pub bucket_bits: u32,
    /// Inputs with fewer entries run on one thread.
    pub min_parallel_nnz: usize,
}

impl Default for TransposeParams {
    fn default() -> Self {
        TransposeParams {
            chunks: 0,
            split: TransposeSplit::Auto,
            bucket_bits: 0,
            min_parallel_nnz: 1 << 16,
        }
    }
}

/// The transpose of `src` with `ncols` output rows, as `(offsets, entries)`: `offsets` has
/// `ncols + 1` elements, entries are TCSR-encoded input row indices (see the module docs
/// for the order). `parallel` selects the multi-thread algorithm (run in the current rayon
/// pool); both give identical arrays.
///
/// Panics if an entry's output row is `>= ncols`, there are `2^32` or more entries, or
/// the rows do not hold every entry exactly once (the TCSR invariants the callers
/// guarantee).
pub fn transpose_entries<E: Entries>(
    src: &E,
    ncols: usize,
    parallel: bool,
    params: TransposeParams,
) -> (Vec<u32>, Vec<i32>) {
    let nnz = src.nnz();
    assert!(nnz <= u32::MAX as usize, "2^32 or more entries");
    let chunks = if params.chunks > 0 {
        params.chunks
    } else {
        rayon::current_num_threads()
    };
    if !parallel || chunks <= 1 || nnz < params.min_parallel_nnz || ncols == 0 {
        return transpose_serial(src, ncols);
    }
    let split = match params.split {
        TransposeSplit::Auto => split_for(chunks, nnz, ncols),
        s => s,
    };
    match split {
        TransposeSplit::Buckets => transpose_bucketed(src, ncols, chunks, params.bucket_bits),
        _ => transpose_counters(src, ncols, chunks),
    }
}

/// Entries ahead of the current one whose targets are prefetched: the scatter targets lie
/// all over arrays larger than the caches, and prefetching keeps several misses in flight.
const AHEAD: usize = 32;

/// Hint the processor to fetch the cache line holding `x` (no effect on results).
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and never changes memory, and the
    // address comes from a valid reference. SSE is part of the x86_64 baseline.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(x as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Hint the processor to fetch the cache line at `p` for writing (`prefetchw`: in the
/// exclusive state, so that a line another core wrote last moves once, not twice as with a
/// read prefetch followed by the store's ownership request; no effect on results). `p`
/// need not point to initialized memory.
#[inline(always)]
pub fn prefetch_write<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults (not even at an invalid address)
    // and never changes memory. `prefetchw` executes as a no-op on x86_64 processors
    // without it (it sits in the 0F 0D no-op opcode space).
    unsafe {
        std::arch::asm!(
            "prefetchw [{}]",
            in(reg) p,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Arrays of the one-thread transpose up to this size are allocated zeroed (`vec!`), larger
/// ones advised for huge pages before their first write. Up to here 4 KiB pages are within
/// the reach of a core's translation buffer (16 MiB with 4096 entries), and the zeroing
/// brings the array into the last-level cache ahead of the scatter (δ1 of the dragon, 10 MB,
/// measured fastest so: median 4.2 ms, against 4.5 ms allocated, advised and zeroed, and
/// 5.2-5.7 ms written once unzeroed). Beyond it the array needs huge pages, and `vec!` can
/// deny them: where the allocator hands out memory it had already used (a thread arena, as on
/// a rayon worker), `calloc` zeroes it itself, faulting its pages in 4 KiB before any advice.
/// δ2 of the dragon (22 MB) took 22.5-26.4 ms so, 15.0-17.3 ms advised and written once
/// (BENCHMARKS.md, session 33).
const SERIAL_ZEROED_MAX_BYTES: usize = 16 << 20;

/// One thread: count, scan, fill with the offsets as cursors; the arrays allocated as
/// [`SERIAL_ZEROED_MAX_BYTES`] says (the entry array, written once by the fill, is not
/// zeroed beyond it). Kept out of line: inlined into [`transpose_entries`], where its code
/// was laid out after the parallel paths', its speed moved with changes made to those paths
/// alone (one-thread δ2 of the dragon 8-10 % slower after a change to the counters' scan;
/// BENCHMARKS.md, session 35).
#[inline(never)]
fn transpose_serial<E: Entries>(src: &E, ncols: usize) -> (Vec<u32>, Vec<i32>) {
    let nnz = src.nnz();
    let nrows = src.nrows();
    // the rows must hold every entry once: the count below sees entries 0..nnz and the fill
    // the rows' entries, and a position counted but not filled would stay unwritten
    assert!(
        src.row_start(0) == 0 && src.row_start(nrows) == nnz,
        "the rows' entries do not add up to nnz"
    );
    let mut tr = Tracer::new("serial transpose");
    let mut offsets = if (ncols + 1).saturating_mul(4) <= SERIAL_ZEROED_MAX_BYTES {
        let mut v = vec![0u32; ncols + 1];
        advise_huge_pages(&mut v);
        v
    } else {
        filled(ncols + 1, 0u32, Par::Seq)
    };
    {
        let cur = &mut offsets[1..];
        for i in 0..nnz {
            if i + AHEAD < nnz {
                prefetch(&cur[src.col(i + AHEAD) as usize]);
            }
            cur[src.col(i) as usize] += 1;
        }
        let mut acc = 0u32;
        for x in cur.iter_mut() {
            let c = *x;
            *x = acc;
            acc += c;
        }
    }
    tr.mark("count+scan");
    let mut out: Vec<i32> = if nnz.saturating_mul(4) <= SERIAL_ZEROED_MAX_BYTES {
        let mut v = vec![0i32; nnz];
        advise_huge_pages(&mut v);
        // the zeros stay in memory (and in the cache); the fill below treats them as
        // capacity to write
        v.clear();
        v
    } else {
        let mut v = Vec::with_capacity(nnz);
        advise_huge_pages(&mut v);
        v
    };
    {
        let dst = &mut out.spare_capacity_mut()[..nnz];
        let cur = &mut offsets[1..];
        for r in 0..nrows {
            for i in src.row_start(r)..src.row_start(r + 1) {
                // two stages: the cursor of an entry 2 * AHEAD ahead, then the slot that
                // the cursor of an entry AHEAD ahead points to
                if i + 2 * AHEAD < nnz {
                    prefetch(&cur[src.col(i + 2 * AHEAD) as usize]);
                }
                if i + AHEAD < nnz {
                    let o = cur[src.col(i + AHEAD) as usize] as usize;
                    if o < nnz {
                        prefetch(&dst[o]);
                    }
                }
                let c = src.col(i) as usize;
                let o = cur[c];
                dst[o as usize].write((r as i32) ^ src.sign_mask(i));
                cur[c] = o + 1;
            }
        }
    }
    // SAFETY: the count saw every entry (the rows' entries are 0..nnz: asserted above), and
    // the scan gave each output row as many positions as it counted, after those of the rows
    // before it: the positions are 0..nnz. The fill visited the same entries (the sealed
    // `Entries` return the same columns in both passes) and wrote each at its row's next
    // position, so every position of 0..nnz was written (once).
    unsafe { out.set_len(nnz) };
    tr.mark("fill");
    (offsets, out)
}

/// The parallel algorithm [`transpose_entries`] runs on `threads` threads for `nnz`
/// entries and `ncols` output rows: per-chunk counters when the counters of all chunks but
/// the last (which counts into the offsets themselves) are at most one and a half times the
/// entries (`(threads - 1) * ncols <= 1.5 * nnz`), else column buckets. The factor is where
/// the two cross on the dragon's transposes on a 16-core host (BENCHMARKS.md, session 25:
/// δ1 takes the counters up to 16 threads, δ2 the buckets from 8, δ3's general path from 4).
/// Two threads take the counters on every mesh relation.
pub fn split_for(threads: usize, nnz: usize, ncols: usize) -> TransposeSplit {
    if 2 * (threads.saturating_sub(1) as u128) * (ncols as u128) <= 3 * nnz as u128 {
        TransposeSplit::Counters
    } else {
        TransposeSplit::Buckets
    }
}

/// Input chunks of about equal entry counts, on row boundaries: `chunks + 1` row bounds.
fn chunk_bounds<E: Entries>(src: &E, chunks: usize) -> Vec<usize> {
    let (nnz, nrows) = (src.nnz(), src.nrows());
    let mut bounds: Vec<usize> = (0..=chunks)
        .map(|k| {
            if k == chunks || nnz == 0 {
                nrows
            } else {
                src.row_of(nnz * k / chunks).min(nrows)
            }
        })
        .collect();
    bounds[0] = 0;
    for k in 1..bounds.len() {
        bounds[k] = bounds[k].max(bounds[k - 1]);
    }
    bounds
}

/// Count the entries of rows `rows` per output row into the bytes `h`, modulo 256: the
/// output row of every 256th entry counted in a row is returned (the carries, in the order
/// counted), so that a row's count is `h[c] + 256 * (its carries)`.
///
/// The chunk's entry range is clamped to `nnz` (a no-op for rows of the source, which end
/// at `row_start(nrows) = nnz`): with `e <= nnz` known, the compiler drops the bounds checks
/// of the entries' loads from the loop, as it does in the one-thread count, whose loop runs
/// to `nnz` itself. In-process A/B with the fill's change below (2 threads, 2-core machine,
/// BENCHMARKS.md, session 36): 2-thread δ1 16-21 % faster, δ2 4-8 %.
#[inline(never)]
fn count_chunk<E: Entries>(src: &E, rows: std::ops::Range<usize>, h: &mut [u8]) -> Vec<u32> {
    let e = src.row_start(rows.end).min(src.nnz());
    let b = src.row_start(rows.start).min(e);
    let mut carry = Vec::new();
    for i in b..e {
        if i + AHEAD < e {
            prefetch(&h[src.col(i + AHEAD) as usize]);
        }
        let c = src.col(i) as usize;
        let v = h[c].wrapping_add(1);
        h[c] = v;
        if v == 0 {
            carry_out(&mut carry, c);
        }
    }
    carry
}

/// The carries of one chunk (sorted) that fall in output rows `r`: 256 counts each.
fn carried<'a>(carries: &'a [u32], r: &std::ops::Range<usize>) -> &'a [u32] {
    let a = carries.partition_point(|&x| (x as usize) < r.start);
    let b = carries.partition_point(|&x| (x as usize) < r.end);
    &carries[a..b]
}

/// A count of 256 in output row `c` (out of line and cold: rows with 256 entries in one
/// chunk are rare in meshes).
#[cold]
#[inline(never)]
fn carry_out(carry: &mut Vec<u32>, c: usize) {
    carry.push(c as u32);
}

/// An array that several threads write at disjoint positions before it is initialized
/// (each position exactly once): the entry array of [`transpose_counters`], the bucketed
/// copy of [`transpose_bucketed`].
struct SharedOut<T>(*mut T);
impl<T> Clone for SharedOut<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SharedOut<T> {}
// SAFETY: the threads write disjoint positions of one allocation that outlives the parallel
// pass (see `fill_chunk` and `transpose_bucketed`); nothing reads it until the pass has
// joined.
unsafe impl<T: Send> Send for SharedOut<T> {}
// SAFETY: as above
unsafe impl<T: Send> Sync for SharedOut<T> {}

impl<T> SharedOut<T> {
    /// The element at `i` (a pointer into the allocation; the caller keeps `i` in bounds).
    #[inline(always)]
    fn at(self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }
}

/// A small array that one worker reads and updates in its hot loop (per-range counters,
/// per-bucket cursors), with 128 bytes of padding on each side: no cache line holding its
/// elements, nor the neighbouring line the L2 streamer fetches in pairs, holds part of another
/// allocation. Without it, two workers' arrays of a few hundred bytes, allocated one after
/// the other from one arena, shared a line whenever the first one's end was not line-aligned,
/// and every increment of a counter there moved the line between the cores: the 2-thread
/// two-slot scatter of the dragon took 9.8-13.6 ms in those calls and 7.7-8.6 ms in the
/// others, one thread 14.5 ms (BENCHMARKS.md, session 41).
struct Private<T> {
    buf: Vec<T>,
}

impl<T: Copy + Default> Private<T> {
    /// Elements of padding on each side.
    const PAD: usize = 128 / std::mem::size_of::<T>();

    /// `len` elements, each `value`.
    fn filled(len: usize, value: T) -> Self {
        Private {
            buf: vec![value; len + 2 * Self::PAD],
        }
    }

    /// A copy of `init`.
    fn from_slice(init: &[T]) -> Self {
        let mut p = Self::filled(init.len(), T::default());
        p.as_mut_slice().copy_from_slice(init);
        p
    }

    fn as_slice(&self) -> &[T] {
        &self.buf[Self::PAD..self.buf.len() - Self::PAD]
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        let n = self.buf.len();
        &mut self.buf[Self::PAD..n - Self::PAD]
    }
}

/// `s` zeroed (its integer type's `Default`), as initialized elements.
fn zeroed<T: Copy + Default>(s: &mut [MaybeUninit<T>]) -> &mut [T] {
    s.fill(MaybeUninit::new(T::default()));
    // SAFETY: every element was initialized on the line above, and `MaybeUninit<T>` has
    // the size, alignment and layout of `T`.
    unsafe { &mut *(s as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// Fill the entries of rows `rows`: `cur` holds each output row's write position for this
/// chunk and advances past every entry written. `out` is the whole entry array of `nnz`
/// elements (shared with the other chunks, which write other positions; not yet
/// initialized).
///
/// As in [`count_chunk`], the rows are clamped to `nrows` and the entry range to `nnz`
/// (no-ops for the source's own rows) so that the compiler can drop bounds checks, and a
/// position past the entries panics through a cold function of its own: the formatted
/// `assert!` it replaces kept the position on the stack, a store in every iteration.
#[inline(never)]
fn fill_chunk<E: Entries>(
    src: &E,
    rows: std::ops::Range<usize>,
    cur: &mut [u32],
    out: SharedOut<i32>,
    nnz: usize,
) {
    let rows = rows.start.min(src.nrows())..rows.end.min(src.nrows());
    let e = src.row_start(rows.end).min(src.nnz());
    for r in rows {
        for i in src.row_start(r)..src.row_start(r + 1) {
            // two stages, as in the one-thread fill
            if i + 2 * AHEAD < e {
                prefetch(&cur[src.col(i + 2 * AHEAD) as usize]);
            }
            if i + AHEAD < e {
                let o = cur[src.col(i + AHEAD) as usize] as usize;
                if o < nnz {
                    // the other chunks write the neighbouring entries of the same rows
                    prefetch_write(out.at(o));
                }
            }
            let c = src.col(i) as usize;
            let o = cur[c] as usize;
            if o >= nnz {
                fill_past_the_end(o, nnz);
            }
            // SAFETY: `o < nnz` (checked), inside the allocation of `nnz` elements; no other
            // chunk writes position `o` (see `transpose_counters`), and nothing reads the
            // array before the fill has joined.
            unsafe { out.at(o).write((r as i32) ^ src.sign_mask(i)) };
            cur[c] = (o + 1) as u32;
        }
    }
}

/// The panic of [`fill_chunk`] for a position past the entries (out of line and cold, so
/// that the fill's loop keeps the position in a register).
#[cold]
#[inline(never)]
fn fill_past_the_end(o: usize, nnz: usize) -> ! {
    panic!("fill position {o} past the {nnz} entries")
}

/// Entries of an `i32` array a 4 KiB page holds.
const PAGE_ENTRIES: usize = 4096 / std::mem::size_of::<i32>();

/// Fault in the pages of `out[range]` (not yet initialized) by writing a zero into each of
/// them, so that the fill's scattered writes find them mapped. Done by the scan, range of
/// output rows by range (`range` is the entry positions of those rows), on every thread.
/// Without it, the first write into each page (a huge page where the system grants them)
/// came in the middle of the fill, where both threads of a 2-thread transpose wait on the
/// kernel's fault and zeroing of pages they write together. In-process A/B on the 2-core
/// machine (a scratch switch, 21 rounds a process, pinned; BENCHMARKS.md, session 35), 2
/// threads: δ1 3-12 % faster (dragon 4.07 -> 3.83 ms, 3.29 -> 2.92 ms), 9-11 % on
/// bracket-1.69M; δ2 0-4 %. Zeroing the whole range gained the same as one write a page.
fn fault_in(out: SharedOut<i32>, range: std::ops::Range<usize>) {
    for i in range.step_by(PAGE_ENTRIES) {
        // SAFETY: `range` is the positions of a range of output rows, inside the allocation
        // of `nnz` elements and disjoint from every other range's, so no other thread
        // writes here now; the fill later writes every position again (see
        // `transpose_counters`) and nothing reads the array before it has joined.
        unsafe { out.at(i).write(0) };
    }
}

/// Several threads, per-chunk counters (see the module docs): `chunks` input chunks of
/// whole rows, each counting into byte counters of its own ([`count_chunk`]), an exclusive
/// scan over (output row, chunk) that writes every chunk's first positions into `u32`
/// cursors (the last chunk's into the offsets array), and each chunk filling from its own
/// cursors. After the fill the last chunk's cursors have advanced to the end of every
/// output row, which is the next row's offset: the offsets array is complete.
///
/// The counts are bytes (with the rare count past 255 carried on the side) because the
/// count is the phase that two threads sped up least: with `u32` counters each of them
/// updated an array as large as the one-thread transpose's at random positions, twice its
/// footprint in the shared cache (bracket-1.69M's δ2: 2 x 8.4 MB). As bytes both chunks'
/// counters take half of what one `u32` array did, and the cursors are written once, in
/// order, by the scan (no zeroing pass). BENCHMARKS.md, session 42.
fn transpose_counters<E: Entries>(src: &E, ncols: usize, chunks: usize) -> (Vec<u32>, Vec<i32>) {
    let nnz = src.nnz();
    let chunks = chunks.clamp(1, src.nrows().max(1));
    let bounds = chunk_bounds(src, chunks);
    // scan ranges: a power of two of output rows, about 8 ranges per thread
    let want = (8 * rayon::current_num_threads()).max(1);
    let range_bits = ncols
        .div_ceil(want)
        .max(1024)
        .next_power_of_two()
        .trailing_zeros();
    let nranges = ncols.div_ceil(1 << range_bits);
    let mut tr = Tracer::new("counters transpose");
    // every chunk zeroes its own byte counters right before counting into them, so they
    // start in its core's cache
    let mut bytes: Vec<u8> = Vec::with_capacity(chunks * ncols);
    advise_huge_pages(&mut bytes);
    let (counts, carries): (Vec<&[u8]>, Vec<Vec<u32>>) = bytes.spare_capacity_mut()
        [..chunks * ncols]
        .par_chunks_mut(ncols)
        .enumerate()
        .map(|(k, h)| {
            let h = zeroed(h);
            let mut carry = count_chunk(src, bounds[k]..bounds[k + 1], h);
            carry.sort_unstable();
            (&*h, carry)
        })
        .unzip();
    tr.mark("count");
    // exclusive scan over (output row, chunk): the totals of the ranges of output rows,
    // then the ranges in parallel, each from its base
    let totals: Vec<u32> = (0..nranges)
        .into_par_iter()
        .map(|s| {
            let r = s << range_bits..((s + 1) << range_bits).min(ncols);
            let mut t = 0u32;
            for (k, h) in counts.iter().enumerate() {
                t += h[r.clone()].iter().map(|&x| x as u32).sum::<u32>();
                t += 256 * carried(&carries[k], &r).len() as u32;
            }
            t
        })
        .collect();
    let mut base = Vec::with_capacity(nranges);
    let mut acc = 0u32;
    for t in totals {
        base.push(acc);
        acc += t;
    }
    // the rows must hold every entry once: with fewer counted, positions past the count
    // would stay unwritten (offsets of a `TcsrEntries` that end before its columns)
    assert_eq!(acc as usize, nnz, "the rows' entries do not add up to nnz");
    tr.mark("totals");
    // the cursors: chunks `0..chunks - 1` in `extra`, the last chunk in `offsets[1..]`,
    // written by the scan (every element of both, once)
    let mut offsets: Vec<u32> = Vec::with_capacity(ncols + 1);
    let mut extra: Vec<u32> = Vec::with_capacity((chunks - 1) * ncols);
    advise_huge_pages(&mut offsets);
    advise_huge_pages(&mut extra);
    // the fill writes every position of the entries exactly once (the positions of all
    // chunks are a permutation of 0..nnz), so the array is not zeroed; the scan faults its
    // pages in, one write a page (`fault_in`: zeroing each range there measured no faster)
    let mut out: Vec<i32> = Vec::with_capacity(nnz);
    advise_huge_pages(&mut out);
    let dst = SharedOut(out.as_mut_ptr());
    {
        let mut cursors: Vec<&mut [MaybeUninit<u32>]> = extra.spare_capacity_mut()
            [..(chunks - 1) * ncols]
            .chunks_mut(ncols)
            .collect();
        let (o0, orest) = offsets.spare_capacity_mut()[..ncols + 1].split_at_mut(1);
        o0[0].write(0);
        cursors.push(orest);
        let mut per_range: Vec<Vec<&mut [MaybeUninit<u32>]>> =
            (0..nranges).map(|_| Vec::with_capacity(chunks)).collect();
        for h in cursors.iter_mut() {
            for (s, piece) in h.chunks_mut(1 << range_bits).enumerate() {
                per_range[s].push(piece);
            }
        }
        per_range
            .into_par_iter()
            .zip(base)
            .enumerate()
            .for_each(|(s, (mut pieces, mut acc))| {
                let start = acc;
                let r = s << range_bits..((s + 1) << range_bits).min(ncols);
                // every chunk's carries in this range, as a cursor into them
                let mut next: Vec<&[u32]> = carries.iter().map(|c| carried(c, &r)).collect();
                let carry_free = next.iter().all(|c| c.is_empty());
                match pieces.as_mut_slice() {
                    [a, b] if carry_free => {
                        let (ha, hb) = (&counts[0][r.clone()], &counts[1][r.clone()]);
                        for (((x, y), &ca), &cb) in a.iter_mut().zip(b.iter_mut()).zip(ha).zip(hb) {
                            let (ca, cb) = (ca as u32, cb as u32);
                            x.write(acc);
                            y.write(acc + ca);
                            acc += ca + cb;
                        }
                    }
                    pieces => {
                        for (j, row) in r.clone().enumerate() {
                            for (k, p) in pieces.iter_mut().enumerate() {
                                let mut t = counts[k][row] as u32;
                                while let [c, rest @ ..] = next[k] {
                                    if *c as usize != row {
                                        break;
                                    }
                                    t += 256;
                                    next[k] = rest;
                                }
                                p[j].write(acc);
                                acc += t;
                            }
                        }
                    }
                }
                fault_in(dst, start as usize..acc as usize);
            });
    }
    // the counts are done with: freed before the fill
    drop(carries);
    drop(counts);
    drop(bytes);
    // SAFETY: the scan wrote every element of `extra[..(chunks - 1) * ncols]` and of
    // `offsets[1..=ncols]` (each range of output rows, for every chunk), and `offsets[0]`.
    unsafe {
        extra.set_len((chunks - 1) * ncols);
        offsets.set_len(ncols + 1);
    }
    tr.mark("scan");
    {
        let mut cursors: Vec<&mut [u32]> = extra.chunks_mut(ncols).collect();
        cursors.push(&mut offsets[1..]);
        cursors
            .par_iter_mut()
            .enumerate()
            .for_each(|(k, cur)| fill_chunk(src, bounds[k]..bounds[k + 1], cur, dst, nnz));
    }
    tr.mark("fill");
    // SAFETY: the exclusive scan over (output row, chunk) gave chunk `k` of output row `c`
    // the positions after those of chunks `0..k` of row `c` and of all chunks of rows
    // before `c`, as many as it counted; each chunk's fill wrote exactly the entries it
    // counted (the sealed `Entries` return the same rows and columns in both passes), each
    // at its next position, and the counts add up to `nnz` (asserted): the positions
    // written are 0..nnz, each once.
    unsafe { out.set_len(nnz) };
    (offsets, out)
}

/// Empty slot of [`transpose_two_sided`] (no TCSR row index reaches `2^31`).
const EMPTY: u32 = u32::MAX;

/// The transpose of `src` when every output row has at most one +1 and one -1 entry, as
/// `(offsets, entries)` identical to [`transpose_entries`]'s; `None` when some output row
/// has two entries of one sign (then it has done nothing the caller needs to undo).
///
/// This is δ3 = ∂3ᵀ of a consistently oriented manifold cell complex (dissertation §3.3):
/// a face bounds at most two cells, and the two cells see an interior face with opposite
/// orientations. No counting pass: every entry (input row `r`, output row `c`, sign `s`)
/// stores `r` into slot `2c + (s < 0)` of an array of empty slots (a plain store; chunks of
/// input rows in parallel), counting its entries per range of output rows on the side.
/// Then every range of output rows compacts its slots into rows (the filled slots of a row
/// in ascending input row, which is the input order of the general transpose) from the
/// start given by the scan of the range counts, writing its part of the offsets and entries
/// exactly once. A slot found filled before its store, or a range with fewer filled slots
/// than entries counted (two chunks storing into one slot at once), means two entries of
/// one sign: `None`. So every input either gets the general transpose's exact arrays or
/// `None`, for any number of threads and chunks.
///
/// Panics under the conditions of [`transpose_entries`].
pub fn transpose_two_sided<E: Entries>(
    src: &E,
    ncols: usize,
    parallel: bool,
    params: TransposeParams,
) -> Option<(Vec<u32>, Vec<i32>)> {
    let nnz = src.nnz();
    let nrows = src.nrows();
    assert!(nnz <= u32::MAX as usize, "2^32 or more entries");
    if nnz > 2 * ncols {
        // more entries than slots: some output row has two of one sign
        return None;
    }
    let threads = if params.chunks > 0 {
        params.chunks
    } else {
        rayon::current_num_threads()
    };
    let parallel = parallel && threads > 1 && nnz >= params.min_parallel_nnz && nrows > 0;
    let par = if parallel { Par::Rayon } else { Par::Seq };
    // ranges of output rows (a power of two each, about 8 per thread; one range on one
    // thread) and chunks of input rows (one per thread: on the 2-core machine, dragon, two
    // threads with four chunks each were 1.44-1.48x one thread, with one chunk 1.8-2.15x)
    let range_bits = if parallel {
        ncols
            .div_ceil(8 * threads)
            .max(1024)
            .next_power_of_two()
            .trailing_zeros()
    } else {
        ncols.max(1).next_power_of_two().trailing_zeros()
    };
    let nranges = ncols.div_ceil(1 << range_bits);
    let nchunks = if parallel { threads.min(nrows) } else { 1 };
    let bounds = chunk_bounds(src, nchunks);

    // stages, and each chunk's scatter with the worker that ran it, under `TESSERA_TRACE`
    // (how the shared line of the range counters showed: [`Private`])
    let mut tr = Tracer::new("two-slot transpose");
    let mut slots = filled(2 * ncols, EMPTY, par);
    tr.mark("empty slots");
    let failed = AtomicBool::new(false);
    let hists: Vec<Private<u32>> = {
        // SAFETY: as in `transpose_counters`: same size and alignment, and `slots` is
        // borrowed mutably for the view's whole lifetime.
        let shared: &[AtomicU32] =
            unsafe { &*(slots.as_mut_slice() as *mut [u32] as *const [AtomicU32]) };
        let scatter = |k: usize| -> Private<u32> {
            // four counters per range, one per entry position modulo 4, so that the
            // entries of one row (mostly in one range) do not wait for each other's
            // increments
            let mut counts = Private::filled(if nranges > 1 { 4 * nranges } else { 0 }, 0u32);
            let h = counts.as_mut_slice();
            let rows = bounds[k]..bounds[k + 1];
            let e = src.row_start(rows.end);
            for r in rows {
                if r % 1024 == 0 && failed.load(Ordering::Relaxed) {
                    break;
                }
                for i in src.row_start(r)..src.row_start(r + 1) {
                    if i + AHEAD < e {
                        prefetch(&shared[2 * src.col(i + AHEAD) as usize]);
                    }
                    let c = src.col(i) as usize;
                    let slot = &shared[2 * c + (src.sign_mask(i) & 1) as usize];
                    if slot.load(Ordering::Relaxed) != EMPTY {
                        failed.store(true, Ordering::Relaxed);
                        return counts;
                    }
                    slot.store(r as u32, Ordering::Relaxed);
                    if nranges > 1 {
                        h[4 * (c >> range_bits) + (i & 3)] += 1;
                    }
                }
            }
            counts
        };
        let timed = |k: usize| -> Private<u32> {
            let t0 = trace::enabled().then(Instant::now);
            let h = scatter(k);
            if let Some(t0) = t0 {
                eprintln!(
                    "trace two-slot transpose: scatter chunk {k} on worker {} {:.2} ms",
                    rayon::current_thread_index().map_or("-".to_string(), |w| w.to_string()),
                    t0.elapsed().as_secs_f64() * 1e3
                );
            }
            h
        };
        if parallel {
            (0..nchunks).into_par_iter().map(timed).collect()
        } else {
            vec![timed(0)]
        }
    };
    tr.mark("scatter");
    if failed.load(Ordering::Relaxed) {
        return None;
    }
    let totals: Vec<usize> = if nranges > 1 {
        (0..nranges)
            .map(|s| {
                hists
                    .iter()
                    .map(|h| h.as_slice()[4 * s..4 * s + 4].iter().sum::<u32>() as usize)
                    .sum()
            })
            .collect()
    } else {
        vec![nnz; nranges]
    };
    if totals.iter().sum::<usize>() != nnz {
        // rows that do not cover the entries (a malformed source): the general path
        return None;
    }
    // compaction into rows, every range from its start; the arrays are written exactly once
    // (checked by the counts), so they are not zeroed first
    let mut offsets: Vec<u32> = Vec::with_capacity(ncols + 1);
    let mut out: Vec<i32> = Vec::with_capacity(nnz);
    advise_huge_pages(&mut offsets);
    advise_huge_pages(&mut out);
    let ok = {
        let slots = &slots;
        let (o0, mut orest) = offsets.spare_capacity_mut()[..ncols + 1].split_at_mut(1);
        o0[0].write(0);
        let mut erest = &mut out.spare_capacity_mut()[..nnz];
        let mut work = Vec::with_capacity(nranges);
        let mut base = 0usize;
        for (s, &t) in totals.iter().enumerate() {
            let lo = s << range_bits;
            let hi = ((s + 1) << range_bits).min(ncols);
            let (o, rest) = std::mem::take(&mut orest).split_at_mut(hi - lo);
            orest = rest;
            let (e, rest) = std::mem::take(&mut erest).split_at_mut(t);
            erest = rest;
            work.push((lo, base, o, e));
            base += t;
        }
        let compact = |(lo, base, offs, ents): (
            usize,
            usize,
            &mut [MaybeUninit<u32>],
            &mut [MaybeUninit<i32>],
        )|
         -> bool {
            // without a branch on the data (which of the two cells has the lower index is
            // a coin toss): both candidate entries are stored at w and w + 1 and w advances
            // by the row's length, so a later row overwrites what lies past this one
            let pairs = &slots[2 * lo..2 * (lo + offs.len())];
            let n = ents.len();
            let mut w = 0usize;
            for (o, ab) in offs.iter_mut().zip(pairs.chunks_exact(2)) {
                // a: the +1 entry's row, b: the -1 entry's row; ascending row order
                let (a, b) = (ab[0], ab[1]);
                let (pa, pb) = (a != EMPTY, b != EMPTY);
                let (va, vb) = (a as i32, !(b as i32));
                let swap = pa & pb & (b < a);
                let first = if pa & !swap { va } else { vb };
                let second = if swap { va } else { vb };
                if w < n {
                    ents[w].write(first);
                }
                if w + 1 < n {
                    ents[w + 1].write(second);
                }
                w += usize::from(pa) + usize::from(pb);
                o.write((base + w) as u32);
            }
            w == n
        };
        if parallel {
            work.into_par_iter()
                .map(compact)
                .reduce(|| true, |a, b| a & b)
        } else {
            work.into_iter().all(compact)
        }
    };
    tr.mark("compaction");
    drop(slots);
    if !ok {
        return None;
    }
    // SAFETY: `ok` means every range ran (the sequential `all` stops only at a failing
    // range, the parallel reduce runs all) and wrote every one of its offsets and all
    // `totals[s]` of its entries (`w == ents.len()`); with `offsets[0]` the ranges cover the
    // first `ncols + 1` offsets and the first `nnz` entries.
    unsafe {
        offsets.set_len(ncols + 1);
        out.set_len(nnz);
    }
    Some((offsets, out))
}

/// Several threads: column buckets (see the module docs).
fn transpose_bucketed<E: Entries>(
    src: &E,
    ncols: usize,
    chunks: usize,
    bucket_bits: u32,
) -> (Vec<u32>, Vec<i32>) {
    let nnz = src.nnz();
    // buckets: about 8 per chunk (load balance) and a range whose offsets and entries stay
    // within a core's cache, but at most 2^12
    let bits = if bucket_bits > 0 {
        bucket_bits.min(31)
    } else {
        let want = (8 * chunks).max(nnz / (1 << 16)).clamp(1, 1 << 12);
        let width = ncols.div_ceil(want).max(64);
        usize::BITS - (width - 1).leading_zeros()
    };
    let nb = ncols.div_ceil(1usize << bits);
    let bounds = chunk_bounds(src, chunks);
    // count per chunk and bucket (four counters a bucket, by entry index modulo 4, so that
    // consecutive entries of one bucket do not wait for each other's increments)
    let hist: Vec<Vec<u32>> = (0..chunks)
        .into_par_iter()
        .map(|k| {
            let mut counts = Private::filled(4 * nb, 0u32);
            let h4 = counts.as_mut_slice();
            for i in src.row_start(bounds[k])..src.row_start(bounds[k + 1]) {
                h4[4 * (src.col(i) >> bits) as usize + (i & 3)] += 1;
            }
            h4.chunks_exact(4).map(|q| q.iter().sum()).collect()
        })
        .collect();
    // bucket starts, and each (bucket, chunk) piece of the bucketed buffer
    let mut bucket_start = vec![0usize; nb + 1];
    for b in 0..nb {
        bucket_start[b + 1] = bucket_start[b] + hist.iter().map(|h| h[b] as usize).sum::<usize>();
    }
    // the rows must hold every entry once: with fewer counted, positions past the count
    // would stay unwritten (offsets of a `TcsrEntries` that end before its columns)
    assert_eq!(
        bucket_start[nb], nnz,
        "the rows' entries do not add up to nnz"
    );
    // the bucketed copy and the result are written uninitialised, each position exactly
    // once, by the thread that owns it (no zeroing pass on the calling thread, and the first
    // touch of each page, in huge pages where the system has them, in parallel)
    let mut tmp: Vec<u64> = Vec::with_capacity(nnz);
    advise_huge_pages(&mut tmp);
    {
        // chunk k's piece of bucket b: after the pieces of chunks 0..k of bucket b
        let mut starts: Vec<Vec<usize>> = Vec::with_capacity(chunks);
        let mut next: Vec<usize> = bucket_start[..nb].to_vec();
        for h in &hist {
            starts.push(next.clone());
            for (n, c) in next.iter_mut().zip(h) {
                *n += *c as usize;
            }
        }
        let dst = SharedOut(tmp.as_mut_ptr());
        let (starts, hist) = (&starts, &hist);
        (0..chunks).into_par_iter().for_each(|k| {
            let mut cursors = Private::from_slice(&starts[k]);
            let mut ends = Private::from_slice(&starts[k]);
            for (e, c) in ends.as_mut_slice().iter_mut().zip(&hist[k]) {
                *e += *c as usize;
            }
            let (pos, end) = (cursors.as_mut_slice(), ends.as_slice());
            for r in bounds[k]..bounds[k + 1] {
                for i in src.row_start(r)..src.row_start(r + 1) {
                    let c = src.col(i);
                    let b = (c >> bits) as usize;
                    let v = ((r as i32) ^ src.sign_mask(i)) as u32;
                    let p = pos[b];
                    assert!(p < end[b], "a bucket piece overrun");
                    // SAFETY: `p` lies in this chunk's own piece of bucket b (checked), which
                    // no other chunk writes, inside the allocation of `nnz` elements (the
                    // pieces partition 0..nnz); nothing reads the buffer before the join.
                    unsafe { dst.at(p).write(((c as u64) << 32) | v as u64) };
                    pos[b] = p + 1;
                }
            }
            // every piece written to its end (the count above saw the same entries)
            assert!(pos == end, "a bucket piece left partly unwritten");
        });
    }
    // SAFETY: the pieces partition the first `nnz` elements of the capacity (the counts add
    // up to `nnz`: every entry is counted in exactly one bucket of its chunk), and every
    // piece was written to its end (asserted above).
    unsafe { tmp.set_len(nnz) };
    // every bucket: count, scan, fill on its own output rows
    let mut offsets: Vec<u32> = Vec::with_capacity(ncols + 1);
    let mut out: Vec<i32> = Vec::with_capacity(nnz);
    advise_huge_pages(&mut offsets);
    advise_huge_pages(&mut out);
    {
        let (o0, mut orest) = offsets.spare_capacity_mut()[..ncols + 1].split_at_mut(1);
        o0[0].write(0);
        let mut erest: &mut [MaybeUninit<i32>] = &mut out.spare_capacity_mut()[..nnz];
        // a bucket: its index, its offsets (uninitialised) and its entries (uninitialised)
        type Bucket<'a> = (
            usize,
            &'a mut [MaybeUninit<u32>],
            &'a mut [MaybeUninit<i32>],
        );
        let mut work: Vec<Bucket> = Vec::with_capacity(nb);
        for b in 0..nb {
            let lo = b << bits;
            let hi = ((b + 1) << bits).min(ncols);
            let (o, t) = std::mem::take(&mut orest).split_at_mut(hi - lo);
            orest = t;
            let (e, t) =
                std::mem::take(&mut erest).split_at_mut(bucket_start[b + 1] - bucket_start[b]);
            erest = t;
            work.push((b, o, e));
        }
        let tmp = &tmp;
        let bucket_start = &bucket_start;
        work.into_par_iter().for_each(|(b, cur, ents)| {
            let lo = (b << bits) as u32;
            let base = bucket_start[b];
            let items = &tmp[base..bucket_start[b + 1]];
            let cur = zeroed(cur);
            for &x in items {
                cur[((x >> 32) as u32 - lo) as usize] += 1;
            }
            let mut acc = base as u32;
            for x in cur.iter_mut() {
                let c = *x;
                *x = acc;
                acc += c;
            }
            // the positions are a permutation of the bucket's range: each written once
            for &x in items {
                let c = ((x >> 32) as u32 - lo) as usize;
                let o = cur[c];
                ents[o as usize - base].write(x as u32 as i32);
                cur[c] = o + 1;
            }
        });
    }
    // SAFETY: `offsets[0]` was written above and every bucket zeroed, then rewrote, its own
    // range of the other `ncols` offsets (the buckets' ranges cover 0..ncols). Every bucket
    // wrote each position of its range of the entries exactly once: its scan turned its
    // counts of the items into a partition of `bucket_start[b]..bucket_start[b + 1]`, and the
    // fill wrote each item at the next position of its row; the ranges cover 0..nnz.
    unsafe {
        offsets.set_len(ncols + 1);
        out.set_len(nnz);
    }
    (offsets, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcsr::{encode, Tcsr};
    use proptest::prelude::*;
    use tessera_core::Par;

    #[test]
    fn private_arrays_keep_their_elements_off_other_allocations_lines() {
        for len in [0usize, 1, 5, 64, 1000] {
            let mut c = Private::filled(len, 7u32);
            assert_eq!(c.as_slice(), vec![7u32; len].as_slice());
            if len > 0 {
                // 128 bytes of the allocation on each side of the elements
                let (buf, el) = (c.buf.as_ptr() as usize, c.as_slice().as_ptr() as usize);
                assert_eq!(el - buf, 128);
                assert_eq!(buf + 4 * c.buf.len() - (el + 4 * len), 128);
            }
            c.as_mut_slice()
                .iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = i as u32);
            assert!(c.as_slice().iter().enumerate().all(|(i, &x)| x == i as u32));
            let init: Vec<usize> = (0..len).map(|i| 3 * i + 1).collect();
            let p = Private::from_slice(&init);
            assert_eq!(p.as_slice(), init.as_slice());
            if len > 0 {
                assert_eq!(
                    p.as_slice().as_ptr() as usize - p.buf.as_ptr() as usize,
                    128
                );
            }
        }
    }

    /// The transpose by definition: for every output row, the input entries in input order.
    fn naive(m: &Tcsr) -> Tcsr {
        let mut rows: Vec<Vec<(u32, i32)>> = vec![Vec::new(); m.ncols()];
        for r in 0..m.nrows() {
            for (c, s) in m.row_decoded(r) {
                rows[c as usize].push((r as u32, s));
            }
        }
        Tcsr::from_rows(m.nrows(), rows).unwrap()
    }

    fn params(chunks: usize, split: TransposeSplit, bucket_bits: u32) -> TransposeParams {
        TransposeParams {
            chunks,
            split,
            bucket_bits,
            min_parallel_nnz: 0,
        }
    }

    /// The transpose of rows whose offsets end before their columns (two rows of one entry
    /// each over four columns' entries).
    fn transpose_rows_that_miss_entries(split: TransposeSplit) {
        let columns = [0i32, 1, 2, 1];
        let src = TcsrEntries {
            offsets: &[0, 1, 2],
            columns: &columns,
        };
        let _ = transpose_entries(&src, 3, true, params(2, split, 1));
    }

    /// Offsets that end before the columns would leave entries of the parallel fill's
    /// uninitialised output unwritten: refused with a panic, not returned.
    #[test]
    #[should_panic(expected = "do not add up to nnz")]
    fn counters_refuse_rows_that_miss_entries() {
        transpose_rows_that_miss_entries(TransposeSplit::Counters);
    }

    /// The same for the column buckets, which write their copy and result uninitialised too.
    #[test]
    #[should_panic(expected = "do not add up to nnz")]
    fn buckets_refuse_rows_that_miss_entries() {
        transpose_rows_that_miss_entries(TransposeSplit::Buckets);
    }

    /// The same for the one-thread transpose, whose entry array past
    /// `SERIAL_ZEROED_MAX_BYTES` is written uninitialised.
    #[test]
    #[should_panic(expected = "do not add up to nnz")]
    fn serial_transpose_refuses_rows_that_miss_entries() {
        let columns = [0i32, 1, 2, 1];
        let src = TcsrEntries {
            offsets: &[0, 1, 2],
            columns: &columns,
        };
        let _ = transpose_entries(&src, 3, false, TransposeParams::default());
    }

    /// The one-thread transpose with its offsets and entries both past
    /// `SERIAL_ZEROED_MAX_BYTES` (allocated uninitialised, advised for huge pages), against
    /// the transpose by sorting (output row, input entry) pairs.
    #[test]
    fn serial_transpose_past_the_zeroed_size() {
        let nr = (SERIAL_ZEROED_MAX_BYTES / 8) + 1000;
        let nc = (SERIAL_ZEROED_MAX_BYTES / 4) + 1000;
        let mut cols = Vec::with_capacity(2 * nr);
        for r in 0..nr {
            let c0 = ((r as u64 * 2654435761) % nc as u64) as u32;
            let c1 = (c0 + 1 + (r % 5) as u32) % nc as u32;
            cols.push(encode(c0, r % 3 == 0));
            cols.push(encode(c1, r % 3 != 0));
        }
        let offs: Vec<u32> = (0..=nr as u32).map(|r| 2 * r).collect();
        let m = Tcsr::new(nc, offs, cols).unwrap();
        let (_, got_offsets, got) = m.transpose(Par::Seq).into_raw();
        assert!(got.len() * 4 > SERIAL_ZEROED_MAX_BYTES);
        assert!(got_offsets.len() * 4 > SERIAL_ZEROED_MAX_BYTES);
        let mut pairs: Vec<(u32, u32)> = m
            .columns()
            .iter()
            .enumerate()
            .map(|(i, &v)| (crate::tcsr::col(v), i as u32))
            .collect();
        pairs.sort_unstable();
        let mut want_offsets = vec![0u32; nc + 1];
        for &(c, _) in &pairs {
            want_offsets[c as usize + 1] += 1;
        }
        for c in 0..nc {
            want_offsets[c + 1] += want_offsets[c];
        }
        let want: Vec<i32> = pairs
            .iter()
            .map(|&(_, i)| {
                let v = m.columns()[i as usize];
                encode(i / 2, v < 0)
            })
            .collect();
        assert_eq!(got_offsets, want_offsets);
        assert!(got == want, "entries differ");
    }

    /// The counters' byte counts past 255: output rows with 255, 256, 257, 511, 512 and
    /// 1300 entries within one chunk (carried once, twice or more), in the first and the
    /// last row of a scan range and beside rows with none, for 2 and 3 chunks, against the
    /// naive transpose.
    #[test]
    fn counters_carry_counts_past_255() {
        let ncols = 5000u32;
        let heavy = [
            (0u32, 255u32),
            (1, 256),
            (1023, 257),
            (1024, 511),
            (2047, 512),
            (4999, 1300),
        ];
        let mut rows: Vec<[i32; 2]> = Vec::new();
        // every heavy column appears in a run of rows of its own count, in every chunk's
        // part of the input (the runs are repeated three times), each row with a light
        // column beside it
        for rep in 0..3u32 {
            for &(c, n) in &heavy {
                for i in 0..n {
                    let light = (c + 1 + (i * 7 + rep) % 97) % ncols;
                    rows.push([encode(c, i % 2 == 0), encode(light, i % 3 == 0)]);
                }
            }
        }
        let nrows = rows.len();
        let offs: Vec<u32> = (0..=nrows as u32).map(|r| 2 * r).collect();
        let m = Tcsr::new(ncols as usize, offs, rows.concat()).unwrap();
        let want = naive(&m);
        assert!(want.row_len(4999) == 3 * 1300 && want.row_len(1) >= 3 * 256);
        let general = TcsrEntries {
            offsets: m.offsets(),
            columns: m.columns(),
        };
        for chunks in [2, 3] {
            let p = params(chunks, TransposeSplit::Counters, 0);
            assert_eq!(m.transpose_with(Par::Rayon, p), want, "{chunks} chunks");
            let (o, c) = transpose_entries(&general, ncols as usize, true, p);
            assert_eq!(
                Tcsr::new(nrows, o, c).unwrap(),
                want,
                "{chunks} chunks, general"
            );
        }
    }

    /// Every parallel algorithm with several chunk counts (more chunks than threads and
    /// than rows included) and bucket widths.
    fn splits() -> Vec<TransposeParams> {
        use TransposeSplit::*;
        let mut v = Vec::new();
        for chunks in [1, 2, 3, 4, 7, 16, 300] {
            v.push(params(chunks, Counters, 0));
            v.push(params(chunks, Auto, 0));
        }
        for (chunks, bits) in [(1, 0), (2, 0), (3, 1), (4, 3), (7, 6), (16, 2)] {
            v.push(params(chunks, Buckets, bits));
        }
        v
    }

    /// Local rayon pools of 1, 2, 3 and 7 threads (built once).
    fn pools() -> &'static [rayon::ThreadPool] {
        static POOLS: std::sync::OnceLock<Vec<rayon::ThreadPool>> = std::sync::OnceLock::new();
        POOLS.get_or_init(|| {
            [1, 2, 3, 7]
                .into_iter()
                .map(|t| {
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(t)
                        .build()
                        .unwrap()
                })
                .collect()
        })
    }

    /// Rows of `k` distinct random columns (the fixed-row-length case).
    fn arb_fixed(k: usize) -> impl Strategy<Value = Tcsr> {
        (1usize..300, k..200).prop_flat_map(move |(nr, nc)| {
            proptest::collection::vec(
                (
                    proptest::sample::subsequence((0..nc as u32).collect::<Vec<_>>(), k),
                    proptest::collection::vec(any::<bool>(), k),
                    any::<u64>(),
                ),
                nr,
            )
            .prop_map(move |rows| {
                let rows = rows.into_iter().map(|(mut cols, neg, seed)| {
                    // shuffle within the row: the fill keeps the input order
                    let n = cols.len();
                    for i in (1..n).rev() {
                        let j = (seed.rotate_left(i as u32) % (i as u64 + 1)) as usize;
                        cols.swap(i, j);
                    }
                    cols.into_iter()
                        .zip(neg)
                        .map(|(c, n)| (c, if n { -1 } else { 1 }))
                        .collect::<Vec<_>>()
                });
                Tcsr::from_rows(nc, rows).unwrap()
            })
        })
    }

    /// Rows of 0..8 distinct random columns.
    fn arb_ragged() -> impl Strategy<Value = Tcsr> {
        (1usize..300, 1usize..200).prop_flat_map(|(nr, nc)| {
            proptest::collection::vec(
                proptest::collection::btree_map(0..nc as u32, any::<bool>(), 0..nc.min(8)),
                nr,
            )
            .prop_map(move |rows| {
                Tcsr::from_rows(
                    nc,
                    rows.into_iter().map(|m| {
                        m.into_iter()
                            .map(|(c, n)| (c, if n { -1 } else { 1 }))
                            .collect::<Vec<_>>()
                    }),
                )
                .unwrap()
            })
        })
    }

    fn check_all_paths(m: &Tcsr) -> Result<(), TestCaseError> {
        let want = naive(m);
        prop_assert_eq!(&m.transpose(Par::Seq), &want);
        prop_assert_eq!(&m.transpose(Par::Rayon), &want);
        // the general (explicit offsets) source must agree with the fixed-length one
        let general = TcsrEntries {
            offsets: m.offsets(),
            columns: m.columns(),
        };
        for p in splits() {
            let (o, c) = transpose_entries(&general, m.ncols(), true, p);
            prop_assert_eq!(
                &Tcsr::new(m.nrows(), o, c).unwrap(),
                &want,
                "general source, {:?}",
                p
            );
            prop_assert_eq!(&m.transpose_with(Par::Rayon, p), &want, "{:?}", p);
        }
        // the split chosen for each pool's threads, forced on small inputs
        for pool in pools() {
            let t = pool.current_num_threads();
            prop_assert_eq!(
                &pool.install(|| m.transpose_with(Par::Rayon, params(0, TransposeSplit::Auto, 0))),
                &want,
                "{} threads",
                t
            );
            prop_assert_eq!(&pool.install(|| m.transpose(Par::Rayon)), &want);
        }
        Ok(())
    }

    /// Whether every row of `t` has at most one +1 and one -1 entry.
    fn two_sided(t: &Tcsr) -> bool {
        (0..t.nrows()).all(|r| {
            let row: Vec<(u32, i32)> = t.row_decoded(r).collect();
            row.iter().filter(|e| e.1 > 0).count() <= 1
                && row.iter().filter(|e| e.1 < 0).count() <= 1
        })
    }

    /// Operators whose columns have at most one +1 and one -1 entry (∂3 of a consistently
    /// oriented manifold mesh), then a defect: none, one entry added with the sign a column
    /// already has in another row (a face of three cells, or two cells seeing it alike),
    /// or one row's signs flipped (a cell oriented against its neighbours).
    fn arb_two_sided() -> impl Strategy<Value = Tcsr> {
        (1usize..300, 1usize..200).prop_flat_map(|(nr, nc)| {
            (
                proptest::collection::vec(
                    (
                        proptest::option::weighted(0.8, 0..nr),
                        proptest::option::weighted(0.8, 0..nr),
                    ),
                    nc,
                ),
                0u8..3,
                any::<u64>(),
            )
                .prop_map(move |(cols, defect, seed)| {
                    let mut rows: Vec<Vec<(u32, i32)>> = vec![Vec::new(); nr];
                    for (c, &(p, m)) in cols.iter().enumerate() {
                        if let Some(p) = p {
                            rows[p].push((c as u32, 1));
                        }
                        if let Some(m) = m.filter(|&m| Some(m) != p) {
                            rows[m].push((c as u32, -1));
                        }
                    }
                    let pick = |k: u64, n: usize| (seed.rotate_left(k as u32) % n as u64) as usize;
                    match defect {
                        1 => {
                            // column c again with the sign it has in row r, in another row
                            let r = pick(7, nr);
                            if let Some(&(c, s)) = rows[r].first() {
                                let r2 = pick(19, nr);
                                if !rows[r2].iter().any(|e| e.0 == c) {
                                    rows[r2].push((c, s));
                                }
                            }
                        }
                        2 => {
                            let r = pick(3, nr);
                            for e in &mut rows[r] {
                                e.1 = -e.1;
                            }
                        }
                        _ => {}
                    }
                    for (r, row) in rows.iter_mut().enumerate() {
                        // any order within a row
                        let n = row.len();
                        for i in (1..n).rev() {
                            row.swap(i, pick(i as u64 + r as u64, i + 1));
                        }
                    }
                    Tcsr::from_rows(nc, rows).unwrap()
                })
        })
    }

    /// The two-slot transpose gives the general transpose's arrays exactly when every output
    /// row has at most one entry of each sign, and `None` otherwise, for any chunks, threads
    /// and source; `Tcsr::transpose_two_sided` always equals the transpose.
    fn check_two_sided(m: &Tcsr) -> Result<(), TestCaseError> {
        let want = naive(m);
        let holds = two_sided(&want);
        let general = TcsrEntries {
            offsets: m.offsets(),
            columns: m.columns(),
        };
        let strided = StridedEntries::<4> {
            columns: m.columns(),
        };
        let fixed4 = m.uniform_row_len() == Some(4);
        for chunks in [1, 2, 3, 4, 7, 16, 300] {
            let p = params(chunks, TransposeSplit::Auto, 0);
            for parallel in [false, true] {
                let mut got = vec![transpose_two_sided(&general, m.ncols(), parallel, p)];
                if fixed4 {
                    got.push(transpose_two_sided(&strided, m.ncols(), parallel, p));
                }
                for g in got {
                    prop_assert_eq!(g.is_some(), holds, "{} chunks", chunks);
                    if let Some((o, c)) = g {
                        prop_assert_eq!(&Tcsr::new(m.nrows(), o, c).unwrap(), &want);
                    }
                }
            }
            prop_assert_eq!(&m.transpose_two_sided_with(Par::Rayon, p), &want);
            prop_assert_eq!(&m.transpose_two_sided_with(Par::Seq, p), &want);
        }
        for pool in &pools()[..3] {
            let t = pool.current_num_threads();
            let p = params(0, TransposeSplit::Auto, 0);
            prop_assert_eq!(
                &pool.install(|| m.transpose_two_sided_with(Par::Rayon, p)),
                &want,
                "{} threads",
                t
            );
            prop_assert_eq!(&pool.install(|| m.transpose_two_sided(Par::Rayon)), &want);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn fixed_row_length_paths_equal_general_transpose(
            m2 in arb_fixed(2), m3 in arb_fixed(3), m4 in arb_fixed(4)
        ) {
            for m in [&m2, &m3, &m4] {
                prop_assert!(m.uniform_row_len().is_some());
                check_all_paths(m)?;
            }
        }

        #[test]
        fn ragged_rows_all_paths_equal_naive(m in arb_ragged()) {
            check_all_paths(&m)?;
        }

        #[test]
        fn two_slot_transpose_equals_general_or_declines(m in arb_two_sided()) {
            check_two_sided(&m)?;
        }

        #[test]
        fn two_slot_transpose_of_fixed_rows(m4 in arb_fixed(4), m3 in arb_fixed(3)) {
            // random rows of 4 (the implicit-offset source): small ones are often two-sided
            check_two_sided(&m4)?;
            check_two_sided(&m3)?;
        }

        #[test]
        fn edge_pairs_equal_their_tcsr_transpose(
            pairs in proptest::collection::vec((0u32..60, 0u32..60), 1..400)
        ) {
            let pairs: Vec<[u32; 2]> = pairs.into_iter().filter(|(a, b)| a != b).map(|(a, b)| [a, b]).collect();
            let cols: Vec<i32> = pairs.iter().flat_map(|&[a, b]| [encode(a, true), encode(b, false)]).collect();
            let offs: Vec<u32> = (0..=pairs.len() as u32).map(|e| 2 * e).collect();
            let d1 = Tcsr::new(60, offs, cols).unwrap();
            let want = naive(&d1);
            for p in splits() {
                let (o, c) = transpose_entries(
                    &EdgePairEntries { flat: pairs.as_flattened() },
                    60,
                    true,
                    p,
                );
                prop_assert_eq!(&Tcsr::new(pairs.len(), o, c).unwrap(), &want);
            }
        }
    }

    #[test]
    fn large_fixed_rows_parallel_equals_serial() {
        // 4 entries per row, > 2^16 entries: the default parameters take the parallel path
        let nr = 60_000usize;
        let nc = 90_001usize;
        let cols: Vec<i32> = (0..nr * 4)
            .map(|i| {
                let c = ((i as u64 * 2654435761) % nc as u64) as u32;
                encode(c, i % 3 == 0)
            })
            .collect();
        // distinct columns within each row
        let mut cols = cols;
        for r in 0..nr {
            let row = &mut cols[4 * r..4 * r + 4];
            for k in 1..4 {
                while row[..k]
                    .iter()
                    .any(|&x| crate::tcsr::col(x) == crate::tcsr::col(row[k]))
                {
                    let c = (crate::tcsr::col(row[k]) + 1) % nc as u32;
                    row[k] = encode(c, row[k] < 0);
                }
            }
        }
        let offs: Vec<u32> = (0..=nr as u32).map(|r| 4 * r).collect();
        let m = Tcsr::new(nc, offs, cols).unwrap();
        let want = naive(&m);
        assert_eq!(m.transpose(Par::Seq), want);
        for pool in pools() {
            assert_eq!(pool.install(|| m.transpose(Par::Rayon)), want);
        }
        for p in splits() {
            assert_eq!(m.transpose_with(Par::Rayon, p), want, "{p:?}");
        }
    }

    #[test]
    fn two_slot_transpose_declines_two_entries_of_one_sign() {
        let t = |rows: Vec<Vec<(u32, i32)>>, nc| Tcsr::from_rows(nc, rows).unwrap();
        let cases = [
            (
                t(
                    vec![vec![(0, 1), (1, 1)], vec![(0, -1), (2, 1)], vec![(1, -1)]],
                    3,
                ),
                true,
            ),
            (t(vec![vec![(0, 1)], vec![(0, 1)]], 1), false),
            (
                t(vec![vec![(0, 1)], vec![(0, -1)], vec![(0, -1)]], 1),
                false,
            ),
            (t(vec![vec![(0, 1)], vec![(0, -1)], vec![(0, 1)]], 2), false),
            (t(vec![vec![], vec![]], 4), true),
        ];
        for (m, holds) in cases {
            let e = TcsrEntries {
                offsets: m.offsets(),
                columns: m.columns(),
            };
            for parallel in [false, true] {
                let got = transpose_two_sided(
                    &e,
                    m.ncols(),
                    parallel,
                    params(2, TransposeSplit::Auto, 0),
                );
                assert_eq!(got.is_some(), holds, "{m:?}");
            }
            assert_eq!(m.transpose_two_sided(Par::Rayon), naive(&m));
        }
    }

    #[test]
    fn two_slot_transpose_declines_a_source_whose_rows_miss_entries() {
        // 6 columns read as rows of 4: the rows cover 4 of the 6 entries (several ranges of
        // output rows on the parallel path: 5000 of them)
        let columns = [0, 1, 2, 3, 2000, 4000];
        let s = StridedEntries::<4> { columns: &columns };
        for parallel in [false, true] {
            let p = params(2, TransposeSplit::Auto, 0);
            assert!(transpose_two_sided(&s, 5000, parallel, p).is_none());
        }
    }

    #[test]
    fn large_two_sided_parallel_equals_serial() {
        // a chain of 4-face cells: cell r has +1 on faces 2r, 2r + 1 and -1 on 2r + 2, 2r + 3,
        // so every face has at most one cell of each sign; > 2^16 entries take the parallel
        // path with the default parameters
        let nr = 40_000u32;
        let rows = (0..nr).map(|r| [(2 * r, 1), (2 * r + 3, -1), (2 * r + 1, 1), (2 * r + 2, -1)]);
        let m = Tcsr::from_rows(2 * nr as usize + 2, rows).unwrap();
        let want = naive(&m);
        let s = StridedEntries::<4> {
            columns: m.columns(),
        };
        for pool in pools() {
            let got = pool
                .install(|| transpose_two_sided(&s, m.ncols(), true, TransposeParams::default()));
            let (o, c) = got.expect("two-sided");
            assert_eq!(Tcsr::new(m.nrows(), o, c).unwrap(), want);
        }
        // one cell oriented against its neighbours: declined, and the fallback is exact
        let mut cols = m.columns().to_vec();
        for v in &mut cols[4 * 777..4 * 778] {
            *v = !*v;
        }
        let flipped = Tcsr::new(m.ncols(), m.offsets().to_vec(), cols).unwrap();
        let s = StridedEntries::<4> {
            columns: flipped.columns(),
        };
        assert!(pools()[1]
            .install(|| transpose_two_sided(&s, m.ncols(), true, TransposeParams::default()))
            .is_none());
        for pool in pools() {
            assert_eq!(
                pool.install(|| flipped.transpose_two_sided(Par::Rayon)),
                naive(&flipped)
            );
        }
    }

    #[test]
    fn split_keeps_counters_small() {
        use TransposeSplit::*;
        // two threads: counters for every mesh relation (δ3: faces against 4 per cell)
        assert_eq!(split_for(2, 3_268_096, 1_834_028), Counters);
        assert_eq!(split_for(2, 100, 1_000), Buckets);
        // 16 threads: counters for δ1 (vertices against 2 per edge), buckets for δ3
        assert_eq!(split_for(16, 2_505_414, 235_703), Counters);
        assert_eq!(split_for(16, 3_268_096, 1_834_028), Buckets);
        // the crossings measured on the dragon (16-core host): δ2 on 8 threads, δ3's
        // general path on 4, δ1 on 16 still the counters
        assert_eq!(split_for(8, 5_502_084, 1_252_707), Buckets);
        assert_eq!(split_for(7, 5_502_084, 1_252_707), Counters);
        assert_eq!(split_for(4, 3_268_096, 1_834_028), Buckets);
        assert_eq!(split_for(3, 3_268_096, 1_834_028), Counters);
        assert_eq!(split_for(1, 10, usize::MAX), Counters);
    }
}
