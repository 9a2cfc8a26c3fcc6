//! Matrix Market reader (coordinate format; real, integer, complex and pattern fields;
//! general, symmetric, skew-symmetric and hermitian symmetry; optionally gzip-compressed).
//! Symmetric storage is expanded to the full matrix. Errors carry file and line.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::error::{Result, SpmvError};
use crate::layout::CsrMatrix;
use crate::matrices::csr_from_triplets;

/// The value field of a Matrix Market file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmField {
    Real,
    Integer,
    Complex,
    Pattern,
}

/// The symmetry of a Matrix Market file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmSymmetry {
    General,
    Symmetric,
    SkewSymmetric,
    Hermitian,
}

/// A Matrix Market matrix as full CSR: entry length 1 (real, integer, pattern = 1.0) or 2
/// (complex: re, im), duplicates summed, columns sorted.
#[derive(Clone, Debug)]
pub struct MmMatrix {
    pub field: MmField,
    pub symmetry: MmSymmetry,
    pub csr: CsrMatrix<f64>,
}

/// Reads a `.mtx` or `.mtx.gz` file (a regular file, gzip inflated within the limits of
/// [`tessera_core::input`]).
pub fn read_matrix_market(path: &Path) -> Result<MmMatrix> {
    let data = super::read_input(path)?;
    let name = path.display().to_string();
    parse_matrix_market(BufReader::new(&data[..]), &name)
}

/// Parses Matrix Market text from a reader; `file` names it in errors.
pub fn parse_matrix_market<R: Read>(r: BufReader<R>, file: &str) -> Result<MmMatrix> {
    let perr = |line: usize, msg: String| SpmvError::Parse {
        file: file.to_string(),
        line,
        msg,
    };
    let mut lines = r.lines().enumerate();
    let (_, header) = lines.next().ok_or_else(|| perr(1, "empty file".into()))?;
    let header = header.map_err(|e| perr(1, e.to_string()))?;
    let h: Vec<String> = header
        .split_whitespace()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    if h.len() != 5 || h[0] != "%%matrixmarket" || h[1] != "matrix" {
        return Err(perr(
            1,
            "expected `%%MatrixMarket matrix coordinate FIELD SYMMETRY`".into(),
        ));
    }
    if h[2] != "coordinate" {
        return Err(perr(
            1,
            format!("format `{}` is not supported (only coordinate)", h[2]),
        ));
    }
    let field = match h[3].as_str() {
        "real" | "double" => MmField::Real,
        "integer" => MmField::Integer,
        "complex" => MmField::Complex,
        "pattern" => MmField::Pattern,
        o => return Err(perr(1, format!("unknown field `{o}`"))),
    };
    let symmetry = match h[4].as_str() {
        "general" => MmSymmetry::General,
        "symmetric" => MmSymmetry::Symmetric,
        "skew-symmetric" => MmSymmetry::SkewSymmetric,
        "hermitian" => MmSymmetry::Hermitian,
        o => return Err(perr(1, format!("unknown symmetry `{o}`"))),
    };
    if symmetry == MmSymmetry::Hermitian && field != MmField::Complex {
        return Err(perr(1, "hermitian symmetry requires complex values".into()));
    }
    let l = if field == MmField::Complex { 2 } else { 1 };
    let mut size: Option<(usize, usize, usize)> = None;
    let (mut rows, mut cols, mut vals) = (Vec::new(), Vec::new(), Vec::new());
    let mut seen = 0usize;
    for (k, line) in lines {
        let ln = k + 1;
        let line = line.map_err(|e| perr(ln, e.to_string()))?;
        let t = line.trim();
        if t.is_empty() || t.starts_with('%') {
            continue;
        }
        let tok: Vec<&str> = t.split_whitespace().collect();
        let num = |s: &str| {
            s.parse::<usize>()
                .map_err(|_| perr(ln, format!("`{s}` is not a non-negative integer")))
        };
        let Some((nr, nc, nnz)) = size else {
            if tok.len() != 3 {
                return Err(perr(ln, "size line must be `ROWS COLS ENTRIES`".into()));
            }
            let s = (num(tok[0])?, num(tok[1])?, num(tok[2])?);
            if s.0 >= u32::MAX as usize || s.1 >= u32::MAX as usize {
                return Err(perr(ln, "matrix too large for 32-bit indices".into()));
            }
            if symmetry != MmSymmetry::General && s.0 != s.1 {
                return Err(perr(ln, "symmetric storage needs a square matrix".into()));
            }
            // the announced count is a hint only: grow with the entries actually read
            rows.reserve(s.2.min(1 << 20) * 2);
            size = Some(s);
            continue;
        };
        let want = 2 + if field == MmField::Pattern { 0 } else { l };
        if tok.len() != want {
            return Err(perr(
                ln,
                format!("expected {want} numbers, found {}", tok.len()),
            ));
        }
        seen += 1;
        if seen > nnz {
            return Err(perr(ln, format!("more than the {nnz} entries announced")));
        }
        let (i, j) = (num(tok[0])?, num(tok[1])?);
        if i == 0 || j == 0 || i > nr || j > nc {
            return Err(perr(
                ln,
                format!("index ({i}, {j}) outside 1..={nr} x 1..={nc}"),
            ));
        }
        let fnum = |s: &str| {
            s.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| perr(ln, format!("`{s}` is not a finite number")))
        };
        let v: [f64; 2] = match field {
            MmField::Pattern => [1.0, 0.0],
            MmField::Complex => [fnum(tok[2])?, fnum(tok[3])?],
            _ => [fnum(tok[2])?, 0.0],
        };
        let (i, j) = (i - 1, j - 1);
        rows.push(i as u32);
        cols.push(j as u32);
        vals.extend_from_slice(&v[..l]);
        if i != j {
            let mirrored = match symmetry {
                MmSymmetry::General => None,
                MmSymmetry::Symmetric => Some(v),
                MmSymmetry::SkewSymmetric => Some([-v[0], -v[1]]),
                MmSymmetry::Hermitian => Some([v[0], -v[1]]),
            };
            if let Some(m) = mirrored {
                rows.push(j as u32);
                cols.push(i as u32);
                vals.extend_from_slice(&m[..l]);
            }
        } else if symmetry == MmSymmetry::SkewSymmetric {
            return Err(perr(
                ln,
                "skew-symmetric matrix with a diagonal entry".into(),
            ));
        }
    }
    let (nr, nc, nnz) = size.ok_or_else(|| perr(1, "missing size line".into()))?;
    if seen != nnz {
        return Err(perr(0, format!("announced {nnz} entries, found {seen}")));
    }
    let csr = csr_from_triplets(nr, nc, l, &rows, &cols, &vals)?;
    Ok(MmMatrix {
        field,
        symmetry,
        csr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    fn parse(s: &str) -> Result<MmMatrix> {
        parse_matrix_market(BufReader::new(s.as_bytes()), "t.mtx")
    }
    #[test]
    fn hermitian_expands() {
        let m = parse("%%MatrixMarket matrix coordinate complex hermitian\n% c\n3 3 3\n1 1 2.0 0.0\n2 1 1.0 3.0\n3 3 1 0\n").unwrap();
        let c = &m.csr;
        assert_eq!(c.row_ptr, vec![0, 2, 3, 4]);
        assert_eq!(c.col_idx, vec![0, 1, 0, 2]);
        assert_eq!(c.values, vec![2.0, 0.0, 1.0, -3.0, 1.0, 3.0, 1.0, 0.0]);
    }
    #[test]
    fn duplicates_sum_and_pattern() {
        let m = parse("%%MatrixMarket matrix coordinate pattern general\n2 3 3\n1 3\n1 3\n2 1\n")
            .unwrap();
        assert_eq!(m.csr.col_idx, vec![2, 0]);
        assert_eq!(m.csr.values, vec![2.0, 1.0]);
    }
    #[test]
    fn errors_have_lines() {
        let cases = [
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n",
                ":3:",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n",
                "announced",
            ),
            ("%%MatrixMarket matrix array real general\n2 2\n", ":1:"),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 abc\n",
                ":3:",
            ),
            (
                "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1.0\n",
                ":3:",
            ),
            ("", ":1:"),
        ];
        for (s, want) in cases {
            let e = parse(s).unwrap_err().to_string();
            assert!(e.contains(want) && e.starts_with("t.mtx"), "{e}");
        }
    }
}
