// Tessera GPU mesh matrix with action maps (seed 004: Zayer, Steinberger, Seidel 2017, §5, §7,
// §9). The mesh matrix M (nv x nf) is stored as rowind (+ colptr for faces of several sizes);
// the value of nonzero e of column f is its position e - colptr[f] + 1 (0-based `k` here).
// Every kernel mirrors the CPU reference (crates/tessera-mesh/src/mesh_matrix/*.rs): the same
// numbering, the same order of summation; the module is compiled with --fmad=false, so double
// results agree with the CPU to the last bit where no atomics are involved.
// Map tables are indexed by the 0-based value k; flags of vector maps: 1 entry values,
// 2 face weights, 4 the stencil is all ones (table unused).
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

#define TID ((u64)blockIdx.x * blockDim.x + threadIdx.x)
#define NONE 0xffffffffu

__device__ __forceinline__ float msqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double msqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float matan2(float y, float x) { return atan2f(y, x); }
__device__ __forceinline__ double matan2(double y, double x) { return atan2(y, x); }
__device__ __forceinline__ bool mfinite(float x) { return isfinite(x); }
__device__ __forceinline__ bool mfinite(double x) { return isfinite(x); }

// Columns of M: uniform (f * n) or from colptr; the face of a corner from cface (mixed) or e / n.
struct Cols {
    const u32* colptr;
    const u32* cface;
    u32 mixed;
    u32 n;
    __device__ __forceinline__ u32 start(u64 f) const { return mixed ? colptr[f] : (u32)(f * n); }
    __device__ __forceinline__ u32 len(u64 f) const { return mixed ? colptr[f + 1] - colptr[f] : n; }
    __device__ __forceinline__ u32 face(u32 e) const { return mixed ? cface[e] : e / n; }
    __device__ __forceinline__ u32 next(u32 e) const {
        u32 f = face(e), s = start(f), l = len(f);
        return e + 1 == s + l ? s : e + 1;
    }
    __device__ __forceinline__ u32 prev(u32 e) const {
        u32 f = face(e), s = start(f), l = len(f);
        return e == s ? s + l - 1 : e - 1;
    }
};

// ============================================================== transpose (vertex -> corners)
extern "C" __global__ void mm_transpose_fill(const u32* rowind, u64 nnz, u32* cursor, u32* corners) {
    u64 e = TID;
    if (e >= nnz) return;
    u32 p = atomicAdd(cursor + rowind[e], 1u);
    corners[p] = (u32)e;
}
extern "C" __global__ void mm_corner_face(const u32* colptr, u64 nf, u32* cface) {
    u64 f = TID;
    if (f >= nf) return;
    for (u32 e = colptr[f]; e < colptr[f + 1]; e++) cface[e] = (u32)f;
}

// ============================================================== mapped SpMV (Algorithm 1)
// y = M_Q^T x: one thread per column (face), the result kept in registers
template <typename T, int W, int N>
__device__ __forceinline__ void mtv_body(const u32* __restrict__ rowind, const u32* __restrict__ colptr, u32 mixed,
                                         u32 n, u64 nf, const T* __restrict__ q, const T* __restrict__ ev,
                                         const T* __restrict__ fw, u32 flags, const T* __restrict__ x,
                                         T* __restrict__ y) {
    u64 f = TID;
    if (f >= nf) return;
    u32 s, len;
    if (N > 0) {
        s = (u32)(f * N);
        len = N;
    } else if (mixed) {
        s = colptr[f];
        len = colptr[f + 1] - s;
    } else {
        s = (u32)(f * n);
        len = n;
    }
    T acc[W];
#pragma unroll
    for (int w = 0; w < W; w++) acc[w] = T(0);
    const T wf = (flags & 2u) ? __ldg(fw + f) : T(1);
#pragma unroll
    for (u32 k = 0; k < (N > 0 ? (u32)N : len); k++) {
        u32 e = s + k;
        u32 v = __ldg(rowind + e);
        T a = (flags & 4u) ? T(1) : __ldg(q + k);
        if (flags & 1u) a *= __ldg(ev + e);
        if (flags & 2u) a *= wf;
#pragma unroll
        for (int w = 0; w < W; w++) acc[w] += a * __ldg(x + (u64)v * W + w);
    }
#pragma unroll
    for (int w = 0; w < W; w++) y[f * W + w] = acc[w];
}

// y = M_Q x with atomics (seed §7): one thread per column, the contributions added to the rows
template <typename T, int W, int N>
__device__ __forceinline__ void mv_atomic_body(const u32* __restrict__ rowind, const u32* __restrict__ colptr,
                                               u32 mixed, u32 n, u64 nf, const T* __restrict__ q,
                                               const T* __restrict__ ev, const T* __restrict__ fw, u32 flags,
                                               const T* __restrict__ x, T* y) {
    u64 f = TID;
    if (f >= nf) return;
    u32 s, len;
    if (N > 0) {
        s = (u32)(f * N);
        len = N;
    } else if (mixed) {
        s = colptr[f];
        len = colptr[f + 1] - s;
    } else {
        s = (u32)(f * n);
        len = n;
    }
    T xf[W];
#pragma unroll
    for (int w = 0; w < W; w++) xf[w] = __ldg(x + f * W + w);
    const T wf = (flags & 2u) ? __ldg(fw + f) : T(1);
#pragma unroll
    for (u32 k = 0; k < (N > 0 ? (u32)N : len); k++) {
        u32 e = s + k;
        u32 v = __ldg(rowind + e);
        T a = (flags & 4u) ? T(1) : __ldg(q + k);
        if (flags & 1u) a *= __ldg(ev + e);
        if (flags & 2u) a *= wf;
#pragma unroll
        for (int w = 0; w < W; w++) atomicAdd(y + (u64)v * W + w, a * xf[w]);
    }
}

// y = M_Q x gathered over the cached transpose: one thread per row, faces in increasing order
template <typename T, int W, int N>
__device__ __forceinline__ void mv_gather_body(const u32* __restrict__ toff, const u32* __restrict__ tcor,
                                               const u32* __restrict__ colptr, const u32* __restrict__ cface,
                                               u32 mixed, u32 n, u64 nv, const T* __restrict__ q,
                                               const T* __restrict__ ev, const T* __restrict__ fw, u32 flags,
                                               const T* __restrict__ x, T* __restrict__ y) {
    u64 v = TID;
    if (v >= nv) return;
    T acc[W];
#pragma unroll
    for (int w = 0; w < W; w++) acc[w] = T(0);
    u32 t1 = __ldg(toff + v + 1);
    for (u32 t = __ldg(toff + v); t < t1; t++) {
        u32 e = __ldg(tcor + t);
        u32 f, k;
        if (N > 0) {
            f = e / N;
            k = e - f * N;
        } else if (mixed) {
            f = __ldg(cface + e);
            k = e - __ldg(colptr + f);
        } else {
            f = e / n;
            k = e - f * n;
        }
        T a = (flags & 4u) ? T(1) : __ldg(q + k);
        if (flags & 1u) a *= __ldg(ev + e);
        if (flags & 2u) a *= __ldg(fw + f);
#pragma unroll
        for (int w = 0; w < W; w++) acc[w] += a * __ldg(x + (u64)f * W + w);
    }
#pragma unroll
    for (int w = 0; w < W; w++) y[v * W + w] = acc[w];
}

#define SPMV_INST(S, T, W, N)                                                                                  \
    extern "C" __global__ void mm_mtv_##S##_w##W##_n##N(const u32* rowind, const u32* colptr, u32 mixed, u32 n, \
                                                         u64 nf, const T* q, const T* ev, const T* fw, u32 flags,  \
                                                         const T* x, T* y) {                                      \
        mtv_body<T, W, N>(rowind, colptr, mixed, n, nf, q, ev, fw, flags, x, y);                                 \
    }                                                                                                            \
    extern "C" __global__ void mm_mv_atomic_##S##_w##W##_n##N(const u32* rowind, const u32* colptr, u32 mixed,  \
                                                               u32 n, u64 nf, const T* q, const T* ev,            \
                                                               const T* fw, u32 flags, const T* x, T* y) {        \
        mv_atomic_body<T, W, N>(rowind, colptr, mixed, n, nf, q, ev, fw, flags, x, y);                           \
    }                                                                                                            \
    extern "C" __global__ void mm_mv_gather_##S##_w##W##_n##N(const u32* toff, const u32* tcor, const u32* colptr, \
                                                               const u32* cface, u32 mixed, u32 n, u64 nv,        \
                                                               const T* q, const T* ev, const T* fw, u32 flags,   \
                                                               const T* x, T* y) {                                \
        mv_gather_body<T, W, N>(toff, tcor, colptr, cface, mixed, n, nv, q, ev, fw, flags, x, y);                \
    }
#define SPMV_ALL(S, T)    \
    SPMV_INST(S, T, 1, 0) \
    SPMV_INST(S, T, 1, 3) \
    SPMV_INST(S, T, 1, 4) \
    SPMV_INST(S, T, 3, 0) \
    SPMV_INST(S, T, 3, 3) \
    SPMV_INST(S, T, 3, 4)
SPMV_ALL(f32, float)
SPMV_ALL(f64, double)

// ============================================================== mapped SpGEMM C = M Q M^T (Algorithm 2)
// stage 1: an upper bound of the entries of each row (the sizes of the row's faces)
extern "C" __global__ void mm_spgemm_bound(const u32* toff, const u32* tcor, const u32* colptr, const u32* cface,
                                           u32 mixed, u32 n, u64 nv, u32* bound) {
    u64 v = TID;
    if (v >= nv) return;
    Cols cs{colptr, cface, mixed, n};
    u32 b = 0;
    for (u32 t = toff[v]; t < toff[v + 1]; t++) b += cs.len(cs.face(tcor[t]));
    bound[v] = b;
}

// the map: kind 0 ones, 1 a table for faces of qn vertices, 2 circulant terms (shift, coef)
template <typename T>
__device__ __forceinline__ T pair_q(u32 kind, u32 nn, u32 a, u32 b, const T* qtab, u32 qn, const i32* cshift,
                                    const T* ccoef, u32 nterms) {
    if (kind == 0) return T(1);
    if (kind == 1) return nn == qn ? qtab[a * qn + b] : T(0);
    u32 d = (b + nn - a) % nn;
    T s = T(0);
    for (u32 t = 0; t < nterms; t++) {
        i32 r = cshift[t] % (i32)nn;
        if (r < 0) r += (i32)nn;
        if ((u32)r == d) s += ccoef[t];
    }
    return s;
}

// stage 2: one thread per row: the contributions in the serial order, a stable insertion sort by
// column, the combination (sum or first), the diagonal from the row sum; `ucount` the result size
template <typename T>
__device__ __forceinline__ void spgemm_fill_body(const u32* toff, const u32* tcor, const u32* rowind,
                                                 const u32* colptr, const u32* cface, u32 mixed, u32 n, u64 nv,
                                                 u32 kind, const T* qtab, u32 qn, const i32* cshift,
                                                 const T* ccoef, u32 nterms, const u32* pv_idx, const T* pv_vals,
                                                 u32 pv_m, u32 pv_n, u32 has_pv, u32 neg_row_sum, u32 combine_or,
                                                 const u32* boff, u32* cols, T* vals, u32* ucount) {
    u64 i = TID;
    if (i >= nv) return;
    Cols cs{colptr, cface, mixed, n};
    u32* c = cols + boff[i];
    T* x = vals + boff[i];
    u32 m = 0;
    for (u32 t = toff[i]; t < toff[i + 1]; t++) {
        u32 e = tcor[t];
        u32 f = cs.face(e);
        u32 s = cs.start(f);
        u32 nn = cs.len(f);
        u32 a = e - s;
        for (u32 b = 0; b < nn; b++) {
            u32 j = rowind[s + b];
            if (neg_row_sum && (u64)j == i) continue;
            T q = pair_q<T>(kind, nn, a, b, qtab, qn, cshift, ccoef, nterms);
            if (q == T(0)) continue;
            T val = q;
            if (has_pv) {
                u32 ix = pv_idx[a * pv_n + b];
                if (ix != 255u) val = q * pv_vals[(u64)f * pv_m + ix];
            }
            c[m] = j;
            x[m] = val;
            m++;
        }
    }
    for (u32 p = 1; p < m; p++) {
        u32 kc = c[p];
        T kv = x[p];
        u32 r = p;
        while (r > 0 && c[r - 1] > kc) {
            c[r] = c[r - 1];
            x[r] = x[r - 1];
            r--;
        }
        c[r] = kc;
        x[r] = kv;
    }
    u32 u = 0;
    for (u32 p = 0; p < m; p++) {
        if (u > 0 && c[u - 1] == c[p]) {
            if (!combine_or) x[u - 1] += x[p];
        } else {
            c[u] = c[p];
            x[u] = x[p];
            u++;
        }
    }
    if (neg_row_sum && toff[i + 1] > toff[i]) {
        T s = T(0);
        for (u32 p = 0; p < u; p++) s += x[p];
        u32 pos = 0;
        while (pos < u && c[pos] < (u32)i) pos++;
        for (u32 p = u; p > pos; p--) {
            c[p] = c[p - 1];
            x[p] = x[p - 1];
        }
        c[pos] = (u32)i;
        x[pos] = -s;
        u++;
    }
    ucount[i] = u;
}

// stage 3: rows into their final places
template <typename T>
__device__ __forceinline__ void spgemm_compact_body(const u32* boff, const u32* rowptr, const u32* cols,
                                                    const T* vals, u64 nv, u32* ocols, T* ovals) {
    u64 i = TID;
    if (i >= nv) return;
    u32 b = boff[i], o = rowptr[i], l = rowptr[i + 1] - o;
    for (u32 p = 0; p < l; p++) {
        ocols[o + p] = cols[b + p];
        ovals[o + p] = vals[b + p];
    }
}

#define SPGEMM_INST(S, T)                                                                                       \
    extern "C" __global__ void mm_spgemm_fill_##S(                                                              \
        const u32* toff, const u32* tcor, const u32* rowind, const u32* colptr, const u32* cface, u32 mixed,      \
        u32 n, u64 nv, u32 kind, const T* qtab, u32 qn, const i32* cshift, const T* ccoef, u32 nterms,           \
        const u32* pv_idx, const T* pv_vals, u32 pv_m, u32 pv_n, u32 has_pv, u32 neg_row_sum, u32 combine_or,    \
        const u32* boff, u32* cols, T* vals, u32* ucount) {                                                     \
        spgemm_fill_body<T>(toff, tcor, rowind, colptr, cface, mixed, n, nv, kind, qtab, qn, cshift, ccoef,     \
                            nterms, pv_idx, pv_vals, pv_m, pv_n, has_pv, neg_row_sum, combine_or, boff, cols,    \
                            vals, ucount);                                                                      \
    }                                                                                                           \
    extern "C" __global__ void mm_spgemm_compact_##S(const u32* boff, const u32* rowptr, const u32* cols,       \
                                                     const T* vals, u64 nv, u32* ocols, T* ovals) {             \
        spgemm_compact_body<T>(boff, rowptr, cols, vals, nv, ocols, ovals);                                     \
    }
SPGEMM_INST(f32, float)
SPGEMM_INST(f64, double)

// ============================================================== vertex normals (seed Eqs. 2-3, §9)
// face normal N_f = P1P2 x P1P3 (triangles) or the doubled vector area (Newell, from vertex 0)
template <typename T>
__device__ __forceinline__ void face_normal(const T* p, const u32* rowind, u32 s, u32 len, T nrm[3]) {
    u32 v0 = rowind[s];
    T o0 = p[3 * (u64)v0], o1 = p[3 * (u64)v0 + 1], o2 = p[3 * (u64)v0 + 2];
    nrm[0] = T(0);
    nrm[1] = T(0);
    nrm[2] = T(0);
    if (len == 3) {
        u32 v1 = rowind[s + 1], v2 = rowind[s + 2];
        T a0 = p[3 * (u64)v1] - o0, a1 = p[3 * (u64)v1 + 1] - o1, a2 = p[3 * (u64)v1 + 2] - o2;
        T b0 = p[3 * (u64)v2] - o0, b1 = p[3 * (u64)v2 + 1] - o1, b2 = p[3 * (u64)v2 + 2] - o2;
        nrm[0] = a1 * b2 - a2 * b1;
        nrm[1] = a2 * b0 - a0 * b2;
        nrm[2] = a0 * b1 - a1 * b0;
        return;
    }
    for (u32 k = 1; k + 1 < len; k++) {
        u32 v1 = rowind[s + k], v2 = rowind[s + k + 1];
        T a0 = p[3 * (u64)v1] - o0, a1 = p[3 * (u64)v1 + 1] - o1, a2 = p[3 * (u64)v1 + 2] - o2;
        T b0 = p[3 * (u64)v2] - o0, b1 = p[3 * (u64)v2 + 1] - o1, b2 = p[3 * (u64)v2 + 2] - o2;
        nrm[0] += a1 * b2 - a2 * b1;
        nrm[1] += a2 * b0 - a0 * b2;
        nrm[2] += a0 * b1 - a1 * b0;
    }
}

// the contribution of corner e (face f starting at s, len vertices) with the weighting
// `weights` (0 area, 1 angle, 2 Max) given the face normal nrm
template <typename T>
__device__ __forceinline__ void corner_contribution(const T* p, const u32* rowind, u32 s, u32 len, u32 e,
                                                    u32 weights, const T nrm[3], T out[3]) {
    if (weights == 0) {
        out[0] = nrm[0];
        out[1] = nrm[1];
        out[2] = nrm[2];
        return;
    }
    u32 en = e + 1 == s + len ? s : e + 1;
    u32 ep = e == s ? s + len - 1 : e - 1;
    u32 v = rowind[e], vn = rowind[en], vp = rowind[ep];
    T c0 = p[3 * (u64)v], c1 = p[3 * (u64)v + 1], c2 = p[3 * (u64)v + 2];
    T a0 = p[3 * (u64)vn] - c0, a1 = p[3 * (u64)vn + 1] - c1, a2 = p[3 * (u64)vn + 2] - c2;
    T b0 = p[3 * (u64)vp] - c0, b1 = p[3 * (u64)vp + 1] - c1, b2 = p[3 * (u64)vp + 2] - c2;
    T l1 = a0 * a0 + a1 * a1 + a2 * a2;
    T l2 = b0 * b0 + b1 * b1 + b2 * b2;
    T x0 = a1 * b2 - a2 * b1, x1 = a2 * b0 - a0 * b2, x2 = a0 * b1 - a1 * b0;
    if (weights == 1) {
        T th = matan2(msqrt(x0 * x0 + x1 * x1 + x2 * x2), a0 * b0 + a1 * b1 + a2 * b2);
        T l = msqrt(nrm[0] * nrm[0] + nrm[1] * nrm[1] + nrm[2] * nrm[2]);
        T u0 = T(0), u1 = T(0), u2 = T(0);
        if (l > T(0) && mfinite(l)) {
            u0 = nrm[0] / l;
            u1 = nrm[1] / l;
            u2 = nrm[2] / l;
        }
        out[0] = th * u0;
        out[1] = th * u1;
        out[2] = th * u2;
        return;
    }
    T w = (l1 == T(0) || l2 == T(0)) ? T(0) : T(1) / (l1 * l2);
    if (len == 3) {
        out[0] = w * nrm[0];
        out[1] = w * nrm[1];
        out[2] = w * nrm[2];
    } else {
        out[0] = w * x0;
        out[1] = w * x1;
        out[2] = w * x2;
    }
}

// scatter: one thread per face, atomics into the (zeroed) sums
template <typename T>
__device__ __forceinline__ void normals_scatter_body(const u32* rowind, const u32* colptr, u32 mixed, u32 n,
                                                     u64 nf, const T* p, u32 weights, T* acc) {
    u64 f = TID;
    if (f >= nf) return;
    u32 s = mixed ? colptr[f] : (u32)(f * n);
    u32 len = mixed ? colptr[f + 1] - s : n;
    T nrm[3];
    face_normal<T>(p, rowind, s, len, nrm);
    for (u32 e = s; e < s + len; e++) {
        T c[3];
        corner_contribution<T>(p, rowind, s, len, e, weights, nrm, c);
        u64 v = rowind[e];
        atomicAdd(acc + 3 * v, c[0]);
        atomicAdd(acc + 3 * v + 1, c[1]);
        atomicAdd(acc + 3 * v + 2, c[2]);
    }
}

template <typename T>
__device__ __forceinline__ void normalize3(T* o, T s0, T s1, T s2) {
    T l = msqrt(s0 * s0 + s1 * s1 + s2 * s2);
    if (l > T(0) && mfinite(l)) {
        o[0] = s0 / l;
        o[1] = s1 / l;
        o[2] = s2 / l;
    } else {
        o[0] = T(0);
        o[1] = T(0);
        o[2] = T(0);
    }
}

template <typename T>
__device__ __forceinline__ void normalize_body(u64 nv, T* acc) {
    u64 v = TID;
    if (v >= nv) return;
    normalize3<T>(acc + 3 * v, acc[3 * v], acc[3 * v + 1], acc[3 * v + 2]);
}

// gather: one thread per vertex over the transpose (the CPU's order of summation), normalized
template <typename T>
__device__ __forceinline__ void normals_gather_body(const u32* toff, const u32* tcor, const u32* rowind,
                                                    const u32* colptr, const u32* cface, u32 mixed, u32 n, u64 nv,
                                                    const T* p, u32 weights, T* out) {
    u64 v = TID;
    if (v >= nv) return;
    Cols cs{colptr, cface, mixed, n};
    T s0 = T(0), s1 = T(0), s2 = T(0);
    for (u32 t = toff[v]; t < toff[v + 1]; t++) {
        u32 e = tcor[t];
        u32 f = cs.face(e);
        u32 s = cs.start(f), len = cs.len(f);
        T nrm[3], c[3];
        face_normal<T>(p, rowind, s, len, nrm);
        corner_contribution<T>(p, rowind, s, len, e, weights, nrm, c);
        s0 += c[0];
        s1 += c[1];
        s2 += c[2];
    }
    normalize3<T>(out + 3 * v, s0, s1, s2);
}

#define NORMALS_INST(S, T)                                                                                      \
    extern "C" __global__ void mm_normals_scatter_##S(const u32* rowind, const u32* colptr, u32 mixed, u32 n,  \
                                                      u64 nf, const T* p, u32 weights, T* acc) {               \
        normals_scatter_body<T>(rowind, colptr, mixed, n, nf, p, weights, acc);                                \
    }                                                                                                           \
    extern "C" __global__ void mm_normalize_##S(u64 nv, T* acc) { normalize_body<T>(nv, acc); }                 \
    extern "C" __global__ void mm_normals_gather_##S(const u32* toff, const u32* tcor, const u32* rowind,      \
                                                     const u32* colptr, const u32* cface, u32 mixed, u32 n,     \
                                                     u64 nv, const T* p, u32 weights, T* out) {                 \
        normals_gather_body<T>(toff, tcor, rowind, colptr, cface, mixed, n, nv, p, weights, out);              \
    }
NORMALS_INST(f32, float)
NORMALS_INST(f64, double)

// ============================================================== half-edges (twins, edge numbers)
// err bits: 1 an edge traversed twice in one direction, 2 an edge of more than two faces,
// 4 a vertex of more than one fan
extern "C" __global__ void mm_twins(const u32* toff, const u32* tcor, const u32* rowind, const u32* colptr,
                                    const u32* cface, u32 mixed, u32 n, u64 nnz, u32* twin, u32* owner, u32* err) {
    u64 ce = TID;
    if (ce >= nnz) return;
    Cols cs{colptr, cface, mixed, n};
    u32 c = (u32)ce;
    u32 a = rowind[c], b = rowind[cs.next(c)];
    for (u32 t = toff[a]; t < toff[a + 1]; t++) {
        u32 d = tcor[t];
        if (d != c && rowind[cs.next(d)] == b) atomicOr(err, 1u);
    }
    u32 tw = NONE;
    for (u32 t = toff[b]; t < toff[b + 1]; t++) {
        u32 d = tcor[t];
        if (rowind[cs.next(d)] == a) {
            if (tw != NONE) atomicOr(err, 2u);
            tw = d;
        }
    }
    twin[c] = tw;
    owner[c] = (tw == NONE || a < b) ? 1u : 0u;
}

// eoff: exclusive scan of owner (nnz + 1 entries)
extern "C" __global__ void mm_edge_ids(const u32* twin, const u32* owner, const u32* eoff, u64 nnz,
                                       u32* edge_of_corner, u32* edge_corner) {
    u64 c = TID;
    if (c >= nnz) return;
    if (owner[c]) {
        edge_of_corner[c] = eoff[c];
        edge_corner[eoff[c]] = (u32)c;
    } else {
        edge_of_corner[c] = eoff[twin[c]];
    }
}

// one fan per vertex (as edges::check_vertex_fans)
extern "C" __global__ void mm_fans(const u32* toff, const u32* tcor, const u32* colptr, const u32* cface,
                                   u32 mixed, u32 n, u64 nv, const u32* twin, u32* err) {
    u64 v = TID;
    if (v >= nv) return;
    Cols cs{colptr, cface, mixed, n};
    u32 len = toff[v + 1] - toff[v];
    if (len == 0) return;
    u32 c0 = tcor[toff[v]];
    u32 count = 1, c = c0;
    bool closed = false;
    for (;;) {
        u32 tw = twin[cs.prev(c)];
        if (tw == NONE) break;
        c = tw;
        if (c == c0) {
            closed = true;
            break;
        }
        count++;
        if (count > len) {
            atomicOr(err, 4u);
            return;
        }
    }
    if (!closed) {
        c = c0;
        for (;;) {
            u32 tw = twin[c];
            if (tw == NONE) break;
            c = cs.next(tw);
            count++;
            if (count > len) {
                atomicOr(err, 4u);
                return;
            }
        }
    }
    if (count != len) atomicOr(err, 4u);
}

// ============================================================== plane slicing (seed §9, Table 4)
template <typename T>
__device__ __forceinline__ void slice_dist_body(const T* p, u64 nv, T p0, T p1, T p2, T n0, T n1, T n2, T* d) {
    u64 v = TID;
    if (v >= nv) return;
    d[v] = (p[3 * v] - p0) * n0 + (p[3 * v + 1] - p1) * n1 + (p[3 * v + 2] - p2) * n2;
}
template <typename T>
__device__ __forceinline__ void slice_cut_flags_body(const u32* edge_corner, const u32* rowind, u64 ne, const T* d,
                                                     u32* cut) {
    u64 e = TID;
    if (e >= ne) return;
    u32 c = edge_corner[e];
    u32 nx = (c % 3u == 2u) ? c - 2u : c + 1u;
    bool sa = d[rowind[c]] >= T(0), sb = d[rowind[nx]] >= T(0);
    cut[e] = sa != sb ? 1u : 0u;
}
// cut points at P_a + t (P_b - P_a), t = d_a / (d_a - d_b), into out[nv + rank]
template <typename T>
__device__ __forceinline__ void slice_cut_points_body(const u32* edge_corner, const u32* rowind, u64 ne,
                                                      const T* d, const u32* coff, const T* p, u64 nv, T* out) {
    u64 e = TID;
    if (e >= ne) return;
    if (coff[e + 1] == coff[e]) return;
    u32 c = edge_corner[e];
    u32 nx = (c % 3u == 2u) ? c - 2u : c + 1u;
    u32 a = rowind[c], b = rowind[nx];
    T da = d[a], db = d[b];
    T t = da / (da - db);
    u64 o = 3 * (nv + coff[e]);
    for (int k = 0; k < 3; k++) out[o + k] = p[3 * (u64)a + k] + t * (p[3 * (u64)b + k] - p[3 * (u64)a + k]);
}
template <typename T>
__device__ __forceinline__ void slice_face_counts_body(const u32* rowind, u64 nf, const T* d, u32* nfc, u32* nec) {
    u64 f = TID;
    if (f >= nf) return;
    bool s0 = d[rowind[3 * f]] >= T(0), s1 = d[rowind[3 * f + 1]] >= T(0), s2 = d[rowind[3 * f + 2]] >= T(0);
    bool cut = !(s0 == s1 && s1 == s2);
    nfc[f] = cut ? 2u : 1u;
    nec[f] = cut ? 7u : 3u;
}
// the output faces: kept triangles, or the triangle (L, x, y) and the quad (x, A, B, y)
template <typename T>
__device__ __forceinline__ void slice_fill_body(const u32* rowind, u64 nf, const T* d, const u32* eoc,
                                                const u32* coff, u64 nv, const u32* foff, const u32* entoff,
                                                u32* orow, u32* ocol, i32* side, u32* seg) {
    u64 f = TID;
    if (f >= nf) return;
    u32 c = 3 * (u32)f;
    u32 v[3] = {rowind[c], rowind[c + 1], rowind[c + 2]};
    bool s[3] = {d[v[0]] >= T(0), d[v[1]] >= T(0), d[v[2]] >= T(0)};
    u32 fo = foff[f], eo = entoff[f];
    if (s[0] == s[1] && s[1] == s[2]) {
        orow[eo] = v[0];
        orow[eo + 1] = v[1];
        orow[eo + 2] = v[2];
        ocol[fo] = eo;
        side[fo] = s[0] ? 1 : -1;
        if (f + 1 == nf) ocol[fo + 1] = eo + 3;
        return;
    }
    u32 k = (s[1] == s[2]) ? 0u : ((s[0] == s[2]) ? 1u : 2u);
    u32 l = v[k], a = v[(k + 1) % 3], b = v[(k + 2) % 3];
    u32 x = (u32)nv + coff[eoc[c + k]];
    u32 y = (u32)nv + coff[eoc[c + (k + 2) % 3]];
    orow[eo] = l;
    orow[eo + 1] = x;
    orow[eo + 2] = y;
    orow[eo + 3] = x;
    orow[eo + 4] = a;
    orow[eo + 5] = b;
    orow[eo + 6] = y;
    ocol[fo] = eo;
    ocol[fo + 1] = eo + 3;
    i32 sl = s[k] ? 1 : -1;
    side[fo] = sl;
    side[fo + 1] = -sl;
    if (f + 1 == nf) ocol[fo + 2] = eo + 7;
    u32 si = fo - (u32)f;
    if (s[k]) {
        seg[2 * si] = y;
        seg[2 * si + 1] = x;
    } else {
        seg[2 * si] = x;
        seg[2 * si + 1] = y;
    }
}
#define SLICE_INST(S, T)                                                                                        \
    extern "C" __global__ void mm_slice_dist_##S(const T* p, u64 nv, T p0, T p1, T p2, T n0, T n1, T n2, T* d) { \
        slice_dist_body<T>(p, nv, p0, p1, p2, n0, n1, n2, d);                                                   \
    }                                                                                                           \
    extern "C" __global__ void mm_slice_cut_flags_##S(const u32* edge_corner, const u32* rowind, u64 ne,       \
                                                      const T* d, u32* cut) {                                   \
        slice_cut_flags_body<T>(edge_corner, rowind, ne, d, cut);                                               \
    }                                                                                                           \
    extern "C" __global__ void mm_slice_cut_points_##S(const u32* edge_corner, const u32* rowind, u64 ne,      \
                                                       const T* d, const u32* coff, const T* p, u64 nv, T* out) { \
        slice_cut_points_body<T>(edge_corner, rowind, ne, d, coff, p, nv, out);                                 \
    }                                                                                                           \
    extern "C" __global__ void mm_slice_face_counts_##S(const u32* rowind, u64 nf, const T* d, u32* nfc,       \
                                                        u32* nec) {                                             \
        slice_face_counts_body<T>(rowind, nf, d, nfc, nec);                                                     \
    }                                                                                                           \
    extern "C" __global__ void mm_slice_fill_##S(const u32* rowind, u64 nf, const T* d, const u32* eoc,         \
                                                 const u32* coff, u64 nv, const u32* foff, const u32* entoff,   \
                                                 u32* orow, u32* ocol, i32* side, u32* seg) {                   \
        slice_fill_body<T>(rowind, nf, d, eoc, coff, nv, foff, entoff, orow, ocol, side, seg);                  \
    }
SLICE_INST(f32, float)
SLICE_INST(f64, double)

// ============================================================== surface Catmull-Clark (seed §9, Table 5)
// out: [vertex points (nv) | edge points (ne) | face points (nf)], 3 values each
template <typename T>
__device__ __forceinline__ void cc_face_points_body(const u32* rowind, const u32* colptr, u32 mixed, u32 n, u64 nf,
                                                    const T* p, u64 fbase, T* out) {
    u64 f = TID;
    if (f >= nf) return;
    u32 s = mixed ? colptr[f] : (u32)(f * n);
    u32 len = mixed ? colptr[f + 1] - s : n;
    T w = T(1) / T(len);
    T a0 = T(0), a1 = T(0), a2 = T(0);
    for (u32 e = s; e < s + len; e++) {
        u64 v = rowind[e];
        a0 += w * p[3 * v];
        a1 += w * p[3 * v + 1];
        a2 += w * p[3 * v + 2];
    }
    u64 o = 3 * (fbase + f);
    out[o] = a0;
    out[o + 1] = a1;
    out[o + 2] = a2;
}
template <typename T>
__device__ __forceinline__ void cc_edge_points_body(const u32* edge_corner, const u32* twin, const u32* rowind,
                                                    const u32* colptr, const u32* cface, u32 mixed, u32 n, u64 ne,
                                                    const T* p, u64 ebase, u64 fbase, T* out) {
    u64 e = TID;
    if (e >= ne) return;
    Cols cs{colptr, cface, mixed, n};
    u32 c = edge_corner[e];
    u64 a = rowind[c], b = rowind[cs.next(c)];
    u32 t = twin[c];
    u64 o = 3 * (ebase + e);
    for (int k = 0; k < 3; k++) {
        T s = p[3 * a + k] + p[3 * b + k];
        if (t == NONE) {
            out[o + k] = s * T(0.5);
        } else {
            T f1 = out[3 * (fbase + cs.face(c)) + k], f2 = out[3 * (fbase + cs.face(t)) + k];
            out[o + k] = (s + (f1 + f2)) * T(0.25);
        }
    }
}
template <typename T>
__device__ __forceinline__ void cc_vertex_points_body(const u32* toff, const u32* tcor, const u32* twin,
                                                      const u32* rowind, const u32* colptr, const u32* cface,
                                                      u32 mixed, u32 n, u64 nv, const T* p, u64 fbase, T* out) {
    u64 v = TID;
    if (v >= nv) return;
    Cols cs{colptr, cface, mixed, n};
    T S[3] = {p[3 * v], p[3 * v + 1], p[3 * v + 2]};
    u32 t0 = toff[v], t1 = toff[v + 1];
    if (t0 == t1) {
        for (int k = 0; k < 3; k++) out[3 * v + k] = S[k];
        return;
    }
    T bs[3] = {T(0), T(0), T(0)}, sf[3] = {T(0), T(0), T(0)}, sn[3] = {T(0), T(0), T(0)};
    u32 nb = 0;
    for (u32 t = t0; t < t1; t++) {
        u32 c = tcor[t];
        u64 nx = rowind[cs.next(c)];
        if (twin[c] == NONE) {
            for (int k = 0; k < 3; k++) bs[k] += p[3 * nx + k];
            nb++;
        }
        u32 pc = cs.prev(c);
        if (twin[pc] == NONE) {
            u64 pv = rowind[pc];
            for (int k = 0; k < 3; k++) bs[k] += p[3 * pv + k];
            nb++;
        }
        u64 fo = 3 * (fbase + cs.face(c));
        for (int k = 0; k < 3; k++) {
            sf[k] += out[fo + k];
            sn[k] += p[3 * nx + k];
        }
    }
    if (nb > 0) {
        for (int k = 0; k < 3; k++) out[3 * v + k] = T(0.75) * S[k] + T(0.125) * bs[k];
    } else {
        T nn = T(t1 - t0);
        T inv = T(1) / nn;
        T a = (nn - T(2)) * inv, b = inv * inv;
        for (int k = 0; k < 3; k++) out[3 * v + k] = S[k] * a + (sf[k] + sn[k]) * b;
    }
}
extern "C" __global__ void mm_cc_quads(const u32* rowind, const u32* colptr, const u32* cface, u32 mixed, u32 n,
                                       u64 nnz, const u32* eoc, u32 nv, u32 ne, u32* quads) {
    u64 ce = TID;
    if (ce >= nnz) return;
    Cols cs{colptr, cface, mixed, n};
    u32 c = (u32)ce;
    quads[4 * ce] = rowind[c];
    quads[4 * ce + 1] = nv + eoc[c];
    quads[4 * ce + 2] = nv + ne + cs.face(c);
    quads[4 * ce + 3] = nv + eoc[cs.prev(c)];
}
#define CC_INST(S, T)                                                                                           \
    extern "C" __global__ void mm_cc_face_points_##S(const u32* rowind, const u32* colptr, u32 mixed, u32 n,   \
                                                     u64 nf, const T* p, u64 fbase, T* out) {                  \
        cc_face_points_body<T>(rowind, colptr, mixed, n, nf, p, fbase, out);                                   \
    }                                                                                                           \
    extern "C" __global__ void mm_cc_edge_points_##S(const u32* edge_corner, const u32* twin, const u32* rowind, \
                                                     const u32* colptr, const u32* cface, u32 mixed, u32 n,     \
                                                     u64 ne, const T* p, u64 ebase, u64 fbase, T* out) {        \
        cc_edge_points_body<T>(edge_corner, twin, rowind, colptr, cface, mixed, n, ne, p, ebase, fbase, out);   \
    }                                                                                                           \
    extern "C" __global__ void mm_cc_vertex_points_##S(const u32* toff, const u32* tcor, const u32* twin,       \
                                                       const u32* rowind, const u32* colptr, const u32* cface,  \
                                                       u32 mixed, u32 n, u64 nv, const T* p, u64 fbase, T* out) { \
        cc_vertex_points_body<T>(toff, tcor, twin, rowind, colptr, cface, mixed, n, nv, p, fbase, out);         \
    }
CC_INST(f32, float)
CC_INST(f64, double)

// ============================================================== baselines for the benchmark
// TCSR SpMV (dissertation §3.4: the sign in the column, ~c for -1): y[r] = sum sign x[col]
template <typename T>
__device__ __forceinline__ void tcsr_spmv_body(const u32* __restrict__ off, const i32* __restrict__ cols, u64 nrows,
                                               const T* __restrict__ x, T* __restrict__ y) {
    u64 r = TID;
    if (r >= nrows) return;
    T acc = T(0);
    u32 k1 = __ldg(off + r + 1);
    for (u32 k = __ldg(off + r); k < k1; k++) {
        i32 c = __ldg(cols + k);
        if (c < 0)
            acc -= __ldg(x + (u32)(~c));
        else
            acc += __ldg(x + (u32)c);
    }
    y[r] = acc;
}
// the oriented adjacency applied without forming it: y[v] += x[next vertex] per corner
template <typename T>
__device__ __forceinline__ void adjacency_scatter_body(const u32* __restrict__ rowind, u64 nf,
                                                       const T* __restrict__ x, T* y) {
    u64 f = TID;
    if (f >= nf) return;
    u32 v0 = __ldg(rowind + 3 * f), v1 = __ldg(rowind + 3 * f + 1), v2 = __ldg(rowind + 3 * f + 2);
    atomicAdd(y + v0, __ldg(x + v1));
    atomicAdd(y + v1, __ldg(x + v2));
    atomicAdd(y + v2, __ldg(x + v0));
}
extern "C" __global__ void mm_tcsr_spmv_f32(const u32* off, const i32* cols, u64 nrows, const float* x, float* y) {
    tcsr_spmv_body<float>(off, cols, nrows, x, y);
}
extern "C" __global__ void mm_adjacency_scatter_f32(const u32* rowind, u64 nf, const float* x, float* y) {
    adjacency_scatter_body<float>(rowind, nf, x, y);
}
// a copy into the front of a larger buffer (positions before the cut points)
extern "C" __global__ void mm_copy_f32(const float* src, u64 n, float* dst) {
    u64 i = TID;
    if (i < n) dst[i] = src[i];
}
extern "C" __global__ void mm_copy_f64(const double* src, u64 n, double* dst) {
    u64 i = TID;
    if (i < n) dst[i] = src[i];
}

// ============================================================== per-entry values of the Laplacians (seed §6)
// half the cotangent of every triangle corner (spgemm::half_cotangents); err 1 for zero area
template <typename T>
__device__ __forceinline__ void half_cot_body(const u32* rowind, u64 nf, const T* p, T* out, u32* err) {
    u64 f = TID;
    if (f >= nf) return;
    for (int k = 0; k < 3; k++) {
        u64 v = rowind[3 * f + k], vn = rowind[3 * f + (k + 1) % 3], vp = rowind[3 * f + (k + 2) % 3];
        T a0 = p[3 * vn] - p[3 * v], a1 = p[3 * vn + 1] - p[3 * v + 1], a2 = p[3 * vn + 2] - p[3 * v + 2];
        T b0 = p[3 * vp] - p[3 * v], b1 = p[3 * vp + 1] - p[3 * v + 1], b2 = p[3 * vp + 2] - p[3 * v + 2];
        T x0 = a1 * b2 - a2 * b1, x1 = a2 * b0 - a0 * b2, x2 = a0 * b1 - a1 * b0;
        T s = msqrt(x0 * x0 + x1 * x1 + x2 * x2);
        if (s == T(0) || !mfinite(s)) {
            atomicOr(err, 1u);
            out[3 * f + k] = T(0);
            continue;
        }
        out[3 * f + k] = T(0.5) * (a0 * b0 + a1 * b1 + a2 * b2) / s;
    }
}
// the 6 values l_kl cot θ_kl / 6 per tetrahedron (spgemm::tet_edge_values); err 1 for zero volume
__constant__ int TET_E[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
template <typename T>
__device__ __forceinline__ void tet_values_body(const u32* rowind, u64 nc, const T* p, T* out, u32* err) {
    u64 c = TID;
    if (c >= nc) return;
    T q[4][3];
    for (int i = 0; i < 4; i++) {
        u64 v = rowind[4 * c + i];
        q[i][0] = p[3 * v];
        q[i][1] = p[3 * v + 1];
        q[i][2] = p[3 * v + 2];
    }
    for (int t = 0; t < 6; t++) {
        int i = TET_E[t][0], j = TET_E[t][1], k = TET_E[5 - t][0], l = TET_E[5 - t][1];
        T e[3], a[3], b[3], u[3], w[3];
        for (int x = 0; x < 3; x++) {
            e[x] = q[l][x] - q[k][x];
            a[x] = q[i][x] - q[k][x];
            b[x] = q[j][x] - q[k][x];
        }
        T ee = e[0] * e[0] + e[1] * e[1] + e[2] * e[2];
        T len = msqrt(ee);
        T ae = (a[0] * e[0] + a[1] * e[1] + a[2] * e[2]) / ee;
        T be = (b[0] * e[0] + b[1] * e[1] + b[2] * e[2]) / ee;
        for (int x = 0; x < 3; x++) {
            u[x] = a[x] - e[x] * ae;
            w[x] = b[x] - e[x] * be;
        }
        T x0 = u[1] * w[2] - u[2] * w[1], x1 = u[2] * w[0] - u[0] * w[2], x2 = u[0] * w[1] - u[1] * w[0];
        T s = msqrt(x0 * x0 + x1 * x1 + x2 * x2);
        if (s == T(0) || !mfinite(s) || len == T(0)) {
            atomicOr(err, 1u);
            out[6 * c + t] = T(0);
            continue;
        }
        out[6 * c + t] = len * ((u[0] * w[0] + u[1] * w[1] + u[2] * w[2]) / s) / T(6);
    }
}
#define VALUES_INST(S, T)                                                                                       \
    extern "C" __global__ void mm_half_cot_##S(const u32* rowind, u64 nf, const T* p, T* out, u32* err) {      \
        half_cot_body<T>(rowind, nf, p, out, err);                                                              \
    }                                                                                                           \
    extern "C" __global__ void mm_tet_values_##S(const u32* rowind, u64 nc, const T* p, T* out, u32* err) {    \
        tet_values_body<T>(rowind, nc, p, out, err);                                                            \
    }
VALUES_INST(f32, float)
VALUES_INST(f64, double)
