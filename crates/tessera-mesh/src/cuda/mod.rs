//! The polyhedral mesh on the GPU (dissertation §3.4.1-§3.4.2, run on CUDA as in the
//! dissertation's GPU columns of Tables 3.2-3.4).
//!
//! A [`DeviceMesh`] holds the stored operators of a [`PolyMesh`] in device memory (∂1 as
//! vertex pairs, ∂2 and ∂3 in TCSR, positions as interleaved `f64`), computes derived
//! relations on the device and caches them there (`require_*`, geometry-central style);
//! data moves only on [`DeviceMesh::upload`] and on explicit downloads.
//!
//! | operation | GPU algorithm | CPU reference |
//! |---|---|---|
//! | δ1, δ2, δ3 (coboundaries) | Listing 3.1: count (atomics) -> scan -> fill (atomics) -> SortRows, as one cooperative launch with grid barriers between the phases; δ3 from two sign slots per face (no atomics, no sort); δ1 of canonical edges by buckets and δ2 of canonical faces (read off δ1) by warp tasks, both cut at upload | [`PolyMesh::vertex_edges`] ... |
//! | ∂̂2¹ face vertices | one thread per face, loop order (chained when rows are out of order) | [`PolyMesh::face_vertices`] |
//! | ∂̂3¹ cell edges, ∂̂3² cell vertices | count -> scan -> fill -> segmented sort -> dedup -> compact | [`PolyMesh::cell_edges`] ... |
//! | boundary (manifold and non-manifold) | flags from δ3 and the edge and vertex marks, then the lists by look-back prefixes (one cooperative launch, one grid barrier; the lengths on the host or, enqueued, on the device) | [`crate::boundary::extract_boundary`] |
//! | Laplacian smoothing | one thread per vertex over δ1, double-buffered positions; the stencil (fixed vertices, neighbours) cached with the relations | [`crate::smooth::smoothed_positions`] |
//! | safe smoothing | Laplacian candidates, then rejection rounds with one thread per cell ([`smooth`]) | [`crate::smooth::safe_smoothed_positions`] |
//!
//! Topology matches the CPU reference exactly (same row order); smoothed positions agree
//! to within 1e-12 of the mesh extent (the sums are formed in the same order; the tests
//! report the largest difference).

pub mod bench;
pub mod mesh_matrix;
pub mod mesh_matrix_bench;
pub mod simplex;
pub mod smooth;
pub mod subdivide;

use crate::boundary::Boundary;
use crate::{MeshError, Point, PolyMesh};
use std::sync::Arc;
use tessera_gpu::{
    CompileOptions, DeviceBuffer, Gpu, GpuError, HostWords, Kernel, KernelArg, LaunchConfig,
    Module, Primitives, SegOrder,
};
use tessera_sparse::Tcsr;

/// CUDA source of the mesh kernels (deterministic: a constant), compiled after the row
/// sorts and block scans it shares with the primitives ([`module_source`]).
pub const SOURCE: &str = include_str!("kernels/mesh.cu");

/// The mesh module's whole source: `tessera_gpu::primitives::PRELUDE` then [`SOURCE`].
pub fn module_source() -> &'static str {
    static S: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("{}{SOURCE}", tessera_gpu::primitives::PRELUDE));
    &S
}

const BLOCK: u32 = 256;

/// Whether edge pairs are canonical: `from < to` for every edge and `from` non-decreasing
/// (the edges of Tessera's simplex derivation, §3.4.4; see
/// [`MeshKernels::transpose_edge_pairs`]).
fn canonical_pairs(ev: &[[u32; 2]]) -> bool {
    ev.iter().all(|p| p[0] < p[1]) && ev.windows(2).all(|w| w[0][0] <= w[1][0])
}

/// A TCSR matrix in device memory (dissertation §3.4).
pub struct DeviceTcsr {
    /// `nrows + 1` offsets.
    pub offsets: DeviceBuffer<u32>,
    /// Encoded columns (`!c` for -1).
    pub columns: DeviceBuffer<i32>,
    /// Number of columns.
    pub ncols: usize,
    /// `Some(k)`: every row is known on the host to hold `k` entries (offsets `k r`), as for
    /// ∂3 of a tetrahedral mesh (4) or ∂2 of a triangle-faced one (3); the kernels then
    /// skip the searches and counts that ragged rows need.
    pub uniform: Option<u32>,
}

/// `Some(k)` when every row of the offsets holds `k` entries (`None` for no rows).
pub fn uniform_row_len(offsets: &[u32]) -> Option<u32> {
    if offsets.len() < 2 {
        return None;
    }
    let k = offsets[1].wrapping_sub(offsets[0]);
    offsets
        .windows(2)
        .all(|w| w[1].wrapping_sub(w[0]) == k)
        .then_some(k)
}

impl DeviceTcsr {
    /// A matrix whose row lengths are not known on the host (`uniform` is `None`), as the
    /// transposes and compactions produce.
    pub fn ragged(offsets: DeviceBuffer<u32>, columns: DeviceBuffer<i32>, ncols: usize) -> Self {
        DeviceTcsr {
            offsets,
            columns,
            ncols,
            uniform: None,
        }
    }
    /// `Some(k)` when every row holds `k > 0` entries: `uniform`, checked against the
    /// number of entries (the kernels that index rows as `k r` rely on it).
    pub fn row_len(&self) -> Option<u32> {
        self.uniform
            .filter(|&k| k > 0 && self.nnz() as u64 == k as u64 * self.nrows() as u64)
    }
    /// Upload a host matrix.
    pub fn upload(gpu: &Gpu, m: &Tcsr) -> Result<Self, MeshError> {
        Ok(DeviceTcsr {
            offsets: gpu.upload(m.offsets())?,
            columns: gpu.upload(m.columns())?,
            ncols: m.ncols(),
            uniform: uniform_row_len(m.offsets()),
        })
    }
    /// Copy back to the host.
    pub fn download(&self, gpu: &Gpu) -> Result<Tcsr, MeshError> {
        let offsets = gpu.download(&self.offsets)?;
        let columns = gpu.download(&self.columns)?;
        Ok(Tcsr::new(self.ncols, offsets, columns)?)
    }
    pub fn nrows(&self) -> usize {
        self.offsets.len() - 1
    }
    pub fn nnz(&self) -> usize {
        self.columns.len()
    }
    /// Bytes of offsets and columns.
    pub fn bytes(&self) -> usize {
        self.offsets.bytes() + self.columns.bytes()
    }
}

/// The boundary of a device mesh, in device memory (see [`Boundary`]). The lists' lengths
/// are their `len()`; an allocation may be longer by up to 16 MiB (the one-launch
/// extraction keeps the buffers it wrote into rather than copying a list out of them).
pub struct DeviceBoundary {
    /// Boundary half-faces, TCSR-encoded, sorted by face, `+f` before `-f`.
    pub faces: DeviceBuffer<i32>,
    /// Edges of boundary faces, sorted.
    pub edges: DeviceBuffer<u32>,
    /// Vertices of boundary faces, sorted.
    pub vertices: DeviceBuffer<u32>,
    /// Every face has 1 or 2 cells, 2 only with opposite orientations.
    pub manifold: bool,
}

impl DeviceBoundary {
    /// Copy back to the host.
    pub fn download(&self, gpu: &Gpu) -> Result<Boundary, MeshError> {
        Ok(Boundary {
            faces: gpu.download(&self.faces)?,
            edges: gpu.download(&self.edges)?,
            vertices: gpu.download(&self.vertices)?,
            manifold: self.manifold,
        })
    }
}

/// The three lists of a boundary extraction in the buffers they were written into, each
/// possibly longer than its list.
pub struct BoundaryLists {
    /// Boundary half-faces (capacity 2 nf).
    pub faces: DeviceBuffer<i32>,
    /// Edges of boundary faces (capacity ne).
    pub edges: DeviceBuffer<u32>,
    /// Vertices of boundary faces (capacity nv).
    pub vertices: DeviceBuffer<u32>,
}

impl BoundaryLists {
    /// The lists cut to the lengths `t` (faces, edges, vertices, then the non-manifold flag).
    fn fitted(self, g: &Gpu, t: [u32; 4]) -> Result<DeviceBoundary, MeshError> {
        Ok(DeviceBoundary {
            faces: fitted(g, self.faces, t[0] as usize)?,
            edges: fitted(g, self.edges, t[1] as usize)?,
            vertices: fitted(g, self.vertices, t[2] as usize)?,
            manifold: t[3] == 0,
        })
    }
}

/// A boundary extraction enqueued on the device ([`MeshKernels::boundary_enqueue`]): its lists
/// and, in device memory, their lengths.
pub struct PendingBoundary {
    /// The lists, each a prefix of its buffer.
    pub lists: BoundaryLists,
    /// Four words: the lengths of the faces', edges' and vertices' lists, then 1 where some
    /// face is non-manifold (else 0). Written by the extraction's launch, for the kernels that
    /// follow it on the stream.
    pub lengths: DeviceBuffer<u32>,
}

impl PendingBoundary {
    /// The extraction's result with its lengths read on the host (one host synchronisation).
    pub fn finish(self, g: &Gpu) -> Result<DeviceBoundary, MeshError> {
        let t = g.download(&self.lengths)?;
        let t: [u32; 4] = t.try_into().map_err(|t: Vec<u32>| {
            MeshError::Gpu(GpuError::InvalidArgument(format!(
                "boundary lengths: {} words, not 4",
                t.len()
            )))
        })?;
        self.lists.fitted(g, t)
    }
}

/// `buf` holding `n` elements: the same allocation, shortened, when at most
/// [`KEEP_IDLE_BYTES`] of it would sit idle, else a copy into a buffer of `n`.
fn fitted<T: tessera_gpu::Element>(
    g: &Gpu,
    mut buf: DeviceBuffer<T>,
    n: usize,
) -> Result<DeviceBuffer<T>, MeshError> {
    if n > buf.len() {
        return Err(MeshError::Gpu(GpuError::InvalidArgument(format!(
            "a list of {n} elements in a buffer of {}",
            buf.len()
        ))));
    }
    if (buf.capacity() - n) * std::mem::size_of::<T>() <= KEEP_IDLE_BYTES {
        buf.truncate(n);
        return Ok(buf);
    }
    let mut out = g.alloc::<T>(n)?;
    g.copy_device_range(&buf, 0, &mut out, 0, n)?;
    Ok(out)
}

/// Derived relations cached on the device.
#[derive(Default)]
struct DeviceRelations {
    vertex_edges: Option<DeviceTcsr>,
    edge_faces: Option<DeviceTcsr>,
    face_cells: Option<DeviceTcsr>,
    face_vertices: Option<DeviceTcsr>,
    cell_edges: Option<DeviceTcsr>,
    cell_vertices: Option<DeviceTcsr>,
    /// The Laplacian smoothing's stencil: boundary vertex marks (fixed vertices) and the
    /// neighbour of every δ1 entry. Topology only, so it survives position updates.
    smoothing_stencil: Option<(DeviceBuffer<u32>, DeviceBuffer<u32>)>,
}

/// The mesh kernels of one device.
pub struct MeshKernels<'g> {
    gpu: &'g Gpu,
    prims: Primitives<'g>,
    module: Arc<Module>,
    coop: Option<Arc<CoopChains>>,
    /// The flag of the fast paths that read one (word 0) and the boundary's three lengths
    /// and non-manifold word, then the boundary's word that says they are final (word
    /// [`WORD_DONE`]): mapped host words (no memset before the launch, no copy after it), held
    /// locked from their clearing to their reading ([`MeshKernels::with_words_until`]).
    words: Arc<std::sync::Mutex<HostWords>>,
}

/// What the one-launch chains (`transpose_coop`, `boundary_coop` in `kernels/mesh.cu`) need:
/// the largest co-resident grid of each kernel and the persistent scratch words of their
/// grid barrier (arrivals, generation, worklist length, then 3 partial sums per block).
/// Launches that use it are ordered on the device's one stream.
struct CoopChains {
    sync: DeviceBuffer<u32>,
    /// The boundary extraction's edge and vertex marks (see [`StampedMarks`]).
    marks: std::sync::Mutex<StampedMarks>,
    /// Two words never read (the flag argument of a transpose that sorts long rows itself,
    /// or of δ1 by [`EdgeBuckets`], whose pairs the host checked).
    unused_flag: DeviceBuffer<u32>,
    transpose: Kernel,
    boundary: Kernel,
    grid_transpose: u32,
    grid_boundary: u32,
    /// The bucketed transpose, where a block may take enough shared memory.
    bucketed: Option<Bucketed>,
    /// δ2 of canonical faces ([`FaceBuckets`]), where a block may take enough shared memory.
    face_runs: Option<FaceRuns>,
    /// Grid of the last launch (where its phase stamps are).
    last_grid: std::sync::atomic::AtomicU32,
    /// At most this many blocks for the boundary extraction (0: its co-resident grid); see
    /// [`MeshKernels::limit_boundary_grid`].
    boundary_grid_cap: std::sync::atomic::AtomicU32,
}

/// The edge and vertex marks of `boundary_coop`, kept from call to call and grown to the
/// largest mesh seen, with its look-back words (`lb` in `kernels/mesh.cu`: each block's
/// counts tagged with the launch's stamp): each launch marks and tags with a stamp that no
/// earlier launch on these buffers used (a mark is set where it equals the stamp), so no call
/// zeroes them first. On the stamp's wrap-around (after 2^32 - 1 launches) the buffers are
/// replaced by zeroed ones.
#[derive(Default)]
struct StampedMarks {
    emark: Option<DeviceBuffer<u32>>,
    vmark: Option<DeviceBuffer<u32>>,
    lookback: Option<DeviceBuffer<u64>>,
    stamp: u32,
}

impl StampedMarks {
    /// The marks for the next launch, at least `ne` and `nv` words, and look-back words for
    /// a grid of `grid` blocks (grown, or replaced by zeroed ones on the stamp's
    /// wrap-around), and the launch's stamp.
    fn next(
        &mut self,
        g: &Gpu,
        ne: usize,
        nv: usize,
        grid: u32,
    ) -> Result<StampedLaunch<'_>, MeshError> {
        self.stamp = self.stamp.wrapping_add(1);
        let wrapped = self.stamp == 0;
        if wrapped {
            self.stamp = 1;
        }
        for (buf, n) in [(&mut self.emark, ne), (&mut self.vmark, nv)] {
            if wrapped || buf.as_ref().is_none_or(|b| b.len() < n.max(1)) {
                *buf = None; // the old buffer back to the pool first
                *buf = Some(g.zeros::<u32>(n.max(1))?);
            }
        }
        let nlb = 3 * grid as usize + 1;
        if wrapped || self.lookback.as_ref().is_none_or(|b| b.len() < nlb) {
            self.lookback = None;
            self.lookback = Some(g.zeros::<u64>(nlb)?);
        }
        Ok(StampedLaunch {
            emark: self.emark.as_ref().expect("set above"),
            vmark: self.vmark.as_ref().expect("set above"),
            lookback: self.lookback.as_ref().expect("set above"),
            stamp: self.stamp,
        })
    }
}

/// What one `boundary_coop` launch marks and tags with (see [`StampedMarks`]).
struct StampedLaunch<'a> {
    emark: &'a DeviceBuffer<u32>,
    vmark: &'a DeviceBuffer<u32>,
    lookback: &'a DeviceBuffer<u64>,
    stamp: u32,
}

/// `transpose_bucketed` (`kernels/mesh.cu`): one block of [`BT_THREADS`] threads per
/// multiprocessor with `shared` bytes of dynamic shared memory; `tile_max` entries a tile
/// in its first phase, at most `cap` entries of a bucket placed in shared memory at once in
/// its second. The constants below are the kernel's `BT_*`.
struct Bucketed {
    kernel: Kernel,
    /// Mode 3 (δ1 of canonical pairs), compiled apart so that the other modes carry none of
    /// its code.
    kernel_pairs: Kernel,
    grid: u32,
    shared: u32,
    tile_max: u32,
    cap: u32,
    /// 2 x (BT_NBMAX + 1) words (bucket totals, and mode 3's order check): a launch sums into
    /// half `parity` and zeroes the other.
    gcount: DeviceBuffer<u32>,
    parity: std::sync::atomic::AtomicU32,
}

const BT_THREADS: u32 = 1024;
const BT_NBMAX: usize = 2048;
const BT_NTMAX: usize = 1024;
const BT_WMAX: usize = 8192;
const BT_DIR: usize = 2048;
const BT_TILEMAX: u32 = 32768;
/// Every tile starts at a multiple of 32 entries (128 bytes): a warp's 32 loads of the input
/// and stores of the packed entries are one aligned line each.
const BT_TILE_ALIGN: u32 = 32;
/// Buckets are a multiple of 32 columns wide (below the two-slot way's widest): each
/// bucket's column offsets start on a 128-byte line.
const BT_W_ALIGN: u32 = 32;
const BT_WSLOT: usize = 16384;

/// The cut of one bucketed transpose: buckets of `w` columns, `nb` of them; tiles of `tile`
/// entries, `nt` of them.
#[derive(Clone)]
struct BucketPlan {
    w: u32,
    nb: u32,
    tile: u32,
    nt: u32,
}

impl Bucketed {
    /// `None` when the device cannot give a block of 1024 threads the shared memory the
    /// kernel needs (below ~100 KiB), or holds no such block.
    fn new(gpu: &Gpu, module: &Module) -> Result<Option<Self>, MeshError> {
        // the kernel's own static shared words stay under 1 KiB
        let shared = gpu
            .max_shared_per_block_optin()
            .saturating_sub(1024)
            .min(220 << 10);
        // phase 2: bucket starts, the order of the buckets, column offsets, two words per
        // tile, the runs' directory, then 6 bytes per entry
        let fixed = 4 * (2 * BT_NBMAX + 1 + BT_WMAX + 2 * BT_NTMAX + 1 + BT_DIR) as u32;
        let cap = shared.saturating_sub(fixed) / 6;
        if cap < 8192 {
            return Ok(None);
        }
        let kernel = module.function("transpose_bucketed")?;
        let kernel_pairs = module.function("transpose_bucketed_pairs")?;
        let mut per_sm = u32::MAX;
        for k in [&kernel, &kernel_pairs] {
            k.set_max_dynamic_shared(shared)?;
            per_sm = per_sm.min(k.max_active_blocks_per_sm_with_shared(BT_THREADS, shared)?);
        }
        if per_sm == 0 {
            return Ok(None);
        }
        Ok(Some(Bucketed {
            kernel,
            kernel_pairs,
            grid: per_sm * gpu.sm_count(),
            shared,
            // phase 1: bucket counts, then the tile as read and as placed (one word each); a
            // multiple of BT_TILE_ALIGN entries, as every tile's length is
            tile_max: ((shared - 4 * BT_NBMAX as u32) / 8).min(BT_TILEMAX) / BT_TILE_ALIGN
                * BT_TILE_ALIGN,
            cap,
            gcount: gpu.zeros::<u32>(2 * (BT_NBMAX + 1))?,
            parity: 0.into(),
        }))
    }
    /// The widest bucket whose sign slots (two words a column) fit in the room of the
    /// general way's offsets and placed entries (see `transpose_bucketed`), reckoned at
    /// three words a column: one more than the slots take now that the columns' offsets
    /// are no longer kept in shared memory. The dragon's buckets (~7k columns) are well
    /// under the bound (~15.9k on the H200).
    fn two_slot_wmax(&self) -> usize {
        ((BT_WMAX + 3 * self.cap as usize / 2) / 3).min(BT_WSLOT)
    }
    /// Buckets of about 60 % of `cap` entries on average, as many as a whole number of them
    /// per block (more, smaller buckets measured slower: twice as many made δ3 and δ2 of the
    /// dragon 13 % slower), a multiple of `BT_W_ALIGN` columns wide; tiles of equal length (a
    /// multiple of `BT_TILE_ALIGN` entries), at most `tile_max`. `None` past the kernel's
    /// limits (the general one-launch transpose takes those).
    fn plan(
        &self,
        nnz: usize,
        ncols: usize,
        two_slot: bool,
        canonical: bool,
    ) -> Option<BucketPlan> {
        let g = self.grid as usize;
        let target = (self.cap as usize * 3 / 5).max(1);
        let rounds = nnz.div_ceil(g * target).max(1);
        // canonical pairs: at least two rounds (the dragon's δ1 in file order with one bucket a
        // block: 0.101 ms of phases, the blocks waiting on the largest; with two: 0.058)
        let rounds = if canonical { rounds.max(2) } else { rounds };
        let wmax = if two_slot {
            self.two_slot_wmax()
        } else if canonical {
            // the columns' out-edge starts take BT_WMAX + 1 words of the placed entries' room
            if (self.cap as usize) < 2 * (BT_WMAX + 1) {
                return None;
            }
            BT_WMAX
        } else {
            BT_WMAX
        };
        // aligned offsets: δ1 of the dragon 2-4 µs faster, δ2 and δ3 unchanged (sessions 21-22)
        let w = ncols
            .div_ceil(g * rounds)
            .next_multiple_of(BT_W_ALIGN as usize)
            .clamp(1, wmax);
        let nb = ncols.div_ceil(w);
        let (tile, nt) = self.tiles(nnz, self.tile_max)?;
        (nb <= BT_NBMAX).then_some(BucketPlan {
            w: w as u32,
            nb: nb as u32,
            tile,
            nt,
        })
    }
    /// Tiles of equal length (a multiple of `BT_TILE_ALIGN` entries, at most `tile_max`), the
    /// same number for every block: `(tile, nt)`, `None` past `BT_NTMAX` tiles.
    fn tiles(&self, nnz: usize, tile_max: u32) -> Option<(u32, u32)> {
        let g = self.grid as usize;
        let per_block = nnz.div_ceil(g * tile_max.max(1) as usize).max(1);
        let tile = nnz
            .div_ceil(g * per_block)
            .next_multiple_of(BT_TILE_ALIGN as usize);
        let nt = nnz.div_ceil(tile);
        (nt <= BT_NTMAX).then_some((tile as u32, nt as u32))
    }
}

/// δ1's buckets for canonical edge pairs that the host has checked (cut by a [`DeviceMesh`] at
/// upload, §3.4.1): `transpose_bucketed`'s mode 3 with buckets of consecutive vertices cut on
/// the host so that each takes about the same time ([`edge_bucket_weight`] of its vertices'
/// in- and out-degrees), one bucket a block. The cut is made once, at upload; with it δ1 is
/// one launch and no host synchronisation (the order check and the long rows, which the
/// kernel reports in flags otherwise, were settled on the host).
///
/// Buckets of equal width (the general mode 3) leave the blocks waiting on the largest: in a
/// TetGen mesh the Steiner points come last in the file, and their rows are the longest.
pub(crate) struct EdgeBuckets {
    nvertices: usize,
    nedges: usize,
    /// `nb + 1` first vertices of the buckets (multiples of 32, then `nvertices`).
    cuts: DeviceBuffer<u32>,
    /// The bucket of every 32 consecutive vertices.
    cut_of: DeviceBuffer<u16>,
    /// `nvertices + 1` words: the first edge whose `from` is at least `v` (`nedges` past the
    /// last), the start of vertex v's out-edges.
    e0: DeviceBuffer<u32>,
    plan: BucketPlan,
    /// The bucketed kernel's grid the cut was made for.
    grid: u32,
}

impl EdgeBuckets {
    pub(crate) fn duplicate(&self, g: &Gpu) -> Result<Self, MeshError> {
        Ok(EdgeBuckets {
            nvertices: self.nvertices,
            nedges: self.nedges,
            cuts: g.duplicate(&self.cuts)?,
            cut_of: g.duplicate(&self.cut_of)?,
            e0: g.duplicate(&self.e0)?,
            plan: self.plan.clone(),
            grid: self.grid,
        })
    }
}

/// In-degrees and out-edge starts of canonical pairs, found once at upload for both cuts
/// ([`EdgeBuckets`], [`FaceBuckets`]).
struct PairDegrees {
    /// In-edges of every vertex.
    indeg: Vec<u32>,
    /// `nvertices + 1` words: vertex v's out-edges are `e0[v] .. e0[v + 1]` (the pairs' `from`
    /// are non-decreasing).
    e0: Vec<u32>,
}

impl PairDegrees {
    /// The degrees of the canonical pairs `ev` (the caller has checked them: [`canonical_pairs`])
    /// over `nvertices` vertices; an error for a vertex out of range.
    fn of(ev: &[[u32; 2]], nvertices: usize) -> Result<Self, MeshError> {
        // canonical pairs: `from` < `to`, so a `to` in range is all there is to check
        let mut indeg = vec![0u32; nvertices];
        for p in ev {
            let Some(d) = indeg.get_mut(p[1] as usize) else {
                return Err(MeshError::IndexOutOfRange {
                    what: "edge vertex",
                    index: p[1] as u64,
                    len: nvertices,
                });
            };
            *d += 1;
        }
        let e0 = crate::simplex::first_vertex_offsets(nvertices, ev.iter().map(|p| p[0]));
        Ok(PairDegrees { indeg, e0 })
    }
    fn nvertices(&self) -> usize {
        self.indeg.len()
    }
}

/// Vertices a bucket of [`EdgeBuckets`] starts on a multiple of (its column offsets start on
/// a 128-byte line, as `BT_W_ALIGN`; the kernel finds a vertex's bucket as `cut_of[v >> 5]`).
const EB_GROUP: usize = 32;
/// The rows that mode 3 sorts in shared memory by rank: a vertex of more in-edges sets a flag
/// for the host (the kernel's `TS_MID`), so [`EdgeBuckets`] are not made for such edges.
const EB_LONGEST_IN: u32 = 2048;

/// What vertex v adds to its bucket's time in [`EdgeBuckets`], in relative units, from its in-
/// and out-degree: its in-edges are gathered twice and ranked within their row (quadratic),
/// its out-edges are written as a run, its offset once. Device call 6 of session 27 (dragon,
/// file order, one H200): these weights 0.0470-0.0472 ms (phases 39.7 µs); the degrees alone
/// (in + out + 1) left one bucket of the Steiner points 33 µs behind the others; weights
/// fitted to 528 timed buckets (in 31 : out 8 : in² 1) 0.0484-0.0488 ms.
fn edge_bucket_weight(indeg: u64, outdeg: u64) -> u64 {
    10 * indeg + 5 * outdeg + indeg * indeg + 10
}

/// Cut `weights` (one per group of [`EB_GROUP`] columns) into about `parts` runs of consecutive
/// groups of about equal weight, none wider than `max_groups` ([`balanced_runs`]).
fn balanced_cuts(weights: &[u64], parts: usize, max_groups: usize) -> Vec<usize> {
    let max_groups = max_groups.max(1);
    balanced_runs(weights, parts, |start, g| g - start >= max_groups)
}

/// Cut `weights` into about `parts` runs of consecutive groups of about equal weight: the first
/// group of every run, then `weights.len()`. A run ends where the weight before it reaches the
/// next multiple of `total / parts`, or before group g where `full(start, g)` (the run `start
/// ..= g` would be too large). δ1's and δ2's cuts ([`EdgeBuckets`], [`FaceBuckets`]).
fn balanced_runs(weights: &[u64], parts: usize, full: impl Fn(usize, usize) -> bool) -> Vec<usize> {
    let total: u128 = weights.iter().map(|&w| w as u128).sum();
    let parts = parts.max(1) as u128;
    let mut cuts = vec![0];
    let (mut acc, mut k, mut start) = (0u128, 1u128, 0usize);
    for (g, &w) in weights.iter().enumerate() {
        let reached = |k: u128| k <= parts && acc * parts >= total * k;
        if g > start && (reached(k) || full(start, g)) {
            cuts.push(g);
            start = g;
            while reached(k) {
                k += 1;
            }
        }
        acc += w as u128;
    }
    cuts.push(weights.len());
    cuts
}

/// δ2's buckets for canonical faces that the host has checked (cut by a [`DeviceMesh`] at
/// upload, §3.4.1): `edge_faces_runs` in `kernels/mesh.cu` takes edge e = (u, w)'s faces
/// (x, u, w) from the runs of u's in-edges in δ1's row of u, and its faces (u, x, w) and
/// (u, w, x) from u's own faces, so that nothing is scattered across the mesh and no row is
/// sorted. Faces are canonical when every ∂2 row is the loop (a,b), (b,c), (a,c) of a triple
/// a < b < c over canonical edges and the triples increase lexicographically: the faces of
/// Tessera's simplex derivation (§3.4.4; [`canonical_faces`]).
///
/// The work is cut at upload into tasks of one warp: runs of consecutive vertices of about
/// equal work ([`face_bucket_weight`]), each with its own part of its block's shared memory;
/// a block holds as many consecutive tasks as it has warps, within its shared memory
/// ([`FaceRuns`]).
pub(crate) struct FaceBuckets {
    nvertices: usize,
    nedges: usize,
    nfaces: usize,
    /// `nb * warps + 1` entries of 4 words, block b's tasks in slots `warps * b ..
    /// warps * (b + 1)`: each task's first vertex, first edge (of its first vertex's out-edges),
    /// first face (of its first vertex's own faces) and first entry of δ2; a task ends where
    /// the next slot starts. A block's last slots may hold empty tasks (each starts where the
    /// next block's first task does); the last entry ends the last block.
    wtab: DeviceBuffer<u32>,
    /// `nedges + 1` words: the first face whose position-0 edge is at least e, so edge e's
    /// faces (e, x) are the run `rs[e] .. rs[e + 1]`.
    rs: DeviceBuffer<u32>,
    nb: u32,
    /// Dynamic shared memory of the largest block's tasks, bytes.
    shared: u32,
    /// Warps (tasks) a block: the shape of block of [`FaceRuns`] the tasks were grouped for.
    warps: u32,
}

impl FaceBuckets {
    pub(crate) fn duplicate(&self, g: &Gpu) -> Result<Self, MeshError> {
        Ok(FaceBuckets {
            nvertices: self.nvertices,
            nedges: self.nedges,
            nfaces: self.nfaces,
            wtab: g.duplicate(&self.wtab)?,
            rs: g.duplicate(&self.rs)?,
            nb: self.nb,
            shared: self.shared,
            warps: self.warps,
        })
    }
}

/// The most rows a task of [`FaceBuckets`] may hold (the kernel keeps a row's index in 15 bits).
const FB_ROWS: u64 = 1 << 15;

/// Group consecutive tasks of `bytes` shared memory each (none over `budget`) into blocks of up
/// to `warps` tasks and at most `budget` bytes: each block's first task (and the end), and the
/// largest block's bytes.
fn group_tasks(bytes: impl Iterator<Item = u64>, warps: usize, budget: u64) -> (Vec<u32>, u64) {
    let (mut first, mut most) = (vec![0u32], 0u64);
    let (mut n, mut sum, mut t) = (0usize, 0u64, 0u32);
    for b in bytes {
        if n == warps || (n > 0 && sum + b > budget) {
            first.push(t);
            most = most.max(sum);
            (n, sum) = (0, 0);
        }
        n += 1;
        sum += b;
        t += 1;
    }
    if n > 0 {
        first.push(t);
        most = most.max(sum);
    }
    (first, most)
}

/// The first vertex of every slot of [`FaceBuckets`]' task table, and the end: block b's tasks
/// (`btask[b] .. btask[b + 1]` of the runs `tasks`, given by their first vertices and the end)
/// in slots `warps * b .. warps * (b + 1)`, the empty ones last (each starts where the next
/// block's first task does, so it ends where it starts).
fn task_slots(tasks: &[usize], btask: &[u32], warps: u32) -> Vec<usize> {
    btask
        .windows(2)
        .flat_map(|b| (b[0]..b[0] + warps).map(|t| tasks[t.min(b[1]) as usize]))
        .chain(tasks.last().copied())
        .collect()
}

/// What a run of vertices adds to its task's time in [`FaceBuckets`], in relative units: its
/// A faces (a gather each) and its own faces (a load each) are read, counted and written in
/// order, its δ1 entries walked, its rows scanned.
fn face_bucket_weight(r: &FaceBucketLoad) -> u64 {
    2 * r.afaces + 2 * r.faces + r.rows + r.entries
}

/// The rows, own faces and A faces of a run of vertices ([`FaceBuckets`]), and their δ1 entries
/// (their degrees; not kept in shared memory).
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct FaceBucketLoad {
    rows: u64,
    faces: u64,
    afaces: u64,
    entries: u64,
}

impl FaceBucketLoad {
    fn add(&mut self, o: &FaceBucketLoad) {
        self.rows += o.rows;
        self.faces += o.faces;
        self.afaces += o.afaces;
        self.entries += o.entries;
    }
    /// `self - o`, field by field (a run's load from two prefix sums).
    fn minus(&self, o: &FaceBucketLoad) -> FaceBucketLoad {
        FaceBucketLoad {
            rows: self.rows - o.rows,
            faces: self.faces - o.faces,
            afaces: self.afaces - o.afaces,
            entries: self.entries - o.entries,
        }
    }
    /// Prefix sums of `load` (`load.len() + 1`, from zero): the run `a .. b` is
    /// `pre[b].minus(&pre[a])`.
    fn prefix(load: &[FaceBucketLoad]) -> Vec<FaceBucketLoad> {
        let mut pre = Vec::with_capacity(load.len() + 1);
        let mut acc = FaceBucketLoad::default();
        pre.push(acc);
        for l in load {
            acc.add(l);
            pre.push(acc);
        }
        pre
    }
    /// Bytes of `edge_faces_runs`' shared memory for a task of this load (its `rf_task_words`):
    /// three words a row and one more, a word and a half an own face, two words and a bit an A
    /// face, and one more word.
    fn shared_bytes(&self) -> u64 {
        let words = 3 * self.rows
            + 1
            + self.faces
            + 2 * self.afaces
            + self.afaces / 32
            + 1
            + self.faces.div_ceil(2);
        4 * words
    }
}

/// Cut the vertices, given by the prefix sums `pre` of their loads
/// ([`FaceBucketLoad::prefix`]), into runs of consecutive vertices: about `parts` runs of about
/// equal [`face_bucket_weight`], none holding more than `fits` allows. `None` when one vertex
/// alone does not fit.
fn cut_face_tasks(
    pre: &[FaceBucketLoad],
    parts: usize,
    fits: impl Fn(&FaceBucketLoad) -> bool,
) -> Option<Vec<usize>> {
    let one = |p: &[FaceBucketLoad]| p[1].minus(&p[0]);
    if !pre.windows(2).all(|p| fits(&one(p))) {
        return None;
    }
    let weights: Vec<u64> = pre
        .windows(2)
        .map(|p| face_bucket_weight(&one(p)))
        .collect();
    Some(balanced_runs(&weights, parts, |start, g| {
        !fits(&pre[g + 1].minus(&pre[start]))
    }))
}

/// Whether the faces `fe` over the canonical edge pairs `ev` are canonical ([`FaceBuckets`]):
/// every row the loop (a,b), (b,c), (a,c) of a triple a < b < c, the triples increasing.
/// Returns every face's second vertex `b` when they are.
fn canonical_faces(ev: &[[u32; 2]], fe: &Tcsr) -> Option<Vec<u32>> {
    use tessera_sparse::tcsr::col;
    let (offs, cols) = (fe.offsets(), fe.columns());
    let nf = fe.nrows();
    if cols.len() != 3 * nf || offs.iter().enumerate().any(|(f, &o)| o as usize != 3 * f) {
        return None;
    }
    let mut second = Vec::with_capacity(nf);
    let mut prev: Option<[u32; 3]> = None;
    for r in cols.chunks_exact(3) {
        let e = |i: usize| ev.get(col(r[i]) as usize).copied();
        let ([a, b], [b1, c], [a1, c1]) = (e(0)?, e(1)?, e(2)?);
        // canonical edges: a < b and b < c
        if a1 != a || b1 != b || c1 != c || prev.is_some_and(|p| p >= [a, b, c]) {
            return None;
        }
        prev = Some([a, b, c]);
        second.push(b);
    }
    Some(second)
}

/// One shape of block of δ2's kernel (`kernels/mesh.cu`) for the tasks of [`FaceBuckets`]: blocks
/// of `warps` warps, a warp a task, with up to `shared` bytes of dynamic shared memory (the
/// multiprocessor's most over the blocks it is meant to hold), `wave` of them resident at once.
struct FaceRunsShape {
    kernel: Kernel,
    warps: u32,
    wave: u32,
    shared: u32,
}

/// δ2's kernel in its two shapes of block: `small`, 4 warps and 12 blocks a multiprocessor
/// (`edge_faces_runs_small`), where every vertex's task fits a twelfth of its shared memory, and
/// `large`, 16 warps and 3 blocks (`edge_faces_runs`), where one needs up to a third. Kept with
/// the one-launch chains (made where cooperative launches are), although it is an ordinary
/// launch. Dragon, δ1 cached, op_overheads events (session 30, before the kernel's steps 1 and 4
/// took fewer instructions): 0.0577-0.0582 ms in blocks of 16 warps, 0.0550-0.0565 in blocks of 4.
struct FaceRuns {
    small: Option<FaceRunsShape>,
    large: FaceRunsShape,
}

/// Waves of blocks δ2's tasks are cut for (more blocks where a block's shared memory holds
/// fewer tasks than it has warps).
const FR_WAVES: u32 = 3;

impl FaceRunsShape {
    /// `None` when the device does not hold `blocks` blocks of `warps` warps a multiprocessor
    /// with at least `least` bytes of shared memory each.
    fn new(
        gpu: &Gpu,
        module: &Module,
        name: &str,
        warps: u32,
        blocks: u32,
        least: u32,
    ) -> Result<Option<Self>, MeshError> {
        let shared = (gpu.max_shared_per_block_optin() / blocks).saturating_sub(1024);
        if shared < least {
            return Ok(None);
        }
        let kernel = module.function(name)?;
        kernel.set_max_dynamic_shared(shared)?;
        let per_sm = kernel.max_active_blocks_per_sm_with_shared(32 * warps, shared)?;
        if per_sm == 0 {
            return Ok(None);
        }
        Ok(Some(FaceRunsShape {
            kernel,
            warps,
            wave: per_sm * gpu.sm_count(),
            shared,
        }))
    }
}

impl FaceRuns {
    /// `None` when the device holds no block of 512 threads with 32 KiB of shared memory.
    fn new(gpu: &Gpu, module: &Module) -> Result<Option<Self>, MeshError> {
        let Some(large) = FaceRunsShape::new(gpu, module, "edge_faces_runs", 16, 3, 32 << 10)?
        else {
            return Ok(None);
        };
        let small = FaceRunsShape::new(gpu, module, "edge_faces_runs_small", 4, 12, 8 << 10)?;
        Ok(Some(FaceRuns { small, large }))
    }
    /// The shapes, the small one first (if there is one).
    fn shapes(&self) -> impl Iterator<Item = &FaceRunsShape> {
        self.small.iter().chain([&self.large])
    }
    /// The shape of `warps` warps a block, if there is one.
    fn shape(&self, warps: u32) -> Option<&FaceRunsShape> {
        self.shapes().find(|s| s.warps == warps)
    }
}

impl CoopChains {
    /// `None` when the device takes no cooperative launches or reports no co-resident
    /// block of a kernel (the chains of separate launches run then).
    /// `bucketed`: whether the transposes of rows of one length and of edge pairs take
    /// `transpose_bucketed` (when the device allows it).
    fn new(gpu: &Gpu, module: &Module, bucketed: bool) -> Result<Option<Self>, MeshError> {
        if !gpu.supports_cooperative_launch() {
            return Ok(None);
        }
        let transpose = module.function("transpose_coop")?;
        let boundary = module.function("boundary_coop")?;
        let sm = gpu.sm_count();
        let grid_transpose = transpose.max_active_blocks_per_sm(BLOCK)? * sm;
        let grid_boundary = boundary.max_active_blocks_per_sm(BLOCK)? * sm;
        if grid_transpose == 0 || grid_boundary == 0 {
            return Ok(None);
        }
        let bucketed = if bucketed {
            Bucketed::new(gpu, module)?
        } else {
            None
        };
        let grid_bucketed = bucketed.as_ref().map_or(0, |b| b.grid);
        let face_runs = FaceRuns::new(gpu, module)?;
        let words = 4 + 3 * grid_transpose.max(grid_boundary).max(grid_bucketed) as usize + 2 * 16;
        Ok(Some(CoopChains {
            sync: gpu.zeros::<u32>(words)?,
            marks: Default::default(),
            unused_flag: gpu.zeros::<u32>(2)?,
            transpose,
            boundary,
            grid_transpose,
            grid_boundary,
            bucketed,
            face_runs,
            last_grid: 0.into(),
            boundary_grid_cap: 0.into(),
        }))
    }
    /// Blocks for `items` items of work (one per thread), at most the co-resident grid.
    fn grid(max: u32, items: usize) -> u32 {
        items.div_ceil(BLOCK as usize).clamp(1, max as usize) as u32
    }
}

/// Outputs sized before their lengths are known keep their allocation when at most this
/// many bytes of it sit idle, and are copied into buffers of their length otherwise.
const KEEP_IDLE_BYTES: usize = 16 << 20;

/// The mapped host words of [`MeshKernels`]: a flag or the boundary's four words, then
/// [`WORD_DONE`].
const WORDS: usize = 5;
/// The word `boundary_coop` sets (after a system-scope fence) once it has written its four
/// result words: the host reads them then, not at the launch's end.
const WORD_DONE: usize = 4;

/// The input of a one-launch transpose (see `transpose_coop` in `kernels/mesh.cu`).
struct TransposeInput<'a> {
    offsets: &'a DeviceBuffer<u32>,
    /// TCSR columns, or ∂1's vertex pairs (mode 2, reinterpreted).
    columns: &'a dyn tessera_gpu::KernelArg,
    nrows: usize,
    nnz: usize,
    /// 0: rows by offsets, 1: rows of `k` entries, 2: ∂1 as vertex pairs, 3: ∂1 as
    /// canonical vertex pairs (`transpose_bucketed` only; `nnz` counts the edges).
    mode: u32,
    k: u32,
}

impl<'g> MeshKernels<'g> {
    /// Compile (once, then from the kernel caches) and load the mesh kernels. The
    /// transposes and the boundary extraction run as one cooperative launch each, unless
    /// `TESSERA_MESH_CHAINS=launches` asks for the chains of separate launches.
    ///
    /// The transposes of rows of one length (∂3, ∂2 of simplices) and of ∂1's vertex pairs
    /// take the bucketed kernel (`transpose_bucketed`) unless `TESSERA_MESH_TRANSPOSE=coop`
    /// asks for the general one-launch kernel (`transpose_coop`) for all of them.
    pub fn new(gpu: &'g Gpu) -> Result<Self, MeshError> {
        let launches = std::env::var("TESSERA_MESH_CHAINS").is_ok_and(|v| v == "launches");
        let coop = std::env::var("TESSERA_MESH_TRANSPOSE").is_ok_and(|v| v == "coop");
        Self::with_options(gpu, !launches, !coop)
    }
    /// [`MeshKernels::new`] with the choice made here: `one_launch` false gives the chains
    /// of separate launches (count, scan, fill, sort), the reference of the one-launch
    /// kernels in the tests.
    pub fn with_chains(gpu: &'g Gpu, one_launch: bool) -> Result<Self, MeshError> {
        Self::with_options(gpu, one_launch, true)
    }
    /// [`MeshKernels::with_chains`], and whether the one-launch transposes of rows of one
    /// length and of edge pairs take the bucketed kernel (`bucketed`; ignored without the
    /// one-launch chains or where the device gives a block too little shared memory).
    pub fn with_options(gpu: &'g Gpu, one_launch: bool, bucketed: bool) -> Result<Self, MeshError> {
        let module = gpu.compile(module_source(), &CompileOptions::named("tessera_mesh.cu"))?;
        let coop = if one_launch {
            CoopChains::new(gpu, &module, bucketed)?.map(Arc::new)
        } else {
            None
        };
        Ok(MeshKernels {
            gpu,
            prims: gpu.primitives()?,
            module,
            coop,
            words: Arc::new(std::sync::Mutex::new(gpu.host_words(WORDS)?)),
        })
    }
    /// Another handle on the same kernels and the same device stream.
    pub(crate) fn try_clone(&self) -> Result<Self, MeshError> {
        Ok(MeshKernels {
            gpu: self.gpu,
            prims: self.gpu.primitives()?,
            module: self.module.clone(),
            coop: self.coop.clone(),
            words: self.words.clone(),
        })
    }
    /// Run the one-launch boundary extraction on at most `blocks` blocks (`None`: on as many
    /// as fit the device at once, the default). Fewer blocks give each warp longer runs of
    /// faces, edges and vertices, past what it keeps in registers: the tests reach the
    /// kernel's paths through memory this way on small meshes. No effect without one-launch
    /// chains.
    pub fn limit_boundary_grid(&self, blocks: Option<u32>) {
        if let Some(c) = self.coop.as_deref() {
            c.boundary_grid_cap.store(
                blocks.map_or(0, |b| b.max(1)),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    }

    /// Whether the mesh chains run as one cooperative launch each (transposes, boundary).
    pub fn one_launch_chains(&self) -> bool {
        self.coop.is_some()
    }
    /// Whether the transposes of rows of one length and of edge pairs take the bucketed
    /// kernel, and its co-resident grid (blocks of 1024 threads).
    pub fn bucketed_transpose_grid(&self) -> Option<u32> {
        self.coop.as_deref()?.bucketed.as_ref().map(|b| b.grid)
    }
    /// The co-resident grids (blocks) of the one-launch transpose and boundary kernels.
    pub fn one_launch_grids(&self) -> Option<(u32, u32)> {
        self.coop
            .as_deref()
            .map(|c| (c.grid_transpose, c.grid_boundary))
    }
    /// Milliseconds between the phase stamps of the last one-launch chain (block 0's
    /// `%globaltimer` at its start, after each grid barrier, at its end, then the last
    /// block's at its end, so the last phase is the other blocks' tail); reads the device
    /// (one synchronisation). Empty without the one-launch chains. For the benchmarks'
    /// phase tables.
    pub fn last_chain_phases_ms(&self) -> Result<Vec<f64>, MeshError> {
        let Some(c) = self.coop.as_deref() else {
            return Ok(Vec::new());
        };
        let w = self.gpu.download(&c.sync)?;
        let grid = c.last_grid.load(std::sync::atomic::Ordering::Relaxed) as usize;
        let n = (w[3] as usize).min(16);
        let at = |i: usize| {
            let b = 4 + 3 * grid + 2 * i;
            w[b] as u64 | (w[b + 1] as u64) << 32
        };
        Ok((1..n)
            .map(|i| at(i).saturating_sub(at(i - 1)) as f64 * 1e-6)
            .collect())
    }
    fn k(&self, name: &str) -> Result<Kernel, GpuError> {
        self.module.function(name)
    }
    fn cfg(n: usize) -> Result<LaunchConfig, GpuError> {
        LaunchConfig::for_items(n, BLOCK)
    }
    /// The primitives used by the mesh operations.
    pub fn primitives(&self) -> &Primitives<'g> {
        &self.prims
    }

    /// Transpose of a TCSR matrix (Listing 3.1): count entries per column with atomics,
    /// scan, fill with atomic slots, then sort every row by decoded column. The result is
    /// identical to [`Tcsr::transpose`]. The total is `nnz` (known on the host) and the rows
    /// are sorted without first reading the longest row ([`MeshKernels::transpose_deferred`]);
    /// the one host synchronisation, at the end, reads whether some row was longer than the
    /// block sort takes (then those rows are sorted again by the general segmented sort).
    pub fn transpose(&self, m: &DeviceTcsr) -> Result<DeviceTcsr, MeshError> {
        self.sorted_now(|flag| self.transpose_deferred(m, flag))
    }

    /// [`MeshKernels::transpose`] with no host synchronisation: rows of more than 2048
    /// entries are left unsorted and set `flag` (to be read by the caller, which must then
    /// sort again or discard the result).
    pub fn transpose_deferred(
        &self,
        m: &DeviceTcsr,
        flag: &dyn KernelArg,
    ) -> Result<DeviceTcsr, MeshError> {
        if let Some(t) =
            self.transpose_one_launch(&Self::tcsr_input(m), m.ncols, false, Some(flag))?
        {
            return Ok(t);
        }
        let (offsets, out) = self.transpose_unsorted(m)?;
        self.sort_rows_deferred(&out, &offsets, flag)?;
        Ok(DeviceTcsr::ragged(offsets, out, m.nrows()))
    }

    /// SortRows (by decoded column) without reading the longest row first: rows of up to 64
    /// entries one thread per row, rows of 65..=2048 one block per row; longer rows stay
    /// unsorted and set `flag`.
    fn sort_rows_deferred(
        &self,
        vals: &DeviceBuffer<i32>,
        offsets: &DeviceBuffer<u32>,
        flag: &dyn KernelArg,
    ) -> Result<(), MeshError> {
        let nrows = offsets.len().saturating_sub(1);
        if nrows == 0 || vals.is_empty() {
            return Ok(());
        }
        let g = self.gpu;
        let nr = nrows as u64;
        g.launch(&self.k("tsort_short_rows")?, Self::cfg(nrows)?)
            .arg(vals)
            .arg(offsets)
            .arg(&nr)
            .run()?;
        let grid = nrows
            .div_ceil(BLOCK as usize)
            .clamp(1, (g.sm_count().max(1) * 4) as usize) as u32;
        g.launch(
            &self.k("tsort_mid_rows")?,
            LaunchConfig::blocks(grid, BLOCK),
        )
        .arg(vals)
        .arg(offsets)
        .arg(&nr)
        .arg(flag)
        .run()?;
        Ok(())
    }

    /// Enqueue `launch` (kernels that may raise the flag it is given) with the mapped flag
    /// cleared, wait for the stream (the one host synchronisation), and return the result
    /// with whether the flag was raised.
    fn with_flag<T>(
        &self,
        launch: impl FnOnce(&dyn KernelArg) -> Result<T, MeshError>,
    ) -> Result<(T, bool), MeshError> {
        let (r, w) = self.with_words(launch)?;
        Ok((r, w[0] != 0))
    }

    /// Enqueue `launch` (kernels that may write the mapped words it is given: a flag in
    /// word 0, or the boundary's lengths) with the words cleared, wait for the stream (the
    /// one host synchronisation), and return the result with the four words. The words stay
    /// locked meanwhile.
    fn with_words<T>(
        &self,
        launch: impl FnOnce(&dyn KernelArg) -> Result<T, MeshError>,
    ) -> Result<(T, [u32; 4]), MeshError> {
        self.with_words_until(false, |words, _| launch(words))
    }

    /// [`MeshKernels::with_words`]; where `marked`, for a launch that also writes word
    /// [`WORD_DONE`] (given its device address; else 0) once words 0-3 are final: then waits
    /// for that word, not for the launch's end ([`Gpu::wait_word`]), and the launch's other
    /// work stays ordered on the stream. A launch that fails to enqueue, or ends without
    /// writing the word, is waited for and its error returned.
    fn with_words_until<T>(
        &self,
        marked: bool,
        launch: impl FnOnce(&dyn KernelArg, u64) -> Result<T, MeshError>,
    ) -> Result<(T, [u32; 4]), MeshError> {
        let words = self.words.lock().unwrap_or_else(|p| p.into_inner());
        words.clear();
        let done = if marked {
            words.device_address(WORD_DONE).ok_or_else(|| {
                MeshError::Gpu(GpuError::InvalidArgument(
                    "no word for the done mark".into(),
                ))
            })?
        } else {
            0
        };
        let r = launch(&*words, done);
        if marked && r.is_ok() {
            if !self.gpu.wait_word(&words, WORD_DONE)? {
                self.gpu.synchronize()?;
                return Err(MeshError::Gpu(GpuError::InvalidArgument(
                    "the launch ended without marking its words final".into(),
                )));
            }
        } else {
            // what was enqueued (before a failure, too) ends before the words are unlocked
            self.gpu.synchronize()?;
        }
        Ok((r?, std::array::from_fn(|i| words.get(i))))
    }

    /// A deferred transpose (given a zeroed flag) with its flag read (one host
    /// synchronisation): when some row was too long for the deferred sort, every row is
    /// sorted again by the general segmented sort (radix for long rows).
    fn sorted_now(
        &self,
        deferred: impl FnOnce(&dyn KernelArg) -> Result<DeviceTcsr, MeshError>,
    ) -> Result<DeviceTcsr, MeshError> {
        let (mut t, raised) = self.with_flag(deferred)?;
        if raised {
            self.sort_all_rows(&mut t)?;
        }
        Ok(t)
    }

    /// Every row of `t` sorted by the general segmented sort (radix for long rows): what a
    /// deferred transpose that raised its flag leaves to the host.
    fn sort_all_rows(&self, t: &mut DeviceTcsr) -> Result<(), MeshError> {
        let longest = self.prims.max_row_len(&t.offsets)?;
        self.prims.segmented_sort_known(
            &mut t.columns,
            &t.offsets,
            SegOrder::TcsrColumn,
            longest,
        )?;
        Ok(())
    }

    /// δ3 = ∂3ᵀ (face -> cells) with no host synchronisation: a face of a 3-manifold mesh
    /// bounds at most two cells, so every row is sorted by one thread without first reading
    /// the longest row. The result is identical to [`MeshKernels::transpose`] for any input
    /// (a longer row, at a non-manifold face, is sorted too, by the same thread: correct,
    /// only slower).
    ///
    /// With the one-launch chains the rows come from two sign slots per face (no atomics, no
    /// sort; see `transpose_coop`), and the same launch falls back to the general transpose
    /// when some face has two entries of one sign.
    pub fn transpose_short_rows(&self, m: &DeviceTcsr) -> Result<DeviceTcsr, MeshError> {
        if let Some(t) = self.transpose_one_launch(&Self::tcsr_input(m), m.ncols, true, None)? {
            return Ok(t);
        }
        let (offsets, mut out) = self.transpose_unsorted(m)?;
        self.prims
            .segmented_sort_short(&mut out, &offsets, SegOrder::TcsrColumn)?;
        Ok(DeviceTcsr::ragged(offsets, out, m.nrows()))
    }

    fn tcsr_input(m: &DeviceTcsr) -> TransposeInput<'_> {
        let (mode, k) = m.row_len().map_or((0, 0), |k| (1, k));
        TransposeInput {
            offsets: &m.offsets,
            columns: &m.columns,
            nrows: m.nrows(),
            nnz: m.nnz(),
            mode,
            k,
        }
    }

    /// The transpose as one cooperative launch (`transpose_coop`): count, scan, fill and
    /// SortRows with grid barriers between them; `two_slot` first tries the sign slots of
    /// δ3. Rows longer than 2048 entries are sorted by one thread when `flag` is `None`,
    /// else left unsorted with the flag set (as [`MeshKernels::transpose_deferred`]).
    /// `None` (nothing launched) without the one-launch chains, for an empty input, or past
    /// the kernel's 32-bit positions (the chains of launches take those).
    fn transpose_one_launch(
        &self,
        input: &TransposeInput<'_>,
        ncols: usize,
        two_slot: bool,
        flag: Option<&dyn KernelArg>,
    ) -> Result<Option<DeviceTcsr>, MeshError> {
        let Some(c) = self.coop.as_deref() else {
            return Ok(None);
        };
        if !Self::one_launch_fits(input.nnz, ncols) {
            return Ok(None);
        }
        let g = self.gpu;
        if input.mode != 0 {
            if let Some(t) = self.transpose_bucketed(c, input, ncols, two_slot, flag, None)? {
                return Ok(Some(t));
            }
        }
        // the slots or counters and the worklist of middle rows: scratch that a repeated
        // call gets back from the `Gpu`'s cache of freed buffers without a driver call
        let work = g.alloc::<u32>(if two_slot { 2 * ncols } else { ncols })?;
        let mid = g.alloc::<u32>(input.nnz / (64 + 1) + 1)?;
        let offsets = g.alloc::<u32>(ncols + 1)?;
        let out = g.alloc::<i32>(input.nnz)?;
        let items = input.nnz.max(ncols).max(input.nrows);
        let grid = CoopChains::grid(c.grid_transpose, items);
        let (nrows, nnz, nc) = (input.nrows as u64, input.nnz as u64, ncols as u64);
        let (two, by_thread) = (two_slot as u32, flag.is_none() as u32);
        c.last_grid
            .store(grid, std::sync::atomic::Ordering::Relaxed);
        g.launch(&c.transpose, LaunchConfig::blocks(grid, BLOCK))
            .arg(input.offsets)
            .arg(input.columns)
            .arg(&nrows)
            .arg(&nnz)
            .arg(&input.mode)
            .arg(&input.k)
            .arg(&nc)
            .arg(&two)
            .arg(&by_thread)
            .arg(&work)
            .arg(&c.sync)
            .arg(&mid)
            .arg(&offsets)
            .arg(&out)
            .arg(flag.unwrap_or(&c.unused_flag as &dyn KernelArg))
            .run_cooperative()?;
        Ok(Some(DeviceTcsr::ragged(offsets, out, input.nrows)))
    }

    /// Whether a transpose of `nnz` entries over `ncols` columns fits the one-launch kernels'
    /// 32-bit positions (and is not empty).
    fn one_launch_fits(nnz: usize, ncols: usize) -> bool {
        nnz > 0 && ncols > 0 && nnz < u32::MAX as usize && 2 * ncols < u32::MAX as usize
    }

    /// The bucketed transpose (`transpose_bucketed`, one cooperative launch): tiles sorted
    /// by bucket of columns in shared memory, then every bucket's rows counted, placed and
    /// sorted in shared memory and written in order (`two_slot`: first by the sign slots of
    /// δ3, per bucket). Same result and same handling of rows longer than 2048 entries as
    /// [`MeshKernels::transpose_one_launch`]. `None` (nothing launched) without the kernel
    /// or past its limits. `cut`: mode 3's buckets cut by the host for these pairs (no flag
    /// is read then: the host checked the pairs and their rows).
    fn transpose_bucketed(
        &self,
        c: &CoopChains,
        input: &TransposeInput<'_>,
        ncols: usize,
        two_slot: bool,
        flag: Option<&dyn KernelArg>,
        cut: Option<&EdgeBuckets>,
    ) -> Result<Option<DeviceTcsr>, MeshError> {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(b) = c.bucketed.as_ref() else {
            return Ok(None);
        };
        // mode 3 reports pairs found not canonical in the flag's second word, unless the
        // host checked them (`cut`)
        let canonical = input.mode == 3;
        let cut = cut.filter(|e| canonical && e.grid == b.grid);
        if canonical && flag.is_none() && cut.is_none() {
            return Ok(None);
        }
        // keys 2 row + 1 must fit 32 bits
        let Some(plan) = cut
            .map(|e| e.plan.clone())
            .or_else(|| b.plan(input.nnz, ncols, two_slot, canonical))
            .filter(|_| input.nrows < i32::MAX as usize)
        else {
            return Ok(None);
        };
        // the sign slots of a bucket fit (the plan's width)
        let two_slot = two_slot as u32;
        let g = self.gpu;
        let st = g.alloc::<u32>(2 * plan.nb as usize * plan.nt as usize)?;
        let packed = g.alloc::<u32>(input.nnz)?;
        let offsets = g.alloc::<u32>(ncols + 1)?;
        // mode 3 partitions the `to` ends only; the result holds both ends
        let out = g.alloc::<i32>(if canonical { 2 * input.nnz } else { input.nnz })?;
        // mode 3: where each vertex's out-edges start, found by the kernel (or given with the
        // cut)
        let e0 = if canonical && cut.is_none() {
            Some(g.alloc::<u32>(ncols + 1)?)
        } else {
            None
        };
        let (nnz, nc) = (input.nnz as u32, ncols as u32);
        // n / d on the device as the high word of n * (2^64 / d rounded up); 0 for d = 1
        let inv = |d: u32| if d > 1 { u64::MAX / d as u64 + 1 } else { 0 };
        let (kinv, winv) = (inv(input.k), inv(plan.w));
        let by_thread = flag.is_none() as u32;
        let parity = b.parity.fetch_xor(1, Relaxed) & 1;
        c.last_grid.store(b.grid, Relaxed);
        g.launch(
            if canonical {
                &b.kernel_pairs
            } else {
                &b.kernel
            },
            LaunchConfig::blocks(b.grid, BT_THREADS).with_shared(b.shared),
        )
        .arg(input.columns)
        .arg(&nnz)
        .arg(&input.mode)
        .arg(&kinv)
        .arg(&nc)
        .arg(&plan.w)
        .arg(&winv)
        .arg(&plan.nb)
        .arg(&plan.tile)
        .arg(&plan.nt)
        .arg(&b.cap)
        .arg(&two_slot)
        .arg(&parity)
        .arg(&by_thread)
        .arg(&c.sync)
        .arg(&b.gcount)
        .arg(&st)
        .arg(&packed)
        .arg(&offsets)
        .arg(&out)
        .arg(flag.unwrap_or(&c.unused_flag as &dyn KernelArg))
        .arg(match (&e0, cut) {
            (Some(e), _) => e as &dyn KernelArg,
            (None, Some(eb)) => &eb.e0 as &dyn KernelArg,
            (None, None) => &c.unused_flag as &dyn KernelArg,
        })
        .arg(&cut.map_or(0u32, |e| e.cut_of.len() as u32))
        .arg(cut.map_or(&c.unused_flag as &dyn KernelArg, |e| &e.cuts))
        .arg(cut.map_or(&c.unused_flag as &dyn KernelArg, |e| &e.cut_of))
        .run_cooperative()?;
        Ok(Some(DeviceTcsr::ragged(offsets, out, input.nrows)))
    }

    /// Count, scan and fill of a transpose (rows in slot order, not yet sorted).
    fn transpose_unsorted(
        &self,
        m: &DeviceTcsr,
    ) -> Result<(DeviceBuffer<u32>, DeviceBuffer<i32>), MeshError> {
        let g = self.gpu;
        let counts = g.zeros::<u32>(m.ncols)?;
        let nnz = m.nnz() as u64;
        let grid = (m.nnz().div_ceil(BLOCK as usize)).clamp(1, 1 << 16) as u32;
        g.launch(
            &self.k("tcsr_count_cols")?,
            LaunchConfig::blocks(grid, BLOCK),
        )
        .arg(&m.columns)
        .arg(&nnz)
        .arg(&counts)
        .run()?;
        let offsets = self.prims.exclusive_scan_with_total(&counts)?;
        let out = g.alloc::<i32>(m.nnz())?;
        match m.uniform {
            Some(k) if k > 0 && nnz == k as u64 * m.nrows() as u64 => {
                g.launch(&self.k("tcsr_fill_transpose_uniform")?, Self::cfg(m.nnz())?)
                    .arg(&m.columns)
                    .arg(&nnz)
                    .arg(&k)
                    .arg(&offsets)
                    .arg(&counts)
                    .arg(&out)
                    .run()?;
            }
            _ => {
                let nrows = m.nrows() as u64;
                g.launch(&self.k("tcsr_fill_transpose")?, Self::cfg(m.nrows())?)
                    .arg(&m.offsets)
                    .arg(&m.columns)
                    .arg(&nrows)
                    .arg(&offsets)
                    .arg(&counts)
                    .arg(&out)
                    .run()?;
            }
        }
        Ok((offsets, out))
    }

    /// δ1 from ∂1 stored as `(from, to)` pairs (the edge-pair variant of the transpose,
    /// dissertation §3.4.1): vertex -> signed edges, +1 where the edge ends at the vertex.
    /// One host synchronisation, at the end (see [`MeshKernels::transpose`]).
    ///
    /// Canonical pairs (`from < to` for every edge, `from` non-decreasing: the edges of
    /// Tessera's simplex derivation, §3.4.4) take `transpose_bucketed`'s mode 3: vertex v's
    /// row is its in-edges (sorted) followed by its out-edges, a run of consecutive edges, so
    /// only the `to` ends are transposed. The kernel checks the order; other pairs (nothing
    /// written then) take the general transpose after it, which costs them one partition
    /// pass and one host synchronisation more than
    /// [`MeshKernels::transpose_edge_pairs_general`].
    pub fn transpose_edge_pairs(
        &self,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Result<DeviceTcsr, MeshError> {
        if let Some(t) = self.transpose_canonical_pairs(edge_vertices, nvertices)? {
            return Ok(t);
        }
        self.transpose_edge_pairs_general(edge_vertices, nvertices)
    }

    /// [`MeshKernels::transpose_edge_pairs`] without trying the canonical transpose first
    /// (for pairs known not to be canonical: no partition pass spent on finding out).
    pub fn transpose_edge_pairs_general(
        &self,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Result<DeviceTcsr, MeshError> {
        self.sorted_now(|flag| self.transpose_edge_pairs_deferred(edge_vertices, nvertices, flag))
    }

    /// δ1 of canonical pairs by `transpose_bucketed` (mode 3; see
    /// [`MeshKernels::transpose_edge_pairs`]), with one host synchronisation for its two
    /// flags: rows left unsorted (sorted again here) and pairs found not canonical (`None`,
    /// nothing written). `None` too without the kernel (no cooperative launch, too little
    /// shared memory) or past its limits.
    pub fn transpose_canonical_pairs(
        &self,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Result<Option<DeviceTcsr>, MeshError> {
        let Some(c) = self.coop.as_deref() else {
            return Ok(None);
        };
        let ne = edge_vertices.len() / 2;
        // the result holds both ends of every edge
        if !Self::one_launch_fits(2 * ne, nvertices) {
            return Ok(None);
        }
        let input = TransposeInput {
            offsets: edge_vertices,
            columns: edge_vertices,
            nrows: ne,
            nnz: ne,
            mode: 3,
            k: 2,
        };
        let (t, w) = self.with_words(|words| {
            self.transpose_bucketed(c, &input, nvertices, false, Some(words), None)
        })?;
        let Some(mut t) = t.filter(|_| w[1] == 0) else {
            return Ok(None);
        };
        if w[0] != 0 {
            self.sort_all_rows(&mut t)?;
        }
        Ok(Some(t))
    }

    /// δ1's buckets for `nedges` canonical pairs of degrees `deg`, cut so that each bucket
    /// takes about the same time ([`EdgeBuckets`]). `None` where
    /// [`MeshKernels::transpose_cut_pairs`] cannot take the pairs: without the bucketed kernel,
    /// for a vertex of more than 2048 in-edges (a row the kernel would leave to the host), or
    /// past the kernel's limits.
    fn cut_canonical_pairs(
        &self,
        nedges: usize,
        deg: &PairDegrees,
    ) -> Result<Option<EdgeBuckets>, MeshError> {
        let nvertices = deg.nvertices();
        let Some(b) = self.coop.as_deref().and_then(|c| c.bucketed.as_ref()) else {
            return Ok(None);
        };
        // the columns' out-edge starts take BT_WMAX + 1 words of the placed entries' room
        if !Self::one_launch_fits(2 * nedges, nvertices) || (b.cap as usize) < 2 * (BT_WMAX + 1) {
            return Ok(None);
        }
        let ng = nvertices.div_ceil(EB_GROUP);
        let (indeg, e0) = (&deg.indeg, &deg.e0);
        if indeg.iter().any(|&d| d > EB_LONGEST_IN) {
            return Ok(None);
        }
        let mut weights = vec![0u64; ng];
        for v in 0..nvertices {
            let (i, o) = (indeg[v] as u64, (e0[v + 1] - e0[v]) as u64);
            weights[v / EB_GROUP] += edge_bucket_weight(i, o);
        }
        // one window of columns a bucket
        let max_groups = BT_WMAX / EB_GROUP;
        // at most one bucket a block (the kernel then gives block b bucket b): fewer parts
        // where the widest buckets' cap made more
        let mut parts = b.grid as usize;
        let groups = loop {
            let groups = balanced_cuts(&weights, parts, max_groups);
            let nb = groups.len() - 1;
            if nb <= b.grid as usize || parts == 1 {
                break groups;
            }
            parts -= (nb - b.grid as usize).min(parts - 1);
        };
        let nb = groups.len() - 1;
        if nb > BT_NBMAX || nb > u16::MAX as usize {
            return Ok(None);
        }
        // a multiple of 8 (the kernel loads it 16 bytes at a time)
        let mut cut_of = vec![0u16; ng.next_multiple_of(8)];
        for (q, r) in groups.windows(2).enumerate() {
            cut_of[r[0]..r[1]].fill(q as u16);
        }
        let cuts: Vec<u32> = groups
            .iter()
            .map(|&g| (g * EB_GROUP).min(nvertices) as u32)
            .collect();
        let widest = cuts.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(1);
        // phase 1 keeps both tables in shared memory beside its tile
        let reserve = (4 * (nb + 1).next_multiple_of(4) + 2 * cut_of.len()) as u32;
        let tile_max = (b.shared.saturating_sub(4 * BT_NBMAX as u32 + reserve) / 8).min(BT_TILEMAX)
            / BT_TILE_ALIGN
            * BT_TILE_ALIGN;
        if tile_max < 8 * BT_TILE_ALIGN {
            return Ok(None);
        }
        let Some((tile, nt)) = b.tiles(nedges, tile_max) else {
            return Ok(None);
        };
        let g = self.gpu;
        Ok(Some(EdgeBuckets {
            nvertices,
            nedges,
            cuts: g.upload(&cuts)?,
            cut_of: g.upload(&cut_of)?,
            e0: g.upload(e0)?,
            plan: BucketPlan {
                w: widest,
                nb: nb as u32,
                tile,
                nt,
            },
            grid: b.grid,
        }))
    }

    /// δ1 of canonical pairs by the buckets `cut` for them
    /// ([`MeshKernels::cut_canonical_pairs`]): one launch, no host synchronisation, no check.
    /// The caller vouches that `edge_vertices` holds the pairs the buckets were cut for (a
    /// [`DeviceMesh`] and the buckets it cut at upload; only their length is checked here);
    /// for other pairs the rows are unspecified. Kernels that cannot take the cut (another
    /// device, or no bucketed kernel) give the same result by
    /// [`MeshKernels::transpose_edge_pairs`].
    pub(crate) fn transpose_cut_pairs(
        &self,
        edge_vertices: &DeviceBuffer<u32>,
        cut: &EdgeBuckets,
    ) -> Result<DeviceTcsr, MeshError> {
        if edge_vertices.len() != 2 * cut.nedges {
            return Err(MeshError::InvalidTopology(format!(
                "δ1's buckets were cut for {} edges, not {}",
                cut.nedges,
                edge_vertices.len() / 2
            )));
        }
        if let Some(c) = self.coop.as_deref() {
            let input = TransposeInput {
                offsets: edge_vertices,
                columns: edge_vertices,
                nrows: cut.nedges,
                nnz: cut.nedges,
                mode: 3,
                k: 2,
            };
            if let Some(t) =
                self.transpose_bucketed(c, &input, cut.nvertices, false, None, Some(cut))?
            {
                return Ok(t);
            }
        }
        self.transpose_edge_pairs(edge_vertices, cut.nvertices)
    }

    /// δ2's buckets for the faces `fe` over the canonical pairs `ev` (the caller has checked
    /// them: [`canonical_pairs`]) of degrees `deg`, when the faces are canonical
    /// ([`FaceBuckets`]). `None` for faces that are not, without the kernel, or where one vertex's
    /// rows and faces do not fit a task (a block's shared memory, 2^15 rows).
    fn cut_canonical_faces(
        &self,
        ev: &[[u32; 2]],
        fe: &Tcsr,
        deg: &PairDegrees,
        second: &[u32],
    ) -> Result<Option<FaceBuckets>, MeshError> {
        let Some(k) = self.coop.as_deref().and_then(|c| c.face_runs.as_ref()) else {
            return Ok(None);
        };
        let (nvertices, ne, nf) = (deg.nvertices(), ev.len(), fe.nrows());
        if nf == 0 || 3 * nf as u64 >= u32::MAX as u64 {
            return Ok(None);
        }
        let e0 = &deg.e0;
        // the faces' position-0 edges are non-decreasing (the triples are)
        let rs = crate::simplex::first_vertex_offsets(
            ne,
            fe.columns()
                .iter()
                .step_by(3)
                .map(|&c| tessera_sparse::tcsr::col(c)),
        );
        // vertex v's own faces (v, x, y) are vf[v] .. vf[v + 1]
        let vf: Vec<u32> = e0.iter().map(|&e| rs[e as usize]).collect();
        // each vertex's load: its rows (out-edges), own faces, A faces and δ1 entries
        let mut load: Vec<FaceBucketLoad> = (0..nvertices)
            .map(|v| {
                let rows = (e0[v + 1] - e0[v]) as u64;
                FaceBucketLoad {
                    rows,
                    faces: (vf[v + 1] - vf[v]) as u64,
                    afaces: 0,
                    entries: rows + deg.indeg[v] as u64,
                }
            })
            .collect();
        // a face (a, b, c) is an A face of b's edge (b, c)
        for &b in second {
            load[b as usize].afaces += 1;
        }
        // tasks of a warp, a block's warps to a block, FR_WAVES waves of blocks; none larger than
        // a block: in the small shape's blocks where every vertex fits one, else in the large
        let pre = FaceBucketLoad::prefix(&load);
        let cut = |shape: &FaceRunsShape| {
            // the empty tasks that fill a block up to its warps take 8 bytes each
            let budget = (shape.shared as u64).saturating_sub(8 * shape.warps as u64);
            let fits = |l: &FaceBucketLoad| l.rows <= FB_ROWS && l.shared_bytes() <= budget;
            let parts = (FR_WAVES * shape.wave * shape.warps) as usize;
            let tasks = cut_face_tasks(&pre, parts, fits)?;
            // blocks: up to `warps` consecutive tasks within the budget
            let (btask, shared) = group_tasks(
                tasks
                    .windows(2)
                    .map(|r| pre[r[1]].minus(&pre[r[0]]).shared_bytes()),
                shape.warps as usize,
                budget,
            );
            Some((tasks, btask, shared + 8 * shape.warps as u64))
        };
        let Some((warps, (tasks, btask, shared))) = k
            .shapes()
            .find_map(|shape| Some((shape.warps, cut(shape)?)))
        else {
            return Ok(None);
        };
        // a task's first entry: each face before its first face is in the B and C parts of rows
        // before it, and each A face of a vertex before its first vertex in one of them
        let entry = |v: usize| {
            let first = 2 * vf[v] as u64 + pre[v].afaces;
            [v as u32, e0[v], vf[v], first as u32]
        };
        let wtab: Vec<u32> = task_slots(&tasks, &btask, warps)
            .into_iter()
            .flat_map(entry)
            .collect();
        let g = self.gpu;
        Ok(Some(FaceBuckets {
            nvertices,
            nedges: ne,
            nfaces: nf,
            wtab: g.upload(&wtab)?,
            rs: g.upload(&rs)?,
            nb: (btask.len() - 1) as u32,
            shared: shared as u32,
            warps,
        }))
    }

    /// δ2 of canonical faces by the buckets `cut` for them ([`MeshKernels::cut_canonical_faces`]),
    /// from their δ1 `vertex_edges`: one launch of a warp a task, no host synchronisation, no
    /// check. The caller vouches that `face_edges` and `vertex_edges` are the faces the buckets
    /// were cut for and their δ1 (a [`DeviceMesh`]; only their shapes are checked here); for
    /// others the rows are unspecified. Without the kernel, the result is the same by
    /// [`MeshKernels::transpose`].
    pub(crate) fn edge_faces_of_canonical(
        &self,
        face_edges: &DeviceTcsr,
        vertex_edges: &DeviceTcsr,
        cut: &FaceBuckets,
    ) -> Result<DeviceTcsr, MeshError> {
        if face_edges.nrows() != cut.nfaces
            || face_edges.nnz() != 3 * cut.nfaces
            || vertex_edges.nrows() != cut.nvertices
            || vertex_edges.nnz() != 2 * cut.nedges
        {
            return Err(MeshError::InvalidTopology(format!(
                "δ2's buckets were cut for {} faces over {} edges and {} vertices",
                cut.nfaces, cut.nedges, cut.nvertices
            )));
        }
        let Some(k) = self
            .coop
            .as_deref()
            .and_then(|c| c.face_runs.as_ref())
            .and_then(|k| k.shape(cut.warps))
            .filter(|k| k.shared >= cut.shared)
        else {
            return self.transpose(face_edges);
        };
        let g = self.gpu;
        let offsets = g.alloc::<u32>(cut.nedges + 1)?;
        let out = g.alloc::<i32>(3 * cut.nfaces)?;
        let (ne, nnz) = (cut.nedges as u32, 3 * cut.nfaces as u32);
        g.launch(
            &k.kernel,
            LaunchConfig::blocks(cut.nb, 32 * k.warps).with_shared(cut.shared),
        )
        .arg(&face_edges.columns)
        .arg(&vertex_edges.offsets)
        .arg(&vertex_edges.columns)
        .arg(&cut.rs)
        .arg(&cut.wtab)
        .arg(&cut.nb)
        .arg(&ne)
        .arg(&nnz)
        .arg(&offsets)
        .arg(&out)
        .run()?;
        Ok(DeviceTcsr::ragged(offsets, out, cut.nfaces))
    }

    /// [`MeshKernels::transpose_edge_pairs`] with no host synchronisation (rows of more than
    /// 2048 entries set `flag`, as [`MeshKernels::transpose_deferred`]).
    pub fn transpose_edge_pairs_deferred(
        &self,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
        flag: &dyn KernelArg,
    ) -> Result<DeviceTcsr, MeshError> {
        let g = self.gpu;
        let ne = edge_vertices.len() / 2;
        let input = TransposeInput {
            offsets: edge_vertices,
            columns: edge_vertices,
            nrows: ne,
            nnz: 2 * ne,
            mode: 2,
            k: 2,
        };
        if let Some(t) = self.transpose_one_launch(&input, nvertices, false, Some(flag))? {
            return Ok(t);
        }
        let counts = g.zeros::<u32>(nvertices)?;
        let nn = ne as u64;
        g.launch(&self.k("edge_count_vertices")?, Self::cfg(ne)?)
            .arg(edge_vertices)
            .arg(&nn)
            .arg(&counts)
            .run()?;
        let offsets = self.prims.exclusive_scan_with_total(&counts)?;
        let out = g.alloc::<i32>(2 * ne)?;
        g.launch(&self.k("edge_fill_transpose")?, Self::cfg(ne)?)
            .arg(edge_vertices)
            .arg(&nn)
            .arg(&offsets)
            .arg(&counts)
            .arg(&out)
            .run()?;
        self.sort_rows_deferred(&out, &offsets, flag)?;
        Ok(DeviceTcsr::ragged(offsets, out, ne))
    }

    /// Finish a count -> scan -> fill relation whose rows may have shrunk (`written` per
    /// row): compaction only when some row did (as `relations::build_rows`).
    fn finish_rows(
        &self,
        offsets: DeviceBuffer<u32>,
        cols: DeviceBuffer<i32>,
        written: &DeviceBuffer<u32>,
        ncols: usize,
    ) -> Result<DeviceTcsr, MeshError> {
        let total = self.prims.reduce_sum_u32(written)?;
        if total == cols.len() as u64 {
            return Ok(DeviceTcsr::ragged(offsets, cols, ncols));
        }
        let new_offsets = self.prims.offsets_from_counts(written)?;
        let out = self.gpu.alloc::<i32>(total as usize)?;
        let nrows = (offsets.len() - 1) as u64;
        self.gpu
            .launch(&self.k("compact_rows")?, Self::cfg(nrows as usize)?)
            .arg(&offsets)
            .arg(&cols)
            .arg(&new_offsets)
            .arg(&nrows)
            .arg(&out)
            .run()?;
        Ok(DeviceTcsr::ragged(new_offsets, out, ncols))
    }

    /// ∂̂2¹: face -> ordered vertex loop. Faces of 3 or 4 edges each (uniform ∂2 rows): one
    /// kernel that also writes the offsets ([`MeshKernels::face_vertices_deferred`]), then one
    /// host synchronisation for its flag; the general path when it is set.
    pub fn face_vertices(
        &self,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Result<DeviceTcsr, MeshError> {
        if Self::uniform_face_kernel(fe).is_some() {
            let (r, raised) =
                self.with_flag(|f| self.face_vertices_deferred(fe, edge_vertices, nvertices, f))?;
            if !raised {
                return Ok(r);
            }
        }
        self.face_vertices_general(fe, edge_vertices, nvertices)
    }

    /// The kernel for faces of one length (3 or 4 edges), when ∂2's rows are uniform.
    fn uniform_face_kernel(fe: &DeviceTcsr) -> Option<&'static str> {
        match fe.uniform {
            Some(3) if fe.nnz() == 3 * fe.nrows() => Some("face_vertices_3"),
            Some(4) if fe.nnz() == 4 * fe.nrows() => Some("face_vertices_4"),
            _ => None,
        }
    }

    /// ∂̂2¹ with no host synchronisation: any face whose loop does not close (or a row not in
    /// loop order of more than 512 edges) sets `flag`, and the result must then be discarded.
    pub fn face_vertices_deferred(
        &self,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
        flag: &dyn KernelArg,
    ) -> Result<DeviceTcsr, MeshError> {
        let g = self.gpu;
        let nf = fe.nrows();
        let out = g.alloc::<i32>(fe.nnz())?;
        let n = nf as u64;
        if let Some(kernel) = Self::uniform_face_kernel(fe) {
            let offsets = g.alloc::<u32>(nf + 1)?;
            g.launch(&self.k(kernel)?, Self::cfg(nf + 1)?)
                .arg(&fe.columns)
                .arg(edge_vertices)
                .arg(&n)
                .arg(&offsets)
                .arg(&out)
                .arg(flag)
                .run()?;
            return Ok(DeviceTcsr {
                offsets,
                columns: out,
                ncols: nvertices,
                uniform: fe.uniform,
            });
        }
        self.face_vertices_fill(fe, edge_vertices, &out, flag)?;
        Ok(DeviceTcsr {
            offsets: g.duplicate(&fe.offsets)?,
            columns: out,
            ncols: nvertices,
            uniform: fe.uniform,
        })
    }

    /// `face_vertices_fill` into `out` (∂2's offsets, one thread per face); returns the
    /// entries written per face (fewer than the row where its loop did not close).
    fn face_vertices_fill(
        &self,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        out: &DeviceBuffer<i32>,
        err: &dyn KernelArg,
    ) -> Result<DeviceBuffer<u32>, MeshError> {
        let nf = fe.nrows();
        let written = self.gpu.alloc::<u32>(nf)?;
        let n = nf as u64;
        self.gpu
            .launch(&self.k("face_vertices_fill")?, Self::cfg(nf)?)
            .arg(&fe.offsets)
            .arg(&fe.columns)
            .arg(edge_vertices)
            .arg(&n)
            .arg(out)
            .arg(&written)
            .arg(err)
            .run()?;
        Ok(written)
    }

    /// ∂̂2¹ for any rows: one thread per face, loop order (chained when rows are out of order),
    /// compaction when some loop did not close.
    fn face_vertices_general(
        &self,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Result<DeviceTcsr, MeshError> {
        let g = self.gpu;
        let out = g.alloc::<i32>(fe.nnz())?;
        let err = g.zeros::<u32>(1)?;
        let written = self.face_vertices_fill(fe, edge_vertices, &out, &err)?;
        let offsets = g.duplicate(&fe.offsets)?;
        let e = g.download_at(&err, 0)?;
        if e & 1 != 0 {
            return Err(MeshError::Unsupported(
                "GPU face vertices: a face of more than 512 edges whose ∂2 row is not in loop order".into(),
            ));
        }
        if e & 2 != 0 {
            // some loop did not close: compact the shortened rows
            return self.finish_rows(offsets, out, &written, nvertices);
        }
        Ok(DeviceTcsr {
            offsets,
            columns: out,
            ncols: nvertices,
            uniform: fe.uniform,
        })
    }

    /// Shared tail of cell edges and cell vertices: sort rows, dedup, compact.
    fn sort_dedup(
        &self,
        offsets: DeviceBuffer<u32>,
        mut cols: DeviceBuffer<i32>,
        ncols: usize,
    ) -> Result<DeviceTcsr, MeshError> {
        self.prims
            .segmented_sort(&mut cols, &offsets, SegOrder::Signed)?;
        let nrows = offsets.len() - 1;
        let written = self.gpu.alloc::<u32>(nrows)?;
        let n = nrows as u64;
        self.gpu
            .launch(&self.k("dedup_rows")?, Self::cfg(nrows)?)
            .arg(&offsets)
            .arg(&cols)
            .arg(&n)
            .arg(&written)
            .run()?;
        self.finish_rows(offsets, cols, &written, ncols)
    }

    /// The shape of every cell when the row lengths of ∂3 and ∂2 are uniform and name one of
    /// the shapes with a register kernel: `(kernel suffix, faces per cell, edges per face)`.
    fn uniform_shape(cf: &DeviceTcsr, fe: &DeviceTcsr) -> Option<(&'static str, u32, u32)> {
        match (cf.uniform, fe.uniform) {
            (Some(4), Some(3)) => Some(("4x3", 4, 3)),
            (Some(6), Some(4)) => Some(("6x4", 6, 4)),
            _ => None,
        }
    }

    /// The result of `launch` (a uniform-shape launch given a zeroed flag, which it sets for
    /// a cell that is not closed) once the flag is read (one host synchronisation): `None`
    /// when nothing was launched or some cell was not closed (the caller takes the general
    /// path).
    fn unless_flagged(
        &self,
        launch: impl FnOnce(&dyn KernelArg) -> Result<Option<DeviceTcsr>, MeshError>,
    ) -> Result<Option<DeviceTcsr>, MeshError> {
        let (r, raised) = self.with_flag(launch)?;
        Ok(if raised { None } else { r })
    }

    /// ∂̂3¹ of cells of one shape by the register kernel ([`MeshKernels::uniform_cell_rows`]),
    /// or `None` for other meshes (nothing launched).
    fn uniform_cell_edges(
        &self,
        cf: &DeviceTcsr,
        fe: &DeviceTcsr,
        bad: &dyn KernelArg,
    ) -> Result<Option<DeviceTcsr>, MeshError> {
        let Some((name, k, m)) = Self::uniform_shape(cf, fe) else {
            return Ok(None);
        };
        let kernel = format!("cell_edges_{name}");
        self.uniform_cell_rows(&kernel, cf, fe, None, k * m / 2, fe.ncols, Some(bad))
    }

    /// ∂̂3² of cells of one shape by the register kernel ([`MeshKernels::uniform_cell_rows`]),
    /// or `None` for other meshes (nothing launched).
    fn uniform_cell_vertices(
        &self,
        cf: &DeviceTcsr,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
        bad: &dyn KernelArg,
    ) -> Result<Option<DeviceTcsr>, MeshError> {
        let Some((name, k, m)) = Self::uniform_shape(cf, fe) else {
            return Ok(None);
        };
        let kernel = format!("cell_vertices_{name}");
        let row = 2 + k * (m - 2) / 2;
        self.uniform_cell_rows(
            &kernel,
            cf,
            fe,
            Some(edge_vertices),
            row,
            nvertices,
            Some(bad),
        )
    }

    /// Cell edges or vertices of cells of one shape (tetrahedra, hexahedra): one thread per
    /// cell gathers its `K M` entries, sorts them in registers and writes the `row` distinct
    /// ones at a fixed stride (no count, scan, sort or compaction pass). A cell with another
    /// number of distinct entries (not closed) sets `bad` (its row is padded with 0; the
    /// result must then be discarded); kernels for cells known closed take no `bad`.
    /// `None` when the sizes exceed the 32-bit limits (nothing launched).
    #[allow(clippy::too_many_arguments)]
    fn uniform_cell_rows(
        &self,
        kernel: &str,
        cf: &DeviceTcsr,
        fe: &DeviceTcsr,
        edge_vertices: Option<&DeviceBuffer<u32>>,
        row: u32,
        ncols: usize,
        bad: Option<&dyn KernelArg>,
    ) -> Result<Option<DeviceTcsr>, MeshError> {
        let g = self.gpu;
        let nc = cf.nrows();
        if row as u64 * nc as u64 > u32::MAX as u64 || ncols >= i32::MAX as usize {
            return Ok(None);
        }
        let offsets = g.alloc::<u32>(nc + 1)?;
        let out = g.alloc::<i32>(row as usize * nc)?;
        let n = nc as u64;
        let k = self.k(kernel)?;
        let mut l = g
            .launch(&k, Self::cfg(nc + 1)?)
            .arg(&cf.columns)
            .arg(&fe.columns);
        if let Some(ev) = edge_vertices {
            l = l.arg(ev);
        }
        l = l.arg(&n).arg(&offsets).arg(&out);
        if let Some(b) = bad {
            l = l.arg(b);
        }
        l.run()?;
        Ok(Some(DeviceTcsr {
            offsets,
            columns: out,
            ncols,
            uniform: Some(row),
        }))
    }

    /// ∂̂3¹ with no host synchronisation for cells of one shape (tetrahedra, hexahedra): a
    /// cell that is not closed sets `flag` and the result must be discarded. Other meshes
    /// take [`MeshKernels::cell_edges`] (with its synchronisations; `flag` stays as it is).
    pub fn cell_edges_deferred(
        &self,
        cf: &DeviceTcsr,
        fe: &DeviceTcsr,
        flag: &dyn KernelArg,
    ) -> Result<DeviceTcsr, MeshError> {
        if let Some(r) = self.uniform_cell_edges(cf, fe, flag)? {
            return Ok(r);
        }
        self.cell_edges(cf, fe)
    }

    /// ∂̂3² with no host synchronisation for cells of one shape (see
    /// [`MeshKernels::cell_edges_deferred`]).
    pub fn cell_vertices_deferred(
        &self,
        cf: &DeviceTcsr,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
        flag: &dyn KernelArg,
    ) -> Result<DeviceTcsr, MeshError> {
        if let Some(r) = self.uniform_cell_vertices(cf, fe, edge_vertices, nvertices, flag)? {
            return Ok(r);
        }
        self.cell_vertices(cf, fe, edge_vertices, nvertices)
    }

    /// ∂̂3¹: cell -> its edges, sorted.
    pub fn cell_edges(&self, cf: &DeviceTcsr, fe: &DeviceTcsr) -> Result<DeviceTcsr, MeshError> {
        if Self::uniform_shape(cf, fe).is_some() {
            if let Some(r) = self.unless_flagged(|bad| self.uniform_cell_edges(cf, fe, bad))? {
                return Ok(r);
            }
        }
        let g = self.gpu;
        let nc = cf.nrows();
        let counts = g.alloc::<u32>(nc)?;
        let n = nc as u64;
        g.launch(&self.k("cell_edges_count")?, Self::cfg(nc)?)
            .arg(&cf.offsets)
            .arg(&cf.columns)
            .arg(&fe.offsets)
            .arg(&fe.columns)
            .arg(&n)
            .arg(&counts)
            .run()?;
        let offsets = self.prims.offsets_from_counts(&counts)?;
        let total = g.download_at(&offsets, nc)? as usize;
        let out = g.alloc::<i32>(total)?;
        g.launch(&self.k("cell_edges_fill")?, Self::cfg(nc)?)
            .arg(&cf.offsets)
            .arg(&cf.columns)
            .arg(&fe.offsets)
            .arg(&fe.columns)
            .arg(&n)
            .arg(&offsets)
            .arg(&out)
            .run()?;
        self.sort_dedup(offsets, out, fe.ncols)
    }

    /// ∂̂3² of tetrahedra known closed ([`PolyMesh::cells_known_closed`]): one thread per
    /// cell reads two face rows and three edges (the first face's vertices from two of its
    /// edges, the fourth from an edge of the second face that the first lacks) and writes its
    /// four sorted vertices; no check, no flag, no host read. `None` (nothing launched) when
    /// the cells are not all four triangles or the sizes exceed the 32-bit limits.
    ///
    /// The caller vouches that every cell is closed (a [`DeviceMesh`] uploaded from a mesh
    /// known closed); on open cells the rows are unspecified (every read stays in range).
    pub(crate) fn cell_vertices_of_closed_tets(
        &self,
        cf: &DeviceTcsr,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Result<Option<DeviceTcsr>, MeshError> {
        if !matches!(Self::uniform_shape(cf, fe), Some((_, 4, 3))) {
            return Ok(None);
        }
        let k = "cell_vertices_closed_4x3";
        self.uniform_cell_rows(k, cf, fe, Some(edge_vertices), 4, nvertices, None)
    }

    /// ∂̂3²: cell -> its vertices, sorted (dissertation §3.4.1: sort, mark duplicates, compact).
    pub fn cell_vertices(
        &self,
        cf: &DeviceTcsr,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Result<DeviceTcsr, MeshError> {
        if Self::uniform_shape(cf, fe).is_some() {
            if let Some(r) = self.unless_flagged(|bad| {
                self.uniform_cell_vertices(cf, fe, edge_vertices, nvertices, bad)
            })? {
                return Ok(r);
            }
        }
        let g = self.gpu;
        let nc = cf.nrows();
        let counts = g.alloc::<u32>(nc)?;
        let n = nc as u64;
        g.launch(&self.k("cell_vertices_count")?, Self::cfg(nc)?)
            .arg(&cf.offsets)
            .arg(&cf.columns)
            .arg(&fe.offsets)
            .arg(&n)
            .arg(&counts)
            .run()?;
        let offsets = self.prims.offsets_from_counts(&counts)?;
        let total = g.download_at(&offsets, nc)? as usize;
        let out = g.alloc::<i32>(total)?;
        g.launch(&self.k("cell_vertices_fill")?, Self::cfg(nc)?)
            .arg(&cf.offsets)
            .arg(&cf.columns)
            .arg(&fe.offsets)
            .arg(&fe.columns)
            .arg(edge_vertices)
            .arg(&n)
            .arg(&offsets)
            .arg(&out)
            .run()?;
        self.sort_dedup(offsets, out, nvertices)
    }

    /// Boundary extraction (dissertation §3.4.2) from δ3 (`fc`), ∂2 and ∂1, with the lists'
    /// lengths read on the host ([`MeshKernels::boundary_enqueue`] leaves them on the device).
    /// With the one-launch kernel the host waits for the launch's mark that the lengths are
    /// final, not for its end ([`Gpu::wait_word`]): the lists' last writes may still be running
    /// when this returns, ordered before any later work on the device's stream (downloads
    /// included); an error of the launch's later part surfaces at the next synchronisation.
    /// Without it, one host synchronisation.
    pub fn boundary(
        &self,
        fc: &DeviceTcsr,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Result<DeviceBoundary, MeshError> {
        self.boundary_of(&BoundaryInput::any_faces(fc, fe, edge_vertices, nvertices))
    }

    /// [`MeshKernels::boundary`], of faces known canonical or not ([`BoundaryInput`]).
    fn boundary_of(&self, inp: &BoundaryInput) -> Result<DeviceBoundary, MeshError> {
        inp.check()?;
        if let Some(c) = self.coop.as_deref() {
            // the lengths and the non-manifold flag land in mapped host words (no download),
            // read as soon as the launch marks them final
            let (lists, t) = self.with_words_until(true, |totals, done| {
                self.boundary_one_launch(c, inp, totals, done)
            })?;
            return lists.fitted(self.gpu, t);
        }
        let m = self.boundary_marks(inp.fc, inp.fe, inp.edge_vertices, inp.nvertices)?;
        self.boundary_from_marks(m)
    }

    /// [`MeshKernels::boundary`] enqueued with no host synchronisation: the three lists in
    /// buffers of their largest lengths (2 nf, ne, nv) and their lengths in device memory,
    /// as CUB's selections leave their counts, for kernels that follow on the stream;
    /// [`PendingBoundary::finish`] reads them. Without cooperative launches (the chains of
    /// separate launches) the extraction reads its lengths on the host before it returns.
    pub fn boundary_enqueue(
        &self,
        fc: &DeviceTcsr,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Result<PendingBoundary, MeshError> {
        self.boundary_enqueue_of(&BoundaryInput::any_faces(fc, fe, edge_vertices, nvertices))
    }

    /// [`MeshKernels::boundary_enqueue`], of faces known canonical or not ([`BoundaryInput`]).
    fn boundary_enqueue_of(&self, inp: &BoundaryInput) -> Result<PendingBoundary, MeshError> {
        let g = self.gpu;
        let Some(c) = self.coop.as_deref() else {
            let b = self.boundary_of(inp)?;
            let lengths = g.upload(&[
                b.faces.len() as u32,
                b.edges.len() as u32,
                b.vertices.len() as u32,
                u32::from(!b.manifold),
            ])?;
            return Ok(PendingBoundary {
                lists: BoundaryLists {
                    faces: b.faces,
                    edges: b.edges,
                    vertices: b.vertices,
                },
                lengths,
            });
        };
        inp.check()?;
        // every word of `lengths` is written by the launch: nothing to clear
        let lengths = g.alloc::<u32>(4)?;
        let lists = self.boundary_one_launch(c, inp, &lengths, 0)?;
        Ok(PendingBoundary { lists, lengths })
    }

    /// One cooperative launch of `boundary_coop` (the faces' flags and the marks of the edges
    /// and vertices of boundary faces; one grid barrier; the three lists, their prefixes by
    /// look-back), enqueued with no host synchronisation: the lists in buffers of their
    /// largest lengths, their lengths and the non-manifold flag written to the four words
    /// `totals`.
    fn boundary_one_launch(
        &self,
        c: &CoopChains,
        inp: &BoundaryInput,
        totals: &dyn tessera_gpu::KernelArg,
        done: u64,
    ) -> Result<BoundaryLists, MeshError> {
        let g = self.gpu;
        let &BoundaryInput {
            fc,
            fe,
            edge_vertices,
            nvertices,
            canonical,
        } = inp;
        let (nf, ne) = (fc.nrows(), fe.ncols);
        half_faces_fit(nf)?;
        let cap = c
            .boundary_grid_cap
            .load(std::sync::atomic::Ordering::Relaxed);
        let max = if cap == 0 {
            c.grid_boundary
        } else {
            cap.min(c.grid_boundary)
        };
        let grid = CoopChains::grid(max, nf.max(ne).max(nvertices));
        // the kernel keeps the faces' flags in registers where each warp's run of faces
        // (`grid_warp_run` in mesh.cu: a block's share cut into one run per warp; this is its
        // longest run) is at most 32 faces a lane, and needs the flags' scratch only otherwise
        let warps = (BLOCK / 32) as usize;
        let flags_in_regs = nf.div_ceil(grid as usize).div_ceil(warps) <= 32 * 32;
        let flags = g.alloc::<u32>(if flags_in_regs { 1 } else { nf })?;
        // held while the launch is enqueued: launches on the one stream then run in the order
        // of their stamps, and buffers the marks replace go back to the pool in stream order
        let mut marks = c.marks.lock().unwrap_or_else(|p| p.into_inner());
        let m = marks.next(g, ne, nvertices, grid)?;
        let faces = g.alloc::<i32>(2 * nf)?;
        let edges = g.alloc::<u32>(ne)?;
        let vertices = g.alloc::<u32>(nvertices)?;
        let (nf64, ne64, nv64) = (nf as u64, ne as u64, nvertices as u64);
        // faces of 3 or 4 edges each: their ∂2 rows are read without their offsets
        let fe_k = fe
            .row_len()
            .filter(|&k| matches!(k, 3 | 4) && fe.nrows() == nf)
            .unwrap_or(0);
        let canon = u32::from(canonical && fe_k == 3);
        c.last_grid
            .store(grid, std::sync::atomic::Ordering::Relaxed);
        g.launch(&c.boundary, LaunchConfig::blocks(grid, BLOCK))
            .arg(&fc.offsets)
            .arg(&fc.columns)
            .arg(&nf64)
            .arg(&fe.offsets)
            .arg(&fe.columns)
            .arg(edge_vertices)
            .arg(&fe_k)
            .arg(&canon)
            .arg(&ne64)
            .arg(&nv64)
            .arg(&flags)
            .arg(m.emark)
            .arg(m.vmark)
            .arg(&c.sync)
            .arg(m.lookback)
            .arg(&faces)
            .arg(&edges)
            .arg(&vertices)
            .arg(totals)
            .arg(&done)
            .arg(&m.stamp)
            .run_cooperative()?;
        Ok(BoundaryLists {
            faces,
            edges,
            vertices,
        })
    }

    /// The 0/1 mark of every vertex (1 on the boundary, as the vertices of
    /// [`MeshKernels::boundary`]), enqueued with no host synchronisation: the fixed vertices
    /// of the smoothing steps.
    pub fn boundary_vertex_marks(
        &self,
        fc: &DeviceTcsr,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Result<DeviceBuffer<u32>, MeshError> {
        let inp = BoundaryInput::any_faces(fc, fe, edge_vertices, nvertices);
        self.stencil(&inp, None)
    }

    /// The Laplacian smoothing's stencil (dissertation §3.4.2): the boundary vertex marks of
    /// [`MeshKernels::boundary_vertex_marks`] (the fixed vertices) and the other end of every
    /// entry of δ1 (`vertex_edges`), the neighbour each step reads, in one launch after the
    /// marks' memset; no host synchronisation.
    pub fn smoothing_stencil(
        &self,
        fc: &DeviceTcsr,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
        vertex_edges: &DeviceTcsr,
    ) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>), MeshError> {
        let inp = BoundaryInput::any_faces(fc, fe, edge_vertices, nvertices);
        if vertex_edges.nrows() != nvertices || vertex_edges.ncols != fe.ncols {
            return Err(MeshError::Gpu(GpuError::InvalidArgument(format!(
                "smoothing stencil: δ1 of {} vertices and {} edges, for {nvertices} vertices and {} edges",
                vertex_edges.nrows(),
                vertex_edges.ncols,
                fe.ncols
            ))));
        }
        let nbr = self.gpu.alloc::<u32>(vertex_edges.nnz())?;
        let fixed = self.stencil(&inp, Some((vertex_edges, &nbr)))?;
        Ok((fixed, nbr))
    }

    /// `smoothing_stencil` in mesh.cu: the vertex marks, returned, and where δ1 is given with
    /// a buffer of its entries, their neighbours written into that buffer.
    fn stencil(
        &self,
        inp: &BoundaryInput,
        neighbours: Option<(&DeviceTcsr, &DeviceBuffer<u32>)>,
    ) -> Result<DeviceBuffer<u32>, MeshError> {
        inp.check()?;
        let g = self.gpu;
        let nf = inp.fc.nrows();
        let vmark = g.zeros::<u32>(inp.nvertices)?;
        let nnz = neighbours.map_or(0, |(ve, _)| ve.nnz());
        let (nf64, nnz64) = (nf as u64, nnz as u64);
        g.launch(&self.k("smoothing_stencil")?, Self::cfg(nf + nnz)?)
            .arg(&inp.fc.offsets)
            .arg(&inp.fc.columns)
            .arg(&nf64)
            .arg(&inp.fe.offsets)
            .arg(&inp.fe.columns)
            .arg(inp.edge_vertices)
            .arg(&vmark)
            // without δ1 no thread reads or writes these two (nnz = 0)
            .arg(neighbours.map_or(&inp.fe.columns, |(ve, _)| &ve.columns))
            .arg(&nnz64)
            .arg(neighbours.map_or(&vmark, |(_, nbr)| nbr))
            .run()?;
        Ok(vmark)
    }

    /// Face flags (boundary sides, non-manifold), their half-face counts, and the marks of
    /// the edges and vertices of boundary faces; no host synchronisation.
    fn boundary_marks(
        &self,
        fc: &DeviceTcsr,
        fe: &DeviceTcsr,
        edge_vertices: &DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Result<BoundaryMarks, MeshError> {
        let g = self.gpu;
        let nf = fc.nrows();
        let ne = fe.ncols;
        half_faces_fit(nf)?;
        let flags = g.alloc::<u32>(nf)?;
        let nhalf = g.alloc::<u32>(nf)?;
        let nonmanifold = g.zeros::<u32>(1)?;
        let n = nf as u64;
        g.launch(&self.k("boundary_face_flags")?, Self::cfg(nf)?)
            .arg(&fc.offsets)
            .arg(&fc.columns)
            .arg(&n)
            .arg(&flags)
            .arg(&nhalf)
            .arg(&nonmanifold)
            .run()?;
        let emark = g.zeros::<u32>(ne)?;
        let vmark = g.zeros::<u32>(nvertices)?;
        g.launch(&self.k("boundary_mark")?, Self::cfg(nf)?)
            .arg(&flags)
            .arg(&fe.offsets)
            .arg(&fe.columns)
            .arg(edge_vertices)
            .arg(&n)
            .arg(&emark)
            .arg(&vmark)
            .run()?;
        Ok(BoundaryMarks {
            flags,
            nhalf,
            nonmanifold,
            emark,
            vmark,
        })
    }

    /// Positions (scans), totals (one synchronisation) and the three lists from the marks.
    fn boundary_from_marks(&self, m: BoundaryMarks) -> Result<DeviceBoundary, MeshError> {
        let g = self.gpu;
        let BoundaryMarks {
            flags,
            nhalf,
            nonmanifold,
            emark,
            vmark,
        } = m;
        let (nf, ne, nvertices) = (flags.len(), emark.len(), vmark.len());
        let n = nf as u64;
        let pos = self.prims.exclusive_scan_with_total(&nhalf)?;
        let epos = self.prims.exclusive_scan_with_total(&emark)?;
        let vpos = self.prims.exclusive_scan_with_total(&vmark)?;
        let totals = g.alloc::<u32>(4)?;
        let (ne64, nv64) = (ne as u64, nvertices as u64);
        g.launch(&self.k("boundary_totals")?, LaunchConfig::blocks(1, 32))
            .arg(&pos)
            .arg(&n)
            .arg(&epos)
            .arg(&ne64)
            .arg(&vpos)
            .arg(&nv64)
            .arg(&nonmanifold)
            .arg(&totals)
            .run()?;
        let t = g.download(&totals)?;
        let faces = g.alloc::<i32>(t[0] as usize)?;
        g.launch(&self.k("boundary_faces_fill")?, Self::cfg(nf)?)
            .arg(&flags)
            .arg(&pos)
            .arg(&n)
            .arg(&faces)
            .run()?;
        let edges = g.alloc::<u32>(t[1] as usize)?;
        g.launch(&self.k("mark_scatter")?, Self::cfg(ne)?)
            .arg(&emark)
            .arg(&epos)
            .arg(&ne64)
            .arg(&edges)
            .run()?;
        let vertices = g.alloc::<u32>(t[2] as usize)?;
        g.launch(&self.k("mark_scatter")?, Self::cfg(nvertices)?)
            .arg(&vmark)
            .arg(&vpos)
            .arg(&nv64)
            .arg(&vertices)
            .run()?;
        Ok(DeviceBoundary {
            faces,
            edges,
            vertices,
            manifold: t[3] == 0,
        })
    }
}

/// What a boundary extraction reads: δ3 (`fc`), ∂2 (`fe`), ∂1 (`edge_vertices`), the vertex
/// count, and whether the faces are known canonical (every row of ∂2 the loop (a,b), (b,c),
/// (a,c) of a triple a < b < c over edges from < to, as [`FaceBuckets`] checks them).
struct BoundaryInput<'a> {
    fc: &'a DeviceTcsr,
    fe: &'a DeviceTcsr,
    edge_vertices: &'a DeviceBuffer<u32>,
    nvertices: usize,
    canonical: bool,
}

impl<'a> BoundaryInput<'a> {
    /// Faces not known canonical.
    fn any_faces(
        fc: &'a DeviceTcsr,
        fe: &'a DeviceTcsr,
        edge_vertices: &'a DeviceBuffer<u32>,
        nvertices: usize,
    ) -> Self {
        BoundaryInput {
            fc,
            fe,
            edge_vertices,
            nvertices,
            canonical: false,
        }
    }

    /// δ3, ∂2 and ∂1 of one mesh: a row of δ3 for every row of ∂2, a vertex pair for every
    /// column of ∂2 (else the kernels would read past the operators).
    fn check(&self) -> Result<(), MeshError> {
        if self.fc.nrows() != self.fe.nrows() || self.edge_vertices.len() != 2 * self.fe.ncols {
            return Err(MeshError::Gpu(GpuError::InvalidArgument(format!(
                "boundary: δ3 of {} faces, ∂2 of {} faces and {} edges, {} edge-vertex words",
                self.fc.nrows(),
                self.fe.nrows(),
                self.fe.ncols,
                self.edge_vertices.len()
            ))));
        }
        Ok(())
    }
}

/// The boundary kernels address half-faces (two per face) with 32-bit positions.
fn half_faces_fit(nf: usize) -> Result<(), MeshError> {
    if 2 * nf as u64 > u32::MAX as u64 {
        return Err(MeshError::Unsupported(format!(
            "GPU boundary: {nf} faces exceed 32-bit half-face positions"
        )));
    }
    Ok(())
}

/// The marks [`MeshKernels::boundary`] scans (see `boundary_marks`).
struct BoundaryMarks {
    flags: DeviceBuffer<u32>,
    nhalf: DeviceBuffer<u32>,
    nonmanifold: DeviceBuffer<u32>,
    emark: DeviceBuffer<u32>,
    vmark: DeviceBuffer<u32>,
}

/// A polyhedral mesh in device memory with derived relations cached on the device.
pub struct DeviceMesh<'g> {
    kernels: MeshKernels<'g>,
    nvertices: usize,
    edge_vertices: DeviceBuffer<u32>,
    face_edges: DeviceTcsr,
    cell_faces: DeviceTcsr,
    positions: DeviceBuffer<f64>,
    cache: DeviceRelations,
    /// The host mesh's cells were known closed at upload ([`PolyMesh::cells_known_closed`]).
    cells_closed: bool,
    /// Whether δ1 tries the canonical transpose first ([`MeshKernels::transpose_edge_pairs`]):
    /// false when the host found the edges not canonical at upload.
    try_canonical_edges: bool,
    /// δ1's buckets, cut at upload for edges found canonical there
    /// ([`EdgeBuckets`]; then δ1 reads no flag).
    edge_buckets: Option<EdgeBuckets>,
    /// δ2's buckets, cut at upload for faces found canonical there ([`FaceBuckets`]; then δ2
    /// is read off δ1 and the faces' runs).
    face_buckets: Option<FaceBuckets>,
    /// The faces were found canonical at upload ([`canonical_faces`]; looked for only with
    /// the one-launch kernels, which read it): the boundary's marks read two vertex pairs a
    /// face, with or without δ2's buckets.
    faces_canonical: bool,
}

macro_rules! require {
    ($(#[$doc:meta])* $name:ident, $req:ident, |$s:ident| $compute:expr) => {
        $(#[$doc])*
        pub fn $name(&mut self) -> Result<&DeviceTcsr, MeshError> {
            self.$req()?;
            Ok(self.cache.$name.as_ref().expect("computed above"))
        }
        /// Compute and cache the relation on the device if it is not cached yet.
        pub fn $req(&mut self) -> Result<(), MeshError> {
            if self.cache.$name.is_none() {
                let $s = &mut *self;
                let r = $compute;
                self.cache.$name = Some(r);
            }
            Ok(())
        }
    };
}

impl<'g> DeviceMesh<'g> {
    /// Upload the stored operators and positions of `mesh` (caches of the host mesh are not
    /// uploaded; the device computes its own).
    pub fn upload(gpu: &'g Gpu, mesh: &PolyMesh) -> Result<Self, MeshError> {
        let kernels = MeshKernels::new(gpu)?;
        let ev: Vec<u32> = mesh.edge_vertices().iter().flat_map(|p| *p).collect();
        let pos: Vec<f64> = mesh.positions().iter().flat_map(|p| *p).collect();
        let canonical = canonical_pairs(mesh.edge_vertices());
        // every face's second vertex where the faces are canonical too
        let second = if canonical && kernels.one_launch_chains() {
            canonical_faces(mesh.edge_vertices(), mesh.face_edges())
        } else {
            None
        };
        let (edge_buckets, face_buckets) = if canonical {
            let deg = PairDegrees::of(mesh.edge_vertices(), mesh.num_vertices())?;
            let faces = match &second {
                Some(second) => kernels.cut_canonical_faces(
                    mesh.edge_vertices(),
                    mesh.face_edges(),
                    &deg,
                    second,
                )?,
                None => None,
            };
            (kernels.cut_canonical_pairs(mesh.num_edges(), &deg)?, faces)
        } else {
            (None, None)
        };
        Ok(DeviceMesh {
            nvertices: mesh.num_vertices(),
            edge_vertices: gpu.upload(&ev)?,
            face_edges: DeviceTcsr::upload(gpu, mesh.face_edges())?,
            cell_faces: DeviceTcsr::upload(gpu, mesh.cell_faces())?,
            positions: gpu.upload(&pos)?,
            cache: DeviceRelations::default(),
            cells_closed: mesh.cells_known_closed(),
            try_canonical_edges: canonical,
            edge_buckets,
            face_buckets,
            faces_canonical: second.is_some(),
            kernels,
        })
    }

    /// The device.
    pub fn gpu(&self) -> &'g Gpu {
        self.kernels.gpu
    }
    /// The kernels (for timing single operations without caching).
    pub fn kernels(&self) -> &MeshKernels<'g> {
        &self.kernels
    }
    pub fn num_vertices(&self) -> usize {
        self.nvertices
    }
    pub fn num_edges(&self) -> usize {
        self.edge_vertices.len() / 2
    }
    pub fn num_faces(&self) -> usize {
        self.face_edges.nrows()
    }
    pub fn num_cells(&self) -> usize {
        self.cell_faces.nrows()
    }
    /// ∂1 as interleaved `(from, to)` pairs.
    pub fn edge_vertices(&self) -> &DeviceBuffer<u32> {
        &self.edge_vertices
    }
    /// ∂2 (faces x edges).
    pub fn face_edges(&self) -> &DeviceTcsr {
        &self.face_edges
    }
    /// ∂3 (cells x faces).
    pub fn cell_faces(&self) -> &DeviceTcsr {
        &self.cell_faces
    }
    /// Positions, xyz-interleaved.
    pub fn positions(&self) -> &DeviceBuffer<f64> {
        &self.positions
    }
    /// Names of the relations cached on the device.
    pub fn cached(&self) -> Vec<&'static str> {
        let c = &self.cache;
        [
            ("vertex_edges", c.vertex_edges.is_some()),
            ("edge_faces", c.edge_faces.is_some()),
            ("face_cells", c.face_cells.is_some()),
            ("face_vertices", c.face_vertices.is_some()),
            ("cell_edges", c.cell_edges.is_some()),
            ("cell_vertices", c.cell_vertices.is_some()),
            ("smoothing_stencil", c.smoothing_stencil.is_some()),
        ]
        .into_iter()
        .filter(|x| x.1)
        .map(|x| x.0)
        .collect()
    }
    /// Drop every cached relation.
    pub fn purge_caches(&mut self) {
        self.cache = DeviceRelations::default();
    }

    require!(
        /// δ1 = ∂1ᵀ: vertex -> signed edges (+1 where the edge ends at the vertex).
        vertex_edges, require_vertex_edges, |s| s.compute_vertex_edges()?
    );
    /// δ1, computed (not cached) as [`DeviceMesh::vertex_edges`] computes it: by the buckets
    /// cut at upload when the edges were canonical there (one launch, no host
    /// synchronisation), else by [`MeshKernels::transpose_edge_pairs`] (edges of unknown
    /// order) or [`MeshKernels::transpose_edge_pairs_general`] (edges known not canonical).
    pub fn compute_vertex_edges(&self) -> Result<DeviceTcsr, MeshError> {
        if let Some(cut) = &self.edge_buckets {
            self.kernels.transpose_cut_pairs(&self.edge_vertices, cut)
        } else if self.try_canonical_edges {
            self.kernels
                .transpose_edge_pairs(&self.edge_vertices, self.nvertices)
        } else {
            self.kernels
                .transpose_edge_pairs_general(&self.edge_vertices, self.nvertices)
        }
    }
    /// The number of δ1's buckets cut at upload, if any ([`DeviceMesh::compute_vertex_edges`]).
    pub fn edge_buckets(&self) -> Option<usize> {
        self.edge_buckets.as_ref().map(|e| e.plan.nb as usize)
    }
    require!(
        /// δ2 = ∂2ᵀ: edge -> signed faces. For faces found canonical at upload it is read off δ1,
        /// which is computed and cached first if it is not cached yet: δ1 and δ2 together take
        /// about what the general transpose takes for δ2 alone ([`DeviceMesh::compute_edge_faces`]).
        edge_faces, require_edge_faces, |s| {
            if s.face_buckets.is_some() {
                s.require_vertex_edges()?;
            }
            s.compute_edge_faces()?
        }
    );
    /// δ2, computed (not cached): for faces found canonical at upload while δ1 is cached, read
    /// off δ1 and the faces' runs by the buckets cut at upload (one launch, no host
    /// synchronisation); else by the general transpose
    /// [`MeshKernels::transpose`] (a δ1 computed for the call and dropped would cost about as
    /// much as that transpose saves: dragon, session 28).
    pub fn compute_edge_faces(&self) -> Result<DeviceTcsr, MeshError> {
        match &self.cache.vertex_edges {
            Some(ve) => self.edge_faces_off(ve),
            None => self.kernels.transpose(&self.face_edges),
        }
    }
    /// δ2 read off the δ1 `vertex_edges` of this mesh for faces found canonical at upload, else
    /// by the general transpose.
    pub(crate) fn edge_faces_off(
        &self,
        vertex_edges: &DeviceTcsr,
    ) -> Result<DeviceTcsr, MeshError> {
        match &self.face_buckets {
            Some(cut) => self
                .kernels
                .edge_faces_of_canonical(&self.face_edges, vertex_edges, cut),
            None => self.kernels.transpose(&self.face_edges),
        }
    }
    /// The number of blocks of δ2's tasks cut at upload, if any ([`DeviceMesh::compute_edge_faces`]).
    pub fn face_buckets(&self) -> Option<usize> {
        self.face_buckets.as_ref().map(|f| f.nb as usize)
    }
    /// The warps (tasks) a block of δ2's tasks cut at upload, if any: 4 where every vertex's task
    /// fits a twelfth of a multiprocessor's shared memory, else 16.
    pub fn face_block_warps(&self) -> Option<u32> {
        self.face_buckets.as_ref().map(|f| f.warps)
    }
    require!(
        /// δ3 = ∂3ᵀ: face -> signed cells.
        face_cells, require_face_cells, |s| s.kernels.transpose_short_rows(&s.cell_faces)?
    );
    require!(
        /// ∂̂2¹: face -> ordered vertex loop.
        face_vertices, require_face_vertices, |s| s.kernels.face_vertices(&s.face_edges, &s.edge_vertices, s.nvertices)?
    );
    require!(
        /// ∂̂3¹: cell -> edges, sorted.
        cell_edges, require_cell_edges, |s| s.kernels.cell_edges(&s.cell_faces, &s.face_edges)?
    );
    require!(
        /// ∂̂3²: cell -> vertices, sorted (tetrahedra known closed read two faces and three
        /// edges a cell: [`MeshKernels::cell_vertices_of_closed_tets`]).
        cell_vertices, require_cell_vertices, |s| s.compute_cell_vertices()?
    );

    /// ∂̂3² computed (not cached): the closed-tetrahedra kernel when it applies
    /// ([`DeviceMesh::closed_cell_vertices`]), else the checked kernels.
    pub(crate) fn compute_cell_vertices(&self) -> Result<DeviceTcsr, MeshError> {
        match self.closed_cell_vertices()? {
            Some(r) => Ok(r),
            None => self.kernels.cell_vertices(
                &self.cell_faces,
                &self.face_edges,
                &self.edge_vertices,
                self.nvertices,
            ),
        }
    }

    /// ∂̂3² by [`MeshKernels::cell_vertices_of_closed_tets`] when the mesh was uploaded
    /// known closed and its cells are tetrahedra (exact, no check and no host read);
    /// `None` otherwise (nothing launched).
    pub(crate) fn closed_cell_vertices(&self) -> Result<Option<DeviceTcsr>, MeshError> {
        if !self.cells_closed {
            return Ok(None);
        }
        self.kernels.cell_vertices_of_closed_tets(
            &self.cell_faces,
            &self.face_edges,
            &self.edge_vertices,
            self.nvertices,
        )
    }

    /// Boundary extraction on the device (uses the cached δ3).
    pub fn boundary(&mut self) -> Result<DeviceBoundary, MeshError> {
        self.require_face_cells()?;
        let fc = self.cache.face_cells.as_ref().expect("required");
        self.boundary_from(fc)
    }

    /// [`DeviceMesh::boundary`] with no host synchronisation: the lists' lengths stay on the
    /// device (see [`MeshKernels::boundary_enqueue`]).
    pub fn boundary_enqueue(&mut self) -> Result<PendingBoundary, MeshError> {
        self.require_face_cells()?;
        let fc = self.cache.face_cells.as_ref().expect("required");
        self.boundary_enqueue_from(fc)
    }

    /// The boundary of this mesh from its δ3 `fc` held by the caller (as
    /// [`MeshKernels::transpose_short_rows`] gives it): [`MeshKernels::boundary`], with the
    /// faces' marks read off two vertex pairs a face where the upload found the faces
    /// canonical (the faces of Tessera's simplex derivation).
    pub fn boundary_from(&self, fc: &DeviceTcsr) -> Result<DeviceBoundary, MeshError> {
        self.kernels.boundary_of(&self.boundary_input(fc))
    }

    /// [`DeviceMesh::boundary_from`] with the lists' lengths left on the device.
    pub fn boundary_enqueue_from(&self, fc: &DeviceTcsr) -> Result<PendingBoundary, MeshError> {
        self.kernels.boundary_enqueue_of(&self.boundary_input(fc))
    }

    /// What the boundary extraction reads of this mesh, with its δ3 `fc`.
    fn boundary_input<'a>(&'a self, fc: &'a DeviceTcsr) -> BoundaryInput<'a> {
        BoundaryInput {
            fc,
            fe: &self.face_edges,
            edge_vertices: &self.edge_vertices,
            nvertices: self.nvertices,
            canonical: self.faces_canonical,
        }
    }

    /// The other end of every entry of δ1 (the neighbour of the row's vertex along that
    /// edge), in the order of δ1: the smoothing steps read one index per neighbour instead of
    /// an edge entry and its two vertices.
    pub(crate) fn vertex_neighbours(&mut self) -> Result<DeviceBuffer<u32>, MeshError> {
        self.require_vertex_edges()?;
        let g = self.kernels.gpu;
        let ve = self.cache.vertex_edges.as_ref().expect("required");
        let nbr = g.alloc::<u32>(ve.nnz())?;
        let nnz = ve.nnz() as u64;
        g.launch(
            &self.kernels.k("vertex_neighbours")?,
            MeshKernels::cfg(ve.nnz())?,
        )
        .arg(&ve.columns)
        .arg(&nnz)
        .arg(&self.edge_vertices)
        .arg(&nbr)
        .run()?;
        Ok(nbr)
    }

    /// Laplacian smoothing of inner vertices on the device (dissertation §3.4.2):
    /// `iterations` Jacobi steps over δ1 with double-buffered positions; boundary vertices
    /// and vertices without edges stay fixed. Updates the device positions. The stencil
    /// (boundary vertex marks and the neighbour of every δ1 entry) depends on the topology
    /// only: the first call computes it and caches it with the relations
    /// (`smoothing_stencil` in [`DeviceMesh::cached`]), later calls run the steps alone.
    pub fn laplacian_smooth(&mut self, iterations: usize) -> Result<(), MeshError> {
        if iterations == 0 {
            return Ok(());
        }
        self.require_smoothing_stencil()?;
        let g = self.kernels.gpu;
        let (fixed, nbr) = self
            .cache
            .smoothing_stencil
            .as_ref()
            .expect("computed above");
        let ve = self.cache.vertex_edges.as_ref().expect("required");
        let mut other = g.alloc::<f64>(self.positions.len())?;
        let step = self.kernels.k("laplace_step")?;
        let nv = self.nvertices as u64;
        let cfg = MeshKernels::cfg(self.nvertices)?;
        for _ in 0..iterations {
            g.launch(&step, cfg)
                .arg(&ve.offsets)
                .arg(nbr)
                .arg(fixed)
                .arg(&self.positions)
                .arg(&other)
                .arg(&nv)
                .run()?;
            std::mem::swap(&mut self.positions, &mut other);
        }
        Ok(())
    }

    /// Compute and cache the Laplacian smoothing's stencil (and δ3, δ1) if it is not cached
    /// yet (see [`DeviceMesh::laplacian_smooth`]).
    pub fn require_smoothing_stencil(&mut self) -> Result<(), MeshError> {
        self.require_face_cells()?;
        self.require_vertex_edges()?;
        if self.cache.smoothing_stencil.is_none() {
            let fc = self.cache.face_cells.as_ref().expect("required");
            // boundary vertices stay fixed: the vertex marks of the boundary extraction
            // (marks only: no scans, no host synchronisation), in one launch with the
            // neighbours
            let ve = self.cache.vertex_edges.as_ref().expect("required");
            let (fixed, nbr) = self.kernels.smoothing_stencil(
                fc,
                &self.face_edges,
                &self.edge_vertices,
                self.nvertices,
                ve,
            )?;
            self.cache.smoothing_stencil = Some((fixed, nbr));
        }
        Ok(())
    }

    /// Drop the cached smoothing stencil only (the benchmarks time its computation).
    pub fn forget_smoothing_stencil(&mut self) {
        self.cache.smoothing_stencil = None;
    }

    /// Copy the positions back to the host.
    pub fn download_positions(&self) -> Result<Vec<Point>, MeshError> {
        let v = self.kernels.gpu.download(&self.positions)?;
        Ok(v.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
    }

    /// Copy the stored operators and positions back into a host mesh (known closed when
    /// the uploaded one was: [`PolyMesh::cells_known_closed`]).
    pub fn download(&self) -> Result<PolyMesh, MeshError> {
        let g = self.kernels.gpu;
        let ev: Vec<[u32; 2]> = g
            .download(&self.edge_vertices)?
            .chunks_exact(2)
            .map(|c| [c[0], c[1]])
            .collect();
        let m = PolyMesh::from_operators(
            self.download_positions()?,
            ev,
            self.face_edges.download(g)?,
            self.cell_faces.download(g)?,
        )?;
        // the operators came from a host mesh known closed, unchanged
        if self.cells_closed {
            m.mark_cells_closed();
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    /// A xorshift generator (the cuts' tests).
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// Runs without a GPU: δ1's balanced cut covers every group once, in runs of at most
    /// `max_groups`, each run's weight within one group of its share.
    #[test]
    fn balanced_cuts_cover_the_groups_in_shares() {
        let mut next = xorshift(12345);
        let skewed: Vec<u64> = (0..7_000)
            .map(|g| {
                if g > 6_000 {
                    500 + next() % 300
                } else {
                    40 + next() % 20
                }
            })
            .collect();
        for (weights, parts, max_groups) in [
            (vec![1u64; 1_320], 132, 127),
            (skewed.clone(), 132, 127),
            (skewed, 264, 8),
            (vec![0u64; 10], 4, 3),
            (vec![5u64], 132, 127),
        ] {
            let cuts = super::balanced_cuts(&weights, parts, max_groups);
            assert_eq!(cuts[0], 0);
            assert_eq!(*cuts.last().unwrap(), weights.len());
            assert!(cuts
                .windows(2)
                .all(|w| w[0] < w[1] && w[1] - w[0] <= max_groups));
            let total: u64 = weights.iter().sum();
            let heaviest = weights.iter().copied().max().unwrap_or(0);
            for w in cuts.windows(2) {
                let run: u64 = weights[w[0]..w[1]].iter().sum();
                assert!(run <= total.div_ceil(parts as u64) + heaviest, "{run}");
            }
        }
        // equal weights: equal runs
        let cuts = super::balanced_cuts(&[1u64; 1_320], 132, 127);
        assert_eq!(cuts.len(), 133);
        assert!(cuts.windows(2).all(|w| w[1] - w[0] == 10));
    }

    /// Runs without a GPU: the faces of a derived tetrahedral mesh are canonical (what
    /// `edge_faces_runs` relies on); a row rotated, two rows swapped or an edge out of range
    /// are not.
    #[test]
    fn derived_faces_are_canonical() {
        use crate::simplex::SimplexMesh;
        let m = crate::generate::box_mesh(crate::generate::BoxKind::Tet, [5, 4, 3], [1.0; 3]);
        // the tetrahedra renumbered backwards and derived again
        let nv = m.num_vertices() as u32;
        let cells = m
            .cell_vertices()
            .columns()
            .iter()
            .map(|&v| nv - 1 - v as u32)
            .collect();
        let pos = m.positions().iter().rev().copied().collect();
        let d = SimplexMesh::new(3, cells, pos).unwrap().to_poly().unwrap();
        let second = super::canonical_faces(d.edge_vertices(), d.face_edges()).expect("canonical");
        assert_eq!(second.len(), d.num_faces());
        // a row rotated, two rows swapped, a face's edge out of range: not canonical
        let (ncols, offs, cols) = d.face_edges().clone().into_raw();
        let with = |c: Vec<i32>| super::Tcsr::new(ncols, offs.clone(), c).unwrap();
        let mut rot = cols.clone();
        rot[30..33].rotate_left(1);
        let mut swapped = cols.clone();
        for i in 0..3 {
            swapped.swap(3 * 7 + i, 3 * 40 + i);
        }
        for c in [rot, swapped] {
            assert!(super::canonical_faces(d.edge_vertices(), &with(c)).is_none());
        }
        assert!(super::canonical_faces(&d.edge_vertices()[..10], d.face_edges()).is_none());
    }

    #[test]
    fn face_tasks_cut_within_the_budget() {
        use super::{cut_face_tasks, face_bucket_weight, FaceBucketLoad};
        let mut next = xorshift(777);
        let load: Vec<FaceBucketLoad> = (0..5_000)
            .map(|g| {
                let k = if g > 4_000 { 8 } else { 1 };
                FaceBucketLoad {
                    rows: k * (100 + next() % 100),
                    faces: k * (200 + next() % 200),
                    afaces: k * (200 + next() % 200),
                    entries: k * k * (300 + next() % 100),
                }
            })
            .collect();
        let fits = |l: &FaceBucketLoad| l.shared_bytes() <= 200 << 10;
        for parts in [1usize, 264, 10_000] {
            let cuts = cut_face_tasks(&FaceBucketLoad::prefix(&load), parts, fits).unwrap();
            assert_eq!((cuts[0], *cuts.last().unwrap()), (0, load.len()));
            assert!(cuts.windows(2).all(|w| w[0] < w[1]));
            let total: u64 = load.iter().map(face_bucket_weight).sum();
            let heaviest = load.iter().map(face_bucket_weight).max().unwrap();
            for w in cuts.windows(2) {
                let mut run = FaceBucketLoad::default();
                load[w[0]..w[1]].iter().for_each(|l| run.add(l));
                assert!(fits(&run), "{run:?}");
                // a run ends at its share, or where the next vertex would not fit
                let weight: u64 = load[w[0]..w[1]].iter().map(face_bucket_weight).sum();
                let mut next = run;
                if let Some(l) = load.get(w[1]) {
                    next.add(l);
                }
                assert!(
                    weight <= total.div_ceil(parts as u64) + heaviest || !fits(&next),
                    "{weight}"
                );
            }
        }
        // one vertex alone too large: no cut
        let mut big = load.clone();
        big[17].faces = 1 << 20;
        assert!(cut_face_tasks(&FaceBucketLoad::prefix(&big), 264, fits).is_none());
        // no work: every vertex once, in at most `parts` runs
        let idle = vec![FaceBucketLoad::default(); 10];
        let cuts = cut_face_tasks(&FaceBucketLoad::prefix(&idle), 4, fits).unwrap();
        assert_eq!((cuts[0], *cuts.last().unwrap()), (0, 10));
        assert!(cuts.len() <= 5 && cuts.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn task_slots_fill_each_block_with_empty_tasks() {
        use super::task_slots;
        // 7 tasks over vertices 0..20, blocks of 3, 2 and 2 tasks, 4 slots a block
        let tasks = [0usize, 2, 5, 9, 10, 14, 15, 20];
        let btask = [0u32, 3, 5, 7];
        let slots = task_slots(&tasks, &btask, 4);
        assert_eq!(slots, [0, 2, 5, 9, 9, 10, 14, 14, 14, 15, 20, 20, 20]);
        // the slots' non-empty tasks are the tasks, in order
        let runs: Vec<(usize, usize)> = slots
            .windows(2)
            .map(|w| (w[0], w[1]))
            .filter(|(a, b)| a < b)
            .collect();
        let want: Vec<(usize, usize)> = tasks.windows(2).map(|w| (w[0], w[1])).collect();
        assert_eq!(runs, want);
        // blocks of exactly `warps` tasks need no empty ones
        assert_eq!(
            task_slots(&tasks, &[0, 4, 7], 4)[..9],
            [0, 2, 5, 9, 10, 14, 15, 20, 20]
        );
    }

    #[test]
    fn tasks_grouped_into_blocks_within_the_budget() {
        use super::group_tasks;
        let mut next = xorshift(4242);
        let bytes: Vec<u64> = (0..3_000).map(|_| 1 + next() % 5_000).collect();
        for (warps, budget) in [
            (16usize, 40_000u64),
            (16, 5_000),
            (4, 1_000_000),
            (1, 5_000),
        ] {
            let (first, most) = group_tasks(bytes.iter().copied(), warps, budget);
            assert_eq!((first[0], *first.last().unwrap()), (0, bytes.len() as u32));
            let mut largest = 0;
            for w in first.windows(2) {
                let (a, b) = (w[0] as usize, w[1] as usize);
                assert!(a < b && b - a <= warps, "{a}..{b}");
                let sum: u64 = bytes[a..b].iter().sum();
                assert!(sum <= budget, "{sum}");
                largest = largest.max(sum);
                // a block ends full, or where the next task would not fit
                if b < bytes.len() {
                    assert!(b - a == warps || sum + bytes[b] > budget);
                }
            }
            assert_eq!(most, largest);
        }
        assert_eq!(group_tasks(std::iter::empty(), 16, 100), (vec![0], 0));
    }

    /// Runs without a GPU: the edges of a derived tetrahedral mesh are canonical pairs (what
    /// `transpose_bucketed`'s mode 3 relies on), and two edges out of order are not.
    #[test]
    fn derived_edges_are_canonical() {
        use crate::generate::{box_mesh, BoxKind};
        let m = box_mesh(BoxKind::Tet, [7, 5, 4], [1.0, 1.0, 1.0]);
        let mut ev = m.edge_vertices().to_vec();
        assert!(super::canonical_pairs(&ev));
        ev.swap(10, 200);
        assert!(!super::canonical_pairs(&ev));
        ev.swap(10, 200);
        ev[3].reverse();
        assert!(!super::canonical_pairs(&ev));
    }

    /// Runs without a GPU: every kernel the Rust side launches is defined in the sources.
    #[test]
    fn every_launched_kernel_is_defined() {
        for (src, names) in [
            (
                super::SOURCE,
                &[
                    "tcsr_count_cols",
                    "tcsr_fill_transpose",
                    "tcsr_fill_transpose_uniform",
                    "edge_count_vertices",
                    "edge_fill_transpose",
                    "cell_edges_4x3",
                    "cell_edges_6x4",
                    "cell_vertices_4x3",
                    "cell_vertices_6x4",
                    "cell_vertices_closed_4x3",
                    "face_vertices_fill",
                    "face_vertices_3",
                    "face_vertices_4",
                    "tsort_short_rows",
                    "tsort_mid_rows",
                    "cell_edges_count",
                    "cell_edges_fill",
                    "cell_vertices_count",
                    "cell_vertices_fill",
                    "dedup_rows",
                    "compact_rows",
                    "boundary_face_flags",
                    "boundary_faces_fill",
                    "boundary_mark",
                    "boundary_totals",
                    "mark_scatter",
                    "vertex_neighbours",
                    "laplace_step",
                    "transpose_coop",
                    "transpose_bucketed",
                    "transpose_bucketed_pairs",
                    "boundary_coop",
                ][..],
            ),
            (super::smooth::SOURCE, super::smooth::KERNELS),
            (
                super::simplex::SOURCE,
                &[
                    "simplex_edge_keys",
                    "simplex_face_keys",
                    "scatter_ids",
                    "simplex_facets",
                    "simplex_face_edges",
                ][..],
            ),
        ] {
            for n in names {
                assert!(
                    src.contains(&format!("extern \"C\" __global__ void {n}("))
                        || src.lines().any(|l| l
                            .starts_with("extern \"C\" __global__ void __launch_bounds__")
                            && l.contains(&format!(") {n}("))),
                    "kernel {n} is not defined"
                );
            }
        }
    }
}
