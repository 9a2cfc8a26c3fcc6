//! Topological operations as products with merge matrices `K` (seed 004 §8, Table 1), in
//! batches of independent operations:
//!
//! - **edge collapse** `N̄ = K M̄`: `K = I_nv` with `K(j, j) = 0, K(i, j) = 1` merges vertex `j`
//!   of edge `(i, j)` into `i`; faces through the edge lose a vertex (triangles vanish);
//! - **face collapse** `N̄ = K M̄`: every vertex `j ≠ i` of face `f` merged into its vertex `i`;
//! - **vertex removal** `N̄ = M̄ Kᵀ`: `K = I_nf` merges the faces around the vertex into one, the
//!   vertex is dropped.
//!
//! The product gives each new column's vertex set; the order is kept from `M` ("when dealing
//! with the ordered matrix, only the merged vertices order is affected. The right ordering can
//! be obtained by simple shifts"): repeated vertices are removed from each loop, columns with
//! fewer than 3 vertices are dropped, and vertices no face uses are removed (the others keep
//! their order).
//!
//! The input must be an oriented 2-manifold with boundary. A batch is checked before anything
//! changes, and a batch that would break the manifold is rejected with an error naming the
//! operation: an edge whose end vertices share a third neighbour outside the edge's triangles
//! (the link condition), an interior edge joining two boundary vertices (the surface would be
//! pinched), operations whose neighbourhoods (faces around their vertices) overlap (they are not
//! independent: put them in separate batches). Valid batches keep the Euler characteristic.

use super::edges::{check_vertex_fans, half_edges, HalfEdges};
use super::{MeshMatrix, PolygonMesh, NONE};
use crate::{MeshError, Point};
use std::collections::HashSet;

fn setup(mesh: &PolygonMesh) -> Result<HalfEdges, MeshError> {
    let he = half_edges(&mesh.matrix)?;
    check_vertex_fans(&mesh.matrix, &he)?;
    Ok(he)
}

/// Vertices on the boundary (an end of a boundary edge).
fn boundary_vertices(m: &MeshMatrix, he: &HalfEdges) -> Vec<bool> {
    let mut b = vec![false; m.num_vertices()];
    for c in 0..m.nnz() {
        if he.twin[c] == NONE {
            b[m.rowind()[c] as usize] = true;
            b[m.rowind()[m.next(c)] as usize] = true;
        }
    }
    b
}

/// Neighbours of `v` (ends of its edges), sorted.
fn neighbours(m: &MeshMatrix, v: u32) -> Vec<u32> {
    let t = m.transpose();
    let rowind = m.rowind();
    let mut out = Vec::new();
    for &c in t.row(v as usize) {
        out.push(rowind[m.next(c as usize)]);
        out.push(rowind[m.prev(c as usize)]);
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The corner whose half-edge runs `a -> b`, if any.
fn find_half_edge(m: &MeshMatrix, a: u32, b: u32) -> Option<usize> {
    let t = m.transpose();
    t.row(a as usize)
        .iter()
        .map(|&c| c as usize)
        .find(|&c| m.rowind()[m.next(c)] == b)
}

/// Faces around vertex `v` (its star).
fn star(m: &MeshMatrix, v: u32) -> impl Iterator<Item = usize> + '_ {
    m.transpose()
        .row(v as usize)
        .iter()
        .map(move |&c| m.corner_face(c as usize))
}

/// Mark the faces around `verts` as used by operation `op`; an overlap is an error.
fn claim(
    m: &MeshMatrix,
    owner: &mut [u32],
    verts: &[u32],
    op: usize,
    describe: &dyn Fn(usize) -> String,
) -> Result<(), MeshError> {
    for &v in verts {
        for f in star(m, v) {
            let o = owner[f];
            if o != NONE && o as usize != op {
                return Err(MeshError::InvalidTopology(format!(
                    "{} and {} of the batch are not independent: both touch face {f}; \
                     apply them in separate batches",
                    describe(o as usize),
                    describe(op)
                )));
            }
            owner[f] = op as u32;
        }
    }
    Ok(())
}

/// Apply the vertex merge `target` (`K M̄` with `K(target[j], j) = 1`): rename, remove repeated
/// vertices from each loop, drop faces of fewer than 3 vertices and unused vertices.
pub fn apply_vertex_merge(
    mesh: &PolygonMesh,
    target: &[u32],
    positions: Vec<Point>,
) -> Result<PolygonMesh, MeshError> {
    let m = &mesh.matrix;
    let mut offsets = vec![0u32];
    let mut verts: Vec<u32> = Vec::with_capacity(m.nnz());
    let mut loop_buf: Vec<u32> = Vec::new();
    for f in 0..m.num_faces() {
        loop_buf.clear();
        for &v in m.face(f) {
            let t = target[v as usize];
            if loop_buf.last() != Some(&t) {
                loop_buf.push(t);
            }
        }
        while loop_buf.len() > 1 && loop_buf.first() == loop_buf.last() {
            loop_buf.pop();
        }
        let distinct: HashSet<u32> = loop_buf.iter().copied().collect();
        if loop_buf.len() >= 3 && distinct.len() == loop_buf.len() {
            verts.extend_from_slice(&loop_buf);
            offsets.push(verts.len() as u32);
        } else if loop_buf.len() >= 3 {
            return Err(MeshError::InvalidTopology(format!(
                "the merge folds face {f} onto itself ({:?} -> {:?})",
                m.face(f),
                loop_buf
            )));
        }
    }
    Ok(PolygonMesh::new(positions, &offsets, &verts)?.remove_unused_vertices())
}

/// Collapse a batch of edges `(i, j)` (vertex `j` merged into `i`, which moves to the edge
/// midpoint). See the module docs for the checks.
pub fn collapse_edges(mesh: &PolygonMesh, edges: &[[u32; 2]]) -> Result<PolygonMesh, MeshError> {
    let m = &mesh.matrix;
    let he = setup(mesh)?;
    let bnd = boundary_vertices(m, &he);
    let nv = mesh.num_vertices();
    let describe = |k: usize| format!("edge {k} ({}, {})", edges[k][0], edges[k][1]);
    let mut owner = vec![NONE; m.num_faces()];
    let mut target: Vec<u32> = (0..nv as u32).collect();
    let mut positions = mesh.positions.clone();
    let rowind = m.rowind();
    for (k, &[i, j]) in edges.iter().enumerate() {
        if i as usize >= nv || j as usize >= nv || i == j {
            return Err(MeshError::InvalidTopology(format!(
                "{} is not an edge of the mesh ({nv} vertices)",
                describe(k)
            )));
        }
        let c = find_half_edge(m, i, j)
            .or_else(|| find_half_edge(m, j, i))
            .ok_or_else(|| {
                MeshError::InvalidTopology(format!("{} is not an edge of the mesh", describe(k)))
            })?;
        // the third vertices of the edge's triangles may be shared neighbours
        let mut allowed = Vec::new();
        for corner in [Some(c), (he.twin[c] != NONE).then_some(he.twin[c] as usize)]
            .into_iter()
            .flatten()
        {
            let f = m.corner_face(corner);
            if m.face_range(f).len() == 3 {
                allowed.push(rowind[m.prev(corner)]);
            }
        }
        let (ni, nj) = (neighbours(m, i), neighbours(m, j));
        if let Some(&x) = ni
            .iter()
            .find(|x| nj.binary_search(x).is_ok() && !allowed.contains(x))
        {
            return Err(MeshError::InvalidTopology(format!(
                "{} cannot be collapsed: its end vertices share the neighbour {x} outside the \
                 edge's triangles (the collapse would make a non-manifold edge)",
                describe(k)
            )));
        }
        if he.twin[c] != NONE && bnd[i as usize] && bnd[j as usize] {
            return Err(MeshError::InvalidTopology(format!(
                "{} cannot be collapsed: it is an interior edge joining two boundary vertices \
                 (the collapse would pinch the surface)",
                describe(k)
            )));
        }
        claim(m, &mut owner, &[i, j], k, &describe)?;
        target[j as usize] = i;
        let (a, b) = (mesh.positions[i as usize], mesh.positions[j as usize]);
        positions[i as usize] = [
            0.5 * (a[0] + b[0]),
            0.5 * (a[1] + b[1]),
            0.5 * (a[2] + b[2]),
        ];
    }
    let out = apply_vertex_merge(mesh, &target, positions)?;
    half_edges(&out.matrix).map_err(|e| {
        MeshError::InvalidTopology(format!(
            "the batch of {} edge collapses leaves a non-manifold mesh: {e}",
            edges.len()
        ))
    })?;
    Ok(out)
}

/// Collapse a batch of faces, each `(face, i)` into its vertex `i` (which keeps its position).
pub fn collapse_faces(mesh: &PolygonMesh, faces: &[[u32; 2]]) -> Result<PolygonMesh, MeshError> {
    let m = &mesh.matrix;
    let he = setup(mesh)?;
    let bnd = boundary_vertices(m, &he);
    let nv = mesh.num_vertices();
    let describe = |k: usize| {
        format!(
            "face collapse {k} (face {} into {})",
            faces[k][0], faces[k][1]
        )
    };
    let mut owner = vec![NONE; m.num_faces()];
    let mut target: Vec<u32> = (0..nv as u32).collect();
    let rowind = m.rowind();
    for (k, &[f, i]) in faces.iter().enumerate() {
        if f as usize >= m.num_faces() || !m.face(f as usize).contains(&i) {
            return Err(MeshError::InvalidTopology(format!(
                "{}: no such face, or the vertex is not on it",
                describe(k)
            )));
        }
        let f = f as usize;
        let s = m.face(f).to_vec();
        // vertices across the face's edges in neighbouring triangles may be shared neighbours
        let mut allowed: Vec<u32> = Vec::new();
        let mut boundary_edges = 0;
        for c in m.face_range(f) {
            let t = he.twin[c];
            if t == NONE {
                boundary_edges += 1;
            } else if m.face_range(m.corner_face(t as usize)).len() == 3 {
                allowed.push(rowind[m.prev(t as usize)]);
            }
        }
        let nb: Vec<Vec<u32>> = s.iter().map(|&v| neighbours(m, v)).collect();
        let mut seen: std::collections::HashMap<u32, usize> = Default::default();
        for n in &nb {
            for &x in n {
                if !s.contains(&x) {
                    *seen.entry(x).or_default() += 1;
                }
            }
        }
        let mut shared: Vec<u32> = seen
            .into_iter()
            .filter(|&(x, c)| c >= 2 && !allowed.contains(&x))
            .map(|(x, _)| x)
            .collect();
        shared.sort_unstable();
        if let Some(x) = shared.first() {
            return Err(MeshError::InvalidTopology(format!(
                "{} cannot be collapsed: vertex {x} neighbours several of its vertices outside \
                 the faces next to it (the collapse would make a non-manifold edge)",
                describe(k)
            )));
        }
        let nbv = s.iter().filter(|&&v| bnd[v as usize]).count();
        if nbv >= 2 && nbv != boundary_edges + 1 {
            return Err(MeshError::InvalidTopology(format!(
                "{} cannot be collapsed: its boundary vertices are not joined along its boundary \
                 edges (the collapse would pinch the surface or remove a component)",
                describe(k)
            )));
        }
        claim(m, &mut owner, &s, k, &describe)?;
        for &v in &s {
            target[v as usize] = i;
        }
    }
    let out = apply_vertex_merge(mesh, &target, mesh.positions.clone())?;
    half_edges(&out.matrix).map_err(|e| {
        MeshError::InvalidTopology(format!(
            "the batch of {} face collapses leaves a non-manifold mesh: {e}",
            faces.len()
        ))
    })?;
    Ok(out)
}

/// Remove a batch of vertices: the faces around each are merged into one polygon (`M̄ Kᵀ`),
/// whose loop is the vertex's link in the order of the faces around it.
pub fn remove_vertices(mesh: &PolygonMesh, verts: &[u32]) -> Result<PolygonMesh, MeshError> {
    let m = &mesh.matrix;
    let he = setup(mesh)?;
    let nv = mesh.num_vertices();
    let describe = |k: usize| format!("vertex removal {k} (vertex {})", verts[k]);
    let mut owner = vec![NONE; m.num_faces()];
    let rowind = m.rowind();
    let t = m.transpose();
    // merged polygon of each removal, keyed by the first face of its star
    let mut merged: Vec<(usize, Vec<u32>)> = Vec::new();
    for (k, &v) in verts.iter().enumerate() {
        if v as usize >= nv || t.row(v as usize).is_empty() {
            return Err(MeshError::InvalidTopology(format!(
                "{}: no such vertex, or no face uses it",
                describe(k)
            )));
        }
        claim(m, &mut owner, &[v], k, &describe)?;
        // start at the corner whose outgoing edge is on the boundary, if any
        let row = t.row(v as usize);
        let start = row
            .iter()
            .map(|&c| c as usize)
            .find(|&c| he.twin[c] == NONE)
            .unwrap_or(row[0] as usize);
        let mut poly: Vec<u32> = Vec::new();
        let mut c = start;
        loop {
            // the face's vertices after v, in order
            let r = m.face_range(m.corner_face(c));
            let n = r.len();
            let pos = c - r.start;
            for s in 1..n {
                let x = rowind[r.start + (pos + s) % n];
                if poly.last() != Some(&x) {
                    poly.push(x);
                }
            }
            let tw = he.twin[m.prev(c)];
            if tw == NONE || tw as usize == start {
                break;
            }
            c = tw as usize;
        }
        if poly.len() > 1 && poly.first() == poly.last() {
            poly.pop();
        }
        let distinct: HashSet<u32> = poly.iter().copied().collect();
        if poly.len() < 3 || distinct.len() != poly.len() {
            return Err(MeshError::InvalidTopology(format!(
                "{} cannot be removed: its link {poly:?} is not a simple polygon of 3 or more \
                 vertices",
                describe(k)
            )));
        }
        let first_face = row
            .iter()
            .map(|&c| m.corner_face(c as usize))
            .min()
            .unwrap();
        merged.push((first_face, poly));
    }
    // N̄ = M̄ Kᵀ: the star's faces become one column (at the place of its first face)
    let mut replace: std::collections::HashMap<usize, usize> = Default::default();
    for (k, (f, _)) in merged.iter().enumerate() {
        replace.insert(*f, k);
    }
    let mut offsets = vec![0u32];
    let mut out: Vec<u32> = Vec::with_capacity(m.nnz());
    for f in 0..m.num_faces() {
        if let Some(&k) = replace.get(&f) {
            out.extend_from_slice(&merged[k].1);
            offsets.push(out.len() as u32);
        } else if owner[f] == NONE {
            out.extend_from_slice(m.face(f));
            offsets.push(out.len() as u32);
        }
    }
    let res = PolygonMesh::new(mesh.positions.clone(), &offsets, &out)?.remove_unused_vertices();
    half_edges(&res.matrix).map_err(|e| {
        MeshError::InvalidTopology(format!(
            "the batch of {} vertex removals leaves a non-manifold mesh: {e}",
            verts.len()
        ))
    })?;
    Ok(res)
}

/// Read a batch of edges from text: one `i j` pair (0-based vertex indices) per line, `#`
/// starts a comment. Errors name the file and line.
pub fn parse_edge_list(path: &std::path::Path, text: &str) -> Result<Vec<[u32; 2]>, MeshError> {
    let mut out = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let toks: Vec<&str> = line.split_whitespace().collect();
        let parse = |t: &str| t.parse::<u32>().ok();
        match (
            toks.as_slice(),
            toks.first().and_then(|t| parse(t)),
            toks.get(1).and_then(|t| parse(t)),
        ) {
            ([_, _], Some(a), Some(b)) => out.push([a, b]),
            _ => {
                return Err(MeshError::parse_line(
                    path,
                    ln + 1,
                    format!("expected two vertex indices `i j`, found `{line}`"),
                ))
            }
        }
    }
    Ok(out)
}
