//! Matrix Market export of a static system `K u = f` for other solvers (scipy, pyamg, PETSc,
//! hypre, AmgX): `K` as `coordinate real symmetric` (the lower triangle, 1-based), vectors
//! and the near-null space as `array real general` (column-major), DOF order node-major
//! (`x, y, z` of node 0, then node 1, ...).

use std::io::{self, Write};

use tessera_sparse::binbcsr::BinBcsr;

/// Write `K` (Bin-BCSR*, symmetric) in Matrix Market `coordinate real symmetric` form: every
/// stored entry of the lower triangle (structural zeros of stored blocks included), 1-based.
pub fn write_symmetric<W: Write>(k: &BinBcsr<f64>, comment: &str, mut w: W) -> io::Result<()> {
    let csr = k.to_csr();
    let mut nnz = 0usize;
    for i in 0..csr.nrows {
        let (a, b) = (csr.row_ptr[i] as usize, csr.row_ptr[i + 1] as usize);
        nnz += csr.col_idx[a..b]
            .iter()
            .filter(|&&c| c as usize <= i)
            .count();
    }
    writeln!(w, "%%MatrixMarket matrix coordinate real symmetric")?;
    for line in comment.lines() {
        writeln!(w, "% {line}")?;
    }
    writeln!(w, "{} {} {}", csr.nrows, csr.ncols, nnz)?;
    for i in 0..csr.nrows {
        let (a, b) = (csr.row_ptr[i] as usize, csr.row_ptr[i + 1] as usize);
        for t in a..b {
            let c = csr.col_idx[t] as usize;
            if c <= i {
                writeln!(w, "{} {} {:e}", i + 1, c + 1, csr.values[t])?;
            }
        }
    }
    w.flush()
}

/// Write a dense `rows × cols` matrix given row-major (`values[r * cols + c]`) in Matrix
/// Market `array real general` form (written column-major, as the format requires).
pub fn write_array<W: Write>(
    values: &[f64],
    rows: usize,
    cols: usize,
    comment: &str,
    mut w: W,
) -> io::Result<()> {
    if values.len() != rows * cols {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} values for a {rows} x {cols} array", values.len()),
        ));
    }
    writeln!(w, "%%MatrixMarket matrix array real general")?;
    for line in comment.lines() {
        writeln!(w, "% {line}")?;
    }
    writeln!(w, "{rows} {cols}")?;
    for c in 0..cols {
        for r in 0..rows {
            writeln!(w, "{:e}", values[r * cols + c])?;
        }
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tessera_sparse::binbcsr::BinBcsrPattern;

    #[test]
    fn symmetric_lower_triangle_one_based() {
        // 2 nodes, e = 1: [[2, -1], [-1, 3]]
        let p = Arc::new(BinBcsrPattern::from_rows(1, &[vec![1], vec![0]]).unwrap());
        let mut k = BinBcsr::<f64>::zeros(p.clone());
        let (i0, i1) = (
            k.value_index(p.slot(0, 0), 0, 0),
            k.value_index(p.slot(1, 0), 0, 0),
        );
        let (vals, diag) = k.values_diag_mut();
        diag.copy_from_slice(&[2.0, 3.0]);
        vals[i0] = -1.0;
        vals[i1] = -1.0;
        let mut out = Vec::new();
        write_symmetric(&k, "test", &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(
            s,
            "%%MatrixMarket matrix coordinate real symmetric\n% test\n2 2 3\n1 1 2e0\n2 1 -1e0\n2 2 3e0\n"
        );
        let mut out = Vec::new();
        write_array(&[1.0, 2.0, 3.0, 4.0], 2, 2, "", &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "%%MatrixMarket matrix array real general\n2 2\n1e0\n3e0\n2e0\n4e0\n"
        );
    }
}
