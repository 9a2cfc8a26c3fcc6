// Cut-cell MAC fluid and its Galerkin-consistent geometric multigrid on CUDA
// (dissertation §6.3.2). Every kernel mirrors one CPU reference function of
// tessera-flow (poisson/level.rs, poisson/multigrid.rs, fluid/mac.rs) with the same f32
// arithmetic in the same order; see the Rust side for the definitions.
//
// Grids: cells (i, j, k) at index i + nx * (j + ny * k); nz = 1 and dim = 2 in 2D (the z
// arrays are then dummies and never read). Face arrays of axis a have one more layer
// along a. Level arrays: D (Dirichlet diagonal) and per axis w_a[c] = weight of the face
// between c - e_a and c.

typedef unsigned int u32;

// ---------------------------------------------------------------- reductions

// Sum of v over the block, added to *target by one atomic (all threads must call).
__device__ void block_add(double v, double* target) {
    __shared__ double sh[32];
    __syncthreads();
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        int nw = (blockDim.x + 31) >> 5;
        v = lane < nw ? sh[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) atomicAdd(target, v);
    }
}

// Maximum of non-negative v over the block into *target (float bits as unsigned).
__device__ void block_max(float v, u32* target) {
    __shared__ float sm[32];
    __syncthreads();
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sm[w] = v;
    __syncthreads();
    if (w == 0) {
        int nw = (blockDim.x + 31) >> 5;
        v = lane < nw ? sm[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
        if (lane == 0) atomicMax(target, __float_as_uint(v));
    }
}

// ---------------------------------------------------------------- Eq. 6.3 stencil

// Weighted neighbour sum s and diagonal d of cell c at (i, j, k), order x-, x+, y-, y+, z-, z+.
__device__ __forceinline__ void stencil(int c, int i, int j, int k, int nx, int ny, int nz,
                                        int dim, const float* __restrict__ D,
                                        const float* __restrict__ wx,
                                        const float* __restrict__ wy,
                                        const float* __restrict__ wz,
                                        const float* x, float& s, float& d) {
    s = 0.0f;
    d = D[c];
    if (i > 0) { float w = wx[c]; s += w * x[c - 1]; d += w; }
    if (i + 1 < nx) { float w = wx[c + 1]; s += w * x[c + 1]; d += w; }
    if (j > 0) { float w = wy[c]; s += w * x[c - nx]; d += w; }
    if (j + 1 < ny) { float w = wy[c + nx]; s += w * x[c + nx]; d += w; }
    if (dim == 3) {
        int sz = nx * ny;
        if (k > 0) { float w = wz[c]; s += w * x[c - sz]; d += w; }
        if (k + 1 < nz) { float w = wz[c + sz]; s += w * x[c + sz]; d += w; }
    }
}

__device__ __forceinline__ float diagonal(int c, int i, int j, int k, int nx, int ny, int nz,
                                          int dim, const float* __restrict__ D,
                                          const float* __restrict__ wx,
                                          const float* __restrict__ wy,
                                          const float* __restrict__ wz) {
    float d = D[c];
    if (i > 0) d += wx[c];
    if (i + 1 < nx) d += wx[c + 1];
    if (j > 0) d += wy[c];
    if (j + 1 < ny) d += wy[c + nx];
    if (dim == 3) {
        int sz = nx * ny;
        if (k > 0) d += wz[c];
        if (k + 1 < nz) d += wz[c + sz];
    }
    return d;
}

// ---------------------------------------------------------------- multigrid

// One red-black Gauss-Seidel pass over the cells of `color`; a thread owns the cell pair
// (2t, 2t+1) of a row and updates the one of `color`. With zero_init the current x is
// taken as zero and the pair's other cell is set to zero (no memset before the cycle).
extern "C" __global__ void mg_smooth(int nx, int ny, int nz, int dim, int color,
                                     int zero_init, const float* __restrict__ D,
                                     const float* __restrict__ wx,
                                     const float* __restrict__ wy,
                                     const float* __restrict__ wz,
                                     const float* __restrict__ b, float* x) {
    int hx = (nx + 1) >> 1;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)hx * ny * nz) return;
    int ti = (int)(t % hx);
    int row = (int)(t / hx);
    int j = row % ny, k = row / ny;
    int i = 2 * ti + ((color + j + k) & 1);
    if (zero_init) {
        int io = 2 * ti + ((color + j + k + 1) & 1);
        if (io < nx) x[row * nx + io] = 0.0f;
    }
    if (i >= nx) return;
    int c = row * nx + i;
    float s, d;
    if (zero_init) {
        s = 0.0f;
        d = diagonal(c, i, j, k, nx, ny, nz, dim, D, wx, wy, wz);
    } else {
        stencil(c, i, j, k, nx, ny, nz, dim, D, wx, wy, wz, x, s, d);
    }
    x[c] = d > 0.0f ? (b[c] + s) / d : 0.0f;
}

// Residual of the fine level summed over each coarse cell's children, times `scale`;
// zeroes the coarse solution (its initial guess).
extern "C" __global__ void mg_restrict(int nx, int ny, int nz, int dim,
                                       const float* __restrict__ D,
                                       const float* __restrict__ wx,
                                       const float* __restrict__ wy,
                                       const float* __restrict__ wz,
                                       const float* __restrict__ x,
                                       const float* __restrict__ b, int cx, int cy, int cz,
                                       float* __restrict__ bc, float* __restrict__ xc,
                                       float scale) {
    long long cc = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (cc >= (long long)cx * cy * cz) return;
    int I = (int)(cc % cx), J = (int)((cc / cx) % cy), K = (int)(cc / ((long long)cx * cy));
    float sum = 0.0f;
    int kz = dim == 3 ? 2 : 1;
    for (int dk = 0; dk < kz; ++dk) {
        int k = 2 * K + dk;
        if (k >= nz) continue;
        for (int dj = 0; dj < 2; ++dj) {
            int j = 2 * J + dj;
            if (j >= ny) continue;
            for (int di = 0; di < 2; ++di) {
                int i = 2 * I + di;
                if (i >= nx) continue;
                int c = i + nx * (j + ny * k);
                float s, d;
                stencil(c, i, j, k, nx, ny, nz, dim, D, wx, wy, wz, x, s, d);
                float r = b[c] - (d * x[c] - s);
                sum += r;
            }
        }
    }
    bc[cc] = scale * sum;
    xc[cc] = 0.0f;
}

// x[c] += omega * xc[parent(c)].
extern "C" __global__ void mg_prolong(int nx, int ny, int nz, float* __restrict__ x, int cx,
                                      int cy, const float* __restrict__ xc, float omega) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= (long long)nx * ny * nz) return;
    int i = (int)(c % nx), j = (int)((c / nx) % ny), k = (int)(c / ((long long)nx * ny));
    x[c] += omega * xc[(i >> 1) + cx * ((j >> 1) + cy * (k >> 1))];
}

// Coarsest level: x[cells[i]] = sum_j M[j n + i] b[cells[j]] (M symmetric; b staged in
// shared memory; one thread per row, f64 accumulation).
extern "C" __global__ void mg_coarse_solve(int n, const int* __restrict__ cells,
                                           const float* __restrict__ m,
                                           const float* __restrict__ b, float* x) {
    extern __shared__ float bs[];
    for (int j = threadIdx.x; j < n; j += blockDim.x) bs[j] = b[cells[j]];
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double s = 0.0;
    for (int j = 0; j < n; ++j) s += (double)(m[(long long)j * n + i] * bs[j]);
    x[cells[i]] = (float)s;
}

// ---------------------------------------------------------------- conjugate gradients
// Scalars (double) at acc[slot]: the host zeroes them before a solve.

// r = b - A x; acc[rr_slot] += r.r; acc[bb_slot] += b.b (bb_slot < 0: skip).
extern "C" __global__ void cg_residual(int nx, int ny, int nz, int dim,
                                       const float* __restrict__ D,
                                       const float* __restrict__ wx,
                                       const float* __restrict__ wy,
                                       const float* __restrict__ wz,
                                       const float* __restrict__ x,
                                       const float* __restrict__ b, float* __restrict__ r,
                                       double* acc, int rr_slot, int bb_slot) {
    long long n = (long long)nx * ny * nz;
    double rr = 0.0, bb = 0.0;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (long long)gridDim.x * blockDim.x) {
        int i = (int)(c % nx), j = (int)((c / nx) % ny), k = (int)(c / ((long long)nx * ny));
        float s, d;
        stencil((int)c, i, j, k, nx, ny, nz, dim, D, wx, wy, wz, x, s, d);
        float v = b[c] - (d * x[c] - s);
        r[c] = v;
        rr += (double)v * (double)v;
        bb += (double)b[c] * (double)b[c];
    }
    block_add(rr, acc + rr_slot);
    if (bb_slot >= 0) block_add(bb, acc + bb_slot);
}

// q = A d; acc[slot] += d.q.
extern "C" __global__ void cg_apply_dot(int nx, int ny, int nz, int dim,
                                        const float* __restrict__ D,
                                        const float* __restrict__ wx,
                                        const float* __restrict__ wy,
                                        const float* __restrict__ wz,
                                        const float* __restrict__ dv, float* __restrict__ q,
                                        double* acc, int slot) {
    long long n = (long long)nx * ny * nz;
    double dq = 0.0;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (long long)gridDim.x * blockDim.x) {
        int i = (int)(c % nx), j = (int)((c / nx) % ny), k = (int)(c / ((long long)nx * ny));
        float s, d;
        stencil((int)c, i, j, k, nx, ny, nz, dim, D, wx, wy, wz, dv, s, d);
        float v = d * dv[c] - s;
        q[c] = v;
        dq += (double)dv[c] * (double)v;
    }
    block_add(dq, acc + slot);
}

// alpha = acc[rz] / acc[dq] (0 when not a positive finite quotient);
// x += alpha d; r -= alpha q; acc[rr] += r.r.
extern "C" __global__ void cg_update(long long n, float* __restrict__ x, float* __restrict__ r,
                                     const float* __restrict__ dv,
                                     const float* __restrict__ q, double* acc, int rz_slot,
                                     int dq_slot, int rr_slot) {
    double rzv = acc[rz_slot], dqv = acc[dq_slot];
    double a = rzv / dqv;
    float alpha = (dqv > 0.0 && isfinite(a)) ? (float)a : 0.0f;
    double rr = 0.0;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (long long)gridDim.x * blockDim.x) {
        x[c] += alpha * dv[c];
        float v = r[c] - alpha * q[c];
        r[c] = v;
        rr += (double)v * (double)v;
    }
    block_add(rr, acc + rr_slot);
}

// acc[slot] += a.b.
extern "C" __global__ void cg_dot(long long n, const float* __restrict__ a,
                                  const float* __restrict__ b, double* acc, int slot) {
    double s = 0.0;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (long long)gridDim.x * blockDim.x)
        s += (double)a[c] * (double)b[c];
    block_add(s, acc + slot);
}

// d = z + beta d with beta = acc[rz_new] / acc[rz_old] (first: beta = 0, d = z).
extern "C" __global__ void cg_direction(long long n, float* __restrict__ dv,
                                        const float* __restrict__ z, const double* acc,
                                        int rz_new, int rz_old, int first) {
    float beta = 0.0f;
    if (!first) {
        double b = acc[rz_new] / acc[rz_old];
        beta = isfinite(b) ? (float)b : 0.0f;
    }
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (long long)gridDim.x * blockDim.x)
        dv[c] = first ? z[c] : z[c] + beta * dv[c];
}

// Enclosed regions: sums[label] += v (f64), then v -= sums[label] / count[label].
extern "C" __global__ void region_sum(long long n, const int* __restrict__ label,
                                      const float* __restrict__ v, double* sums) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n) return;
    int l = label[c];
    if (l >= 0) atomicAdd(sums + l, (double)v[c]);
}

extern "C" __global__ void region_subtract(long long n, const int* __restrict__ label,
                                           const double* __restrict__ sums,
                                           const int* __restrict__ count, float* v) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n) return;
    int l = label[c];
    if (l >= 0) v[c] -= (float)(sums[l] / (double)count[l]);
}

// y += a x.
extern "C" __global__ void add_scaled(long long n, float a, const float* __restrict__ x,
                                      float* __restrict__ y) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n) return;
    y[c] += a * x[c];
}

// ---------------------------------------------------------------- advection

struct Lerp {
    int i0[3];
    float t[3];
};

// Base index and weights of a clamped multilinear sample (fluid/mac.rs `locate`).
__device__ __forceinline__ Lerp locate(int n0, int n1, int n2, float o0, float o1, float o2,
                                       float g0, float g1, float g2, int dim) {
    Lerp l;
    int n[3] = {n0, n1, n2};
    float o[3] = {o0, o1, o2};
    float g[3] = {g0, g1, g2};
    for (int a = 0; a < 3; ++a) {
        l.i0[a] = 0;
        l.t[a] = 0.0f;
        if (a >= dim) continue;
        float hi = (float)(n[a] - 1);
        float s = fminf(fmaxf(g[a] - o[a], 0.0f), hi);
        int i = (int)floorf(s);
        if (i + 1 >= n[a]) i = n[a] >= 2 ? n[a] - 2 : 0;
        l.i0[a] = i;
        l.t[a] = n[a] > 1 ? s - (float)i : 0.0f;
    }
    return l;
}

__device__ __forceinline__ float sample(const float* __restrict__ q, int n0, int n1, int n2,
                                        float o0, float o1, float o2, float g0, float g1,
                                        float g2, int dim) {
    Lerp l = locate(n0, n1, n2, o0, o1, o2, g0, g1, g2, dim);
    long long sy = n0, sz = (long long)n0 * n1;
    long long c = l.i0[0] + sy * l.i0[1] + sz * l.i0[2];
    long long dx = n0 > 1 ? 1 : 0;
    long long dy = n1 > 1 ? sy : 0;
    float x0 = q[c] + l.t[0] * (q[c + dx] - q[c]);
    float x1 = q[c + dy] + l.t[0] * (q[c + dy + dx] - q[c + dy]);
    float y0 = x0 + l.t[1] * (x1 - x0);
    if (dim == 2) return y0;
    long long dz = n2 > 1 ? sz : 0;
    long long c2 = c + dz;
    float x2 = q[c2] + l.t[0] * (q[c2 + dx] - q[c2]);
    float x3 = q[c2 + dy] + l.t[0] * (q[c2 + dy + dx] - q[c2 + dy]);
    float y1 = x2 + l.t[1] * (x3 - x2);
    return y0 + l.t[2] * (y1 - y0);
}

__device__ __forceinline__ void sample_range(const float* __restrict__ q, int n0, int n1,
                                             int n2, float o0, float o1, float o2, float g0,
                                             float g1, float g2, int dim, float& lo,
                                             float& hi) {
    Lerp l = locate(n0, n1, n2, o0, o1, o2, g0, g1, g2, dim);
    long long sy = n0, sz = (long long)n0 * n1;
    long long c = l.i0[0] + sy * l.i0[1] + sz * l.i0[2];
    long long dx = n0 > 1 ? 1 : 0;
    long long dy = n1 > 1 ? sy : 0;
    long long dz = (dim == 3 && n2 > 1) ? sz : 0;
    lo = q[c];
    hi = q[c];
    int kzn = dim == 3 ? 2 : 1;
    for (int kz = 0; kz < kzn; ++kz)
        for (int ky = 0; ky < 2; ++ky)
            for (int kx = 0; kx < 2; ++kx) {
                float v = q[c + kx * dx + ky * dy + kz * dz];
                lo = fminf(lo, v);
                hi = fmaxf(hi, v);
            }
}

struct Vel {
    const float* v[3];
    int nx, ny, nz, dim;
};

// Velocity at grid position g times s (fluid/mac.rs `velocity`).
__device__ __forceinline__ void velocity(const Vel& V, const float g[3], float s, float u[3]) {
    u[0] = u[1] = u[2] = 0.0f;
    for (int a = 0; a < V.dim; ++a) {
        int n0 = V.nx + (a == 0), n1 = V.ny + (a == 1), n2 = V.nz + (a == 2);
        float o0 = a == 0 ? 0.0f : 0.5f, o1 = a == 1 ? 0.0f : 0.5f, o2 = a == 2 ? 0.0f : 0.5f;
        u[a] = s * sample(V.v[a], n0, n1, n2, o0, o1, o2, g[0], g[1], g[2], V.dim);
    }
}

// Departure point g - s u(g - s/2 u(g)) (fluid/mac.rs `trace`).
__device__ __forceinline__ void trace(const Vel& V, const float g[3], float s, float d[3]) {
    float u0[3], m[3], u1[3];
    velocity(V, g, s, u0);
    m[0] = g[0]; m[1] = g[1]; m[2] = g[2];
    for (int a = 0; a < V.dim; ++a) m[a] = g[a] - 0.5f * u0[a];
    velocity(V, m, s, u1);
    d[0] = g[0]; d[1] = g[1]; d[2] = g[2];
    for (int a = 0; a < V.dim; ++a) d[a] = g[a] - u1[a];
}

// Semi-Lagrangian step of q (sample counts qn, offsets qo): out(g) = q(trace(g)).
extern "C" __global__ void advect_sl(int nx, int ny, int nz, int dim, float s,
                                     const float* __restrict__ vx,
                                     const float* __restrict__ vy,
                                     const float* __restrict__ vz,
                                     const float* __restrict__ q, int qn0, int qn1, int qn2,
                                     float qo0, float qo1, float qo2, float* __restrict__ out) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)qn0 * qn1 * qn2) return;
    Vel V = {{vx, vy, vz}, nx, ny, nz, dim};
    int i = (int)(idx % qn0), j = (int)((idx / qn0) % qn1),
        k = (int)(idx / ((long long)qn0 * qn1));
    float g[3] = {(float)i + qo0, (float)j + qo1, (float)k + qo2};
    float d[3];
    trace(V, g, s, d);
    out[idx] = sample(q, qn0, qn1, qn2, qo0, qo1, qo2, d[0], d[1], d[2], dim);
}

// MacCormack correction of the semi-Lagrangian result fwd, clamped to the range of q around
// the departure point. With sources != 0 (cell scalars): source values override where
// source > 0 and cells without fluid are zero (fluid/mac.rs `sources`, fused).
extern "C" __global__ void advect_mc(int nx, int ny, int nz, int dim, float s,
                                     const float* __restrict__ vx,
                                     const float* __restrict__ vy,
                                     const float* __restrict__ vz,
                                     const float* __restrict__ q,
                                     const float* __restrict__ fwd, int qn0, int qn1, int qn2,
                                     float qo0, float qo1, float qo2, int sources,
                                     const float* __restrict__ source,
                                     const float* __restrict__ fluid,
                                     float* __restrict__ out) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)qn0 * qn1 * qn2) return;
    Vel V = {{vx, vy, vz}, nx, ny, nz, dim};
    int i = (int)(idx % qn0), j = (int)((idx / qn0) % qn1),
        k = (int)(idx / ((long long)qn0 * qn1));
    float g[3] = {(float)i + qo0, (float)j + qo1, (float)k + qo2};
    float d[3], a[3];
    trace(V, g, s, d);
    trace(V, g, -s, a);
    float back = sample(fwd, qn0, qn1, qn2, qo0, qo1, qo2, a[0], a[1], a[2], dim);
    float v = fwd[idx] + 0.5f * (q[idx] - back);
    float lo, hi;
    sample_range(q, qn0, qn1, qn2, qo0, qo1, qo2, d[0], d[1], d[2], dim, lo, hi);
    v = fminf(fmaxf(v, lo), hi);
    if (sources) {
        if (source[idx] > 0.0f) v = source[idx];
        if (fluid[idx] <= 0.0f) v = 0.0f;
    }
    out[idx] = v;
}

// Cell scalars after a semi-Lagrangian step without correction: the source rule alone.
extern "C" __global__ void apply_sources(long long n, const float* __restrict__ source,
                                         const float* __restrict__ fluid, float* smoke) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n) return;
    if (source[c] > 0.0f) smoke[c] = source[c];
    if (fluid[c] <= 0.0f) smoke[c] = 0.0f;
}

// ---------------------------------------------------------------- forces, projection

// One explicit viscosity sub-step on the faces of axis a (fluid/mac.rs `diffuse`).
extern "C" __global__ void diffuse(int nx, int ny, int nz, int dim, int a,
                                   const float* __restrict__ open, const float* __restrict__ u,
                                   float lambda, float* __restrict__ out) {
    int n0 = nx + (a == 0), n1 = ny + (a == 1), n2 = nz + (a == 2);
    long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= (long long)n0 * n1 * n2) return;
    float uf = u[f];
    if (open[f] <= 0.0f) { out[f] = uf; return; }
    int ijk[3] = {(int)(f % n0), (int)((f / n0) % n1), (int)(f / ((long long)n0 * n1))};
    int nn[3] = {n0, n1, n2};
    long long st[3] = {1, n0, (long long)n0 * n1};
    float acc = 0.0f;
    for (int b = 0; b < dim; ++b) {
        if (ijk[b] > 0) acc += u[f - st[b]] - uf;
        if (ijk[b] + 1 < nn[b]) acc += u[f + st[b]] - uf;
    }
    out[f] = uf + lambda * acc;
}

// Buoyancy, side conditions and solid faces on the faces of axis a, in place
// (fluid/mac.rs `forces_and_boundaries`). kinds: 0 wall, 1 inflow (value vals[side]),
// 2 outflow; sides ordered x-, x+, y-, y+, z-, z+.
extern "C" __global__ void forces(int nx, int ny, int nz, int dim, int a,
                                  const float* __restrict__ open,
                                  const float* __restrict__ smoke, float buoyancy_dt, int up,
                                  int k0, int k1, int k2, int k3, int k4, int k5, float v0,
                                  float v1, float v2, float v3, float v4, float v5,
                                  float* __restrict__ u) {
    int n0 = nx + (a == 0), n1 = ny + (a == 1), n2 = nz + (a == 2);
    long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= (long long)n0 * n1 * n2) return;
    int ijk[3] = {(int)(f % n0), (int)((f / n0) % n1), (int)(f / ((long long)n0 * n1))};
    int cd[3] = {nx, ny, nz};
    float v = u[f];
    if (a == up && buoyancy_dt != 0.0f) {
        long long c = ijk[0] + (long long)nx * (ijk[1] + (long long)ny * ijk[2]);
        long long st = a == 0 ? 1 : (a == 1 ? (long long)nx : (long long)nx * ny);
        float hi = ijk[a] < cd[a] ? smoke[c] : 0.0f;
        float lo = ijk[a] > 0 ? smoke[c - st] : 0.0f;
        v += buoyancy_dt * 0.5f * (lo + hi);
    }
    int kinds[6] = {k0, k1, k2, k3, k4, k5};
    float vals[6] = {v0, v1, v2, v3, v4, v5};
    int side = -1;
    if (ijk[a] == 0) side = 2 * a;
    else if (ijk[a] == cd[a]) side = 2 * a + 1;
    if (side >= 0) {
        if (kinds[side] == 0) v = 0.0f;
        else if (kinds[side] == 1) v = vals[side];
    }
    if (open[f] <= 0.0f) v = 0.0f;
    u[f] = v;
}

// Net outflow of cell c in face-fraction units (fluid/mac.rs `net_outflow`).
__device__ __forceinline__ float net_outflow(int c, int i, int j, int k, int nx, int ny,
                                             int dim, const float* __restrict__ ox,
                                             const float* __restrict__ oy,
                                             const float* __restrict__ oz,
                                             const float* __restrict__ ux,
                                             const float* __restrict__ uy,
                                             const float* __restrict__ uz) {
    float s = 0.0f;
    {
        long long lo = i + (long long)(nx + 1) * (j + (long long)ny * k);
        s += ox[lo + 1] * ux[lo + 1] - ox[lo] * ux[lo];
    }
    {
        long long lo = i + (long long)nx * (j + (long long)(ny + 1) * k);
        s += oy[lo + nx] * uy[lo + nx] - oy[lo] * uy[lo];
    }
    if (dim == 3) {
        long long lo = i + (long long)nx * (j + (long long)ny * k);
        long long st = (long long)nx * ny;
        s += oz[lo + st] * uz[lo + st] - oz[lo] * uz[lo];
    }
    return s;
}

// Projection right-hand side b = -(net outflow) on active cells, 0 elsewhere; scales the
// warm-start psi by `ratio` (dt / previous dt; 0 zeroes it); stats[2] = max |b| (float bits).
extern "C" __global__ void proj_rhs(int nx, int ny, int nz, int dim,
                                    const float* __restrict__ D,
                                    const float* __restrict__ wx,
                                    const float* __restrict__ wy,
                                    const float* __restrict__ wz,
                                    const float* __restrict__ ox,
                                    const float* __restrict__ oy,
                                    const float* __restrict__ oz,
                                    const float* __restrict__ ux,
                                    const float* __restrict__ uy,
                                    const float* __restrict__ uz, float* __restrict__ b,
                                    float* __restrict__ psi, float ratio, u32* stats) {
    long long n = (long long)nx * ny * nz;
    float bmax = 0.0f;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (long long)gridDim.x * blockDim.x) {
        int i = (int)(c % nx), j = (int)((c / nx) % ny), k = (int)(c / ((long long)nx * ny));
        float d = diagonal((int)c, i, j, k, nx, ny, nz, dim, D, wx, wy, wz);
        float v = d > 0.0f ? -net_outflow((int)c, i, j, k, nx, ny, dim, ox, oy, oz, ux, uy, uz)
                           : 0.0f;
        b[c] = v;
        psi[c] = d > 0.0f ? ratio * psi[c] : 0.0f;
        bmax = fmaxf(bmax, fabsf(v));
    }
    block_max(bmax, stats + 2);
}

// Velocity update of the faces of axis a from psi (fluid/mac.rs `project_faces`).
extern "C" __global__ void proj_faces(int nx, int ny, int nz, int a,
                                      const float* __restrict__ open,
                                      const float* __restrict__ psi, int out_lo, int out_hi,
                                      float* __restrict__ u) {
    int n0 = nx + (a == 0), n1 = ny + (a == 1), n2 = nz + (a == 2);
    long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= (long long)n0 * n1 * n2) return;
    if (open[f] <= 0.0f) return;
    int ijk[3] = {(int)(f % n0), (int)((f / n0) % n1), (int)(f / ((long long)n0 * n1))};
    int cd[3] = {nx, ny, nz};
    long long c = ijk[0] + (long long)nx * (ijk[1] + (long long)ny * ijk[2]);
    long long st = a == 0 ? 1 : (a == 1 ? (long long)nx : (long long)nx * ny);
    if (ijk[a] == 0) {
        if (out_lo) u[f] -= 2.0f * psi[c];
    } else if (ijk[a] == cd[a]) {
        if (out_hi) u[f] += 2.0f * psi[c - st];
    } else {
        u[f] -= psi[c] - psi[c - st];
    }
}

// The cell fields: pressure = pscale psi, cell-centred velocities, divergence (net
// outflow / h) on fluid cells; stats[0] = max |u| over faces, stats[1] = max |div| over
// active fluid cells (float bits).
extern "C" __global__ void outputs(int nx, int ny, int nz, int dim,
                                   const float* __restrict__ D,
                                   const float* __restrict__ wx,
                                   const float* __restrict__ wy,
                                   const float* __restrict__ wz,
                                   const float* __restrict__ ox, const float* __restrict__ oy,
                                   const float* __restrict__ oz, const float* __restrict__ ux,
                                   const float* __restrict__ uy, const float* __restrict__ uz,
                                   const float* __restrict__ fluid,
                                   const float* __restrict__ psi, float pscale, float inv_h,
                                   float* __restrict__ pressure, float* __restrict__ cvx,
                                   float* __restrict__ cvy, float* __restrict__ cvz,
                                   float* __restrict__ div, u32* stats) {
    long long n = (long long)nx * ny * nz;
    float umax = 0.0f, dmax = 0.0f;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (long long)gridDim.x * blockDim.x) {
        int i = (int)(c % nx), j = (int)((c / nx) % ny), k = (int)(c / ((long long)nx * ny));
        bool fl = fluid[c] > 0.0f;
        pressure[c] = fl ? pscale * psi[c] : 0.0f;
        long long fx = i + (long long)(nx + 1) * (j + (long long)ny * k);
        long long fy = i + (long long)nx * (j + (long long)(ny + 1) * k);
        cvx[c] = 0.5f * (ux[fx] + ux[fx + 1]);
        cvy[c] = 0.5f * (uy[fy] + uy[fy + nx]);
        umax = fmaxf(umax, fabsf(ux[fx]));
        umax = fmaxf(umax, fabsf(uy[fy]));
        if (i + 1 == nx) umax = fmaxf(umax, fabsf(ux[fx + 1]));
        if (j + 1 == ny) umax = fmaxf(umax, fabsf(uy[fy + nx]));
        if (dim == 3) {
            long long fz = c;
            long long st = (long long)nx * ny;
            cvz[c] = 0.5f * (uz[fz] + uz[fz + st]);
            umax = fmaxf(umax, fabsf(uz[fz]));
            if (k + 1 == nz) umax = fmaxf(umax, fabsf(uz[fz + st]));
        }
        float dv = fl ? net_outflow((int)c, i, j, k, nx, ny, dim, ox, oy, oz, ux, uy, uz) * inv_h
                      : 0.0f;
        div[c] = dv;
        if (fl && diagonal((int)c, i, j, k, nx, ny, nz, dim, D, wx, wy, wz) > 0.0f)
            dmax = fmaxf(dmax, fabsf(dv));
    }
    block_max(umax, stats);
    block_max(dmax, stats + 1);
}
