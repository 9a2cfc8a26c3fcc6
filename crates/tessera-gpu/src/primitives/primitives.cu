// Tessera GPU primitives (dissertation §3.4.1: count -> scan -> fill; sort, mark, compact).
// Hand-written, no CUB, so NVRTC compiles this file with no headers. Block size 256
// everywhere; sizes are 64-bit; every kernel is extern "C" with a type suffix.
typedef unsigned int u32;
typedef unsigned long long u64;
typedef int i32;

#define BLOCK 256
#define NWARPS (BLOCK / 32)
#define ITEMS 8
#define TILE (BLOCK * ITEMS)

// ---------------------------------------------------------------- scan
// Pass 1: the sum of each TILE-element tile.
template <typename T>
__device__ void scan_tile_sums(const T* in, u64 n, T* sums) {
    __shared__ T ws[NWARPS + 1];
    u64 base = (u64)blockIdx.x * TILE;
    T acc = 0;
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        u64 i = base + (u64)k * BLOCK + threadIdx.x;
        if (i < n) acc += in[i];
    }
    T t = block_sum<T>(acc, ws);
    if (threadIdx.x == 0) sums[blockIdx.x] = t;
}

// Pass 2: scan each tile, adding the scanned tile offset. In-place (out == in) is allowed:
// a block reads its whole tile into shared memory before writing it.
// write_total: the last block also writes the grand total to out[n].
template <typename T>
__device__ void scan_tiles(const T* in, T* out, u64 n, const T* tile_offsets, u32 has_offsets, u32 inclusive,
                           u32 write_total) {
    __shared__ T sh[TILE];
    __shared__ T ws[NWARPS + 1];
    u64 base = (u64)blockIdx.x * TILE;
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        u64 i = base + (u64)k * BLOCK + threadIdx.x;
        sh[k * BLOCK + threadIdx.x] = i < n ? in[i] : T(0);
    }
    __syncthreads();
    T v[ITEMS];
    T acc = 0;
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        v[k] = sh[threadIdx.x * ITEMS + k];
        acc += v[k];
    }
    T total;
    T pre = block_exclusive_scan<T>(acc, &total, ws);
    T off = has_offsets ? tile_offsets[blockIdx.x] : T(0);
    pre += off;
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        T x = v[k];
        sh[threadIdx.x * ITEMS + k] = inclusive ? pre + x : pre;
        pre += x;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        u64 i = base + (u64)k * BLOCK + threadIdx.x;
        if (i < n) out[i] = sh[k * BLOCK + threadIdx.x];
    }
    if (write_total && blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) out[n] = off + total;
}

#define SCAN_INSTANCES(T, S)                                                                                   \
    extern "C" __global__ void __launch_bounds__(BLOCK) scan_tile_sums_##S(const T* in, u64 n, T* sums) {      \
        scan_tile_sums<T>(in, n, sums);                                                                        \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(BLOCK)                                                        \
        scan_tiles_##S(const T* in, T* out, u64 n, const T* offs, u32 has_offs, u32 inclusive, u32 write_total) { \
        scan_tiles<T>(in, out, n, offs, has_offs, inclusive, write_total);                                     \
    }
SCAN_INSTANCES(u32, u32)
SCAN_INSTANCES(u64, u64)

// ---------------------------------------------------------------- reduction
// Grid-stride partial sums (one per block), accumulated in type A.
template <typename T, typename A>
__device__ void reduce_sum(const T* in, u64 n, A* partials) {
    __shared__ A ws[NWARPS + 1];
    A acc = 0;
    for (u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (u64)gridDim.x * BLOCK) acc += (A)in[i];
    A t = block_sum<A>(acc, ws);
    if (threadIdx.x == 0) partials[blockIdx.x] = t;
}
extern "C" __global__ void __launch_bounds__(BLOCK) reduce_sum_u32(const u32* in, u64 n, u64* partials) {
    reduce_sum<u32, u64>(in, n, partials);
}
extern "C" __global__ void __launch_bounds__(BLOCK) reduce_sum_u64(const u64* in, u64 n, u64* partials) {
    reduce_sum<u64, u64>(in, n, partials);
}
extern "C" __global__ void __launch_bounds__(BLOCK) reduce_sum_f64(const double* in, u64 n, double* partials) {
    reduce_sum<double, double>(in, n, partials);
}
// Maximum (unsigned) with grid-stride partials.
extern "C" __global__ void __launch_bounds__(BLOCK) reduce_max_u32(const u32* in, u64 n, u32* partials) {
    __shared__ u32 ws[NWARPS];
    u32 m = 0;
    for (u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (u64)gridDim.x * BLOCK) m = max(m, in[i]);
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_down_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < NWARPS; w++) m = max(m, ws[w]);
        partials[blockIdx.x] = m;
    }
}
// Longest row of a CSR offsets array (nrows + 1 entries), grid-stride partials.
extern "C" __global__ void __launch_bounds__(BLOCK) row_len_max(const u32* offsets, u64 nrows, u32* partials) {
    __shared__ u32 ws[NWARPS];
    u32 m = 0;
    for (u64 r = (u64)blockIdx.x * BLOCK + threadIdx.x; r < nrows; r += (u64)gridDim.x * BLOCK)
        m = max(m, offsets[r + 1] - offsets[r]);
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_down_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < NWARPS; w++) m = max(m, ws[w]);
        partials[blockIdx.x] = m;
    }
}

// ---------------------------------------------------------------- compaction
// out[pos[i]] = in[i] where flags[i] != 0 (pos = exclusive scan of flags as 0/1).
template <typename W>
__device__ void compact_scatter(const W* in, const u32* flags, const u32* pos, u64 n, W* out) {
    u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n && flags[i]) out[pos[i]] = in[i];
}
extern "C" __global__ void compact_scatter_b32(const u32* in, const u32* flags, const u32* pos, u64 n, u32* out) {
    compact_scatter<u32>(in, flags, pos, n, out);
}
extern "C" __global__ void compact_scatter_b64(const u64* in, const u32* flags, const u32* pos, u64 n, u64* out) {
    compact_scatter<u64>(in, flags, pos, n, out);
}
extern "C" __global__ void compact_indices(const u32* flags, const u32* pos, u64 n, u32* out) {
    u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n && flags[i]) out[pos[i]] = (u32)i;
}
// Normalise arbitrary flags to 0/1.
extern "C" __global__ void flags_to_01(const u32* flags, u64 n, u32* out) {
    u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = flags[i] != 0;
}

// ---------------------------------------------------------------- histogram
// Keys >= nbins are ignored. Shared-memory privatised bins (nbins * 4 bytes dynamic shared).
extern "C" __global__ void __launch_bounds__(BLOCK) histogram_shared(const u32* keys, u64 n, u32* bins, u32 nbins) {
    extern __shared__ u32 h[];
    for (u32 b = threadIdx.x; b < nbins; b += BLOCK) h[b] = 0;
    __syncthreads();
    for (u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (u64)gridDim.x * BLOCK) {
        u32 k = keys[i];
        if (k < nbins) atomicAdd(&h[k], 1u);
    }
    __syncthreads();
    for (u32 b = threadIdx.x; b < nbins; b += BLOCK)
        if (h[b]) atomicAdd(&bins[b], h[b]);
}
extern "C" __global__ void __launch_bounds__(BLOCK) histogram_global(const u32* keys, u64 n, u32* bins, u32 nbins) {
    for (u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (u64)gridDim.x * BLOCK) {
        u32 k = keys[i];
        if (k < nbins) atomicAdd(&bins[k], 1u);
    }
}

// ---------------------------------------------------------------- radix sort (LSD, 8-bit digits)
#define RADIX 256
#define RITEMS 16
#define RTILE (BLOCK * RITEMS)

// counts[d * nblocks + b] = number of keys of block b's tile with digit d.
template <typename K>
__device__ void radix_count(const K* keys, u64 n, u32 shift, u32* counts) {
    __shared__ u32 h[RADIX];
    for (int d = threadIdx.x; d < RADIX; d += BLOCK) h[d] = 0;
    __syncthreads();
    u64 base = (u64)blockIdx.x * RTILE;
#pragma unroll 4
    for (int k = 0; k < RITEMS; k++) {
        u64 i = base + (u64)k * BLOCK + threadIdx.x;
        if (i < n) atomicAdd(&h[(u32)(keys[i] >> shift) & (RADIX - 1)], 1u);
    }
    __syncthreads();
    for (int d = threadIdx.x; d < RADIX; d += BLOCK) counts[(u64)d * gridDim.x + blockIdx.x] = h[d];
}

// Stable scatter of one tile (RTILE keys), through shared memory so that the writes are
// coalesced: the tile is first ordered by digit in shared memory (tile positions only, 16
// bits each), then written out in that order, every digit's keys a contiguous run of the
// output (about RTILE / RADIX keys each) instead of one write per key. Warp w ranks the
// keys [w RITEMS 32, (w + 1) RITEMS 32) of the tile, 32 a step in order (lanes ranked with
// __match_any_sync, a running count per digit and warp in shared memory), so no block
// barrier is needed until the warps' counts are scanned: tile positions go by digit, then
// warp, then the warp's rank, which is the keys' order. `offsets` is the exclusive scan of
// radix_count's counts (digit major): entry (d, tile) is where the tile's run of digit d
// starts in the output.
template <typename K>
__device__ void radix_scatter(const K* kin, const u32* vin, K* kout, u32* vout, u32 has_vals, u64 n, u32 shift,
                              const u32* offsets) {
    static_assert(RADIX == BLOCK, "one digit per thread");
    static_assert(RTILE <= 65536, "tile positions are 16 bits");
    __shared__ u32 wc[NWARPS][RADIX];
    __shared__ u32 out_base[RADIX];
    __shared__ u32 ws[NWARPS + 1];
    __shared__ unsigned short order[RTILE];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u32 lt_mask = (1u << lane) - 1u;
    const u64 base = (u64)blockIdx.x * RTILE;
    const u32 tile_n = (u32)min((u64)RTILE, n - base);
    for (u32 d = lane; d < RADIX; d += 32) wc[warp][d] = 0;
    __syncwarp();
    // digit (bits 16..) and rank within the warp's range among keys of that digit (bits 0..15)
    u32 dr[RITEMS];
    const u32 w0 = warp * RITEMS * 32;
#pragma unroll
    for (int k = 0; k < RITEMS; k++) {  // every load of the warp's range in flight at once
        const u32 t = w0 + (u32)k * 32 + lane;
        dr[k] = t < tile_n ? ((u32)(kin[base + t] >> shift) & (RADIX - 1)) : (u32)RADIX;
    }
#pragma unroll
    for (int k = 0; k < RITEMS; k++) {
        const u32 t = w0 + (u32)k * 32 + lane;
        const bool valid = t < tile_n;
        const u32 d = dr[k];
        const u32 peers = __match_any_sync(0xffffffffu, d);
        const u32 leader = __ffs(peers) - 1;
        u32 before = 0;
        if (valid && lane == leader) {
            before = wc[warp][d];
            wc[warp][d] = before + __popc(peers);
        }
        before = __shfl_sync(0xffffffffu, before, leader);
        dr[k] = (d << 16) | (before + __popc(peers & lt_mask));
        __syncwarp();
    }
    __syncthreads();
    {
        const u32 d = threadIdx.x;
        u32 digit_n = 0;
        for (u32 w = 0; w < NWARPS; w++) digit_n += wc[w][d];
        u32 total;
        u32 start = block_exclusive_scan<u32>(digit_n, &total, ws);
        const u64 at = (u64)d * gridDim.x + blockIdx.x;
        out_base[d] = offsets[at] - start;  // modulo 2^32: out_base + tile position = output position
        for (u32 w = 0; w < NWARPS; w++) {
            const u32 c = wc[w][d];
            wc[w][d] = start;
            start += c;
        }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < RITEMS; k++) {
        const u32 t = w0 + (u32)k * 32 + lane;
        if (t < tile_n) order[wc[warp][dr[k] >> 16] + (dr[k] & 0xffffu)] = (unsigned short)t;
    }
    __syncthreads();
    for (u32 p = threadIdx.x; p < tile_n; p += BLOCK) {
        const u32 t = order[p];
        const K key = kin[base + t];
        const u32 dst = out_base[(u32)(key >> shift) & (RADIX - 1)] + p;
        kout[dst] = key;
        if (has_vals) vout[dst] = vin[base + t];
    }
}

#define RADIX_INSTANCES(K, S)                                                                                   \
    extern "C" __global__ void __launch_bounds__(BLOCK) radix_count_##S(const K* keys, u64 n, u32 shift, u32* counts) { \
        radix_count<K>(keys, n, shift, counts);                                                                 \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(BLOCK) radix_scatter_##S(const K* kin, const u32* vin, K* kout, \
                                                                       u32* vout, u32 has_vals, u64 n, u32 shift, \
                                                                       const u32* offsets) {                    \
        radix_scatter<K>(kin, vin, kout, vout, has_vals, n, shift, offsets);                                    \
    }
RADIX_INSTANCES(u32, u32)
RADIX_INSTANCES(u64, u64)

// ---------------------------------------------------------------- segmented sort of short rows
// Keys (seg_key, seg_unkey) and the row sorts come from prelude.cuh (tessera_gpu::primitives::PRELUDE).
// One thread per row, insertion sort in place (rows of up to a few dozen entries); rows
// longer than skip_above are left to segsort_mid_rows.
extern "C" __global__ void __launch_bounds__(BLOCK) segsort_rows(u32* vals, const u32* offsets, u64 nrows, u32 mode,
                                                                u32 skip_above) {
    u64 r = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (r >= nrows) return;
    u32 a = offsets[r], b = offsets[r + 1];
    if (b - a <= skip_above) thread_sort_row(vals, a, b, mode);
}
// Long rows: composite 64-bit keys (row << 32 | key) for a radix sort, payload = value.
extern "C" __global__ void __launch_bounds__(BLOCK) segsort_keys(const u32* vals, const u32* offsets, u64 nrows, u32 mode,
                                                                u64* keys) {
    u64 r = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (r >= nrows) return;
    for (u32 j = offsets[r]; j < offsets[r + 1]; j++) keys[j] = (r << 32) | (u64)seg_key(vals[j], mode);
}

// Rows of more than short_row and at most MID_ROW entries, one block per row
// (block_sort_mid_rows of prelude.cuh; the caller has checked that no row is longer).
#define MID_ROW 2048
extern "C" __global__ void __launch_bounds__(BLOCK) segsort_mid_rows(u32* vals, const u32* offsets, u64 nrows, u32 mode,
                                                                    u32 short_row) {
    __shared__ u32 sh[MID_ROW];
    __shared__ u32 list[BLOCK];
    __shared__ u32 nlist;
    block_sort_mid_rows(vals, offsets, nrows, mode, short_row, MID_ROW, nullptr, sh, list, &nlist);
}

// ---------------------------------------------------------------- unique
template <typename K>
__device__ void unique_flags(const K* keys, u64 n, u32* flags) {
    u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) flags[i] = (i == 0 || keys[i] != keys[i - 1]) ? 1u : 0u;
}
extern "C" __global__ void unique_flags_u32(const u32* keys, u64 n, u32* flags) { unique_flags<u32>(keys, n, flags); }
extern "C" __global__ void unique_flags_u64(const u64* keys, u64 n, u32* flags) { unique_flags<u64>(keys, n, flags); }
// ids[i] = index of the run element i belongs to = pos[i] + flags[i] - 1.
extern "C" __global__ void unique_ids(const u32* flags, const u32* pos, u64 n, u32* ids) {
    u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) ids[i] = pos[i] + flags[i] - 1u;
}

// ---------------------------------------------------------------- small helpers
extern "C" __global__ void iota_u32(u32* out, u64 n, u32 start) {
    u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = start + (u32)i;
}
extern "C" __global__ void fill_u32(u32* out, u64 n, u32 value) {
    u64 i = (u64)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = value;
}
