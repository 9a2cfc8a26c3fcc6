// Row sorts and block scans shared by the primitives and the mesh kernels: one definition,
// prepended to both modules' sources (tessera_gpu::primitives::PRELUDE). Keys by `mode`: 0
// unsigned, 1 signed 32-bit, 2 TCSR entries by decoded column, -c before +c
// (SegOrder::TcsrColumn); keys map back to values one to one, so an unstable network gives
// the one sorted order.
typedef unsigned int u32;
typedef int i32;

__device__ __forceinline__ u32 seg_key(u32 v, u32 mode) {
    if (mode == 0) return v;
    if (mode == 1) return v ^ 0x80000000u;
    u32 s = (u32)((i32)v >> 31);
    u32 c = v ^ s;
    return (c << 1) | (s == 0u ? 1u : 0u);
}
__device__ __forceinline__ u32 seg_unkey(u32 k, u32 mode) {
    if (mode == 0) return k;
    if (mode == 1) return k ^ 0x80000000u;
    u32 c = k >> 1;
    return (k & 1u) ? c : ~c;
}
// Insertion sort of vals[a..b) by one thread, in place.
__device__ __forceinline__ void thread_sort_row(u32* vals, u32 a, u32 b, u32 mode) {
    for (u32 j = a + 1; j < b; j++) {
        u32 x = vals[j];
        u32 kx = seg_key(x, mode);
        u32 p = j;
        while (p > a && seg_key(vals[p - 1], mode) > kx) {
            vals[p] = vals[p - 1];
            p--;
        }
        vals[p] = x;
    }
}
// Bitonic sort of vals[a..a + n) by the whole block through the shared keys `sh` (room for
// n rounded up to a power of two). Ends with the block in sync.
__device__ void block_sort_row(u32* vals, u32 a, u32 n, u32 mode, u32* sh) {
    u32 p = 1;
    while (p < n) p <<= 1;
    for (u32 i = threadIdx.x; i < p; i += blockDim.x) sh[i] = i < n ? seg_key(vals[a + i], mode) : 0xffffffffu;
    __syncthreads();
    for (u32 k = 2; k <= p; k <<= 1) {
        for (u32 j = k >> 1; j > 0; j >>= 1) {
            for (u32 i = threadIdx.x; i < p; i += blockDim.x) {
                u32 ixj = i ^ j;
                if (ixj > i) {
                    u32 x = sh[i], y = sh[ixj];
                    bool up = (i & k) == 0;
                    if ((x > y) == up) {
                        sh[i] = y;
                        sh[ixj] = x;
                    }
                }
            }
            __syncthreads();
        }
    }
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) vals[a + i] = seg_unkey(sh[i], mode);
    __syncthreads();
}

// The middle class of the row sorts, one block per row: of rows [0, nrows), those of more
// than `short_row` and at most `mid_row` entries (`sh` holds mid_row keys), each block
// looking at blockDim.x rows at a time (listed in the shared `list` of blockDim.x words and
// its count `*nlist`) and sorting each listed row with block_sort_row. A longer row is left
// as it is and raises *flag with a plain store when `flag` is given (it may be mapped host
// memory). The mesh transposes' tsort_mid_rows and the primitives' segsort_mid_rows.
__device__ void block_sort_mid_rows(u32* vals, const u32* offs, unsigned long long nrows, u32 mode, u32 short_row,
                                    u32 mid_row, u32* flag, u32* sh, u32* list, u32* nlist) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long r0 = (unsigned long long)blockIdx.x * blockDim.x; r0 < nrows; r0 += stride) {
        if (threadIdx.x == 0) *nlist = 0;
        __syncthreads();
        unsigned long long r = r0 + threadIdx.x;
        if (r < nrows) {
            u32 n = offs[r + 1] - offs[r];
            if (n > mid_row) {
                if (flag) *flag = 1u;
            } else if (n > short_row) {
                list[atomicAdd(nlist, 1u)] = threadIdx.x;
            }
        }
        __syncthreads();
        u32 m = *nlist;
        for (u32 q = 0; q < m; q++) {
            unsigned long long row = r0 + list[q];
            block_sort_row(vals, offs[row], offs[row + 1] - offs[row], mode, sh);
        }
        __syncthreads();
    }
}

// Inclusive scan of one value per lane over a full warp (shuffles).
template <typename T>
__device__ __forceinline__ T warp_inclusive_scan(T x, int lane) {
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        T y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    return x;
}

// Exclusive scan of one value per thread over a group of 32 WARPS threads that share a barrier:
// `warp` is this thread's warp within the group and `sync()` the group's barrier (the whole
// block's __syncthreads, or a named barrier of part of it); `*total` receives the group total.
// `ws` is shared scratch of WARPS + 1 elements, the group's own; it may be reused as soon as
// this returns.
template <typename T, int WARPS, class Sync>
__device__ __forceinline__ T group_exclusive_scan(T x, T* total, T* ws, int warp, Sync sync) {
    const int lane = threadIdx.x & 31;
    T inc = warp_inclusive_scan<T>(x, lane);
    if (lane == 31) ws[warp] = inc;
    sync();
    if (warp == 0) {
        T w = lane < WARPS ? ws[lane] : T(0);
        T wi = warp_inclusive_scan<T>(w, lane);
        if (lane < WARPS) ws[lane] = wi - w;
        if (lane == WARPS - 1) ws[WARPS] = wi;
    }
    sync();
    T r = ws[warp] + inc - x;
    *total = ws[WARPS];
    sync();
    return r;
}

// Block-wide exclusive scan of one value per thread, for blocks of 32 WARPS threads (by default
// 256, the block size of the primitives and of the mesh kernels; the bucketed transpose uses
// 1024): group_exclusive_scan over the whole block.
#define SCAN_WARPS 8
template <typename T, int WARPS = SCAN_WARPS>
__device__ __forceinline__ T block_exclusive_scan(T x, T* total, T* ws) {
    return group_exclusive_scan<T, WARPS>(x, total, ws, (int)(threadIdx.x >> 5), [] { __syncthreads(); });
}

template <typename T>
__device__ __forceinline__ T block_sum(T x, T* ws) {
    T total;
    block_exclusive_scan<T>(x, &total, ws);
    return total;
}
