//! Edges of a polygon mesh from its mesh matrix: every corner `c` starts the half-edge
//! `rowind[c] -> rowind[next(c)]`; its twin is found in the row of the head vertex of the
//! cached transpose (the faces around that vertex, seed §3: "faces neighboring a given vertex
//! line up along its corresponding row"). No sort of all edges is needed.
//!
//! Edge numbering (the order shared by the CPU reference and the GPU): corner `c` *owns* its
//! edge when it has no twin (a boundary edge) or when `rowind[c] < rowind[next(c)]`; edges are
//! numbered by their owning corner in increasing corner order.
//!
//! The mesh must be an oriented 2-manifold with boundary: every half-edge `a -> b` appears
//! once, and `b -> a` at most once (an edge in more than two faces, or two faces that traverse
//! an edge in the same direction, is an error naming the edge).

use super::{MeshMatrix, NONE};
use crate::MeshError;
use rayon::prelude::*;

/// Twins and edge numbers of the corners of a mesh matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HalfEdges {
    /// The corner of the opposite half-edge, or [`NONE`] on the boundary.
    pub twin: Vec<u32>,
    /// The edge of each corner's half-edge.
    pub edge_of_corner: Vec<u32>,
    /// The owning corner of each edge.
    pub edge_corner: Vec<u32>,
}

impl HalfEdges {
    /// Number of edges.
    pub fn num_edges(&self) -> usize {
        self.edge_corner.len()
    }
    /// Number of boundary edges.
    pub fn num_boundary_edges(&self) -> usize {
        self.edge_corner
            .iter()
            .filter(|&&c| self.twin[c as usize] == NONE)
            .count()
    }
    /// The end vertices `(a, b)` of edge `e` as its owning corner traverses it.
    pub fn edge_vertices(&self, m: &MeshMatrix, e: usize) -> [u32; 2] {
        let c = self.edge_corner[e] as usize;
        [m.rowind()[c], m.rowind()[m.next(c)]]
    }
}

/// The twin of every corner (see the module docs); errors for non-manifold or inconsistently
/// oriented edges.
pub fn twins(m: &MeshMatrix) -> Result<Vec<u32>, MeshError> {
    let t = m.transpose();
    let rowind = m.rowind();
    let res: Result<Vec<u32>, MeshError> = (0..m.nnz())
        .into_par_iter()
        .with_min_len(2048)
        .map(|c| {
            let a = rowind[c];
            let b = rowind[m.next(c)];
            // the same direction again: inconsistent orientation or a repeated face
            for &d in t.row(a as usize) {
                let d = d as usize;
                if d != c && rowind[m.next(d)] == b {
                    return Err(MeshError::InvalidTopology(format!(
                        "edge ({a}, {b}) is traversed in the same direction by faces {} and {} \
                         (inconsistent orientation or a non-manifold edge)",
                        m.corner_face(c).min(m.corner_face(d)),
                        m.corner_face(c).max(m.corner_face(d))
                    )));
                }
            }
            let mut twin = NONE;
            for &d in t.row(b as usize) {
                let d = d as usize;
                if rowind[m.next(d)] == a {
                    if twin != NONE {
                        return Err(MeshError::InvalidTopology(format!(
                            "edge ({a}, {b}) belongs to more than two faces (non-manifold)"
                        )));
                    }
                    twin = d as u32;
                }
            }
            Ok(twin)
        })
        .collect();
    res
}

/// Twins and the edge numbering (see the module docs).
pub fn half_edges(m: &MeshMatrix) -> Result<HalfEdges, MeshError> {
    let twin = twins(m)?;
    let rowind = m.rowind();
    let owns = |c: usize| twin[c] == NONE || rowind[c] < rowind[m.next(c)];
    let edge_corner: Vec<u32> = (0..m.nnz())
        .into_par_iter()
        .with_min_len(4096)
        .filter(|&c| owns(c))
        .map(|c| c as u32)
        .collect();
    let mut edge_of_corner = vec![NONE; m.nnz()];
    for (e, &c) in edge_corner.iter().enumerate() {
        edge_of_corner[c as usize] = e as u32;
    }
    let eoc: Vec<u32> = (0..m.nnz())
        .into_par_iter()
        .with_min_len(4096)
        .map(|c| {
            if edge_of_corner[c] != NONE {
                edge_of_corner[c]
            } else {
                edge_of_corner[twin[c] as usize]
            }
        })
        .collect();
    Ok(HalfEdges {
        twin,
        edge_of_corner: eoc,
        edge_corner,
    })
}

/// Check that every vertex has a single fan of faces (no "bowtie" vertices where two cones of
/// faces touch): walking around the vertex from one of its corners through the twins visits
/// all of its corners. Returns the first vertex that fails.
pub fn check_vertex_fans(m: &MeshMatrix, he: &HalfEdges) -> Result<(), MeshError> {
    let t = m.transpose();
    let bad = (0..m.num_vertices())
        .into_par_iter()
        .with_min_len(2048)
        .find_first(|&v| {
            let row = t.row(v);
            if row.is_empty() {
                return false;
            }
            let c0 = row[0] as usize;
            // rotate one way: the corner at v in the face across the incoming edge prev(c) -> c
            let mut count = 1usize;
            let mut c = c0;
            let mut closed = false;
            loop {
                let tw = he.twin[m.prev(c)];
                if tw == NONE {
                    break;
                }
                c = tw as usize; // twin of (prev -> v) is (v -> prev): it starts at v
                if c == c0 {
                    closed = true;
                    break;
                }
                count += 1;
                if count > row.len() {
                    return true;
                }
            }
            if !closed {
                // rotate the other way from c0: across the outgoing edge c -> next(c)
                let mut c = c0;
                loop {
                    let tw = he.twin[c];
                    if tw == NONE {
                        break;
                    }
                    c = m.next(tw as usize);
                    count += 1;
                    if count > row.len() {
                        return true;
                    }
                }
            }
            count != row.len()
        });
    match bad {
        Some(v) => Err(MeshError::InvalidTopology(format!(
            "vertex {v} is non-manifold (its faces form more than one fan)"
        ))),
        None => Ok(()),
    }
}
