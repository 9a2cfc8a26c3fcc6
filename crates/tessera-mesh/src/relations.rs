//! Derived relations: coboundaries and indirect relations (dissertation §3.3, §3.4.1).
//!
//! All are computed on request and cached in the mesh ([`Relations`]); mutable access to
//! the operators drops the cache. Every computation follows count -> scan -> fill, has a
//! sequential and a rayon path, and both give identical results (rows are in a defined
//! order: sorted by column for coboundaries and vertex/edge sets, loop order for
//! face vertices).
//!
//! | accessor | relation | dissertation |
//! |---|---|---|
//! | [`PolyMesh::vertex_edges`] | ∂1ᵀ, vertex -> signed edges (+1 where the edge ends) | δ1 |
//! | [`PolyMesh::edge_faces`] | ∂2ᵀ, edge -> signed faces | δ2 |
//! | [`PolyMesh::face_cells`] | ∂3ᵀ, face -> signed cells | δ3 |
//! | [`PolyMesh::face_vertices`] | face -> ordered vertex loop | ∂̂2¹ |
//! | [`PolyMesh::cell_edges`] | cell -> edges (sorted) | ∂̂3¹ |
//! | [`PolyMesh::cell_vertices`] | cell -> vertices (sorted) | ∂̂3² |
//! | [`PolyMesh::vertex_cells`] | vertex -> cells | (∂̂3²)ᵀ |
//! | [`PolyMesh::edge_cells`] | edge -> cells | (∂̂3¹)ᵀ |
//!
//! Indirect relations store only positive entries (they are unsigned incidence sets).
//!
//! Tetrahedral meshes (every cell 4 faces, every face 3 edges: the simplex form of
//! dissertation §3.4.4) take fast paths with implicit offsets: the transposes of ∂3 and ∂2
//! are counting scatters without reading offsets ([`tessera_sparse::transpose`]; δ3 of a
//! consistently oriented manifold mesh, at most two cells per face with opposite signs, a
//! two-slot scatter without counting: [`compute_face_cells`]), and cell
//! vertices, cell edges and face vertices are gathered straight from the simplex structure
//! (a sorting network instead of a sort, no count pass, no compaction) with prefetched
//! gathers. A fast path checks every row it writes and hands the whole relation to the
//! general path if any row does not fit, so results never depend on which path ran. The
//! parallel paths split the work into chunks of whole rows (for the transposes: input
//! chunks with counters of their own, and column groups); every output element has one
//! writer, so results are bit-identical for any number of threads.

use crate::PolyMesh;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::OnceLock;
use tessera_core::scan::offsets_from_counts;
use tessera_core::Par;
use tessera_sparse::tcsr::{col, decode, encode};
use tessera_sparse::transpose::{transpose_entries, EdgePairEntries, TransposeParams};
use tessera_sparse::Tcsr;

/// Cache of derived relations (item 7 of dissertation §3.4).
#[derive(Clone, Debug, Default)]
pub struct Relations {
    pub(crate) vertex_edges: OnceLock<Tcsr>,
    pub(crate) edge_faces: OnceLock<Tcsr>,
    pub(crate) face_cells: OnceLock<Tcsr>,
    pub(crate) face_vertices: OnceLock<Tcsr>,
    pub(crate) cell_edges: OnceLock<Tcsr>,
    pub(crate) cell_vertices: OnceLock<Tcsr>,
    pub(crate) vertex_cells: OnceLock<Tcsr>,
    pub(crate) edge_cells: OnceLock<Tcsr>,
}

impl Relations {
    /// Names of the relations currently cached.
    pub fn cached(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        macro_rules! c {
            ($($f:ident),*) => { $( if self.$f.get().is_some() { v.push(stringify!($f)); } )* };
        }
        c!(
            vertex_edges,
            edge_faces,
            face_cells,
            face_vertices,
            cell_edges,
            cell_vertices,
            vertex_cells,
            edge_cells
        );
        v
    }
    /// Bytes held by cached relations.
    pub fn bytes(&self) -> usize {
        [
            &self.vertex_edges,
            &self.edge_faces,
            &self.face_cells,
            &self.face_vertices,
            &self.cell_edges,
            &self.cell_vertices,
            &self.vertex_cells,
            &self.edge_cells,
        ]
        .iter()
        .filter_map(|c| c.get())
        .map(|t| t.bytes())
        .sum()
    }
}

/// Rows per parallel task of the row-wise relations (whole rows, so every output slice has
/// exactly one writer).
const ROW_CHUNK: usize = 4096;

/// Build a TCSR matrix row by row with count -> scan -> fill. `count(r)` gives an upper
/// bound of row `r`'s length; `fill(r, out)` writes into a slice of that length and
/// returns how many entries it wrote. When counts are exact no compaction happens.
///
/// With `Par::Rayon` the rows are cut into chunks of whole rows; each task counts, fills
/// and compacts its own chunk (a slice of the entries between the chunk's offsets), so the
/// result is identical to `Par::Seq`.
pub fn build_rows<C, F>(par: Par, nrows: usize, ncols: usize, count: C, fill: F) -> Tcsr
where
    C: Fn(usize) -> u32 + Sync,
    F: Fn(usize, &mut [i32]) -> usize + Sync,
{
    let counts: Vec<u32> = match par {
        Par::Seq => (0..nrows).map(&count).collect(),
        Par::Rayon => (0..nrows)
            .into_par_iter()
            .with_min_len(ROW_CHUNK)
            .map(&count)
            .collect(),
    };
    let offsets = offsets_from_counts(par, &counts).expect("relation has fewer than 2^32 entries");
    let mut cols = vec![0i32; *offsets.last().unwrap() as usize];
    let mut written = vec![0u32; nrows];
    let fill_chunk = |r0: usize, cols: &mut [i32], written: &mut [u32]| {
        let base = offsets[r0] as usize;
        for (k, w) in written.iter_mut().enumerate() {
            let r = r0 + k;
            let s = &mut cols[offsets[r] as usize - base..offsets[r + 1] as usize - base];
            *w = fill(r, s) as u32;
        }
    };
    match par {
        Par::Seq => fill_chunk(0, &mut cols, &mut written),
        Par::Rayon => {
            let pieces = split_rows(&offsets, &mut cols, ROW_CHUNK);
            pieces
                .into_par_iter()
                .zip(written.par_chunks_mut(ROW_CHUNK))
                .enumerate()
                .for_each(|(k, (c, w))| fill_chunk(k * ROW_CHUNK, c, w));
        }
    }
    if written == counts {
        return Tcsr::from_raw_unchecked(ncols, offsets, cols);
    }
    // compaction (dissertation §3.4.1: "the vertex array is compacted")
    let new_offsets = offsets_from_counts(par, &written).expect("fits");
    let mut out = vec![0i32; *new_offsets.last().unwrap() as usize];
    let compact_chunk = |r0: usize, out: &mut [i32]| {
        let base = new_offsets[r0] as usize;
        let r1 = (r0 + ROW_CHUNK).min(nrows);
        for r in r0..r1 {
            let n = written[r] as usize;
            let o = new_offsets[r] as usize - base;
            out[o..o + n].copy_from_slice(&cols[offsets[r] as usize..offsets[r] as usize + n]);
        }
    };
    match par {
        Par::Seq => {
            for r0 in (0..nrows).step_by(ROW_CHUNK) {
                let (b, e) = (
                    new_offsets[r0] as usize,
                    new_offsets[(r0 + ROW_CHUNK).min(nrows)] as usize,
                );
                compact_chunk(r0, &mut out[b..e]);
            }
        }
        Par::Rayon => split_rows(&new_offsets, &mut out, ROW_CHUNK)
            .into_par_iter()
            .enumerate()
            .for_each(|(k, o)| compact_chunk(k * ROW_CHUNK, o)),
    }
    Tcsr::from_raw_unchecked(ncols, new_offsets, out)
}

/// Split `data` (the entries of rows with `offsets`) into the entries of chunks of `chunk`
/// whole rows.
fn split_rows<'a, T>(offsets: &[u32], mut data: &'a mut [T], chunk: usize) -> Vec<&'a mut [T]> {
    let nrows = offsets.len() - 1;
    let mut out = Vec::with_capacity(nrows.div_ceil(chunk));
    let mut r0 = 0;
    while r0 < nrows {
        let r1 = (r0 + chunk).min(nrows);
        let (h, t) = std::mem::take(&mut data).split_at_mut((offsets[r1] - offsets[r0]) as usize);
        out.push(h);
        data = t;
        r0 = r1;
    }
    out
}

/// Fill rows of one fixed length `k` (implicit offsets) with `f(row, out) -> ok`; rows are
/// processed in chunks on the rayon pool with `Par::Rayon`. Returns the entries if every
/// row was ok, `None` otherwise. Each chunk zeroes its own part of the entries right before
/// filling it (while it is in the cache), so no serial zeroing pass precedes the parallel
/// fill.
fn fill_fixed_rows<F>(par: Par, nrows: usize, k: usize, f: F) -> Option<Vec<i32>>
where
    F: Fn(usize, &mut [i32]) -> bool + Sync,
{
    let n = nrows * k;
    if n == 0 {
        return Some(Vec::new());
    }
    let mut out: Vec<i32> = Vec::with_capacity(n);
    let run = |(c, chunk): (usize, &mut [MaybeUninit<i32>])| -> bool {
        chunk.fill(MaybeUninit::new(0));
        // SAFETY: every element of `chunk` was initialized on the line above, and
        // `MaybeUninit<i32>` has the size, alignment and layout of `i32`.
        let chunk: &mut [i32] = unsafe { &mut *(chunk as *mut [MaybeUninit<i32>] as *mut [i32]) };
        let r0 = c * ROW_CHUNK;
        let mut ok = true;
        for (j, row) in chunk.chunks_exact_mut(k).enumerate() {
            ok &= f(r0 + j, row);
        }
        ok
    };
    let spare = &mut out.spare_capacity_mut()[..n];
    let ok = match par {
        Par::Seq => spare.chunks_mut(ROW_CHUNK * k).enumerate().all(run),
        Par::Rayon => spare
            .par_chunks_mut(ROW_CHUNK * k)
            .enumerate()
            .map(run)
            .reduce(|| true, |a, b| a & b),
    };
    if !ok {
        return None;
    }
    // SAFETY: `ok` means every chunk ran (the sequential `all` stops only at a chunk that
    // fails; the parallel reduce runs them all) and each initialized all of its elements;
    // the chunks cover the first `n` elements of the capacity.
    unsafe { out.set_len(n) };
    Some(out)
}

/// Offsets `0, k, 2k, ..., nrows * k` of rows of one fixed length (Eqs. 3.11-3.13 made
/// explicit).
fn fixed_offsets(par: Par, nrows: usize, k: usize) -> Vec<u32> {
    match par {
        Par::Seq => (0..=nrows).map(|r| (r * k) as u32).collect(),
        Par::Rayon => (0..nrows + 1)
            .into_par_iter()
            .with_min_len(1 << 14)
            .map(|r| (r * k) as u32)
            .collect(),
    }
}

/// Whether every row of `m` has length `k` (then its offsets are implicit, `r * k`).
fn rows_of_len(m: &Tcsr, k: usize, par: Par) -> bool {
    let offs = m.offsets();
    if m.nnz() != m.nrows() * k {
        return false;
    }
    let ok = |(r, &o): (usize, &u32)| o as usize == r * k;
    match par {
        Par::Seq => offs.iter().enumerate().all(ok),
        Par::Rayon => offs.par_iter().with_min_len(1 << 14).enumerate().all(ok),
    }
}

/// The simplex form of a polyhedral mesh's operators: every cell has 4 faces and every
/// face 3 edges (a tetrahedral mesh, dissertation §3.4.4), so ∂3 and ∂2 have implicit
/// offsets.
fn tet_operators(mesh: &PolyMesh, par: Par) -> bool {
    mesh.num_cells() > 0
        && rows_of_len(&mesh.cell_faces, 4, par)
        && rows_of_len(&mesh.face_edges, 3, par)
}

/// How many rows ahead the gathers of the simplex paths prefetch (the rows' entries are
/// scattered over arrays larger than the caches; prefetching keeps several misses in
/// flight per thread).
const AHEAD: usize = 16;

/// Hint the processor to fetch the cache line holding `x` (no effect on results).
#[inline(always)]
fn prefetch<T>(x: &T) {
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

/// Sort four values (a sorting network of 5 comparators).
#[inline(always)]
fn sort4(mut v: [u32; 4]) -> [u32; 4] {
    macro_rules! cx {
        ($i:expr, $j:expr) => {
            let (a, b) = (v[$i], v[$j]);
            v[$i] = a.min(b);
            v[$j] = a.max(b);
        };
    }
    cx!(0, 1);
    cx!(2, 3);
    cx!(0, 2);
    cx!(1, 3);
    cx!(1, 2);
    v
}

/// Sort six values (a sorting network of 12 comparators).
#[inline(always)]
fn sort6(mut v: [u32; 6]) -> [u32; 6] {
    macro_rules! cx {
        ($i:expr, $j:expr) => {
            let (a, b) = (v[$i], v[$j]);
            v[$i] = a.min(b);
            v[$j] = a.max(b);
        };
    }
    cx!(1, 2);
    cx!(4, 5);
    cx!(0, 2);
    cx!(3, 5);
    cx!(0, 1);
    cx!(3, 4);
    cx!(1, 4);
    cx!(0, 3);
    cx!(2, 5);
    cx!(1, 3);
    cx!(2, 4);
    cx!(2, 3);
    v
}

/// ∂1 as a TCSR matrix (edges x vertices): `-from + to`.
pub fn edge_vertices_tcsr(edge_vertices: &[[u32; 2]], nvertices: usize) -> Tcsr {
    let mut offsets = Vec::with_capacity(edge_vertices.len() + 1);
    let mut cols = Vec::with_capacity(edge_vertices.len() * 2);
    offsets.push(0u32);
    for ev in edge_vertices {
        cols.push(encode(ev[0], true));
        cols.push(encode(ev[1], false));
        offsets.push(cols.len() as u32);
    }
    Tcsr::from_raw_unchecked(nvertices, offsets, cols)
}

/// δ1 = ∂1ᵀ directly from the ordered pairs (dissertation §3.4.1: "the transposition of
/// edges uses a modified version of TCSRtoTCSC, where the even indices correspond to
/// positive values and odd indices to negative values"; here the pair's first vertex is the
/// -1 and the second the +1 entry). Equal to `edge_vertices_tcsr(..).transpose(par)`: rows
/// sorted by edge, identical for `Par::Seq` and `Par::Rayon` at any thread count.
pub fn transpose_edge_vertices(edge_vertices: &[[u32; 2]], nvertices: usize, par: Par) -> Tcsr {
    let (offsets, cols) = transpose_entries(
        &EdgePairEntries {
            flat: edge_vertices.as_flattened(),
        },
        nvertices,
        par.is_parallel(),
        TransposeParams::default(),
    );
    Tcsr::from_raw_unchecked(edge_vertices.len(), offsets, cols)
}

/// The ordered vertex loop of face `f`: the start vertex of each signed edge, following
/// the loop. Rows of ∂2 written by Tessera are in loop order; rows in any other order
/// (such as column-sorted rows typed in from a figure) are chained here.
pub fn face_loop(mesh: &PolyMesh, f: usize, out: &mut [i32]) -> usize {
    let row = mesh.face_edges.row(f);
    let ev = &mesh.edge_vertices;
    let ends = |v: i32| {
        let (e, s) = decode(v);
        let [a, b] = ev[e as usize];
        if s > 0 {
            (a, b)
        } else {
            (b, a)
        }
    };
    let n = row.len();
    if n == 0 {
        return 0;
    }
    // fast path: already in loop order
    let mut ordered = true;
    for i in 0..n {
        if ends(row[i]).1 != ends(row[(i + 1) % n]).0 {
            ordered = false;
            break;
        }
    }
    if ordered {
        for (i, &v) in row.iter().enumerate() {
            out[i] = ends(v).0 as i32;
        }
        return n;
    }
    // chain: start at the first edge, repeatedly find the edge starting where we are
    let mut used = [false; 64];
    let mut used_vec;
    let used: &mut [bool] = if n <= 64 {
        &mut used[..n]
    } else {
        used_vec = vec![false; n];
        &mut used_vec
    };
    let (mut start, mut cur) = ends(row[0]);
    used[0] = true;
    out[0] = start as i32;
    let mut k = 1;
    while k < n {
        let Some(j) = (0..n).find(|&j| !used[j] && ends(row[j]).0 == cur) else {
            break;
        };
        used[j] = true;
        out[k] = cur as i32;
        k += 1;
        start = cur;
        cur = ends(row[j]).1;
    }
    let _ = start;
    k
}

/// The value cached in `cell`, computing it with `init` first when the cell is empty.
///
/// Unlike `OnceLock::get_or_init`, `init` runs **outside** the cell's lock: the relations
/// are computed with rayon, and a rayon worker that waits inside `get_or_init` for its
/// nested parallel work may steal a task that asks for the same relation, which then
/// blocks on the lock the worker itself holds (a deadlock seen when relations are first
/// requested from inside a parallel loop). Two threads racing here may both compute the
/// value; the first stored wins and the other is dropped (both are equal: the relations
/// are deterministic).
pub(crate) fn cached<T>(cell: &OnceLock<T>, init: impl FnOnce() -> T) -> &T {
    if let Some(v) = cell.get() {
        return v;
    }
    let v = init();
    // a racing thread may have stored an equal value first; keep that one
    let _ = cell.set(v);
    match cell.get() {
        Some(v) => v,
        None => unreachable!("OnceLock::set succeeded or the cell was already set"),
    }
}

/// [`cached`] for a vector cache read as a slice.
pub(crate) fn cached_vec<T>(cell: &OnceLock<Vec<T>>, init: impl FnOnce() -> Vec<T>) -> &[T] {
    cached::<Vec<T>>(cell, init).as_slice()
}

impl PolyMesh {
    /// δ1 = ∂1ᵀ: vertex -> signed incident edges (+1 where the edge points to the vertex).
    /// Dissertation §3.4.1 ("the transposition of edges uses a modified version of
    /// TCSRtoTCSC").
    pub fn vertex_edges(&self) -> &Tcsr {
        cached(&self.cache.vertex_edges, || {
            transpose_edge_vertices(&self.edge_vertices, self.nvertices, self.par)
        })
    }

    /// δ2 = ∂2ᵀ: edge -> signed incident faces.
    pub fn edge_faces(&self) -> &Tcsr {
        cached(&self.cache.edge_faces, || {
            self.face_edges.transpose(self.par)
        })
    }

    /// δ3 = ∂3ᵀ: face -> signed incident cells ([`compute_face_cells`]).
    pub fn face_cells(&self) -> &Tcsr {
        cached(&self.cache.face_cells, || {
            compute_face_cells(self, self.par)
        })
    }

    /// ∂̂2¹: face -> ordered vertex loop (positive entries). Dissertation §3.4.1: "can be
    /// computed without previously counting the vertices of each face, as each face forms
    /// a closed loop".
    pub fn face_vertices(&self) -> &Tcsr {
        cached(&self.cache.face_vertices, || {
            compute_face_vertices(self, self.par)
        })
    }

    /// ∂̂3¹: cell -> its edges, sorted (positive entries).
    pub fn cell_edges(&self) -> &Tcsr {
        cached(&self.cache.cell_edges, || {
            compute_cell_edges(self, self.par)
        })
    }

    /// ∂̂3²: cell -> its vertices, sorted (positive entries).
    pub fn cell_vertices(&self) -> &Tcsr {
        cached(&self.cache.cell_vertices, || {
            compute_cell_vertices(self, self.par)
        })
    }

    /// vertex -> incident cells, the transpose of ∂̂3².
    pub fn vertex_cells(&self) -> &Tcsr {
        let cv = self.cell_vertices();
        cached(&self.cache.vertex_cells, || cv.transpose(self.par))
    }

    /// edge -> incident cells, the transpose of ∂̂3¹.
    pub fn edge_cells(&self) -> &Tcsr {
        let ce = self.cell_edges();
        cached(&self.cache.edge_cells, || ce.transpose(self.par))
    }
}

/// δ3 = ∂3ᵀ, computed without caching. A face of a consistently oriented manifold mesh
/// bounds at most two cells, with opposite orientations: the two-slot scatter without
/// counting ([`Tcsr::transpose_two_sided`]); any other mesh (non-manifold, inconsistently
/// oriented) takes the general transpose, with the identical result.
pub fn compute_face_cells(mesh: &PolyMesh, par: Par) -> Tcsr {
    mesh.cell_faces.transpose_two_sided(par)
}

/// Face vertex loops, computed without caching.
///
/// Triangle faces (every ∂2 row of length 3, implicit offsets) take a fast path: each
/// face's three edges are read once, and a row already in loop order is written directly.
/// The result equals the general count -> scan -> fill path exactly.
pub fn compute_face_vertices(mesh: &PolyMesh, par: Par) -> Tcsr {
    let fe = &mesh.face_edges;
    let nf = fe.nrows();
    if nf > 0 && rows_of_len(fe, 3, par) {
        let cols = fe.columns();
        let ev = &mesh.edge_vertices;
        let out = fill_fixed_rows(par, nf, 3, |f, out| {
            if f + AHEAD < nf {
                for &e in &cols[3 * (f + AHEAD)..3 * (f + AHEAD) + 3] {
                    prefetch(&ev[col(e) as usize]);
                }
            }
            let r = &cols[3 * f..3 * f + 3];
            let mut st = [0u32; 3];
            let mut en = [0u32; 3];
            for j in 0..3 {
                let (e, s) = decode(r[j]);
                let [a, b] = ev[e as usize];
                (st[j], en[j]) = if s > 0 { (a, b) } else { (b, a) };
            }
            if en[0] == st[1] && en[1] == st[2] && en[2] == st[0] {
                out[0] = st[0] as i32;
                out[1] = st[1] as i32;
                out[2] = st[2] as i32;
                true
            } else {
                face_loop(mesh, f, out) == 3
            }
        });
        if let Some(out) = out {
            return Tcsr::from_raw_unchecked(mesh.nvertices, fixed_offsets(par, nf, 3), out);
        }
    }
    face_vertices_general(mesh, par)
}

/// Face vertex loops by the general count -> scan -> fill path (any face size; the
/// reference of the triangle path of [`compute_face_vertices`]).
pub fn face_vertices_general(mesh: &PolyMesh, par: Par) -> Tcsr {
    let fe = &mesh.face_edges;
    build_rows(
        par,
        fe.nrows(),
        mesh.nvertices,
        |f| fe.row_len(f) as u32,
        |f, out| face_loop(mesh, f, out),
    )
}

/// Cell edges: the positively used edges of each cell (each edge of a closed cell is used
/// once in each direction by its two faces), sorted. Computed without caching.
///
/// Tetrahedral meshes (4 faces per cell, 3 edges per face) take the simplex path: the six
/// positively used edges of a closed, consistently oriented tetrahedron are sorted by a
/// sorting network; if any cell gives other than six distinct edges, the general
/// count -> scan -> fill path runs instead, so the result is always the general one.
pub fn compute_cell_edges(mesh: &PolyMesh, par: Par) -> Tcsr {
    let cf = &mesh.cell_faces;
    let fe = &mesh.face_edges;
    let nc = cf.nrows();
    if tet_operators(mesh, par) {
        let (cfc, fec) = (cf.columns(), fe.columns());
        let out = fill_fixed_rows(par, nc, 6, |c, out| {
            if c + AHEAD < nc {
                for &fv in &cfc[4 * (c + AHEAD)..4 * (c + AHEAD) + 4] {
                    prefetch(&fec[3 * col(fv) as usize]);
                }
            }
            let mut v = [0u32; 6];
            let mut n = 0;
            for &fv in &cfc[4 * c..4 * c + 4] {
                let f = col(fv) as usize;
                for &ev in &fec[3 * f..3 * f + 3] {
                    // positive use: the signs of face-in-cell and edge-in-face agree
                    if (fv ^ ev) >= 0 {
                        if n == 6 {
                            return false;
                        }
                        v[n] = col(ev);
                        n += 1;
                    }
                }
            }
            if n != 6 {
                return false;
            }
            let v = sort6(v);
            for j in 0..6 {
                out[j] = v[j] as i32;
            }
            v[0] < v[1] && v[1] < v[2] && v[2] < v[3] && v[3] < v[4] && v[4] < v[5]
        });
        if let Some(out) = out {
            return Tcsr::from_raw_unchecked(mesh.num_edges(), fixed_offsets(par, nc, 6), out);
        }
    }
    cell_edges_general(mesh, par)
}

/// Cell edges by the general count -> scan -> fill path (any cell; the reference of the
/// simplex path of [`compute_cell_edges`]).
pub fn cell_edges_general(mesh: &PolyMesh, par: Par) -> Tcsr {
    let cf = &mesh.cell_faces;
    let fe = &mesh.face_edges;
    let nc = cf.nrows();
    let count = |c: usize| -> u32 {
        let mut n = 0u32;
        for &fv in cf.row(c) {
            let (f, sf) = decode(fv);
            for &ev in fe.row(f as usize) {
                let (_, se) = decode(ev);
                n += (sf * se > 0) as u32;
            }
        }
        n
    };
    build_rows(par, nc, mesh.num_edges(), count, |c, out| {
        let mut k = 0;
        for &fv in cf.row(c) {
            let (f, sf) = decode(fv);
            for &ev in fe.row(f as usize) {
                let (e, se) = decode(ev);
                if sf * se > 0 {
                    out[k] = e as i32;
                    k += 1;
                }
            }
        }
        let s = &mut out[..k];
        s.sort_unstable();
        // closed, consistently oriented cells have no duplicates; open or inconsistent ones may
        dedup_sorted(s)
    })
}

/// Cell vertices: the union of the face loops of each cell, sorted and deduplicated
/// (dissertation §3.4.1: sort, mark duplicates, compact). Computed without caching.
///
/// Tetrahedral meshes (4 faces per cell, 3 edges per face) take the simplex path: the
/// three vertices of the first face and the one other vertex the remaining faces use,
/// sorted by a sorting network; if any cell's faces span other than four vertices, the
/// general path runs instead, so the result is always the general one. When the cells are
/// known closed ([`PolyMesh::cells_known_closed`]) no cell can span other than four, and
/// two faces and three edges a cell give the same rows ([`cell_vertices_of_closed_tets`]).
pub fn compute_cell_vertices(mesh: &PolyMesh, par: Par) -> Tcsr {
    if mesh.cells_known_closed() && tet_operators(mesh, par) {
        return cell_vertices_of_closed_tets(mesh, par);
    }
    cell_vertices_checked(mesh, par)
}

/// [`compute_cell_vertices`] as it runs on meshes whose cells are not known closed: the
/// simplex path checks that every cell spans four vertices (else the general path runs).
pub fn cell_vertices_checked(mesh: &PolyMesh, par: Par) -> Tcsr {
    let cf = &mesh.cell_faces;
    let fe = &mesh.face_edges;
    let ev = &mesh.edge_vertices;
    let nc = cf.nrows();
    if tet_operators(mesh, par) {
        let (cfc, fec) = (cf.columns(), fe.columns());
        let out = fill_fixed_rows(par, nc, 4, |c, out| {
            // two-stage prefetch: the face rows of a cell 2 * AHEAD ahead, the edges of the
            // faces of a cell AHEAD ahead (whose face rows were fetched AHEAD rows ago)
            if c + 2 * AHEAD < nc {
                for &fv in &cfc[4 * (c + 2 * AHEAD)..4 * (c + 2 * AHEAD) + 4] {
                    prefetch(&fec[3 * col(fv) as usize]);
                }
            }
            if c + AHEAD < nc {
                for &fv in &cfc[4 * (c + AHEAD)..4 * (c + AHEAD) + 4] {
                    let f = col(fv) as usize;
                    for &e in &fec[3 * f..3 * f + 3] {
                        prefetch(&ev[col(e) as usize]);
                    }
                }
            }
            // start vertex of every signed edge of every face (12 values)
            let mut v = [0u32; 12];
            for (k, &fv) in cfc[4 * c..4 * c + 4].iter().enumerate() {
                let f = col(fv) as usize;
                for (j, &e) in fec[3 * f..3 * f + 3].iter().enumerate() {
                    let (e, s) = decode(e);
                    v[3 * k + j] = ev[e as usize][(s < 0) as usize];
                }
            }
            let (a, b, cc) = (v[0], v[1], v[2]);
            if a == b || b == cc || a == cc {
                return false;
            }
            let mut d = u32::MAX;
            let mut seen = false;
            for &x in &v[3..] {
                if x != a && x != b && x != cc {
                    if !seen {
                        d = x;
                        seen = true;
                    } else if x != d {
                        return false;
                    }
                }
            }
            if !seen {
                return false;
            }
            let s = sort4([a, b, cc, d]);
            for j in 0..4 {
                out[j] = s[j] as i32;
            }
            true
        });
        if let Some(out) = out {
            return Tcsr::from_raw_unchecked(mesh.nvertices, fixed_offsets(par, nc, 4), out);
        }
    }
    cell_vertices_general(mesh, par)
}

/// The edges of a closed tetrahedron `c` that its vertices are read from: two edges of its
/// first face (which share one vertex and so hold the face's three) and an edge of its
/// second face that the first face does not have (two faces of a tetrahedron share exactly
/// one edge; the other edges of the second face join its fourth vertex to the first face).
#[inline(always)]
fn closed_tet_edges(cfc: &[i32], fec: &[i32], c: usize) -> [usize; 3] {
    let f0 = 3 * col(cfc[4 * c]) as usize;
    let f1 = 3 * col(cfc[4 * c + 1]) as usize;
    let a = [col(fec[f0]), col(fec[f0 + 1]), col(fec[f0 + 2])];
    let (b0, b1) = (col(fec[f1]), col(fec[f1 + 1]));
    let far = if a.contains(&b0) { b1 } else { b0 };
    [a[0] as usize, a[1] as usize, far as usize]
}

/// Cell vertices of a tetrahedral mesh whose cells are known closed
/// ([`PolyMesh::cells_known_closed`]; dissertation §3.3: a closed cell of four triangles has
/// four distinct vertices, so it is a tetrahedron): the three vertices of the first face
/// from two of its edges and the fourth from one edge of the second face
/// ([`closed_tet_edges`]), sorted. Five gathers a cell (two face rows, three edges) instead
/// of twelve; on closed cells the rows are those of the checked simplex path and of the
/// general path.
fn cell_vertices_of_closed_tets(mesh: &PolyMesh, par: Par) -> Tcsr {
    let (cfc, fec) = (mesh.cell_faces.columns(), mesh.face_edges.columns());
    let ev = &mesh.edge_vertices;
    let nc = mesh.cell_faces.nrows();
    let out = fill_fixed_rows(par, nc, 4, |c, out| {
        // two-stage prefetch, as the checked path: the two face rows 2 * AHEAD cells ahead,
        // the three edges AHEAD cells ahead (their face rows fetched AHEAD cells ago)
        if c + 2 * AHEAD < nc {
            for &fv in &cfc[4 * (c + 2 * AHEAD)..4 * (c + 2 * AHEAD) + 2] {
                prefetch(&fec[3 * col(fv) as usize]);
            }
        }
        if c + AHEAD < nc {
            for e in closed_tet_edges(cfc, fec, c + AHEAD) {
                prefetch(&ev[e]);
            }
        }
        let [e0, e1, e2] = closed_tet_edges(cfc, fec, c);
        let ([p, q], [r, s], [x, y]) = (ev[e0], ev[e1], ev[e2]);
        let third = if r == p || r == q { s } else { r };
        let fourth = if x == p || x == q || x == third { y } else { x };
        let v = sort4([p, q, third, fourth]);
        for j in 0..4 {
            out[j] = v[j] as i32;
        }
        true
    })
    .expect("the closed path fills every row");
    Tcsr::from_raw_unchecked(mesh.nvertices, fixed_offsets(par, nc, 4), out)
}

/// Cell vertices by the general count -> scan -> fill path (sort, mark duplicates, compact;
/// any cell; the reference of the simplex path of [`compute_cell_vertices`]).
pub fn cell_vertices_general(mesh: &PolyMesh, par: Par) -> Tcsr {
    let cf = &mesh.cell_faces;
    let fe = &mesh.face_edges;
    let ev = &mesh.edge_vertices;
    let nc = cf.nrows();
    build_rows(
        par,
        nc,
        mesh.nvertices,
        |c| {
            cf.row(c)
                .iter()
                .map(|&fv| fe.row_len(col(fv) as usize) as u32)
                .sum()
        },
        |c, out| {
            let mut k = 0;
            for &fv in cf.row(c) {
                for &e in fe.row(col(fv) as usize) {
                    let (e, s) = decode(e);
                    let [a, b] = ev[e as usize];
                    out[k] = if s > 0 { a } else { b } as i32;
                    k += 1;
                }
            }
            let s = &mut out[..k];
            s.sort_unstable();
            dedup_sorted(s)
        },
    )
}

/// In-place dedup of a sorted slice; returns the new length.
pub fn dedup_sorted(s: &mut [i32]) -> usize {
    if s.is_empty() {
        return 0;
    }
    let mut w = 1;
    for r in 1..s.len() {
        if s[r] != s[w - 1] {
            s[w] = s[r];
            w += 1;
        }
    }
    w
}
