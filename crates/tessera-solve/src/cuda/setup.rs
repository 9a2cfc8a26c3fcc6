//! The smoothed-aggregation setup products on a device: block SpGEMM of `3 × 3` blocks by
//! expansion, sort and compression (Bell, Dalton and Olson 2012: expand every candidate
//! block `(i, j)` of `A B` as a 64-bit key, radix-sort, keep the unique keys, then one
//! thread per output block sums `A_ik B_kj` over the stored `k` of row `i`), the block
//! transpose, the Jacobi-smoothed prolongator `P = (I − ω D⁻¹ Ā) P̂`, the Galerkin operator
//! `Pᵀ Ā P` made exactly symmetric, and the filtered copy `S A S + (I − S)` of a device
//! Bin-BCSR* matrix (dissertation §4.4.2).
//!
//! Every block is summed in the order of the CPU reference ([`BlockCsr::matmul`],
//! [`crate::amg::smooth_prolongator`], [`crate::amg::galerkin`]) and the kernels never
//! contract a multiply-add, so the device products equal the host ones bit for bit.

use std::borrow::Cow;

use tessera_gpu::{DeviceBuffer, Primitives};

use super::multigrid::DeviceBlockCsr;
use super::{cfg, to_u32, DeviceBinBcsr, SolveKernels, BLOCK};
use crate::aggregation::BlockNorms;
#[allow(unused_imports)]
use crate::blockcsr::BlockCsr;
use crate::error::SolveError;

/// Bits of the largest index below `n` (at least 1).
fn index_bits(n: usize) -> u32 {
    64 - ((n.max(2) - 1) as u64).leading_zeros()
}

fn empty(k: &SolveKernels<'_>, nrows: usize, ncols: usize) -> Result<DeviceBlockCsr, SolveError> {
    let g = k.gpu;
    DeviceBlockCsr::from_parts(
        nrows,
        ncols,
        0,
        g.zeros::<u32>(nrows + 1)?,
        g.zeros::<u32>(1)?,
        g.zeros::<f64>(9)?,
    )
}

/// The block row of every stored block of `m`.
fn block_rows(k: &SolveKernels<'_>, m: &DeviceBlockCsr) -> Result<DeviceBuffer<u32>, SolveError> {
    let rows = k.gpu.alloc::<u32>(m.nnz)?;
    let n = to_u32(m.nrows, "block rows")?;
    k.gpu
        .launch(&k.k("bcsr_block_rows")?, cfg(m.nrows, BLOCK)?)
        .arg(&n)
        .arg(&m.row_ptr)
        .arg(&rows)
        .run()?;
    Ok(rows)
}

/// Row offsets from the (sorted) block rows of a matrix with `nrows` rows.
fn offsets_of_rows(
    prim: &Primitives<'_>,
    rows: &DeviceBuffer<u32>,
    nrows: usize,
) -> Result<DeviceBuffer<u32>, SolveError> {
    let counts = prim.gpu().zeros::<u32>(nrows)?;
    prim.histogram_into(rows, &counts)?;
    Ok(prim.offsets_from_counts(&counts)?)
}

/// `C = A B` and the block row of every stored block of `C`.
fn spgemm_with_rows(
    k: &SolveKernels<'_>,
    prim: &Primitives<'_>,
    a: &DeviceBlockCsr,
    b: &DeviceBlockCsr,
) -> Result<(DeviceBlockCsr, DeviceBuffer<u32>), SolveError> {
    if a.ncols != b.nrows {
        return Err(SolveError::Dimension {
            expected: a.ncols,
            found: b.nrows,
        });
    }
    let g = k.gpu;
    let n = a.nrows;
    if n == 0 || a.nnz == 0 || b.nnz == 0 {
        return Ok((empty(k, n, b.ncols)?, g.zeros::<u32>(1)?));
    }
    let nu = to_u32(n, "block rows")?;
    // symbolic: count, offsets, expand, sort, unique
    let counts = g.alloc::<u32>(n)?;
    g.launch(&k.k("spgemm_count")?, cfg(n, BLOCK)?)
        .arg(&nu)
        .arg(&a.row_ptr)
        .arg(&a.cols)
        .arg(&b.row_ptr)
        .arg(&counts)
        .run()?;
    let offsets = prim.offsets_from_counts(&counts)?;
    drop(counts);
    let total = g.download_at(&offsets, n)? as usize;
    if total == 0 {
        return Ok((empty(k, n, b.ncols)?, g.zeros::<u32>(1)?));
    }
    let (row_bits, col_bits) = (index_bits(n), index_bits(b.ncols));
    let mut keys = g.alloc::<u64>(total)?;
    g.launch(&k.k("spgemm_expand")?, cfg(n, BLOCK)?)
        .arg(&nu)
        .arg(&a.row_ptr)
        .arg(&a.cols)
        .arg(&b.row_ptr)
        .arg(&b.cols)
        .arg(&offsets)
        .arg(&col_bits)
        .arg(&keys)
        .run()?;
    drop(offsets);
    prim.radix_sort_keys(&mut keys, Some(row_bits + col_bits))?;
    let unique = prim.unique(&keys)?;
    drop(keys);
    let nnz = unique.len();
    let nnz64 = nnz as u64;
    let rows = g.alloc::<u32>(nnz)?;
    let cols = g.alloc::<u32>(nnz)?;
    g.launch(&k.k("spgemm_split")?, cfg(nnz, BLOCK)?)
        .arg(&nnz64)
        .arg(&unique)
        .arg(&col_bits)
        .arg(&rows)
        .arg(&cols)
        .run()?;
    drop(unique);
    let row_ptr = offsets_of_rows(prim, &rows, n)?;
    // numeric: one thread per block of C
    let vals = g.alloc::<f64>(9 * nnz)?;
    g.launch(&k.k("spgemm_numeric")?, cfg(nnz, BLOCK)?)
        .arg(&nnz64)
        .arg(&rows)
        .arg(&cols)
        .arg(&a.row_ptr)
        .arg(&a.cols)
        .arg(&a.vals)
        .arg(&b.row_ptr)
        .arg(&b.cols)
        .arg(&b.vals)
        .arg(&vals)
        .run()?;
    Ok((
        DeviceBlockCsr::from_parts(n, b.ncols, nnz, row_ptr, cols, vals)?,
        rows,
    ))
}

/// The block product `C = A B` on the device, equal to [`BlockCsr::matmul`] (same pattern,
/// sorted columns, the same values bit for bit).
pub fn block_spgemm(
    k: &SolveKernels<'_>,
    prim: &Primitives<'_>,
    a: &DeviceBlockCsr,
    b: &DeviceBlockCsr,
) -> Result<DeviceBlockCsr, SolveError> {
    Ok(spgemm_with_rows(k, prim, a, b)?.0)
}

/// The block transpose on the device, equal to [`BlockCsr::transpose`] (rows of the result
/// list their columns in ascending order; each block transposed).
pub fn block_transpose(
    k: &SolveKernels<'_>,
    prim: &Primitives<'_>,
    m: &DeviceBlockCsr,
) -> Result<DeviceBlockCsr, SolveError> {
    let g = k.gpu;
    let nnz = m.nnz;
    if nnz == 0 {
        return empty(k, m.ncols, m.nrows);
    }
    let rows = block_rows(k, m)?;
    let (row_bits, col_bits) = (index_bits(m.nrows), index_bits(m.ncols));
    let nnz64 = nnz as u64;
    let mut keys = g.alloc::<u64>(nnz)?;
    let mut perm = g.alloc::<u32>(nnz)?;
    g.launch(&k.k("transpose_keys")?, cfg(nnz, BLOCK)?)
        .arg(&nnz64)
        .arg(&rows)
        .arg(&m.cols)
        .arg(&row_bits)
        .arg(&keys)
        .arg(&perm)
        .run()?;
    drop(rows);
    prim.radix_sort(&mut keys, Some(&mut perm), Some(row_bits + col_bits))?;
    let t_rows = g.alloc::<u32>(nnz)?;
    let t_cols = g.alloc::<u32>(nnz)?;
    let t_vals = g.alloc::<f64>(9 * nnz)?;
    g.launch(&k.k("transpose_gather")?, cfg(nnz, BLOCK)?)
        .arg(&nnz64)
        .arg(&keys)
        .arg(&perm)
        .arg(&row_bits)
        .arg(&m.vals)
        .arg(&t_rows)
        .arg(&t_cols)
        .arg(&t_vals)
        .run()?;
    drop((keys, perm));
    let row_ptr = offsets_of_rows(prim, &t_rows, m.ncols)?;
    DeviceBlockCsr::from_parts(m.ncols, m.nrows, nnz, row_ptr, t_cols, t_vals)
}

/// The Jacobi-smoothed prolongator `P = P̂ − ω D⁻¹ (Ā P̂)` on the device (`dinv`: the
/// inverted `3 × 3` diagonal blocks of `a`, 9 per block row), equal to
/// [`crate::amg::smooth_prolongator`].
pub fn device_smooth_prolongator(
    k: &SolveKernels<'_>,
    prim: &Primitives<'_>,
    a: &DeviceBlockCsr,
    dinv: &DeviceBuffer<f64>,
    pt: &DeviceBlockCsr,
    omega: f64,
) -> Result<DeviceBlockCsr, SolveError> {
    if dinv.len() < 9 * a.nrows || pt.nrows != a.nrows {
        return Err(SolveError::Dimension {
            expected: 9 * a.nrows,
            found: dinv.len(),
        });
    }
    let (ap, rows) = spgemm_with_rows(k, prim, a, pt)?;
    if ap.nnz > 0 {
        let nnz64 = ap.nnz as u64;
        k.gpu
            .launch(&k.k("smooth_prolongator")?, cfg(ap.nnz, BLOCK)?)
            .arg(&nnz64)
            .arg(&rows)
            .arg(&ap.cols)
            .arg(&ap.vals)
            .arg(dinv)
            .arg(&pt.row_ptr)
            .arg(&pt.cols)
            .arg(&pt.vals)
            .arg(&omega)
            .run()?;
    }
    Ok(ap)
}

/// The Galerkin coarse operator `A_c = Pᵀ (Ā P)` on the device with `R = Pᵀ`, made exactly
/// symmetric, with a unit diagonal on coarse DOFs whose row is zero: equal to
/// [`crate::amg::galerkin`]. Returns `(R, A_c)`.
pub fn device_galerkin(
    k: &SolveKernels<'_>,
    prim: &Primitives<'_>,
    a: &DeviceBlockCsr,
    p: &DeviceBlockCsr,
) -> Result<(DeviceBlockCsr, DeviceBlockCsr), SolveError> {
    let g = k.gpu;
    let r = block_transpose(k, prim, p)?;
    let ap = block_spgemm(k, prim, a, p)?;
    let (mut ac, rows) = spgemm_with_rows(k, prim, &r, &ap)?;
    drop(ap);
    if ac.nnz > 0 {
        let nnz64 = ac.nnz as u64;
        let out = g.alloc::<f64>(9 * ac.nnz)?;
        let missing = g.zeros::<u32>(1)?;
        g.launch(&k.k("galerkin_symmetrize")?, cfg(ac.nnz, BLOCK)?)
            .arg(&nnz64)
            .arg(&rows)
            .arg(&ac.row_ptr)
            .arg(&ac.cols)
            .arg(&ac.vals)
            .arg(&out)
            .arg(&missing)
            .run()?;
        if g.download_at(&missing, 0)? != 0 {
            return Err(SolveError::InvalidInput {
                what: "Galerkin operator",
                message: "pattern is not structurally symmetric".into(),
            });
        }
        ac.vals = out;
    }
    Ok((r, ac))
}

/// The filtered operator `Ā = S A S + (I − S)` of a device Bin-BCSR* matrix of `3 × 3`
/// blocks with the constrained DOFs `fixed`, as device block CSR: equal to
/// [`BlockCsr::from_binbcsr_filtered`], built without a copy to the host.
pub fn device_filtered_copy(
    k: &SolveKernels<'_>,
    prim: &Primitives<'_>,
    m: &DeviceBinBcsr<f64>,
    fixed: &[bool],
) -> Result<DeviceBlockCsr, SolveError> {
    let p = m.pattern();
    let n = p.num_block_rows();
    if p.block_dim() != 3 {
        return Err(SolveError::InvalidInput {
            what: "multigrid",
            message: format!(
                "needs 3 × 3 node blocks (3D elasticity), not e = {}",
                p.block_dim()
            ),
        });
    }
    if fixed.len() != 3 * n {
        return Err(SolveError::Dimension {
            expected: 3 * n,
            found: fixed.len(),
        });
    }
    let g = k.gpu;
    if n == 0 {
        return empty(k, 0, 0);
    }
    let nu = to_u32(n, "block rows")?;
    let counts = g.alloc::<u32>(n)?;
    g.launch(&k.k("filtered_counts")?, cfg(n, BLOCK)?)
        .arg(&nu)
        .arg(&p.row_lengths)
        .arg(&counts)
        .run()?;
    let row_ptr = prim.offsets_from_counts(&counts)?;
    drop(counts);
    let nnz = g.download_at(&row_ptr, n)? as usize;
    let flags: Vec<u8> = fixed.iter().map(|&f| u8::from(f)).collect();
    let flags = g.upload(&flags)?;
    let cols = g.alloc::<u32>(nnz)?;
    let vals = g.alloc::<f64>(9 * nnz)?;
    g.launch(&k.k("filtered_copy")?, cfg(n, BLOCK)?)
        .arg(&nu)
        .arg(&p.bin_offsets)
        .arg(&p.row_lengths)
        .arg(&p.col_indices)
        .arg(&m.values)
        .arg(&m.diag)
        .arg(&flags)
        .arg(&row_ptr)
        .arg(&cols)
        .arg(&vals)
        .run()?;
    DeviceBlockCsr::from_parts(n, n, nnz, row_ptr, cols, vals)
}

/// The block norms of a device matrix on the host: its pattern and the squared Frobenius
/// norm of every block (as [`crate::aggregation::block_norm2`]), the strength graph's input
/// at an eighth of the operator's bytes.
pub(crate) fn download_block_norms(
    k: &SolveKernels<'_>,
    m: &DeviceBlockCsr,
) -> Result<BlockNorms<'static>, SolveError> {
    let g = k.gpu;
    let row_ptr = g.download_range(&m.row_ptr, 0..m.nrows + 1)?;
    if m.nnz == 0 {
        return Ok(BlockNorms {
            nrows: m.nrows,
            row_ptr: Cow::Owned(row_ptr),
            cols: Cow::Owned(Vec::new()),
            norm2: Vec::new(),
        });
    }
    let norm2 = g.alloc::<f64>(m.nnz)?;
    let nnz64 = m.nnz as u64;
    g.launch(&k.k("block_norms")?, cfg(m.nnz, BLOCK)?)
        .arg(&nnz64)
        .arg(&m.vals)
        .arg(&norm2)
        .run()?;
    Ok(BlockNorms {
        nrows: m.nrows,
        row_ptr: Cow::Owned(row_ptr),
        cols: Cow::Owned(g.download_range(&m.cols, 0..m.nnz)?),
        norm2: g.download_range(&norm2, 0..m.nnz)?,
    })
}

/// The diagonal blocks of a square device matrix on the host, 9 per block row (zeros where
/// none is stored).
pub(crate) fn download_diagonal_blocks(
    k: &SolveKernels<'_>,
    m: &DeviceBlockCsr,
) -> Result<Vec<f64>, SolveError> {
    let g = k.gpu;
    let n = to_u32(m.nrows, "block rows")?;
    let diag = g.zeros::<f64>(9 * m.nrows)?;
    g.launch(&k.k("diagonal_blocks")?, cfg(m.nrows, BLOCK)?)
        .arg(&n)
        .arg(&m.row_ptr)
        .arg(&m.cols)
        .arg(&m.vals)
        .arg(&diag)
        .run()?;
    Ok(g.download_range(&diag, 0..9 * m.nrows)?)
}
