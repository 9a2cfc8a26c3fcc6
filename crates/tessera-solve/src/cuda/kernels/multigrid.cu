// Tessera multigrid kernels (continuation of solve.cu, compiled into the same module: u32, u64
// come from there): block CSR SpMV of 3 x 3 blocks (the coarse levels, prolongators and
// restrictions of smoothed-aggregation AMG and p-multigrid), the smoother steps, the dense
// coarse solve, and the vector kernels of the cycle and of the PCG with a general
// preconditioner. All f64; every sum runs in a fixed order (deterministic).

// y = A x (add == 0) or y += A x (add != 0) for a block CSR matrix of row-major 3 x 3 blocks.
// A group of G lanes (a power of two, at most 32) takes one block row; lane l sums the blocks
// l, l + G, ... of the row, then the group reduces by shuffles (all lanes of a warp take part,
// also those past the last row).
template <int G>
__device__ void bcsr_spmv(u32 nrows, const u32* row_ptr, const u32* cols, const double* vals, const double* x, double* y,
                          u32 add) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 row = t / G;
    u32 lane = (u32)(t % G);
    bool active = row < nrows;
    double a0 = 0.0, a1 = 0.0, a2 = 0.0;
    if (active) {
        u32 beg = row_ptr[row], end = row_ptr[row + 1];
        for (u32 k = beg + lane; k < end; k += G) {
            u64 j = cols[k];
            const double* v = vals + (u64)k * 9;
            double x0 = __ldg(x + j * 3), x1 = __ldg(x + j * 3 + 1), x2 = __ldg(x + j * 3 + 2);
            a0 += __ldg(v + 0) * x0 + __ldg(v + 1) * x1 + __ldg(v + 2) * x2;
            a1 += __ldg(v + 3) * x0 + __ldg(v + 4) * x1 + __ldg(v + 5) * x2;
            a2 += __ldg(v + 6) * x0 + __ldg(v + 7) * x1 + __ldg(v + 8) * x2;
        }
    }
    for (int o = G / 2; o > 0; o >>= 1) {
        a0 += __shfl_down_sync(0xffffffffu, a0, o, G);
        a1 += __shfl_down_sync(0xffffffffu, a1, o, G);
        a2 += __shfl_down_sync(0xffffffffu, a2, o, G);
    }
    if (active && lane == 0) {
        double* yr = y + row * 3;
        if (add) {
            yr[0] += a0;
            yr[1] += a1;
            yr[2] += a2;
        } else {
            yr[0] = a0;
            yr[1] = a1;
            yr[2] = a2;
        }
    }
}

#define BCSR_WRAPPER(G)                                                                                                  \
    extern "C" __global__ void bcsr_spmv_##G(u32 nrows, const u32* row_ptr, const u32* cols, const double* vals,        \
                                             const double* x, double* y, u32 add) {                                     \
        bcsr_spmv<G>(nrows, row_ptr, cols, vals, x, y, add);                                                            \
    }
BCSR_WRAPPER(2)
BCSR_WRAPPER(4)
BCSR_WRAPPER(8)
BCSR_WRAPPER(16)
BCSR_WRAPPER(32)

// One step of the smoothers per node (Chebyshev recurrence or damped Jacobi):
// q = D⁻¹ r (inverted 3 x 3 diagonal blocks), d = c_old d + c_new q, x += d.
// With c_old == 0 the old d is not read (it may be anything); with x_zero, x is taken as 0
// (x = d).
extern "C" __global__ void mg_smooth_step(u32 nodes, const double* dinv, const double* r, double* d, double* x, double c_old,
                                          double c_new, u32 x_zero) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nodes) return;
    const double* m = dinv + (u64)i * 9;
    u64 o = (u64)i * 3;
    double r0 = r[o], r1 = r[o + 1], r2 = r[o + 2];
    double q[3];
    for (int k = 0; k < 3; ++k) {
        double s = 0.0;
        s += m[k * 3] * r0;
        s += m[k * 3 + 1] * r1;
        s += m[k * 3 + 2] * r2;
        q[k] = s;
    }
    for (int k = 0; k < 3; ++k) {
        double dv = (c_old == 0.0 ? 0.0 : c_old * d[o + k]) + c_new * q[k];
        d[o + k] = dv;
        x[o + k] = x_zero ? dv : x[o + k] + dv;
    }
}

// r = b - q
extern "C" __global__ void mg_sub(u32 len, const double* b, const double* q, double* r) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < len) r[t] = b[t] - q[t];
}
// y = x
extern "C" __global__ void mg_copy(u32 len, const double* x, double* y) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < len) y[t] = x[t];
}
// r -= q
extern "C" __global__ void mg_sub_assign(u32 len, const double* q, double* r) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < len) r[t] -= q[t];
}
// x += w
extern "C" __global__ void mg_add_assign(u32 len, const double* w, double* x) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < len) x[t] += w[t];
}
// y[idx[t]] = x[idx[t]]: the filtered operator S A x + (I - S) x on the constrained DOFs.
extern "C" __global__ void mg_set_fixed(u32 nfixed, const u32* idx, const double* x, double* y) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < nfixed) {
        u32 i = idx[t];
        y[i] = x[i];
    }
}
// x = M b for the dense row-major n x n coarse inverse M: a warp per row, lanes stride over the
// columns, then a shuffle reduction.
extern "C" __global__ void mg_dense_mv(u32 n, const double* m, const double* b, double* x) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 row = t / 32;
    u32 lane = threadIdx.x % 32;
    double s = 0.0;
    if (row < n)
        for (u32 j = lane; j < n; j += 32) s += m[row * n + j] * b[j];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (row < n && lane == 0) x[row] = s;
}

// PCG with a general preconditioner: x += α c, r -= α q, and the partial sums of rᵀr
// (a fixed grid of 256 threads per block, as dot_partial).
extern "C" __global__ void pcg_update_partial(u32 len, const double* st, const u32* status, const double* c, const double* q,
                                              double* x, double* r, double* partial) {
    if (status[0]) return;
    __shared__ double sh[256];
    double alpha = st[1];
    double s = 0.0;
    for (u32 t = blockIdx.x * blockDim.x + threadIdx.x; t < len; t += gridDim.x * blockDim.x) {
        x[t] += alpha * c[t];
        double v = r[t] - alpha * q[t];
        r[t] = v;
        s += v * v;
    }
    sh[threadIdx.x] = s;
    __syncthreads();
    for (u32 o = 128; o > 0; o >>= 1) {
        if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}
// y = S y (zero on the constrained DOFs)
extern "C" __global__ void pcg_filter(u32 len, const u32* fixed, double* y) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < len && fixed[t]) y[t] = 0.0;
}
