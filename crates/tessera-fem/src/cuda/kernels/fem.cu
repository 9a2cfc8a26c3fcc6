// Tessera FEM kernels: exact pattern
// (§4.4.3), element matrices and the three summations (§4.4.4). (SpMV and PCG: tessera-solve.)
// Templates over the scalar T (float, double) and the block size E (1..3); extern "C"
// wrappers are named <kernel>_<t>_<e>.

typedef unsigned int u32;
typedef unsigned long long u64;

#define PAD 0xffffffffu
#define BIN 32
#define LOCAL_SLOTS 63

// ----------------------------------------------------------------------------- pattern

// Eq. 4.6: every listed simplex adds `coef` to each of its targets (atomic adds).
extern "C" __global__ void count_add(const u32* targets, u64 len, u32 coef, u32* acc) {
    for (u64 t = blockIdx.x * (u64)blockDim.x + threadIdx.x; t < len; t += (u64)gridDim.x * blockDim.x)
        atomicAdd(&acc[targets[t]], coef);
}
extern "C" __global__ void count_add_encoded(const int* targets, u64 len, u32 coef, u32* acc) {
    for (u64 t = blockIdx.x * (u64)blockDim.x + threadIdx.x; t < len; t += (u64)gridDim.x * blockDim.x) {
        int v = targets[t];
        atomicAdd(&acc[v < 0 ? ~v : v], coef);
    }
}
extern "C" __global__ void fill_u32(u32* out, u64 len, u32 value) {
    for (u64 t = blockIdx.x * (u64)blockDim.x + threadIdx.x; t < len; t += (u64)gridDim.x * blockDim.x)
        out[t] = value;
}

// Per-node off-diagonal row lengths from the per-simplex counts (count - 1).
extern "C" __global__ void row_lengths(u32 n, u32 b0, u32 b1, u32 b2, u32 b3, u32 per1, u32 per2, u32 per3,
                                       const u32* c0, const u32* c1, const u32* c2, const u32* c3, u32* len) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 c;
    if (i >= b3) c = c3[(i - b3) / per3];
    else if (i >= b2) c = c2[(i - b2) / per2];
    else if (i >= b1) c = c1[(i - b1) / per1];
    else c = c0[i - b0];
    len[i] = c - 1;
}

// dst[i] = src[idx[i]] (the counts of a row subset's rows).
extern "C" __global__ void gather_u32(u32 n, const u32* idx, const u32* src, u32* dst) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[idx[i]];
}

// Bin widths: the maximum row length of each bin of 32 rows by a warp shuffle reduction,
// times 32 (slots of the bin). One warp per bin; the last bin's lanes past n count 0.
extern "C" __global__ void bin_slots(const u32* len, u32 n, u32 nbins, u32* slots) {
    u32 warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    u32 lane = threadIdx.x % 32;
    if (warp >= nbins) return;
    u32 row = warp * BIN + lane;
    u32 v = row < n ? len[row] : 0;
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) slots[warp] = v * BIN;
}

__device__ __forceinline__ void set_error(u32* err, u32 code) { atomicCAS(err, 0u, code); }

// Column indices by sorted insertion (§4.4.3): one thread per row, the first 63 columns in
// shared memory; from the 64th on, the list moves to its global slots and grows there.
// err: 1 + row of the first row whose columns do not end at the Eq. 4.6 count.
extern "C" __global__ void fill_columns(u32 n, const u32* bin_offsets, const u32* len, const u32* nc_off, const int* nc_cells,
                                        const u32* cell_nodes, u32 m, u32* cols, u32* err) {
    extern __shared__ u32 local_all[];
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32* local = local_all + threadIdx.x * LOCAL_SLOTS;
    u32 lane = i % BIN;
    u32* gcol = cols + bin_offsets[i / BIN] + lane;
    u32 expected = len[i];
    u32 count = 0;
    bool in_global = false;
    for (u32 t = nc_off[i]; t < nc_off[i + 1]; ++t) {
        u32 c = (u32)nc_cells[t];
        const u32* nodes = cell_nodes + (u64)c * m;
        for (u32 a = 0; a < m; ++a) {
            u32 j = nodes[a];
            if (j == i) continue;
            if (!in_global) {
                u32 lo = 0, hi = count;
                bool found = false;
                while (lo < hi) {
                    u32 mid = (lo + hi) / 2;
                    u32 v = local[mid];
                    if (v < j) lo = mid + 1; else if (v > j) hi = mid; else { found = true; break; }
                }
                if (found) continue;
                if (count < LOCAL_SLOTS) {
                    for (u32 k = count; k > lo; --k) local[k] = local[k - 1];
                    local[lo] = j;
                    ++count;
                    continue;
                }
                if (count >= expected) { set_error(err, i + 1); return; }
                for (u32 k = 0; k < count; ++k) gcol[k * BIN] = local[k];
                in_global = true;
            }
            u32 lo = 0, hi = count;
            bool found = false;
            while (lo < hi) {
                u32 mid = (lo + hi) / 2;
                u32 v = gcol[mid * BIN];
                if (v < j) lo = mid + 1; else if (v > j) hi = mid; else { found = true; break; }
            }
            if (found) continue;
            if (count >= expected) { set_error(err, i + 1); return; }
            for (u32 k = count; k > lo; --k) gcol[k * BIN] = gcol[(k - 1) * BIN];
            gcol[lo * BIN] = j;
            ++count;
        }
    }
    if (count != expected) { set_error(err, i + 1); return; }
    if (!in_global)
        for (u32 k = 0; k < count; ++k) gcol[k * BIN] = local[k];
}

// ----------------------------------------------------------------------------- elements

struct Geo {
    double vol;
    double g[4][3];
};

// CellGeometry::new (element.rs): volume and barycentric gradients. Returns false for a
// degenerate (or, d = 2, non-planar) cell.
template <int D>
__device__ bool geometry(const double* pos, const u32* cv, Geo& geo) {
    double v[4][3];
    for (int k = 0; k <= D; ++k)
        for (int q = 0; q < 3; ++q) v[k][q] = pos[3 * (u64)cv[k] + q];
    for (int k = 0; k < 4; ++k)
        for (int q = 0; q < 3; ++q) geo.g[k][q] = 0.0;
    if (D == 3) {
        double a[3], b[3], c[3];
        for (int q = 0; q < 3; ++q) { a[q] = v[1][q] - v[0][q]; b[q] = v[2][q] - v[0][q]; c[q] = v[3][q] - v[0][q]; }
        double r1[3] = {b[1] * c[2] - b[2] * c[1], b[2] * c[0] - b[0] * c[2], b[0] * c[1] - b[1] * c[0]};
        double r2[3] = {c[1] * a[2] - c[2] * a[1], c[2] * a[0] - c[0] * a[2], c[0] * a[1] - c[1] * a[0]};
        double r3[3] = {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
        double det = a[0] * r1[0] + a[1] * r1[1] + a[2] * r1[2];
        double vol = fabs(det) / 6.0;
        double na = sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
        double nb = sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2]);
        double nc = sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
        double s = fmax(fmax(na, nb), nc);
        if (!isfinite(vol) || fabs(det) <= 1e-13 * s * s * s) return false;
        for (int q = 0; q < 3; ++q) {
            geo.g[1][q] = r1[q] / det;
            geo.g[2][q] = r2[q] / det;
            geo.g[3][q] = r3[q] / det;
            geo.g[0][q] = -(geo.g[1][q] + geo.g[2][q] + geo.g[3][q]);
        }
        geo.vol = vol;
        return true;
    } else {
        double a0 = v[1][0] - v[0][0], a1 = v[1][1] - v[0][1], b0 = v[2][0] - v[0][0], b1 = v[2][1] - v[0][1];
        double e1[3] = {v[1][0] - v[0][0], v[1][1] - v[0][1], v[1][2] - v[0][2]};
        double e2[3] = {v[2][0] - v[0][0], v[2][1] - v[0][1], v[2][2] - v[0][2]};
        double s = fmax(sqrt(e1[0] * e1[0] + e1[1] * e1[1] + e1[2] * e1[2]), sqrt(e2[0] * e2[0] + e2[1] * e2[1] + e2[2] * e2[2]));
        if (fabs(e1[2]) > 1e-12 * s || fabs(e2[2]) > 1e-12 * s) return false;
        double det = a0 * b1 - a1 * b0;
        double vol = fabs(det) / 2.0;
        if (!isfinite(vol) || fabs(det) <= 1e-13 * s * s) return false;
        geo.g[1][0] = b1 / det; geo.g[1][1] = -b0 / det;
        geo.g[2][0] = -a1 / det; geo.g[2][1] = a0 / det;
        geo.g[0][0] = -(geo.g[1][0] + geo.g[2][0]);
        geo.g[0][1] = -(geo.g[1][1] + geo.g[2][1]);
        geo.vol = vol;
        return true;
    }
}

// Stiffness block K_ab (ElementTemplate::stiffness_block): G = Σ W_abij |T| b_i b_jᵀ,
// K = λ G + μ (Gᵀ + tr G I). w: the (d+1)² weights of (a, b).
template <int D>
__device__ void stiffness_block(const Geo& geo, const double* w, bool diag, double lambda, double mu, double* out) {
    const int NV = D + 1, E = D;
    double gm[9];
    for (int q = 0; q < E * E; ++q) gm[q] = 0.0;
    for (int i = 0; i < NV; ++i)
        for (int j = 0; j < NV; ++j) {
            double wij = w[i * NV + j];
            if (wij != 0.0)
                for (int k = 0; k < E; ++k)
                    for (int l = 0; l < E; ++l) gm[k * E + l] += wij * (geo.vol * geo.g[i][k] * geo.g[j][l]);
        }
    if (diag)
        for (int k = 0; k < E; ++k)
            for (int l = k + 1; l < E; ++l) {
                double v = 0.5 * (gm[k * E + l] + gm[l * E + k]);
                gm[k * E + l] = v;
                gm[l * E + k] = v;
            }
    double tr = 0.0;
    for (int k = 0; k < E; ++k) tr += gm[k * E + k];
    for (int k = 0; k < E; ++k)
        for (int l = 0; l < E; ++l) {
            double v = lambda * gm[k * E + l] + mu * gm[l * E + k];
            if (k == l) v += mu * tr;
            out[k * E + l] = v;
        }
}

// Symmetric element matrices, one warp per cell (lanes over the upper-triangle blocks,
// pairs[s] = a | b << 16): stiffness (op 0, weights stiff_w[(a m + b)(d+1)² + i(d+1) + j])
// or consistent mass (op 1, weights mass_w[a m + b], λ = ρ).
template <typename T, int D>
__device__ void element_matrices(u32 ncells, const double* pos, const u32* cv, const double* weights, const u32* pairs, u32 m,
                                 u32 nsym, u32 op, double lambda, double mu, T* out, u32* err) {
    const int NV = D + 1, E2 = D * D;
    u64 c = (blockIdx.x * (u64)blockDim.x + threadIdx.x) / 32;
    u32 lane = threadIdx.x % 32;
    if (c >= ncells) return;
    Geo geo;
    if (!geometry<D>(pos, cv + c * NV, geo)) {
        if (lane == 0) set_error(err, (u32)c + 1);
        return;
    }
    T* dst = out + c * (u64)nsym * E2;
    for (u32 s = lane; s < nsym; s += 32) {
        u32 a = pairs[s] & 0xffffu, b = pairs[s] >> 16;
        double blk[9];
        if (op == 0) {
            stiffness_block<D>(geo, weights + (u64)(a * m + b) * NV * NV, a == b, lambda, mu, blk);
        } else {
            double v = lambda * geo.vol * weights[a * m + b];
            for (int q = 0; q < E2; ++q) blk[q] = 0.0;
            for (int k = 0; k < D; ++k) blk[k * D + k] = v;
        }
        for (int q = 0; q < E2; ++q) dst[(u64)s * E2 + q] = (T)blk[q];
    }
}

__device__ __forceinline__ u32 sym_index(u32 a, u32 b, u32 m) { return a * (2 * m - a + 1) / 2 + (b - a); }

// Binary search of column j among the row's sorted columns (strided by the bin size).
__device__ __forceinline__ int find_col(const u32* gcol, u32 len, u32 j) {
    u32 lo = 0, hi = len;
    while (lo < hi) {
        u32 mid = (lo + hi) / 2;
        u32 v = gcol[mid * BIN];
        if (v < j) lo = mid + 1; else if (v > j) hi = mid; else return (int)mid;
    }
    return -1;
}

// Per-node summation (§4.4.4): one thread per block row (a warp per bin), walking the
// node -> cells map; cells ascending, then local node, as the CPU reference. Each thread
// owns its row's slots and diagonal block, so no atomics are needed.
// mode 0: stored element matrices (elts); mode 1: inline p = 1 stiffness from the vertices.
template <typename T, int D>
__device__ void sum_per_node(u32 n, const u32* bin_offsets, const u32* len, const u32* cols, const u32* nc_off, const int* nc_cells,
                             const u32* cell_nodes, u32 m, const T* elts, u32 mode, const double* pos, const u32* cv, double lambda,
                             double mu, T* vals, T* diag, u32* err) {
    const int E = D, E2 = D * D;
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 b = i / BIN, lane = i % BIN;
    u32 base = bin_offsets[b];
    u32 w32 = bin_offsets[b + 1] - base;
    const u32* gcol = cols + base + lane;
    T* gval = vals + (u64)base * E2 + lane;
    u32 rl = len[i];
    u32 nsym = m * (m + 1) / 2;
    T dacc[9];
    for (int q = 0; q < E2; ++q) dacc[q] = (T)0;
    for (u32 t = nc_off[i]; t < nc_off[i + 1]; ++t) {
        u32 c = (u32)nc_cells[t];
        const u32* nodes = cell_nodes + (u64)c * m;
        u32 a = m;
        for (u32 q = 0; q < m; ++q)
            if (nodes[q] == i) { a = q; break; }
        if (a == m) { set_error(err, i + 1); return; }
        Geo geo;
        if (mode == 1 && !geometry<D>(pos, cv + (u64)c * (D + 1), geo)) { set_error(err, i + 1); return; }
        for (u32 bl = 0; bl < m; ++bl) {
            u32 j = nodes[bl];
            T blk[9];
            if (mode == 0) {
                u32 lo = a <= bl ? a : bl, hi = a <= bl ? bl : a;
                const T* s = elts + ((u64)c * nsym + sym_index(lo, hi, m)) * E2;
                for (int k = 0; k < E; ++k)
                    for (int l = 0; l < E; ++l) blk[k * E + l] = a <= bl ? s[k * E + l] : s[l * E + k];
            } else {
                // p = 1: W_abij = δ_ai δ_bj; the lower blocks as transposes of the upper ones
                double w[16];
                u32 lo = a <= bl ? a : bl, hi = a <= bl ? bl : a;
                for (int q = 0; q < (D + 1) * (D + 1); ++q) w[q] = 0.0;
                w[lo * (D + 1) + hi] = 1.0;
                double tmp[9];
                stiffness_block<D>(geo, w, lo == hi, lambda, mu, tmp);
                for (int k = 0; k < E; ++k)
                    for (int l = 0; l < E; ++l) blk[k * E + l] = (T)(a <= bl ? tmp[k * E + l] : tmp[l * E + k]);
            }
            if (j == i) {
                for (int q = 0; q < E2; ++q) dacc[q] += blk[q];
            } else {
                int k = find_col(gcol, rl, j);
                if (k < 0) { set_error(err, i + 1); return; }
                u32 s = (u32)k * BIN;
                for (int q = 0; q < E2; ++q) gval[(u64)q * w32 + s] += blk[q];
            }
        }
    }
    for (int q = 0; q < E2; ++q) diag[(u64)i * E2 + q] = dacc[q];
}

// Per-entry contribution lists (§4.4.4): the same visit as the per-node summation; pass 0
// counts contributions per off-diagonal slot and per diagonal block, pass 1 fills the codes
// (cell · m(m+1)/2 + sym) << 1 | transposed at the scanned offsets, in visit order.
extern "C" __global__ void entry_maps(u32 pass, u32 n, const u32* bin_offsets, const u32* len, const u32* cols, const u32* nc_off,
                                      const int* nc_cells, const u32* cell_nodes, u32 m, u32* off_counts, u32* diag_counts,
                                      const u32* off_offsets, const u32* diag_offsets, u32* off_codes, u32* diag_codes, u32* err) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 b = i / BIN, lane = i % BIN;
    u32 base = bin_offsets[b];
    const u32* gcol = cols + base + lane;
    u32 rl = len[i];
    u32 nsym = m * (m + 1) / 2;
    u32 dcur = pass == 1 ? diag_offsets[i] : 0;
    for (u32 t = nc_off[i]; t < nc_off[i + 1]; ++t) {
        u32 c = (u32)nc_cells[t];
        const u32* nodes = cell_nodes + (u64)c * m;
        u32 a = m;
        for (u32 q = 0; q < m; ++q)
            if (nodes[q] == i) { a = q; break; }
        if (a == m) { set_error(err, i + 1); return; }
        for (u32 bl = 0; bl < m; ++bl) {
            u32 j = nodes[bl];
            u32 lo = a <= bl ? a : bl, hi = a <= bl ? bl : a;
            u32 code = ((c * nsym + sym_index(lo, hi, m)) << 1) | (a <= bl ? 0u : 1u);
            if (j == i) {
                if (pass == 0) diag_counts[i] += 1; else diag_codes[dcur++] = code;
            } else {
                int k = find_col(gcol, rl, j);
                if (k < 0) { set_error(err, i + 1); return; }
                u32 s = base + (u32)k * BIN + lane;
                // one thread owns every slot of its row: a plain counter per slot
                if (pass == 0) off_counts[s] += 1; else off_codes[off_offsets[s] + off_counts[s]++] = code;
            }
        }
    }
}

// Per-entry summation: one thread per off-diagonal slot (coalesced over the bin's lanes)
// sums its list in registers and writes the entry once; then one thread per diagonal block.
template <typename T, int D>
__device__ void gather(const u32* list, u32 cnt, const T* elts, T* acc) {
    const int E = D, E2 = D * D;
    for (int q = 0; q < E2; ++q) acc[q] = (T)0;
    for (u32 t = 0; t < cnt; ++t) {
        u32 code = list[t];
        const T* s = elts + (u64)(code >> 1) * E2;
        if ((code & 1) == 0) {
            for (int q = 0; q < E2; ++q) acc[q] += s[q];
        } else {
            for (int k = 0; k < E; ++k)
                for (int l = 0; l < E; ++l) acc[k * E + l] += s[l * E + k];
        }
    }
}
template <typename T, int D>
__device__ void sum_per_entry(u32 nslots, u32 nbins, const u32* bin_offsets, const u32* off_offsets, const u32* off_codes, const T* elts,
                              T* vals) {
    const int E2 = D * D;
    u32 s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= nslots) return;
    u32 lo = off_offsets[s], hi = off_offsets[s + 1];
    if (lo == hi) return;
    // bin of slot s: binary search over the bin offsets
    u32 l = 0, h = nbins;
    while (h - l > 1) {
        u32 mid = (l + h) / 2;
        if (bin_offsets[mid] <= s) l = mid; else h = mid;
    }
    u32 base = bin_offsets[l], w32 = bin_offsets[l + 1] - base;
    T acc[9];
    gather<T, D>(off_codes + lo, hi - lo, elts, acc);
    for (int q = 0; q < E2; ++q) vals[(u64)base * E2 + (u64)q * w32 + (s - base)] = acc[q];
}
template <typename T, int D>
__device__ void sum_per_entry_diag(u32 n, const u32* diag_offsets, const u32* diag_codes, const T* elts, T* diag) {
    const int E2 = D * D;
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T acc[9];
    gather<T, D>(diag_codes + diag_offsets[i], diag_offsets[i + 1] - diag_offsets[i], elts, acc);
    for (int q = 0; q < E2; ++q) diag[(u64)i * E2 + q] = acc[q];
}

// ----------------------------------------------------------------------------- wrappers

#define ELEMENT_WRAPPERS(T, TN, D)                                                                                                  \
    extern "C" __global__ void element_matrices_##TN##_##D(u32 ncells, const double* pos, const u32* cv, const double* weights,    \
                                                           const u32* pairs, u32 m, u32 nsym, u32 op, double lambda, double mu,    \
                                                           T* out, u32* err) {                                                     \
        element_matrices<T, D>(ncells, pos, cv, weights, pairs, m, nsym, op, lambda, mu, out, err);                                \
    }                                                                                                                              \
    extern "C" __global__ void sum_per_node_##TN##_##D(u32 n, const u32* bin_offsets, const u32* len, const u32* cols,             \
                                                       const u32* nc_off, const int* nc_cells, const u32* cell_nodes, u32 m,       \
                                                       const T* elts, u32 mode, const double* pos, const u32* cv, double lambda,   \
                                                       double mu, T* vals, T* diag, u32* err) {                                    \
        sum_per_node<T, D>(n, bin_offsets, len, cols, nc_off, nc_cells, cell_nodes, m, elts, mode, pos, cv, lambda, mu, vals, diag, \
                           err);                                                                                                   \
    }                                                                                                                              \
    extern "C" __global__ void sum_per_entry_##TN##_##D(u32 nslots, u32 nbins, const u32* bin_offsets, const u32* off_offsets,     \
                                                        const u32* off_codes, const T* elts, T* vals) {                            \
        sum_per_entry<T, D>(nslots, nbins, bin_offsets, off_offsets, off_codes, elts, vals);                                       \
    }                                                                                                                              \
    extern "C" __global__ void sum_per_entry_diag_##TN##_##D(u32 n, const u32* diag_offsets, const u32* diag_codes, const T* elts, \
                                                             T* diag) {                                                            \
        sum_per_entry_diag<T, D>(n, diag_offsets, diag_codes, elts, diag);                                                         \
    }


ELEMENT_WRAPPERS(float, f32, 2)
ELEMENT_WRAPPERS(float, f32, 3)
ELEMENT_WRAPPERS(double, f64, 2)
ELEMENT_WRAPPERS(double, f64, 3)
