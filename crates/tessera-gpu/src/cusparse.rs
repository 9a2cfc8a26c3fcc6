//! cuSPARSE baselines of the SpMV evaluation (dissertation §5.4: "For the complex matrices,
//! the built-in support for complex linear algebra was used. For the block-sparse matrices,
//! the built-in support for the BSR format was used. For the quaternionic matrices, we used the
//! matrix expansion [Eq. 5.1] ... BSR was used in this case as well").
//!
//! Through cudarc's raw bindings (`cudarc::cusparse::sys`):
//! - [`CusparseSpmv::csr`]: generic-API CSR SpMV, real (`CUDA_R_32F/64F`) or complex
//!   (`CUDA_C_32F/64F`, values interleaved re, im);
//! - [`CusparseSpmv::bsr`]: `cusparse{S,D}bsrmv` with row-major `e x e` blocks (3x3 FEM
//!   blocks, 4x4 quaternion expansions).
//!
//! A baseline owns its device arrays and a stream of the device's primary context (the one
//! [`crate::Gpu`] uses); the arrays are uploaded once, [`CusparseSpmv::median_ms`] times the
//! SpMV with CUDA events and [`CusparseSpmv::result`] downloads `y` for verification.

use std::sync::Arc;

use cudarc::cusparse::sys;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use crate::error::{guard, GpuError, GpuResult};
use crate::runtime::{median, Element};

/// Scalars cuSPARSE baselines run in.
pub trait CusparseScalar: Element + num_one::One {
    #[doc(hidden)]
    const REAL: sys::cudaDataType;
    #[doc(hidden)]
    const COMPLEX: sys::cudaDataType;
    #[doc(hidden)]
    /// `cusparse{S,D}bsrmv`
    unsafe fn bsrmv(
        h: sys::cusparseHandle_t,
        mb: i32,
        nb: i32,
        nnzb: i32,
        descr: sys::cusparseMatDescr_t,
        vals: *const Self,
        row: *const i32,
        col: *const i32,
        dim: i32,
        x: *const Self,
        y: *mut Self,
    ) -> sys::cusparseStatus_t;
}

mod num_one {
    pub trait One {
        fn one() -> Self;
        fn zero() -> Self;
    }
    impl One for f32 {
        fn one() -> Self {
            1.0
        }
        fn zero() -> Self {
            0.0
        }
    }
    impl One for f64 {
        fn one() -> Self {
            1.0
        }
        fn zero() -> Self {
            0.0
        }
    }
}

impl CusparseScalar for f32 {
    const REAL: sys::cudaDataType = sys::cudaDataType::CUDA_R_32F;
    const COMPLEX: sys::cudaDataType = sys::cudaDataType::CUDA_C_32F;
    unsafe fn bsrmv(
        h: sys::cusparseHandle_t,
        mb: i32,
        nb: i32,
        nnzb: i32,
        descr: sys::cusparseMatDescr_t,
        vals: *const f32,
        row: *const i32,
        col: *const i32,
        dim: i32,
        x: *const f32,
        y: *mut f32,
    ) -> sys::cusparseStatus_t {
        let (one, zero) = (1.0f32, 0.0f32);
        // SAFETY: forwarded from the caller: valid handle, descriptor and device arrays of the
        // announced sizes; alpha and beta are host scalars (default pointer mode).
        unsafe {
            sys::cusparseSbsrmv(
                h,
                sys::cusparseDirection_t::CUSPARSE_DIRECTION_ROW,
                sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                mb,
                nb,
                nnzb,
                &one,
                descr,
                vals,
                row,
                col,
                dim,
                x,
                &zero,
                y,
            )
        }
    }
}

impl CusparseScalar for f64 {
    const REAL: sys::cudaDataType = sys::cudaDataType::CUDA_R_64F;
    const COMPLEX: sys::cudaDataType = sys::cudaDataType::CUDA_C_64F;
    unsafe fn bsrmv(
        h: sys::cusparseHandle_t,
        mb: i32,
        nb: i32,
        nnzb: i32,
        descr: sys::cusparseMatDescr_t,
        vals: *const f64,
        row: *const i32,
        col: *const i32,
        dim: i32,
        x: *const f64,
        y: *mut f64,
    ) -> sys::cusparseStatus_t {
        let (one, zero) = (1.0f64, 0.0f64);
        // SAFETY: as for f32.
        unsafe {
            sys::cusparseDbsrmv(
                h,
                sys::cusparseDirection_t::CUSPARSE_DIRECTION_ROW,
                sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                mb,
                nb,
                nnzb,
                &one,
                descr,
                vals,
                row,
                col,
                dim,
                x,
                &zero,
                y,
            )
        }
    }
}

fn check(op: &'static str, s: sys::cusparseStatus_t) -> GpuResult<()> {
    if s == sys::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(GpuError::Driver {
            op,
            msg: format!("{s:?}"),
        })
    }
}

fn op_of(transpose: bool) -> sys::cusparseOperation_t {
    if transpose {
        sys::cusparseOperation_t::CUSPARSE_OPERATION_TRANSPOSE
    } else {
        sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE
    }
}

enum Kind {
    /// Generic API CSR: matrix and vector descriptors, work buffer, value type.
    Csr {
        mat: sys::cusparseSpMatDescr_t,
        vx: sys::cusparseDnVecDescr_t,
        vy: sys::cusparseDnVecDescr_t,
        ty: sys::cudaDataType,
        complex: bool,
        /// `y = Aᵀ x` (cuSPARSE's transposed SpMV on the stored CSR)
        transpose: bool,
    },
    /// Legacy BSR: matrix descriptor and block dimension.
    Bsr {
        descr: sys::cusparseMatDescr_t,
        dim: i32,
    },
}

/// A cuSPARSE SpMV `y = A x` with its matrix and vectors in device memory.
pub struct CusparseSpmv<T: CusparseScalar> {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    handle: sys::cusparseHandle_t,
    kind: Kind,
    n_rows: i32,
    n_cols: i32,
    nnz: i32,
    row_ptr: CudaSlice<i32>,
    col_idx: CudaSlice<i32>,
    vals: CudaSlice<T>,
    x: CudaSlice<T>,
    y: CudaSlice<T>,
    work: CudaSlice<u8>,
}

fn to_i32(v: &[u32], what: &str) -> GpuResult<Vec<i32>> {
    v.iter()
        .map(|&x| {
            i32::try_from(x)
                .map_err(|_| GpuError::InvalidArgument(format!("{what} {x} exceeds i32")))
        })
        .collect()
}

impl<T: CusparseScalar> CusparseSpmv<T> {
    fn base(
        ordinal: usize,
        row_ptr: &[u32],
        col_idx: &[u32],
        vals: &[T],
        x: &[T],
        y_len: usize,
    ) -> GpuResult<(
        Arc<CudaContext>,
        Arc<CudaStream>,
        sys::cusparseHandle_t,
        [CudaSlice<i32>; 2],
        [CudaSlice<T>; 3],
    )> {
        crate::probe::probe_driver()?;
        guard("cuSPARSE setup", || {
            let ctx = CudaContext::new(ordinal)
                .map_err(|e| GpuError::NoDevice(format!("cuda:{ordinal}: {e}")))?;
            let stream = ctx
                .new_stream()
                .map_err(|e| GpuError::driver("cuStreamCreate", e))?;
            let up_i = |v: &[i32]| {
                stream
                    .clone_htod(v)
                    .map_err(|e| GpuError::driver("cuMemcpyHtoD", e))
            };
            let up_t = |v: &[T]| {
                stream
                    .clone_htod(v)
                    .map_err(|e| GpuError::driver("cuMemcpyHtoD", e))
            };
            let r = up_i(&to_i32(row_ptr, "row offset")?)?;
            let c = up_i(&to_i32(col_idx, "column index")?)?;
            let v = up_t(vals)?;
            let dx = up_t(x)?;
            let dy = stream
                .alloc_zeros::<T>(y_len.max(1))
                .map_err(|e| GpuError::driver("cuMemAlloc", e))?;
            let handle = cudarc::cusparse::result::create().map_err(|e| GpuError::Driver {
                op: "cusparseCreate",
                msg: format!("{e:?}"),
            })?;
            // SAFETY: `handle` was just created; the stream is a valid stream of this context.
            check("cusparseSetStream", unsafe {
                sys::cusparseSetStream(handle, stream.cu_stream() as _)
            })?;
            Ok((ctx, stream, handle, [r, c], [v, dx, dy]))
        })
    }

    /// CSR SpMV through the generic API. `complex`: values, `x` and `y` hold interleaved
    /// (re, im) pairs (`vals.len() == 2 nnz`); otherwise real.
    pub fn csr(
        ordinal: usize,
        n_rows: usize,
        n_cols: usize,
        row_ptr: &[u32],
        col_idx: &[u32],
        vals: &[T],
        x: &[T],
        complex: bool,
    ) -> GpuResult<Self> {
        Self::csr_op(
            ordinal, n_rows, n_cols, row_ptr, col_idx, vals, x, complex, false,
        )
    }

    /// CSR SpMV `y = A x`, or with `transpose` `y = Aᵀ x` (`CUSPARSE_OPERATION_TRANSPOSE`:
    /// `x` has `n_rows` entries, `y` `n_cols`), as a library multiplies a matrix stored in
    /// CSC by reading it as the CSR of its transpose.
    #[allow(clippy::too_many_arguments)]
    pub fn csr_op(
        ordinal: usize,
        n_rows: usize,
        n_cols: usize,
        row_ptr: &[u32],
        col_idx: &[u32],
        vals: &[T],
        x: &[T],
        complex: bool,
        transpose: bool,
    ) -> GpuResult<Self> {
        let l = if complex { 2 } else { 1 };
        let (x_len, y_len) = if transpose {
            (n_rows, n_cols)
        } else {
            (n_cols, n_rows)
        };
        if row_ptr.len() != n_rows + 1 || vals.len() != col_idx.len() * l || x.len() != x_len * l {
            return Err(GpuError::InvalidArgument(
                "CSR arrays do not match the sizes".into(),
            ));
        }
        let (ctx, stream, handle, [r, c], [v, dx, mut dy]) =
            Self::base(ordinal, row_ptr, col_idx, vals, x, y_len * l)?;
        let ty = if complex { T::COMPLEX } else { T::REAL };
        let nnz = col_idx.len() as i64;
        guard("cuSPARSE CSR setup", move || {
            let mut mat: sys::cusparseSpMatDescr_t = std::ptr::null_mut();
            let mut vx: sys::cusparseDnVecDescr_t = std::ptr::null_mut();
            let mut vy: sys::cusparseDnVecDescr_t = std::ptr::null_mut();
            let (pr, _g1) = r.device_ptr(&stream);
            let (pc, _g2) = c.device_ptr(&stream);
            let (pv, _g3) = v.device_ptr(&stream);
            let (px, _g4) = dx.device_ptr(&stream);
            let (py, _g5) = dy.device_ptr_mut(&stream);
            let mut size = 0usize;
            let one = [T::one(), T::zero()];
            let zero = [T::zero(), T::zero()];
            // SAFETY: the device pointers are live allocations of the announced sizes (held by
            // `self` for the descriptors' lifetime); descriptors are destroyed in Drop.
            unsafe {
                check(
                    "cusparseCreateCsr",
                    sys::cusparseCreateCsr(
                        &mut mat,
                        n_rows as i64,
                        n_cols as i64,
                        nnz,
                        pr as *mut _,
                        pc as *mut _,
                        pv as *mut _,
                        sys::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                        sys::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                        sys::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                        ty,
                    ),
                )?;
                check(
                    "cusparseCreateDnVec",
                    sys::cusparseCreateDnVec(&mut vx, x_len as i64, px as *mut _, ty),
                )?;
                check(
                    "cusparseCreateDnVec",
                    sys::cusparseCreateDnVec(&mut vy, y_len as i64, py as *mut _, ty),
                )?;
                check(
                    "cusparseSpMV_bufferSize",
                    sys::cusparseSpMV_bufferSize(
                        handle,
                        op_of(transpose),
                        one.as_ptr() as *const _,
                        mat,
                        vx,
                        zero.as_ptr() as *const _,
                        vy,
                        ty,
                        sys::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT,
                        &mut size,
                    ),
                )?;
            }
            drop((_g1, _g2, _g3, _g4, _g5));
            let work = stream
                .alloc_zeros::<u8>(size.max(1))
                .map_err(|e| GpuError::driver("cuMemAlloc", e))?;
            Ok(CusparseSpmv {
                ctx,
                stream,
                handle,
                kind: Kind::Csr {
                    mat,
                    vx,
                    vy,
                    ty,
                    complex,
                    transpose,
                },
                n_rows: n_rows as i32,
                n_cols: n_cols as i32,
                nnz: nnz as i32,
                row_ptr: r,
                col_idx: c,
                vals: v,
                x: dx,
                y: dy,
                work,
            })
        })
    }

    /// BSR SpMV (`cusparse{S,D}bsrmv`, row-major `dim x dim` blocks): `vals.len() == dim^2 nnzb`,
    /// `x.len() == dim n_block_cols`.
    pub fn bsr(
        ordinal: usize,
        dim: usize,
        n_block_rows: usize,
        n_block_cols: usize,
        row_ptr: &[u32],
        col_idx: &[u32],
        vals: &[T],
        x: &[T],
    ) -> GpuResult<Self> {
        if dim == 0
            || row_ptr.len() != n_block_rows + 1
            || vals.len() != col_idx.len() * dim * dim
            || x.len() != n_block_cols * dim
        {
            return Err(GpuError::InvalidArgument(
                "BSR arrays do not match the sizes".into(),
            ));
        }
        let (ctx, stream, handle, [r, c], [v, dx, dy]) =
            Self::base(ordinal, row_ptr, col_idx, vals, x, n_block_rows * dim)?;
        guard("cuSPARSE BSR setup", move || {
            let mut descr: sys::cusparseMatDescr_t = std::ptr::null_mut();
            // SAFETY: creates a default (general, zero-based) descriptor, destroyed in Drop.
            check("cusparseCreateMatDescr", unsafe {
                sys::cusparseCreateMatDescr(&mut descr)
            })?;
            let work = stream
                .alloc_zeros::<u8>(1)
                .map_err(|e| GpuError::driver("cuMemAlloc", e))?;
            Ok(CusparseSpmv {
                ctx,
                stream,
                handle,
                kind: Kind::Bsr {
                    descr,
                    dim: dim as i32,
                },
                n_rows: n_block_rows as i32,
                n_cols: n_block_cols as i32,
                nnz: col_idx.len() as i32,
                row_ptr: r,
                col_idx: c,
                vals: v,
                x: dx,
                y: dy,
                work,
            })
        })
    }

    /// Enqueues one SpMV.
    pub fn run(&mut self) -> GpuResult<()> {
        let handle = self.handle;
        match self.kind {
            Kind::Csr {
                mat,
                vx,
                vy,
                ty,
                transpose,
                ..
            } => {
                let (pw, _g) = self.work.device_ptr_mut(&self.stream);
                let one = [T::one(), T::zero()];
                let zero = [T::zero(), T::zero()];
                // SAFETY: descriptors and the work buffer belong to `self` and are live.
                check("cusparseSpMV", unsafe {
                    sys::cusparseSpMV(
                        handle,
                        op_of(transpose),
                        one.as_ptr() as *const _,
                        mat,
                        vx,
                        zero.as_ptr() as *const _,
                        vy,
                        ty,
                        sys::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT,
                        pw as *mut _,
                    )
                })
            }
            Kind::Bsr { descr, dim } => {
                let (pr, _g1) = self.row_ptr.device_ptr(&self.stream);
                let (pc, _g2) = self.col_idx.device_ptr(&self.stream);
                let (pv, _g3) = self.vals.device_ptr(&self.stream);
                let (px, _g4) = self.x.device_ptr(&self.stream);
                let (py, _g5) = self.y.device_ptr_mut(&self.stream);
                // SAFETY: all pointers are live device arrays of `self` with the sizes checked
                // in `bsr`.
                check("cusparseXbsrmv", unsafe {
                    T::bsrmv(
                        handle,
                        self.n_rows,
                        self.n_cols,
                        self.nnz,
                        descr,
                        pv as *const T,
                        pr as *const i32,
                        pc as *const i32,
                        dim,
                        px as *const T,
                        py as *mut T,
                    )
                })
            }
        }
    }

    /// Median of `runs` CUDA-event timings (ms) after `warmup` untimed runs.
    pub fn median_ms(&mut self, runs: usize, warmup: usize) -> GpuResult<f64> {
        for _ in 0..warmup {
            self.run()?;
        }
        let fl = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self
            .ctx
            .new_event(fl)
            .map_err(|e| GpuError::driver("cuEventCreate", e))?;
        let stop = self
            .ctx
            .new_event(fl)
            .map_err(|e| GpuError::driver("cuEventCreate", e))?;
        let mut v = Vec::with_capacity(runs.max(1));
        for _ in 0..runs.max(1) {
            start
                .record(&self.stream)
                .map_err(|e| GpuError::driver("cuEventRecord", e))?;
            self.run()?;
            stop.record(&self.stream)
                .map_err(|e| GpuError::driver("cuEventRecord", e))?;
            stop.synchronize()
                .map_err(|e| GpuError::driver("cuEventSynchronize", e))?;
            v.push(
                start
                    .elapsed_ms(&stop)
                    .map_err(|e| GpuError::driver("cuEventElapsedTime", e))? as f64,
            );
        }
        Ok(median(&mut v))
    }

    /// Downloads `y` (after the SpMVs enqueued so far).
    pub fn result(&self) -> GpuResult<Vec<T>> {
        let mut v = self
            .stream
            .clone_dtoh(&self.y)
            .map_err(|e| GpuError::driver("cuMemcpyDtoH", e))?;
        let len = match self.kind {
            Kind::Csr {
                complex, transpose, ..
            } => {
                let n = if transpose { self.n_cols } else { self.n_rows };
                n as usize * if complex { 2 } else { 1 }
            }
            Kind::Bsr { dim, .. } => (self.n_rows * dim) as usize,
        };
        v.truncate(len);
        Ok(v)
    }
}

impl<T: CusparseScalar> Drop for CusparseSpmv<T> {
    fn drop(&mut self) {
        // the context current for the destroys and for the buffers' frees that follow
        // (cudarc's free does not bind it; see `DeviceBuffer`); left current afterwards,
        // as cudarc's own calls leave it
        let _ = crate::runtime::make_current(&self.ctx);
        let _ = self.stream.synchronize();
        // SAFETY: the descriptors and the handle were created by this value and are destroyed
        // exactly once, after the stream finished all work that used them.
        unsafe {
            match self.kind {
                Kind::Csr { mat, vx, vy, .. } => {
                    sys::cusparseDestroySpMat(mat as _);
                    sys::cusparseDestroyDnVec(vx as _);
                    sys::cusparseDestroyDnVec(vy as _);
                }
                Kind::Bsr { descr, .. } => {
                    sys::cusparseDestroyMatDescr(descr);
                }
            }
            let _ = cudarc::cusparse::result::destroy(self.handle);
        }
    }
}
