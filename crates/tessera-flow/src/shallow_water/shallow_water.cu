// Shallow water on active 16x16 tiles: Kurganov-Petrova (2007) central-upwind scheme, second
// order in space (minmod reconstruction of w = h + B) and time (SSP Runge-Kutta 2), as used by
// Brodtkorb et al. (2012); dissertation §6.3.5.
//
// Every expression mirrors crates/tessera-flow/src/shallow_water/reference.rs operation by
// operation; the module is compiled with --fmad=false, so the GPU computes the CPU's bits.

typedef unsigned long long u64;
#define T 16
#define R 20   // tile + 2 halo cells per side
#define NT 288 // threads per tile: one per reconstructed cell of a direction (16 x 18)
#define SQRT2 1.4142135623730951

struct Params {
    int nx, ny, tiles_x, tiles_y;
    double dx, g, theta, eps, cfl, dt_max;
    double rain;              // m/s added to w inside the rain disc
    double rain_x, rain_y, rain_r2;
    double idx;               // 1 / dx
    double kappa;             // depth below which cell momenta are desingularized
    double friction;          // Darcy-Weisbach friction factor f (0: none)
};

// Scalar parameters travel in a small device buffer (see gpu.rs, `param_block`).
__device__ __forceinline__ Params load_params(int nx, int ny, const double* __restrict__ prm) {
    Params P;
    P.nx = nx; P.ny = ny;
    P.tiles_x = (nx + T - 1) / T; P.tiles_y = (ny + T - 1) / T;
    P.dx = prm[0]; P.g = prm[1]; P.theta = prm[2]; P.eps = prm[3]; P.cfl = prm[4]; P.dt_max = prm[5];
    P.rain = prm[6]; P.rain_x = prm[7]; P.rain_y = prm[8]; P.rain_r2 = prm[9]; P.kappa = prm[10]; P.friction = prm[11];
    P.idx = 1.0 / P.dx;
    return P;
}

// max/min by comparison (the CPU reference uses the same), so signed zeros agree too.
__device__ __forceinline__ double dmax(double a, double b) { return a > b ? a : b; }
__device__ __forceinline__ double dmin(double a, double b) { return a < b ? a : b; }

struct Face { double w, h, u, v; };

__device__ __forceinline__ double minmod3(double a, double b, double c) {
    if (a > 0.0 && b > 0.0 && c > 0.0) return dmin(dmin(a, b), c);
    if (a < 0.0 && b < 0.0 && c < 0.0) return dmax(dmax(a, b), c);
    return 0.0;
}

__device__ __forceinline__ double slope(double m, double c, double p, double theta) {
    return minmod3(theta * (c - m), 0.5 * (p - m), theta * (p - c));
}

// The desingularization factor k with u = k q: sqrt(2) h / sqrt(h^4 + max(h^4, eps)).
__device__ __forceinline__ double desing_factor(double h, double eps) {
    double h2 = h * h;
    double h4 = h2 * h2;
    return (SQRT2 * h) / sqrt(h4 + dmax(h4, eps));
}
__device__ __forceinline__ double desing(double h, double q, double eps) { return desing_factor(h, eps) * q; }

__device__ __forceinline__ double pressure(double h, double halfg) { return (halfg * h) * h; }

// Reconstruction of one cell along one direction: faces "lo" (W or S) and "hi" (E or N).
// q = momentum normal to the faces, t = tangential momentum.
__device__ __forceinline__ void reconstruct(double wm, double w0, double wp, double qm, double q0, double qp,
                                            double tm, double t0, double tp, double blo, double bhi,
                                            const Params& P, Face* lo, Face* hi) {
    double sw = slope(wm, w0, wp, P.theta);
    double sq = slope(qm, q0, qp, P.theta);
    double st = slope(tm, t0, tp, P.theta);
    double whi = w0 + 0.5 * sw;
    double wlo = w0 - 0.5 * sw;
    if (whi < bhi) { whi = bhi; wlo = 2.0 * w0 - bhi; }
    else if (wlo < blo) { wlo = blo; whi = 2.0 * w0 - blo; }
    double hhi = whi - bhi; if (!(hhi > 0.0)) hhi = 0.0;
    double hlo = wlo - blo; if (!(hlo > 0.0)) hlo = 0.0;
    double qhi = q0 + 0.5 * sq, qlo = q0 - 0.5 * sq;
    double thi = t0 + 0.5 * st, tlo = t0 - 0.5 * st;
    double khi = desing_factor(hhi, P.eps), klo = desing_factor(hlo, P.eps);
    hi->w = whi; hi->h = hhi; hi->u = khi * qhi; hi->v = khi * thi;
    lo->w = wlo; lo->h = hlo; lo->u = klo * qlo; lo->v = klo * tlo;
}

// Central-upwind flux between the left state L and the right state R (u normal velocity):
// out[0] for w, out[1] normal momentum, out[2] tangential momentum; returns the face's
// largest wave speed.
__device__ __forceinline__ double flux(const Face& L, const Face& Rt, double g, double halfg, double* out) {
    double cL = sqrt(g * L.h), cR = sqrt(g * Rt.h);
    double ap = dmax(dmax(L.u + cL, Rt.u + cR), 0.0);
    double am = dmin(dmin(L.u - cL, Rt.u - cR), 0.0);
    double qL = L.h * L.u, qR = Rt.h * Rt.u;
    double tL = L.h * L.v, tR = Rt.h * Rt.v;
    double FL0 = qL, FL1 = qL * L.u + pressure(L.h, halfg), FL2 = qL * L.v;
    double FR0 = qR, FR1 = qR * Rt.u + pressure(Rt.h, halfg), FR2 = qR * Rt.v;
    double den = ap - am;
    if (den > 0.0) {
        double apm = ap * am, inv = 1.0 / den;
        out[0] = FL0 + (am * (FL0 - FR0) + apm * (Rt.w - L.w)) * inv;
        out[1] = FL1 + (am * (FL1 - FR1) + apm * (qR - qL)) * inv;
        out[2] = FL2 + (am * (FL2 - FR2) + apm * (tR - tL)) * inv;
    } else {
        out[0] = 0.0; out[1] = 0.0; out[2] = 0.0;
    }
    return dmax(ap, -am);
}

// A wall face: no mass flux, the pressure of the inside face state, no tangential flux.
__device__ __forceinline__ double wall_flux(const Face& in, double g, double halfg, double* out) {
    out[0] = 0.0;
    out[1] = pressure(in.h, halfg);
    out[2] = 0.0;
    return fabs(in.u) + sqrt(g * in.h);
}

__device__ __forceinline__ int mirror(int i, int n, bool* flip) {
    if (i < 0) { *flip = true; i = -1 - i; }
    else if (i >= n) { *flip = true; i = 2 * n - 1 - i; }
    else *flip = false;
    return min(max(i, 0), n - 1);
}

// After each stage: a cell whose depth is not positive becomes dry (w = B, no momentum; the
// largest negative depth met goes to *neg); in cells thinner than kappa the momenta are
// rebuilt from desingularized velocities (KP07); bed friction (Darcy-Weisbach,
// du/dt = -f |u| u / (8 h)) is applied semi-implicitly over dt.
__device__ __forceinline__ void clamp_cell(double* w, double* hu, double* hv, double b, const Params& P, double dt,
                                           double* neg) {
    double h = *w - b;
    if (!(h > 0.0)) {
        if (h < 0.0 && -h > *neg) *neg = -h;
        *w = b; *hu = 0.0; *hv = 0.0;
        return;
    }
    if (h < P.kappa) {
        double k = desing_factor(h, P.eps);
        *hu = h * (k * *hu);
        *hv = h * (k * *hv);
    }
    if (P.friction > 0.0) {
        double ih = 1.0 / h;
        double u = *hu * ih, v = *hv * ih;
        double sp = sqrt(u * u + v * v);
        double k = 1.0 / (1.0 + dt * (((P.friction * 0.125) * sp) * ih));
        *hu = *hu * k;
        *hv = *hv * k;
    }
}

__device__ __forceinline__ void atomic_max_pos(u64* slot, double v) {
    // positive doubles order like their bit patterns (-0.0 would not: it is skipped, the
    // slot starts at +0.0)
    if (v > 0.0) atomicMax(slot, (u64)__double_as_longlong(v));
}

struct Shared {
    double w[R][R], hu[R][R], hv[R][R], b[R][R];
    double c[T + 3][T + 3];            // corners i0-1 .. i0+17
    Face lo[T][T + 2], hi[T][T + 2];   // x: [row][cell i0-1+k]; y: [col][cell j0-1+k]
    double f[T][T + 1][3];             // x: [row][face]; y: [col][face]
    double red[NT / 32];
};

// One stage of one tile. stage 1: U = U^n, writes R1 = L(U^n) and the wave-speed maximum.
// stage 2: U = U* = clamp(U^n + dt R1) built while loading, writes
// U^{n+1} = clamp(0.5 (U^n + (U* + dt L(U*)))), the tile's wet flag and the float exports.
__device__ void tile_stage(int stage, int tile, const Params& P,
                           const double* __restrict__ w, const double* __restrict__ hu, const double* __restrict__ hv,
                           const double* __restrict__ bc, const float* __restrict__ corners,
                           double* r1w, double* r1u, double* r1v,
                           const unsigned* __restrict__ active, double dt,
                           double* __restrict__ ow, double* __restrict__ ou, double* __restrict__ ov,
                           unsigned* __restrict__ wet_out, float* const* ex, u64* __restrict__ stats,
                           Shared& S) {
    // threads below T*T own cell (tx, ty) of the tile; the last 32 only help in the loops
    bool owner = threadIdx.x < T * T;
    int tx = threadIdx.x % T, ty = owner ? (int)threadIdx.x / T : 0;
    int i0 = (tile % P.tiles_x) * T, j0 = (tile / P.tiles_x) * T;
    double halfg = 0.5 * P.g;
    double neg = 0.0;
    // load U (stage 2: U*) and B of the 20x20 region with mirrored ghost cells
    for (int k = threadIdx.x; k < R * R; k += NT) {
        int li = k % R, lj = k / R;
        bool fx, fy;
        int si = mirror(i0 - 2 + li, P.nx, &fx);
        int sj = mirror(j0 - 2 + lj, P.ny, &fy);
        size_t s = (size_t)si + (size_t)P.nx * (size_t)sj;
        double cw = w[s], cu = hu[s], cv = hv[s], cb = bc[s];
        if (stage == 2) {
            int st = (si / T) + P.tiles_x * (sj / T);
            if (active[st]) {
                cw = cw + dt * r1w[s];
                cu = cu + dt * r1u[s];
                cv = cv + dt * r1v[s];
                clamp_cell(&cw, &cu, &cv, cb, P, dt, &neg);
            }
        }
        S.w[lj][li] = cw;
        S.hu[lj][li] = fx ? -cu : cu;
        S.hv[lj][li] = fy ? -cv : cv;
        S.b[lj][li] = cb;
    }
    for (int k = threadIdx.x; k < (T + 3) * (T + 3); k += NT) {
        int ci = k % (T + 3), cj = k / (T + 3);
        int gi = min(max(i0 - 1 + ci, 0), P.nx), gj = min(max(j0 - 1 + cj, 0), P.ny);
        S.c[cj][ci] = (double)corners[(size_t)gi + (size_t)(P.nx + 1) * (size_t)gj];
    }
    __syncthreads();
    double amax = 0.0;
    double rw = 0.0, ru = 0.0, rv = 0.0;
    // ---- x direction: cells i0-1 .. i0+16 of rows j0 .. j0+15
    for (int k = threadIdx.x; k < T * (T + 2); k += NT) {
        int row = k / (T + 2), cell = k % (T + 2);   // cell 0 = i0-1
        int li = cell + 1, lj = row + 2;             // local index in the 20x20 region
        // face B: west face of cell (i0-1+cell) is corner column cell, east is cell+1
        double blo = 0.5 * (S.c[row + 1][cell] + S.c[row + 2][cell]);
        double bhi = 0.5 * (S.c[row + 1][cell + 1] + S.c[row + 2][cell + 1]);
        reconstruct(S.w[lj][li - 1], S.w[lj][li], S.w[lj][li + 1],
                    S.hu[lj][li - 1], S.hu[lj][li], S.hu[lj][li + 1],
                    S.hv[lj][li - 1], S.hv[lj][li], S.hv[lj][li + 1], blo, bhi, P,
                    &S.lo[row][cell], &S.hi[row][cell]);
    }
    __syncthreads();
    for (int k = threadIdx.x; k < T * (T + 1); k += NT) {
        int row = k / (T + 1), face = k % (T + 1);   // face between cells face-1 and face (0 = i0-1)
        int gi = i0 + face;                          // global face index (west face of cell gi)
        double a;
        if (gi == 0) a = wall_flux(S.lo[row][face + 1], P.g, halfg, S.f[row][face]);
        else if (gi == P.nx) a = wall_flux(S.hi[row][face], P.g, halfg, S.f[row][face]);
        else a = flux(S.hi[row][face], S.lo[row][face + 1], P.g, halfg, S.f[row][face]);
        if (gi <= P.nx && j0 + row < P.ny) amax = dmax(amax, a);
    }
    __syncthreads();
    if (owner) {
        const Face& W = S.lo[ty][tx + 1];
        const Face& E = S.hi[ty][tx + 1];
        const double* Fw = S.f[ty][tx];
        const double* Fe = S.f[ty][tx + 1];
        double pE = pressure(E.h, halfg), pW = pressure(W.h, halfg);
        rw = -((Fe[0] - Fw[0]) * P.idx);
        ru = ((pE - pW) - (Fe[1] - Fw[1])) * P.idx - (((P.g * (E.w - W.w)) * (E.h + W.h)) * 0.5) * P.idx;
        rv = -((Fe[2] - Fw[2]) * P.idx);
    }
    __syncthreads();
    // ---- y direction: cells j0-1 .. j0+16 of columns i0 .. i0+15
    for (int k = threadIdx.x; k < T * (T + 2); k += NT) {
        int col = k / (T + 2), cell = k % (T + 2);
        int li = col + 2, lj = cell + 1;
        double blo = 0.5 * (S.c[cell][col + 1] + S.c[cell][col + 2]);
        double bhi = 0.5 * (S.c[cell + 1][col + 1] + S.c[cell + 1][col + 2]);
        reconstruct(S.w[lj - 1][li], S.w[lj][li], S.w[lj + 1][li],
                    S.hv[lj - 1][li], S.hv[lj][li], S.hv[lj + 1][li],
                    S.hu[lj - 1][li], S.hu[lj][li], S.hu[lj + 1][li], blo, bhi, P,
                    &S.lo[col][cell], &S.hi[col][cell]);
    }
    __syncthreads();
    for (int k = threadIdx.x; k < T * (T + 1); k += NT) {
        int col = k / (T + 1), face = k % (T + 1);
        int gj = j0 + face;
        double a;
        if (gj == 0) a = wall_flux(S.lo[col][face + 1], P.g, halfg, S.f[col][face]);
        else if (gj == P.ny) a = wall_flux(S.hi[col][face], P.g, halfg, S.f[col][face]);
        else a = flux(S.hi[col][face], S.lo[col][face + 1], P.g, halfg, S.f[col][face]);
        if (gj <= P.ny && i0 + col < P.nx) amax = dmax(amax, a);
    }
    __syncthreads();
    if (owner) {
        const Face& So = S.lo[tx][ty + 1];
        const Face& N = S.hi[tx][ty + 1];
        const double* Fs = S.f[tx][ty];
        const double* Fn = S.f[tx][ty + 1];
        double pN = pressure(N.h, halfg), pS = pressure(So.h, halfg);
        rw = rw - (Fn[0] - Fs[0]) * P.idx;
        rv = rv + (((pN - pS) - (Fn[1] - Fs[1])) * P.idx - (((P.g * (N.w - So.w)) * (N.h + So.h)) * 0.5) * P.idx);
        ru = ru - (Fn[2] - Fs[2]) * P.idx;
    }
    int gi = i0 + tx, gj = j0 + ty;
    bool inside = owner && gi < P.nx && gj < P.ny;
    size_t s = (size_t)gi + (size_t)P.nx * (size_t)gj;
    if (inside && P.rain > 0.0) {
        double x = ((double)gi + 0.5) * P.dx - P.rain_x, y = ((double)gj + 0.5) * P.dx - P.rain_y;
        if (x * x + y * y <= P.rain_r2) rw = rw + P.rain;
    }
    int wet = 0;
    if (stage == 1) {
        if (inside) {
            r1w[s] = rw;
            r1u[s] = ru;
            r1v[s] = rv;
        }
    } else if (inside) {
        double cw = S.w[ty + 2][tx + 2], cu = S.hu[ty + 2][tx + 2], cv = S.hv[ty + 2][tx + 2];
        double b = S.b[ty + 2][tx + 2];
        double nw = 0.5 * (w[s] + (cw + dt * rw));
        double nu = 0.5 * (hu[s] + (cu + dt * ru));
        double nv = 0.5 * (hv[s] + (cv + dt * rv));
        clamp_cell(&nw, &nu, &nv, b, P, dt, &neg);
        ow[s] = nw; ou[s] = nu; ov[s] = nv;
        double h = nw - b;
        wet = h > 0.0;
        double q = sqrt(nu * nu + nv * nv);
        ex[0][s] = (float)h;
        ex[1][s] = (float)nu;
        ex[2][s] = (float)nv;
        ex[3][s] = (float)nw;
        ex[4][s] = (float)desing(h, q, P.eps);
    }
    // block reductions: wave speed (stage 1), wet flag (stage 2), negative depth (both)
    if (stage == 1) {
        for (int o = 16; o > 0; o >>= 1) amax = dmax(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        if ((threadIdx.x & 31) == 0) S.red[threadIdx.x >> 5] = amax;
        __syncthreads();
        if (threadIdx.x == 0) {
            double m = 0.0;
            for (int k = 0; k < NT / 32; ++k) m = dmax(m, S.red[k]);
            atomic_max_pos(stats, m);
        }
    } else {
        int any = __syncthreads_or(wet);
        if (threadIdx.x == 0) wet_out[tile] = any ? 1u : 0u;
    }
    if (neg > 0.0) atomic_max_pos(stats + 1, neg);
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(NT) sw_stage(int stage, int nx, int ny, const double* __restrict__ prm,
        const double* __restrict__ w, const double* __restrict__ hu, const double* __restrict__ hv,
        const double* __restrict__ bc, const float* __restrict__ corners,
        double* r1w, double* r1u, double* r1v,
        const unsigned* __restrict__ active, const unsigned* __restrict__ list,
        const unsigned* __restrict__ count, const double* __restrict__ dtp,
        double* __restrict__ ow, double* __restrict__ ou, double* __restrict__ ov,
        unsigned* __restrict__ wet_out, float* ex_depth, float* ex_mx, float* ex_my, float* ex_surface,
        float* ex_speed, u64* __restrict__ stats) {
    __shared__ Shared S;
    Params P = load_params(nx, ny, prm);
    float* ex[5] = {ex_depth, ex_mx, ex_my, ex_surface, ex_speed};
    unsigned n = *count;
    double dt = *dtp;
    for (unsigned k = blockIdx.x; k < n; k += gridDim.x) {
        tile_stage(stage, (int)list[k], P, w, hu, hv, bc, corners, r1w, r1u, r1v, active, dt,
                   ow, ou, ov, wet_out, ex, stats, S);
    }
}

// Tiles with water in this or the previous step, or a neighbour with water, are active;
// so are tiles under the rain.
extern "C" __global__ void sw_active(int nx, int ny, const unsigned* __restrict__ wet_now,
                                     const unsigned* __restrict__ wet_prev, const unsigned* __restrict__ forced,
                                     unsigned* __restrict__ active, unsigned* __restrict__ list,
                                     unsigned* __restrict__ count) {
    int tiles_x = (nx + T - 1) / T, tiles_y = (ny + T - 1) / T;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int nt = tiles_x * tiles_y;
    if (t >= nt) return;
    int tx = t % tiles_x, ty = t / tiles_x;
    unsigned a = forced[t];
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
            int x = tx + dx, y = ty + dy;
            if (x < 0 || y < 0 || x >= tiles_x || y >= tiles_y) continue;
            int u = x + tiles_x * y;
            a |= wet_now[u] | wet_prev[u];
        }
    active[t] = a ? 1u : 0u;
    if (a) list[atomicAdd(count, 1u)] = (unsigned)t;
}

// stats[0] = largest wave speed (bits), stats[1] = largest negative depth clamped (bits);
// counters[0] = active tile count.
extern "C" __global__ void sw_begin(unsigned* counters, u64* stats) {
    counters[0] = 0u;
    stats[0] = 0ull;
}

// dt = min(cfl dx / amax, dt_max) (dt_max when nothing moves); time advances by dt.
extern "C" __global__ void sw_dt(int nx, int ny, const double* __restrict__ prm, const u64* __restrict__ stats,
                                  double* dtp, double* timep) {
    Params P = load_params(nx, ny, prm);
    double amax = __longlong_as_double((long long)stats[0]);
    double dt = amax > 0.0 ? dmin((P.cfl * P.dx) / amax, P.dt_max) : P.dt_max;
    dtp[0] = dt;
    timep[0] = timep[0] + dt;
}

// Per tile (256 threads): is there a cell with positive depth?
extern "C" __global__ void sw_init_wet(int nx, int ny, const double* __restrict__ prm, const double* __restrict__ w, const double* __restrict__ bc,
                                       unsigned* __restrict__ wet_a, unsigned* __restrict__ wet_b) {
    Params P = load_params(nx, ny, prm);
    int tile = blockIdx.x;
    int i = (tile % P.tiles_x) * T + threadIdx.x % T, j = (tile / P.tiles_x) * T + threadIdx.x / T;
    int wet = 0;
    if (i < P.nx && j < P.ny) {
        size_t s = (size_t)i + (size_t)P.nx * (size_t)j;
        wet = (w[s] - bc[s]) > 0.0;
    }
    int any = __syncthreads_or(wet);
    if (threadIdx.x == 0) { wet_a[tile] = any ? 1u : 0u; wet_b[tile] = any ? 1u : 0u; }
}

// Float exports of every cell (after initialisation or an upload): Depth, MomentumX,
// MomentumY, Surface, Speed.
extern "C" __global__ void sw_export_all(int nx, int ny, const double* __restrict__ prm, const double* __restrict__ w, const double* __restrict__ hu,
                                         const double* __restrict__ hv, const double* __restrict__ bc,
                                         float* ex_depth, float* ex_mx, float* ex_my, float* ex_surface,
                                         float* ex_speed) {
    Params P = load_params(nx, ny, prm);
    size_t n = (size_t)P.nx * (size_t)P.ny;
    size_t s = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n) return;
    double h = w[s] - bc[s];
    double q = sqrt(hu[s] * hu[s] + hv[s] * hv[s]);
    ex_depth[s] = (float)h;
    ex_mx[s] = (float)hu[s];
    ex_my[s] = (float)hv[s];
    ex_surface[s] = (float)w[s];
    ex_speed[s] = (float)desing(h, q, P.eps);
}
