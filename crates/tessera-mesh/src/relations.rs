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

use crate::PolyMesh;
use rayon::prelude::*;
use std::sync::OnceLock;
use tessera_core::scan::offsets_from_counts;
use tessera_core::Par;
use tessera_sparse::tcsr::{col, decode, encode};
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

/// Build a TCSR matrix row by row with count -> scan -> fill. `count(r)` gives an upper
/// bound of row `r`'s length; `fill(r, out)` writes into a slice of that length and
/// returns how many entries it wrote. When counts are exact no compaction happens.
pub fn build_rows<C, F>(par: Par, nrows: usize, ncols: usize, count: C, fill: F) -> Tcsr
where
    C: Fn(usize) -> u32 + Sync,
    F: Fn(usize, &mut [i32]) -> usize + Sync,
{
    let counts: Vec<u32> = match par {
        Par::Seq => (0..nrows).map(&count).collect(),
        Par::Rayon => (0..nrows)
            .into_par_iter()
            .with_min_len(1024)
            .map(&count)
            .collect(),
    };
    let offsets = offsets_from_counts(par, &counts).expect("relation has fewer than 2^32 entries");
    let mut cols = vec![0i32; *offsets.last().unwrap() as usize];
    let written: Vec<u32> = match par {
        Par::Seq => {
            let mut w = Vec::with_capacity(nrows);
            for r in 0..nrows {
                let s = &mut cols[offsets[r] as usize..offsets[r + 1] as usize];
                w.push(fill(r, s) as u32);
            }
            w
        }
        Par::Rayon => {
            let mut rows: Vec<&mut [i32]> = Vec::with_capacity(nrows);
            let mut rest: &mut [i32] = &mut cols;
            for r in 0..nrows {
                let (h, t) = std::mem::take(&mut rest).split_at_mut(counts[r] as usize);
                rows.push(h);
                rest = t;
            }
            rows.into_par_iter()
                .with_min_len(1024)
                .enumerate()
                .map(|(r, s)| fill(r, s) as u32)
                .collect()
        }
    };
    if written == counts {
        return Tcsr::from_raw_unchecked(ncols, offsets, cols);
    }
    // compaction (dissertation §3.4.1: "the vertex array is compacted")
    let new_offsets = offsets_from_counts(par, &written).expect("fits");
    let mut out = vec![0i32; *new_offsets.last().unwrap() as usize];
    for r in 0..nrows {
        let n = written[r] as usize;
        out[new_offsets[r] as usize..new_offsets[r] as usize + n]
            .copy_from_slice(&cols[offsets[r] as usize..offsets[r] as usize + n]);
    }
    Tcsr::from_raw_unchecked(ncols, new_offsets, out)
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
/// sorted by edge, identical for `Par::Seq` and `Par::Rayon`.
pub fn transpose_edge_vertices(edge_vertices: &[[u32; 2]], nvertices: usize, par: Par) -> Tcsr {
    let mut counts = vec![0u32; nvertices];
    for &[a, b] in edge_vertices {
        counts[a as usize] += 1;
        counts[b as usize] += 1;
    }
    let offsets = offsets_from_counts(par, &counts).expect("2 * edges fits in u32");
    let nnz = *offsets.last().unwrap() as usize;
    match par {
        Par::Seq => {
            // edges in increasing order: every row comes out sorted by edge
            let mut cursor = offsets[..nvertices].to_vec();
            let mut out = vec![0i32; nnz];
            for (e, &[a, b]) in edge_vertices.iter().enumerate() {
                for (v, neg) in [(a, true), (b, false)] {
                    let o = &mut cursor[v as usize];
                    out[*o as usize] = encode(e as u32, neg);
                    *o += 1;
                }
            }
            Tcsr::from_raw_unchecked(edge_vertices.len(), offsets, out)
        }
        Par::Rayon => {
            use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
            let cursor: Vec<AtomicU32> = offsets[..nvertices]
                .par_iter()
                .map(|&o| AtomicU32::new(o))
                .collect();
            let slots: Vec<AtomicI32> = (0..nnz)
                .into_par_iter()
                .map(|_| AtomicI32::new(0))
                .collect();
            edge_vertices
                .par_iter()
                .enumerate()
                .with_min_len(4096)
                .for_each(|(e, &[a, b])| {
                    for (v, neg) in [(a, true), (b, false)] {
                        let o = cursor[v as usize].fetch_add(1, Ordering::Relaxed);
                        slots[o as usize].store(encode(e as u32, neg), Ordering::Relaxed);
                    }
                });
            let out: Vec<i32> = slots.into_iter().map(AtomicI32::into_inner).collect(); // reuses the allocation (same layout)
            let mut t = Tcsr::from_raw_unchecked(edge_vertices.len(), offsets, out);
            t.sort_rows(par);
            t
        }
    }
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

impl PolyMesh {
    /// δ1 = ∂1ᵀ: vertex -> signed incident edges (+1 where the edge points to the vertex).
    /// Dissertation §3.4.1 ("the transposition of edges uses a modified version of
    /// TCSRtoTCSC").
    pub fn vertex_edges(&self) -> &Tcsr {
        self.cache
            .vertex_edges
            .get_or_init(|| transpose_edge_vertices(&self.edge_vertices, self.nvertices, self.par))
    }

    /// δ2 = ∂2ᵀ: edge -> signed incident faces.
    pub fn edge_faces(&self) -> &Tcsr {
        self.cache
            .edge_faces
            .get_or_init(|| self.face_edges.transpose(self.par))
    }

    /// δ3 = ∂3ᵀ: face -> signed incident cells.
    pub fn face_cells(&self) -> &Tcsr {
        self.cache
            .face_cells
            .get_or_init(|| self.cell_faces.transpose(self.par))
    }

    /// ∂̂2¹: face -> ordered vertex loop (positive entries). Dissertation §3.4.1: "can be
    /// computed without previously counting the vertices of each face, as each face forms
    /// a closed loop".
    pub fn face_vertices(&self) -> &Tcsr {
        self.cache
            .face_vertices
            .get_or_init(|| compute_face_vertices(self, self.par))
    }

    /// ∂̂3¹: cell -> its edges, sorted (positive entries).
    pub fn cell_edges(&self) -> &Tcsr {
        self.cache
            .cell_edges
            .get_or_init(|| compute_cell_edges(self, self.par))
    }

    /// ∂̂3²: cell -> its vertices, sorted (positive entries).
    pub fn cell_vertices(&self) -> &Tcsr {
        self.cache
            .cell_vertices
            .get_or_init(|| compute_cell_vertices(self, self.par))
    }

    /// vertex -> incident cells, the transpose of ∂̂3².
    pub fn vertex_cells(&self) -> &Tcsr {
        let cv = self.cell_vertices();
        self.cache
            .vertex_cells
            .get_or_init(|| cv.transpose(self.par))
    }

    /// edge -> incident cells, the transpose of ∂̂3¹.
    pub fn edge_cells(&self) -> &Tcsr {
        let ce = self.cell_edges();
        self.cache.edge_cells.get_or_init(|| ce.transpose(self.par))
    }
}

/// Face vertex loops, computed without caching.
pub fn compute_face_vertices(mesh: &PolyMesh, par: Par) -> Tcsr {
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
pub fn compute_cell_edges(mesh: &PolyMesh, par: Par) -> Tcsr {
    let cf = &mesh.cell_faces;
    let fe = &mesh.face_edges;
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
    build_rows(par, cf.nrows(), mesh.num_edges(), count, |c, out| {
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
pub fn compute_cell_vertices(mesh: &PolyMesh, par: Par) -> Tcsr {
    let cf = &mesh.cell_faces;
    let fe = &mesh.face_edges;
    let ev = &mesh.edge_vertices;
    build_rows(
        par,
        cf.nrows(),
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
