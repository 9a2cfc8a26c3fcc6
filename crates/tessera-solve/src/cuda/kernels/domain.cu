
// ----------------------------------------------------------------------------- domain decomposition
// Halo exchange and the partitioned PCG of a domain-decomposed operator (dissertation §7.1.2).
// Vectors of a domain are node-major with e components per node: its owned nodes first, then
// its halo nodes (owned by neighbours). Index lists are local node numbers.

// Pack: buf[i e + c] = x[idx[i] e + c] for i < count (the owned values a neighbour needs,
// gathered into a contiguous send buffer).
extern "C" __global__ void halo_pack(u32 count, u32 e, const u32* idx, const double* x, double* buf) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (u64)count * e) return;
    u32 i = (u32)(t / e), c = (u32)(t % e);
    buf[t] = x[(u64)idx[i] * e + c];
}

// Unpack: x[idx[i] e + c] = buf[i e + c] (received values scattered into the halo part).
extern "C" __global__ void halo_unpack(u32 count, u32 e, const u32* idx, const double* buf, double* x) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (u64)count * e) return;
    u32 i = (u32)(t / e), c = (u32)(t % e);
    x[(u64)idx[i] * e + c] = buf[t];
}

// y = A x for the block rows of bins first .. first + nb of a domain's Bin-BCSR* matrix
// (Listing 4.1, dynamic warp scheduling over the bin range when `persistent`: resident warps
// take bins from bin_counter until none is left; otherwise warp w of the grid multiplies bin
// first + w and its block retires, which frees the multiprocessor for other streams' work):
// columns j < n are owned nodes,
// read from xo; the others are halo nodes j - n, read from xh. The interior bins (rows with
// owned columns only) run before the halo exchange has delivered xh, the boundary bins after.
// Same summation order as spmv<double, E>.
template <int E>
__device__ void dd_spmv(u32 n, u32 first, u32 nb, const u32* bin_offsets, const u32* len, const u32* cols, const double* vals,
                        const double* diag, const double* xo, const double* xh, double* y, u32* bin_counter, u32 persistent) {
    const int E2 = E * E;
    u32 lane = threadIdx.x % 32;
    for (u32 round = 0;; ++round) {
        u32 k = 0;
        if (persistent) {
            if (lane == 0) k = atomicAdd(bin_counter, 1u);
            k = __shfl_sync(0xffffffffu, k, 0);
        } else {
            if (round > 0) return;
            k = (u32)(((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32);
        }
        if (k >= nb) return;
        u32 b = first + k;
        u32 i = b * BIN + lane;
        if (i < n) {
            u32 base = bin_offsets[b];
            u32 w32 = bin_offsets[b + 1] - base;
            double acc[E];
            const double* d = diag + (u64)i * E2;
            for (int r = 0; r < E; ++r) {
                acc[r] = 0.0;
                for (int l = 0; l < E; ++l) acc[r] += d[r * E + l] * xo[(u64)i * E + l];
            }
            const u32* gcol = cols + base + lane;
            const double* gval = vals + (u64)base * E2 + lane;
            u32 rl = len[i];
            for (u32 kk = 0; kk < rl; ++kk) {
                u32 s = kk * BIN;
                u32 j = __ldg(gcol + s);
                const double* xs = j < n ? xo + (u64)j * E : xh + (u64)(j - n) * E;
                double xj[E];
                for (int l = 0; l < E; ++l) xj[l] = __ldg(xs + l);
                for (int r = 0; r < E; ++r)
                    for (int l = 0; l < E; ++l) acc[r] += __ldg(gval + (u64)(r * E + l) * w32 + s) * xj[l];
            }
            for (int r = 0; r < E; ++r) y[(u64)i * E + r] = acc[r];
        }
    }
}
#define DD_SPMV_WRAPPER(E)                                                                                                          \
    extern "C" __global__ void dd_spmv_##E(u32 n, u32 first, u32 nb, const u32* bin_offsets, const u32* len, const u32* cols,     \
                                           const double* vals, const double* diag, const double* xo, const double* xh, double* y,  \
                                           u32* bin_counter, u32 persistent) {                                                     \
        dd_spmv<E>(n, first, nb, bin_offsets, len, cols, vals, diag, xo, xh, y, bin_counter, persistent);                           \
    }
DD_SPMV_WRAPPER(1)
DD_SPMV_WRAPPER(2)
DD_SPMV_WRAPPER(3)

// Partitioned PCG, one domain's owned part. The vector kernels are the one-domain PCG's
// (pcg_filter_dot_partial, pcg_update_precond_partial, pcg_update_partial, pcg_direction_dev,
// dot_final_dev, dot_final2_dev: scalars read from the device state st, gated by status);
// the partial sums of domain d go to slot s k + d of the device's slot buffer, and after the
// all-reduce across devices dd_sum_slots adds them in domain order on every device.
// out[s] = sum over domains d = 0 .. k-1, in that order, of red[s k + d], for the slots
// s = s0 .. s0 + ns - 1 (one thread per slot): the global sums of the iteration, the same on
// every device whatever the placement of the domains.
extern "C" __global__ void dd_sum_slots(u32 k, const double* red, double* out, u32 s0, u32 ns, const u32* status) {
    if (status[0] || threadIdx.x >= ns) return;
    u32 s = s0 + threadIdx.x;
    double acc = 0.0;
    for (u32 d = 0; d < k; ++d) acc += red[(u64)s * k + d];
    out[s] = acc;
}

// The filtered owned-owned block S A_oo S + (I - S) of a domain's Bin-BCSR* matrix of 3 x 3 blocks
// (halo columns j >= n dropped) as block CSR, the device counterpart of
// DomainMatrix::owned_block_filtered: counts (owned columns + the diagonal), then the copy with
// filtered_copy's layout (sorted columns, the diagonal block in its sorted place). Columns of a row
// are ascending and halo columns follow the owned ones.
extern "C" __global__ void dd_owned_counts(u32 n, const u32* bin_offsets, const u32* row_lengths, const u32* col_indices,
                                           u32* counts) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64 b = i / 32, lane = i % 32;
    u64 base = bin_offsets[b];
    u32 len = row_lengths[i], c = 0;
    while (c < len && col_indices[base + (u64)c * 32 + lane] < n) ++c;
    counts[i] = c + 1;
}
extern "C" __global__ void dd_owned_filtered_copy(u32 n, const u32* bin_offsets, const u32* row_lengths, const u32* col_indices,
                                                  const double* values, const double* diag, const unsigned char* fixed,
                                                  const u32* row_ptr, u32* cols, double* vals) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64 b = i / 32, lane = i % 32;
    u64 base = bin_offsets[b];
    u64 w32 = (u64)bin_offsets[b + 1] - base;
    u32 len = row_lengths[i];
    u64 at = row_ptr[i];
    const unsigned char* fi = fixed + i * 3;
    bool diag_done = false;
    for (u32 s = 0; s < len; ++s) {
        u64 slot = base + (u64)s * 32 + lane;
        u32 j = col_indices[slot];
        if (j >= n) break;
        if (!diag_done && (u64)j > i) {
            cols[at] = (u32)i;
            filtered_block(vals + at * 9, diag + i * 9, 1, true, fi, fi);
            ++at;
            diag_done = true;
        }
        cols[at] = j;
        filtered_block(vals + at * 9, values + base * 9 + (slot - base), w32, false, fi, fixed + (u64)j * 3);
        ++at;
    }
    if (!diag_done) {
        cols[at] = (u32)i;
        filtered_block(vals + at * 9, diag + i * 9, 1, true, fi, fi);
    }
}
