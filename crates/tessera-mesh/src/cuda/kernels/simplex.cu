// Tessera GPU simplex-mesh derivation (dissertation §3.4.4): sub-simplices by sort + unique
// of sorted vertex tuples, cell operators with implicit offsets, orientation by Eq. 3.14.
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

#define TID ((u64)blockIdx.x * blockDim.x + threadIdx.x)
#define FACE_BITS 21

__device__ __forceinline__ i32 tenc(u32 c, bool neg) { return (i32)c ^ -(i32)neg; }

// combination order of local edges: d = 3 (0,1)(0,2)(0,3)(1,2)(1,3)(2,3); d = 2 (0,1)(0,2)(1,2)
__constant__ u32 TET_E[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
__constant__ u32 TRI_E[3][2] = {{0, 1}, {0, 2}, {1, 2}};
__constant__ u32 TET_F[4][3] = {{0, 1, 2}, {0, 1, 3}, {0, 2, 3}, {1, 2, 3}};

// one key (lo << vb | hi, vb = bits of the vertex count: 2 vb bits to sort) and one slot per
// local edge of every cell
extern "C" __global__ void simplex_edge_keys(const u32* cv, u64 ncells, u32 dim, u32 vb, u64* keys, u32* slots) {
    u64 c = TID;
    if (c >= ncells) return;
    u32 m = dim + 1, ne = dim == 3 ? 6 : 3;
    for (u32 k = 0; k < ne; k++) {
        u32 i = dim == 3 ? TET_E[k][0] : TRI_E[k][0];
        u32 j = dim == 3 ? TET_E[k][1] : TRI_E[k][1];
        u32 a = cv[c * m + i], b = cv[c * m + j];
        u32 lo = min(a, b), hi = max(a, b);
        keys[c * ne + k] = ((u64)lo << vb) | hi;
        slots[c * ne + k] = (u32)(c * ne + k);
    }
}
// sorted triple packed in 3 x vb bits (vb = bits of the vertex count, at most FACE_BITS)
extern "C" __global__ void simplex_face_keys(const u32* cv, u64 ncells, u32 vb, u64* keys, u32* slots) {
    u64 c = TID;
    if (c >= ncells) return;
    for (u32 k = 0; k < 4; k++) {
        u32 x = cv[c * 4 + TET_F[k][0]], y = cv[c * 4 + TET_F[k][1]], z = cv[c * 4 + TET_F[k][2]];
        u32 t;
        if (x > y) { t = x; x = y; y = t; }
        if (y > z) { t = y; y = z; z = t; }
        if (x > y) { t = x; x = y; y = t; }
        keys[c * 4 + k] = ((u64)x << (2 * vb)) | ((u64)y << vb) | (u64)z;
        slots[c * 4 + k] = (u32)(c * 4 + k);
    }
}
// unique keys from the sort width (vb bits per vertex) to the stored layout: edges
// a << 32 | b, faces in 3 x FACE_BITS (in place; what = 0 edges, 1 faces)
extern "C" __global__ void simplex_widen_keys(u64* keys, u64 n, u32 vb, u32 what) {
    u64 i = TID;
    if (i >= n) return;
    u64 k = keys[i], m = (1ull << vb) - 1;
    if (what == 0) {
        keys[i] = ((k >> vb) << 32) | (k & m);
    } else {
        u64 x = k >> (2 * vb), y = (k >> vb) & m, z = k & m;
        keys[i] = (x << (2 * FACE_BITS)) | (y << FACE_BITS) | z;
    }
}
extern "C" __global__ void scatter_ids(const u32* slots, const u32* ids, u64 n, u32* out) {
    u64 i = TID;
    if (i < n) out[slots[i]] = ids[i];
}
// facet i of a cell: combination i, sign (-1)^(i + s), s = inversions of its global indices
extern "C" __global__ void simplex_facets(const u32* cv, const u32* facet_ids, u64 ncells, u32 dim, i32* out) {
    u64 c = TID;
    if (c >= ncells) return;
    u32 m = dim + 1;
    for (u32 i = 0; i < m; i++) {
        u32 s;
        if (dim == 3) {
            u32 x = cv[c * 4 + TET_F[i][0]], y = cv[c * 4 + TET_F[i][1]], z = cv[c * 4 + TET_F[i][2]];
            s = (x > y) + (x > z) + (y > z);
        } else {
            s = cv[c * 3 + TRI_E[i][0]] > cv[c * 3 + TRI_E[i][1]];
        }
        out[c * m + i] = tenc(facet_ids[c * m + i], ((i + s) & 1u) != 0u);
    }
}
__device__ u32 find_edge(const u64* edges, u64 ne, u32 a, u32 b) {
    u64 key = ((u64)a << 32) | b;
    u64 lo = 0, hi = ne;
    while (lo < hi) {
        u64 mid = (lo + hi) >> 1;
        if (edges[mid] < key) lo = mid + 1; else hi = mid;
    }
    return (u32)lo;
}
// ∂2 of a tetrahedral mesh: +(a,b), -(a,c), +(b,c) for the sorted face a < b < c
extern "C" __global__ void simplex_face_edges(const u64* faces, u64 nf, const u64* edges, u64 ne, i32* out) {
    u64 f = TID;
    if (f >= nf) return;
    const u64 mask = (1ull << FACE_BITS) - 1;
    u64 k = faces[f];
    u32 a = (u32)(k >> (2 * FACE_BITS)), b = (u32)((k >> FACE_BITS) & mask), c = (u32)(k & mask);
    out[3 * f] = tenc(find_edge(edges, ne, a, b), false);
    out[3 * f + 1] = tenc(find_edge(edges, ne, a, c), true);
    out[3 * f + 2] = tenc(find_edge(edges, ne, b, c), false);
}
