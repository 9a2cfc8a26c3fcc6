//! Input matrices of the evaluation (dissertation §5.4): Matrix Market files (complex and real,
//! [`mtx`]), quaternionic Dirac operators of triangle meshes ([`mesh`]), 3x3-block elasticity
//! matrices of tetrahedral meshes ([`fem`]); conversions between compound and real forms
//! (the 4x4 real expansion of quaternions, Eq. 5.1; grouping a real matrix into e x e blocks);
//! the statistics of Figs. 5.4-5.5 (row lengths, row bandwidths, Eq. 5.3) and the matrix-class
//! signature used as tuning key.

pub mod fem;
pub mod mesh;
pub mod mtx;

use std::path::{Path, PathBuf};

use crate::entry::EntrySpec;
use crate::error::{Result, SpmvError};
use crate::layout::CsrMatrix;

/// Builds a CSR matrix from (row, col, entry) triplets with `l` scalars per entry: rows by
/// counting sort, columns sorted within rows, duplicates summed (count -> scan -> fill).
/// The bytes of an input file: a regular file within the memory budget, gzip (by its
/// magic bytes) inflated within limits ([`tessera_core::input`]).
pub(crate) fn read_input(path: &Path) -> Result<Vec<u8>> {
    tessera_core::input::read_maybe_gzip(path).map_err(|e| match e {
        tessera_core::CoreError::Io { err, .. } => SpmvError::io(path, err),
        other => SpmvError::io(path, std::io::Error::other(other.reason())),
    })
}

pub fn csr_from_triplets(
    n_rows: usize,
    n_cols: usize,
    l: usize,
    rows: &[u32],
    cols: &[u32],
    vals: &[f64],
) -> Result<CsrMatrix<f64>> {
    if rows.len() != cols.len() || vals.len() != rows.len() * l {
        return Err(SpmvError::BadMatrix(
            "triplet arrays differ in length".into(),
        ));
    }
    if let Some(k) =
        (0..rows.len()).find(|&k| rows[k] as usize >= n_rows || cols[k] as usize >= n_cols)
    {
        return Err(SpmvError::BadMatrix(format!(
            "triplet ({}, {}) outside {n_rows} x {n_cols}",
            rows[k], cols[k]
        )));
    }
    let mut start = vec![0usize; n_rows + 1];
    for &r in rows {
        start[r as usize + 1] += 1;
    }
    for i in 0..n_rows {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut order = vec![0usize; rows.len()];
    for (k, &r) in rows.iter().enumerate() {
        order[fill[r as usize]] = k;
        fill[r as usize] += 1;
    }
    let mut row_ptr = Vec::with_capacity(n_rows + 1);
    row_ptr.push(0u32);
    let mut col_idx = Vec::with_capacity(rows.len());
    let mut values = Vec::with_capacity(vals.len());
    for i in 0..n_rows {
        let seg = &mut order[start[i]..start[i + 1]];
        seg.sort_by_key(|&k| (cols[k], k));
        let mut last = u32::MAX;
        for &k in seg.iter() {
            if cols[k] == last {
                let b = values.len() - l;
                for f in 0..l {
                    values[b + f] += vals[k * l + f];
                }
            } else {
                col_idx.push(cols[k]);
                values.extend_from_slice(&vals[k * l..(k + 1) * l]);
                last = cols[k];
            }
        }
        row_ptr.push(col_idx.len() as u32);
    }
    let m = CsrMatrix {
        n_rows,
        n_cols,
        entry_len: l,
        row_ptr,
        col_idx,
        values,
    };
    m.validate()?;
    Ok(m)
}

/// The 4x4 real matrix of quaternion q = (w, x, y, z), Eq. 5.1, row-major.
pub fn quaternion_block(q: &[f64]) -> [f64; 16] {
    let (w, x, y, z) = (q[0], q[1], q[2], q[3]);
    [w, -x, -y, -z, x, w, -z, y, y, z, w, -x, z, -y, x, w]
}

/// Expands a quaternionic matrix into 4x4 real blocks (Eq. 5.1; entry length 16, row-major),
/// the form cuSPARSE's BSR baseline uses (§5.4).
pub fn expand_quaternion(a: &CsrMatrix<f64>) -> Result<CsrMatrix<f64>> {
    if a.entry_len != 4 {
        return Err(SpmvError::BadMatrix(format!(
            "quaternion expansion needs entry length 4, not {}",
            a.entry_len
        )));
    }
    let values = a
        .values
        .chunks_exact(4)
        .flat_map(quaternion_block)
        .collect();
    Ok(CsrMatrix {
        entry_len: 16,
        values,
        ..a.clone()
    })
}

/// Expands a block CSR matrix (entries `e x e` row-major) into a scalar CSR matrix of size
/// `e n_rows x e n_cols` (explicit zeros inside blocks are kept).
pub fn expand_blocks(a: &CsrMatrix<f64>, e: usize) -> Result<CsrMatrix<f64>> {
    if a.entry_len != e * e {
        return Err(SpmvError::BadMatrix(format!(
            "entry length {} is not {e} x {e}",
            a.entry_len
        )));
    }
    let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..a.n_rows {
        for p in a.row_ptr[i] as usize..a.row_ptr[i + 1] as usize {
            let j = a.col_idx[p] as usize;
            for bi in 0..e {
                for bj in 0..e {
                    r.push((i * e + bi) as u32);
                    c.push((j * e + bj) as u32);
                    v.push(a.values[p * e * e + bi * e + bj]);
                }
            }
        }
    }
    csr_from_triplets(a.n_rows * e, a.n_cols * e, 1, &r, &c, &v)
}

/// Groups a real (entry length 1) matrix into `e x e` blocks (BSR; missing entries of a
/// touched block are zero). Both dimensions must be multiples of `e`.
pub fn group_blocks(a: &CsrMatrix<f64>, e: usize) -> Result<CsrMatrix<f64>> {
    if a.entry_len != 1 || a.n_rows % e != 0 || a.n_cols % e != 0 {
        return Err(SpmvError::BadMatrix(format!(
            "cannot group a {} x {} matrix with entry length {} into {e} x {e} blocks",
            a.n_rows, a.n_cols, a.entry_len
        )));
    }
    let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..a.n_rows {
        for p in a.row_ptr[i] as usize..a.row_ptr[i + 1] as usize {
            let j = a.col_idx[p] as usize;
            r.push((i / e) as u32);
            c.push((j / e) as u32);
            let mut blk = vec![0.0; e * e];
            blk[(i % e) * e + j % e] = a.values[p];
            v.extend(blk);
        }
    }
    csr_from_triplets(a.n_rows / e, a.n_cols / e, e * e, &r, &c, &v)
}

/// Inverse of the 4x4 expansion: reads a real matrix whose 4x4 blocks all have the structure
/// of Eq. 5.1 as a quaternionic matrix; fails on any block that does not.
pub fn contract_quaternion(a: &CsrMatrix<f64>) -> Result<CsrMatrix<f64>> {
    let b = group_blocks(a, 4)?;
    let mut values = Vec::with_capacity(b.nnz() * 4);
    for (k, blk) in b.values.chunks_exact(16).enumerate() {
        let q = [blk[0], blk[4], blk[8], blk[12]];
        let want = quaternion_block(&q);
        let s = blk
            .iter()
            .map(|v| v.abs())
            .sum::<f64>()
            .max(f64::MIN_POSITIVE);
        if blk
            .iter()
            .zip(&want)
            .any(|(x, y)| (x - y).abs() > 1e-12 * s)
        {
            return Err(SpmvError::BadMatrix(format!(
                "4x4 block {k} does not have the quaternion structure of Eq. 5.1"
            )));
        }
        values.extend_from_slice(&q);
    }
    Ok(CsrMatrix {
        entry_len: 4,
        values,
        ..b
    })
}

/// A deterministic value in [-1, 1) from (i, j, f, seed) (splitmix64).
pub fn hash_value(i: u64, j: u64, f: u64, seed: u64) -> f64 {
    let mut z = i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ j.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ f.wrapping_mul(0x1656_67B1_9E37_79F9)
        ^ seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// Gives the pattern of `a` entries of `l` fields: field `f < a.entry_len` keeps `a`'s value,
/// the others are [`hash_value`]s (for running entry types on patterns that carry fewer fields).
pub fn lift(a: &CsrMatrix<f64>, l: usize, seed: u64) -> CsrMatrix<f64> {
    let mut values = Vec::with_capacity(a.nnz() * l);
    for i in 0..a.n_rows {
        for p in a.row_ptr[i] as usize..a.row_ptr[i + 1] as usize {
            for f in 0..l {
                values.push(if f < a.entry_len {
                    a.values[p * a.entry_len + f]
                } else {
                    hash_value(i as u64, a.col_idx[p] as u64, f as u64, seed)
                });
            }
        }
    }
    CsrMatrix {
        entry_len: l,
        values,
        ..a.clone()
    }
}

/// A random square matrix with `n` rows, row lengths uniform in `1..=2*mean-1` (plus a few
/// long rows when `skewed`), columns near the diagonal with occasional far ones, `l` fields.
pub fn random_matrix(
    n: usize,
    mean: usize,
    l: usize,
    skewed: bool,
    seed: u64,
) -> Result<CsrMatrix<f64>> {
    let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
    let u = |i: usize, k: usize, s: u64| (hash_value(i as u64, k as u64, s, seed) + 1.0) / 2.0;
    for i in 0..n {
        let mut len = 1 + (u(i, 0, 1) * (2 * mean.max(1) - 1) as f64) as usize;
        if skewed && i % 97 == 5 {
            len = (mean * 20).min(n);
        }
        for k in 0..len {
            let j = if u(i, k, 2) < 0.85 {
                let w = (4 * mean).max(8) as f64;
                ((i as f64 + (u(i, k, 3) - 0.5) * w)
                    .round()
                    .clamp(0.0, (n - 1) as f64)) as usize
            } else {
                (u(i, k, 4) * n as f64) as usize % n
            };
            r.push(i as u32);
            c.push(j as u32);
            for f in 0..l {
                v.push(hash_value(i as u64, k as u64, f as u64 + 10, seed));
            }
        }
    }
    csr_from_triplets(n, n, l, &r, &c, &v)
}

/// Where an input matrix comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum MatrixSource {
    /// A Matrix Market (`.mtx`, `.mtx.gz`) or mesh (`.obj`, `.ply`) file.
    File(PathBuf),
    /// `gen:sphere:LEVEL`: Dirac operator of an icosphere.
    Sphere(u32),
    /// `gen:torus:NxM`: Dirac operator of a torus.
    Torus(u32, u32),
    /// `gen:tetgrid:N` or `gen:tetgrid:NXxNYxNZ`: elasticity 3x3 blocks on a tetrahedral grid.
    TetGrid(usize, usize, usize),
    /// `gen:random:N:MEAN`: random pattern and values.
    Random(usize, usize),
}

impl MatrixSource {
    /// Parses a command line matrix argument.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            SpmvError::BadOption {
            what: "matrix",
            value: s.to_string(),
            expected: "a .mtx[.gz]/.obj/.ply file, gen:sphere:L, gen:torus:NxM, gen:tetgrid:N[xNxN] or gen:random:N:MEAN".into(),
        }
        };
        let Some(g) = s.strip_prefix("gen:") else {
            return Ok(MatrixSource::File(PathBuf::from(s)));
        };
        let (kind, arg) = g.split_once(':').ok_or_else(bad)?;
        let nums = |sep: char| {
            arg.split(sep)
                .map(|t| t.parse::<usize>().map_err(|_| bad()))
                .collect::<Result<Vec<_>>>()
        };
        match kind {
            "sphere" => arg
                .parse()
                .map(MatrixSource::Sphere)
                .map_err(|_| bad())
                .and_then(|m| match m {
                    MatrixSource::Sphere(l) if l <= 10 => Ok(m),
                    _ => Err(bad()),
                }),
            "torus" => match nums('x')?.as_slice() {
                [n, m] if *n >= 3 && *m >= 3 => Ok(MatrixSource::Torus(*n as u32, *m as u32)),
                _ => Err(bad()),
            },
            "tetgrid" => match nums('x')?.as_slice() {
                [n] if *n >= 1 => Ok(MatrixSource::TetGrid(*n, *n, *n)),
                [a, b, c] if *a >= 1 && *b >= 1 && *c >= 1 => Ok(MatrixSource::TetGrid(*a, *b, *c)),
                _ => Err(bad()),
            },
            "random" => match nums(':')?.as_slice() {
                [n, m] if *n >= 1 && *m >= 1 => Ok(MatrixSource::Random(*n, *m)),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }

    /// Short name for tables.
    pub fn name(&self) -> String {
        match self {
            MatrixSource::File(p) => {
                let f = p
                    .file_name()
                    .map(|s| s.to_string_lossy().to_string())
                    .unwrap_or_default();
                f.trim_end_matches(".gz")
                    .trim_end_matches(".mtx")
                    .to_string()
            }
            MatrixSource::Sphere(l) => format!("surface/sphere{l}"),
            MatrixSource::Torus(n, m) => format!("surface/torus{n}x{m}"),
            MatrixSource::TetGrid(a, b, c) => format!("fem/tetgrid{a}x{b}x{c}"),
            MatrixSource::Random(n, m) => format!("random{n}_{m}"),
        }
    }

    /// Loads the matrix with entries of `spec`. Returns the matrix and a note when values had
    /// to be synthesized ([`lift`]) because the source carries fewer fields than the entry.
    ///
    /// - complex entries from complex (or real, imaginary part 0) Matrix Market files;
    /// - real entries from real/integer/pattern files;
    /// - `blockE` entries from real files grouped into e x e blocks, or from `gen:tetgrid` (E = 3);
    /// - quaternion entries from meshes (`.obj`, `.ply`, `gen:sphere`, `gen:torus`: Dirac
    ///   operator with rho = 0.25), or real files with the 4x4 structure of Eq. 5.1;
    /// - any other combination: the source's pattern with lifted values.
    pub fn load(&self, spec: &EntrySpec) -> Result<(CsrMatrix<f64>, Option<String>)> {
        let l = spec.matrix_len();
        let block_e = spec
            .name
            .strip_prefix("block")
            .and_then(|e| e.parse::<usize>().ok())
            .filter(|e| e * e == l && spec.vector_len() == *e);
        let mismatch = |msg: &str| SpmvError::EntryMismatch {
            matrix: self.name(),
            entry: spec.name.clone(),
            msg: msg.into(),
        };
        let lifted = |a: CsrMatrix<f64>| {
            let note = format!(
                "{} carries {} field(s) per entry; the other {} fields of `{}` are synthesized (deterministic hash values)",
                self.name(),
                a.entry_len,
                l.saturating_sub(a.entry_len),
                spec.name
            );
            (lift(&a, l, 17), Some(note))
        };
        match self {
            MatrixSource::File(p) if is_mesh(p) => {
                let d = mesh::read_mesh(p)?.dirac_operator(|_| 0.25)?;
                Ok(if spec.name == "quaternion" {
                    (d, None)
                } else {
                    lifted(d)
                })
            }
            MatrixSource::File(p) => {
                let m = mtx::read_matrix_market(p)?;
                let a = m.csr;
                match (spec.name.as_str(), a.entry_len) {
                    ("complex", 2) | ("real", 1) => Ok((a, None)),
                    ("complex", 1) => Ok((lift_zero(&a, 2), None)),
                    ("real", 2) => Err(mismatch("the file is complex; use --entry complex")),
                    ("quaternion", 1) => Ok((
                        contract_quaternion(&a).map_err(|e| mismatch(&e.to_string()))?,
                        None,
                    )),
                    _ if block_e.is_some() && a.entry_len == 1 => Ok((
                        group_blocks(&a, block_e.unwrap_or(1))
                            .map_err(|e| mismatch(&e.to_string()))?,
                        None,
                    )),
                    _ => Ok(lifted(a)),
                }
            }
            MatrixSource::Sphere(_) | MatrixSource::Torus(..) => {
                let mesh = match self {
                    MatrixSource::Sphere(lv) => mesh::TriMesh::icosphere(*lv),
                    MatrixSource::Torus(n, m) => mesh::TriMesh::torus(*n, *m),
                    _ => unreachable!("matched above"),
                };
                let d = mesh.dirac_operator(|_| 0.25)?;
                Ok(if spec.name == "quaternion" {
                    (d, None)
                } else {
                    lifted(d)
                })
            }
            MatrixSource::TetGrid(a, b, c) => {
                let k = fem::elasticity_blocks(&fem::TetMesh::grid(*a, *b, *c, 0.15, 3), 1.0, 0.3)?;
                Ok(if block_e == Some(3) {
                    (k, None)
                } else {
                    lifted(k)
                })
            }
            MatrixSource::Random(n, m) => Ok((random_matrix(*n, *m, l, true, 5)?, None)),
        }
    }
}

fn is_mesh(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("obj") || e.eq_ignore_ascii_case("ply"))
}

fn lift_zero(a: &CsrMatrix<f64>, l: usize) -> CsrMatrix<f64> {
    let values = a
        .values
        .chunks_exact(a.entry_len)
        .flat_map(|v| (0..l).map(move |f| if f < v.len() { v[f] } else { 0.0 }))
        .collect();
    CsrMatrix {
        entry_len: l,
        values,
        ..a.clone()
    }
}

/// Row statistics of Figs. 5.4-5.5: entries per row and row bandwidth (Eq. 5.3,
/// `b_i = max_j - min_j` over the stored columns of row i).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MatrixStats {
    pub n_rows: usize,
    pub n_cols: usize,
    pub nnz: usize,
    pub row_len_min: usize,
    pub row_len_median: usize,
    pub row_len_max: usize,
    pub row_len_mean: f64,
    /// Median row bandwidth (Eq. 5.3) in percent of the number of columns.
    pub bandwidth_median_pct: f64,
}

impl MatrixStats {
    pub fn of<T: crate::Scalar>(a: &CsrMatrix<T>) -> Self {
        let mut lens: Vec<usize> = a
            .row_ptr
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .collect();
        let mut bw: Vec<usize> = (0..a.n_rows)
            .map(|i| {
                let s = &a.col_idx[a.row_ptr[i] as usize..a.row_ptr[i + 1] as usize];
                match (s.iter().min(), s.iter().max()) {
                    (Some(lo), Some(hi)) => (hi - lo) as usize,
                    _ => 0,
                }
            })
            .collect();
        lens.sort_unstable();
        bw.sort_unstable();
        let med = |v: &[usize]| if v.is_empty() { 0 } else { v[v.len() / 2] };
        MatrixStats {
            n_rows: a.n_rows,
            n_cols: a.n_cols,
            nnz: a.nnz(),
            row_len_min: lens.first().copied().unwrap_or(0),
            row_len_median: med(&lens),
            row_len_max: lens.last().copied().unwrap_or(0),
            row_len_mean: a.nnz() as f64 / a.n_rows.max(1) as f64,
            bandwidth_median_pct: 100.0 * med(&bw) as f64 / a.n_cols.max(1) as f64,
        }
    }

    /// Matrix-class signature for the tuning database: size class (log2 of rows), mean row
    /// length in half octaves, irregularity (log2 of max / mean row length) and locality (log2
    /// of the median row bandwidth in percent). Matrices of one class share tuned variants
    /// (dissertation §5.5: "similar matrices typically require similar layouts").
    pub fn class_signature(&self) -> String {
        let lg = |x: f64| {
            if x > 0.0 {
                x.log2().round() as i64
            } else {
                -99
            }
        };
        format!(
            "n{}-r{}-v{}-b{}",
            lg(self.n_rows as f64),
            ((2.0 * self.row_len_mean.max(1e-9).log2()).round() as i64),
            lg(self.row_len_max as f64 / self.row_len_mean.max(1e-9)).max(0),
            lg(self.bandwidth_median_pct).clamp(-8, 7)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn quaternion_expansion_round_trip() {
        let m = mesh::TriMesh::torus(6, 5).dirac_operator(|_| 0.5).unwrap();
        let e = expand_quaternion(&m).unwrap();
        let s = expand_blocks(&e, 4).unwrap();
        assert_eq!(s.n_rows, 4 * m.n_rows);
        let back = contract_quaternion(&s).unwrap();
        assert_eq!(back.col_idx, m.col_idx);
        for (a, b) in back.values.iter().zip(&m.values) {
            assert!((a - b).abs() <= 1e-15 * (1.0 + b.abs()));
        }
        let mut broken = s.clone();
        broken.values[1] += 1.0;
        assert!(contract_quaternion(&broken).is_err());
    }
    #[test]
    fn sources_parse() {
        assert_eq!(
            MatrixSource::parse("gen:tetgrid:4x5x6").unwrap(),
            MatrixSource::TetGrid(4, 5, 6)
        );
        assert_eq!(
            MatrixSource::parse("gen:sphere:3").unwrap(),
            MatrixSource::Sphere(3)
        );
        assert_eq!(
            MatrixSource::parse("gen:random:100:7").unwrap(),
            MatrixSource::Random(100, 7)
        );
        assert!(MatrixSource::parse("gen:sphere:x").is_err());
        assert!(MatrixSource::parse("gen:cube:3").is_err());
        assert_eq!(
            MatrixSource::parse("a/b/mhd1280b.mtx.gz").unwrap().name(),
            "mhd1280b"
        );
    }
}
