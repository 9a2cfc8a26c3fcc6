//! Cell quality: inverted and degenerate cells, dihedral angles, radius ratio, aspect ratio
//! and the shape measure that safe smoothing ([`crate::smooth`]) keeps from degrading.
//!
//! Smoothing moves vertices without looking at the cells (dissertation §3.4.2: "each
//! smoothing iteration sets a vertex's position to the average of the positions of its
//! neighbors"), which can fold cells over; this module tells which cells did.
//!
//! **Orientation.** A cell's faces are stored outward (∂3 signs, §3.4), but a file reader
//! orients every cell by its own signed volume ([`crate::PolyMeshBuilder`]), which hides a
//! folded cell: it comes back "outward" yet disagrees with its neighbours. So inversion is
//! decided against the neighbours: [`cell_orientation`] walks the cells through their
//! shared faces (δ3) and gives every cell the factor `w(c) = ±1` that makes the orientation
//! consistent across every interior face, then fixes the sign of each connected component
//! so that its total signed volume, `Σ w(c) V(c)` (which the boundary alone determines), is
//! positive. A cell is **inverted** when `w(c) V(c) < 0` (for cells other than tetrahedra:
//! when any tetrahedron of its decomposition below is), and **degenerate** when
//! `|V(c)| <= 1e-12 d³` with `d` its bounding-box diagonal (the reader's criterion).
//!
//! **Shape measures** (1 for the regular tetrahedron, `<= 0` for an inverted one):
//!
//! | measure | tetrahedron | other cells |
//! |---|---|---|
//! | mean ratio `η` | `12 (3V)^{2/3} / Σ l²` (signed) | min over the decomposition, scaled so a cube has 1 |
//! | radius ratio | `3 r_in / R_circ` | – |
//! | aspect ratio | `l_max / (2√6 r_in)` (Verdict) | edge ratio `l_max / l_min` |
//! | dihedral angles | between the faces at each of the 6 edges | between the two faces of the cell at each of its edges |
//!
//! Cells other than tetrahedra are decomposed into the tetrahedra (face centroid, edge,
//! cell centroid) of each face fan, as OpenFOAM's `checkMesh` decomposes cells into face
//! pyramids.
//!
//! The smoothing test uses `q = η^{3/2} = 12√3 · det / (Σ l²)^{3/2}` (`det` = 6 V), which
//! needs only `+ - * / sqrt`: the CUDA kernel (`cuda/kernels/smooth.cu`) evaluates the same
//! operations in the same order, compiled without FMA contraction, so the CPU and the GPU
//! take identical decisions.

use crate::PolyMesh;
use crate::{CellType, Point};
use rayon::prelude::*;
use serde::Serialize;
use tessera_core::Par;
use tessera_sparse::tcsr::{col, decode};

/// `12 √3`: `q = K · det / (s √s)` is `η^{3/2}` for a tetrahedron with `det = 6 V` and
/// `s = Σ l²` (the same literal is in `smooth.cu`).
pub const Q_SCALE: f64 = 20.784609690826528;

/// The signed shape measure `q = η^{3/2}` of the tetrahedron `(a, b, c, d)` (positive when
/// `det(b - a, c - a, d - a) > 0`), with exactly the operation order of the CUDA kernel.
#[inline]
pub fn tet_q(a: Point, b: Point, c: Point, d: Point) -> f64 {
    let (ux, uy, uz) = (b[0] - a[0], b[1] - a[1], b[2] - a[2]);
    let (vx, vy, vz) = (c[0] - a[0], c[1] - a[1], c[2] - a[2]);
    let (wx, wy, wz) = (d[0] - a[0], d[1] - a[1], d[2] - a[2]);
    let det = ux * (vy * wz - vz * wy) - uy * (vx * wz - vz * wx) + uz * (vx * wy - vy * wx);
    let l2 = |p: Point, q: Point| {
        let (x, y, z) = (q[0] - p[0], q[1] - p[1], q[2] - p[2]);
        x * x + y * y + z * z
    };
    let s = l2(a, b) + l2(a, c) + l2(a, d) + l2(b, c) + l2(b, d) + l2(c, d);
    if s.is_nan() || s <= 0.0 {
        return 0.0;
    }
    Q_SCALE * det / (s * s.sqrt())
}

/// The orientation factor `w(c) = ±1` of every cell (see the [module docs](self)): the
/// cells' stored orientation times `w` is consistent across every interior face and gives
/// each connected component a positive total volume.
pub fn cell_orientation(mesh: &PolyMesh) -> Vec<i8> {
    let nc = mesh.num_cells();
    let cf = mesh.cell_faces();
    let fc = mesh.face_cells();
    let vol = stored_volumes(mesh);
    let mut w = vec![0i8; nc];
    let mut comp = vec![u32::MAX; nc];
    let mut comp_vol: Vec<f64> = Vec::new();
    let mut stack = Vec::new();
    for seed in 0..nc {
        if w[seed] != 0 {
            continue;
        }
        let id = comp_vol.len() as u32;
        let mut total = 0.0;
        w[seed] = 1;
        comp[seed] = id;
        stack.push(seed as u32);
        while let Some(c) = stack.pop() {
            let c = c as usize;
            total += w[c] as f64 * vol[c];
            for &e in cf.row(c) {
                let (f, s1) = decode(e);
                let row = fc.row(f as usize);
                if row.len() != 2 {
                    continue; // boundary or non-manifold face
                }
                for &g in row {
                    let (c2, s2) = decode(g);
                    let c2 = c2 as usize;
                    if c2 == c || w[c2] != 0 {
                        continue;
                    }
                    // consistent: w(c) s1 = -w(c2) s2
                    w[c2] = (-(w[c] as i32) * s1 * s2) as i8;
                    comp[c2] = id;
                    stack.push(c2 as u32);
                }
            }
        }
        comp_vol.push(total);
    }
    for c in 0..nc {
        if comp_vol[comp[c] as usize] < 0.0 {
            w[c] = -w[c];
        }
    }
    w
}

/// Signed volume of every cell with its stored face orientation (divergence theorem over
/// the face fans, relative to the cell's first vertex).
fn stored_volumes(mesh: &PolyMesh) -> Vec<f64> {
    let f = |c: usize| {
        let mut loops = Vec::new();
        cell_loops(mesh, c, 1, &mut loops);
        loops_volume(mesh.positions(), &loops)
    };
    par_map(mesh.par(), mesh.num_cells(), f)
}

fn par_map<T: Send, F: Fn(usize) -> T + Sync + Send>(par: Par, n: usize, f: F) -> Vec<T> {
    match par {
        Par::Seq => (0..n).map(f).collect(),
        Par::Rayon => (0..n).into_par_iter().with_min_len(1024).map(f).collect(),
    }
}

/// The face loops of cell `c`, outward for orientation factor `w`, as
/// `[n, v0, .., v(n-1), n, ...]`.
pub fn cell_loops(mesh: &PolyMesh, c: usize, w: i8, out: &mut Vec<u32>) {
    out.clear();
    let fv = mesh.face_vertices();
    for &e in mesh.cell_faces().row(c) {
        let (f, s) = decode(e);
        let l = fv.row(f as usize);
        out.push(l.len() as u32);
        let start = out.len();
        out.extend(l.iter().map(|&v| col(v)));
        if s * (w as i32) < 0 {
            out[start..].reverse();
        }
    }
}

/// Iterate over the loops of a `[n, v...]` stream.
fn loops_iter(stream: &[u32]) -> impl Iterator<Item = &[u32]> {
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= stream.len() {
            return None;
        }
        let n = stream[i] as usize;
        let l = &stream[i + 1..i + 1 + n];
        i += 1 + n;
        Some(l)
    })
}

fn loops_volume(pos: &[Point], loops: &[u32]) -> f64 {
    let Some(&v0) = loops.get(1) else {
        return 0.0;
    };
    let p0 = pos[v0 as usize];
    let sub = |a: Point| [a[0] - p0[0], a[1] - p0[1], a[2] - p0[2]];
    let mut vol = 0.0;
    for l in loops_iter(loops) {
        let a = sub(pos[l[0] as usize]);
        for k in 1..l.len().saturating_sub(1) {
            let b = sub(pos[l[k] as usize]);
            let c = sub(pos[l[k + 1] as usize]);
            vol += det3(a, b, c);
        }
    }
    vol / 6.0
}

/// `|V| <= 1e-12 d³` (or not finite): the reader's criterion for a zero-volume cell.
fn is_degenerate(vol: f64, diag: f64) -> bool {
    let lim = 1e-12 * diag * diag * diag;
    !vol.is_finite() || vol.abs().partial_cmp(&lim) != Some(std::cmp::Ordering::Greater)
}

#[inline]
fn det3(a: Point, b: Point, c: Point) -> f64 {
    a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
        + a[2] * (b[0] * c[1] - b[1] * c[0])
}

#[inline]
fn sub(a: Point, b: Point) -> Point {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

#[inline]
fn dot(a: Point, b: Point) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

#[inline]
fn cross(a: Point, b: Point) -> Point {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

#[inline]
fn norm(a: Point) -> f64 {
    dot(a, a).sqrt()
}

/// The cells of a mesh in the form the shape test reads (host and device alike): for a
/// tetrahedron its 4 corners in positive order; for any other cell its distinct vertices
/// (for the centroid) and its outward face loops `[n, v...]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QualityStencil {
    /// `num_cells + 1` offsets into `verts`.
    pub vert_offsets: Vec<u32>,
    /// Tetrahedra: 4 corners, positively oriented; other cells: sorted distinct vertices.
    pub verts: Vec<u32>,
    /// `num_cells + 1` offsets into `loops` (an empty range marks a tetrahedron).
    pub loop_offsets: Vec<u32>,
    /// Outward face loops of the cells other than tetrahedra, `[n, v0, .., v(n-1), ...]`.
    pub loops: Vec<u32>,
    /// The decomposition measure of the unit cube, which scales the measure of cells other
    /// than tetrahedra to 1 for a cube.
    pub cube_q: f64,
}

impl QualityStencil {
    /// The stencil of `mesh` with orientation factors `w` ([`cell_orientation`]).
    pub fn new(mesh: &PolyMesh, w: &[i8]) -> Self {
        let nc = mesh.num_cells();
        let per_cell: Vec<(Vec<u32>, Vec<u32>)> = par_map(mesh.par(), nc, |c| {
            let mut loops = Vec::new();
            cell_loops(mesh, c, w[c], &mut loops);
            let is_tet = loops.len() == 16 && loops_iter(&loops).all(|l| l.len() == 3);
            if is_tet {
                // outward loop (a, b, c) of the first face is the local face [0, 2, 1]
                let (a, b, cc) = (loops[1], loops[2], loops[3]);
                let d = loops
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % 4 != 0)
                    .map(|(_, &v)| v)
                    .find(|&v| v != a && v != b && v != cc)
                    .unwrap_or(a);
                (vec![a, cc, b, d], Vec::new())
            } else {
                let mut vs: Vec<u32> = mesh
                    .cell_vertices()
                    .row(c)
                    .iter()
                    .map(|&v| col(v))
                    .collect();
                vs.sort_unstable();
                (vs, loops)
            }
        });
        let mut s = QualityStencil {
            vert_offsets: Vec::with_capacity(nc + 1),
            verts: Vec::with_capacity(4 * nc),
            loop_offsets: Vec::with_capacity(nc + 1),
            loops: Vec::new(),
            cube_q: cube_q(),
        };
        s.vert_offsets.push(0);
        s.loop_offsets.push(0);
        for (v, l) in per_cell {
            s.verts.extend_from_slice(&v);
            s.loops.extend_from_slice(&l);
            s.vert_offsets.push(s.verts.len() as u32);
            s.loop_offsets.push(s.loops.len() as u32);
        }
        s
    }

    pub fn num_cells(&self) -> usize {
        self.vert_offsets.len() - 1
    }

    /// The signed shape measure `q` of cell `c` at positions `pos` (see the module docs);
    /// identical to `cell_q` in `smooth.cu`.
    pub fn q(&self, c: usize, pos: &[Point]) -> f64 {
        let v = &self.verts[self.vert_offsets[c] as usize..self.vert_offsets[c + 1] as usize];
        let l = &self.loops[self.loop_offsets[c] as usize..self.loop_offsets[c + 1] as usize];
        q_of(v, l, self.cube_q, |i| pos[i as usize])
    }

    /// Like [`Self::q`] with the position of each vertex chosen by `at`.
    pub fn q_with(&self, c: usize, at: impl Fn(u32) -> Point) -> f64 {
        let v = &self.verts[self.vert_offsets[c] as usize..self.vert_offsets[c + 1] as usize];
        let l = &self.loops[self.loop_offsets[c] as usize..self.loop_offsets[c + 1] as usize];
        q_of(v, l, self.cube_q, at)
    }

    /// The vertices of cell `c` (tetrahedra: the oriented corners).
    pub fn cell_verts(&self, c: usize) -> &[u32] {
        &self.verts[self.vert_offsets[c] as usize..self.vert_offsets[c + 1] as usize]
    }
}

/// `q` of a stencil cell; the operation order is the CUDA kernel's.
fn q_of(verts: &[u32], loops: &[u32], cube_q: f64, at: impl Fn(u32) -> Point) -> f64 {
    if loops.is_empty() {
        if verts.len() != 4 {
            return 0.0;
        }
        return tet_q(at(verts[0]), at(verts[1]), at(verts[2]), at(verts[3]));
    }
    let n = verts.len() as f64;
    let mut cc = [0.0f64; 3];
    for &v in verts {
        let p = at(v);
        cc[0] += p[0];
        cc[1] += p[1];
        cc[2] += p[2];
    }
    cc = [cc[0] / n, cc[1] / n, cc[2] / n];
    let mut qmin = f64::INFINITY;
    for l in loops_iter(loops) {
        let k = l.len() as f64;
        let mut fc = [0.0f64; 3];
        for &v in l {
            let p = at(v);
            fc[0] += p[0];
            fc[1] += p[1];
            fc[2] += p[2];
        }
        fc = [fc[0] / k, fc[1] / k, fc[2] / k];
        for i in 0..l.len() {
            let a = at(l[i]);
            let b = at(l[(i + 1) % l.len()]);
            // outward edge a -> b: (f, b, a, c) is positive
            let q = tet_q(fc, b, a, cc);
            if q < qmin {
                qmin = q;
            }
        }
    }
    if qmin == f64::INFINITY {
        return 0.0;
    }
    qmin / cube_q
}

/// The decomposition measure of the unit cube (one of its 24 congruent tetrahedra).
pub fn cube_q() -> f64 {
    tet_q(
        [0.5, 0.5, 0.0],
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.5, 0.5, 0.5],
    )
    .abs()
}

/// The mean ratio `η` from the measure `q = η^{3/2}` (sign kept).
pub fn mean_ratio_of_q(q: f64) -> f64 {
    q.signum() * q.abs().powf(2.0 / 3.0)
}

/// The measure `q` of a mean ratio `η` (sign kept): the smoothing threshold in `q` units.
pub fn q_of_mean_ratio(eta: f64) -> f64 {
    eta.signum() * eta.abs().powf(1.5)
}

/// Shape of one cell (see the [module docs](self) for the measures).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CellShape {
    pub cell: u32,
    #[serde(rename = "type")]
    pub kind: CellType,
    /// Signed volume with the orientation consistent with the neighbours.
    pub volume: f64,
    /// Mean ratio (tetrahedra) or the scaled decomposition measure (other cells); `<= 0`
    /// when inverted.
    pub quality: f64,
    pub min_dihedral_deg: f64,
    pub max_dihedral_deg: f64,
    /// `3 r_in / R_circ` (tetrahedra only).
    pub radius_ratio: Option<f64>,
    /// Verdict's aspect ratio (tetrahedra) or the edge ratio (other cells).
    pub aspect_ratio: f64,
    pub inverted: bool,
    pub degenerate: bool,
    pub centroid: Point,
}

/// The shape of cell `c` with outward loops `loops` (`[n, v...]`, see [`cell_loops`]).
pub fn cell_shape(pos: &[Point], c: u32, kind: CellType, loops: &[u32], cube_q: f64) -> CellShape {
    // distinct vertices, bounding box, edges
    let mut verts: Vec<u32> = loops_iter(loops).flatten().copied().collect();
    verts.sort_unstable();
    verts.dedup();
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    let mut centroid = [0.0; 3];
    for &v in &verts {
        let p = pos[v as usize];
        for k in 0..3 {
            lo[k] = lo[k].min(p[k]);
            hi[k] = hi[k].max(p[k]);
            centroid[k] += p[k] / verts.len() as f64;
        }
    }
    let diag = norm(sub(hi, lo));
    let volume = loops_volume(pos, loops);
    let degenerate = is_degenerate(volume, diag);
    // directed edges of the outward loops with their face: the two faces at an edge
    // traverse it in opposite directions
    let mut normals: Vec<Point> = Vec::new();
    let mut dir: Vec<(u32, u32, usize)> = Vec::new();
    for (fi, l) in loops_iter(loops).enumerate() {
        // Newell normal (outward)
        let mut n = [0.0; 3];
        for i in 0..l.len() {
            let a = pos[l[i] as usize];
            let b = pos[l[(i + 1) % l.len()] as usize];
            n[0] += (a[1] - b[1]) * (a[2] + b[2]);
            n[1] += (a[2] - b[2]) * (a[0] + b[0]);
            n[2] += (a[0] - b[0]) * (a[1] + b[1]);
        }
        normals.push(n);
        for i in 0..l.len() {
            dir.push((l[i], l[(i + 1) % l.len()], fi));
        }
    }
    let (mut dmin, mut dmax) = (f64::INFINITY, f64::NEG_INFINITY);
    let (mut lmin, mut lmax) = (f64::INFINITY, 0.0f64);
    for &(a, b, f) in &dir {
        if a < b {
            let l = norm(sub(pos[b as usize], pos[a as usize]));
            lmin = lmin.min(l);
            lmax = lmax.max(l);
        }
        if let Some(&(_, _, g)) = dir.iter().find(|&&(x, y, _)| x == b && y == a) {
            if f < g {
                let (n1, n2) = (normals[f], normals[g]);
                let cosang = (dot(n1, n2) / (norm(n1) * norm(n2))).clamp(-1.0, 1.0);
                let angle = 180.0 - cosang.acos().to_degrees();
                if angle.is_finite() {
                    dmin = dmin.min(angle);
                    dmax = dmax.max(angle);
                }
            }
        }
    }
    let (quality, radius_ratio, aspect_ratio);
    if kind == CellType::Tetrahedron && verts.len() == 4 {
        let l: Vec<u32> = loops_iter(loops)
            .next()
            .map(|l| l.to_vec())
            .unwrap_or_default();
        let d = verts
            .iter()
            .copied()
            .find(|v| !l.contains(v))
            .unwrap_or(verts[0]);
        let t = [
            pos[l[0] as usize],
            pos[l[2] as usize],
            pos[l[1] as usize],
            pos[d as usize],
        ];
        quality = mean_ratio_of_q(tet_q(t[0], t[1], t[2], t[3]));
        let av = volume.abs();
        let area = |a: Point, b: Point, c: Point| 0.5 * norm(cross(sub(b, a), sub(c, a)));
        let areas = area(t[0], t[1], t[2])
            + area(t[0], t[1], t[3])
            + area(t[0], t[2], t[3])
            + area(t[1], t[2], t[3]);
        let r_in = 3.0 * av / areas;
        let e = |i: usize, j: usize| norm(sub(t[i], t[j]));
        let (pa, pb, pc) = (e(0, 1) * e(2, 3), e(0, 2) * e(1, 3), e(0, 3) * e(1, 2));
        let prod = (pa + pb + pc) * (pa + pb - pc) * (pa - pb + pc) * (-pa + pb + pc);
        let r_circ = prod.max(0.0).sqrt() / (24.0 * av);
        radius_ratio = Some(if av > 0.0 && r_circ > 0.0 {
            (3.0 * r_in / r_circ).min(1.0)
        } else {
            0.0
        });
        aspect_ratio = if r_in > 0.0 {
            lmax / (2.0 * 6f64.sqrt() * r_in)
        } else {
            f64::INFINITY
        };
    } else {
        let stencil_verts = verts.clone();
        quality = mean_ratio_of_q(q_of(&stencil_verts, loops, cube_q, |i| pos[i as usize]));
        radius_ratio = None;
        aspect_ratio = if lmin > 0.0 {
            lmax / lmin
        } else {
            f64::INFINITY
        };
    }
    CellShape {
        cell: c,
        kind,
        volume,
        quality,
        min_dihedral_deg: dmin,
        max_dihedral_deg: dmax,
        radius_ratio,
        aspect_ratio,
        inverted: quality <= 0.0 && !degenerate,
        degenerate,
        centroid,
    }
}

/// One bin of a histogram: `count` values in `[lo, hi)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bin {
    pub lo: f64,
    pub hi: f64,
    pub count: usize,
}

fn histogram(edges: &[f64], values: impl Iterator<Item = f64>) -> Vec<Bin> {
    let mut bins: Vec<Bin> = edges
        .windows(2)
        .map(|w| Bin {
            lo: w[0],
            hi: w[1],
            count: 0,
        })
        .collect();
    let last = bins.len().saturating_sub(1);
    for v in values {
        if v.is_nan() || bins.is_empty() {
            continue;
        }
        // values below the first edge count in the first bin, values at or above the
        // last edge in the last
        let i = edges[1..]
            .iter()
            .position(|&e| v < e)
            .unwrap_or(last)
            .min(last);
        bins[i].count += 1;
    }
    bins
}

/// What `tessera mesh quality` reports.
#[derive(Clone, Debug, Serialize)]
pub struct QualityReport {
    pub cells: usize,
    pub tetrahedra: usize,
    pub inverted: usize,
    /// The first inverted cells (mesh indices, which are the file's volume-element order).
    pub inverted_cells: Vec<u32>,
    pub degenerate: usize,
    pub degenerate_cells: Vec<u32>,
    pub min_quality: f64,
    pub min_dihedral_deg: f64,
    pub max_dihedral_deg: f64,
    pub min_radius_ratio: Option<f64>,
    pub max_aspect_ratio: f64,
    /// Radius ratio of the tetrahedra in tenths.
    pub radius_ratio_histogram: Vec<Bin>,
    /// Aspect ratio (tetrahedra) and edge ratio (other cells).
    pub aspect_ratio_histogram: Vec<Bin>,
    /// The cells of lowest quality, worst first.
    pub worst: Vec<CellShape>,
}

/// How many offending cell indices reports list.
pub const LIST_LIMIT: usize = 20;

/// Inverted and degenerate cells only (what `mesh info` and `mesh smooth` report).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Validity {
    pub inverted: usize,
    /// The first [`LIST_LIMIT`] inverted cells.
    pub inverted_cells: Vec<u32>,
    pub degenerate: usize,
    pub degenerate_cells: Vec<u32>,
}

/// Inverted and degenerate cells of `mesh` (see the [module docs](self)).
pub fn validity(mesh: &PolyMesh) -> Validity {
    let w = cell_orientation(mesh);
    validity_with(mesh, &w)
}

/// [`validity`] with given orientation factors.
pub fn validity_with(mesh: &PolyMesh, w: &[i8]) -> Validity {
    let flags: Vec<(bool, bool)> = par_map(mesh.par(), mesh.num_cells(), |c| {
        let mut loops = Vec::new();
        cell_loops(mesh, c, w[c], &mut loops);
        let pos = mesh.positions();
        let vol = loops_volume(pos, &loops);
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for l in loops_iter(&loops) {
            for &v in l {
                let p = pos[v as usize];
                for k in 0..3 {
                    lo[k] = lo[k].min(p[k]);
                    hi[k] = hi[k].max(p[k]);
                }
            }
        }
        let d = norm(sub(hi, lo));
        let degenerate = is_degenerate(vol, d);
        let is_tet = loops.len() == 16 && loops_iter(&loops).all(|l| l.len() == 3);
        let inverted = !degenerate
            && if is_tet {
                vol < 0.0
            } else {
                let mut vs: Vec<u32> = loops_iter(&loops).flatten().copied().collect();
                vs.sort_unstable();
                vs.dedup();
                q_of(&vs, &loops, 1.0, |i| pos[i as usize]) <= 0.0
            };
        (inverted, degenerate)
    });
    let mut v = Validity::default();
    for (c, &(inv, deg)) in flags.iter().enumerate() {
        if inv {
            v.inverted += 1;
            if v.inverted_cells.len() < LIST_LIMIT {
                v.inverted_cells.push(c as u32);
            }
        }
        if deg {
            v.degenerate += 1;
            if v.degenerate_cells.len() < LIST_LIMIT {
                v.degenerate_cells.push(c as u32);
            }
        }
    }
    v
}

/// The full quality report of `mesh` with the `worst` lowest-quality cells.
pub fn quality_report(mesh: &PolyMesh, worst: usize) -> QualityReport {
    let w = cell_orientation(mesh);
    let cq = cube_q();
    let cf = mesh.cell_faces();
    let fe = mesh.face_edges();
    let shapes: Vec<CellShape> = par_map(mesh.par(), mesh.num_cells(), |c| {
        let sizes: Vec<usize> = cf
            .row(c)
            .iter()
            .map(|&v| fe.row_len(col(v) as usize))
            .collect();
        let kind = CellType::classify(&sizes);
        let mut loops = Vec::new();
        cell_loops(mesh, c, w[c], &mut loops);
        cell_shape(mesh.positions(), c as u32, kind, &loops, cq)
    });
    let mut r = QualityReport {
        cells: shapes.len(),
        tetrahedra: shapes
            .iter()
            .filter(|s| s.kind == CellType::Tetrahedron)
            .count(),
        inverted: 0,
        inverted_cells: Vec::new(),
        degenerate: 0,
        degenerate_cells: Vec::new(),
        min_quality: shapes
            .iter()
            .map(|s| s.quality)
            .fold(f64::INFINITY, f64::min),
        min_dihedral_deg: shapes
            .iter()
            .map(|s| s.min_dihedral_deg)
            .fold(f64::INFINITY, f64::min),
        max_dihedral_deg: shapes
            .iter()
            .map(|s| s.max_dihedral_deg)
            .fold(f64::NEG_INFINITY, f64::max),
        min_radius_ratio: shapes
            .iter()
            .filter_map(|s| s.radius_ratio)
            .reduce(f64::min),
        max_aspect_ratio: shapes
            .iter()
            .map(|s| s.aspect_ratio)
            .fold(f64::NEG_INFINITY, f64::max),
        radius_ratio_histogram: histogram(
            &[0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
            shapes.iter().filter_map(|s| s.radius_ratio),
        ),
        aspect_ratio_histogram: histogram(
            &[1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 100.0, f64::INFINITY],
            shapes.iter().map(|s| s.aspect_ratio),
        ),
        worst: Vec::new(),
    };
    for s in &shapes {
        if s.inverted {
            r.inverted += 1;
            if r.inverted_cells.len() < LIST_LIMIT {
                r.inverted_cells.push(s.cell);
            }
        }
        if s.degenerate {
            r.degenerate += 1;
            if r.degenerate_cells.len() < LIST_LIMIT {
                r.degenerate_cells.push(s.cell);
            }
        }
    }
    let mut order: Vec<usize> = (0..shapes.len()).collect();
    order.sort_by(|&a, &b| {
        shapes[a]
            .quality
            .total_cmp(&shapes[b].quality)
            .then(a.cmp(&b))
    });
    r.worst = order
        .into_iter()
        .take(worst)
        .map(|i| shapes[i].clone())
        .collect();
    if r.cells == 0 {
        r.min_quality = 0.0;
        r.min_dihedral_deg = 0.0;
        r.max_dihedral_deg = 0.0;
        r.max_aspect_ratio = 0.0;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{box_mesh, BoxKind};

    fn regular() -> [Point; 4] {
        [
            [1.0, 1.0, 1.0],
            [1.0, -1.0, -1.0],
            [-1.0, 1.0, -1.0],
            [-1.0, -1.0, 1.0],
        ]
    }

    #[test]
    fn regular_tet_has_unit_measures() {
        let t = regular();
        // orientation: det > 0
        let q = tet_q(t[0], t[1], t[2], t[3]);
        let q = if q < 0.0 {
            tet_q(t[0], t[2], t[1], t[3])
        } else {
            q
        };
        assert!((q - 1.0).abs() < 1e-12, "q = {q}");
        assert!((mean_ratio_of_q(q) - 1.0).abs() < 1e-12);
        assert!((q_of_mean_ratio(0.25) - 0.125).abs() < 1e-15);
    }

    #[test]
    fn box_meshes_are_valid_with_sane_shapes() {
        for kind in [BoxKind::Tet, BoxKind::Hex, BoxKind::Mixed] {
            let m = box_mesh(kind, [3, 2, 2], [1.0, 1.0, 1.0]);
            let v = validity(&m);
            assert_eq!(v.inverted, 0, "{kind:?}");
            assert_eq!(v.degenerate, 0, "{kind:?}");
            let r = quality_report(&m, 3);
            assert_eq!(r.inverted, 0);
            assert!(r.min_quality > 0.0, "{kind:?}: {}", r.min_quality);
            assert!(r.min_dihedral_deg > 0.0 && r.max_dihedral_deg < 180.0);
            if kind == BoxKind::Hex {
                // unit cubes (voxels 1/3 x 1/2 x 1/2 are not cubes: quality below 1)
                assert!((r.min_dihedral_deg - 90.0).abs() < 1e-9);
                assert!((r.max_dihedral_deg - 90.0).abs() < 1e-9);
            }
            let hist: usize = r.aspect_ratio_histogram.iter().map(|b| b.count).sum();
            assert_eq!(hist, m.num_cells());
        }
        let cube = box_mesh(BoxKind::Hex, [1, 1, 1], [2.0, 2.0, 2.0]);
        let r = quality_report(&cube, 1);
        assert!((r.min_quality - 1.0).abs() < 1e-12, "{}", r.min_quality);
    }

    #[test]
    fn folded_cell_is_inverted_in_memory_and_after_reorientation() {
        // a 2x2x2 tet box; pull the centre vertex far out through a face
        let mut m = box_mesh(BoxKind::Tet, [2, 2, 2], [1.0, 1.0, 1.0]);
        let centre = m
            .positions()
            .iter()
            .position(|p| {
                (p[0] - 0.5).abs() < 1e-12
                    && (p[1] - 0.5).abs() < 1e-12
                    && (p[2] - 0.5).abs() < 1e-12
            })
            .unwrap();
        m.positions_mut()[centre] = [0.5, 0.5, 1.4];
        let v = validity(&m);
        assert!(v.inverted > 0 && v.inverted < m.num_cells() / 2, "{v:?}");
        // the same mesh rebuilt cell by cell (each cell oriented by its own volume, as
        // the file readers do) reports the same cells
        let mut b = crate::PolyMeshBuilder::new(m.positions().to_vec());
        let mut buf = [0u32; 8];
        for c in 0..m.num_cells() {
            let ty = crate::io::typed_cell_vertices(&m, c, &mut buf).unwrap();
            b.add_typed_cell(ty, &buf[..4]).unwrap();
        }
        let m2 = b.build(Par::Seq).unwrap();
        let v2 = validity(&m2);
        assert_eq!(v2, v);
        let r = quality_report(&m2, 5);
        assert_eq!(r.inverted, v.inverted);
        assert!(r.worst[0].quality < 0.0 && r.worst[0].inverted);
    }

    #[test]
    fn histogram_bins_cover_the_edges() {
        let h = histogram(&[0.0, 0.5, 1.0], [0.0, 0.2, 0.5, 0.99, 1.0].into_iter());
        assert_eq!(h.iter().map(|b| b.count).collect::<Vec<_>>(), vec![2, 3]);
    }
}
