//! Higher-order simplex meshes: implicit node numbering (dissertation §4.3, §4.4.1).
//!
//! An order-`p` simplex mesh has, besides the vertex nodes, nodes on the interior of its
//! edges, faces and cells. A k-simplex carries `C(p-1, k)` "k-simplex nodes" on its
//! interior (Eq. 4.4), so **node indices are implicit from simplex indices**
//! (dissertation §4.4.1: "as the number of k-simplex nodes on any k-simplex is constant
//! ... node indices are implicitly derived from the simplex indices"). Global nodes are
//! numbered
//!
//! ```text
//! [ vertex nodes: V ][ edge nodes: E·C(p-1,1) ][ face nodes: F·C(p-1,2) ][ cell nodes: C·C(p-1,3) ]   (d = 3)
//! [ vertex nodes: V ][ edge nodes: E·C(p-1,1) ][ cell nodes: C·C(p-1,2) ]                            (d = 2)
//! ```
//!
//! with the nodes of simplex `s` of dimension `k` at `base_k + s·C(p-1,k) + r`, where `r` is
//! the node's **rank within its simplex**:
//!
//! - every node of a cell has a multi-index `α ∈ N^{d+1}`, `|α| = p`, over the cell's
//!   vertices in `cellVertices` order; its support (non-zero components) is the simplex it
//!   lies on, and `β = α - 1` on the support sums to `p - 1 - k`;
//! - `β` is written over the simplex's vertices in **increasing global vertex index** order
//!   (edge `[a, b]`, `a < b`; face `[a, b, c]`, `a < b < c`; the cell's vertices sorted)
//!   and `r` is its position in descending lexicographic order
//!   ([`crate::multi_index::multi_indices`] order). This depends only on global indices, so
//!   **every cell that sees an edge or face numbers its nodes the same way** (for an edge:
//!   rank `r` is the node with `α_a = p - 1 - r`, `α_b = 1 + r`, i.e. the nodes run from
//!   `a` to `b`), and the global numbering does not change when the vertices of a cell are
//!   reordered (only the local order of [`HoMesh::cell_nodes`] does).
//!
//! The **local node order** of a cell ([`HoMesh::cell_nodes`]) is the order of
//! [`crate::multi_index::multi_indices`]`(d, p)`: descending lexicographic multi-indices
//! over the cell's vertices in their `cellVertices` order.
//!
//! Storage (dissertation §4.4.1: "we store the additional cellEdges ... and cellFaces ...
//! arrays as required"): `cellVertices` always, `cellEdges` (`C(d+1,2)` per cell) for
//! `p >= 2`, `cellFaces` (4 per tetrahedron) for `p >= 3` and d = 3. Node positions are
//! derived by barycentric interpolation (constant-metric simplices), so `positions` holds
//! the vertices only.

use crate::error::FemError;
use crate::multi_index::{binomial, multi_indices};
use rayon::prelude::*;
use std::sync::OnceLock;
use tessera_core::Par;
use tessera_mesh::simplex::{local_edges, SimplexMesh, TET_FACES};
use tessera_mesh::Point;
use tessera_sparse::Tcsr;

/// Largest polynomial order accepted by [`HoMesh::new`] (the same limit as the element
/// matrices, [`FemError::InvalidOrder`]).
pub const MAX_ORDER: usize = 12;

/// Where a global node lies: on the interior of the `dim`-simplex `simplex`, with rank
/// `rank` among that simplex's interior nodes (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeLocation {
    /// k: 0 vertex, 1 edge, 2 face, d cell.
    pub dim: u8,
    /// Index of the vertex, edge, face (d = 3) or cell.
    pub simplex: u32,
    /// Rank among the simplex's `C(p-1, k)` interior nodes.
    pub rank: u32,
}

/// One local node of the reference cell: its multi-index, the dimension `k` of the
/// sub-simplex it lies on, and that sub-simplex's local index (vertex position, local edge
/// in [`local_edges`] order, local face in [`TET_FACES`] order, or 0 for the cell).
#[derive(Clone, Copy, Debug)]
struct LocalNode {
    alpha: [u8; 4],
    k: u8,
    sub: u8,
}

/// Rank of `beta` (sum `s`) among all multi-indices of the same length and sum in
/// descending lexicographic order.
pub fn rank_desc_lex(beta: &[u8]) -> u32 {
    let m = beta.len();
    let mut rem: usize = beta.iter().map(|&b| b as usize).sum();
    let mut rank = 0usize;
    for i in 0..m.saturating_sub(1) {
        let left = m - i - 1; // components after i
        for v in (beta[i] as usize + 1)..=rem {
            // number of ways to write rem - v as `left` non-negative components
            rank += binomial(rem - v + left - 1, left - 1);
        }
        rem -= beta[i] as usize;
    }
    rank as u32
}

/// An order-`p` triangle or tetrahedral mesh over a [`SimplexMesh`] (dissertation §4.4.1).
#[derive(Debug)]
pub struct HoMesh {
    mesh: SimplexMesh,
    order: usize,
    /// `C(p-1, k)` for k = 0..=3 (Eq. 4.4).
    per_simplex: [usize; 4],
    /// First global node of each simplex dimension (k = 0..=d), and the total at `[d+1]`.
    base: [usize; 5],
    locals: Vec<LocalNode>,
    /// face interior ranks by (β0, β1) over the sorted face vertices, row length p - 2
    face_rank: Vec<u32>,
    cell_ids: OnceLock<Vec<i32>>,
}

impl HoMesh {
    /// The order-`p` mesh over `mesh` (1 <= p <= [`MAX_ORDER`]). Derives (and caches in
    /// `mesh`) the edges for p >= 2 and the faces for p >= 3, with `cellEdges` and
    /// `cellFaces` only as `p` requires. Errors: an unsupported order, or more nodes than
    /// fit 32-bit indices.
    pub fn new(mesh: SimplexMesh, p: usize) -> Result<Self, FemError> {
        if !(1..=MAX_ORDER).contains(&p) {
            return Err(FemError::InvalidOrder(p));
        }
        let d = mesh.dim();
        if d != 2 && d != 3 {
            return Err(FemError::UnsupportedDimension(d));
        }
        let per_simplex = [
            1,
            binomial(p - 1, 1),
            binomial(p - 1, 2),
            binomial(p - 1, 3),
        ];
        let counts = [
            mesh.num_vertices(),
            if p >= 2 { mesh.num_edges() } else { 0 },
            if p >= 3 { mesh.num_faces() } else { 0 },
            if p >= 4 && d == 3 {
                mesh.num_cells()
            } else {
                0
            },
        ];
        let mut base = [0usize; 5];
        for k in 0..=d {
            base[k + 1] = base[k] + counts[k] * per_simplex[k];
        }
        if base[d + 1] > u32::MAX as usize {
            return Err(FemError::TooLarge(format!(
                "{} nodes of order {p} do not fit 32-bit indices",
                base[d + 1]
            )));
        }
        // store the cell -> sub-simplex arrays only as p requires
        if p >= 2 {
            mesh.cell_edges_array();
        }
        if p >= 3 && d == 3 {
            mesh.cell_faces_array();
        }
        // local node table
        let le = local_edges(d);
        let locals = multi_indices(d, p)
            .into_iter()
            .map(|alpha| {
                let support: Vec<usize> = (0..=d).filter(|&i| alpha[i] > 0).collect();
                let k = support.len() - 1;
                let sub = match k {
                    0 => support[0],
                    1 => le
                        .iter()
                        .position(|e| e[0] == support[0] && e[1] == support[1])
                        .unwrap(),
                    _ if k == d => 0,
                    _ => TET_FACES.iter().position(|f| f[..] == support[..]).unwrap(),
                };
                LocalNode {
                    alpha,
                    k: k as u8,
                    sub: sub as u8,
                }
            })
            .collect();
        let w = p.saturating_sub(2);
        let mut face_rank = vec![0u32; w * w];
        if p >= 3 {
            for b0 in 0..=(p - 3) {
                for b1 in 0..=(p - 3 - b0) {
                    let b2 = p - 3 - b0 - b1;
                    face_rank[b0 * w + b1] = rank_desc_lex(&[b0 as u8, b1 as u8, b2 as u8]);
                }
            }
        }
        Ok(HoMesh {
            mesh,
            order: p,
            per_simplex,
            base,
            locals,
            face_rank,
            cell_ids: OnceLock::new(),
        })
    }

    /// The underlying simplex mesh.
    pub fn mesh(&self) -> &SimplexMesh {
        &self.mesh
    }
    /// Take the underlying simplex mesh back.
    pub fn into_mesh(self) -> SimplexMesh {
        self.mesh
    }
    /// Polynomial order p.
    pub fn order(&self) -> usize {
        self.order
    }
    /// Topological dimension d.
    pub fn dim(&self) -> usize {
        self.mesh.dim()
    }
    pub fn num_cells(&self) -> usize {
        self.mesh.num_cells()
    }
    /// Total number of nodes: `Σ_k C(p-1, k) · |k-simplices|` (Eq. 4.4).
    pub fn num_nodes(&self) -> usize {
        self.base[self.dim() + 1]
    }
    /// Nodes per cell, `C(p + d, d)` (Eq. 4.2).
    pub fn nodes_per_cell(&self) -> usize {
        self.locals.len()
    }
    /// Interior nodes of one k-simplex, `C(p-1, k)` (Eq. 4.4); k <= 3.
    pub fn nodes_per_simplex(&self, k: usize) -> usize {
        self.per_simplex[k]
    }
    /// First global node of the k-simplex nodes (k = 0..=d); `node_base(d + 1)` is the total.
    pub fn node_base(&self, k: usize) -> usize {
        self.base[k]
    }
    /// Number of k-simplex nodes in the mesh.
    pub fn num_nodes_of_dim(&self, k: usize) -> usize {
        self.base[k + 1] - self.base[k]
    }

    /// Bytes of the stored topology: `cellVertices`, plus `cellEdges` for p >= 2 and
    /// `cellFaces` for p >= 3 (d = 3); compare with `4 · C · C(p+d, d)` for explicit node
    /// lists ([`Self::explicit_node_bytes`]).
    pub fn topology_bytes(&self) -> usize {
        let c = self.num_cells();
        let mut b = self.mesh.topology_bytes();
        if self.order >= 2 {
            b += 4 * c * local_edges(self.dim()).len();
        }
        if self.order >= 3 && self.dim() == 3 {
            b += 4 * c * 4;
        }
        b
    }
    /// Bytes of an explicit cell -> node array (`n x C(p+d, d)` indices, as Zayer et al.).
    pub fn explicit_node_bytes(&self) -> usize {
        4 * self.num_cells() * self.nodes_per_cell()
    }

    /// The global node of each local node of cell `c`, in [`crate::multi_index`] order
    /// (descending lexicographic multi-indices over the cell's vertices in `cellVertices`
    /// order). `out` must hold at least [`Self::nodes_per_cell`] entries.
    #[inline]
    pub fn cell_nodes(&self, c: usize, out: &mut [u32]) {
        let d = self.dim();
        let p = self.order;
        let cv = self.mesh.cell(c);
        let ce: &[u32] = if p >= 2 { self.mesh.cell_edges(c) } else { &[] };
        let cf: &[u32] = if p >= 3 && d == 3 {
            self.mesh.cell_faces(c)
        } else {
            &[]
        };
        let le = local_edges(d);
        let w = p.saturating_sub(2);
        // cell nodes: the cell's local vertex positions sorted by global index
        let mut sorted = [0usize, 1, 2, 3];
        if p > d {
            let s = &mut sorted[..=d];
            s.sort_unstable_by_key(|&i| cv[i]);
        }
        for (slot, ln) in out.iter_mut().zip(&self.locals) {
            let k = ln.k as usize;
            *slot = match k {
                0 => cv[ln.sub as usize],
                1 => {
                    let [i, j] = le[ln.sub as usize];
                    let a_small = if cv[i] < cv[j] {
                        ln.alpha[i]
                    } else {
                        ln.alpha[j]
                    } as usize;
                    let r = p - 1 - a_small;
                    (self.base[1] + ce[ln.sub as usize] as usize * self.per_simplex[1] + r) as u32
                }
                _ if k == d => {
                    let mut beta = [0u8; 4];
                    for j in 0..=d {
                        beta[j] = ln.alpha[sorted[j]] - 1;
                    }
                    let r = rank_desc_lex(&beta[..=d]) as usize;
                    (self.base[d] + c * self.per_simplex[d] + r) as u32
                }
                _ => {
                    // face node (d = 3): β over the face's vertices sorted by global index
                    let f = TET_FACES[ln.sub as usize];
                    let mut t = [
                        (cv[f[0]], ln.alpha[f[0]]),
                        (cv[f[1]], ln.alpha[f[1]]),
                        (cv[f[2]], ln.alpha[f[2]]),
                    ];
                    if t[0].0 > t[1].0 {
                        t.swap(0, 1);
                    }
                    if t[1].0 > t[2].0 {
                        t.swap(1, 2);
                    }
                    if t[0].0 > t[1].0 {
                        t.swap(0, 1);
                    }
                    let r =
                        self.face_rank[(t[0].1 as usize - 1) * w + (t[1].1 as usize - 1)] as usize;
                    (self.base[2] + cf[ln.sub as usize] as usize * self.per_simplex[2] + r) as u32
                }
            };
        }
    }

    /// Where global node `node` lies (its simplex and rank).
    pub fn node_location(&self, node: u32) -> NodeLocation {
        let n = node as usize;
        let d = self.dim();
        let k = (0..=d).rev().find(|&k| n >= self.base[k]).unwrap_or(0);
        let off = n - self.base[k];
        let per = self.per_simplex[k];
        NodeLocation {
            dim: k as u8,
            simplex: (off / per) as u32,
            rank: (off % per) as u32,
        }
    }

    /// The multi-index of a node over the vertices of its simplex (sorted by global index),
    /// with those vertices.
    fn node_barycentric(&self, node: u32) -> ([u32; 4], [u8; 4], usize) {
        let loc = self.node_location(node);
        let p = self.order;
        let s = loc.simplex as usize;
        let r = loc.rank as usize;
        match loc.dim as usize {
            0 => ([s as u32, 0, 0, 0], [p as u8, 0, 0, 0], 1),
            1 => {
                let [a, b] = self.mesh.edges()[s];
                ([a, b, 0, 0], [(p - 1 - r) as u8, (1 + r) as u8, 0, 0], 2)
            }
            k if k == self.dim() => {
                let beta = multi_indices(k, p - k - 1)[r];
                let mut verts = [0u32; 4];
                verts[..=k].copy_from_slice(self.mesh.cell(s));
                verts[..=k].sort_unstable();
                let mut alpha = [0u8; 4];
                for i in 0..=k {
                    alpha[i] = beta[i] + 1;
                }
                (verts, alpha, k + 1)
            }
            _ => {
                let [a, b, c] = self.mesh.faces()[s];
                let beta = multi_indices(2, p - 3)[r];
                ([a, b, c, 0], [beta[0] + 1, beta[1] + 1, beta[2] + 1, 0], 3)
            }
        }
    }

    /// Node positions: the Bernstein-Bézier control points of the undeformed
    /// (constant-metric) simplices, equal to the equispaced Lagrange points,
    /// `x = Σ α_i v_i / p` (dissertation §4.4.1: "derived from the vertex node positions
    /// using barycentric interpolation").
    pub fn node_positions(&self) -> Vec<Point> {
        let pos = self.mesh.positions();
        let p = self.order as f64;
        let f = |n: usize| -> Point {
            let (verts, alpha, m) = self.node_barycentric(n as u32);
            if m == 1 {
                return pos[verts[0] as usize];
            }
            let mut x = [0.0; 3];
            for i in 0..m {
                let v = pos[verts[i] as usize];
                let w = alpha[i] as f64;
                for k in 0..3 {
                    x[k] += w * v[k];
                }
            }
            [x[0] / p, x[1] / p, x[2] / p]
        };
        match self.mesh.par() {
            Par::Seq => (0..self.num_nodes()).map(f).collect(),
            Par::Rayon => (0..self.num_nodes())
                .into_par_iter()
                .with_min_len(4096)
                .map(f)
                .collect(),
        }
    }

    /// node -> incident cells (dissertation §4.4.3/§4.4.4 "per node" maps): a view over the
    /// transposes `vertexCells`, `edgeCells`, `faceCells` of the simplex mesh (each computed
    /// once, by [`Tcsr::transpose`]); a cell node's only cell is its own. Rows are sorted.
    pub fn node_cells(&self) -> NodeCells<'_> {
        let d = self.dim();
        let p = self.order;
        NodeCells {
            ho: self,
            vertex: self.mesh.vertex_cells(),
            edge: if p >= 2 {
                Some(self.mesh.edge_cells())
            } else {
                None
            },
            face: if p >= 3 && d == 3 {
                Some(self.mesh.face_cells())
            } else {
                None
            },
            cells: if p > d {
                Some(
                    self.cell_ids
                        .get_or_init(|| (0..self.num_cells() as i32).collect()),
                )
            } else {
                None
            },
        }
    }

    /// The expanded node -> cells matrix (one row per node, TCSR with positive entries),
    /// for uploading to a device; rows equal [`NodeCells::row`]. Memory grows with p (edge
    /// rows repeat `C(p-1,1)` times etc.); prefer [`Self::node_cells`] on the CPU.
    pub fn node_cells_tcsr(&self) -> Tcsr {
        let nc = self.node_cells();
        let n = self.num_nodes();
        let par = self.mesh.par();
        let counts: Vec<u32> = match par {
            Par::Seq => (0..n).map(|i| nc.row(i as u32).len() as u32).collect(),
            Par::Rayon => (0..n)
                .into_par_iter()
                .with_min_len(4096)
                .map(|i| nc.row(i as u32).len() as u32)
                .collect(),
        };
        let offsets = tessera_core::scan::offsets_from_counts(par, &counts)
            .expect("fewer than 2^32 node-cell pairs");
        let mut cols = Vec::with_capacity(*offsets.last().unwrap() as usize);
        for i in 0..n {
            cols.extend_from_slice(nc.row(i as u32));
        }
        Tcsr::from_raw_unchecked(self.num_cells(), offsets, cols)
    }
}

/// node -> incident cells, see [`HoMesh::node_cells`].
#[derive(Clone, Copy, Debug)]
pub struct NodeCells<'a> {
    ho: &'a HoMesh,
    vertex: &'a Tcsr,
    edge: Option<&'a Tcsr>,
    face: Option<&'a Tcsr>,
    cells: Option<&'a Vec<i32>>,
}

impl<'a> NodeCells<'a> {
    /// The cells incident to `node` (non-negative TCSR entries, i.e. plain cell indices),
    /// sorted.
    #[inline]
    pub fn row(&self, node: u32) -> &'a [i32] {
        let loc = self.ho.node_location(node);
        let s = loc.simplex as usize;
        match loc.dim as usize {
            0 => self.vertex.row(s),
            1 => self.edge.expect("edge nodes exist").row(s),
            k if k == self.ho.dim() => &self.cells.expect("cell nodes exist")[s..s + 1],
            _ => self.face.expect("face nodes exist").row(s),
        }
    }
    /// Number of rows (nodes).
    pub fn num_rows(&self) -> usize {
        self.ho.num_nodes()
    }
}
