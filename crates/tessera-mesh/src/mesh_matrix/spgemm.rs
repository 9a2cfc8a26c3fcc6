//! Action-mapped sparse matrix-matrix products `C = M Q Mᵀ` (seed 004 §5.2, Algorithm 2) and
//! the matrices assembled with them (seed §6): adjacency, boundary loops, quad diagonals, the
//! uniform (graph) Laplacian, the cotangent Laplacian of triangle meshes and the P1 Laplacian
//! of tetrahedral meshes (`Q_tet`, seed Eq. 6).
//!
//! ```text
//! for i in vertices, for each corner (face f, value a) of i, for each entry (value b) of f:
//!     C(i, rowind[f, b]) ⊕= Q(a, b) [· values(f, a, b)]
//! ```
//!
//! Row `i` is gathered over the cached transpose (its corners in increasing face order), its
//! contributions are sorted stably by column and combined ([`Combine`]) in that order, so the
//! result does not depend on threads, and the GPU, which forms the same sequence per row,
//! gives the same pattern and the same sums. Collisions where `Q(a, b) = 0` contribute no
//! entry (the map is sparse); with [`Diagonal::NegRowSum`] the diagonal is minus the sum of
//! the row's other entries. Output: [`Csr`] (`nv × nv`, columns sorted), writable as Matrix
//! Market.

use super::action::{PairValues, TET_EDGES};
use super::{Combine, Diagonal, MeshMatrix, PairMap, PairStencil};
use crate::{MeshError, Point};
use rayon::prelude::*;
use std::path::Path;

/// A sparse matrix in compressed sparse rows (`f64` values, columns sorted within rows).
#[derive(Clone, Debug, PartialEq)]
pub struct Csr {
    pub nrows: usize,
    pub ncols: usize,
    pub rowptr: Vec<u32>,
    pub colind: Vec<u32>,
    pub values: Vec<f64>,
}

impl Csr {
    /// From `(row, col, value)` triplets, duplicates summed in the given order (explicit
    /// triplet assembly, Matlab's `sparse`).
    pub fn from_triplets(nrows: usize, ncols: usize, triplets: &[(u32, u32, f64)]) -> Csr {
        let mut t: Vec<(u32, u32, f64)> = triplets.to_vec();
        t.sort_by_key(|&(i, j, _)| (i, j));
        let mut rowptr = vec![0u32; nrows + 1];
        let mut colind = Vec::new();
        let mut values: Vec<f64> = Vec::new();
        let mut k = 0;
        while k < t.len() {
            let (i, j, mut v) = t[k];
            k += 1;
            while k < t.len() && t[k].0 == i && t[k].1 == j {
                v += t[k].2;
                k += 1;
            }
            rowptr[i as usize + 1] += 1;
            colind.push(j);
            values.push(v);
        }
        for i in 0..nrows {
            rowptr[i + 1] += rowptr[i];
        }
        Csr {
            nrows,
            ncols,
            rowptr,
            colind,
            values,
        }
    }
    pub fn nnz(&self) -> usize {
        self.colind.len()
    }
    /// Columns and values of row `i`.
    pub fn row(&self, i: usize) -> (&[u32], &[f64]) {
        let r = self.rowptr[i] as usize..self.rowptr[i + 1] as usize;
        (&self.colind[r.clone()], &self.values[r])
    }
    /// Entry `(i, j)` when stored.
    pub fn get(&self, i: usize, j: usize) -> Option<f64> {
        let (c, v) = self.row(i);
        c.binary_search(&(j as u32)).ok().map(|k| v[k])
    }
    /// Bytes of the three arrays (32-bit indices, 64-bit values).
    pub fn bytes(&self) -> usize {
        4 * (self.rowptr.len() + self.colind.len()) + 8 * self.values.len()
    }
    /// The transpose (columns sorted).
    pub fn transpose(&self) -> Csr {
        let mut counts = vec![0u32; self.ncols + 1];
        for &j in &self.colind {
            counts[j as usize + 1] += 1;
        }
        for j in 0..self.ncols {
            counts[j + 1] += counts[j];
        }
        let rowptr = counts.clone();
        let mut colind = vec![0u32; self.nnz()];
        let mut values = vec![0.0; self.nnz()];
        for i in 0..self.nrows {
            let (c, v) = self.row(i);
            for (&j, &x) in c.iter().zip(v) {
                let s = &mut counts[j as usize];
                colind[*s as usize] = i as u32;
                values[*s as usize] = x;
                *s += 1;
            }
        }
        Csr {
            nrows: self.ncols,
            ncols: self.nrows,
            rowptr,
            colind,
            values,
        }
    }
    /// `y = C x`.
    pub fn mul_vec(&self, x: &[f64]) -> Vec<f64> {
        (0..self.nrows)
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| {
                let (c, v) = self.row(i);
                c.iter().zip(v).map(|(&j, &a)| a * x[j as usize]).sum()
            })
            .collect()
    }
    /// Sum of each row.
    pub fn row_sums(&self) -> Vec<f64> {
        (0..self.nrows)
            .map(|i| self.row(i).1.iter().sum())
            .collect()
    }
    /// Same pattern as `o`.
    pub fn same_pattern(&self, o: &Csr) -> bool {
        self.nrows == o.nrows
            && self.ncols == o.ncols
            && self.rowptr == o.rowptr
            && self.colind == o.colind
    }
    /// Largest `|a - b|` over the values of two matrices with the same pattern.
    pub fn max_abs_diff(&self, o: &Csr) -> f64 {
        self.values
            .iter()
            .zip(&o.values)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    }
    /// Largest `|C(i, j) - C(j, i)|` (an entry missing on one side counts as its value).
    pub fn asymmetry(&self) -> f64 {
        let t = self.transpose();
        if !self.same_pattern(&t) {
            return f64::INFINITY;
        }
        self.max_abs_diff(&t)
    }
    /// Largest row bandwidth `max |i - j|` over the stored entries.
    pub fn bandwidth(&self) -> usize {
        (0..self.nrows)
            .map(|i| {
                let (c, _) = self.row(i);
                c.iter()
                    .map(|&j| (j as i64 - i as i64).unsigned_abs() as usize)
                    .max()
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0)
    }
    /// Write as Matrix Market (`coordinate real general`, 1-based, values round-trip exactly),
    /// atomically.
    pub fn write_matrix_market(&self, path: &Path, comment: &str) -> Result<(), MeshError> {
        crate::io::write_atomic(path, |w| {
            writeln!(w, "%%MatrixMarket matrix coordinate real general")?;
            for line in comment.lines() {
                writeln!(w, "% {line}")?;
            }
            writeln!(w, "{} {} {}", self.nrows, self.ncols, self.nnz())?;
            for i in 0..self.nrows {
                let (c, v) = self.row(i);
                for (&j, &x) in c.iter().zip(v) {
                    writeln!(w, "{} {} {}", i + 1, j + 1, crate::io::fmt_f64(x))?;
                }
            }
            Ok(())
        })
    }
}

/// One row of a mapped product: its contributions `(column, value)` in the order of the
/// serial Algorithm 2 (corners of the row in increasing order, then the face's entries).
fn row_contributions(
    m: &MeshMatrix,
    map: &PairMap,
    i: usize,
    corners: &[u32],
    out: &mut Vec<(u32, f64)>,
) {
    out.clear();
    let rowind = m.rowind();
    let neg_row_sum = map.diagonal == Diagonal::NegRowSum;
    for &c in corners {
        let c = c as usize;
        let f = m.corner_face(c);
        let r = m.face_range(f);
        let n = r.len();
        let a = c - r.start + 1;
        for (b0, e) in r.enumerate() {
            let j = rowind[e];
            if neg_row_sum && j as usize == i {
                continue;
            }
            if map.q(n, a, b0 + 1) == 0.0 {
                continue;
            }
            out.push((j, map.value(f, n, a, b0 + 1)));
        }
    }
}

/// Sort one row's contributions stably by column and combine them; append the diagonal
/// when formed from the row sum. Returns the combined row in `out`.
fn combine_row(i: u32, contrib: &mut [(u32, f64)], map: &PairMap, out: &mut Vec<(u32, f64)>) {
    out.clear();
    // stable: equal columns keep the serial order, so sums are formed in that order
    contrib.sort_by_key(|&(j, _)| j);
    let mut k = 0;
    while k < contrib.len() {
        let (j, mut v) = contrib[k];
        k += 1;
        while k < contrib.len() && contrib[k].0 == j {
            if map.combine == Combine::Sum {
                v += contrib[k].1;
            }
            k += 1;
        }
        out.push((j, v));
    }
    if map.diagonal == Diagonal::NegRowSum {
        let mut s = 0.0;
        for &(_, v) in out.iter() {
            s += v;
        }
        let pos = out.partition_point(|&(j, _)| j < i);
        out.insert(pos, (i, -s));
    }
}

/// `C = M Q Mᵀ` (`nv × nv`) with the pair map `map` (see the module docs).
pub fn mapped_spgemm(m: &MeshMatrix, map: &PairMap) -> Result<Csr, MeshError> {
    map.check(m)?;
    let t = m.transpose();
    let nv = m.num_vertices();
    const CHUNK: usize = 2048;
    let parts: Vec<(Vec<u32>, Vec<u32>, Vec<f64>)> = (0..nv.div_ceil(CHUNK))
        .into_par_iter()
        .map(|ch| {
            let (lo, hi) = (ch * CHUNK, ((ch + 1) * CHUNK).min(nv));
            let mut lens = Vec::with_capacity(hi - lo);
            let mut cols = Vec::new();
            let mut vals = Vec::new();
            let mut contrib = Vec::new();
            let mut row = Vec::new();
            for i in lo..hi {
                let corners = t.row(i);
                row_contributions(m, map, i, corners, &mut contrib);
                if corners.is_empty() {
                    row.clear();
                } else {
                    combine_row(i as u32, &mut contrib, map, &mut row);
                }
                lens.push(row.len() as u32);
                for &(j, v) in &row {
                    cols.push(j);
                    vals.push(v);
                }
            }
            (lens, cols, vals)
        })
        .collect();
    let mut rowptr = Vec::with_capacity(nv + 1);
    rowptr.push(0u32);
    let total: usize = parts.iter().map(|p| p.1.len()).sum();
    if total >= u32::MAX as usize {
        return Err(MeshError::Unsupported(format!(
            "the product has {total} entries, beyond 32-bit offsets"
        )));
    }
    let mut colind = Vec::with_capacity(total);
    let mut values = Vec::with_capacity(total);
    for (lens, cols, vals) in parts {
        for l in lens {
            rowptr.push(rowptr.last().unwrap() + l);
        }
        colind.extend(cols);
        values.extend(vals);
    }
    Ok(Csr {
        nrows: nv,
        ncols: nv,
        rowptr,
        colind,
        values,
    })
}

/// `M̄ M̄ᵀ`: the generalized vertex adjacency (counts of shared faces; seed §5.2).
pub fn generalized_adjacency(m: &MeshMatrix) -> Result<Csr, MeshError> {
    mapped_spgemm(m, &PairMap::generalized_adjacency())
}

/// The oriented adjacency `M̄ Q_n M̄ᵀ`: `(i, j)` counts the faces in which `j` follows `i`.
pub fn oriented_adjacency(m: &MeshMatrix) -> Result<Csr, MeshError> {
    mapped_spgemm(m, &PairMap::oriented_adjacency())
}

/// The uniform (graph) Laplacian `D - (A ∨ Aᵀ)`.
pub fn uniform_laplacian(m: &MeshMatrix) -> Result<Csr, MeshError> {
    mapped_spgemm(m, &PairMap::graph_laplacian())
}

fn sub(a: Point, b: Point) -> Point {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn dot(a: Point, b: Point) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn cross(a: Point, b: Point) -> Point {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
fn norm(a: Point) -> f64 {
    dot(a, a).sqrt()
}

fn check_positions(m: &MeshMatrix, positions: &[Point]) -> Result<(), MeshError> {
    if positions.len() != m.num_vertices() {
        return Err(MeshError::InvalidTopology(format!(
            "{} positions for {} vertices",
            positions.len(),
            m.num_vertices()
        )));
    }
    Ok(())
}

/// Half the cotangent of every triangle corner (one value per nonzero of `M`): the
/// per-entry values of the cotangent Laplacian. Triangles only.
pub fn half_cotangents(m: &MeshMatrix, positions: &[Point]) -> Result<Vec<f64>, MeshError> {
    check_positions(m, positions)?;
    if m.uniform_size() != Some(3) && m.num_faces() > 0 {
        return Err(MeshError::Unsupported(
            "the cotangent Laplacian needs a triangle mesh".into(),
        ));
    }
    let rowind = m.rowind();
    let mut out = vec![0.0; m.nnz()];
    let bad = out
        .par_chunks_mut(3)
        .enumerate()
        .map(|(f, o)| {
            let p = |k: usize| positions[rowind[3 * f + k] as usize];
            for k in 0..3 {
                let e1 = sub(p((k + 1) % 3), p(k));
                let e2 = sub(p((k + 2) % 3), p(k));
                let s = norm(cross(e1, e2));
                if s == 0.0 || !s.is_finite() {
                    return Some(f);
                }
                o[k] = 0.5 * dot(e1, e2) / s;
            }
            None
        })
        .find_first(|x| x.is_some())
        .flatten();
    if let Some(f) = bad {
        return Err(MeshError::DegenerateCell {
            cell: f,
            reason: "the triangle has zero area: its cotangent weights are undefined".into(),
        });
    }
    Ok(out)
}

/// The cotangent Laplacian of a triangle mesh (seed §6, the constant strain triangle):
/// `L(i, j) = -(cot α_ij + cot β_ij) / 2` over the angles opposite edge `ij`, zero row sums.
/// `Q = Q_3^0 - (Q_3^2 + Q_3)` with the half cotangent of the corner opposite each pair as
/// the per-entry value; positive semi-definite for a Delaunay mesh.
pub fn cotan_laplacian(m: &MeshMatrix, positions: &[Point]) -> Result<Csr, MeshError> {
    mapped_spgemm(m, &cotan_map(m, positions)?)
}

/// The pair map of [`cotan_laplacian`]: `Q = Q_3^0 - (Q_3^2 + Q_3)` off the diagonal, the half
/// cotangent of the opposite corner per collision, the diagonal from the row sums.
pub fn cotan_map(m: &MeshMatrix, positions: &[Point]) -> Result<PairMap, MeshError> {
    Ok(cotan_map_with(half_cotangents(m, positions)?))
}

/// The cotangent map with given half cotangents (one per nonzero).
pub fn cotan_map_with(cots: Vec<f64>) -> PairMap {
    let mut index = vec![255u8; 9];
    let mut q = vec![0.0; 9];
    for a in 0..3 {
        for b in 0..3 {
            if a != b {
                index[a * 3 + b] = (3 - a - b) as u8;
                q[a * 3 + b] = -1.0;
            }
        }
    }
    PairMap {
        stencil: PairStencil::Table { n: 3, q },
        values: Some(PairValues {
            n: 3,
            m: 3,
            index,
            values: cots,
        }),
        diagonal: Diagonal::NegRowSum,
        combine: Combine::Sum,
    }
}

/// The 6 values per tetrahedron of the P1 Laplacian (seed §6): for the edge `ij` (in
/// [`TET_EDGES`] order), `l_kl cot θ_kl / 6` of the opposite edge `kl` (length `l_kl`, interior
/// dihedral angle `θ_kl`), which is `-∫ ∇φ_i · ∇φ_j`.
pub fn tet_edge_values(m: &MeshMatrix, positions: &[Point]) -> Result<Vec<f64>, MeshError> {
    check_positions(m, positions)?;
    if m.uniform_size() != Some(4) && m.num_faces() > 0 {
        return Err(MeshError::Unsupported(
            "the P1 tetrahedral Laplacian needs a mesh matrix of tetrahedra (4 vertices per column)"
                .into(),
        ));
    }
    let rowind = m.rowind();
    let mut out = vec![0.0; 6 * m.num_faces()];
    let bad = out
        .par_chunks_mut(6)
        .enumerate()
        .map(|(c, o)| {
            let p = |k: usize| positions[rowind[4 * c + k] as usize];
            for (t, &[i, j]) in TET_EDGES.iter().enumerate() {
                let [k, l] = TET_EDGES[5 - t]; // the opposite edge
                let e = sub(p(l), p(k));
                let len = norm(e);
                let a = sub(p(i), p(k));
                let b = sub(p(j), p(k));
                // components perpendicular to the edge kl
                let ee = dot(e, e);
                let u = sub(a, scale(e, dot(a, e) / ee));
                let w = sub(b, scale(e, dot(b, e) / ee));
                let s = norm(cross(u, w));
                if s == 0.0 || !s.is_finite() || len == 0.0 {
                    return Some(c);
                }
                o[t] = len * (dot(u, w) / s) / 6.0;
            }
            None
        })
        .find_first(|x| x.is_some())
        .flatten();
    if let Some(c) = bad {
        return Err(MeshError::DegenerateCell {
            cell: c,
            reason: "the tetrahedron has zero volume: its dihedral angles are undefined".into(),
        });
    }
    Ok(out)
}

fn scale(a: Point, s: f64) -> Point {
    [a[0] * s, a[1] * s, a[2] * s]
}

/// The P1 (linear tetrahedron) Laplacian `K(i, j) = ∫ ∇φ_i · ∇φ_j` assembled by the mapped
/// SpGEMM with `Q_tet` (seed Eq. 6) and 6 values per tetrahedron ([`tet_edge_values`]), the
/// diagonal from the zero row sums.
pub fn tet_laplacian(m: &MeshMatrix, positions: &[Point]) -> Result<Csr, MeshError> {
    mapped_spgemm(m, &tet_map(m, positions)?)
}

/// The pair map of [`tet_laplacian`]: `Q_tet` with the 6 edge values per cell.
pub fn tet_map(m: &MeshMatrix, positions: &[Point]) -> Result<PairMap, MeshError> {
    Ok(tet_map_with(tet_edge_values(m, positions)?))
}

/// `Q_tet` with given edge values (6 per cell).
pub fn tet_map_with(values: Vec<f64>) -> PairMap {
    let mut index = vec![255u8; 16];
    for (t, &[i, j]) in TET_EDGES.iter().enumerate() {
        index[i * 4 + j] = t as u8;
        index[j * 4 + i] = t as u8;
    }
    PairMap::q_tet()
        .with_values(PairValues {
            n: 4,
            m: 6,
            index,
            values,
        })
        .with_neg_row_sum()
}
