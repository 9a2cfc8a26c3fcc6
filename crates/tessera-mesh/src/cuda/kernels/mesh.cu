// Tessera GPU mesh operations (dissertation §3.4.1, §3.4.2): coboundaries by TCSR
// transposition (Listing 3.1), indirect relations by count -> scan -> fill, boundary
// extraction and Laplacian smoothing. One thread per row; TCSR entries encode the sign in
// the column (v < 0: -1 at column ~v).
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

#define BLOCK 256
#define TID ((u64)blockIdx.x * blockDim.x + threadIdx.x)

__device__ __forceinline__ u32 tcol(i32 v) { return (u32)(v ^ (v >> 31)); }
__device__ __forceinline__ i32 tenc(u32 c, bool neg) { return (i32)c ^ -(i32)neg; }
// start and end vertex of a signed edge entry
__device__ __forceinline__ void ends(const u32* ev, i32 v, u32& s, u32& t) {
    u32 e = tcol(v);
    u32 a = ev[2 * (u64)e], b = ev[2 * (u64)e + 1];
    if (v >= 0) { s = a; t = b; } else { s = b; t = a; }
}

// ---------------------------------------------------------------- transpose (Listing 3.1)
// counts[c] = entries in column c (the result of the atomics is unused: fire-and-forget
// reductions in L2)
extern "C" __global__ void tcsr_count_cols(const i32* cols, u64 nnz, u32* counts) {
    for (u64 i = TID; i < nnz; i += (u64)gridDim.x * blockDim.x) atomicAdd(&counts[tcol(cols[i])], 1u);
}
// Slot of the next entry of row c of the transpose: `counts` (the counts the offsets were
// scanned from) count down, so no zeroed cursor array is needed, and slots are handed out
// from the start of the row up, so rows come out nearly in order for SortRows.
__device__ __forceinline__ u32 next_slot(const u32* toffs, u32* counts, u32 c) {
    u32 a = toffs[c], n = toffs[c + 1] - a;
    return a + n - atomicSub(&counts[c], 1u);
}
// Fill (Listing 3.1): slots within a row are handed out in scheduling order, SortRows
// restores the deterministic order. One thread per row.
extern "C" __global__ void tcsr_fill_transpose(const u32* offs, const i32* cols, u64 nrows, const u32* toffs, u32* counts,
                                               i32* out) {
    u64 r = TID;
    if (r >= nrows) return;
    for (u32 j = offs[r]; j < offs[r + 1]; j++) {
        i32 v = cols[j];
        u32 c = tcol(v);
        out[next_slot(toffs, counts, c)] = tenc((u32)r, v < 0);
    }
}
// The same for rows of one length k (offsets k * r, known on the host): one thread per entry.
extern "C" __global__ void tcsr_fill_transpose_uniform(const i32* cols, u64 nnz, u32 k, const u32* toffs, u32* counts,
                                                       i32* out) {
    u64 j = TID;
    if (j >= nnz) return;
    i32 v = cols[j];
    u32 c = tcol(v);
    out[next_slot(toffs, counts, c)] = tenc((u32)j / k, v < 0);
}
// the edge-pair variant: ∂1 stored as (from, to) pairs; -1 at `from`, +1 at `to`
extern "C" __global__ void edge_count_vertices(const u32* ev, u64 ne, u32* counts) {
    u64 e = TID;
    if (e >= ne) return;
    atomicAdd(&counts[ev[2 * e]], 1u);
    atomicAdd(&counts[ev[2 * e + 1]], 1u);
}
extern "C" __global__ void edge_fill_transpose(const u32* ev, u64 ne, const u32* toffs, u32* counts, i32* out) {
    u64 e = TID;
    if (e >= ne) return;
    u32 a = ev[2 * e], b = ev[2 * e + 1];
    out[next_slot(toffs, counts, a)] = tenc((u32)e, true);
    out[next_slot(toffs, counts, b)] = tenc((u32)e, false);
}

// SortRows without a host synchronisation (the longest row is not read first). Order: by
// decoded column, then -c before +c (Primitives' SegOrder::TcsrColumn). Rows up to TS_SHORT
// entries: one thread per row, insertion sort in place (as Primitives::segmented_sort);
// rows of TS_SHORT..TS_MID entries: tsort_mid_rows; longer rows are left unsorted and set
// *flag, so the caller sorts them again with the general sort (or discards the result).
#define TS_SHORT 64
#define TS_MID 2048
// The TCSR order of the shared row sorts (prelude.cuh, prepended to this source): by
// decoded column, -c before +c.
#define TS_MODE 2u
__device__ __forceinline__ u32 tkey(i32 v) { return seg_key((u32)v, TS_MODE); }
__device__ __forceinline__ i32 tunkey(u32 k) { return (i32)seg_unkey(k, TS_MODE); }
extern "C" __global__ void tsort_short_rows(i32* vals, const u32* offs, u64 nrows) {
    u64 r = TID;
    if (r >= nrows) return;
    u32 a = offs[r], b = offs[r + 1];
    if (b - a <= TS_SHORT) thread_sort_row((u32*)vals, a, b, TS_MODE);
}
// Rows of TS_SHORT..TS_MID entries, one block per row (block_sort_mid_rows of
// prelude.cuh); a longer row raises *flag.
extern "C" __global__ void tsort_mid_rows(i32* vals, const u32* offs, u64 nrows, u32* flag) {
    __shared__ u32 sh[TS_MID];
    __shared__ u32 list[BLOCK];
    __shared__ u32 nlist;
    block_sort_mid_rows((u32*)vals, offs, nrows, TS_MODE, TS_SHORT, TS_MID, flag, sh, list, &nlist);
}

// ---------------------------------------------------------------- face vertices
// The start vertex of each signed edge in loop order; rows not in loop order are chained
// (as relations::face_loop on the CPU). err bit 0: an out-of-order row longer than 512;
// bit 1: some row came out shorter than its ∂2 row (the caller then compacts).
// Chain the row a..a+n (not in loop order) starting with its first edge; returns the entries
// written (< n when the loop does not close) and ORs the err bits into *bits (a register
// of the caller): bit 0 the row is longer than 512, bit 1 the loop did not close.
__device__ u32 face_chain(const i32* cols, const u32* ev, u32 a, u32 n, i32* out, u32* bits) {
    if (n > 512) { *bits |= 3u; return 0; }
    u32 s0, t0;
    ends(ev, cols[a], s0, t0);
    u64 used[8];
    for (int w = 0; w < 8; w++) used[w] = 0;
    used[0] = 1;
    out[a] = (i32)s0;
    u32 k = 1, cur = t0;
    while (k < n) {
        u32 found = n;
        for (u32 j = 0; j < n; j++) {
            if (used[j >> 6] & (1ull << (j & 63))) continue;
            u32 s, t;
            ends(ev, cols[a + j], s, t);
            if (s == cur) { found = j; break; }
        }
        if (found == n) break;
        used[found >> 6] |= 1ull << (found & 63);
        out[a + k] = (i32)cur;
        k++;
        u32 s, t;
        ends(ev, cols[a + found], s, t);
        cur = t;
    }
    if (k < n) *bits |= 2u;
    return k;
}
extern "C" __global__ void face_vertices_fill(const u32* offs, const i32* cols, const u32* ev, u64 nf, i32* out,
                                              u32* written, u32* err) {
    u64 f = TID;
    if (f >= nf) return;
    u32 a = offs[f], n = offs[f + 1] - a;
    if (n == 0) { written[f] = 0; return; }
    bool ordered = true;
    u32 s0, t0;
    ends(ev, cols[a], s0, t0);
    u32 prev_t = t0;
    for (u32 i = 1; i <= n; i++) {
        u32 s, t;
        ends(ev, cols[a + (i % n)], s, t);
        if (prev_t != s) { ordered = false; break; }
        prev_t = t;
    }
    if (ordered) {
        for (u32 i = 0; i < n; i++) {
            u32 s, t;
            ends(ev, cols[a + i], s, t);
            out[a + i] = (i32)s;
        }
        written[f] = n;
        return;
    }
    u32 bits = 0;
    written[f] = face_chain(cols, ev, a, n, out, &bits);
    if (bits) atomicOr(err, bits);
}
// Faces of M edges each (offsets M f, known on the host): one thread per face with the row
// and its M edge pairs in registers (8-byte loads); also writes the offsets. A row not in
// loop order is chained as in face_vertices_fill; any err bit makes the caller take the
// general path (the rows written here are then not used).
template <int M>
__device__ void uniform_face_vertices(const i32* cols, const uint2* ev2, const u32* ev, u64 nf, u32* offs, i32* out,
                                      u32* err) {
    u64 f = TID;
    if (f > nf) return;
    offs[f] = (u32)(M * f);
    if (f == nf) return;
    i32 y[M];
    u32 s[M], t[M];
#pragma unroll
    for (int i = 0; i < M; i++) y[i] = cols[(u64)M * f + i];
#pragma unroll
    for (int i = 0; i < M; i++) {
        uint2 p = ev2[tcol(y[i])];
        s[i] = y[i] >= 0 ? p.x : p.y;
        t[i] = y[i] >= 0 ? p.y : p.x;
    }
    bool ordered = true;
#pragma unroll
    for (int i = 0; i < M; i++) ordered &= t[i] == s[(i + 1) % M];
    if (ordered) {
#pragma unroll
        for (int i = 0; i < M; i++) out[(u64)M * f + i] = (i32)s[i];
        return;
    }
    u32 bits = 0;
    face_chain(cols, ev, (u32)(M * f), M, out, &bits);
    if (bits) *err = bits;  // only bit 1 (M <= 4): a plain store, err may be mapped host memory
}
extern "C" __global__ void face_vertices_3(const i32* cols, const u32* ev, u64 nf, u32* offs, i32* out, u32* err) {
    uniform_face_vertices<3>(cols, (const uint2*)ev, ev, nf, offs, out, err);
}
extern "C" __global__ void face_vertices_4(const i32* cols, const u32* ev, u64 nf, u32* offs, i32* out, u32* err) {
    uniform_face_vertices<4>(cols, (const uint2*)ev, ev, nf, offs, out, err);
}

// ---------------------------------------------------------------- cell edges / vertices
// cell edges: the positively used edges (sign(face in cell) * sign(edge in face) > 0)
extern "C" __global__ void cell_edges_count(const u32* cf_offs, const i32* cf_cols, const u32* fe_offs,
                                            const i32* fe_cols, u64 nc, u32* counts) {
    u64 c = TID;
    if (c >= nc) return;
    u32 n = 0;
    for (u32 j = cf_offs[c]; j < cf_offs[c + 1]; j++) {
        i32 fv = cf_cols[j];
        u32 f = tcol(fv);
        for (u32 k = fe_offs[f]; k < fe_offs[f + 1]; k++) n += ((fv < 0) == (fe_cols[k] < 0));
    }
    counts[c] = n;
}
extern "C" __global__ void cell_edges_fill(const u32* cf_offs, const i32* cf_cols, const u32* fe_offs,
                                           const i32* fe_cols, u64 nc, const u32* offs, i32* out) {
    u64 c = TID;
    if (c >= nc) return;
    u32 o = offs[c];
    for (u32 j = cf_offs[c]; j < cf_offs[c + 1]; j++) {
        i32 fv = cf_cols[j];
        u32 f = tcol(fv);
        for (u32 k = fe_offs[f]; k < fe_offs[f + 1]; k++) {
            i32 ev = fe_cols[k];
            if ((fv < 0) == (ev < 0)) out[o++] = (i32)tcol(ev);
        }
    }
}
// cell vertices: the start vertex of every signed edge of every face of the cell
extern "C" __global__ void cell_vertices_count(const u32* cf_offs, const i32* cf_cols, const u32* fe_offs, u64 nc,
                                               u32* counts) {
    u64 c = TID;
    if (c >= nc) return;
    u32 n = 0;
    for (u32 j = cf_offs[c]; j < cf_offs[c + 1]; j++) {
        u32 f = tcol(cf_cols[j]);
        n += fe_offs[f + 1] - fe_offs[f];
    }
    counts[c] = n;
}
extern "C" __global__ void cell_vertices_fill(const u32* cf_offs, const i32* cf_cols, const u32* fe_offs,
                                              const i32* fe_cols, const u32* ev, u64 nc, const u32* offs, i32* out) {
    u64 c = TID;
    if (c >= nc) return;
    u32 o = offs[c];
    for (u32 j = cf_offs[c]; j < cf_offs[c + 1]; j++) {
        u32 f = tcol(cf_cols[j]);
        for (u32 k = fe_offs[f]; k < fe_offs[f + 1]; k++) {
            u32 s, t;
            ends(ev, fe_cols[k], s, t);
            out[o++] = (i32)s;
        }
    }
}
// Cells of one shape, known on the host from uniform row lengths: K faces per cell, M edges
// per face (tetrahedra 4 x 3, hexahedra 6 x 4); offsets are K c and M f. The K M gathered
// entries are sorted in registers (odd-even transposition network) and deduplicated. A
// closed cell has R = 2 + K (M - 2) / 2 vertices (Euler) and K M / 2 edges, so every row is
// written at the fixed stride R; a cell with another count sets *bad and the caller takes
// the general path (whose result this equals whenever *bad stays 0).
template <typename T>
__device__ __forceinline__ void cmp_swap(T* v, int i, int j) {
    T a = v[i], b = v[j];
    v[i] = a < b ? a : b;
    v[j] = a < b ? b : a;
}
// Sorting networks: 12 inputs (the entries of a tetrahedron's faces) by the 39-comparator
// network of depth 9 (Shapiro and Green), 8, 16 and 32 inputs (the register row sorts of
// the transposes) by Batcher's odd-even merge sort, 19, 63 and 191 comparators written out
// (generated; a loop form did not unroll and put the keys in local memory); each checked
// on all 0-1 inputs (32: on 200,000 random ones) and against std::sort. The odd-even
// transposition network they replace has 66, 28, 120 and 496; it stays for other N.
template <int N, typename T>
__device__ __forceinline__ void sort_net(T* v) {
    if constexpr (N == 12) {
        cmp_swap(v, 0, 8); cmp_swap(v, 1, 7); cmp_swap(v, 2, 6); cmp_swap(v, 3, 11); cmp_swap(v, 4, 10); cmp_swap(v, 5, 9);
        cmp_swap(v, 0, 1); cmp_swap(v, 2, 5); cmp_swap(v, 3, 4); cmp_swap(v, 6, 9); cmp_swap(v, 7, 8); cmp_swap(v, 10, 11);
        cmp_swap(v, 0, 2); cmp_swap(v, 1, 6); cmp_swap(v, 5, 10); cmp_swap(v, 9, 11);
        cmp_swap(v, 0, 3); cmp_swap(v, 1, 2); cmp_swap(v, 4, 6); cmp_swap(v, 5, 7); cmp_swap(v, 8, 11); cmp_swap(v, 9, 10);
        cmp_swap(v, 1, 4); cmp_swap(v, 3, 5); cmp_swap(v, 6, 8); cmp_swap(v, 7, 10);
        cmp_swap(v, 1, 3); cmp_swap(v, 2, 5); cmp_swap(v, 6, 9); cmp_swap(v, 8, 10);
        cmp_swap(v, 2, 3); cmp_swap(v, 4, 5); cmp_swap(v, 6, 7); cmp_swap(v, 8, 9);
        cmp_swap(v, 4, 6); cmp_swap(v, 5, 7);
        cmp_swap(v, 3, 4); cmp_swap(v, 5, 6); cmp_swap(v, 7, 8);
    } else if constexpr (N == 8) {
        cmp_swap(v, 0, 1); cmp_swap(v, 2, 3); cmp_swap(v, 4, 5); cmp_swap(v, 6, 7); cmp_swap(v, 0, 2); cmp_swap(v, 1, 3); cmp_swap(v, 4, 6); cmp_swap(v, 5, 7);
        cmp_swap(v, 1, 2); cmp_swap(v, 5, 6); cmp_swap(v, 0, 4); cmp_swap(v, 1, 5); cmp_swap(v, 2, 6); cmp_swap(v, 3, 7); cmp_swap(v, 2, 4); cmp_swap(v, 3, 5);
        cmp_swap(v, 1, 2); cmp_swap(v, 3, 4); cmp_swap(v, 5, 6);
    } else if constexpr (N == 16) {
        cmp_swap(v, 0, 1); cmp_swap(v, 2, 3); cmp_swap(v, 4, 5); cmp_swap(v, 6, 7); cmp_swap(v, 8, 9); cmp_swap(v, 10, 11); cmp_swap(v, 12, 13); cmp_swap(v, 14, 15);
        cmp_swap(v, 0, 2); cmp_swap(v, 1, 3); cmp_swap(v, 4, 6); cmp_swap(v, 5, 7); cmp_swap(v, 8, 10); cmp_swap(v, 9, 11); cmp_swap(v, 12, 14); cmp_swap(v, 13, 15);
        cmp_swap(v, 1, 2); cmp_swap(v, 5, 6); cmp_swap(v, 9, 10); cmp_swap(v, 13, 14); cmp_swap(v, 0, 4); cmp_swap(v, 1, 5); cmp_swap(v, 2, 6); cmp_swap(v, 3, 7);
        cmp_swap(v, 8, 12); cmp_swap(v, 9, 13); cmp_swap(v, 10, 14); cmp_swap(v, 11, 15); cmp_swap(v, 2, 4); cmp_swap(v, 3, 5); cmp_swap(v, 10, 12); cmp_swap(v, 11, 13);
        cmp_swap(v, 1, 2); cmp_swap(v, 3, 4); cmp_swap(v, 5, 6); cmp_swap(v, 9, 10); cmp_swap(v, 11, 12); cmp_swap(v, 13, 14); cmp_swap(v, 0, 8); cmp_swap(v, 1, 9);
        cmp_swap(v, 2, 10); cmp_swap(v, 3, 11); cmp_swap(v, 4, 12); cmp_swap(v, 5, 13); cmp_swap(v, 6, 14); cmp_swap(v, 7, 15); cmp_swap(v, 4, 8); cmp_swap(v, 5, 9);
        cmp_swap(v, 6, 10); cmp_swap(v, 7, 11); cmp_swap(v, 2, 4); cmp_swap(v, 3, 5); cmp_swap(v, 6, 8); cmp_swap(v, 7, 9); cmp_swap(v, 10, 12); cmp_swap(v, 11, 13);
        cmp_swap(v, 1, 2); cmp_swap(v, 3, 4); cmp_swap(v, 5, 6); cmp_swap(v, 7, 8); cmp_swap(v, 9, 10); cmp_swap(v, 11, 12); cmp_swap(v, 13, 14);
    } else if constexpr (N == 32) {
        cmp_swap(v, 0, 1); cmp_swap(v, 2, 3); cmp_swap(v, 4, 5); cmp_swap(v, 6, 7); cmp_swap(v, 8, 9); cmp_swap(v, 10, 11); cmp_swap(v, 12, 13); cmp_swap(v, 14, 15);
        cmp_swap(v, 16, 17); cmp_swap(v, 18, 19); cmp_swap(v, 20, 21); cmp_swap(v, 22, 23); cmp_swap(v, 24, 25); cmp_swap(v, 26, 27); cmp_swap(v, 28, 29); cmp_swap(v, 30, 31);
        cmp_swap(v, 0, 2); cmp_swap(v, 1, 3); cmp_swap(v, 4, 6); cmp_swap(v, 5, 7); cmp_swap(v, 8, 10); cmp_swap(v, 9, 11); cmp_swap(v, 12, 14); cmp_swap(v, 13, 15);
        cmp_swap(v, 16, 18); cmp_swap(v, 17, 19); cmp_swap(v, 20, 22); cmp_swap(v, 21, 23); cmp_swap(v, 24, 26); cmp_swap(v, 25, 27); cmp_swap(v, 28, 30); cmp_swap(v, 29, 31);
        cmp_swap(v, 1, 2); cmp_swap(v, 5, 6); cmp_swap(v, 9, 10); cmp_swap(v, 13, 14); cmp_swap(v, 17, 18); cmp_swap(v, 21, 22); cmp_swap(v, 25, 26); cmp_swap(v, 29, 30);
        cmp_swap(v, 0, 4); cmp_swap(v, 1, 5); cmp_swap(v, 2, 6); cmp_swap(v, 3, 7); cmp_swap(v, 8, 12); cmp_swap(v, 9, 13); cmp_swap(v, 10, 14); cmp_swap(v, 11, 15);
        cmp_swap(v, 16, 20); cmp_swap(v, 17, 21); cmp_swap(v, 18, 22); cmp_swap(v, 19, 23); cmp_swap(v, 24, 28); cmp_swap(v, 25, 29); cmp_swap(v, 26, 30); cmp_swap(v, 27, 31);
        cmp_swap(v, 2, 4); cmp_swap(v, 3, 5); cmp_swap(v, 10, 12); cmp_swap(v, 11, 13); cmp_swap(v, 18, 20); cmp_swap(v, 19, 21); cmp_swap(v, 26, 28); cmp_swap(v, 27, 29);
        cmp_swap(v, 1, 2); cmp_swap(v, 3, 4); cmp_swap(v, 5, 6); cmp_swap(v, 9, 10); cmp_swap(v, 11, 12); cmp_swap(v, 13, 14); cmp_swap(v, 17, 18); cmp_swap(v, 19, 20);
        cmp_swap(v, 21, 22); cmp_swap(v, 25, 26); cmp_swap(v, 27, 28); cmp_swap(v, 29, 30); cmp_swap(v, 0, 8); cmp_swap(v, 1, 9); cmp_swap(v, 2, 10); cmp_swap(v, 3, 11);
        cmp_swap(v, 4, 12); cmp_swap(v, 5, 13); cmp_swap(v, 6, 14); cmp_swap(v, 7, 15); cmp_swap(v, 16, 24); cmp_swap(v, 17, 25); cmp_swap(v, 18, 26); cmp_swap(v, 19, 27);
        cmp_swap(v, 20, 28); cmp_swap(v, 21, 29); cmp_swap(v, 22, 30); cmp_swap(v, 23, 31); cmp_swap(v, 4, 8); cmp_swap(v, 5, 9); cmp_swap(v, 6, 10); cmp_swap(v, 7, 11);
        cmp_swap(v, 20, 24); cmp_swap(v, 21, 25); cmp_swap(v, 22, 26); cmp_swap(v, 23, 27); cmp_swap(v, 2, 4); cmp_swap(v, 3, 5); cmp_swap(v, 6, 8); cmp_swap(v, 7, 9);
        cmp_swap(v, 10, 12); cmp_swap(v, 11, 13); cmp_swap(v, 18, 20); cmp_swap(v, 19, 21); cmp_swap(v, 22, 24); cmp_swap(v, 23, 25); cmp_swap(v, 26, 28); cmp_swap(v, 27, 29);
        cmp_swap(v, 1, 2); cmp_swap(v, 3, 4); cmp_swap(v, 5, 6); cmp_swap(v, 7, 8); cmp_swap(v, 9, 10); cmp_swap(v, 11, 12); cmp_swap(v, 13, 14); cmp_swap(v, 17, 18);
        cmp_swap(v, 19, 20); cmp_swap(v, 21, 22); cmp_swap(v, 23, 24); cmp_swap(v, 25, 26); cmp_swap(v, 27, 28); cmp_swap(v, 29, 30); cmp_swap(v, 0, 16); cmp_swap(v, 1, 17);
        cmp_swap(v, 2, 18); cmp_swap(v, 3, 19); cmp_swap(v, 4, 20); cmp_swap(v, 5, 21); cmp_swap(v, 6, 22); cmp_swap(v, 7, 23); cmp_swap(v, 8, 24); cmp_swap(v, 9, 25);
        cmp_swap(v, 10, 26); cmp_swap(v, 11, 27); cmp_swap(v, 12, 28); cmp_swap(v, 13, 29); cmp_swap(v, 14, 30); cmp_swap(v, 15, 31); cmp_swap(v, 8, 16); cmp_swap(v, 9, 17);
        cmp_swap(v, 10, 18); cmp_swap(v, 11, 19); cmp_swap(v, 12, 20); cmp_swap(v, 13, 21); cmp_swap(v, 14, 22); cmp_swap(v, 15, 23); cmp_swap(v, 4, 8); cmp_swap(v, 5, 9);
        cmp_swap(v, 6, 10); cmp_swap(v, 7, 11); cmp_swap(v, 12, 16); cmp_swap(v, 13, 17); cmp_swap(v, 14, 18); cmp_swap(v, 15, 19); cmp_swap(v, 20, 24); cmp_swap(v, 21, 25);
        cmp_swap(v, 22, 26); cmp_swap(v, 23, 27); cmp_swap(v, 2, 4); cmp_swap(v, 3, 5); cmp_swap(v, 6, 8); cmp_swap(v, 7, 9); cmp_swap(v, 10, 12); cmp_swap(v, 11, 13);
        cmp_swap(v, 14, 16); cmp_swap(v, 15, 17); cmp_swap(v, 18, 20); cmp_swap(v, 19, 21); cmp_swap(v, 22, 24); cmp_swap(v, 23, 25); cmp_swap(v, 26, 28); cmp_swap(v, 27, 29);
        cmp_swap(v, 1, 2); cmp_swap(v, 3, 4); cmp_swap(v, 5, 6); cmp_swap(v, 7, 8); cmp_swap(v, 9, 10); cmp_swap(v, 11, 12); cmp_swap(v, 13, 14); cmp_swap(v, 15, 16);
        cmp_swap(v, 17, 18); cmp_swap(v, 19, 20); cmp_swap(v, 21, 22); cmp_swap(v, 23, 24); cmp_swap(v, 25, 26); cmp_swap(v, 27, 28); cmp_swap(v, 29, 30);
    } else {
#pragma unroll
        for (int r = 0; r < N; r++) {
#pragma unroll
            for (int i = r & 1; i + 1 < N; i += 2) cmp_swap(v, i, i + 1);
        }
    }
}
// the distinct values of the sorted v (other than `stop`) into the registers d[0..R) (0 where
// there are fewer; the caller then discards the rows); returns their count
template <int N, int R>
__device__ __forceinline__ int distinct_regs(const i32* v, i32 stop, i32* d) {
#pragma unroll
    for (int k = 0; k < R; k++) d[k] = 0;
    int u = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        bool keep = v[i] != stop && (i == 0 || v[i] != v[i - 1]);
#pragma unroll
        for (int k = 0; k < R; k++) d[k] = (keep && u == k) ? v[i] : d[k];
        u += keep ? 1 : 0;
    }
    return u;
}
// store the row d[0..R) at o (o is aligned to 4 R bytes): 16-byte stores for R = 4 and 8,
// 8-byte stores for even R, else 4-byte stores
template <int R>
__device__ __forceinline__ void store_row(i32* o, const i32* d) {
    if constexpr (R % 4 == 0) {
#pragma unroll
        for (int k = 0; k < R; k += 4) ((int4*)o)[k / 4] = make_int4(d[k], d[k + 1], d[k + 2], d[k + 3]);
    } else if constexpr (R % 2 == 0) {
#pragma unroll
        for (int k = 0; k < R; k += 2) ((int2*)o)[k / 2] = make_int2(d[k], d[k + 1]);
    } else {
#pragma unroll
        for (int k = 0; k < R; k++) o[k] = d[k];
    }
}
// load the row p[0..K) (p aligned to 4 K bytes) with the widest loads its alignment allows
template <int K>
__device__ __forceinline__ void load_row(const i32* p, i32* d) {
    if constexpr (K % 4 == 0) {
#pragma unroll
        for (int k = 0; k < K; k += 4) {
            int4 q = ((const int4*)p)[k / 4];
            d[k] = q.x; d[k + 1] = q.y; d[k + 2] = q.z; d[k + 3] = q.w;
        }
    } else if constexpr (K % 2 == 0) {
#pragma unroll
        for (int k = 0; k < K; k += 2) {
            int2 q = ((const int2*)p)[k / 2];
            d[k] = q.x; d[k + 1] = q.y;
        }
    } else {
#pragma unroll
        for (int k = 0; k < K; k++) d[k] = p[k];
    }
}
template <int N, int R>
__device__ __forceinline__ int write_distinct(const i32* v, i32 stop, i32* o) {
    i32 d[R];
    int u = distinct_regs<N, R>(v, stop, d);
    store_row<R>(o, d);
    return u;
}
// Cell vertices read each distinct signed-edge column once: the K M signed edges of the
// cell's faces are sorted as keys (column << 1 | sign), and a run of one column (a closed
// cell sees every edge twice, with both signs) loads its vertex pair once and takes the
// start of each signed entry from it. The starts are the same multiset as one load per
// entry gives, so the row (and *bad) are unchanged; a tetrahedron loads 6 edges, not 12.
template <int K, int M>
__device__ void uniform_cell_vertices(const i32* cf_cols, const i32* fe_cols, const u32* ev, u64 nc, u32* offs,
                                      i32* out, u32* bad) {
    const int N = K * M, R = 2 + K * (M - 2) / 2;
    u64 c = TID;
    if (c > nc) return;
    offs[c] = (u32)(R * c);
    if (c == nc) return;
    u32 key[N];
    i32 cfs[K];
    load_row<K>(cf_cols + (u64)K * c, cfs);
#pragma unroll
    for (int j = 0; j < K; j++) {
        u64 f = tcol(cfs[j]);
        i32 ys[M];
        load_row<M>(fe_cols + (u64)M * f, ys);
#pragma unroll
        for (int i = 0; i < M; i++) key[j * M + i] = (tcol(ys[i]) << 1) | ((u32)ys[i] >> 31);
    }
    sort_net<N>(key);
    i32 v[N];
    uint2 p = make_uint2(0, 0);
#pragma unroll
    for (int i = 0; i < N; i++) {
        if (i == 0 || (key[i] >> 1) != (key[i - 1] >> 1)) p = ((const uint2*)ev)[key[i] >> 1];
        v[i] = (i32)((key[i] & 1) ? p.y : p.x);  // start of the signed edge
    }
    sort_net<N>(v);
    if (write_distinct<N, R>(v, -1, out + (u64)R * c) != R) *bad = 1u;  // plain: may be mapped host memory
}
template <int K, int M>
__device__ void uniform_cell_edges(const i32* cf_cols, const i32* fe_cols, u64 nc, u32* offs, i32* out, u32* bad) {
    const int N = K * M, R = K * M / 2;
    const i32 NONE = 0x7fffffff;
    u64 c = TID;
    if (c > nc) return;
    offs[c] = (u32)(R * c);
    if (c == nc) return;
    i32 v[N], cfs[K];
    load_row<K>(cf_cols + (u64)K * c, cfs);
#pragma unroll
    for (int j = 0; j < K; j++) {
        i32 fv = cfs[j];
        u64 f = tcol(fv);
        i32 ys[M];
        load_row<M>(fe_cols + (u64)M * f, ys);
#pragma unroll
        for (int i = 0; i < M; i++) {
            i32 y = ys[i];
            v[j * M + i] = ((fv < 0) == (y < 0)) ? (i32)tcol(y) : NONE;
        }
    }
    sort_net<N>(v);
    if (write_distinct<N, R>(v, NONE, out + (u64)R * c) != R) *bad = 1u;  // plain: may be mapped host memory
}
extern "C" __global__ void cell_vertices_4x3(const i32* cf_cols, const i32* fe_cols, const u32* ev, u64 nc, u32* offs,
                                             i32* out, u32* bad) {
    uniform_cell_vertices<4, 3>(cf_cols, fe_cols, ev, nc, offs, out, bad);
}
extern "C" __global__ void cell_vertices_6x4(const i32* cf_cols, const i32* fe_cols, const u32* ev, u64 nc, u32* offs,
                                             i32* out, u32* bad) {
    uniform_cell_vertices<6, 4>(cf_cols, fe_cols, ev, nc, offs, out, bad);
}
// Cell vertices of tetrahedra known closed (PolyMesh::cells_known_closed; relations.rs
// closed_tet_edges): two edges of the first face hold its three vertices, an edge of the
// second face that the first lacks ends at the fourth. Two face rows and three edges a cell
// instead of four rows and six edges; nothing to check (a closed cell of four triangles has
// four distinct vertices), so no flag and no host read.
extern "C" __global__ void cell_vertices_closed_4x3(const i32* cf_cols, const i32* fe_cols, const u32* ev, u64 nc,
                                                    u32* offs, i32* out) {
    u64 c = TID;
    if (c > nc) return;
    offs[c] = (u32)(4 * c);
    if (c == nc) return;
    int2 fs = ((const int2*)cf_cols)[2 * c];  // the first two faces of the row
    const i32* r0 = fe_cols + 3 * (u64)tcol(fs.x);
    const i32* r1 = fe_cols + 3 * (u64)tcol(fs.y);
    u32 a0 = tcol(r0[0]), a1 = tcol(r0[1]), a2 = tcol(r0[2]);
    u32 b0 = tcol(r1[0]), b1 = tcol(r1[1]);
    u32 far = (b0 == a0 || b0 == a1 || b0 == a2) ? b1 : b0;
    uint2 e = ((const uint2*)ev)[a0], g = ((const uint2*)ev)[a1], h = ((const uint2*)ev)[far];
    u32 third = (g.x == e.x || g.x == e.y) ? g.y : g.x;
    u32 fourth = (h.x == e.x || h.x == e.y || h.x == third) ? h.y : h.x;
    i32 v[4] = {(i32)e.x, (i32)e.y, (i32)third, (i32)fourth};
    sort_net<4>(v);
    store_row<4>(out + 4 * c, v);
}
extern "C" __global__ void cell_edges_4x3(const i32* cf_cols, const i32* fe_cols, u64 nc, u32* offs, i32* out, u32* bad) {
    uniform_cell_edges<4, 3>(cf_cols, fe_cols, nc, offs, out, bad);
}
extern "C" __global__ void cell_edges_6x4(const i32* cf_cols, const i32* fe_cols, u64 nc, u32* offs, i32* out, u32* bad) {
    uniform_cell_edges<6, 4>(cf_cols, fe_cols, nc, offs, out, bad);
}
// in-place dedup of sorted rows; written[r] = new length
extern "C" __global__ void dedup_rows(const u32* offs, i32* vals, u64 nrows, u32* written) {
    u64 r = TID;
    if (r >= nrows) return;
    u32 a = offs[r], n = offs[r + 1] - a;
    if (n == 0) { written[r] = 0; return; }
    u32 w = 1;
    for (u32 i = 1; i < n; i++) {
        i32 x = vals[a + i];
        if (x != vals[a + w - 1]) { vals[a + w] = x; w++; }
    }
    written[r] = w;
}
// copy the first new-length entries of every row into the compacted array
extern "C" __global__ void compact_rows(const u32* old_offs, const i32* old_cols, const u32* new_offs, u64 nrows,
                                        i32* out) {
    u64 r = TID;
    if (r >= nrows) return;
    u32 a = old_offs[r], b = new_offs[r], n = new_offs[r + 1] - b;
    for (u32 i = 0; i < n; i++) out[b + i] = old_cols[a + i];
}

// ---------------------------------------------------------------- boundary (§3.4.2)
// flags: bit 0 = +f is boundary (no cell in front), bit 1 = -f is boundary (no cell behind),
// bit 2 = non-manifold face (not 1 or 2 cells with opposite orientations; also raises
// *nonmanifold to `raise`). boundary_flags: the flags of a face from the signs of its δ3 row.
__device__ __forceinline__ u32 boundary_flags(u32 plus, u32 minus, u32* nonmanifold, u32 raise) {
    u32 fl = (minus == 0 ? 1u : 0u) | (plus == 0 ? 2u : 0u);
    bool manifold = (plus == 1 && minus == 0) || (plus == 0 && minus == 1) || (plus == 1 && minus == 1);
    if (!manifold) {
        fl |= 4u;
        *nonmanifold = raise;  // a plain store: the word may be mapped host memory
    }
    return fl;
}
// Mark the edges (where `emark` is not null) and vertices of (boundary) face f (store `mark`)
__device__ __forceinline__ void boundary_mark_face(u64 f, const u32* fe_offs, const i32* fe_cols, const u32* ev,
                                                   u32* emark, u32* vmark, u32 mark) {
    for (u32 k = fe_offs[f]; k < fe_offs[f + 1]; k++) {
        u64 e = tcol(fe_cols[k]);
        if (emark) emark[e] = mark;
        vmark[ev[2 * e]] = mark;
        vmark[ev[2 * e + 1]] = mark;
    }
}
// The cells in front of face f (+1 entries of its δ3 row) and behind it (-1 entries)
__device__ __forceinline__ void face_cell_sides(u64 f, const u32* fc_offs, const i32* fc_cols, u32* plus, u32* minus) {
    *plus = 0;
    *minus = 0;
    for (u32 j = fc_offs[f]; j < fc_offs[f + 1]; j++) {
        if (fc_cols[j] < 0) (*minus)++; else (*plus)++;
    }
}
extern "C" __global__ void boundary_face_flags(const u32* fc_offs, const i32* fc_cols, u64 nf, u32* flags, u32* nhalf,
                                               u32* nonmanifold) {
    u64 f = TID;
    if (f >= nf) return;
    u32 plus, minus;
    face_cell_sides(f, fc_offs, fc_cols, &plus, &minus);
    u32 fl = boundary_flags(plus, minus, nonmanifold, 1u);
    flags[f] = fl;
    nhalf[f] = (fl & 1u) + ((fl >> 1) & 1u);
}
extern "C" __global__ void boundary_faces_fill(const u32* flags, const u32* pos, u64 nf, i32* out) {
    u64 f = TID;
    if (f >= nf) return;
    u32 fl = flags[f], p = pos[f];
    if (fl & 1u) out[p++] = tenc((u32)f, false);
    if (fl & 2u) out[p] = tenc((u32)f, true);
}
// edges and vertices of boundary faces (marks are 0 or 1: scanned directly)
extern "C" __global__ void boundary_mark(const u32* flags, const u32* fe_offs, const i32* fe_cols, const u32* ev, u64 nf,
                                         u32* emark, u32* vmark) {
    u64 f = TID;
    if (f >= nf || (flags[f] & 3u) == 0) return;
    boundary_mark_face(f, fe_offs, fe_cols, ev, emark, vmark, 1u);
}
// The other end of δ1 entry j (+1: the edge ends at the row's vertex, so its start)
__device__ __forceinline__ u32 edge_other_end(const i32* ve_cols, const u32* ev, u64 j) {
    const i32 c = ve_cols[j];
    return ev[2 * (u64)tcol(c) + (c < 0 ? 1 : 0)];
}
// The Laplacian smoothing's stencil in one launch (§3.4.2): threads [0, nf) mark the vertices of
// the boundary faces in `vmark` (zeroed by the caller): the faces with a boundary side, as
// boundary_face_flags + boundary_mark find them, without writing their flags or the edges'
// marks; threads [nf, nf + nnz) write the other end of every δ1 entry, as vertex_neighbours
// (nnz = 0: the marks alone).
extern "C" __global__ void smoothing_stencil(const u32* fc_offs, const i32* fc_cols, u64 nf, const u32* fe_offs,
                                             const i32* fe_cols, const u32* ev, u32* vmark, const i32* ve_cols,
                                             u64 nnz, u32* nbr) {
    u64 t = TID;
    if (t < nf) {
        u32 plus, minus;
        face_cell_sides(t, fc_offs, fc_cols, &plus, &minus);
        // boundary_flags: a side with no cell
        if (plus == 0 || minus == 0) boundary_mark_face(t, fe_offs, fe_cols, ev, nullptr, vmark, 1u);
        return;
    }
    t -= nf;
    if (t < nnz) nbr[t] = edge_other_end(ve_cols, ev, t);
}
// the three totals (last entries of the scans) and the non-manifold word, for one download
extern "C" __global__ void boundary_totals(const u32* fpos, u64 nf, const u32* epos, u64 ne, const u32* vpos, u64 nv,
                                           const u32* nonmanifold, u32* out) {
    if (TID != 0) return;
    out[0] = fpos[nf];
    out[1] = epos[ne];
    out[2] = vpos[nv];
    out[3] = *nonmanifold;
}
// out[pos[i]] = i where mark[i] != 0 (pos = exclusive scan of the 0/1 marks)
extern "C" __global__ void mark_scatter(const u32* mark, const u32* pos, u64 n, u32* out) {
    u64 i = TID;
    if (i < n && mark[i]) out[pos[i]] = (u32)i;
}

// ---------------------------------------------------------------- Laplacian smoothing (§3.4.2)
// The other end of every δ1 entry (edge_other_end), computed once per smoothing run: the
// steps then read one index per neighbour.
extern "C" __global__ void vertex_neighbours(const i32* ve_cols, u64 nnz, const u32* ev, u32* nbr) {
    u64 j = TID;
    if (j >= nnz) return;
    nbr[j] = edge_other_end(ve_cols, ev, j);
}
// One Jacobi step; neighbours over δ1 in row order (edges ascending) as on the CPU, so the
// sums are formed in the same order. Positions are xyz-interleaved doubles.
extern "C" __global__ void laplace_step(const u32* ve_offs, const u32* nbr, const u32* fixed, const double* pin,
                                        double* pout, u64 nv) {
    u64 v = TID;
    if (v >= nv) return;
    u32 a = ve_offs[v], b = ve_offs[v + 1];
    if (fixed[v] || a == b) {
        pout[3 * v] = pin[3 * v];
        pout[3 * v + 1] = pin[3 * v + 1];
        pout[3 * v + 2] = pin[3 * v + 2];
        return;
    }
    double sx = 0.0, sy = 0.0, sz = 0.0;
    for (u32 j = a; j < b; j++) {
        u64 u = nbr[j];
        sx += pin[3 * u];
        sy += pin[3 * u + 1];
        sz += pin[3 * u + 2];
    }
    double n = (double)(b - a);
    pout[3 * v] = sx / n;
    pout[3 * v + 1] = sy / n;
    pout[3 * v + 2] = sz / n;
}

// ---------------------------------------------------------------- one-launch chains (issue 20)
// Cooperative kernels (launched with cuLaunchCooperativeKernel, so every block is resident)
// that run a whole count -> scan -> fill chain in one launch, with grid barriers between the
// phases instead of kernel boundaries and no host synchronisation. `sync` is a persistent
// scratch word array of the MeshKernels: [0] arrivals, [1] generation of the barrier (the
// barrier leaves [0] at 0, so it is reusable by the next launch on the stream), [2] the
// worklist length of the mid-row sort, [3] the number of phase stamps, [4..4 + 3 grid) the
// blocks' partial sums, then up to 16 phase stamps (u64 %globaltimer of block 0 at the
// start, after every grid barrier and at its end, as two words each) for the phase table
// of the benchmarks.
// Data written by other blocks in an earlier phase is read with ld.global.cg (L2, not a
// possibly stale L1 line).
__device__ __forceinline__ u32 ldcg(const u32* p) { return __ldcg(p); }
__device__ __forceinline__ i32 ldcg(const i32* p) { return __ldcg(p); }

// The next stamp, by the one thread that calls it.
__device__ void coop_stamp_now(u32* sync) {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    u32 i = *(volatile u32*)(sync + 3);
    if (i < 16) {
        u32* w = sync + 4 + 3 * gridDim.x + 2 * i;
        w[0] = (u32)t;
        w[1] = (u32)(t >> 32);
        sync[3] = i + 1;
    }
}
__device__ void coop_stamp(u32* sync) {
    if (blockIdx.x == 0 && threadIdx.x == 0) coop_stamp_now(sync);
}
// The end of a one-launch chain: block 0's last stamp, then one more by the block that
// finishes last (the phase table's "tail": how long the other blocks run past block 0).
// The barrier's arrival word (sync[0], zero between barriers) counts the blocks and is left
// zero again.
__device__ void coop_end(u32* sync) {
    coop_stamp(sync);
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(sync, 1u) == gridDim.x - 1) {
            atomicExch(sync, 0u);
            __threadfence();
            coop_stamp_now(sync);
        }
    }
}
__device__ void coop_start(u32* sync) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        sync[2] = 0u;
        sync[3] = 0u;
    }
    coop_stamp(sync);
}

__device__ void grid_sync(u32* sync) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile u32* gen = sync + 1;
        u32 g = *gen;
        __threadfence();
        if (atomicAdd(sync, 1u) == gridDim.x - 1) {
            atomicExch(sync, 0u);
            __threadfence();
            atomicAdd(sync + 1, 1u);
        } else {
            while (*gen == g) __nanosleep(32);
        }
        __threadfence();
    }
    __syncthreads();
    coop_stamp(sync);
}

// The run [*lo, *hi) of the items 0..n that grid_scan gives the calling warp: block b's share
// of the items, cut into one contiguous run per warp. Returns the runs' length (the last
// ones may be shorter).
__device__ __forceinline__ u64 grid_warp_run(u64 n, u64* lo, u64* hi) {
    const u32 G = gridDim.x, nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
    const u64 chunk = (n + G - 1) / G;
    const u64 blo = min(n, (u64)blockIdx.x * chunk), bhi = min(n, blo + chunk);
    const u64 wchunk = (bhi - blo + nw - 1) / nw;
    *lo = min(bhi, blo + warp * wchunk);
    *hi = min(bhi, *lo + wchunk);
    return wchunk;
}
// Grid-wide exclusive scan of K arrays at once (one grid barrier): block b takes the same
// share of every array and splits it into one contiguous run per warp. load(k, i) gives the
// payload of item i of array k, cnt(payload) its count, put(k, i, position, payload) is
// called once per item (with the payload loaded for it, so nothing is read twice in that
// phase). Each warp walks its run 32 items a step, GS_STEPS steps of loads in flight, with
// shuffle scans and a carried prefix: no block barrier per step. Returns the K totals (every
// block). The block's first phase leaves its warps' sums in shared memory for the second.
// The cut comes from grid_warp_run, which boundary_coop's phases use too.
#define GS_STEPS 4
template <int K, class Load, class Cnt, class Put>
__device__ void grid_scan(const u64* n, u32* sync, u32* sh, u32* totals, Load load, Cnt cnt, Put put) {
    __shared__ u32 wsum[K * SCAN_WARPS];
    u32* partial = sync + 4;
    const u32 G = gridDim.x, b = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u32 nw = blockDim.x >> 5;
    u64 wlo[K], whi[K];
    for (int k = 0; k < K; k++) {
        grid_warp_run(n[k], &wlo[k], &whi[k]);
        u32 s = 0;
#pragma unroll 4
        for (u64 i = wlo[k] + lane; i < whi[k]; i += 32) s += cnt(load(k, i));
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) wsum[k * SCAN_WARPS + warp] = s;
    }
    __syncthreads();
    if (threadIdx.x < K) {
        u32 s = 0;
        for (u32 w = 0; w < nw; w++) s += wsum[threadIdx.x * SCAN_WARPS + w];
        partial[threadIdx.x * G + b] = s;
    }
    grid_sync(sync);
    for (int k = 0; k < K; k++) {
        u32 pre = 0, tot = 0;
        for (u32 q = threadIdx.x; q < G; q += blockDim.x) {
            u32 p = ldcg(partial + k * G + q);
            tot += p;
            if (q < b) pre += p;
        }
        pre = block_sum<u32>(pre, sh);
        tot = block_sum<u32>(tot, sh);
        totals[k] = tot;
        for (u32 w = 0; w < warp; w++) pre += wsum[k * SCAN_WARPS + w];
        for (u64 base = wlo[k]; base < whi[k]; base += 32 * GS_STEPS) {
            decltype(load(k, 0)) v[GS_STEPS];
#pragma unroll
            for (int u = 0; u < GS_STEPS; u++) {
                u64 i = base + 32 * u + lane;
                if (i < whi[k]) v[u] = load(k, i);
            }
#pragma unroll
            for (int u = 0; u < GS_STEPS; u++) {
                u64 i = base + 32 * u + lane;
                u32 c = i < whi[k] ? cnt(v[u]) : 0u;
                u32 inc = warp_inclusive_scan<u32>(c, lane);
                if (i < whi[k]) put(k, i, pre + inc - c, v[u]);
                pre += __shfl_sync(0xffffffffu, inc, 31);
            }
        }
    }
}

// A row of n <= W entries sorted by their keys (key_of, back to an entry by back) in
// registers: all loads at once, a sorting network over W keys (sort_net; padding keys sort
// last), predicated stores.
template <int W, class T, class K, class B>
__device__ __forceinline__ void sort_regs(T* row, u32 n, K key_of, B back) {
    u32 key[W];
#pragma unroll
    for (int j = 0; j < W; j++) key[j] = (u32)j < n ? key_of(row[j]) : 0xffffffffu;
    sort_net<W>(key);
#pragma unroll
    for (int j = 0; j < W; j++)
        if ((u32)j < n) row[j] = back(key[j]);
}
// A row of a transpose's entries, n <= W, sorted by tkey in registers.
template <int W>
__device__ __forceinline__ void sort_row_regs(i32* row, u32 n) {
    sort_regs<W>(row, n, [](i32 v) { return tkey(v); }, [](u32 k) { return tunkey(k); });
}

// Rows are read with plain (L1-cached) loads here: a row is written by the fill before
// this phase and afterwards only by the one thread or block that sorts it, so no SM can
// hold a stale line of a row it reads (lines shared with rows sorted by other SMs are
// never read back for those rows). One thread per row reads its row's words one load
// instruction each; through L1 a warp's loads of neighbouring rows share their lines
// (with ld.global.cg every instruction went to L2: 5x slower on δ1).
// A row of n <= 32 entries sorted by tkey in registers (n > 1).
__device__ __forceinline__ void sort_short_row(i32* row, u32 n) {
    if (n <= 4) {
        sort_row_regs<4>(row, n);
    } else if (n <= 8) {
        sort_row_regs<8>(row, n);
    } else if (n <= 16) {
        sort_row_regs<16>(row, n);
    } else {
        sort_row_regs<32>(row, n);
    }
}

// A row of 33..64 entries sorted by tkey by the whole warp (every lane calls it with the
// same row): a rank sort, every lane ranking two entries against the whole row by
// shuffles, ties by position; all reads before any write.
__device__ void warp_sort_row64(i32* row, u32 n, u32 lane) {
    u32 k0 = lane < n ? tkey(row[lane]) : 0xffffffffu;
    u32 k1 = lane + 32 < n ? tkey(row[lane + 32]) : 0xffffffffu;
    u32 p0 = 0, p1 = 0;
    for (u32 q = 0; q < n; q++) {
        u32 kq = __shfl_sync(0xffffffffu, q < 32 ? k0 : k1, q & 31);
        p0 += kq < k0 || (kq == k0 && q < lane);
        p1 += kq < k1 || (kq == k1 && q < lane + 32);
    }
    __syncwarp();
    if (lane < n) row[p0] = tunkey(k0);
    if (lane + 32 < n) row[p1] = tunkey(k1);
    __syncwarp();
}

// Sort rows [0, nrows) of a transpose by tkey: rows of up to 32 entries by one thread in
// registers; rows of 33..TS_SHORT entries by their warp (warp_sort_row64; one thread's
// insertion sort of such a row took longer than the rest of the phase); longer ones through
// the worklist `mid` (one block per row, bitonic in shared memory) when they fit TS_MID;
// longer rows are sorted by one thread when `long_by_thread`, else left unsorted and set
// *flag. Ends with the grid in sync. A warp takes 32 consecutive rows at a time.
__device__ void coop_sort_rows(i32* out, const u32* toffs, u64 nrows, u32* mid, u32 long_by_thread, u32* flag,
                               u32* sync, u32* shmid) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    const u32 lane = threadIdx.x & 31;
    for (u64 r0 = ((u64)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; r0 < nrows; r0 += stride) {
        u64 r = r0 + lane;
        u32 a = 0, n = 0;
        if (r < nrows) {
            a = ldcg(toffs + r);
            n = ldcg(toffs + r + 1) - a;
        }
        if (n > 1 && n <= 32) {
            sort_short_row(out + a, n);
        } else if (n > TS_SHORT && n <= TS_MID) {
            mid[atomicAdd(sync + 2, 1u)] = (u32)r;
        } else if (n > TS_MID && long_by_thread) {
            thread_sort_row((u32*)out, a, a + n, TS_MODE);
        } else if (n > TS_MID) {
            *flag = 1u;  // a plain store: the flag may be mapped host memory
        }
        for (u32 lm = __ballot_sync(0xffffffffu, n > 32 && n <= TS_SHORT); lm != 0; lm &= lm - 1) {
            u32 src = __ffs(lm) - 1;
            u32 la = __shfl_sync(0xffffffffu, a, src), ln = __shfl_sync(0xffffffffu, n, src);
            warp_sort_row64(out + la, ln, lane);
        }
    }
    grid_sync(sync);
    u32 m = ldcg(sync + 2);
    for (u32 q = blockIdx.x; q < m; q += gridDim.x) {
        u32 row = ldcg(mid + q);
        u32 a = ldcg(toffs + row);
        block_sort_row((u32*)out, a, ldcg(toffs + row + 1) - a, TS_MODE, shmid);
    }
}

// The entries of the input of a transpose: `mode` 0: TCSR rows by `offs` (one thread per
// row), 1: rows of `k` entries (offsets k r), 2: ∂1 as (from, to) pairs in `cols` (entry i
// of edge i / 2: -1 at `from`, +1 at `to`). Entries come in batches of up to CB_ILP loaded
// together, so a thread keeps that many loads and atomics in flight:
// f(n, rows, columns, negs) with n <= CB_ILP.
#define CB_ILP 4
template <class F>
__device__ __forceinline__ void coop_entries(u32 mode, const u32* offs, const i32* cols, u64 nrows, u64 nnz, u32 k,
                                             F f) {
    u64 stride = (u64)gridDim.x * blockDim.x, t0 = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u32 r[CB_ILP], c[CB_ILP];
    bool ng[CB_ILP];
    if (mode == 0) {
        for (u64 row = t0; row < nrows; row += stride) {
            u32 a = offs[row], b = offs[row + 1];
            for (u32 j = a; j < b; j += CB_ILP) {
                u32 n = min(b - j, (u32)CB_ILP);
#pragma unroll
                for (int u = 0; u < CB_ILP; u++) {
                    i32 v = (u32)u < n ? cols[j + u] : 0;
                    r[u] = (u32)row;
                    c[u] = tcol(v);
                    ng[u] = v < 0;
                }
                f(n, r, c, ng);
            }
        }
        return;
    }
    for (u64 j0 = t0; j0 < nnz; j0 += CB_ILP * stride) {
        u32 n = 0;
#pragma unroll
        for (int u = 0; u < CB_ILP; u++) {
            u64 j = j0 + u * stride;
            if (j < nnz) {
                i32 v = cols[j];
                n = u + 1;
                if (mode == 1) {
                    r[u] = (u32)j / k;
                    c[u] = tcol(v);
                    ng[u] = v < 0;
                } else {
                    r[u] = (u32)(j >> 1);
                    c[u] = (u32)v;
                    ng[u] = (j & 1) == 0;
                }
            }
        }
        f(n, r, c, ng);
    }
}

// The transpose (Listing 3.1) in one launch: `work` holds 2 ncols words when `two_slot`,
// else ncols. two_slot (δ3 of a 3-manifold: at most one +f and one -f entry per face f):
// every entry stores its row into the slot of its sign (plain stores, no atomics); the scan
// counts the filled slots and writes the rows in order directly. When the filled slots
// are fewer than nnz (two entries met in one slot: a non-manifold or inconsistently
// oriented face), the same launch redoes the transpose by the general path. General path:
// count with atomics, scan (its positions become the fill cursors), fill with atomics,
// then the row sort (coop_sort_rows). `toffs` ncols + 1, `out` nnz, `mid` nnz / 65 + 1.
extern "C" __global__ void __launch_bounds__(256, 4) transpose_coop(const u32* offs, const i32* cols, u64 nrows, u64 nnz, u32 mode, u32 k,
                                          u64 ncols, u32 two_slot, u32 long_by_thread, u32* work, u32* sync,
                                          u32* mid, u32* toffs, i32* out, u32* flag) {
    __shared__ u32 sh[33];
    __shared__ u32 shmid[TS_MID];
    u64 stride = (u64)gridDim.x * blockDim.x, t0 = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    coop_start(sync);
    u32 tot;
    u64 n1[1] = {ncols};
    if (two_slot) {
        for (u64 i = t0; i < 2 * ncols; i += stride) work[i] = 0xffffffffu;
        grid_sync(sync);
        coop_entries(mode, offs, cols, nrows, nnz, k, [&](u32 n, const u32* r, const u32* c, const bool* ng) {
#pragma unroll
            for (int u = 0; u < CB_ILP; u++)
                if ((u32)u < n) work[2 * (u64)c[u] + ng[u]] = r[u];
        });
        grid_sync(sync);
        grid_scan<1>(
            n1, sync, sh, &tot,
            [&](int, u64 f) -> uint2 { return __ldcg(reinterpret_cast<const uint2*>(work) + f); },
            [](uint2 s) -> u32 { return (s.x != 0xffffffffu ? 1u : 0u) + (s.y != 0xffffffffu ? 1u : 0u); },
            [&](int, u64 f, u32 pos, uint2 s) {
                toffs[f] = pos;
                u32 p = s.x, q = s.y;
                if (p != 0xffffffffu && q != 0xffffffffu) {
                    i32 x = tenc(p, false), y = tenc(q, true);
                    if (tkey(x) < tkey(y)) {
                        out[pos] = x;
                        out[pos + 1] = y;
                    } else {
                        out[pos] = y;
                        out[pos + 1] = x;
                    }
                } else if (p != 0xffffffffu) {
                    out[pos] = tenc(p, false);
                } else if (q != 0xffffffffu) {
                    out[pos] = tenc(q, true);
                }
            });
        if ((u64)tot == nnz) {
            if (t0 == 0) toffs[ncols] = tot;
            coop_end(sync);
            return;
        }
        grid_sync(sync);  // every block is past its reads of the slots
    }
    for (u64 i = t0; i < ncols; i += stride) work[i] = 0u;
    grid_sync(sync);
    coop_entries(mode, offs, cols, nrows, nnz, k, [&](u32 n, const u32*, const u32* c, const bool*) {
#pragma unroll
        for (int u = 0; u < CB_ILP; u++)
            if ((u32)u < n) atomicAdd(work + c[u], 1u);
    });
    grid_sync(sync);
    grid_scan<1>(
        n1, sync, sh, &tot, [&](int, u64 i) -> u32 { return ldcg(work + i); }, [](u32 c) { return c; },
        [&](int, u64 i, u32 pos, u32) {
            toffs[i] = pos;
            work[i] = pos;
        });
    if (t0 == 0) toffs[ncols] = tot;
    grid_sync(sync);
    coop_entries(mode, offs, cols, nrows, nnz, k, [&](u32 n, const u32* r, const u32* c, const bool* ng) {
        u32 slot[CB_ILP];
#pragma unroll
        for (int u = 0; u < CB_ILP; u++) slot[u] = (u32)u < n ? atomicAdd(work + c[u], 1u) : 0u;
#pragma unroll
        for (int u = 0; u < CB_ILP; u++)
            if ((u32)u < n) out[slot[u]] = tenc(r[u], ng[u]);
    });
    grid_sync(sync);
    coop_sort_rows(out, toffs, ncols, mid, long_by_thread, flag, sync, shmid);
    coop_end(sync);
}

// ---------------------------------------------------------------- bucketed transpose (session 16)
// The transpose of a TCSR operator whose rows have one length k (mode 1: ∂3, ∂2 of
// simplices) or of ∂1 as vertex pairs (mode 2; mode 3 below) in one cooperative launch of
// one 1024-thread block per multiprocessor with most of its shared memory, without one
// scattered store or atomic per entry in global memory (what bounds transpose_coop: session
// 15's request count). The result is identical to transpose_coop's (rows sorted by tkey).
// Columns are cut into `nb` buckets of `w` consecutive columns.
// Phase 1 (tiles): block b takes tiles t = b, b + grid, ... (entries [t tile, (t + 1) tile)):
//   it reads the tile once into shared memory, counting its entries per bucket (each
//   entry's rank in its bucket, which the count's atomic returns, stays in registers),
//   places them by bucket there without a second atomic and writes the tile back as it is,
//   contiguous, one word per entry
//   (bt_pack: its index in the tile, from which phase 2 recomputes the sort key of its
//   transpose entry, and its column within the bucket). Where bucket q's run of tile t
//   starts and how long it is goes to st[q nt + t]; the bucket totals are summed (atomics,
//   one per tile and bucket) into cnt.
// Grid barrier.
// Phase 2 (buckets): a block takes the next bucket from a counter (larger buckets first):
//   it gathers the bucket's runs from every tile (coalesced runs), counts its columns in
//   shared memory, scans them (the transpose's offsets, written directly), places the
//   entries by column in shared memory and sorts each row there by rank (rows <= TS_MID),
//   writing every row in order. `two_slot` (δ3 of a 3-manifold) first fills one slot per
//   column and sign instead (no count, no sort; buckets of up to BT_WSLOT columns), and does
//   the bucket the general way when two entries meet in a slot; where two buckets' slots
//   fit at once, each half of the block takes buckets on its own (with at most two buckets
//   a block, half h of block b takes bucket b + h G without the counter), and each warp's
//   rows leave through a ring in shared memory in aligned 128-byte chunks. The general way
//   takes windows of at most BT_WMAX columns, and a window of more than `cap` entries in column
//   ranges of at most `cap` entries; a single column of more than `cap` entries goes to
//   global memory directly. Rows longer than TS_MID are left unsorted and set *flag, or are
//   sorted by one thread when `long_by_thread` (as transpose_coop).
// Mode 3 (session 22; kernel transpose_bucketed_pairs, the same body compiled for it alone),
//   δ1 of canonical ∂1 pairs (`from` < `to`, `from` non-decreasing: the edges of Tessera's
//   simplex derivation): vertex v's row is its in-edges (tenc(e, +1), in edge order)
//   followed by its out-edges, the run of edges e0[v] .. e0[v + 1] (tenc(e, -1)), since every
//   in-edge's `from` is below v. The entries are the edges (nnz = ne), and only their `to`
//   ends are bucketed; phase 1 also writes e0 and checks the order (not canonical: flag[1] =
//   1 and nothing else is written). Phase 2 moves each column's offset and row by the
//   out-edges of the columns before it in the bucket, and writes the bucket's out-edges after
//   the scan of its columns.
// `gcount` holds 2 x BT_GCOUNT words: this launch sums into half `parity` (left zero by the
// launch before) and zeroes the other half (read by the launch before, which has ended).
#define BT_THREADS 1024
#define BT_WARPS 32
#define BT_NBMAX 2048
// words of each half of `gcount`: the bucket totals, then (mode 3) whether the pairs were
// found not canonical
#define BT_GCOUNT (BT_NBMAX + 1)
#define BT_NTMAX 1024
#define BT_WMAX 8192
#define BT_LONG 32
#define BT_DIR 2048
#define BT_CLS 4
#define BT_WSLOT 16384
typedef unsigned short u16;

// n / d by one 64-bit multiply (d > 1: m = 2^64 / d rounded up, exact for every 32-bit n;
// d = 1: m = 0 stands for the identity).
__device__ __forceinline__ u32 bt_div(u32 n, u64 m) { return m ? (u32)__umul64hi(m, (u64)n) : n; }

// Input entry j (v = cols[j]): its column c, and s, the low bit of its transpose entry's
// sort key (mode 1: 1 for +1, 0 for -1; mode 2, ∂1 pairs: j & 1, 0 at `from`; mode 3, the
// `to` ends of canonical pairs, entry j = edge j: 1). PAIRS: mode 3, known at compile time.
template <bool PAIRS>
__device__ __forceinline__ u32 bt_column(i32 v, u32 mode, u32 j, u32& s) {
    if constexpr (PAIRS) {
        s = 1u;
        return (u32)v;
    } else {
        s = mode == 1 ? (v < 0 ? 0u : 1u) : (j & 1u);
        return mode == 1 ? tcol(v) : (u32)v;
    }
}
// The sort key (tkey) of the transpose entry of input entry j: mode 1 tenc(row j / k, sign),
// mode 2 tenc(edge j / 2, j odd), which is j itself; mode 3 tenc(edge j, +1) = 2 j + 1.
template <bool PAIRS>
__device__ __forceinline__ u32 bt_key(u32 j, u32 s, u32 mode, u64 kinv) {
    if constexpr (PAIRS) return (j << 1) | 1u;
    else return mode == 1 ? (bt_div(j, kinv) << 1) | s : j;
}
// What phase 1 writes per entry, one word: its index in its tile (15 bits: tiles hold at
// most BT_TILEMAX entries), the key's low bit, its column within the bucket (14 bits: at
// most BT_WSLOT columns).
#define BT_TILEMAX 32768
__device__ __forceinline__ u32 bt_pack(u32 i, u32 s, u32 l) { return (i << 15) | (s << 14) | l; }

// Loads in flight per thread: one block per multiprocessor has 32 warps only, so every
// loop issues BT_ILP independent loads before it uses any.
#define BT_ILP 8

// counter[x] += 1 where ok; returns the old value (the lane's slot).
__device__ __forceinline__ u32 bt_add(u32* counter, u32 x, bool ok) { return ok ? atomicAdd(counter + x, 1u) : 0u; }

// f(ok, i, cols[lo + i], k, 0) for i in [0, n), n <= BT_TILEMAX, called by every lane of a
// warp together (ok false past the end); i is the thread's k-th entry, threadIdx.x + k
// BT_THREADS. BT_ILP loads a thread in flight. PAIRS (mode 3): entry i is edge lo + i,
// loaded as one pair: f(ok, i, its `to`, k, its `from`).
template <bool PAIRS, class F>
__device__ __forceinline__ void bt_tile_entries(const i32* cols, u32 lo, u32 n, F f) {
#pragma unroll
    for (u32 o = 0; o < BT_TILEMAX / (BT_ILP * BT_THREADS); o++) {
        const u32 i0 = threadIdx.x + o * BT_ILP * BT_THREADS;
        if (i0 - (threadIdx.x & 31) >= n) break;
        i32 v[BT_ILP];
        u32 fr[BT_ILP];
#pragma unroll
        for (int u = 0; u < BT_ILP; u++) {
            u32 i = i0 + u * BT_THREADS;
            if (PAIRS) {
                const uint2 pr = i < n ? ((const uint2*)cols)[lo + i] : make_uint2(0u, 0u);
                v[u] = (i32)pr.y;
                fr[u] = pr.x;
            } else {
                v[u] = i < n ? cols[lo + i] : 0;
                fr[u] = 0u;
            }
        }
#pragma unroll
        for (int u = 0; u < BT_ILP; u++) {
            u32 i = i0 + u * BT_THREADS;
            f(i < n, i, v[u], o * BT_ILP + u, fr[u]);
        }
    }
}

// Call f(ok, key, column in bucket) for every entry of a bucket whose runs are described by
// tpre (exclusive prefix of the run lengths, nt + 1 words: tpre[nt] = nq) and tsrc (where
// each run starts in `packed`; run t is tile t's). dir[c] is the run of entry c << csh, so
// an entry's run is found by a step or two from there. First every position of a batch,
// then its loads, then the calls, by every lane of a warp together (ok false past the end).
// THREADS threads take part, `t0` is this one's index among them.
template <u32 THREADS, bool PAIRS, class F>
__device__ __forceinline__ void bt_gather(u32 t0, u32 nq, const u32* tpre, const u32* tsrc, const u32* dir, u32 csh,
                                          const u32* packed, u32 mode, u64 kinv, u32 tile, F f) {
    for (u32 i0 = t0; i0 - (t0 & 31) < nq; i0 += BT_ILP * THREADS) {
        u32 idx[BT_ILP], run[BT_ILP], p[BT_ILP];
#pragma unroll
        for (int u = 0; u < BT_ILP; u++) {
            u32 i = i0 + u * THREADS;
            idx[u] = 0xffffffffu;
            run[u] = 0;
            if (i < nq) {
                u32 t = dir[i >> csh];
                while (tpre[t + 1] <= i) t++;
                idx[u] = tsrc[t] + (i - tpre[t]);
                run[u] = t;
            }
        }
#pragma unroll
        for (int u = 0; u < BT_ILP; u++) p[u] = idx[u] != 0xffffffffu ? __ldcg(packed + idx[u]) : 0u;
#pragma unroll
        for (int u = 0; u < BT_ILP; u++) {
            const u32 j = run[u] * tile + (p[u] >> 15);
            f(idx[u] != 0xffffffffu, bt_key<PAIRS>(j, (p[u] >> 14) & 1u, mode, kinv), p[u] & 0x3fffu);
        }
    }
}

// start[l] = exclusive prefix of count(l) over ncq <= PER BT_THREADS columns, PER
// consecutive columns a thread; returns the total (every thread).
template <u32 PER, class C>
__device__ __forceinline__ u32 bt_scan_columns(u32* start, u32 ncq, u32* ws, C count) {
    const u32 per = PER, l0 = threadIdx.x * per;
    u32 v[per], s = 0, tot;
#pragma unroll
    for (u32 u = 0; u < per; u++) {
        v[u] = l0 + u < ncq ? count(l0 + u) : 0u;
        s += v[u];
    }
    u32 pre = block_exclusive_scan<u32, BT_WARPS>(s, &tot, ws);
#pragma unroll
    for (u32 u = 0; u < per; u++) {
        if (l0 + u < ncq) start[l0 + u] = pre;
        pre += v[u];
    }
    return tot;
}

// The directory of a bucket's runs (see bt_gather): every (1 << csh)-th entry's run, by a
// binary search each; `stride` threads take part, `t0` is this one's index among them.
__device__ __forceinline__ u32 bt_dir_shift(u32 nq) {
    u32 csh = 0;
    while ((nq >> csh) >= BT_DIR) csh++;
    return csh;
}
__device__ __forceinline__ void bt_directory(u32* dir, const u32* tpre, u32 nt, u32 nq, u32 csh, u32 t0, u32 stride) {
    for (u32 c = t0; (c << csh) < nq; c += stride) {
        u32 i = c << csh, lo = 0, hi = nt - 1;
        while (lo < hi) {
            u32 mid = (lo + hi + 1) >> 1;
            if (tpre[mid] <= i) lo = mid; else hi = mid - 1;
        }
        dir[c] = lo;
    }
}

// The sign slots of δ3's two-slot way (one per column and sign; empty: all bits set).
__device__ __forceinline__ void bt_empty_slots(uint2* slot2, u32 ncq, u32 t0, u32 stride) {
    for (u32 l = t0; l < ncq; l += stride) slot2[l] = make_uint2(0xffffffffu, 0xffffffffu);
}
__device__ __forceinline__ u32 bt_filled(uint2 x) { return (x.x != 0xffffffffu ? 1u : 0u) + (x.y != 0xffffffffu ? 1u : 0u); }
// A warp's run of columns [wl0, wl1) (a multiple of 32 long but for the bucket's last): the
// filled slots of this lane's columns, one column a lane, both slots in one load.
__device__ __forceinline__ u32 bt_slots_filled(const uint2* slot2, u32 wl0, u32 wl1) {
    u32 mine = 0;
    for (u32 l = wl0 + (threadIdx.x & 31); l < wl1; l += 32) mine += bt_filled(slot2[l]);
    return mine;
}
// The offsets and rows of a warp's run of columns [wl0, wl1), whose first entry goes to
// out[carry]: rounds of 32 columns, one a lane. A column holds 0, 1 or 2 entries, so a
// round's scan is two ballots and its total their counts; the offsets are written
// coalesced. `toffs` points at the bucket's first column's offset. With `rb` (the warp's
// BT_RING words of shared memory) the rows go through it and leave in aligned chunks of 32
// entries (128 bytes: whole L2 sectors, one request a chunk) as soon as a chunk is
// complete; only the warp's first and last chunks are written in part. Without it, each
// lane stores its column's entries itself.
#define BT_RING 128
__device__ __forceinline__ void bt_slot_rows(const uint2* slot2, u32 wl0, u32 wl1, u32 carry, u32* toffs, i32* out,
                                             u32* rb) {
    const u32 lane = threadIdx.x & 31, le = (2u << lane) - 1u;  // lanes up to this one
    const u32 S = carry;
    u32 cs = S & ~31u;  // the next chunk to write
    for (u32 r = wl0; r < wl1; r += 32) {  // the same rounds for the whole warp
        const u32 l = r + lane;
        const uint2 x = l < wl1 ? slot2[l] : make_uint2(0xffffffffu, 0xffffffffu);
        const u32 c = bt_filled(x);
        const u32 one = __ballot_sync(0xffffffffu, c != 0u), two = __ballot_sync(0xffffffffu, c == 2u);
        const u32 a = carry + __popc(one & le) + __popc(two & le) - c;
        if (l < wl1) toffs[l] = a;
        carry += __popc(one) + __popc(two);
        if (rb) {
            // at most 31 entries wait from earlier rounds and a round adds at most 64: the
            // ring never overwrites an entry not yet written out
            if (c) rb[a % BT_RING] = (u32)tunkey(min(x.x, x.y));
            if (c == 2u) rb[(a + 1) % BT_RING] = (u32)tunkey(max(x.x, x.y));
            __syncwarp();
            for (; cs + 32 <= carry; cs += 32) {
                const u32 p = cs + lane;
                if (p >= S) out[p] = (i32)rb[p % BT_RING];
            }
            __syncwarp();
        } else {
            if (c) out[a] = tunkey(min(x.x, x.y));
            if (c == 2u) out[a + 1] = tunkey(max(x.x, x.y));
        }
    }
    if (rb) {
        const u32 p = cs + lane;
        if (p >= S && p < carry) out[p] = (i32)rb[p % BT_RING];
    }
}

// Half h of a block of BT_THREADS (threads h * BT_THREADS / 2 on): its own named barrier
// (1 + h; __syncthreads is barrier 0), and an exclusive scan over its threads (`ws`:
// BT_WARPS / 2 + 1 words of its own; the prelude's group scan).
__device__ __forceinline__ void bt_half_sync(u32 h) {
    asm volatile("bar.sync %0, %1;" ::"r"(h + 1u), "n"(BT_THREADS / 2) : "memory");
}
__device__ __forceinline__ u32 bt_half_scan(u32 x, u32* total, u32* ws, u32 h) {
    return group_exclusive_scan<u32, BT_WARPS / 2>(x, total, ws, (int)((threadIdx.x >> 5) & (BT_WARPS / 2 - 1)),
                                                   [h] { bt_half_sync(h); });
}
// Half 1's runs table (nt + 1 and nt words, nt <= BT_NTMAX / 2) and directory; the buckets a
// block lists for the general way while its halves run.
#define BT_HALF_TABLES (BT_NTMAX + 1 + BT_DIR)
#define BT_FAILMAX 4

// The next bucket from the counter (sync[2], zeroed by coop_start), larger ones first
// (order[]); nb when none is left.
__device__ __forceinline__ u32 bt_draw(u32* sync, const u32* order, u32 nb) {
    const u32 i = atomicAdd(sync + 2, 1u);
    return i < nb ? order[i] : nb;
}

// The steps of bucket q that the whole block and a half block share: THREADS threads take
// part (`t0` is this one's index among them), `sync()` is their barrier and `scan(x,
// &total)` their exclusive scan. First the bucket's runs table (tpre, tsrc) and directory
// (dir, every (1 << csh)-th entry), and its sign slots emptied when `slots` is not null.
template <u32 THREADS, class Sync, class Scan>
__device__ __forceinline__ void bt_bucket_runs(const uint2* st, u32 q, u32 nt, u32 tile, u32 nq, u32 csh, u32 t0,
                                               u32* tpre, u32* tsrc, u32* dir, uint2* slots, u32 ncq, Sync sync,
                                               Scan scan) {
    u32 len = 0, src = 0, tot;
    if (t0 < nt) {
        uint2 s = __ldcg(st + (u64)q * nt + t0);
        len = s.y;
        src = t0 * tile + s.x;
    }
    const u32 pre = scan(len, &tot);
    if (t0 < nt) {
        tpre[t0] = pre;
        tsrc[t0] = src;
    }
    if (t0 == 0) tpre[nt] = tot;
    sync();
    bt_directory(dir, tpre, nt, nq, csh, t0, THREADS);
    if (slots) bt_empty_slots(slots, ncq, t0, THREADS);
    sync();
}
// δ3's two-slot way for a bucket of nq entries and ncq columns whose first entry goes to
// out[B] (`toffs`: its first column's offset): every entry into the slot of its column and
// sign, then, when every entry found a slot of its own, the offsets and rows, each warp a
// run of consecutive columns (the block's or half's scan of their filled slots gives the
// warp's start and the total). `rb`: BT_RING words a warp of the block for the rows (see
// bt_slot_rows), or null. Returns whether it wrote them (else nothing was written); no
// barrier after the writes.
template <u32 THREADS, bool PAIRS, class Sync, class Scan>
__device__ __forceinline__ bool bt_slot_bucket(u32 t0, u32 nq, u32 B, u32 ncq, const u32* tpre, const u32* tsrc,
                                               const u32* dir, u32 csh, const u32* packed, u32 mode, u64 kinv, u32 tile,
                                               u32* slot, u32* toffs, i32* out, u32* rb, Sync sync, Scan scan) {
    bt_gather<THREADS, PAIRS>(t0, nq, tpre, tsrc, dir, csh, packed, mode, kinv, tile, [&](bool ok, u32 key, u32 l) {
        if (ok) slot[2 * l + (key & 1u)] = key;
    });
    sync();
    const uint2* slot2 = (const uint2*)slot;
    const u32 per = (ncq + THREADS - 1) / THREADS * 32, wl0 = (t0 >> 5) * per, wl1 = min(ncq, wl0 + per);
    u32 filled;
    const u32 pre = scan(bt_slots_filled(slot2, wl0, wl1), &filled);
    if (filled != nq) return false;
    bt_slot_rows(slot2, wl0, wl1, B + __shfl_sync(0xffffffffu, pre, 0), toffs, out, rb);
    return true;
}

// Mode 3 (δ1 of canonical ∂1 pairs: `from` < `to` for every edge, `from` non-decreasing,
// as Tessera's simplex derivation numbers edges), edge e = (f, t), called by every lane of a
// warp together for consecutive edges (ok false past the end): e0[v], the first edge whose
// `from` is >= v (e0[nv] = ne), is written for v in (from(e - 1), f] by edge e, every v
// once. Where the pairs are not canonical, *bad = 1 (and e0 is incomplete: the launch
// writes nothing more).
__device__ __forceinline__ void bt_canonical_entry(bool ok, u32 e, u32 f, u32 t, const i32* cols, u32 ne, u32 nv,
                                                   u32* e0, u32* bad) {
    u32 fp = __shfl_up_sync(0xffffffffu, f, 1);  // from(e - 1)
    if ((threadIdx.x & 31) == 0 && ok) fp = e ? (u32)cols[2 * e - 2] : 0xffffffffu;  // "-1" before edge 0
    if (!ok) return;
    if (f >= t || (e && f < fp)) {
        *bad = 1u;
        return;
    }
    for (u32 v = fp + 1; v <= f; v++) e0[v] = e;  // fp + 1 is 0 for edge 0
    if (e == ne - 1)
        for (u32 v = f + 1; v <= nv; v++) e0[v] = ne;
}

// Rows of a bucket's placement (keys in shared memory) of at most N entries sorted in place by
// one thread each: all loads at once, a sorting network in registers (sort_net: 4 or N keys;
// padding keys sort last), predicated stores. The entries of longer rows get bit 15 of their
// column within the bucket (`pc`, columns below BT_WMAX), and those take their rank in the
// row. Before, every entry of every row counted the smaller keys of its row in shared memory
// (its row's length in loads and compares, and a warp waited for its longest row). N = 0:
// nothing (every row by rank).
// BT_NET, modes 1 and 2: the dragon's δ2 (rows of ~4.4 entries) 0.132 -> 0.121 ms with 16, 0.125
// with 8 (session 26). BT_NET_P, mode 3 (δ1's in-edges): 0, since the networks made the
// dragon's δ1 slower (0.068 -> 0.071-0.075 ms with 8: its rows are longer, and its largest
// buckets, which set its end, hold the longest). Marking the sorted rows' entries instead of
// the long ones cost δ2 7 µs (0.129 ms: 16-bit stores to scattered words).
#define BT_NET 16
#define BT_NET_P 0
#define BT_LONGROW 0x8000u
template <int N>
__device__ __forceinline__ void bt_sort_placed(u32* row, u32 n) {
    if constexpr (N > 0) {
        auto same = [](u32 k) { return k; };
        if (n <= 4) {
            sort_regs<4>(row, n, same, same);
        } else if (n <= N) {
            sort_regs<N>(row, n, same, same);
        }
    }
}

// The kernel's body; PAIRS (mode 3) is a compile-time case, so that the other modes' code
// carries none of it (kernels transpose_bucketed and transpose_bucketed_pairs below).
template <bool PAIRS>
__device__ __forceinline__ void bt_transpose(const i32* cols, u32 nnz, u32 mode, u64 kinv, u32 ncols, u32 w, u64 winv,
                                             u32 nb, u32 tile, u32 nt, u32 cap, u32 two_slot, u32 parity,
                                             u32 long_by_thread, u32* sync, u32* gcount, uint2* st, u32* packed,
                                             u32* toffs, i32* out, u32* flag, u32* e0, u32 ncut, const u32* cuts,
                                             const u16* cut_of) {
    // mode 3 never takes the two-slot way (nor its half blocks): with the flag known at
    // compile time, that code is left out of transpose_bucketed_pairs
    if constexpr (PAIRS) two_slot = 0u;
    // mode 3 with buckets cut by the host (ncut groups of 32 columns, ncut > 0): bucket q is
    // columns cuts[q] .. cuts[q + 1], and the bucket of column c is cut_of[c >> 5] (cuts
    // fall on multiples of 32); else buckets of w columns. With the cuts the host also gives
    // e0 and has checked the pairs' order, so phase 1 neither writes nor checks them.
    const bool by_cuts = PAIRS && ncut != 0u;
    extern __shared__ u32 smem[];
    __shared__ u32 ws[BT_WARPS + 1];
    __shared__ u32 nlong, long_at[BT_LONG], long_len[BT_LONG];
    const u32 tid = threadIdx.x, G = gridDim.x;
    u32* cnt = gcount + parity * BT_GCOUNT;
    u32* other = gcount + (1u - parity) * BT_GCOUNT;
    coop_start(sync);
    for (u32 q = blockIdx.x * BT_THREADS + tid; q < BT_GCOUNT; q += G * BT_THREADS) other[q] = 0u;
    if (tid == 0) nlong = 0u;

    // phase 1: tiles sorted by bucket
    u32* hist = smem;                        // nb
    i32* sin = (i32*)(smem + BT_NBMAX);      // tile: the tile as read (once)
    u32* sout = (u32*)(sin + tile);          // tile: packed entries by bucket
    u32* scut = sout + tile;                 // by_cuts: nb + 1, the buckets' first columns
    u16* scut_of = (u16*)(scut + ((nb + 4) & ~3u));  // by_cuts: ncut, the bucket of each 32 columns
    if (by_cuts) {
        // ncut is a multiple of 8: 16-byte loads and stores
        for (u32 q = tid; q <= nb; q += BT_THREADS) scut[q] = __ldg(cuts + q);
        for (u32 q = tid; q < ncut / 8; q += BT_THREADS) ((uint4*)scut_of)[q] = __ldg((const uint4*)cut_of + q);
    }
    // the bucket of column c, and c within it (the first barrier of the tile loop orders the
    // tables' stores before their loads)
    auto bucket_of = [&](u32 c) { return by_cuts ? (u32)scut_of[c >> 5] : bt_div(c, winv); };
    auto in_bucket = [&](u32 c, u32 b) { return by_cuts ? c - scut[b] : c - b * w; };
    for (u32 t = blockIdx.x; t < nt; t += G) {
        const u32 lo = t * tile, n = min(tile, nnz - lo);
        for (u32 q = tid; q < nb; q += BT_THREADS) hist[q] = 0u;
        __syncthreads();
        // each entry's rank among the tile's entries of its bucket (the count's atomic
        // returns it), kept for the placement: entry k of this thread is tid + k BT_THREADS
        u32 rk[BT_TILEMAX / BT_THREADS / 2];  // two 16-bit ranks a word
        bt_tile_entries<PAIRS>(cols, lo, n, [&](bool ok, u32 i, i32 v, u32 k, u32 from) {
            if (PAIRS && !by_cuts) bt_canonical_entry(ok, lo + i, from, (u32)v, cols, nnz, ncols, e0, cnt + BT_NBMAX);
            u32 s, c = bt_column<PAIRS>(v, mode, lo + i, s);
            if (ok) sin[i] = v;
            const u32 r = bt_add(hist, bucket_of(c), ok);
            if (k & 1u) rk[k >> 1] |= r << 16; else rk[k >> 1] = r;
        });
        __syncthreads();
        {
            const u32 q0 = 2 * tid, q1 = q0 + 1;
            u32 a0 = q0 < nb ? hist[q0] : 0u, a1 = q1 < nb ? hist[q1] : 0u, tot;
            u32 pre = block_exclusive_scan<u32, BT_WARPS>(a0 + a1, &tot, ws);
            if (q0 < nb) {
                st[(u64)q0 * nt + t] = make_uint2(pre, a0);
                if (a0) atomicAdd(cnt + q0, a0);
                hist[q0] = pre;
            }
            if (q1 < nb) {
                st[(u64)q1 * nt + t] = make_uint2(pre + a0, a1);
                if (a1) atomicAdd(cnt + q1, a1);
                hist[q1] = pre + a0;
            }
        }
        __syncthreads();
        // hist[b] is the start of bucket b's run: every entry's place without an atomic
#pragma unroll
        for (u32 k = 0; k < BT_TILEMAX / BT_THREADS; k++) {
            const u32 i = tid + k * BT_THREADS;
            if (i < n) {
                u32 s, c = bt_column<PAIRS>(sin[i], mode, lo + i, s);
                const u32 b = bucket_of(c);
                sout[hist[b] + ((rk[k >> 1] >> (16 * (k & 1u))) & 0xffffu)] = bt_pack(i, s, in_bucket(c, b));
            }
        }
        __syncthreads();
        for (u32 i = tid; i < n; i += BT_THREADS) packed[lo + i] = sout[i];
        __syncthreads();
    }
    grid_sync(sync);
    if (PAIRS && __ldcg(cnt + BT_NBMAX) != 0u) {
        // not canonical pairs: nothing written; the host takes the general transpose
        if (blockIdx.x == 0 && tid == 0) flag[1] = 1u;  // a plain store: mapped host memory
        coop_end(sync);
        return;
    }

    // phase 2: buckets
    u32* gbase = smem;                       // nb + 1: where each bucket starts in the result
    u32* order = gbase + BT_NBMAX + 1;       // nb: the buckets, larger ones first
    u32* tpre = order + BT_NBMAX;            // nt + 1: the bucket's runs, where they start
    u32* tsrc = tpre + BT_NTMAX + 1;         // nt: where they are in `packed`
    u32* dir = tsrc + BT_NTMAX;              // BT_DIR: the run of every (1 << csh)-th entry
    u32* start = dir + BT_DIR;               // BT_WMAX: a window's offsets, then placement cursors
    u32* pk = start + BT_WMAX;               // cap: placed keys
    u16* pc = (u16*)(pk + cap);              // cap: their columns
    // the room of start[], pk and pc (words); the two-slot way's rows go through rings of
    // BT_RING words a warp at its end when they fit beside the slots (and half 1's tables)
    const u32 room = BT_WMAX + cap + cap / 2;
    u32* const rings = start + room - BT_WARPS * BT_RING;
    const bool halves = two_slot && nt <= BT_THREADS / 2 && 4 * w + BT_HALF_TABLES <= room;
    u32* const rb = (halves ? 4 * w + BT_HALF_TABLES : 2 * w) + BT_WARPS * BT_RING <= room
                        ? rings + (tid >> 5) * BT_RING
                        : nullptr;
    // at most one bucket for each half block: half h of block b takes bucket b + h G (no draw
    // from the counter, and no order of the buckets to compute)
    const bool one_each = halves && nb <= 2 * G;
    // buckets cut by the host, at most one a block: block b takes bucket b
    const bool block_each = by_cuts && nb <= G;
    {
        const u32 q0 = 2 * tid, q1 = q0 + 1;
        const u32 a0 = q0 < nb ? __ldcg(cnt + q0) : 0u, a1 = q1 < nb ? __ldcg(cnt + q1) : 0u;
        u32 tot;
        const u32 pre = block_exclusive_scan<u32, BT_WARPS>(a0 + a1, &tot, ws);
        if (q0 < nb) gbase[q0] = pre;
        if (q1 < nb) gbase[q1] = pre + a0;
        if (tid == 0) gbase[nb] = tot;
        if (!one_each && !block_each) {
            // the order in which the buckets are taken: BT_CLS classes of size, the largest
            // buckets first (so that the last ones taken are small), by index within a class.
            // Every block must compute the same order: a block scan of the classes' counts, one
            // 16-bit field each.
            __shared__ u32 largest;
            __shared__ u64 ws64[BT_WARPS + 1];
            if (tid == 0) largest = 0u;
            __syncthreads();
            if (a0 | a1) atomicMax(&largest, max(a0, a1));
            __syncthreads();
            const u64 m = (u64)largest + 1;
            const u32 k0 = (u32)((u64)(largest - a0) * BT_CLS / m), k1 = (u32)((u64)(largest - a1) * BT_CLS / m);
            const u64 v = (q0 < nb ? 1ull << (16 * k0) : 0ull) + (q1 < nb ? 1ull << (16 * k1) : 0ull);
            u64 all;
            const u64 pre64 = block_exclusive_scan<u64, BT_WARPS>(v, &all, ws64);
            auto field = [](u64 x, u32 k) { return (u32)(x >> (16 * k)) & 0xffffu; };
            auto class_start = [&](u32 k) {
                u32 c = 0;
#pragma unroll
                for (u32 j = 0; j < BT_CLS; j++) c += j < k ? field(all, j) : 0u;
                return c;
            };
            if (q0 < nb) order[class_start(k0) + field(pre64, k0)] = q0;
            if (q1 < nb) order[class_start(k1) + field(pre64, k1) + (k1 == k0 ? 1u : 0u)] = q1;
        }
    }
    if (blockIdx.x == 0 && tid == 0) toffs[ncols] = PAIRS ? 2 * nnz : nnz;
    __syncthreads();
    // buckets are taken from a counter (sync[2], zeroed by coop_start), larger ones first: a
    // block that drew smaller ones takes more
    __shared__ u32 qnext;
    // Bucket q with the whole block: the two-slot way first when `slots`, else (or when two
    // entries met in one slot) the general way.
    auto bucket = [&](const u32 q, const bool slots) {
        const u32 nq = gbase[q + 1] - gbase[q], c0 = by_cuts ? __ldg(cuts + q) : q * w;
        const u32 ncq = by_cuts ? __ldg(cuts + q + 1) - c0 : min(w, ncols - c0), csh = bt_dir_shift(nq);
        // mode 3: the result holds each column's `from` ends after its `to` ends, the edges
        // e0[c] .. e0[c + 1] (canonical pairs); se[l] is where column l's start moves by
        // them within the bucket, kept in the last BT_WMAX + 1 words of the placed keys' room
        // (at most BT_WMAX columns: one window; a range places at most capr = cap - BT_WMAX - 1
        // entries then)
        const u32 e0c0 = PAIRS ? __ldcg(e0 + c0) : 0u, B = gbase[q] + e0c0;
        u32* const se = pk + cap - (BT_WMAX + 1);
        const u32 capr = PAIRS ? cap - (BT_WMAX + 1) : cap;
        auto bsync = [] { __syncthreads(); };
        auto bscan = [&](u32 x, u32* total) { return block_exclusive_scan<u32, BT_WARPS>(x, total, ws); };
        bt_bucket_runs<BT_THREADS>(st, q, nt, tile, nq, csh, tid, tpre, tsrc, dir, slots ? (uint2*)start : nullptr, ncq,
                                   bsync, bscan);
        if (slots) {
            // δ3 of a 3-manifold: one slot per column and sign, no counting, no sort; the
            // bucket goes the general way below when two entries met in one slot. The slots
            // (2 ncq words, 8-byte aligned) take the room of start[] and the placed entries
            // (the host checked that they fit), emptied above with the directory.
            const bool done = bt_slot_bucket<BT_THREADS, PAIRS>(tid, nq, B, ncq, tpre, tsrc, dir, csh, packed, mode, kinv, tile,
                                                         start, toffs + c0, out, rb, bsync, bscan);
            __syncthreads();
            if (done) return;
        }
        // the general way, in windows of at most BT_WMAX columns (one window unless the
        // bucket is a two-slot one that did not fill its slots)
        u32 Bw = B;
        for (u32 wl = 0; wl < ncq; wl += BT_WMAX) {
            const u32 nw = min((u32)BT_WMAX, ncq - wl);
            for (u32 l = tid; l < nw; l += BT_THREADS) start[l] = 0u;
            if (PAIRS)
                for (u32 l = tid; l <= nw; l += BT_THREADS) se[l] = __ldcg(e0 + c0 + l) - e0c0;
            __syncthreads();
            bt_gather<BT_THREADS, PAIRS>(tid, nq, tpre, tsrc, dir, csh, packed, mode, kinv, tile,
                                  [&](bool ok, u32, u32 l) { bt_add(start, l - wl, ok && l - wl < nw); });
            __syncthreads();
            const u32 tw = bt_scan_columns<BT_WMAX / BT_THREADS>(start, nw, ws, [&](u32 l) { return start[l]; });
            __syncthreads();
            auto eoff = [&](u32 l) { return PAIRS ? se[l] : 0u; };
            for (u32 l = tid; l < nw; l += BT_THREADS) toffs[c0 + wl + l] = Bw + start[l] + eoff(l);  // coalesced
            if (PAIRS) {
                // the `from` ends, -1 entries: edge e of vertex c0 + l after the column's `to`
                // ends (in-prefix of l + 1), in edge order
                // BT_ILP loads of `from` in flight a thread before their stores
                const u32 eend = e0c0 + se[nw];
                for (u32 e1 = e0c0 + tid; e1 < eend; e1 += BT_ILP * BT_THREADS) {
                    u32 f[BT_ILP];
#pragma unroll
                    for (int u = 0; u < BT_ILP; u++) {
                        const u32 e = e1 + u * BT_THREADS;
                        f[u] = e < eend ? (u32)cols[2 * e] : c0;
                    }
#pragma unroll
                    for (int u = 0; u < BT_ILP; u++) {
                        const u32 e = e1 + u * BT_THREADS, l = f[u] - c0;
                        if (e < eend) out[B + (l + 1 < nw ? start[l + 1] : tw) + (e - e0c0)] = tunkey(2 * e);
                    }
                }
            }
            // column ranges of at most capr entries (one range when the window fits)
            u32 l0 = 0;
            while (l0 < nw) {
                const u32 s0 = start[l0];
                u32 lo = l0, hi = nw;
                while (lo < hi) {
                    u32 mid = (lo + hi + 1) >> 1;
                    u32 sm = mid == nw ? tw : start[mid];
                    if (sm - s0 <= capr) lo = mid; else hi = mid - 1;
                }
                const bool single = lo == l0;  // column l0 alone holds more than capr entries
                const u32 l1 = single ? l0 + 1 : lo, s1 = l1 == nw ? tw : start[l1];
                __syncthreads();  // every thread has read start[] before the placement moves it
                if (single) {
                    bt_gather<BT_THREADS, PAIRS>(tid, nq, tpre, tsrc, dir, csh, packed, mode, kinv, tile, [&](bool ok, u32 key, u32 l) {
                        ok = ok && l - wl == l0;
                        u32 s = bt_add(start, l0, ok);
                        if (ok) out[Bw + s + eoff(l0)] = tunkey(key);
                    });
                    if (tid == 0) {
                        if (long_by_thread) {
                            long_at[0] = Bw + s0 + eoff(l0);
                            long_len[0] = s1 - s0;
                            nlong = 1u;
                        } else {
                            *flag = 1u;  // a plain store: the flag may be mapped host memory
                        }
                    }
                } else {
                    bt_gather<BT_THREADS, PAIRS>(tid, nq, tpre, tsrc, dir, csh, packed, mode, kinv, tile, [&](bool ok, u32 key, u32 l) {
                        l -= wl;
                        ok = ok && l >= l0 && l < l1;
                        u32 s = bt_add(start, l, ok) - s0;
                        if (ok) {
                            pk[s] = key;
                            pc[s] = (u16)l;
                        }
                    });
                    __syncthreads();
                    // start[l] now ends row l (the start of row l + 1) for l in [l0, l1). Rows
                    // of up to NET entries are sorted in place by one thread each
                    // (bt_sort_placed); equal keys, which only repeated input entries make, give
                    // equal entries, so their order does not matter.
                    constexpr int NET = PAIRS ? BT_NET_P : BT_NET;
                    if constexpr (NET > 0) {
                        // a warp's lanes take 32 consecutive columns together; the entries of
                        // its longer rows are marked by the whole warp, row after row (a hub's
                        // thousands of entries by one thread would hold the block)
                        const u32 lane = tid & 31u;
                        for (u32 lw = l0 + (tid - lane); lw < l1; lw += BT_THREADS) {
                            const u32 l = lw + lane;
                            u32 a = 0, n = 0;
                            if (l < l1) {
                                a = (l == l0 ? s0 : start[l - 1]) - s0;
                                n = start[l] - s0 - a;
                                bt_sort_placed<NET>(pk + a, n);
                            }
                            for (u32 m = __ballot_sync(0xffffffffu, n > (u32)NET); m; m &= m - 1) {
                                const u32 src = __ffs(m) - 1;
                                const u32 ra = __shfl_sync(0xffffffffu, a, src), rn = __shfl_sync(0xffffffffu, n, src);
                                for (u32 j = lane; j < rn; j += 32) pc[ra + j] |= (u16)BT_LONGROW;
                            }
                        }
                        __syncthreads();
                    }
                    // every entry to its place: rows of up to NET entries where they are,
                    // longer ones (marked) by their rank in the row (ties by position)
                    for (u32 s = tid; s < s1 - s0; s += BT_THREADS) {
                        const u32 e = pk[s], p = pc[s];
                        if (NET > 0 && !(p & BT_LONGROW)) {
                            out[Bw + s0 + s + eoff(p)] = tunkey(e);
                            continue;
                        }
                        const u32 l = p & (BT_LONGROW - 1u);
                        const u32 a = (l == l0 ? s0 : start[l - 1]) - s0, b = start[l] - s0;
                        if (b - a <= TS_MID) {
                            u32 rank = 0;
                            for (u32 x = a; x < b; x++) {
                                u32 y = pk[x];
                                rank += y < e || (y == e && x < s);
                            }
                            out[Bw + s0 + a + rank + eoff(l)] = tunkey(e);
                        } else {
                            out[Bw + s0 + s + eoff(l)] = tunkey(e);
                            if (s == a) {
                                if (long_by_thread) {
                                    u32 i = atomicAdd(&nlong, 1u);
                                    long_at[i] = Bw + s0 + a + eoff(l);  // at most cap / TS_MID <= BT_LONG rows
                                    long_len[i] = b - a;
                                } else {
                                    *flag = 1u;
                                }
                            }
                        }
                    }
                }
                __syncthreads();
                if (tid < nlong) thread_sort_row((u32*)out, long_at[tid], long_at[tid] + long_len[tid], TS_MODE);
                __syncthreads();
                if (tid == 0) nlong = 0u;
                l0 = l1;
            }
            Bw += tw;
            __syncthreads();
        }
    };
    // Two-slot buckets two at a time: each half of the block (512 threads, with a named
    // barrier of its own) takes buckets from the counter (or its one bucket, `one_each`)
    // and fills and writes their sign slots on its own, so that one half's loads overlap
    // the other half's scans and stores (a whole block steps through a bucket's few serial
    // steps with most of its warps waiting). A bucket whose slots collide is listed, and the
    // whole block takes it the general way after both halves are done; a half stops drawing
    // while the list might fill up, and the whole-block loop below takes the buckets that
    // are left then (never with `one_each`: at most two buckets a block, at most two
    // listed). The halves' slots take 4 w words of the room of start[] and the placed
    // entries, half 1's runs and directory the BT_HALF_TABLES words after them (half 0 uses
    // the block's).
    bool rest = true;  // whether the whole-block loop still has buckets to draw
    if (halves) {
        __shared__ u32 hq[2], hws[2][BT_WARPS / 2 + 1], nfail, stopped, fail_at[BT_FAILMAX];
        const u32 h = tid >> 9, ht = tid & (BT_THREADS / 2 - 1);
        u32* const htpre = h ? start + 4 * w : tpre;
        u32* const htsrc = h ? htpre + BT_NTMAX / 2 + 1 : tsrc;
        u32* const hdir = h ? htsrc + BT_NTMAX / 2 : dir;
        u32* const slot = start + 2 * w * h;
        if (tid == 0) {
            nfail = 0u;
            stopped = 0u;
        }
        __syncthreads();
        bool first = true;  // whether this half has taken no bucket yet
        for (;;) {
            u32 q;
            if (one_each) {
                q = first ? blockIdx.x + h * G : nb;
            } else {
                if (ht == 0) {
                    u32 qq = nb;
                    if (*(volatile u32*)&nfail + 2u <= BT_FAILMAX) {
                        qq = bt_draw(sync, order, nb);
                    } else {
                        stopped = 1u;
                    }
                    hq[h] = qq;
                }
                bt_half_sync(h);
                q = hq[h];
            }
            if (q >= nb) break;
            const u32 B = gbase[q], nq = gbase[q + 1] - B, c0 = q * w, ncq = min(w, ncols - c0), csh = bt_dir_shift(nq);
            auto hsync = [h] { bt_half_sync(h); };
            auto hscan = [&](u32 x, u32* total) { return bt_half_scan(x, total, hws[h], h); };
            bt_bucket_runs<BT_THREADS / 2>(st, q, nt, tile, nq, csh, ht, htpre, htsrc, hdir, (uint2*)slot, ncq, hsync,
                                           hscan);
            const bool done = bt_slot_bucket<BT_THREADS / 2, PAIRS>(ht, nq, B, ncq, htpre, htsrc, hdir, csh, packed, mode, kinv,
                                                             tile, slot, toffs + c0, out, rb, hsync, hscan);
            if (!done && ht == 0) fail_at[atomicAdd(&nfail, 1u)] = q;
            first = false;
        }
        __syncthreads();
        for (u32 i = 0; i < nfail; i++) bucket(fail_at[i], false);
        rest = !one_each && stopped != 0u;
    }
    if (block_each) {
        if (blockIdx.x < nb) bucket(blockIdx.x, false);
        rest = false;
    }
    while (rest) {
        if (tid == 0) qnext = bt_draw(sync, order, nb);
        __syncthreads();
        const u32 q = qnext;
        if (q >= nb) break;
        bucket(q, two_slot != 0u);
    }
    coop_end(sync);
}

#define BT_PARAMS                                                                                                     \
    const i32 *cols, u32 nnz, u32 mode, u64 kinv, u32 ncols, u32 w, u64 winv, u32 nb, u32 tile, u32 nt, u32 cap,       \
        u32 two_slot, u32 parity, u32 long_by_thread, u32 *sync, u32 *gcount, uint2 *st, u32 *packed, u32 *toffs,      \
        i32 *out, u32 *flag, u32 *e0, u32 ncut, const u32 *cuts, const u16 *cut_of
#define BT_ARGS                                                                                                       \
    cols, nnz, mode, kinv, ncols, w, winv, nb, tile, nt, cap, two_slot, parity, long_by_thread, sync, gcount, st, packed, \
        toffs, out, flag, e0, ncut, cuts, cut_of
// Modes 1 and 2 (e0, ncut, cuts and cut_of unused).
extern "C" __global__ void __launch_bounds__(BT_THREADS, 1) transpose_bucketed(BT_PARAMS) { bt_transpose<false>(BT_ARGS); }
// Mode 3: δ1 of canonical pairs (two_slot 0; mode and kinv unused).
extern "C" __global__ void __launch_bounds__(BT_THREADS, 1) transpose_bucketed_pairs(BT_PARAMS) {
    bt_transpose<true>(BT_ARGS);
}

// The marks of the edges and vertices of one boundary face whose ∂2 row `c` (fe_k = 3 or 4
// entries) and its edges' vertex pairs `p` are loaded: every edge is marked, and where every
// end of the face's edges is the tail of one of them, as in a closed loop, each vertex is
// marked once, as a tail; else both ends of every edge are.
__device__ __forceinline__ void boundary_mark_loop(const i32* c, const uint2* p, u32 fe_k, u32* emark, u32* vmark,
                                                   u32 mark) {
    u32 tail[4], head[4];
#pragma unroll
    for (u32 j = 0; j < 4; j++) {
        tail[j] = c[j] < 0 ? p[j].y : p[j].x;
        head[j] = c[j] < 0 ? p[j].x : p[j].y;
    }
    bool closed = true;
#pragma unroll
    for (u32 j = 0; j < 4; j++) {
        bool found = j >= fe_k;
#pragma unroll
        for (u32 q = 0; q < 4; q++) found |= q < fe_k && head[j] == tail[q];
        closed &= found;
    }
#pragma unroll
    for (u32 j = 0; j < 4; j++) {
        if (j < fe_k) {
            emark[tcol(c[j])] = mark;
            vmark[tail[j]] = mark;
            if (!closed) vmark[head[j]] = mark;
        }
    }
}
// The marks of the edges and vertices of the `n` boundary faces in `list`, BM_ILP faces a
// lane at once (the warp's `lane`). Rows of ∂2 of 3 or 4 entries (`fe_k`, uniform) are
// loaded together, then their edges' vertex pairs, then the marks are stored: two dependent
// loads a face, not two an edge (a store to the marks would otherwise order every later
// load). Rows of other lengths go edge by edge.
// With `canon` (faces the host found canonical: every row the loop (a,b), (b,c), (a,c) of a
// triple a < b < c over edges from < to), the vertices are a and b of the first edge and c of
// the second: two vertex pairs a face, not three, and no test of the loop.
#define BM_ILP 2
__device__ __forceinline__ void boundary_mark_list(const u32* list, u32 n, u32 lane, u32 fe_k, u32 canon, const u32* fe_offs,
                                                   const i32* fe_cols, const u32* ev, u32* emark, u32* vmark, u32 mark) {
    for (u32 i0 = lane; i0 < n; i0 += 32 * BM_ILP) {
        u32 f[BM_ILP];
        bool ok[BM_ILP];
#pragma unroll
        for (int u = 0; u < BM_ILP; u++) {
            ok[u] = i0 + 32 * u < n;
            f[u] = ok[u] ? list[i0 + 32 * u] : 0u;
        }
        if (canon) {
            i32 c[BM_ILP][3];
            uint2 p[BM_ILP][2];
#pragma unroll
            for (int u = 0; u < BM_ILP; u++)
#pragma unroll
                for (u32 j = 0; j < 3; j++) c[u][j] = ok[u] ? fe_cols[3 * (u64)f[u] + j] : 0;
#pragma unroll
            for (int u = 0; u < BM_ILP; u++)
#pragma unroll
                for (u32 j = 0; j < 2; j++)
                    p[u][j] = ok[u] ? *(const uint2*)(ev + 2 * (u64)tcol(c[u][j])) : make_uint2(0u, 0u);
#pragma unroll
            for (int u = 0; u < BM_ILP; u++) {
                if (ok[u]) {
#pragma unroll
                    for (u32 j = 0; j < 3; j++) emark[tcol(c[u][j])] = mark;
                    vmark[p[u][0].x] = mark;
                    vmark[p[u][0].y] = mark;
                    vmark[p[u][1].y] = mark;
                }
            }
        } else if (fe_k == 3u || fe_k == 4u) {
            i32 c[BM_ILP][4];
            uint2 p[BM_ILP][4];
#pragma unroll
            for (int u = 0; u < BM_ILP; u++)
#pragma unroll
                for (u32 j = 0; j < 4; j++) c[u][j] = ok[u] && j < fe_k ? fe_cols[(u64)f[u] * fe_k + j] : 0;
#pragma unroll
            for (int u = 0; u < BM_ILP; u++)
#pragma unroll
                for (u32 j = 0; j < 4; j++)
                    p[u][j] = ok[u] && j < fe_k ? *(const uint2*)(ev + 2 * (u64)tcol(c[u][j])) : make_uint2(0u, 0u);
#pragma unroll
            for (int u = 0; u < BM_ILP; u++)
                if (ok[u]) boundary_mark_loop(c[u], p[u], fe_k, emark, vmark, mark);
        } else {
#pragma unroll
            for (int u = 0; u < BM_ILP; u++)
                if (ok[u]) boundary_mark_face(f[u], fe_offs, fe_cols, ev, emark, vmark, mark);
        }
    }
}

// Look-back words of boundary_coop (`lb`, kept from launch to launch): lb[k G + b] is block
// b's count in list k (0 half-faces, 1 edges, 2 vertices) in the low half, tagged with the
// launch's stamp in the high half; lb[3 G] holds the stamp of the last launch that found a
// non-manifold face. A word belongs to this launch once its tag is the stamp, so no launch
// zeroes them first.
typedef unsigned long long u64w;
#define LB_SLEEP 32
__device__ __forceinline__ void lb_publish(u64w* w, u32 stamp, u32 v) {
    *(volatile u64w*)w = ((u64w)stamp << 32) | v;
}
// The count of a look-back word, once this launch has published it.
__device__ __forceinline__ u32 lb_wait(const u64w* w, u32 stamp) {
    u64w v = *(const volatile u64w*)w;
    while ((u32)(v >> 32) != stamp) {
        __nanosleep(LB_SLEEP);
        v = *(const volatile u64w*)w;
    }
    return (u32)v;
}
// The block's exclusive prefix in lists k0 (low half) and k1 (high half; none when k1 < 0):
// the counts that blocks 0 .. b - 1 published, summed over the block. Each thread loads its
// words LB_ILP at a time (their loads in flight together), then waits for those not yet
// published. Every thread gets the prefix (`ws`: the block sum's shared scratch). The sums
// fit their halves: a list has fewer than 2^32 entries. (One warp doing all of it while the
// others wait at a block barrier was slower: 0.0573-0.0589 against 0.0505-0.0522 ms.)
#define LB_ILP 4
__device__ __forceinline__ u64w lb_prefix(const u64w* lb, u32 b, u32 stamp, int k0, int k1, u64w* ws) {
    const u64 G = gridDim.x;
    const int nk = k1 < 0 ? 1 : 2;
    u64w s = 0;
    for (u32 q0 = threadIdx.x; q0 < b; q0 += LB_ILP * blockDim.x) {
        u64w v[2][LB_ILP];
#pragma unroll
        for (int k = 0; k < 2; k++)
#pragma unroll
            for (int u = 0; u < LB_ILP; u++) {
                const u32 q = q0 + u * blockDim.x;
                v[k][u] = k < nk && q < b ? *(const volatile u64w*)(lb + (u64)(k ? k1 : k0) * G + q)
                                          : (u64w)stamp << 32;
            }
#pragma unroll
        for (int k = 0; k < 2; k++)
#pragma unroll
            for (int u = 0; u < LB_ILP; u++) {
                u32 c = (u32)v[k][u];
                if ((u32)(v[k][u] >> 32) != stamp) c = lb_wait(lb + (u64)(k ? k1 : k0) * G + q0 + u * blockDim.x, stamp);
                s += (u64w)c << (32 * k);
            }
    }
    return block_sum<u64w>(s, ws);
}

// Boundary extraction (§3.4.2) in one launch of two phases and one grid barrier:
//   1. each warp the flags of a run of faces (as boundary_face_flags: from the signs of the
//      first two entries of their δ3 rows), BF_ILP faces a lane at once, and the marks of the
//      edges and vertices of the batch's boundary faces (boundary_mark_list). The flags stay
//      in a register (2 bits a face, where a run has at most 32 faces a lane; longer runs go
//      through `flags`), and the block publishes its count of boundary half-faces;
//   2. each warp reads the marks of a run of edges and one of vertices, LS_ILP loads a lane
//      in flight, into bits of a register (at most 64 a lane, else they are read again), and
//      the block publishes its counts. Then the block reads back its prefix of half-faces
//      (published before the barrier: no wait) and writes its half-faces to `faces`, and
//      reads back its prefixes of edges and vertices (look-back, `lb` above: the wait for
//      the blocks before it overlaps the faces' writes) and writes those lists.
// Dragon in file order (session 31, phase stamps): 58.6 µs with session 30's kernel (the
// flags and marks, then a grid scan of the faces' flags and the marks in two passes with a
// grid barrier between them); 42.4 µs with one barrier and the faces' list written before
// it; 38.2 with the faces' list after it (39.3 with the canonical faces' marks alone);
// 36.1-36.8 with both. Marking in a phase of its own, the boundary faces' list shared evenly
// over the grid, was slower (flags 20.7 + marks 21.2 µs: the marks' random stores no longer
// overlap the flags' loads); so was the look-back done by one warp of the block.
// `faces` holds 2 nf, `edges` ne, `vertices` nv words (the lists are prefixes); the last
// block writes their lengths to totals[0..3] and the non-manifold flag to totals[3] (plain
// stores: the totals may be mapped host memory; every word is written, so nothing is cleared
// first), then, where `done` is not null, sets *done to 1 after a system-scope fence: the host
// reads the totals then, while the other blocks finish their lists. `emark` (ne words) and
// `vmark` (nv) are marks kept from launch to launch: this launch marks with `stamp`, which no
// earlier launch on them used, so they need no zeroing (a mark is set where it equals
// `stamp`); `lb` (3 G + 1 words) is tagged with the same stamp. `flags`: nf words of scratch
// where a warp's run of faces is longer than 32 faces a lane (else unused). `fe_k`: the
// length of every row of ∂2 when they are all 3 or all 4 entries long, else 0; `canon`: the
// faces are canonical (boundary_mark_list; fe_k is 3).
// Blocks of 256 (SCAN_WARPS warps).
#define BF_ILP 4
#define LS_ILP 8
// The block's count: the sum of its SCAN_WARPS warps' counts `w` (shared memory).
__device__ __forceinline__ u32 block_count(const u32* w) {
    u32 s = 0;
    for (u32 i = 0; i < SCAN_WARPS; i++) s += w[i];
    return s;
}
extern "C" __global__ void __launch_bounds__(256, 4) boundary_coop(const u32* fc_offs, const i32* fc_cols, u64 nf, const u32* fe_offs, const i32* fe_cols, const u32* ev, u32 fe_k, u32 canon, u64 ne, u64 nv, u32* flags, u32* emark, u32* vmark, u32* sync, u64w* lb, i32* faces, u32* edges, u32* vertices, u32* totals, u32* done, u32 stamp) {
    __shared__ u32 wcnt[3 * SCAN_WARPS];
    __shared__ u64w ws64[SCAN_WARPS + 1];
    __shared__ u32 blist[SCAN_WARPS * 32 * BF_ILP];
    const u32 G = gridDim.x, b = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u32 lt = (1u << lane) - 1u;
    u32* const wl = blist + warp * 32 * BF_ILP;
    u32* const nonmanifold = (u32*)(lb + 3 * (u64)G);
    coop_start(sync);
    // 1. Flags and marks. The lane's k-th face of the warp's run is the run's start + 32 k +
    // lane; faces in batches of BF_ILP a lane, their δ3 rows' offsets and first two entries
    // loaded together (a face of a manifold has at most two cells); the batch's boundary
    // faces are then shared out over the warp's lanes for their marks.
    u64 flo, fhi;
    const bool in_regs = grid_warp_run(nf, &flo, &fhi) <= 32 * 32;
    u64 fbits = 0;
    u32 nh = 0;
    bool both = false;  // a face of the lane's with both sides on the boundary (no cell)
    for (u64 w0 = flo; w0 < fhi; w0 += 32 * BF_ILP) {
        u32 fa[BF_ILP], fb[BF_ILP];
        i32 e0[BF_ILP], e1[BF_ILP];
#pragma unroll
        for (int u = 0; u < BF_ILP; u++) {
            u64 f = w0 + lane + 32 * u;
            fa[u] = f < fhi ? fc_offs[f] : 0u;
            fb[u] = f < fhi ? fc_offs[f + 1] : 0u;
        }
#pragma unroll
        for (int u = 0; u < BF_ILP; u++) {
            e0[u] = fb[u] > fa[u] ? fc_cols[fa[u]] : 0;
            e1[u] = fb[u] > fa[u] + 1 ? fc_cols[fa[u] + 1] : 0;
        }
        u32 n = 0;
#pragma unroll
        for (int u = 0; u < BF_ILP; u++) {
            u64 f = w0 + lane + 32 * u;
            u32 fl = 0;
            if (f < fhi) {
                u32 plus = 0, minus = 0;
                for (u32 j = fa[u]; j < fb[u]; j++) {
                    i32 v = j == fa[u] ? e0[u] : j == fa[u] + 1 ? e1[u] : fc_cols[j];
                    if (v < 0) minus++; else plus++;
                }
                fl = boundary_flags(plus, minus, nonmanifold, stamp) & 3u;
                if (in_regs) fbits |= (u64)fl << (2 * ((f - flo) >> 5));
                else flags[f] = fl;
                nh += (fl & 1u) + (fl >> 1);
                both |= fl == 3u;
            }
            const u32 m = __ballot_sync(0xffffffffu, fl != 0);
            if (fl) wl[n + __popc(m & lt)] = (u32)f;
            n += __popc(m);
        }
        __syncwarp();
        boundary_mark_list(wl, n, lane, fe_k, canon, fe_offs, fe_cols, ev, emark, vmark, stamp);
        __syncwarp();
    }
    // the half-faces' list: the block's count published (before the barrier), its prefix
    // looked back at and the list written (after the barrier, while the blocks' counts of
    // edges and vertices are awaited)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) nh += __shfl_xor_sync(0xffffffffu, nh, o);
    if (lane == 0) wcnt[warp] = nh;
    __syncthreads();
    if (threadIdx.x == 0) lb_publish(lb + b, stamp, block_count(wcnt));
    // one half-face a face (fl 1: +f, 2: -f) unless some face of the warp's has none
    const bool two = __any_sync(0xffffffffu, both);
    grid_sync(sync);
    // 2. The edges' and vertices' lists from their marks.
    const u64 n2[2] = {ne, nv};
    u32* const mk[2] = {emark, vmark};
    u64 lo[2], hi[2], bits[2] = {0, 0};
    bool regs[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
        regs[k] = grid_warp_run(n2[k], &lo[k], &hi[k]) <= 32 * 64;
        u32 c = 0;
        for (u64 b0 = lo[k]; b0 < hi[k]; b0 += 32 * LS_ILP) {
            u32 v[LS_ILP];
#pragma unroll
            for (int u = 0; u < LS_ILP; u++) {
                const u64 i = b0 + 32 * u + lane;
                v[u] = i < hi[k] ? ldcg(mk[k] + i) : 0u;
            }
#pragma unroll
            for (int u = 0; u < LS_ILP; u++) {
                const bool m = v[u] == stamp;  // stamps are never 0
                c += m ? 1u : 0u;
                if (m && regs[k]) bits[k] |= 1ull << ((b0 - lo[k]) / 32 + u);
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
        if (lane == 0) wcnt[SCAN_WARPS * (1 + k) + warp] = c;
    }
    __syncthreads();
    if (threadIdx.x < 2)
        lb_publish(lb + (1 + threadIdx.x) * (u64)G + b, stamp, block_count(wcnt + SCAN_WARPS * (1 + threadIdx.x)));
    // the half-faces' list (every block's count was published before the barrier: no wait)
    {
        u32 pos = (u32)lb_prefix(lb, b, stamp, 0, -1, ws64);
        if (b == G - 1 && threadIdx.x == 0) totals[0] = pos + block_count(wcnt);
        for (u32 w = 0; w < warp; w++) pos += wcnt[w];
        for (u64 base = flo; base < fhi; base += 32) {
            const u64 f = base + lane;
            u32 fl = 0;
            if (f < fhi) fl = in_regs ? (u32)(fbits >> (2 * ((base - flo) >> 5))) & 3u : flags[f];
            if (!two) {
                const u32 m = __ballot_sync(0xffffffffu, fl != 0);
                if (fl) faces[pos + __popc(m & lt)] = tenc((u32)f, fl == 2u);
                pos += __popc(m);
            } else {
                const u32 m1 = __ballot_sync(0xffffffffu, fl & 1u), m2 = __ballot_sync(0xffffffffu, fl & 2u);
                u32 p = pos + __popc(m1 & lt) + __popc(m2 & lt);
                if (fl & 1u) faces[p++] = tenc((u32)f, false);
                if (fl & 2u) faces[p] = tenc((u32)f, true);
                pos += __popc(m1) + __popc(m2);
            }
        }
    }
    const u64w pre2 = lb_prefix(lb, b, stamp, 1, 2, ws64);
#pragma unroll
    for (int k = 0; k < 2; k++) {
        u32 pos = (u32)(pre2 >> (32 * k));
        if (b == G - 1 && threadIdx.x == 0) {
            totals[1 + k] = pos + block_count(wcnt + SCAN_WARPS * (1 + k));
            if (k == 1) {
                totals[3] = ldcg(nonmanifold) == stamp ? 1u : 0u;
                // the four words are final: mark them so (after them, system-wide), for a host
                // that reads them before the launch's end
                if (done) {
                    __threadfence_system();
                    *(volatile u32*)done = 1u;
                }
            }
        }
        for (u32 w = 0; w < warp; w++) pos += wcnt[SCAN_WARPS * (1 + k) + w];
        u32* const out = k == 0 ? edges : vertices;
        for (u64 base = lo[k]; base < hi[k]; base += 32) {
            const u64 i = base + lane;
            const bool m = i < hi[k] && (regs[k] ? ((bits[k] >> ((base - lo[k]) >> 5)) & 1ull) != 0
                                                 : ldcg(mk[k] + i) == stamp);
            const u32 bm = __ballot_sync(0xffffffffu, m);
            if (m) out[pos + __popc(bm & lt)] = (u32)i;
            pos += __popc(bm);
        }
    }
    coop_end(sync);
}

// ---------------------------------------------------------------- δ2 of canonical faces (issue 20)
// δ2 = ∂2ᵀ (§3.4.1) of faces that the host found canonical at upload (DeviceMesh, FaceBuckets):
// edges canonical pairs (from < to, lexicographic), faces triples a < b < c in lexicographic
// order, each ∂2 row stored as its loop (a,b), (b,c), (a,c), as Tessera's simplex derivation
// writes them (§3.4.4). Edge e = (u,w)'s row, in face order, is then
//   A: the faces (x,u,w), x < u, whose position-1 edge e is, in the order of x;
//   B: the faces (u,x,w), u < x < w, whose position-2 edge e is, in the order of x;
//   C: the faces (u,w,x), x > w, whose position-0 edge e is: the run rs[e] .. rs[e + 1].
// Every face of A is in the run C of an in-edge (x,u) of u, and δ1's row of u lists u's
// in-edges in edge order (that of x). So vertex u's out-edges get their A faces by walking δ1's
// row of u and those runs, in order; their B and C faces are u's own faces: nothing is
// scattered across the mesh and no row is sorted.
// A warp takes one task: a run of consecutive vertices cut on the host (`wtab`: first vertex,
// first row, first own face, first entry of δ2 of each task), and no two warps share a row, so
// the warps never wait for each other. Block k's warps take the tasks of slots k * warps ..
// (k + 1) * warps of `wtab` (the host fills a block's last slots with empty tasks), each in its
// own part of the block's shared memory:
//   0. its rows' run starts (rs) and zeroed counters;
//   1. the in-edges' runs, RF_B consecutive δ1 entries a lane: where each run starts in the
//      task's list of A faces (a warp scan) and its first face, marked in a bit a position;
//   2. the A faces in order, 32 at a time, every lane one face (its run from the marks): its
//      position-1 row, and its rank in that row from the row's cursor and a match of the 32;
//   3. the own faces in order, 32 at a time: their position-0 and position-2 rows, and the
//      rank in the position-2 row (B) the same way;
//   4. the rows' offsets, RF_K consecutive rows a lane, by warp scans from the task's first
//      entry;
//   5. every entry at its row's offset plus its rank.
// Dragon, file order, δ1 cached (op_overheads events): 0.072-0.076 ms with a block a bucket and
// ranks found while placing (session 28), 0.065-0.066 ms with ranks found in steps 2 and 3,
// 0.056-0.060 ms with tasks of a warp (session 29), 0.049-0.052 ms with blocks of 4 warps,
// fewer instructions in steps 1 and 4 and no table of each block's first task (session 30); the
// general bucketed transpose 0.122-0.127 ms.
#define RF_B 5
#define RF_K 2
#define RF_R 2
// The last marked position at or before q (one is: the task's first A face).
__device__ __forceinline__ u32 rf_head(const u32* bits, u32 q) {
    u32 wi = q >> 5;
    u32 w = bits[wi] & (0xffffffffu >> (31u - (q & 31u)));
    while (w == 0) w = bits[--wi];
    return (wi << 5) + 31u - __clz(w);
}
// Rank of the lane's entry (row r, `valid`) in its row: the row's cursor cur[r] plus the
// entries of the same row among the 32 before it; the last of them moves the cursor on. The
// 32 are in order and the rows the warp's own. Every lane of the warp calls it.
__device__ __forceinline__ u32 rf_rank(u32* cur, u32 r, bool valid, u32 lane) {
    const u32 m = __match_any_sync(0xffffffffu, valid ? r : 0x80000000u | lane);
    const u32 at = valid ? cur[r] : 0u;
    __syncwarp();
    const u32 rank = at + __popc(m & ((1u << lane) - 1u));
    if (valid && (m >> lane) == 1u) cur[r] = at + __popc(m);
    __syncwarp();
    return rank;
}
// A task's shared memory in words (FaceBucketLoad::shared_bytes on the host), in this order:
// per row cA (A faces counted, then the row's first entry) and cB (B faces counted, then its
// first B entry); per A face a bit (a run starts there), and one more word; these three are
// zeroed together. Then per row rsl (rs local to the task, then its run C's first entry less
// its first face), and one more; per own face frow (position-0 row and sign in the low half,
// position-2 row and sign in the high half); per A face aface (its face) and apack
// (position-1 row, sign, rank in the high half); per own face brank (its B rank, 16 bits).
__device__ __forceinline__ u32 rf_task_words(u32 R, u32 NF, u32 na) {
    return 3 * R + 1 + NF + 2 * na + na / 32 + 1 + (NF + 1) / 2;
}
__device__ __forceinline__ void edge_faces_runs_body(const i32* __restrict__ fe, const u32* __restrict__ d1off,
                                                     const i32* __restrict__ d1, const u32* __restrict__ rs,
                                                     const uint4* __restrict__ wtab, u32 nb, u32 ne, u32 nnz, u32* offs, i32* out) {
    extern __shared__ u32 smem[];
    const u32 t0 = threadIdx.x, lane = t0 & 31, warp = t0 >> 5, k = blockIdx.x;
    if (k == nb - 1 && t0 == 0) offs[ne] = nnz;
    // where each of the block's tasks starts in its shared memory (every warp finds the same)
    const u32 nt = blockDim.x >> 5, tlo = k * nt;
    u32 words = 0;
    uint4 a = make_uint4(0u, 0u, 0u, 0u), b = a;
    if (lane < nt) {
        a = wtab[tlo + lane];
        b = wtab[tlo + lane + 1];
        const u32 nf = b.z - a.z;
        words = rf_task_words(b.y - a.y, nf, b.w - a.w - 2 * nf);
    }
    // this warp's task: lane `warp` loaded it (a block has a task a warp)
    const u32 me = warp & 31u;
    const u32 start = __shfl_sync(0xffffffffu, warp_inclusive_scan<u32>(words, lane) - words, me);
    const uint4 lo = make_uint4(__shfl_sync(0xffffffffu, a.x, me), __shfl_sync(0xffffffffu, a.y, me),
                                __shfl_sync(0xffffffffu, a.z, me), __shfl_sync(0xffffffffu, a.w, me));
    const uint4 hi = make_uint4(__shfl_sync(0xffffffffu, b.x, me), __shfl_sync(0xffffffffu, b.y, me),
                                __shfl_sync(0xffffffffu, b.z, me), __shfl_sync(0xffffffffu, b.w, me));
    const u32 E0 = lo.y, R = hi.y - E0, F0 = lo.z, NF = hi.z - F0, base = lo.w, na = hi.w - base - 2 * NF;
    const u32 D0 = d1off[lo.x], D1 = d1off[hi.x];
    u32* cA = smem + start;
    u32* cB = cA + R;
    u32* bits = cB + R;
    u32* rsl = bits + na / 32 + 1;
    u32* frow = rsl + R + 1;
    u32* aface = frow + NF;
    u32* apack = aface + na;
    u16* brank = (u16*)(apack + na);
    // 0. the rows' run starts, 4 a lane in flight together; the counters and marks cleared
    for (u32 r0 = lane; r0 <= R; r0 += 4 * 32) {
        u32 x4[4];
#pragma unroll
        for (int x = 0; x < 4; x++) x4[x] = r0 + 32 * x <= R ? rs[E0 + r0 + 32 * x] : 0u;
#pragma unroll
        for (int x = 0; x < 4; x++)
            if (r0 + 32 * x <= R) rsl[r0 + 32 * x] = x4[x] - F0;
    }
    for (u32 i = lane, n = 2 * R + na / 32 + 1; i < n; i += 32) cA[i] = 0;
    __syncwarp();
    // 1. the runs of the in-edges of the task's vertices, 32 * RF_B δ1 entries at a time, RF_B
    //    consecutive ones a lane (their loads in flight together, one warp scan): each run's
    //    first face at its first position
    {
        u32 carry = 0;
        for (u32 j0 = D0; j0 < D1; j0 += 32 * RF_B) {
            const u32 jl = j0 + RF_B * lane;
            i32 v[RF_B];
            u32 st[RF_B], len[RF_B];
#pragma unroll
            for (int x = 0; x < RF_B; x++) v[x] = jl + x < D1 ? d1[jl + x] : -1;
#pragma unroll
            for (int x = 0; x < RF_B; x++) {
                st[x] = v[x] >= 0 ? rs[v[x]] : 0u;
                len[x] = v[x] >= 0 ? rs[v[x] + 1] : 0u;
            }
            u32 sum = 0;
#pragma unroll
            for (int x = 0; x < RF_B; x++) {
                len[x] -= st[x];
                sum += len[x];
            }
            const u32 inc = warp_inclusive_scan<u32>(sum, lane);
            u32 ex = carry + inc - sum;
#pragma unroll
            for (int x = 0; x < RF_B; x++) {
                if (len[x]) {
                    aface[ex] = st[x];
                    atomicOr(bits + (ex >> 5), 1u << (ex & 31u));
                }
                ex += len[x];
            }
            carry += __shfl_sync(0xffffffffu, inc, 31);
        }
    }
    __syncwarp();
    // 2. the A faces in order, 32 at a time (RF_R of them with their loads in flight)
    for (u32 q0 = 0; q0 < na; q0 += 32 * RF_R) {
        u32 f[RF_R];
        i32 c[RF_R];
#pragma unroll
        for (int x = 0; x < RF_R; x++) {
            const u32 q = q0 + 32 * x + lane;
            f[x] = 0;
            if (q < na) {
                const u32 h = rf_head(bits, q);
                f[x] = aface[h] + (q - h);
            }
        }
#pragma unroll
        for (int x = 0; x < RF_R; x++) c[x] = q0 + 32 * x + lane < na ? fe[3 * (u64)f[x] + 1] : 0;
#pragma unroll
        for (int x = 0; x < RF_R; x++) {
            if (q0 + 32 * x >= na) break;
            const u32 q = q0 + 32 * x + lane;
            const bool in = q < na;
            const u32 r = in ? tcol(c[x]) - E0 : 0u;
            const u32 rank = rf_rank(cA, r, in, lane);
            if (in) {
                aface[q] = f[x];
                apack[q] = r | (c[x] < 0 ? 0x8000u : 0u) | (rank << 16);
            }
        }
    }
    // 3. the own faces in order, 32 at a time: their position-0 (C) and position-2 (B) rows
    for (u32 i0 = 0; i0 < NF; i0 += 32 * RF_R) {
        i32 p0[RF_R], p2[RF_R];
#pragma unroll
        for (int x = 0; x < RF_R; x++) {
            const u32 i = i0 + 32 * x + lane;
            const u64 f = (u64)F0 + i;
            p0[x] = i < NF ? fe[3 * f] : 0;
            p2[x] = i < NF ? fe[3 * f + 2] : 0;
        }
#pragma unroll
        for (int x = 0; x < RF_R; x++) {
            if (i0 + 32 * x >= NF) break;
            const u32 i = i0 + 32 * x + lane;
            const bool in = i < NF;
            const u32 r0 = tcol(p0[x]) - E0, r2 = in ? tcol(p2[x]) - E0 : 0u;
            const u32 rank = rf_rank(cB, r2, in, lane);
            if (in) {
                frow[i] = r0 | (p0[x] < 0 ? 0x8000u : 0u) | (r2 << 16) | (p2[x] < 0 ? 0x80000000u : 0u);
                brank[i] = (u16)rank;
            }
        }
    }
    __syncwarp();
    // 4. the rows' offsets, 32 * RF_K rows at a time (RF_K consecutive ones a lane), by warp
    //    scans from the task's first entry
    {
        u32 carry = base;
        for (u32 r0 = 0; r0 < R; r0 += 32 * RF_K) {
            const u32 rl = r0 + RF_K * lane;
            u32 ra[RF_K], rb[RF_K], c[RF_K + 1], sum = 0;
#pragma unroll
            for (int x = 0; x <= RF_K; x++) c[x] = rl + x <= R ? rsl[rl + x] : 0u;
#pragma unroll
            for (int x = 0; x < RF_K; x++) {
                const bool in = rl + x < R;
                ra[x] = in ? cA[rl + x] : 0u;
                rb[x] = in ? cB[rl + x] : 0u;
                sum += in ? ra[x] + rb[x] + c[x + 1] - c[x] : 0u;
            }
            const u32 inc = warp_inclusive_scan<u32>(sum, lane);
            u32 o = carry + inc - sum;
            __syncwarp();  // the next lane reads rsl[rl + RF_K] before it rewrites it
#pragma unroll
            for (int x = 0; x < RF_K; x++) {
                if (rl + x < R) {
                    offs[E0 + rl + x] = o;
                    cA[rl + x] = o;
                    cB[rl + x] = o + ra[x];
                    rsl[rl + x] = o + ra[x] + rb[x] - c[x];
                    o += ra[x] + rb[x] + c[x + 1] - c[x];
                }
            }
            carry += __shfl_sync(0xffffffffu, inc, 31);
        }
    }
    __syncwarp();
    // 5. every entry at its row's offset plus its rank
    for (u32 i = lane; i < na; i += 32) {
        const u32 p = apack[i];
        out[cA[p & 0x7fffu] + (p >> 16)] = tenc(aface[i], (p >> 15) & 1u);
    }
    for (u32 i = lane; i < NF; i += 32) {
        const u32 w = frow[i];
        out[cB[(w >> 16) & 0x7fffu] + brank[i]] = tenc(F0 + i, w >> 31);
        out[rsl[w & 0x7fffu] + i] = tenc(F0 + i, (w >> 15) & 1u);
    }
}
// Two shapes of block for the same tasks (FaceRuns on the host): 16 warps, 3 blocks a
// multiprocessor (up to a third of its shared memory a block), and 4 warps, 12 blocks a
// multiprocessor (a twelfth), whose blocks wait less for their slowest task.
extern "C" __global__ void __launch_bounds__(512, 3)
    edge_faces_runs(const i32* __restrict__ fe, const u32* __restrict__ d1off, const i32* __restrict__ d1,
                    const u32* __restrict__ rs, const uint4* __restrict__ wtab, u32 nb, u32 ne,
                    u32 nnz, u32* offs, i32* out) {
    edge_faces_runs_body(fe, d1off, d1, rs, wtab, nb, ne, nnz, offs, out);
}
extern "C" __global__ void __launch_bounds__(128, 12)
    edge_faces_runs_small(const i32* __restrict__ fe, const u32* __restrict__ d1off, const i32* __restrict__ d1,
                          const u32* __restrict__ rs, const uint4* __restrict__ wtab, u32 nb,
                          u32 ne, u32 nnz, u32* offs, i32* out) {
    edge_faces_runs_body(fe, d1off, d1, rs, wtab, nb, ne, nnz, offs, out);
}
