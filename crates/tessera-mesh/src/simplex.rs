//! The compact simplex mesh (dissertation §3.4.4).
//!
//! For a d-dimensional homogeneous simplicial complex (triangle meshes, d = 2; tetrahedral
//! meshes, d = 3) the cell-to-vertex operator d̂_d^{d-1} is sufficient to represent the
//! topology "when a prescribed column index order is used": it is stored as the
//! `n x (d + 1)` row-major array `cellVertices` (dissertation Fig. 3.10), and the order of
//! the indices in a row encodes the cell's orientation.
//!
//! Everything else is derived on request and cached (like the relations of a
//! [`PolyMesh`]):
//!
//! - **lower-dimensional simplices** by sort + unique of sorted vertex tuples
//!   (dissertation §3.4.4): [`SimplexMesh::edges`] (sorted pairs `[a, b]`, `a < b`, in
//!   lexicographic order; d̂_1 = ∂1 with -1 at `a` and +1 at `b`) and, for d = 3,
//!   [`SimplexMesh::faces`] (sorted triples in lexicographic order). This is the same
//!   canonical numbering as [`crate::PolyMeshBuilder`] uses;
//! - **top-down operators with implicit offsets** (Eqs. 3.11-3.13): a k-simplex contains
//!   `C(k+1, l+1)` l-simplices, so every row has a constant length and the offsets array
//!   is omitted. They are found by binary search of the sorted tuple of each sub-simplex
//!   (dissertation: "an O(log2 n) binary search for the sorted tuple"):
//!   - [`SimplexMesh::cell_facets`]: ∂d, `d + 1` TCSR-encoded facets per cell,
//!   - [`SimplexMesh::face_edges`]: ∂2 for d = 3, 3 encoded edges per face,
//!   - [`SimplexMesh::cell_edges`] (`C(d+1, 2)` per cell) and [`SimplexMesh::cell_faces`]
//!     (4 per tetrahedron), unsigned indirect relations;
//! - **bottom-up operators** by transposition ([`Tcsr::transpose`], dissertation
//!   §3.4.4: "computed via transposition as described in Section 3.4.1 ... the offsets of
//!   the input matrix are determined implicitly").
//!
//! # Canonical local order
//!
//! Sub-simplices of a cell are listed in **combination order**: the lexicographic order of
//! the combinations of local vertex positions, as in the table under Eq. 3.14:
//!
//! | d | local edges ([`local_edges`]) | local faces / facets ([`TET_FACES`]) |
//! |---|---|---|
//! | 2 | (0,1) (0,2) (1,2) | (the facets are the edges) |
//! | 3 | (0,1) (0,2) (0,3) (1,2) (1,3) (2,3) | (0,1,2) (0,1,3) (0,2,3) (1,2,3) |
//!
//! Local position `j` refers to the cell's `j`-th entry of `cellVertices`. Facet `i` of a
//! cell omits local vertex `d - i`. The edges of a face (`face_edges`) are likewise in
//! combination order of the face's sorted vertices `a < b < c`: `(a,b) (a,c) (b,c)`.
//!
//! # Orientation (Eq. 3.14)
//!
//! The orientation of facet `i` (combination index `i`) of a cell is
//! `o = (-1)^(i + s)`, where `s` is the number of swaps needed to sort the global vertex
//! indices of the combination ([`facet_orientation`]). For a triangle `(v0, v1, v2)` this
//! is the boundary of the loop `v0 -> v1 -> v2`. For a tetrahedron this makes the facets
//! of `(v0, v1, v2, v3)` oriented outward (in the sense of the canonical face loops
//! `a -> b -> c`, right-hand rule) exactly when `det(v1 - v0, v2 - v0, v3 - v0) < 0`, as for
//! both cells of the example of Figs. 3.5 and 3.10. This is the opposite sign of the
//! VTK/Gmsh convention: a VTK-positive tetrahedron has inward facets here (see
//! [`SimplexMesh::cell_orientations`]).
//!
//! # Conversion to and from [`PolyMesh`]
//!
//! [`SimplexMesh::to_poly`] and [`SimplexMesh::from_poly`] are lossless inverses:
//! `from_poly(to_poly(m)) == m` exactly (cell vertex order included). For d = 3 the
//! polyhedral mesh has the derived edges and faces (canonical loops `a -> b -> c`) and ∂3
//! rows listing the facets in combination order with the signs of Eq. 3.14; the vertex
//! order of each cell is recovered from that order (facet `i` omits vertex `3 - i`). A
//! triangle mesh (d = 2) becomes a polyhedral surface: one face per cell, in cell order,
//! whose loop is `v0 -> v1 -> v2`, and no cells.

use crate::relations::{edge_vertices_tcsr, face_loop};
use crate::{MeshError, Point, PolyMesh};
use rayon::prelude::*;
use std::sync::OnceLock;

use crate::relations::{cached, cached_vec};
use tessera_core::Par;
use tessera_sparse::tcsr::{col, decode, encode};
use tessera_sparse::Tcsr;

/// Local edges of a triangle in combination order.
pub const TRI_EDGES: [[usize; 2]; 3] = [[0, 1], [0, 2], [1, 2]];
/// Local edges of a tetrahedron in combination order.
pub const TET_EDGES: [[usize; 2]; 6] = [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]];
/// Local faces (facets) of a tetrahedron in combination order (Eq. 3.14 table).
pub const TET_FACES: [[usize; 3]; 4] = [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]];

/// Local edges of a `d`-simplex (d = 2, 3) in combination order.
pub fn local_edges(d: usize) -> &'static [[usize; 2]] {
    if d == 2 {
        &TRI_EDGES
    } else {
        &TET_EDGES
    }
}

/// Number of swaps (inversions) needed to sort `v`: the `s` of Eq. 3.14.
pub fn sort_swaps(v: &[u32]) -> usize {
    let mut s = 0;
    for i in 0..v.len() {
        for j in i + 1..v.len() {
            s += (v[i] > v[j]) as usize;
        }
    }
    s
}

/// Orientation `o = (-1)^(i + s)` of the facet with combination index `i` whose global
/// vertex indices, in local order, are `global` (dissertation Eq. 3.14).
pub fn facet_orientation(i: usize, global: &[u32]) -> i32 {
    if (i + sort_swaps(global)) % 2 == 0 {
        1
    } else {
        -1
    }
}

/// Derived relations of a [`SimplexMesh`], computed on request.
#[derive(Clone, Debug, Default)]
struct SimplexCache {
    edges: OnceLock<Vec<[u32; 2]>>,
    faces: OnceLock<Vec<[u32; 3]>>,
    edge_starts: OnceLock<Vec<u32>>,
    face_starts: OnceLock<Vec<u32>>,
    cell_edges: OnceLock<Vec<u32>>,
    cell_faces: OnceLock<Vec<u32>>,
    cell_facets: OnceLock<Vec<i32>>,
    face_edges: OnceLock<Vec<i32>>,
    vertex_edges: OnceLock<Tcsr>,
    edge_faces: OnceLock<Tcsr>,
    facet_cells: OnceLock<Tcsr>,
    vertex_cells: OnceLock<Tcsr>,
    edge_cells: OnceLock<Tcsr>,
    face_cells: OnceLock<Tcsr>,
}

/// A triangle (d = 2) or tetrahedral (d = 3) mesh stored as `cellVertices`
/// (dissertation §3.4.4, Fig. 3.10). See the [module docs](self) for the conventions.
#[derive(Clone, Debug)]
pub struct SimplexMesh {
    dim: usize,
    cell_vertices: Vec<u32>,
    positions: Vec<Point>,
    par: Par,
    cache: SimplexCache,
}

impl PartialEq for SimplexMesh {
    /// Meshes are equal when dimension, `cellVertices` and positions are equal (exactly).
    fn eq(&self, other: &Self) -> bool {
        self.dim == other.dim
            && self.cell_vertices == other.cell_vertices
            && self.positions == other.positions
    }
}

/// Spread the low 21 bits of `x` to every third bit (Morton codes).
fn spread21(x: u64) -> u64 {
    let mut x = x & 0x1f_ffff;
    x = (x | x << 32) & 0x1f_0000_0000_ffff;
    x = (x | x << 16) & 0x1f_0000_ff00_00ff;
    x = (x | x << 8) & 0x100f_00f0_0f00_f00f;
    x = (x | x << 4) & 0x10c3_0c30_c30c_30c3;
    x = (x | x << 2) & 0x1249_2492_4924_9249;
    x
}

fn par_sort<T: Ord + Send>(par: Par, v: &mut [T]) {
    match par {
        Par::Seq => v.sort_unstable(),
        Par::Rayon => v.par_sort_unstable(),
    }
}

/// Fill `out` in rows of `stride` entries with `f(row, row_slice)`.
fn fill_rows<T: Send, F: Fn(usize, &mut [T]) + Sync + Send>(
    par: Par,
    out: &mut [T],
    stride: usize,
    f: F,
) {
    if stride == 0 {
        return;
    }
    match par {
        Par::Seq => out
            .chunks_mut(stride)
            .enumerate()
            .for_each(|(r, s)| f(r, s)),
        Par::Rayon => out
            .par_chunks_mut(stride)
            .with_min_len(1024)
            .enumerate()
            .for_each(|(r, s)| f(r, s)),
    }
}

/// A TCSR matrix with implicit (constant-stride) offsets made explicit, for transposition.
fn strided_tcsr(ncols: usize, stride: usize, columns: Vec<i32>) -> Tcsr {
    let nrows = if stride == 0 {
        0
    } else {
        columns.len() / stride
    };
    let offsets: Vec<u32> = (0..=nrows).map(|r| (r * stride) as u32).collect();
    Tcsr::from_raw_unchecked(ncols, offsets, columns)
}

impl SimplexMesh {
    /// A simplex mesh of dimension `dim` (2: triangles, 3: tetrahedra) from its
    /// `cellVertices` (`n x (dim + 1)`, row-major) and vertex positions.
    ///
    /// Errors: a dimension other than 2 or 3, a `cell_vertices` length that is not a
    /// multiple of `dim + 1`, a vertex index out of range, a cell that repeats a vertex, a
    /// non-finite position, or more than `i32::MAX` vertices.
    pub fn new(
        dim: usize,
        cell_vertices: Vec<u32>,
        positions: Vec<Point>,
    ) -> Result<Self, MeshError> {
        if dim != 2 && dim != 3 {
            return Err(MeshError::Unsupported(format!(
                "simplex meshes of dimension {dim}; only 2 and 3 are supported"
            )));
        }
        let nv = positions.len();
        if nv > i32::MAX as usize {
            return Err(MeshError::Unsupported(format!(
                "{nv} vertices; at most 2^31 - 1 are supported"
            )));
        }
        let m = dim + 1;
        if cell_vertices.len() % m != 0 {
            return Err(MeshError::InvalidTopology(format!(
                "cellVertices has {} entries, not a multiple of {m}",
                cell_vertices.len()
            )));
        }
        for (v, p) in positions.iter().enumerate() {
            if !p.iter().all(|x| x.is_finite()) {
                return Err(MeshError::NonFinitePosition { vertex: v });
            }
        }
        for (c, row) in cell_vertices.chunks(m).enumerate() {
            for (i, &v) in row.iter().enumerate() {
                if v as usize >= nv {
                    return Err(MeshError::IndexOutOfRange {
                        what: "vertex",
                        index: v as u64,
                        len: nv,
                    });
                }
                if row[..i].contains(&v) {
                    return Err(MeshError::InvalidTopology(format!(
                        "cell {c} {row:?} repeats vertex {v}"
                    )));
                }
            }
        }
        Ok(SimplexMesh {
            dim,
            cell_vertices,
            positions,
            par: Par::auto(),
            cache: SimplexCache::default(),
        })
    }

    /// Set the execution choice for derived relations (results are identical either way).
    pub fn with_par(mut self, par: Par) -> Self {
        self.par = par;
        self
    }
    /// Set the execution choice for derived relations (results are identical either way).
    pub fn set_par(&mut self, par: Par) {
        self.par = par;
    }
    /// The execution choice used for derived relations.
    pub fn par(&self) -> Par {
        self.par
    }

    /// Topological dimension d (2 or 3).
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Vertices per cell, `d + 1`.
    pub fn vertices_per_cell(&self) -> usize {
        self.dim + 1
    }
    pub fn num_vertices(&self) -> usize {
        self.positions.len()
    }
    pub fn num_cells(&self) -> usize {
        self.cell_vertices.len() / (self.dim + 1)
    }
    /// Number of edges (derives the edges).
    pub fn num_edges(&self) -> usize {
        self.edges().len()
    }
    /// Number of 2-simplices: the derived faces for d = 3, the cells for d = 2.
    pub fn num_faces(&self) -> usize {
        if self.dim == 2 {
            self.num_cells()
        } else {
            self.faces().len()
        }
    }
    /// Euler characteristic V - E + F (- C for d = 3).
    pub fn euler_characteristic(&self) -> i64 {
        let (v, e, f) = (
            self.num_vertices() as i64,
            self.num_edges() as i64,
            self.num_faces() as i64,
        );
        if self.dim == 2 {
            v - e + f
        } else {
            v - e + f - self.num_cells() as i64
        }
    }

    /// `cellVertices`, `n x (d + 1)` row-major (d̂_d^{d-1} with its column order).
    pub fn cell_vertices(&self) -> &[u32] {
        &self.cell_vertices
    }
    /// The vertices of cell `c` in their stored (orientation-defining) order.
    #[inline]
    pub fn cell(&self, c: usize) -> &[u32] {
        let m = self.dim + 1;
        &self.cell_vertices[c * m..(c + 1) * m]
    }
    pub fn positions(&self) -> &[Point] {
        &self.positions
    }
    /// Mutable positions (the topology caches do not depend on geometry).
    pub fn positions_mut(&mut self) -> &mut Vec<Point> {
        &mut self.positions
    }
    /// Take `(dim, cell_vertices, positions)`.
    pub fn into_parts(self) -> (usize, Vec<u32>, Vec<Point>) {
        (self.dim, self.cell_vertices, self.positions)
    }

    /// Renumber for memory locality: vertices in the order of a Morton (Z-order) curve
    /// through their positions, cells in the Morton order of their centroids (ties by the
    /// old index). Each cell keeps its vertex order, so orientations are unchanged; derived
    /// relations are recomputed on demand. Returns `new_of_old` for the vertices. Meshes
    /// written by mesh generators often number vertices with little locality (the shared
    /// benchmark meshes: median |i - j| over edges 0.14-0.26 |V|), which makes every
    /// gather of a sparse matrix-vector product a cache miss (dissertation §4.5).
    pub fn renumber_morton(&mut self) -> Vec<u32> {
        self.renumber_morton_with_cells().0
    }

    /// [`Self::renumber_morton`], also returning the old index of every new cell (so that
    /// a cell can be named by its place in the file it came from).
    pub fn renumber_morton_with_cells(&mut self) -> (Vec<u32>, Vec<u32>) {
        let nv = self.positions.len();
        let m = self.dim + 1;
        if nv == 0 {
            return (Vec::new(), (0..self.num_cells() as u32).collect());
        }
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for p in &self.positions {
            for k in 0..3 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        let ext = (0..3).map(|k| hi[k] - lo[k]).fold(0.0f64, f64::max);
        let scale = if ext > 0.0 {
            ((1u64 << 21) - 1) as f64 / ext
        } else {
            0.0
        };
        let code = |p: &Point| -> u64 {
            let mut c = 0u64;
            for k in 0..3 {
                let q = (((p[k] - lo[k]) * scale) as u64).min((1 << 21) - 1);
                c |= spread21(q) << k;
            }
            c
        };
        let par = self.par;
        let mut order: Vec<(u64, u32)> = match par {
            Par::Seq => self
                .positions
                .iter()
                .enumerate()
                .map(|(i, p)| (code(p), i as u32))
                .collect(),
            Par::Rayon => self
                .positions
                .par_iter()
                .enumerate()
                .map(|(i, p)| (code(p), i as u32))
                .collect(),
        };
        par_sort(par, &mut order);
        let mut new_of_old = vec![0u32; nv];
        for (new, &(_, old)) in order.iter().enumerate() {
            new_of_old[old as usize] = new as u32;
        }
        self.positions = order
            .iter()
            .map(|&(_, old)| self.positions[old as usize])
            .collect();
        drop(order);
        let nc = self.num_cells();
        let pos = &self.positions;
        let cv = &self.cell_vertices;
        let cell_code = |c: usize| -> (u64, u32) {
            let mut g = [0.0; 3];
            for &v in &cv[c * m..(c + 1) * m] {
                let p = pos[new_of_old[v as usize] as usize];
                for k in 0..3 {
                    g[k] += p[k] / m as f64;
                }
            }
            (code(&g), c as u32)
        };
        let mut corder: Vec<(u64, u32)> = match par {
            Par::Seq => (0..nc).map(cell_code).collect(),
            Par::Rayon => (0..nc).into_par_iter().map(cell_code).collect(),
        };
        par_sort(par, &mut corder);
        let mut out = vec![0u32; nc * m];
        fill_rows(par, &mut out, m, |c, row| {
            let old = corder[c].1 as usize;
            for (slot, &v) in row.iter_mut().zip(&cv[old * m..(old + 1) * m]) {
                *slot = new_of_old[v as usize];
            }
        });
        self.cell_vertices = out;
        self.cache = SimplexCache::default();
        (new_of_old, corder.into_iter().map(|(_, old)| old).collect())
    }

    /// Bytes of the always-stored topology: `cellVertices` only, 4 bytes per entry
    /// (`4 n (d + 1)`; dissertation Fig. 3.10). Positions ([`Self::geometry_bytes`]) and the
    /// derived, cached relations ([`Self::cached_bytes`]) are not counted.
    pub fn topology_bytes(&self) -> usize {
        self.cell_vertices.len() * 4
    }
    /// Bytes of the positions array (f64).
    pub fn geometry_bytes(&self) -> usize {
        self.positions.len() * 24
    }
    /// Bytes held by the derived relations currently cached.
    pub fn cached_bytes(&self) -> usize {
        let c = &self.cache;
        let v = |o: &OnceLock<Vec<u32>>| o.get().map_or(0, |v| v.len() * 4);
        let i = |o: &OnceLock<Vec<i32>>| o.get().map_or(0, |v| v.len() * 4);
        let t = |o: &OnceLock<Tcsr>| o.get().map_or(0, |t| t.bytes());
        c.edges.get().map_or(0, |v| v.len() * 8)
            + c.faces.get().map_or(0, |v| v.len() * 12)
            + v(&c.edge_starts)
            + v(&c.face_starts)
            + v(&c.cell_edges)
            + v(&c.cell_faces)
            + i(&c.cell_facets)
            + i(&c.face_edges)
            + t(&c.vertex_edges)
            + t(&c.edge_faces)
            + t(&c.facet_cells)
            + t(&c.vertex_cells)
            + t(&c.edge_cells)
            + t(&c.face_cells)
    }
    /// Drop all cached derived relations.
    pub fn purge_caches(&mut self) {
        self.cache = SimplexCache::default();
    }

    /// The edges: sorted vertex pairs `[a, b]` with `a < b`, in lexicographic order, by
    /// sort + unique over all cells (dissertation §3.4.4). Edge `e` is oriented `a -> b`.
    pub fn edges(&self) -> &[[u32; 2]] {
        cached_vec(&self.cache.edges, || {
            let m = self.dim + 1;
            let le = local_edges(self.dim);
            // sorted pairs packed as u64 keys (a << 32 | b): lexicographic order of the pairs
            let mut keys = vec![0u64; self.num_cells() * le.len()];
            fill_rows(self.par, &mut keys, le.len(), |c, out| {
                let cv = &self.cell_vertices[c * m..(c + 1) * m];
                for (k, &[i, j]) in le.iter().enumerate() {
                    let (a, b) = (cv[i], cv[j]);
                    out[k] = ((a.min(b) as u64) << 32) | a.max(b) as u64;
                }
            });
            par_sort(self.par, &mut keys);
            keys.dedup();
            keys.iter().map(|&k| [(k >> 32) as u32, k as u32]).collect()
        })
    }

    /// The faces of a tetrahedral mesh: sorted vertex triples in lexicographic order, by
    /// sort + unique (dissertation §3.4.4). Empty for d = 2 (there the cells are the
    /// 2-simplices).
    pub fn faces(&self) -> &[[u32; 3]] {
        cached_vec(&self.cache.faces, || {
            if self.dim != 3 {
                return Vec::new();
            }
            let nc = self.num_cells();
            if nc * 4 > u32::MAX as usize {
                // sorted triples packed as u128 keys (a << 64 | b << 32 | c)
                let mut keys = vec![0u128; nc * 4];
                fill_rows(self.par, &mut keys, 4, |c, out| {
                    let cv = self.cell(c);
                    for (k, f) in TET_FACES.iter().enumerate() {
                        let mut t = [cv[f[0]], cv[f[1]], cv[f[2]]];
                        t.sort_unstable();
                        out[k] = ((t[0] as u128) << 64) | ((t[1] as u128) << 32) | t[2] as u128;
                    }
                });
                par_sort(self.par, &mut keys);
                keys.dedup();
                return keys
                    .iter()
                    .map(|&k| [(k >> 64) as u32, (k >> 32) as u32, k as u32])
                    .collect();
            }
            // sorted triple and the slot `4 c + i` of the cell's facet in one u128
            // (a << 96 | b << 64 | c << 32 | slot): one sort gives the faces in lexicographic
            // order and, on the scan, the facet -> face map, so `cell_facets` needs no search
            let mut keys = vec![0u128; nc * 4];
            fill_rows(self.par, &mut keys, 4, |c, out| {
                let cv = self.cell(c);
                for (k, f) in TET_FACES.iter().enumerate() {
                    let mut t = [cv[f[0]], cv[f[1]], cv[f[2]]];
                    t.sort_unstable();
                    out[k] = ((t[0] as u128) << 96)
                        | ((t[1] as u128) << 64)
                        | ((t[2] as u128) << 32)
                        | (4 * c + k) as u128;
                }
            });
            par_sort(self.par, &mut keys);
            let mut faces = Vec::with_capacity(nc * 2 + 16);
            let mut slot_face = vec![0u32; nc * 4];
            let mut prev = u128::MAX;
            for &k in &keys {
                let f = k >> 32;
                if f != prev {
                    faces.push([(k >> 96) as u32, (k >> 64) as u32, (k >> 32) as u32]);
                    prev = f;
                }
                slot_face[k as u32 as usize] = (faces.len() - 1) as u32;
            }
            drop(keys);
            let mut facets = vec![0i32; nc * 4];
            fill_rows(self.par, &mut facets, 4, |c, row| {
                let cv = self.cell(c);
                for (i, f) in TET_FACES.iter().enumerate() {
                    let g = [cv[f[0]], cv[f[1]], cv[f[2]]];
                    row[i] = encode(slot_face[4 * c + i], facet_orientation(i, &g) < 0);
                }
            });
            let _ = self.cache.cell_facets.set(facets);
            faces
        })
    }

    /// Offsets of the sorted edges by their first vertex: the edges `[v, *]` are
    /// `edges()[s[v]..s[v + 1]]` (count -> scan). Narrows the binary searches of the
    /// top-down operators to one vertex's edges.
    fn edge_starts(&self) -> &[u32] {
        cached_vec(&self.cache.edge_starts, || {
            first_vertex_offsets(self.num_vertices(), self.edges().iter().map(|e| e[0]))
        })
    }
    /// Offsets of the sorted faces by their first vertex (see `edge_starts`).
    fn face_starts(&self) -> &[u32] {
        cached_vec(&self.cache.face_starts, || {
            first_vertex_offsets(self.num_vertices(), self.faces().iter().map(|f| f[0]))
        })
    }
    /// Edge index of the sorted pair `a < b` (binary search among the edges of `a`).
    #[inline]
    fn edge_index(&self, a: u32, b: u32) -> Option<u32> {
        let s = self.edge_starts();
        let lo = s[a as usize] as usize;
        let row = &self.edges()[lo..s[a as usize + 1] as usize];
        row.binary_search_by_key(&b, |e| e[1])
            .ok()
            .map(|i| (lo + i) as u32)
    }
    /// Face index of the sorted triple (binary search among the faces of its first vertex).
    #[inline]
    fn face_index(&self, t: [u32; 3]) -> Option<u32> {
        let s = self.face_starts();
        let lo = s[t[0] as usize] as usize;
        let row = &self.faces()[lo..s[t[0] as usize + 1] as usize];
        row.binary_search(&t).ok().map(|i| (lo + i) as u32)
    }

    /// Index of the edge `{a, b}` (either order), if it exists.
    pub fn find_edge(&self, a: u32, b: u32) -> Option<u32> {
        if a.max(b) as usize >= self.num_vertices() {
            return None;
        }
        self.edge_index(a.min(b), a.max(b))
    }
    /// Index of the face `{a, b, c}` (any order), if it exists (d = 3).
    pub fn find_face(&self, a: u32, b: u32, c: u32) -> Option<u32> {
        let mut t = [a, b, c];
        t.sort_unstable();
        if self.dim != 3 || t[2] as usize >= self.num_vertices() {
            return None;
        }
        self.face_index(t)
    }

    /// d̂_d^1: the edges of every cell, `C(d+1, 2)` per cell (3 or 6) in the canonical local
    /// order [`local_edges`], unsigned, implicit offsets (Eq. 3.13).
    pub fn cell_edges_array(&self) -> &[u32] {
        cached_vec(&self.cache.cell_edges, || {
            self.edge_starts();
            let m = self.dim + 1;
            let le = local_edges(self.dim);
            let mut out = vec![0u32; self.num_cells() * le.len()];
            fill_rows(self.par, &mut out, le.len(), |c, row| {
                let cv = &self.cell_vertices[c * m..(c + 1) * m];
                for (k, &[i, j]) in le.iter().enumerate() {
                    let (a, b) = (cv[i], cv[j]);
                    row[k] = self.edge_index(a.min(b), a.max(b)).expect("derived edge");
                }
            });
            out
        })
    }

    /// The edges of cell `c` in canonical local order (length 3 for d = 2, 6 for d = 3).
    #[inline]
    pub fn cell_edges(&self, c: usize) -> &[u32] {
        let n = local_edges(self.dim).len();
        &self.cell_edges_array()[c * n..(c + 1) * n]
    }

    /// ∂d: the facets of every cell, `d + 1` TCSR-encoded entries per cell (implicit
    /// offsets, Eq. 3.12), facet `i` = combination `i` with orientation `(-1)^(i+s)`
    /// (Eq. 3.14). Facets are faces for d = 3 and edges for d = 2.
    pub fn cell_facets(&self) -> &[i32] {
        if self.dim == 3 {
            // deriving the faces sets the facets too (one sort, no searches)
            self.faces();
        }
        cached_vec(&self.cache.cell_facets, || {
            let m = self.dim + 1;
            let mut out = vec![0i32; self.num_cells() * m];
            if self.dim == 3 {
                self.face_starts();
                fill_rows(self.par, &mut out, 4, |c, row| {
                    let cv = self.cell(c);
                    for (i, f) in TET_FACES.iter().enumerate() {
                        let g = [cv[f[0]], cv[f[1]], cv[f[2]]];
                        let mut t = g;
                        t.sort_unstable();
                        let fi = self.face_index(t).expect("derived face");
                        row[i] = encode(fi, facet_orientation(i, &g) < 0);
                    }
                });
            } else {
                self.edge_starts();
                fill_rows(self.par, &mut out, 3, |c, row| {
                    let cv = self.cell(c);
                    for (i, e) in TRI_EDGES.iter().enumerate() {
                        let g = [cv[e[0]], cv[e[1]]];
                        let ei = self
                            .edge_index(g[0].min(g[1]), g[0].max(g[1]))
                            .expect("derived edge");
                        row[i] = encode(ei, facet_orientation(i, &g) < 0);
                    }
                });
            }
            out
        })
    }

    /// The encoded facets of cell `c` (see [`Self::cell_facets`]).
    #[inline]
    pub fn cell_facets_of(&self, c: usize) -> &[i32] {
        let m = self.dim + 1;
        &self.cell_facets()[c * m..(c + 1) * m]
    }

    /// d̂_3^1 restricted to faces: the faces of every tetrahedron, 4 per cell in combination
    /// order ([`TET_FACES`]), unsigned. Empty for d = 2.
    pub fn cell_faces_array(&self) -> &[u32] {
        cached_vec(&self.cache.cell_faces, || {
            if self.dim != 3 {
                return Vec::new();
            }
            let facets = self.cell_facets();
            match self.par {
                Par::Seq => facets.iter().map(|&v| col(v)).collect(),
                Par::Rayon => facets
                    .par_iter()
                    .with_min_len(4096)
                    .map(|&v| col(v))
                    .collect(),
            }
        })
    }

    /// The faces of tetrahedron `c` in combination order (empty for d = 2).
    #[inline]
    pub fn cell_faces(&self, c: usize) -> &[u32] {
        if self.dim != 3 {
            return &[];
        }
        &self.cell_faces_array()[c * 4..(c + 1) * 4]
    }

    /// ∂2 of a tetrahedral mesh: 3 TCSR-encoded edges per face (implicit offsets), in
    /// combination order of the sorted face `a < b < c`: `+(a,b), -(a,c), +(b,c)`
    /// (Eq. 3.14 with `s = 0`). Empty for d = 2 (use [`Self::cell_facets`]).
    pub fn face_edges(&self) -> &[i32] {
        cached_vec(&self.cache.face_edges, || {
            if self.dim != 3 {
                return Vec::new();
            }
            let faces = self.faces();
            self.edge_starts();
            let mut out = vec![0i32; faces.len() * 3];
            fill_rows(self.par, &mut out, 3, |f, row| {
                let [a, b, c] = faces[f];
                let find = |x: u32, y: u32| self.edge_index(x, y).expect("derived edge");
                row[0] = encode(find(a, b), false);
                row[1] = encode(find(a, c), true);
                row[2] = encode(find(b, c), false);
            });
            out
        })
    }

    /// The encoded edges of face `f` (d = 3).
    #[inline]
    pub fn face_edges_of(&self, f: usize) -> &[i32] {
        &self.face_edges()[f * 3..(f + 1) * 3]
    }

    /// δ1 = ∂1ᵀ: vertex -> signed edges (+1 where the edge ends at the vertex), by
    /// transposition; rows sorted by edge.
    pub fn vertex_edges(&self) -> &Tcsr {
        cached(&self.cache.vertex_edges, || {
            edge_vertices_tcsr(self.edges(), self.num_vertices()).transpose(self.par)
        })
    }

    /// δ2 = ∂2ᵀ for d = 3: edge -> signed faces, by transposition (empty matrix for d = 2).
    pub fn edge_faces(&self) -> &Tcsr {
        cached(&self.cache.edge_faces, || {
            if self.dim != 3 {
                return Tcsr::empty(self.num_edges(), 0);
            }
            strided_tcsr(self.num_edges(), 3, self.face_edges().to_vec()).transpose(self.par)
        })
    }

    /// δd = ∂dᵀ: facet -> signed cells (faces for d = 3, edges for d = 2), by transposition.
    /// A +1 entry means the facet's orientation agrees with the cell's (Eq. 3.14).
    pub fn facet_cells(&self) -> &Tcsr {
        cached(&self.cache.facet_cells, || {
            let nfacets = if self.dim == 3 {
                self.faces().len()
            } else {
                self.num_edges()
            };
            strided_tcsr(nfacets, self.dim + 1, self.cell_facets().to_vec()).transpose(self.par)
        })
    }

    /// vertex -> incident cells (the transpose of `cellVertices`), rows sorted.
    pub fn vertex_cells(&self) -> &Tcsr {
        cached(&self.cache.vertex_cells, || {
            let cols: Vec<i32> = self.cell_vertices.iter().map(|&v| v as i32).collect();
            strided_tcsr(self.num_vertices(), self.dim + 1, cols).transpose(self.par)
        })
    }

    /// edge -> incident cells (the transpose of d̂_d^1), rows sorted.
    pub fn edge_cells(&self) -> &Tcsr {
        cached(&self.cache.edge_cells, || {
            let n = local_edges(self.dim).len();
            let cols: Vec<i32> = self.cell_edges_array().iter().map(|&e| e as i32).collect();
            strided_tcsr(self.num_edges(), n, cols).transpose(self.par)
        })
    }

    /// face -> incident cells for d = 3 (unsigned; see [`Self::facet_cells`] for signs).
    /// Empty matrix for d = 2.
    pub fn face_cells(&self) -> &Tcsr {
        cached(&self.cache.face_cells, || {
            if self.dim != 3 {
                return Tcsr::empty(0, self.num_cells());
            }
            let cols: Vec<i32> = self.cell_faces_array().iter().map(|&f| f as i32).collect();
            strided_tcsr(self.faces().len(), 4, cols).transpose(self.par)
        })
    }

    /// Orientation of each cell relative to the embedding (triangles: the xy-plane):
    /// `+1` when the facets of Eq. 3.14 point outward (tetrahedra:
    /// `det(v1 - v0, v2 - v0, v3 - v0) < 0`; triangles: the loop `v0 -> v1 -> v2` is
    /// counter-clockwise seen from +z), `-1` when inward, `0` for a (numerically) flat
    /// cell (`|det| <= 1e-12 h^d` with `h` the longest edge).
    pub fn cell_orientations(&self) -> Vec<i8> {
        let f = |c: usize| -> i8 {
            let cv = self.cell(c);
            let p0 = self.positions[cv[0] as usize];
            let d = |v: u32| {
                let p = self.positions[v as usize];
                [p[0] - p0[0], p[1] - p0[1], p[2] - p0[2]]
            };
            let mut h2: f64 = 0.0;
            for &[i, j] in local_edges(self.dim) {
                let (a, b) = (
                    self.positions[cv[i] as usize],
                    self.positions[cv[j] as usize],
                );
                h2 = h2.max((0..3).map(|k| (a[k] - b[k]).powi(2)).sum());
            }
            let h = h2.sqrt();
            if self.dim == 3 {
                let (a, b, cc) = (d(cv[1]), d(cv[2]), d(cv[3]));
                let det = a[0] * (b[1] * cc[2] - b[2] * cc[1])
                    - a[1] * (b[0] * cc[2] - b[2] * cc[0])
                    + a[2] * (b[0] * cc[1] - b[1] * cc[0]);
                if det.abs() <= 1e-12 * h * h * h {
                    0
                } else if det < 0.0 {
                    1
                } else {
                    -1
                }
            } else {
                let (a, b) = (d(cv[1]), d(cv[2]));
                let det = a[0] * b[1] - a[1] * b[0];
                if det.abs() <= 1e-12 * h * h {
                    0
                } else if det > 0.0 {
                    1
                } else {
                    -1
                }
            }
        };
        match self.par {
            Par::Seq => (0..self.num_cells()).map(f).collect(),
            Par::Rayon => (0..self.num_cells())
                .into_par_iter()
                .with_min_len(4096)
                .map(f)
                .collect(),
        }
    }

    /// The equivalent polyhedral mesh (lossless; see the [module docs](self)).
    pub fn to_poly(&self) -> Result<PolyMesh, MeshError> {
        let edges = self.edges().to_vec();
        let n = self.num_cells();
        let facets = self.cell_facets();
        let (face_edges, cell_faces) = if self.dim == 3 {
            // ∂2 rows in loop order a -> b -> c: (a,b)+, (b,c)+, (a,c)-
            let fe = self.face_edges();
            let nf = self.faces().len();
            let mut cols = vec![0i32; nf * 3];
            fill_rows(self.par, &mut cols, 3, |f, row| {
                let s = &fe[f * 3..f * 3 + 3];
                row.copy_from_slice(&[s[0], s[2], s[1]]);
            });
            let fe = strided_tcsr(edges.len(), 3, cols);
            let cf = strided_tcsr(nf, 4, facets.to_vec());
            (fe, cf)
        } else {
            // one face per triangle, loop v0 -> v1 -> v2: (v0,v1), (v1,v2), (v2,v0)
            let mut cols = vec![0i32; n * 3];
            fill_rows(self.par, &mut cols, 3, |c, row| {
                let s = &facets[c * 3..c * 3 + 3];
                row.copy_from_slice(&[s[0], s[2], s[1]]);
            });
            (strided_tcsr(edges.len(), 3, cols), Tcsr::empty(0, n))
        };
        let mut m =
            PolyMesh::from_operators(self.positions.clone(), edges, face_edges, cell_faces)?;
        m.set_par(self.par);
        // four distinct vertices a cell (checked when the simplex mesh was made), faces and
        // edges their unique vertex sets: every tetrahedron is closed
        if self.dim == 3 {
            m.mark_cells_closed();
        }
        Ok(m)
    }

    /// The tetrahedral `poly` renumbered for locality ([`Self::renumber_morton`]: vertices
    /// and cells along a Morton curve, then edges and faces derived in sorted vertex order):
    /// the same mesh with another numbering, for measuring what a file's numbering costs.
    /// Errors as [`Self::from_poly`] for a mesh that is not tetrahedral.
    pub fn morton_ordered(poly: &PolyMesh) -> Result<PolyMesh, MeshError> {
        let mut sm = SimplexMesh::from_poly(poly)?;
        sm.renumber_morton();
        sm.to_poly()
    }

    /// The simplex mesh of a polyhedral mesh whose cells are all tetrahedra (d = 3), or, for
    /// a mesh without cells, whose faces are all triangles (d = 2; a triangulated surface).
    /// Lossless inverse of [`Self::to_poly`].
    ///
    /// The vertex order of each tetrahedron is read from the order of its ∂3 row (facet
    /// `i` omits vertex `3 - i`); when the row's signs are the negation of Eq. 3.14 for that
    /// order (for example, outward cells from [`crate::PolyMeshBuilder`] with VTK-positive
    /// input), the first two vertices are swapped so that the stored orientation is kept.
    ///
    /// Errors name the offending element: a cell that is not a tetrahedron (not 4
    /// triangular faces spanning 4 vertices), inconsistently oriented facets, a face that is
    /// not a closed triangle loop, or edges/faces that belong to no cell (the mesh is not a
    /// homogeneous simplicial complex, so the conversion could not be lossless). A mesh
    /// without cells and faces becomes an empty tetrahedral mesh.
    pub fn from_poly(poly: &PolyMesh) -> Result<SimplexMesh, MeshError> {
        let par = poly.par();
        let nc = poly.num_cells();
        let mesh = if nc > 0 {
            let mut cv = vec![0u32; nc * 4];
            let results: Vec<Result<[u32; 4], MeshError>> = match par {
                Par::Seq => (0..nc).map(|c| tet_from_poly(poly, c)).collect(),
                Par::Rayon => (0..nc)
                    .into_par_iter()
                    .with_min_len(1024)
                    .map(|c| tet_from_poly(poly, c))
                    .collect(),
            };
            for (c, r) in results.into_iter().enumerate() {
                cv[c * 4..c * 4 + 4].copy_from_slice(&r?);
            }
            SimplexMesh::new(3, cv, poly.positions().to_vec())?.with_par(par)
        } else if poly.num_faces() > 0 {
            let nf = poly.num_faces();
            let mut cv = vec![0u32; nf * 3];
            for f in 0..nf {
                let tri = triangle_loop(poly, f)?;
                cv[f * 3..f * 3 + 3].copy_from_slice(&tri);
            }
            SimplexMesh::new(2, cv, poly.positions().to_vec())?.with_par(par)
        } else {
            SimplexMesh::new(3, Vec::new(), poly.positions().to_vec())?.with_par(par)
        };
        if mesh.num_edges() != poly.num_edges() {
            return Err(MeshError::InvalidTopology(format!(
                "not a homogeneous simplicial complex: the mesh has {} edges, but its simplices span {}",
                poly.num_edges(),
                mesh.num_edges()
            )));
        }
        if mesh.dim == 3 && mesh.faces().len() != poly.num_faces() {
            return Err(MeshError::InvalidTopology(format!(
                "not a homogeneous simplicial complex: the mesh has {} faces, but its tetrahedra span {}",
                poly.num_faces(),
                mesh.faces().len()
            )));
        }
        Ok(mesh)
    }
}

/// Offsets `s` (length `nv + 1`) of a list sorted by first vertex: entries with first
/// vertex `v` are `s[v]..s[v + 1]` (count, then exclusive scan).
pub(crate) fn first_vertex_offsets(nv: usize, firsts: impl Iterator<Item = u32>) -> Vec<u32> {
    let mut s = vec![0u32; nv + 1];
    for v in firsts {
        s[v as usize + 1] += 1;
    }
    for v in 0..nv {
        s[v + 1] += s[v];
    }
    s
}

/// The vertex loop of a triangular face of a polyhedral mesh.
fn triangle_loop(poly: &PolyMesh, f: usize) -> Result<[u32; 3], MeshError> {
    let n = poly.face_edges().row_len(f);
    if n != 3 {
        return Err(MeshError::InvalidTopology(format!(
            "face {f} has {n} edges; a simplex mesh needs triangles"
        )));
    }
    let mut buf = [0i32; 3];
    let k = face_loop(poly, f, &mut buf);
    let tri = [buf[0] as u32, buf[1] as u32, buf[2] as u32];
    if k != 3 || tri[0] == tri[1] || tri[1] == tri[2] || tri[0] == tri[2] {
        return Err(MeshError::InvalidTopology(format!(
            "face {f}: its edges do not form a closed triangle loop"
        )));
    }
    // the loop must close: the last edge ends at the first vertex
    let ev = poly.edge_vertices();
    let row = poly.face_edges().row(f);
    let mut pairs = [[0u32; 2]; 3];
    for (k, &v) in row.iter().enumerate() {
        let [a, b] = ev[col(v) as usize];
        pairs[k] = [a.min(b), a.max(b)];
    }
    pairs.sort_unstable();
    let mut want =
        [[tri[0], tri[1]], [tri[1], tri[2]], [tri[2], tri[0]]].map(|[a, b]| [a.min(b), a.max(b)]);
    want.sort_unstable();
    if pairs[..] != want[..] {
        return Err(MeshError::InvalidTopology(format!(
            "face {f}: its edges do not form a closed triangle loop"
        )));
    }
    Ok(tri)
}

/// Recover the vertex order of tetrahedral cell `c` from its ∂3 row (see `from_poly`).
fn tet_from_poly(poly: &PolyMesh, c: usize) -> Result<[u32; 4], MeshError> {
    let row = poly.cell_faces().row(c);
    if row.len() != 4 {
        return Err(MeshError::InvalidTopology(format!(
            "cell {c} has {} faces; a simplex mesh needs tetrahedra",
            row.len()
        )));
    }
    let mut loops = [[0u32; 3]; 4];
    let mut signs = [0i32; 4];
    let mut all = [0u32; 12];
    for (j, &fv) in row.iter().enumerate() {
        let (f, s) = decode(fv);
        let tri = triangle_loop(poly, f as usize).map_err(|e| {
            MeshError::InvalidTopology(format!("cell {c} is not a tetrahedron: {e}"))
        })?;
        // the face's own orientation relative to its sorted vertex order
        let fo = if sort_swaps(&tri) % 2 == 0 { 1 } else { -1 };
        loops[j] = tri;
        signs[j] = s * fo;
        all[j * 3..j * 3 + 3].copy_from_slice(&tri);
    }
    all.sort_unstable();
    let mut verts = [0u32; 4];
    let mut nverts = 0;
    for (i, &v) in all.iter().enumerate() {
        if i == 0 || all[i - 1] != v {
            if nverts == 4 {
                nverts += 1;
                break;
            }
            verts[nverts] = v;
            nverts += 1;
        }
    }
    if nverts != 4 {
        return Err(MeshError::InvalidTopology(format!(
            "cell {c} is not a tetrahedron: its faces span more or fewer than 4 vertices"
        )));
    }
    // w_j: the vertex that row face j misses
    let mut w = [0u32; 4];
    for j in 0..4 {
        let mut missing = verts.iter().copied().filter(|v| !loops[j].contains(v));
        match (missing.next(), missing.next()) {
            (Some(v), None) => w[j] = v,
            _ => {
                return Err(MeshError::InvalidTopology(format!(
                    "cell {c} is not a tetrahedron (face {j} of its row)"
                )))
            }
        }
    }
    if (1..4).any(|j| w[..j].contains(&w[j])) {
        return Err(MeshError::InvalidTopology(format!(
            "cell {c} is not a tetrahedron: it repeats a face"
        )));
    }
    let mut cv = [w[3], w[2], w[1], w[0]];
    let orient = |cv: &[u32; 4], i: usize| {
        let f = TET_FACES[i];
        facet_orientation(i, &[cv[f[0]], cv[f[1]], cv[f[2]]])
    };
    let agree = (0..4).filter(|&i| orient(&cv, i) == signs[i]).count();
    match agree {
        4 => Ok(cv),
        0 => {
            // the opposite orientation: swap v0 and v1; facet i then covers the vertex set
            // of the row face with the same index only up to a permutation, so check again
            cv.swap(0, 1);
            for i in 0..4 {
                let f = TET_FACES[i];
                let mut t = [cv[f[0]], cv[f[1]], cv[f[2]]];
                t.sort_unstable();
                let j = (0..4)
                    .find(|&j| {
                        let mut l = loops[j];
                        l.sort_unstable();
                        l == t
                    })
                    .expect("facet of the tetrahedron");
                if orient(&cv, i) != signs[j] {
                    return Err(MeshError::InvalidTopology(format!(
                        "cell {c}: inconsistently oriented faces"
                    )));
                }
            }
            Ok(cv)
        }
        _ => Err(MeshError::InvalidTopology(format!(
            "cell {c}: inconsistently oriented faces"
        ))),
    }
}
