//! Boundary extraction (dissertation §3.4.2).
//!
//! "Using the δ3 coboundary operator that maps faces to cells, the set of boundary faces is
//! trivial to compute." For every face `f`, δ3 lists the cells using it with their
//! orientation. A cell using `f` with `+1` lies behind `f` (the face's loop is outward for
//! that cell); with `-1` it lies in front. A half-face is on the boundary when no cell lies
//! on its outer side:
//!
//! - `+f` (the face as stored) is a boundary face when no cell uses `f` with `-1`;
//! - `-f` (the face reversed) is a boundary face when no cell uses `f` with `+1`.
//!
//! In a manifold mesh this reduces to the dissertation's rule (a face with exactly one cell
//! is a boundary face, oriented outward for that cell). It also covers the non-manifold
//! cases of §3.4.2: a face with no cell gives both half-faces, and a face used more than
//! once in the same orientation (overlapping cells) is a boundary face with two or more
//! cells. The mesh is *manifold* here when every face has 1 or 2 cells, 2 only with
//! opposite orientations (a face-based criterion: cells that touch only along an edge or at
//! a vertex are not detected).
//!
//! Boundary edges are the edges of boundary faces (a pass over ∂2) and boundary vertices
//! the ends of boundary edges (a pass over ∂1); "with the boolean markers given, extracting
//! boundary elements becomes a simple compaction".
//!
//! Note on signs: Tessera's ∂3 stores `+1` where a face is outward for the cell, so the
//! outward boundary orientation is the cell's sign itself. (The dissertation phrases it as
//! "the orientation of the cell is read from δ3 and inverted", for the opposite convention.)

use crate::relations::{build_rows, face_loop};
use crate::{Point, PolyMesh};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU8, Ordering};
use tessera_core::trace::Tracer;
use tessera_core::Par;
use tessera_sparse::tcsr::{decode, encode};

/// The boundary of a volumetric mesh (dissertation §3.4.2).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Boundary {
    /// Boundary half-faces as TCSR-encoded face ids (sign = outward orientation: `f` when
    /// the stored loop points out of the solid, `!f` (= `-f-1`) when it points in), sorted
    /// by face, `+f` before `-f` for a face that is boundary on both sides.
    pub faces: Vec<i32>,
    /// Edges of boundary faces, sorted.
    pub edges: Vec<u32>,
    /// Vertices of boundary faces, sorted.
    pub vertices: Vec<u32>,
    /// Every face has 1 or 2 cells, and 2 only with opposite orientations.
    pub manifold: bool,
}

/// A polygonal surface: the boundary of a volumetric mesh as a polygon mesh.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SurfaceMesh {
    /// Positions of the surface vertices.
    pub positions: Vec<Point>,
    /// `polygon_offsets[i]..polygon_offsets[i + 1]` is polygon `i` in `polygon_vertices`.
    pub polygon_offsets: Vec<u32>,
    /// Polygon loops (surface vertex indices), counter-clockwise seen from outside.
    pub polygon_vertices: Vec<u32>,
    /// Surface vertex -> mesh vertex.
    pub vertex_map: Vec<u32>,
}

/// Per face: bit 0 = `+f` is boundary, bit 1 = `-f` is boundary, bit 2 = non-manifold face.
const fn face_flags(plus: u32, minus: u32) -> u8 {
    let mut fl = 0u8;
    if minus == 0 {
        fl |= 1;
    }
    if plus == 0 {
        fl |= 2;
    }
    let manifold = matches!((plus, minus), (1, 0) | (0, 1) | (1, 1));
    if !manifold {
        fl |= 4;
    }
    fl
}

/// [`face_flags`] of a face of one or two cells, at `(len - 1) << 2 | s0 << 1 | s1` where
/// `s0` and `s1` are the sign bits of the row's first and last cell (one cell: both the
/// same; the other two entries of a row of one are never read).
const SHORT_ROW_FLAGS: [u8; 8] = [
    face_flags(1, 0),
    face_flags(1, 0),
    face_flags(0, 1),
    face_flags(0, 1),
    face_flags(2, 0),
    face_flags(1, 1),
    face_flags(1, 1),
    face_flags(0, 2),
];

/// The flags of one face from its δ3 row `cells[a..b]`: rows of one or two cells (every
/// face of a mesh with cells) without a loop or a branch on their length, which a mix of
/// boundary and interior faces would mispredict.
#[inline(always)]
fn row_flags(cells: &[i32], a: usize, b: usize) -> u8 {
    let len = b.wrapping_sub(a);
    if (1..=2).contains(&len) {
        let s0 = (cells[a] as u32 >> 31) as usize;
        let s1 = (cells[b - 1] as u32 >> 31) as usize;
        SHORT_ROW_FLAGS[((len - 1) << 2) | (s0 << 1) | s1]
    } else {
        let row = &cells[a..b];
        let minus = row.iter().filter(|&&c| c < 0).count() as u32;
        face_flags(row.len() as u32 - minus, minus)
    }
}

/// Faces per parallel task of the boundary passes.
const FACE_CHUNK: usize = 1 << 14;

/// Extract the boundary of `mesh` (dissertation §3.4.2), using the cached δ3
/// ([`PolyMesh::face_cells`]) and `mesh.par()`. Results are identical for `Par::Seq` and
/// `Par::Rayon`.
///
/// Every pass is a count -> scan -> fill over chunks of whole rows: the face flags and the
/// number of boundary half-faces of each chunk of faces in one pass over δ3, the
/// half-faces written from each chunk's offset, the edges of the boundary half-faces (not
/// of all faces) marked, and the marked edges and vertices compacted the same way.
pub fn extract_boundary(mesh: &PolyMesh) -> Boundary {
    let par = mesh.par();
    let fc = mesh.face_cells();
    let nf = mesh.num_faces();
    let (offs, cells) = (fc.offsets(), fc.columns());
    // flags, boundary half-faces and manifoldness of each chunk of faces (one pass)
    // stage timings under TESSERA_TRACE (`tessera_core::trace`)
    let mut tr = Tracer::new(if par == Par::Seq || rayon::current_num_threads() == 1 {
        "boundary extraction, 1 thread"
    } else {
        "boundary extraction, parallel"
    });
    let mut flags = vec![0u8; nf];
    let flag_chunk = |(k, fl): (usize, &mut [u8])| -> (u32, bool) {
        let f0 = k * FACE_CHUNK;
        let (mut n, mut manifold) = (0u32, true);
        let o = &offs[f0..f0 + fl.len() + 1];
        for (j, x) in fl.iter_mut().enumerate() {
            let v = row_flags(cells, o[j] as usize, o[j + 1] as usize);
            *x = v;
            n += (v & 1) as u32 + ((v >> 1) & 1) as u32;
            manifold &= v & 4 == 0;
        }
        (n, manifold)
    };
    let chunk_counts: Vec<(u32, bool)> = match par {
        Par::Seq => flags
            .chunks_mut(FACE_CHUNK)
            .enumerate()
            .map(flag_chunk)
            .collect(),
        Par::Rayon => flags
            .par_chunks_mut(FACE_CHUNK)
            .enumerate()
            .map(flag_chunk)
            .collect(),
    };
    tr.mark("flags");
    let manifold = chunk_counts.iter().all(|c| c.1);
    // boundary half-faces, `+f` before `-f`, each chunk from its offset
    let counts: Vec<u32> = chunk_counts.iter().map(|c| c.0).collect();
    let faces = fill_chunks(par, &counts, |k, out| {
        // without a branch on the flags (boundary and interior faces alternate
        // unpredictably): both half-faces are stored at the write position, which advances
        // past each one only when it is on the boundary, so the next face overwrites the rest
        let f0 = k * FACE_CHUNK;
        let n = out.len();
        let mut w = 0;
        for (j, &fl) in flags[f0..(f0 + FACE_CHUNK).min(nf)].iter().enumerate() {
            let f = (f0 + j) as u32;
            if w < n {
                out[w] = encode(f, false);
            }
            w += usize::from(fl & 1);
            if w < n {
                out[w] = encode(f, true);
            }
            w += usize::from((fl >> 1) & 1);
        }
        debug_assert_eq!(w, n);
    });

    tr.mark("half-faces");
    // mark the edges of the boundary half-faces (a pass over their ∂2 rows), then the
    // vertices of the boundary edges (∂1)
    let fe = mesh.face_edges();
    let ev = mesh.edge_vertices();
    // the markers are zeroed pages from the allocator (no serial pass writing each one)
    let mut edge_bytes = vec![0u8; mesh.num_edges()];
    let edge_mark = as_atomic(&mut edge_bytes);
    let mark_face = |hf: &i32| {
        for &e in fe.row(decode(*hf).0 as usize) {
            edge_mark[decode(e).0 as usize].store(1, Ordering::Relaxed);
        }
    };
    match par {
        Par::Seq => faces.iter().for_each(mark_face),
        Par::Rayon => faces.par_iter().with_min_len(4096).for_each(mark_face),
    }
    tr.mark("edge marks");
    let edges = compact_marked(par, &edge_bytes);
    tr.mark("edge compaction");
    let mut vertex_bytes = vec![0u8; mesh.num_vertices()];
    let vertex_mark = as_atomic(&mut vertex_bytes);
    let mark_edge = |e: &u32| {
        for v in ev[*e as usize] {
            vertex_mark[v as usize].store(1, Ordering::Relaxed);
        }
    };
    match par {
        Par::Seq => edges.iter().for_each(mark_edge),
        Par::Rayon => edges.par_iter().with_min_len(4096).for_each(mark_edge),
    }
    tr.mark("vertex marks");
    let vertices = compact_marked(par, &vertex_bytes);
    tr.mark("vertex compaction");
    Boundary {
        faces,
        edges,
        vertices,
        manifold,
    }
}

/// The entries of chunks with `counts[k]` entries each, chunk `k` written by `fill(k,
/// out)` into its own slice (count -> scan -> fill; the chunks in parallel with
/// `Par::Rayon`).
fn fill_chunks<T, F>(par: Par, counts: &[u32], fill: F) -> Vec<T>
where
    T: Copy + Default + Send + Sync,
    F: Fn(usize, &mut [T]) + Sync,
{
    let total: usize = counts.iter().map(|&c| c as usize).sum();
    let mut out = tessera_core::bulk::filled(total, T::default(), par);
    let mut pieces: Vec<&mut [T]> = Vec::with_capacity(counts.len());
    let mut rest: &mut [T] = &mut out;
    for &c in counts {
        let (h, t) = std::mem::take(&mut rest).split_at_mut(c as usize);
        pieces.push(h);
        rest = t;
    }
    match par {
        Par::Seq => pieces.into_iter().enumerate().for_each(|(k, p)| fill(k, p)),
        Par::Rayon => pieces
            .into_par_iter()
            .enumerate()
            .for_each(|(k, p)| fill(k, p)),
    }
    out
}

/// Markers shared between threads, viewed over a byte buffer.
fn as_atomic(bytes: &mut [u8]) -> &[AtomicU8] {
    // SAFETY: `AtomicU8` has the size and alignment of `u8` (documented), so a slice of one
    // is a valid slice of the other; `bytes` is borrowed mutably for the whole lifetime of
    // the view, so nothing else reads or writes it meanwhile (`AtomicU8::from_mut_slice`,
    // not yet stable).
    unsafe { &*(bytes as *mut [u8] as *const [AtomicU8]) }
}

/// Indices of the set markers, in increasing order (count -> scan -> fill over chunks).
fn compact_marked(par: Par, mark: &[u8]) -> Vec<u32> {
    let chunks: Vec<&[u8]> = mark.chunks(FACE_CHUNK).collect();
    let count = |c: &&[u8]| c.iter().map(|&m| u32::from(m != 0)).sum::<u32>();
    let counts: Vec<u32> = match par {
        Par::Seq => chunks.iter().map(count).collect(),
        Par::Rayon => chunks.par_iter().map(count).collect(),
    };
    fill_chunks(par, &counts, |k, out| {
        // without a branch on the marks: every index is stored at the write position,
        // which advances past it only when it is marked
        let n = out.len();
        let mut w = 0;
        for (j, &m) in chunks[k].iter().enumerate() {
            if w < n {
                out[w] = (k * FACE_CHUNK + j) as u32;
            }
            w += usize::from(m != 0);
        }
        debug_assert_eq!(w, n);
    })
}

impl Boundary {
    /// A boolean mask over the mesh's vertices: `true` on boundary vertices.
    pub fn vertex_mask(&self, nvertices: usize) -> Vec<bool> {
        let mut m = vec![false; nvertices];
        for &v in &self.vertices {
            m[v as usize] = true;
        }
        m
    }

    /// The boundary as a polygon mesh: one polygon per boundary half-face, its loop
    /// reversed for `-f` so that every polygon is counter-clockwise seen from outside.
    /// Surface vertices are the boundary vertices in increasing order (`vertex_map`).
    pub fn surface(&self, mesh: &PolyMesh) -> SurfaceMesh {
        let par = mesh.par();
        let mut remap = vec![u32::MAX; mesh.num_vertices()];
        for (i, &v) in self.vertices.iter().enumerate() {
            remap[v as usize] = i as u32;
        }
        let fe = mesh.face_edges();
        let faces = &self.faces;
        let polys = build_rows(
            par,
            faces.len(),
            self.vertices.len(),
            |i| fe.row_len(decode(faces[i]).0 as usize) as u32,
            |i, out| {
                let (f, s) = decode(faces[i]);
                let n = face_loop(mesh, f as usize, out);
                if s < 0 {
                    out[1..n].reverse();
                }
                for v in &mut out[..n] {
                    *v = remap[*v as usize] as i32;
                }
                n
            },
        );
        let (_, offsets, cols) = polys.into_raw();
        let pos = mesh.positions();
        SurfaceMesh {
            positions: self.vertices.iter().map(|&v| pos[v as usize]).collect(),
            polygon_offsets: offsets,
            polygon_vertices: cols.into_iter().map(|v| v as u32).collect(),
            vertex_map: self.vertices.clone(),
        }
    }
}

impl SurfaceMesh {
    pub fn num_vertices(&self) -> usize {
        self.positions.len()
    }
    pub fn num_polygons(&self) -> usize {
        self.polygon_offsets.len().saturating_sub(1)
    }
    /// The vertex loop of polygon `i`.
    pub fn polygon(&self, i: usize) -> &[u32] {
        &self.polygon_vertices
            [self.polygon_offsets[i] as usize..self.polygon_offsets[i + 1] as usize]
    }

    /// Undirected edges `[a, b]` (a < b) with their net use: +1 for each polygon passing
    /// `a -> b`, -1 for `b -> a`. Sorted by edge.
    fn edge_uses(&self) -> Vec<(u64, i32)> {
        let mut uses: Vec<(u64, i32)> = Vec::with_capacity(self.polygon_vertices.len());
        for i in 0..self.num_polygons() {
            let p = self.polygon(i);
            for k in 0..p.len() {
                let (a, b) = (p[k], p[(k + 1) % p.len()]);
                uses.push((
                    ((a.min(b) as u64) << 32) | a.max(b) as u64,
                    if a < b { 1 } else { -1 },
                ));
            }
        }
        uses.sort_unstable();
        uses
    }

    /// The boundary of this surface, ∂ of the surface's 2-chain: the undirected edges
    /// `[a, b]` (a < b) whose uses do not cancel, with the net use (+1 per `a -> b`).
    /// Empty for a closed, consistently oriented surface, such as the boundary of a solid
    /// ("the boundary of a boundary is zero").
    pub fn surface_boundary(&self) -> Vec<([u32; 2], i32)> {
        let uses = self.edge_uses();
        let mut out = Vec::new();
        let mut i = 0;
        while i < uses.len() {
            let k = uses[i].0;
            let mut net = 0;
            while i < uses.len() && uses[i].0 == k {
                net += uses[i].1;
                i += 1;
            }
            if net != 0 {
                out.push(([(k >> 32) as u32, k as u32], net));
            }
        }
        out
    }

    /// Number of distinct undirected edges.
    pub fn num_edges(&self) -> usize {
        let uses = self.edge_uses();
        let mut n = 0;
        for i in 0..uses.len() {
            if i == 0 || uses[i].0 != uses[i - 1].0 {
                n += 1;
            }
        }
        n
    }

    /// Euler characteristic V - E + F of the surface (2 for a sphere).
    pub fn euler_characteristic(&self) -> i64 {
        self.num_vertices() as i64 - self.num_edges() as i64 + self.num_polygons() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The branch-free flags of rows of one or two cells equal the counting definition, for
    /// every sign pattern, inside the entry array and at its end; other lengths
    /// take the counting path.
    #[test]
    fn row_flags_equal_counted_flags() {
        let counted = |row: &[i32]| {
            let minus = row.iter().filter(|&&c| c < 0).count() as u32;
            face_flags(row.len() as u32 - minus, minus)
        };
        let signed = |c: i32, neg: bool| encode(c as u32, neg);
        for len in 0..=4usize {
            for pattern in 0..(1u32 << len) {
                let row: Vec<i32> = (0..len)
                    .map(|i| signed(7 + i as i32, pattern >> i & 1 == 1))
                    .collect();
                for pad in [0usize, 3] {
                    // the row at the end of the array (pad 0 after it) or inside it
                    let mut cells = vec![signed(1, true); 2];
                    let a = cells.len();
                    cells.extend(&row);
                    let b = cells.len();
                    cells.extend(std::iter::repeat_n(signed(2, true), pad));
                    assert_eq!(
                        row_flags(&cells, a, b),
                        counted(&row),
                        "row {row:?}, pad {pad}"
                    );
                }
            }
        }
        // an empty row at the very end of the entries
        assert_eq!(row_flags(&[signed(1, false)], 1, 1), face_flags(0, 0));
    }
}
