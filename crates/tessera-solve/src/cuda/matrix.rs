//! Block-sparse matrices in device memory: Bin-BCSR* (dissertation §4.4.2) and the device
//! operator abstraction the GPU solvers run on.

use std::sync::Arc;
use tessera_gpu::{DeviceBuffer, Gpu, LaunchConfig};
use tessera_sparse::binbcsr::{BinBcsr, BinBcsrError, BinBcsrPattern};

use super::{up, GpuScalar, SolveKernels, BLOCK};
use crate::error::SolveError;

/// A symmetric operator of `e × e` blocks on a device, as the GPU solvers need it: the
/// device counterpart of [`crate::BlockOperator`].
pub trait DeviceOperator {
    /// Number of block rows (nodes).
    fn num_block_rows(&self) -> usize;
    /// Block size `e`.
    fn block_size(&self) -> usize;
    /// `y = A x` on device vectors of `num_block_rows() * block_size()` doubles.
    fn apply(
        &self,
        k: &SolveKernels<'_>,
        x: &DeviceBuffer<f64>,
        y: &mut DeviceBuffer<f64>,
    ) -> Result<(), SolveError>;
    /// The dense block diagonal on the device, `e²` doubles per block row (row-major).
    fn diagonal(&self) -> &DeviceBuffer<f64>;
    /// Bytes one [`DeviceOperator::apply`] must move (for bandwidth floors).
    fn apply_bytes(&self) -> u64;
}

/// A Bin-BCSR* pattern in device memory (dissertation §4.4.2): bin offsets, row lengths and
/// the padded column-major column indices.
pub struct DeviceBinBcsrPattern {
    n: usize,
    e: usize,
    nbins: usize,
    nslots: usize,
    /// `num_bins + 1` slot offsets.
    pub bin_offsets: DeviceBuffer<u32>,
    /// Off-diagonal blocks per block row.
    pub row_lengths: DeviceBuffer<u32>,
    /// Column indices, [`tessera_sparse::binbcsr::PAD`] in padding slots.
    pub col_indices: DeviceBuffer<u32>,
    off_diagonal_blocks: u64,
}

impl DeviceBinBcsrPattern {
    /// A pattern from device arrays built elsewhere (for example by GPU assembly, §4.4.3):
    /// `n` block rows of size `e`, `nbins` bins, `nslots` slots, and the number of stored
    /// (non-padding) off-diagonal blocks.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        n: usize,
        e: usize,
        nbins: usize,
        nslots: usize,
        bin_offsets: DeviceBuffer<u32>,
        row_lengths: DeviceBuffer<u32>,
        col_indices: DeviceBuffer<u32>,
        off_diagonal_blocks: u64,
    ) -> Self {
        DeviceBinBcsrPattern {
            n,
            e,
            nbins,
            nslots,
            bin_offsets,
            row_lengths,
            col_indices,
            off_diagonal_blocks,
        }
    }
    /// Upload a host pattern.
    pub fn upload(gpu: &Gpu, p: &BinBcsrPattern) -> Result<Self, SolveError> {
        Ok(DeviceBinBcsrPattern {
            n: p.num_block_rows(),
            e: p.block_dim(),
            nbins: p.num_bins(),
            nslots: p.num_slots(),
            bin_offsets: up(gpu, p.bin_offsets())?,
            row_lengths: up(gpu, p.row_lengths())?,
            col_indices: up(gpu, p.col_indices())?,
            off_diagonal_blocks: p.row_lengths().iter().map(|&l| l as u64).sum(),
        })
    }
    /// Copy back to the host (validated).
    pub fn download(&self, gpu: &Gpu) -> Result<BinBcsrPattern, SolveError> {
        let p = self.download_rect(gpu, self.n)?;
        p.validate()?;
        Ok(p)
    }
    /// Copy back to the host with columns checked against `ncols` block columns instead of
    /// the row count: every row's columns strictly ascending, below `ncols`, and not the
    /// row's own (a domain's owned rows with halo columns, dissertation §7.1.2).
    pub fn download_rect(&self, gpu: &Gpu, ncols: usize) -> Result<BinBcsrPattern, SolveError> {
        let offsets = gpu.download_range(&self.bin_offsets, 0..self.nbins + 1)?;
        let lengths = gpu.download_range(&self.row_lengths, 0..self.n)?;
        let cols = gpu.download_range(&self.col_indices, 0..self.nslots)?;
        let mut p = BinBcsrPattern::with_bin_offsets(self.e, lengths, offsets)?;
        let mut at = 0;
        for (_, piece) in p.bins_mut() {
            piece.copy_from_slice(&cols[at..at + piece.len()]);
            at += piece.len();
        }
        for i in 0..self.n {
            let mut prev: Option<u32> = None;
            for c in p.row_cols(i) {
                if c as usize >= ncols {
                    return Err(BinBcsrError::ColumnOutOfRange {
                        row: i,
                        col: c,
                        n: ncols,
                    }
                    .into());
                }
                if c as usize == i || prev.is_some_and(|q| q >= c) {
                    return Err(BinBcsrError::RowNotSorted { row: i }.into());
                }
                prev = Some(c);
            }
        }
        Ok(p)
    }
    pub fn num_block_rows(&self) -> usize {
        self.n
    }
    pub fn block_dim(&self) -> usize {
        self.e
    }
    pub fn num_bins(&self) -> usize {
        self.nbins
    }
    /// Off-diagonal slots including padding.
    pub fn num_slots(&self) -> usize {
        self.nslots
    }
    /// Stored off-diagonal blocks (padding excluded).
    pub fn off_diagonal_blocks(&self) -> u64 {
        self.off_diagonal_blocks
    }
    /// Stored block non-zeros, diagonal included.
    pub fn block_nonzeros(&self) -> u64 {
        self.off_diagonal_blocks + self.n as u64
    }
}

/// A Bin-BCSR* matrix in device memory: shared pattern, block-component-major padded
/// values and the separate dense block diagonal (dissertation §4.4.2).
pub struct DeviceBinBcsr<T: GpuScalar> {
    pattern: Arc<DeviceBinBcsrPattern>,
    /// Off-diagonal values (layout of [`BinBcsr::values`]).
    pub values: DeviceBuffer<T>,
    /// Dense block diagonal, `e²` per block row.
    pub diag: DeviceBuffer<T>,
}

impl<T: GpuScalar> DeviceBinBcsr<T> {
    /// A matrix from a device pattern and device value arrays (lengths `num_slots · e²` and
    /// `n · e²`, as [`BinBcsr::from_parts`]).
    pub fn from_parts(
        pattern: Arc<DeviceBinBcsrPattern>,
        values: DeviceBuffer<T>,
        diag: DeviceBuffer<T>,
    ) -> Result<Self, SolveError> {
        let e2 = pattern.e * pattern.e;
        if values.len() < pattern.nslots * e2 || diag.len() < pattern.n * e2 {
            return Err(BinBcsrError::ValueLength {
                expected: pattern.nslots * e2,
                found: values.len(),
            }
            .into());
        }
        Ok(DeviceBinBcsr {
            pattern,
            values,
            diag,
        })
    }
    /// Upload a host matrix.
    pub fn upload(gpu: &Gpu, m: &BinBcsr<T>) -> Result<Self, SolveError> {
        Ok(DeviceBinBcsr {
            pattern: Arc::new(DeviceBinBcsrPattern::upload(gpu, m.pattern())?),
            values: up(gpu, m.values())?,
            diag: up(gpu, m.diag())?,
        })
    }
    /// Copy back to the host.
    pub fn download(&self, gpu: &Gpu) -> Result<BinBcsr<T>, SolveError> {
        self.download_rect(gpu, self.pattern.n)
    }
    /// Copy back to the host, columns checked against `ncols` block columns
    /// ([`DeviceBinBcsrPattern::download_rect`]).
    pub fn download_rect(&self, gpu: &Gpu, ncols: usize) -> Result<BinBcsr<T>, SolveError> {
        let p = if ncols == self.pattern.n {
            self.pattern.download(gpu)?
        } else {
            self.pattern.download_rect(gpu, ncols)?
        };
        let p = Arc::new(p);
        let e2 = p.block_dim() * p.block_dim();
        let values = gpu.download_range(&self.values, 0..p.num_slots() * e2)?;
        let diag = gpu.download_range(&self.diag, 0..p.num_block_rows() * e2)?;
        Ok(BinBcsr::from_parts(p, values, diag)?)
    }
    /// The device pattern.
    pub fn pattern(&self) -> &Arc<DeviceBinBcsrPattern> {
        &self.pattern
    }
    /// Scalar rows `n e`.
    pub fn num_rows(&self) -> usize {
        self.pattern.n * self.pattern.e
    }

    /// `y = K x` with dynamic warp scheduling (Listing 4.1): one warp per bin, bins handed
    /// out by an atomic counter. Same summation order as [`BinBcsr::spmv`].
    pub fn spmv(
        &self,
        k: &SolveKernels<'_>,
        x: &DeviceBuffer<T>,
        y: &mut DeviceBuffer<T>,
    ) -> Result<(), SolveError> {
        let p = &*self.pattern;
        let ne = p.n * p.e;
        if x.len() < ne || y.len() < ne {
            return Err(BinBcsrError::VectorLength {
                expected: ne,
                found: x.len().min(y.len()),
            }
            .into());
        }
        if p.n == 0 {
            return Ok(());
        }
        let g = k.gpu;
        let mut counter = k.counter.lock().unwrap_or_else(|e| e.into_inner());
        g.memset_zero(&mut counter)?;
        let warps_per_block = BLOCK / 32;
        let blocks = (p.nbins.div_ceil(warps_per_block as usize))
            .min(g.sm_count().max(1) as usize * 8)
            .max(1) as u32;
        let kern = k.k(&format!("spmv_{}_{}", T::SUFFIX, p.e))?;
        let (n, nb) = (p.n as u32, p.nbins as u32);
        g.launch(&kern, LaunchConfig::blocks(blocks, BLOCK))
            .arg(&n)
            .arg(&nb)
            .arg(&p.bin_offsets)
            .arg(&p.row_lengths)
            .arg(&p.col_indices)
            .arg(&self.values)
            .arg(&self.diag)
            .arg(x)
            .arg(&*y)
            .arg(&*counter)
            .run()?;
        Ok(())
    }

    /// Bytes one SpMV must move: column indices and values of the stored (non-padding)
    /// off-diagonal blocks, the diagonal blocks, row lengths, bin offsets, `x` once and `y`.
    pub fn spmv_bytes(&self) -> u64 {
        let p = &*self.pattern;
        let s = std::mem::size_of::<T>() as u64;
        let e = p.e as u64;
        let n = p.n as u64;
        p.off_diagonal_blocks * (4 + e * e * s)
            + n * e * e * s
            + 4 * n
            + 4 * (p.nbins as u64 + 1)
            + 2 * n * e * s
    }
}

impl DeviceOperator for DeviceBinBcsr<f64> {
    fn num_block_rows(&self) -> usize {
        self.pattern.n
    }
    fn block_size(&self) -> usize {
        self.pattern.e
    }
    fn apply(
        &self,
        k: &SolveKernels<'_>,
        x: &DeviceBuffer<f64>,
        y: &mut DeviceBuffer<f64>,
    ) -> Result<(), SolveError> {
        self.spmv(k, x, y)
    }
    fn diagonal(&self) -> &DeviceBuffer<f64> {
        &self.diag
    }
    fn apply_bytes(&self) -> u64 {
        self.spmv_bytes()
    }
}
