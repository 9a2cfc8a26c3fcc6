// Tessera safe ("smart") Laplacian smoothing on the GPU (dissertation §3.4.2 with a shape
// test): the shape measure q of every cell at the old positions, the synchronous rounds that
// reject moves which would invert a cell or push it below min(q before, tau), and the final
// update. The CPU reference is tessera_mesh::smooth::safe_smoothed_positions; every
// floating-point operation below is the reference's, in the same order, and the module is
// compiled with --fmad=false, so both take identical decisions and give identical positions.
typedef unsigned int u32;
typedef unsigned long long u64;

#define TID ((u64)blockIdx.x * blockDim.x + threadIdx.x)

// 12 sqrt(3): q = K det / (s sqrt(s)) = (mean ratio)^(3/2) for det = 6 V, s = sum of l^2
#define Q_SCALE 20.784609690826528

struct P3 { double x, y, z; };

__device__ __forceinline__ P3 load(const double* p, u32 v) {
    P3 r;
    r.x = p[3 * (u64)v];
    r.y = p[3 * (u64)v + 1];
    r.z = p[3 * (u64)v + 2];
    return r;
}

__device__ __forceinline__ double l2(P3 p, P3 q) {
    double x = q.x - p.x, y = q.y - p.y, z = q.z - p.z;
    return x * x + y * y + z * z;
}

// quality::tet_q
__device__ double tet_q(P3 a, P3 b, P3 c, P3 d) {
    double ux = b.x - a.x, uy = b.y - a.y, uz = b.z - a.z;
    double vx = c.x - a.x, vy = c.y - a.y, vz = c.z - a.z;
    double wx = d.x - a.x, wy = d.y - a.y, wz = d.z - a.z;
    double det = ux * (vy * wz - vz * wy) - uy * (vx * wz - vz * wx) + uz * (vx * wy - vy * wx);
    double s = l2(a, b) + l2(a, c) + l2(a, d) + l2(b, c) + l2(b, d) + l2(c, d);
    if (!(s > 0.0)) return 0.0;
    return Q_SCALE * det / (s * sqrt(s));
}

// the position of vertex v: the candidate when use_cand and v moves and is not rejected
__device__ __forceinline__ P3 at(u32 v, const double* old, const double* cand, const u32* moving,
                                 const u32* rejected, int use_cand) {
    if (use_cand && moving[v] && !rejected[v]) return load(cand, v);
    return load(old, v);
}

// quality::QualityStencil::q / q_with
__device__ double cell_q(u64 c, const u32* voffs, const u32* verts, const u32* loffs, const u32* loops,
                         double cube_q, const double* old, const double* cand, const u32* moving,
                         const u32* rejected, int use_cand) {
    u32 v0 = voffs[c], v1 = voffs[c + 1], l0 = loffs[c], l1 = loffs[c + 1];
    if (l0 == l1) {
        if (v1 - v0 != 4) return 0.0;
        return tet_q(at(verts[v0], old, cand, moving, rejected, use_cand),
                     at(verts[v0 + 1], old, cand, moving, rejected, use_cand),
                     at(verts[v0 + 2], old, cand, moving, rejected, use_cand),
                     at(verts[v0 + 3], old, cand, moving, rejected, use_cand));
    }
    double n = (double)(v1 - v0);
    P3 cc = {0.0, 0.0, 0.0};
    for (u32 i = v0; i < v1; i++) {
        P3 p = at(verts[i], old, cand, moving, rejected, use_cand);
        cc.x += p.x;
        cc.y += p.y;
        cc.z += p.z;
    }
    cc.x = cc.x / n;
    cc.y = cc.y / n;
    cc.z = cc.z / n;
    double qmin = __longlong_as_double(0x7ff0000000000000ULL);  // +inf
    u32 i = l0;
    while (i < l1) {
        u32 len = loops[i];
        const u32* l = loops + i + 1;
        double k = (double)len;
        P3 fc = {0.0, 0.0, 0.0};
        for (u32 j = 0; j < len; j++) {
            P3 p = at(l[j], old, cand, moving, rejected, use_cand);
            fc.x += p.x;
            fc.y += p.y;
            fc.z += p.z;
        }
        fc.x = fc.x / k;
        fc.y = fc.y / k;
        fc.z = fc.z / k;
        for (u32 j = 0; j < len; j++) {
            P3 a = at(l[j], old, cand, moving, rejected, use_cand);
            P3 b = at(l[(j + 1) % len], old, cand, moving, rejected, use_cand);
            double q = tet_q(fc, b, a, cc);
            if (q < qmin) qmin = q;
        }
        i += 1 + len;
    }
    if (qmin == __longlong_as_double(0x7ff0000000000000ULL)) return 0.0;
    return qmin / cube_q;
}

// q of every cell at the old positions
extern "C" __global__ void safe_cell_q(const u32* voffs, const u32* verts, const u32* loffs, const u32* loops,
                                       double cube_q, const double* old, u64 nc, double* q_out) {
    u64 c = TID;
    if (c >= nc) return;
    q_out[c] = cell_q(c, voffs, verts, loffs, loops, cube_q, old, old, 0, 0, 0);
}

// One checking round: a cell whose q with the candidates of its not-yet-rejected vertices
// falls below min(q_old, tau) rejects the moves of all its moving vertices. Reads
// `rejected` (the previous round), writes `next` (a copy of it), so the result does not
// depend on the order the cells run in.
extern "C" __global__ void safe_check(const u32* voffs, const u32* verts, const u32* loffs, const u32* loops,
                                      double cube_q, const double* old, const double* cand, const u32* moving,
                                      const u32* rejected, const double* q_old, double tau, u64 nc, u32* next,
                                      u32* changed) {
    u64 c = TID;
    if (c >= nc) return;
    double q = cell_q(c, voffs, verts, loffs, loops, cube_q, old, cand, moving, rejected, 1);
    double lim = q_old[c] < tau ? q_old[c] : tau;
    if (!(q < lim)) return;
    for (u32 i = voffs[c]; i < voffs[c + 1]; i++) {
        u32 v = verts[i];
        if (moving[v] && !rejected[v]) {
            next[v] = 1u;
            atomicAdd(changed, 1u);
        }
    }
}

// positions after the step: accepted candidates, else the old position
extern "C" __global__ void safe_apply(const double* old, const double* cand, const u32* moving,
                                      const u32* rejected, u64 nv, double* out) {
    u64 v = TID;
    if (v >= nv) return;
    bool take = moving[v] && !rejected[v];
    const double* src = take ? cand : old;
    out[3 * v] = src[3 * v];
    out[3 * v + 1] = src[3 * v + 1];
    out[3 * v + 2] = src[3 * v + 2];
}
