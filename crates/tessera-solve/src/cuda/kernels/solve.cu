// Tessera solver kernels: Bin-BCSR* SpMV (dissertation Listing 4.1) and the vector kernels of
// the filtered PCG (§4.4.2). SpMV templates over the scalar T (float, double) and the block
// size E (1..3); extern "C" wrappers are named spmv_<t>_<e>.

typedef unsigned int u32;
typedef unsigned long long u64;

#define PAD 0xffffffffu
#define BIN 32

// ----------------------------------------------------------------------------- SpMV

// Bin-BCSR* SpMV with dynamic warp scheduling (Listing 4.1): every warp takes the next bin
// from an atomic bin counter; lane r computes block row 32 b + r: the dense diagonal block,
// then its off-diagonal blocks in column order (values block-component-major).
template <typename T, int E>
__device__ void spmv(u32 n, u32 nbins, const u32* bin_offsets, const u32* len, const u32* cols, const T* vals, const T* diag,
                     const T* x, T* y, u32* bin_counter) {
    const int E2 = E * E;
    u32 lane = threadIdx.x % 32;
    for (;;) {
        u32 b = 0;
        if (lane == 0) b = atomicAdd(bin_counter, 1u);
        b = __shfl_sync(0xffffffffu, b, 0);
        if (b >= nbins) return;
        u32 i = b * BIN + lane;
        if (i < n) {
            u32 base = bin_offsets[b];
            u32 w32 = bin_offsets[b + 1] - base;
            T acc[E];
            const T* d = diag + (u64)i * E2;
            for (int k = 0; k < E; ++k) {
                acc[k] = (T)0;
                for (int l = 0; l < E; ++l) acc[k] += d[k * E + l] * x[(u64)i * E + l];
            }
            const u32* gcol = cols + base + lane;
            const T* gval = vals + (u64)base * E2 + lane;
            u32 rl = len[i];
            for (u32 kk = 0; kk < rl; ++kk) {
                u32 s = kk * BIN;
                u32 j = __ldg(gcol + s);
                T xj[E];
                for (int l = 0; l < E; ++l) xj[l] = __ldg(x + (u64)j * E + l);
                for (int k = 0; k < E; ++k)
                    for (int l = 0; l < E; ++l) acc[k] += __ldg(gval + (u64)(k * E + l) * w32 + s) * xj[l];
            }
            for (int k = 0; k < E; ++k) y[(u64)i * E + k] = acc[k];
        }
    }
}

// ----------------------------------------------------------------------------- PCG (f64)

// r = S(b - r) (r holds A x on entry)
extern "C" __global__ void pcg_residual(u32 len, const double* b, const u32* fixed, double* r) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < len) r[t] = fixed[t] ? 0.0 : b[t] - r[t];
}
// y = S(P⁻¹ x): block-Jacobi with the inverted diagonal blocks, then the filter.
extern "C" __global__ void pcg_jacobi(u32 nodes, u32 e, const double* inv, const u32* fixed, const double* x, double* y) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nodes) return;
    for (u32 r = 0; r < e; ++r) {
        double s = 0.0;
        for (u32 c = 0; c < e; ++c) s += inv[(u64)i * e * e + r * e + c] * x[(u64)i * e + c];
        y[(u64)i * e + r] = fixed[(u64)i * e + r] ? 0.0 : s;
    }
}
// Deterministic dot product, pass 1: a fixed grid; each block sums a grid-stride subset in
// a fixed order and reduces it in shared memory (256 threads) into partial[blockIdx.x].
extern "C" __global__ void dot_partial(u32 len, const double* a, const double* b, double* partial) {
    __shared__ double sh[256];
    double s = 0.0;
    for (u32 t = blockIdx.x * blockDim.x + threadIdx.x; t < len; t += gridDim.x * blockDim.x) s += a[t] * b[t];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (u32 o = 128; o > 0; o >>= 1) {
        if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}
// pass 2: one block of 256 threads sums the partials in a fixed order into out[slot].
extern "C" __global__ void dot_final(u32 nparts, const double* partial, double* out, u32 slot) {
    __shared__ double sh[256];
    double s = 0.0;
    for (u32 t = threadIdx.x; t < nparts; t += 256) s += partial[t];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (u32 o = 128; o > 0; o >>= 1) {
        if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[slot] = sh[0];
}

// ------------------------------------------------------------------ PCG without host syncs
// The scalars of the iteration live on the device: st = [δ, α, β, r0, tol, divergence],
// out = dot results [cᵀq, rᵀr, rᵀs], status = [state, iteration] (state 0 running,
// 1 converged, 2 non-finite direction, 3 cᵀq <= 0, 4 non-finite residual, 5 diverged).
// Once state != 0 every vector kernel returns at once, so the iterate freezes at the
// iteration that ended the solve; the host polls the status every few iterations.
extern "C" __global__ void pcg_alpha(const double* out, double* st, u32* status, u32 it) {
    if (status[0]) return;
    double cq = out[0];
    if (!isfinite(cq)) { status[0] = 2; status[1] = it; return; }
    if (cq <= 0.0) { status[0] = 3; status[1] = it; st[6] = cq; return; }
    st[1] = st[0] / cq;
}
// relative residual into hist[it], convergence / divergence checks, β = δ'/δ, δ = δ'
extern "C" __global__ void pcg_beta(const double* out, double* st, u32* status, double* hist, u32 it) {
    if (status[0]) return;
    double rel = sqrt(out[1]) / st[3];
    hist[it] = rel;
    if (!isfinite(rel)) { status[0] = 4; status[1] = it; return; }
    if (rel <= st[4]) { status[0] = 1; status[1] = it; return; }
    if (rel > st[5]) { status[0] = 5; status[1] = it; return; }
    double dn = out[2];
    st[2] = dn / st[0];
    st[0] = dn;
}
extern "C" __global__ void pcg_direction_dev(u32 len, const double* st, const u32* status, const double* s, double* c) {
    if (status[0]) return;
    double beta = st[2];
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < len) c[t] = s[t] + beta * c[t];
}
extern "C" __global__ void dot_final_dev(u32 nparts, const double* partial, double* out, u32 slot, const u32* status) {
    if (status[0]) return;
    __shared__ double sh[256];
    double s = 0.0;
    for (u32 t = threadIdx.x; t < nparts; t += 256) s += partial[t];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (u32 o = 128; o > 0; o >>= 1) {
        if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[slot] = sh[0];
}

// Fused PCG passes (deterministic: fixed grids, fixed summation order).
// q = S q (the filter) and the partial sums of cᵀq, in one pass.
extern "C" __global__ void pcg_filter_dot_partial(u32 len, const u32* fixed, double* q, const double* c, double* partial, const u32* status) {
    if (status[0]) return;
    __shared__ double sh[256];
    double s = 0.0;
    for (u32 t = blockIdx.x * blockDim.x + threadIdx.x; t < len; t += gridDim.x * blockDim.x) {
        double v = q[t];
        if (fixed[t]) { v = 0.0; q[t] = 0.0; }
        s += c[t] * v;
    }
    sh[threadIdx.x] = s;
    __syncthreads();
    for (u32 o = 128; o > 0; o >>= 1) {
        if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}
// Per node: x += α c (with WITH_X), r -= α q, s = S(P⁻¹ r), and the partial sums of rᵀr and
// rᵀs (partial2[2 b], partial2[2 b + 1]), in one pass.
template <bool WITH_X>
__device__ void update_precond_partial(u32 nodes, u32 e, const double* st, const u32* status, const double* inv,
                                       const u32* fixed, const double* c, const double* q, double* x, double* r, double* s,
                                       double* partial2) {
    if (status[0]) return;
    __shared__ double sh[2][256];
    double alpha = st[1];
    double rr = 0.0, rs = 0.0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < nodes; i += gridDim.x * blockDim.x) {
        double rv[4];
        for (u32 k = 0; k < e; ++k) {
            u64 t = (u64)i * e + k;
            if (WITH_X) x[t] += alpha * c[t];
            double v = r[t] - alpha * q[t];
            r[t] = v;
            rv[k] = v;
        }
        for (u32 k = 0; k < e; ++k) {
            double a = 0.0;
            for (u32 l = 0; l < e; ++l) a += inv[(u64)i * e * e + k * e + l] * rv[l];
            u64 t = (u64)i * e + k;
            a = fixed[t] ? 0.0 : a;
            s[t] = a;
            rr += rv[k] * rv[k];
            rs += rv[k] * a;
        }
    }
    sh[0][threadIdx.x] = rr;
    sh[1][threadIdx.x] = rs;
    __syncthreads();
    for (u32 o = 128; o > 0; o >>= 1) {
        if (threadIdx.x < o) {
            sh[0][threadIdx.x] += sh[0][threadIdx.x + o];
            sh[1][threadIdx.x] += sh[1][threadIdx.x + o];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial2[2 * blockIdx.x] = sh[0][0];
        partial2[2 * blockIdx.x + 1] = sh[1][0];
    }
}
extern "C" __global__ void pcg_update_precond_partial(u32 nodes, u32 e, const double* st, const u32* status, const double* inv, const u32* fixed,
                                                      const double* c, const double* q, double* x, double* r, double* s, double* partial2) {
    update_precond_partial<true>(nodes, e, st, status, inv, fixed, c, q, x, r, s, partial2);
}
// Without x (c and x are not read; the arguments are pcg_update_precond_partial's): the
// partitioned PCG across devices updates x (pcg_update_x, the same arithmetic) while the
// all-reduce of these partials runs.
extern "C" __global__ void pcg_update_rs_partial(u32 nodes, u32 e, const double* st, const u32* status, const double* inv, const u32* fixed,
                                                 const double* c, const double* q, double* x, double* r, double* s, double* partial2) {
    update_precond_partial<false>(nodes, e, st, status, inv, fixed, c, q, x, r, s, partial2);
}
extern "C" __global__ void pcg_update_x(u32 len, const double* st, const u32* status, const double* c, double* x) {
    if (status[0]) return;
    double alpha = st[1];
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < len) x[t] += alpha * c[t];
}
// out[slot_a] and out[slot_b] from the interleaved partials of pcg_update_precond_partial
// (the one-domain PCG takes slots 1 and 2, the partitioned PCG its domain's reduction slots).
extern "C" __global__ void dot_final2_dev(u32 nparts, const double* partial2, double* out, u32 slot_a, u32 slot_b,
                                          const u32* status) {
    if (status[0]) return;
    __shared__ double sh[2][256];
    double a = 0.0, b = 0.0;
    for (u32 t = threadIdx.x; t < nparts; t += 256) {
        a += partial2[2 * t];
        b += partial2[2 * t + 1];
    }
    sh[0][threadIdx.x] = a;
    sh[1][threadIdx.x] = b;
    __syncthreads();
    for (u32 o = 128; o > 0; o >>= 1) {
        if (threadIdx.x < o) {
            sh[0][threadIdx.x] += sh[0][threadIdx.x + o];
            sh[1][threadIdx.x] += sh[1][threadIdx.x + o];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[slot_a] = sh[0][0];
        out[slot_b] = sh[1][0];
    }
}

#define SPMV_WRAPPER(T, TN, E)                                                                                                      \
    extern "C" __global__ void spmv_##TN##_##E(u32 n, u32 nbins, const u32* bin_offsets, const u32* len, const u32* cols,          \
                                               const T* vals, const T* diag, const T* x, T* y, u32* bin_counter) {                 \
        spmv<T, E>(n, nbins, bin_offsets, len, cols, vals, diag, x, y, bin_counter);                                               \
    }

SPMV_WRAPPER(float, f32, 1)
SPMV_WRAPPER(float, f32, 2)
SPMV_WRAPPER(float, f32, 3)
SPMV_WRAPPER(double, f64, 1)
SPMV_WRAPPER(double, f64, 2)
SPMV_WRAPPER(double, f64, 3)
