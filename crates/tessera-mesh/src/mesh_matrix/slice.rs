//! Slicing a triangle mesh by a plane (seed 004 §9, Table 4): "this induces a change of the
//! mesh topology as well as the creation of different types of faces. For a triangle mesh this
//! yields triangles and quads along the regions being cut."
//!
//! 1. Signed distances `d = (P - p) · n` per vertex; a vertex is on the positive side when
//!    `d >= 0` (a vertex on the plane counts as positive, so every edge is cut at most once;
//!    a cut point on an edge ending on the plane coincides with that vertex).
//! 2. Every edge whose ends lie on different sides is cut once (edges numbered as in
//!    [`super::edges`]): the cut points are new vertices `nv + (rank of the edge among the cut
//!    edges)`, at `P_a + t (P_b - P_a)`, `t = d_a / (d_a - d_b)` along the owning half-edge.
//! 3. A triangle `(L, A, B)` whose corner `L` lies alone on its side becomes the triangle
//!    `(L, x, y)` and the quad `(x, A, B, y)` (`x` on `LA`, `y` on `BL`), orientation kept; the
//!    other triangles are kept. Output faces follow the input order (a cut triangle's triangle
//!    first), so the result is a mixed mesh in the rowind + colptr form.
//! 4. Each cut triangle contributes one segment, from the cut point on the edge along which
//!    the triangle's loop enters the positive side to the cut point on the edge along which it
//!    leaves it; a neighbour enters where this triangle leaves, so the segments chain head to
//!    tail into the cut polylines, closed on closed meshes.

use super::edges::half_edges;
use super::{MeshMatrix, PolygonMesh, NONE};
use crate::{MeshError, Point};
use rayon::prelude::*;

/// A plane through `point` with normal `normal` (any length but zero).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plane {
    pub point: Point,
    pub normal: Point,
}

impl std::str::FromStr for Plane {
    type Err = String;
    /// `px,py,pz,nx,ny,nz`.
    fn from_str(s: &str) -> Result<Self, String> {
        let v: Vec<f64> = s
            .split(',')
            .map(|t| t.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("plane `{s}`: {e} (expected px,py,pz,nx,ny,nz)"))?;
        if v.len() != 6 || v.iter().any(|x| !x.is_finite()) {
            return Err(format!(
                "plane `{s}`: expected 6 finite numbers px,py,pz,nx,ny,nz"
            ));
        }
        if v[3] == 0.0 && v[4] == 0.0 && v[5] == 0.0 {
            return Err(format!("plane `{s}`: the normal is zero"));
        }
        Ok(Plane {
            point: [v[0], v[1], v[2]],
            normal: [v[3], v[4], v[5]],
        })
    }
}

/// A cut polyline: vertices of the sliced mesh (cut points) in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Polyline {
    pub vertices: Vec<u32>,
    /// The last vertex connects back to the first.
    pub closed: bool,
}

impl Polyline {
    /// Length along `positions` (including the closing segment of a closed polyline).
    pub fn length(&self, positions: &[Point]) -> f64 {
        let p = |i: u32| positions[i as usize];
        let mut l = 0.0;
        let n = self.vertices.len();
        let segs = if self.closed { n } else { n.saturating_sub(1) };
        for k in 0..segs {
            let (a, b) = (p(self.vertices[k]), p(self.vertices[(k + 1) % n]));
            l += ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt();
        }
        l
    }
}

/// The result of [`slice`].
#[derive(Clone, Debug, PartialEq)]
pub struct Sliced {
    /// The input vertices, then one vertex per cut edge; triangles and quads.
    pub mesh: PolygonMesh,
    /// Per output face: `1` on the positive side of the plane, `-1` on the negative side.
    pub face_side: Vec<i8>,
    /// Cut segments `(from, to)` in output-vertex indices, one per cut triangle, in face order.
    pub segments: Vec<[u32; 2]>,
    /// The segments chained into polylines.
    pub polylines: Vec<Polyline>,
    /// Number of cut edges (= new vertices).
    pub cut_edges: usize,
}

impl Sliced {
    /// Keep only the faces on one side (`1` positive, `-1` negative); unused vertices are
    /// removed.
    pub fn side(&self, side: i8) -> Result<PolygonMesh, MeshError> {
        let m = &self.mesh.matrix;
        let mut offsets = vec![0u32];
        let mut verts = Vec::new();
        for f in 0..m.num_faces() {
            if self.face_side[f] == side {
                verts.extend_from_slice(m.face(f));
                offsets.push(verts.len() as u32);
            }
        }
        Ok(
            PolygonMesh::new(self.mesh.positions.clone(), &offsets, &verts)?
                .remove_unused_vertices(),
        )
    }
}

/// Signed distances of the vertices to the plane (unnormalized: `(P - p) · n`).
pub fn signed_distances(positions: &[Point], plane: &Plane) -> Vec<f64> {
    let (p, n) = (plane.point, plane.normal);
    positions
        .par_iter()
        .with_min_len(4096)
        .map(|q| (q[0] - p[0]) * n[0] + (q[1] - p[1]) * n[1] + (q[2] - p[2]) * n[2])
        .collect()
}

/// Slice a triangle mesh by a plane (see the module docs).
pub fn slice(mesh: &PolygonMesh, plane: &Plane) -> Result<Sliced, MeshError> {
    let m = &mesh.matrix;
    if m.uniform_size() != Some(3) && m.num_faces() > 0 {
        return Err(MeshError::Unsupported(
            "plane slicing needs a triangle mesh".into(),
        ));
    }
    let nv = mesh.num_vertices();
    let d = signed_distances(&mesh.positions, plane);
    let pos = |v: u32| d[v as usize] >= 0.0;
    let he = half_edges(m)?;
    let rowind = m.rowind();
    // cut edges: rank among the cut edges, in edge order
    let mut cut_id = vec![NONE; he.num_edges()];
    let mut cut_positions: Vec<Point> = Vec::new();
    for (e, &c) in he.edge_corner.iter().enumerate() {
        let (a, b) = (rowind[c as usize], rowind[m.next(c as usize)]);
        if pos(a) != pos(b) {
            cut_id[e] = (nv + cut_positions.len()) as u32;
            let (da, db) = (d[a as usize], d[b as usize]);
            let t = da / (da - db);
            let (pa, pb) = (mesh.positions[a as usize], mesh.positions[b as usize]);
            cut_positions.push([
                pa[0] + t * (pb[0] - pa[0]),
                pa[1] + t * (pb[1] - pa[1]),
                pa[2] + t * (pb[2] - pa[2]),
            ]);
        }
    }
    let nf = m.num_faces();
    let mut offsets = Vec::with_capacity(nf + nf / 8 + 1);
    let mut verts = Vec::with_capacity(3 * nf + nf / 2);
    let mut face_side = Vec::with_capacity(nf + nf / 8);
    let mut segments = Vec::new();
    offsets.push(0u32);
    for f in 0..nf {
        let c = 3 * f;
        let v = [rowind[c], rowind[c + 1], rowind[c + 2]];
        let s = [pos(v[0]), pos(v[1]), pos(v[2])];
        if s[0] == s[1] && s[1] == s[2] {
            verts.extend_from_slice(&v);
            offsets.push(verts.len() as u32);
            face_side.push(if s[0] { 1 } else { -1 });
            continue;
        }
        // the lone corner: its side differs from both others
        let k = if s[1] == s[2] {
            0
        } else if s[0] == s[2] {
            1
        } else {
            2
        };
        let (l, a, b) = (v[k], v[(k + 1) % 3], v[(k + 2) % 3]);
        let x = cut_id[he.edge_of_corner[c + k] as usize];
        let y = cut_id[he.edge_of_corner[c + (k + 2) % 3] as usize];
        verts.extend_from_slice(&[l, x, y]);
        offsets.push(verts.len() as u32);
        verts.extend_from_slice(&[x, a, b, y]);
        offsets.push(verts.len() as u32);
        let sl: i8 = if s[k] { 1 } else { -1 };
        face_side.push(sl);
        face_side.push(-sl);
        // from the cut where the loop enters the positive side to where it leaves it
        segments.push(if s[k] { [y, x] } else { [x, y] });
    }
    let mut positions = mesh.positions.clone();
    let cut_edges = cut_positions.len();
    positions.extend(cut_positions);
    let polylines = chain_polylines(&segments, nv, positions.len());
    let out = PolygonMesh::new(positions, &offsets, &verts)?;
    Ok(Sliced {
        mesh: out,
        face_side,
        segments,
        polylines,
        cut_edges,
    })
}

/// Chain segments head to tail into polylines: open chains first (in the order of their first
/// segment), then closed loops (starting at their lowest segment). Vertex ids lie in
/// `first..end`.
pub fn chain_polylines(segments: &[[u32; 2]], first: usize, end: usize) -> Vec<Polyline> {
    let n = end - first;
    let mut starts = vec![NONE; n];
    let mut is_end = vec![false; n];
    for (i, s) in segments.iter().enumerate() {
        starts[s[0] as usize - first] = i as u32;
        is_end[s[1] as usize - first] = true;
    }
    let mut used = vec![false; segments.len()];
    let mut out = Vec::new();
    let walk = |i0: usize, used: &mut Vec<bool>| -> Polyline {
        let mut vertices = vec![segments[i0][0]];
        let mut i = i0;
        loop {
            used[i] = true;
            let to = segments[i][1];
            let nx = starts[to as usize - first];
            if nx == NONE {
                vertices.push(to);
                return Polyline {
                    vertices,
                    closed: false,
                };
            }
            if nx as usize == i0 {
                return Polyline {
                    vertices,
                    closed: true,
                };
            }
            if used[nx as usize] {
                // a branch (non-manifold cut): stop the chain here
                vertices.push(to);
                return Polyline {
                    vertices,
                    closed: false,
                };
            }
            vertices.push(to);
            i = nx as usize;
        }
    };
    for i in 0..segments.len() {
        if !used[i] && !is_end[segments[i][0] as usize - first] {
            let p = walk(i, &mut used);
            out.push(p);
        }
    }
    for i in 0..segments.len() {
        if !used[i] {
            let p = walk(i, &mut used);
            out.push(p);
        }
    }
    out
}

/// The face side array of a [`Sliced`] mesh as `f64` (for writing as cell data).
pub fn side_as_f64(s: &[i8]) -> Vec<f64> {
    s.iter().map(|&x| x as f64).collect()
}

/// The output sizes of a slice: `(faces, entries)` (for preallocation on the GPU side).
pub fn output_sizes(m: &MeshMatrix, cut_faces: usize) -> (usize, usize) {
    (m.num_faces() + cut_faces, m.nnz() + 4 * cut_faces)
}
