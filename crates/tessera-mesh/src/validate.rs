//! Topological validation of a [`PolyMesh`] (dissertation §3.3, §3.4).
//!
//! A well-formed mesh satisfies `∂k ∂k-1 = 0` for every closed k-face: "each well-formed
//! k-face must be 2-manifold and each (k-2)-face is therefore used twice, once in its
//! positive and once in its negative orientation" (dissertation §3.3). [`PolyMesh::validate`]
//! checks, in this order, and reports the first violation with the element it concerns:
//!
//! 1. shapes and index ranges: ∂2 has one column per edge, ∂3 one per face, offsets are
//!    monotone, every edge vertex, ∂2 column and ∂3 column is in range;
//! 2. positions are finite;
//! 3. edges: no edge from a vertex to itself, no two edges with the same vertex pair;
//! 4. faces (∂1 ∂2 = 0 per face, as one loop): a face has edges, no edge twice, every
//!    vertex of the face has one incoming and one outgoing edge (so `∂1 ∂2 = 0`), and
//!    the edges chain into a single closed loop; no two faces have the same edge set;
//! 5. cells (∂2 ∂3 = 0 per cell, consistently oriented): a cell has faces, no face twice,
//!    and every edge of the cell is used by exactly two of its faces with opposite signs.
//!
//! Non-manifold meshes are valid: a face may belong to no cell (free face) or to any number
//! of cells, and cells may share only an edge or a vertex. Validation is purely
//! topological; whether a cell's faces point outward is a geometric property that the
//! [`crate::PolyMeshBuilder`] establishes from the signed volume.
//!
//! Checks run per element in parallel (`mesh.par()`); the reported violation is the first
//! in element order either way.

use crate::{MeshError, PolyMesh};
use rayon::prelude::*;
use std::fmt;
use tessera_core::Par;
use tessera_sparse::tcsr::{col, decode};
use tessera_sparse::Tcsr;

/// The kind of element a [`Violation`] concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entity {
    Vertex,
    Edge,
    Face,
    Cell,
    /// A whole operator (∂1, ∂2 or ∂3), for shape errors.
    Operator,
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Entity::Vertex => "vertex",
            Entity::Edge => "edge",
            Entity::Face => "face",
            Entity::Cell => "cell",
            Entity::Operator => "operator",
        })
    }
}

/// What is wrong with an element (see the module documentation for the checks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// An operator's number of columns does not match the number of facets.
    Shape {
        operator: &'static str,
        ncols: usize,
        expected: usize,
    },
    /// Offsets of an operator row are decreasing or do not end at the number of entries.
    BadOffsets { operator: &'static str },
    /// A referenced facet index outside its range.
    IndexOutOfRange {
        what: &'static str,
        index: u64,
        len: usize,
    },
    /// A NaN or infinite coordinate.
    NonFinitePosition,
    /// An edge from a vertex to itself.
    DegenerateEdge { vertex: u32 },
    /// An edge with the same two vertices as an earlier edge.
    DuplicateEdge { of: usize },
    /// A face without edges or a cell without faces.
    Empty,
    /// A row lists the same facet twice.
    RepeatedFacet { facet: u32 },
    /// `∂1 ∂2 ≠ 0` for this face: at `vertex`, incoming minus outgoing edges is `net`.
    OpenFaceLoop { vertex: u32, net: i32 },
    /// The face's loop passes `vertex` more than once (a pinched, figure-eight loop).
    PinchedFaceLoop { vertex: u32 },
    /// The face's edges are closed but form `loops` separate loops.
    MultipleLoops { loops: usize },
    /// A face with the same edge set as an earlier face.
    DuplicateFace { of: usize },
    /// `∂2 ∂3 ≠ 0` for this cell: `edge` is used by only one of its faces (the cell is open).
    OpenCell { edge: u32 },
    /// `edge` is used twice in the same direction: the cell's faces are not consistently
    /// oriented.
    InconsistentOrientation { edge: u32 },
    /// `edge` is used by more than two faces of the cell (`positive` and `negative` uses).
    NonManifoldCell {
        edge: u32,
        positive: u32,
        negative: u32,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Shape { operator, ncols, expected } => {
                write!(f, "{operator} has {ncols} columns, expected {expected}")
            }
            Violation::BadOffsets { operator } => write!(f, "{operator} has invalid row offsets"),
            Violation::IndexOutOfRange { what, index, len } => {
                write!(f, "{what} {index} out of range (there are {len})")
            }
            Violation::NonFinitePosition => write!(f, "non-finite coordinate"),
            Violation::DegenerateEdge { vertex } => write!(f, "starts and ends at vertex {vertex}"),
            Violation::DuplicateEdge { of } => write!(f, "has the same vertices as edge {of}"),
            Violation::Empty => write!(f, "has no facets"),
            Violation::RepeatedFacet { facet } => write!(f, "lists facet {facet} twice"),
            Violation::OpenFaceLoop { vertex, net } => {
                write!(f, "loop is not closed (∂1∂2 ≠ 0): vertex {vertex} has net incidence {net}")
            }
            Violation::PinchedFaceLoop { vertex } => write!(f, "loop passes vertex {vertex} more than once"),
            Violation::MultipleLoops { loops } => write!(f, "edges form {loops} separate loops instead of one"),
            Violation::DuplicateFace { of } => write!(f, "has the same edges as face {of}"),
            Violation::OpenCell { edge } => {
                write!(f, "is not closed (∂2∂3 ≠ 0): edge {edge} is used by only one of its faces")
            }
            Violation::InconsistentOrientation { edge } => {
                write!(f, "faces are not consistently oriented: edge {edge} is used twice in the same direction")
            }
            Violation::NonManifoldCell { edge, positive, negative } => write!(
                f,
                "edge {edge} is used by {} of its faces ({positive} positive, {negative} negative), expected 2",
                positive + negative
            ),
        }
    }
}

type Found = (Entity, usize, Violation);

fn err((entity, index, violation): Found) -> MeshError {
    MeshError::Invalid {
        entity,
        index,
        violation,
    }
}

/// First `Some` of `check(i)` for `i in 0..n`, in index order, with a per-thread scratch.
fn first<S, I, F>(par: Par, n: usize, init: I, check: F) -> Option<Found>
where
    S: Send,
    I: Fn() -> S + Sync + Send,
    F: Fn(&mut S, usize) -> Option<Found> + Sync + Send,
{
    match par {
        Par::Seq => {
            let mut s = init();
            (0..n).find_map(|i| check(&mut s, i))
        }
        Par::Rayon => (0..n)
            .into_par_iter()
            .with_min_len(1024)
            .map_init(&init, |s, i| check(s, i))
            .find_map_first(|x| x),
    }
}

fn check_offsets(t: &Tcsr, operator: &'static str) -> Option<Found> {
    let o = t.offsets();
    if o.first() != Some(&0)
        || o.windows(2).any(|w| w[1] < w[0])
        || *o.last().unwrap() as usize != t.nnz()
    {
        return Some((Entity::Operator, 0, Violation::BadOffsets { operator }));
    }
    None
}

impl PolyMesh {
    /// Check the mesh's topology and report the first violation found, naming the element
    /// (see [`crate::validate`] for the list of checks; dissertation §3.3: `∂k ∂k-1 = 0`).
    pub fn validate(&self) -> Result<(), MeshError> {
        self.validate_with(self.par)
    }

    /// [`PolyMesh::validate`] with an explicit execution choice (same result either way).
    pub fn validate_with(&self, par: Par) -> Result<(), MeshError> {
        let nv = self.nvertices;
        let ne = self.edge_vertices.len();
        let nf = self.face_edges.nrows();
        let nc = self.cell_faces.nrows();
        let fe = &self.face_edges;
        let cf = &self.cell_faces;
        let ev = &self.edge_vertices;

        // 1. shapes and ranges
        if self.positions.len() != nv {
            return Err(err((
                Entity::Operator,
                0,
                Violation::Shape {
                    operator: "positions",
                    ncols: self.positions.len(),
                    expected: nv,
                },
            )));
        }
        if fe.ncols() != ne {
            return Err(err((
                Entity::Operator,
                2,
                Violation::Shape {
                    operator: "∂2",
                    ncols: fe.ncols(),
                    expected: ne,
                },
            )));
        }
        if cf.ncols() != nf {
            return Err(err((
                Entity::Operator,
                3,
                Violation::Shape {
                    operator: "∂3",
                    ncols: cf.ncols(),
                    expected: nf,
                },
            )));
        }
        if let Some(f) = check_offsets(fe, "∂2").or_else(|| check_offsets(cf, "∂3")) {
            return Err(err(f));
        }
        let range = |entity, what, len: usize, t: &Tcsr| {
            first(
                par,
                t.nrows(),
                || (),
                |_, r| {
                    t.row(r)
                        .iter()
                        .find(|&&v| col(v) as usize >= len)
                        .map(|&v| {
                            (
                                entity,
                                r,
                                Violation::IndexOutOfRange {
                                    what,
                                    index: col(v) as u64,
                                    len,
                                },
                            )
                        })
                },
            )
        };
        if let Some(f) = first(
            par,
            ne,
            || (),
            |_, e| {
                ev[e].iter().find(|&&v| v as usize >= nv).map(|&v| {
                    (
                        Entity::Edge,
                        e,
                        Violation::IndexOutOfRange {
                            what: "vertex",
                            index: v as u64,
                            len: nv,
                        },
                    )
                })
            },
        ) {
            return Err(err(f));
        }
        if let Some(f) = range(Entity::Face, "edge", ne, fe) {
            return Err(err(f));
        }
        if let Some(f) = range(Entity::Cell, "face", nf, cf) {
            return Err(err(f));
        }

        // 2. positions
        let pos = &self.positions;
        if let Some(f) = first(
            par,
            nv,
            || (),
            |_, v| {
                (!pos[v].iter().all(|x| x.is_finite())).then_some((
                    Entity::Vertex,
                    v,
                    Violation::NonFinitePosition,
                ))
            },
        ) {
            return Err(err(f));
        }

        // 3. edges
        if let Some(f) = first(
            par,
            ne,
            || (),
            |_, e| {
                let [a, b] = ev[e];
                (a == b).then_some((Entity::Edge, e, Violation::DegenerateEdge { vertex: a }))
            },
        ) {
            return Err(err(f));
        }
        let ekey = |e: usize| {
            let [a, b] = ev[e];
            ((a.min(b) as u64) << 32) | a.max(b) as u64
        };
        // edges written by the builder are sorted by key: then there are no duplicates
        if !(1..ne).all(|e| ekey(e - 1) < ekey(e)) {
            let mut keys: Vec<(u64, u32)> = (0..ne).map(|e| (ekey(e), e as u32)).collect();
            match par {
                Par::Seq => keys.sort_unstable(),
                Par::Rayon => keys.par_sort_unstable(),
            }
            let dup = keys
                .windows(2)
                .filter(|w| w[0].0 == w[1].0)
                .map(|w| (w[1].1 as usize, w[0].1 as usize))
                .min();
            // within a run of equal keys, pairs (later, earlier) compare smallest-later first;
            // the earliest edge of the run is the run's first entry
            if let Some((e, _)) = dup {
                let k = ekey(e);
                let of = keys
                    .iter()
                    .filter(|x| x.0 == k)
                    .map(|x| x.1 as usize)
                    .min()
                    .unwrap();
                return Err(err((Entity::Edge, e, Violation::DuplicateEdge { of })));
            }
        }

        // 4. faces
        if let Some(f) = first(par, nf, Vec::new, |buf: &mut Vec<(u32, u32)>, f| {
            check_face(fe.row(f), ev, buf).map(|v| (Entity::Face, f, v))
        }) {
            return Err(err(f));
        }
        // duplicate faces share their smallest edge: compare with the other faces of that edge
        let ef_owned;
        let ef = match self.cache.edge_faces.get() {
            Some(t) => t,
            None => {
                ef_owned = fe.transpose(par);
                &ef_owned
            }
        };
        if let Some(f) = first(
            par,
            nf,
            || (Vec::new(), Vec::new()),
            |(a, b): &mut (Vec<u32>, Vec<u32>), f| {
                sorted_cols(fe.row(f), a);
                let emin = a[0] as usize;
                for &g in ef.row(emin) {
                    let g = col(g) as usize;
                    if g >= f {
                        break; // δ2 rows are sorted: only earlier faces count
                    }
                    if fe.row_len(g) == a.len() {
                        sorted_cols(fe.row(g), b);
                        if a == b {
                            return Some((Entity::Face, f, Violation::DuplicateFace { of: g }));
                        }
                    }
                }
                None
            },
        ) {
            return Err(err(f));
        }

        // 5. cells
        if let Some(f) = first(par, nc, Vec::new, |buf: &mut Vec<i64>, c| {
            check_cell(cf.row(c), fe, buf).map(|v| (Entity::Cell, c, v))
        }) {
            return Err(err(f));
        }
        // checks 3-5 are what `cells_known_closed` promises
        self.mark_cells_closed();
        Ok(())
    }
}

fn sorted_cols(row: &[i32], out: &mut Vec<u32>) {
    out.clear();
    out.extend(row.iter().map(|&v| col(v)));
    out.sort_unstable();
}

/// One face: non-empty, no repeated edge, every vertex with one incoming and one outgoing
/// edge, a single loop. `buf` holds the directed edges `(from, to)`.
fn check_face(row: &[i32], ev: &[[u32; 2]], buf: &mut Vec<(u32, u32)>) -> Option<Violation> {
    let n = row.len();
    if n == 0 {
        return Some(Violation::Empty);
    }
    for i in 1..n {
        let c = col(row[i]);
        if row[..i].iter().any(|&v| col(v) == c) {
            return Some(Violation::RepeatedFacet { facet: c });
        }
    }
    buf.clear();
    for &v in row {
        let (e, s) = decode(v);
        let [a, b] = ev[e as usize];
        buf.push(if s > 0 { (a, b) } else { (b, a) });
    }
    // incidence per vertex, in order of first appearance (deterministic report)
    for i in 0..n {
        for v in [buf[i].0, buf[i].1] {
            let outs = buf.iter().filter(|d| d.0 == v).count() as i32;
            let ins = buf.iter().filter(|d| d.1 == v).count() as i32;
            if ins != outs {
                return Some(Violation::OpenFaceLoop {
                    vertex: v,
                    net: ins - outs,
                });
            }
            if outs > 1 {
                return Some(Violation::PinchedFaceLoop { vertex: v });
            }
        }
    }
    // every vertex has exactly one successor: the loop through the first edge must visit
    // all n edges; otherwise count the cycles of the successor map for the report
    let succ = |j: usize| {
        buf.iter()
            .position(|d| d.0 == buf[j].1)
            .expect("every vertex has an outgoing edge")
    };
    let mut steps = 1;
    let mut j = succ(0);
    while j != 0 {
        steps += 1;
        j = succ(j);
    }
    if steps == n {
        return None;
    }
    let mut seen = vec![false; n];
    let mut loops = 0;
    for i in 0..n {
        if seen[i] {
            continue;
        }
        loops += 1;
        let mut j = i;
        while !seen[j] {
            seen[j] = true;
            j = succ(j);
        }
    }
    Some(Violation::MultipleLoops { loops })
}

/// One cell: non-empty, no repeated face, every edge used exactly twice with opposite signs.
/// `buf` holds `edge * 2 + (sign < 0)` of every edge use.
fn check_cell(row: &[i32], fe: &Tcsr, buf: &mut Vec<i64>) -> Option<Violation> {
    if row.is_empty() {
        return Some(Violation::Empty);
    }
    for i in 1..row.len() {
        let c = col(row[i]);
        if row[..i].iter().any(|&v| col(v) == c) {
            return Some(Violation::RepeatedFacet { facet: c });
        }
    }
    buf.clear();
    for &fv in row {
        let (f, sf) = decode(fv);
        for &e in fe.row(f as usize) {
            let (e, se) = decode(e);
            buf.push(e as i64 * 2 + (sf * se < 0) as i64);
        }
    }
    buf.sort_unstable();
    let mut i = 0;
    while i < buf.len() {
        let e = buf[i] >> 1;
        let mut j = i;
        let (mut pos, mut neg) = (0u32, 0u32);
        while j < buf.len() && buf[j] >> 1 == e {
            if buf[j] & 1 == 0 {
                pos += 1;
            } else {
                neg += 1;
            }
            j += 1;
        }
        let edge = e as u32;
        match (pos, neg) {
            (1, 1) => {}
            (1, 0) | (0, 1) => return Some(Violation::OpenCell { edge }),
            (2, 0) | (0, 2) => return Some(Violation::InconsistentOrientation { edge }),
            _ => {
                return Some(Violation::NonManifoldCell {
                    edge,
                    positive: pos,
                    negative: neg,
                })
            }
        }
        i = j;
    }
    None
}
