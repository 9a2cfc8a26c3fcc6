// Tessera multigrid setup kernels (continuation of solve.cu and multigrid.cu, same module: u32,
// u64 come from solve.cu): the block sparse products of the smoothed-aggregation setup on
// 3 x 3 blocks - the Jacobi-smoothed prolongator P = (I - w D^-1 A) P_tent and the Galerkin
// operator R A P - by expansion, sort and compression (Bell, Dalton & Olson 2012), the block
// transpose, the symmetrization of the Galerkin operator and the filtered copy of a
// Bin-BCSR* matrix (dissertation Listing 4.1, S A S + (I - S)).
//
// Every value is summed in the order of the CPU reference (crate::blockcsr): a block of A B
// adds A_ik B_kj over the stored k of row i in ascending order, each entry as
// ((c + a0 b0) + a1 b1) + a2 b2. Products and sums are written with __dmul_rn / __dadd_rn so
// that no multiply-add is contracted: the results equal the CPU's bit for bit.

// c += a b for row-major 3 x 3 blocks, in the CPU's rounding order.
__device__ __forceinline__ void blk_mul_add(double* c, const double* a, const double* b) {
    for (int r = 0; r < 3; ++r) {
        for (int q = 0; q < 3; ++q) {
            double s = c[r * 3 + q];
            s = __dadd_rn(s, __dmul_rn(a[r * 3], b[q]));
            s = __dadd_rn(s, __dmul_rn(a[r * 3 + 1], b[3 + q]));
            s = __dadd_rn(s, __dmul_rn(a[r * 3 + 2], b[6 + q]));
            c[r * 3 + q] = s;
        }
    }
}

// Position of column j in the sorted columns cols[beg..end), or end.
__device__ __forceinline__ u32 find_col(const u32* cols, u32 beg, u32 end, u32 j) {
    u32 lo = beg, hi = end;
    while (lo < hi) {
        u32 mid = lo + (hi - lo) / 2;
        if (cols[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < end && cols[lo] == j) ? lo : end;
}

// The block row of every stored block.
extern "C" __global__ void bcsr_block_rows(u32 nrows, const u32* row_ptr, u32* rows) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nrows) return;
    for (u32 k = row_ptr[i]; k < row_ptr[i + 1]; ++k) rows[k] = (u32)i;
}

// ----------------------------------------------------------------------------- SpGEMM

// Candidate blocks of row i of A B: sum of the lengths of the rows of B that row i of A
// selects.
extern "C" __global__ void spgemm_count(u32 nrows, const u32* a_ptr, const u32* a_cols, const u32* b_ptr, u32* count) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nrows) return;
    u32 s = 0;
    for (u32 k = a_ptr[i]; k < a_ptr[i + 1]; ++k) {
        u32 kk = a_cols[k];
        s += b_ptr[kk + 1] - b_ptr[kk];
    }
    count[i] = s;
}

// Expansion: the key (i << col_bits) | j of every candidate block (i, j), at the row's offset.
extern "C" __global__ void spgemm_expand(u32 nrows, const u32* a_ptr, const u32* a_cols, const u32* b_ptr,
                                         const u32* b_cols, const u32* offsets, u32 col_bits, u64* keys) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nrows) return;
    u64 at = offsets[i];
    u64 hi = i << col_bits;
    for (u32 k = a_ptr[i]; k < a_ptr[i + 1]; ++k) {
        u32 kk = a_cols[k];
        for (u32 q = b_ptr[kk]; q < b_ptr[kk + 1]; ++q) keys[at++] = hi | (u64)b_cols[q];
    }
}

// Compression: the row and column of every unique key.
extern "C" __global__ void spgemm_split(u64 n, const u64* keys, u32 col_bits, u32* rows, u32* cols) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    u64 key = keys[t];
    rows[t] = (u32)(key >> col_bits);
    cols[t] = (u32)(key & ((1ull << col_bits) - 1ull));
}

// Numeric pass, one thread per block (i, j) of C = A B: the sum over the stored k of row i of
// A, in ascending order, of A_ik B_kj (B_kj found by binary search in row k of B).
extern "C" __global__ void spgemm_numeric(u64 nnz, const u32* c_rows, const u32* c_cols, const u32* a_ptr,
                                          const u32* a_cols, const double* a_vals, const u32* b_ptr, const u32* b_cols,
                                          const double* b_vals, double* c_vals) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nnz) return;
    u32 i = c_rows[t], j = c_cols[t];
    double c[9];
    for (int e = 0; e < 9; ++e) c[e] = 0.0;
    for (u32 k = a_ptr[i]; k < a_ptr[i + 1]; ++k) {
        u32 kk = a_cols[k];
        u32 end = b_ptr[kk + 1];
        u32 q = find_col(b_cols, b_ptr[kk], end, j);
        if (q < end) blk_mul_add(c, a_vals + (u64)k * 9, b_vals + (u64)q * 9);
    }
    double* out = c_vals + t * 9;
    for (int e = 0; e < 9; ++e) out[e] = c[e];
}

// ----------------------------------------------------------------------------- transpose

// Keys (j << row_bits) | i of the blocks (i, j) and their positions, for a stable sort by column.
extern "C" __global__ void transpose_keys(u64 nnz, const u32* rows, const u32* cols, u32 row_bits, u64* keys,
                                          u32* perm) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nnz) return;
    keys[t] = ((u64)cols[t] << row_bits) | (u64)rows[t];
    perm[t] = (u32)t;
}

// The transposed matrix from the sorted keys: its row (the old column), column (the old row)
// and the transposed block.
extern "C" __global__ void transpose_gather(u64 nnz, const u64* keys, const u32* perm, u32 row_bits,
                                            const double* vals, u32* t_rows, u32* t_cols, double* t_vals) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nnz) return;
    u64 key = keys[t];
    t_rows[t] = (u32)(key >> row_bits);
    t_cols[t] = (u32)(key & ((1ull << row_bits) - 1ull));
    const double* s = vals + (u64)perm[t] * 9;
    double* d = t_vals + t * 9;
    for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q) d[q * 3 + r] = s[r * 3 + q];
}

// ----------------------------------------------------------------------------- Galerkin

// Exact symmetrization of a square block matrix, A_ij = (A_ij + A_ji^T) / 2, then a unit
// diagonal entry wherever the diagonal is exactly zero (coarse DOFs that interpolate nothing).
// A block without a mirror sets *missing (the pattern must be structurally symmetric).
extern "C" __global__ void galerkin_symmetrize(u64 nnz, const u32* rows, const u32* row_ptr, const u32* cols,
                                               const double* vals, double* out, u32* missing) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nnz) return;
    u32 i = rows[t], j = cols[t];
    u32 end = row_ptr[j + 1];
    u32 m = find_col(cols, row_ptr[j], end, i);
    double* o = out + t * 9;
    if (m == end) {
        atomicExch(missing, 1u);
        for (int e = 0; e < 9; ++e) o[e] = vals[t * 9 + e];
        return;
    }
    const double* a = vals + t * 9;
    const double* b = vals + (u64)m * 9;
    for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q) o[r * 3 + q] = __dmul_rn(0.5, __dadd_rn(a[r * 3 + q], b[q * 3 + r]));
    if (i == j) {
        for (int c = 0; c < 3; ++c)
            if (o[c * 3 + c] == 0.0) o[c * 3 + c] = 1.0;
    }
}

// Jacobi smoothing of the prolongator on the pattern of A P_tent (in place):
// P_ij = Pt_ij - w (D_i^-1 (A Pt)_ij), Pt_ij = 0 where P_tent has no block.
extern "C" __global__ void smooth_prolongator(u64 nnz, const u32* rows, const u32* cols, double* ap,
                                              const double* dinv, const u32* pt_ptr, const u32* pt_cols,
                                              const double* pt_vals, double omega) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nnz) return;
    u32 i = rows[t];
    double* v = ap + t * 9;
    double w[9];
    for (int e = 0; e < 9; ++e) w[e] = 0.0;
    blk_mul_add(w, dinv + (u64)i * 9, v);
    u32 end = pt_ptr[i + 1];
    u32 b = find_col(pt_cols, pt_ptr[i], end, cols[t]);
    for (int e = 0; e < 9; ++e) {
        double p0 = b < end ? pt_vals[(u64)b * 9 + e] : 0.0;
        v[e] = __dsub_rn(p0, __dmul_rn(omega, w[e]));
    }
}

// ----------------------------------------------------------------------------- filtered copy

// Blocks per row of the filtered copy: the off-diagonal blocks and the diagonal.
extern "C" __global__ void filtered_counts(u32 n, const u32* row_lengths, u32* counts) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    counts[i] = row_lengths[i] + 1;
}

// One block of the filtered copy: constrained rows and columns zeroed, a unit diagonal entry on
// constrained DOFs of the diagonal block.
__device__ __forceinline__ void filtered_block(double* out, const double* src, u64 stride, bool diag,
                                               const unsigned char* fi, const unsigned char* fj) {
    for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q) {
            double v = src[(u64)(r * 3 + q) * stride];
            out[r * 3 + q] = (fi[r] || fj[q]) ? ((diag && r == q) ? 1.0 : 0.0) : v;
        }
}

// The filtered operator S A S + (I - S) of a Bin-BCSR* matrix of 3 x 3 blocks as block CSR with
// sorted columns and the diagonal block in its sorted place, one thread per block row (the
// bin layout of Listing 4.1: slot base + 32 s + lane, values block-component-major per bin).
extern "C" __global__ void filtered_copy(u32 n, const u32* bin_offsets, const u32* row_lengths, const u32* col_indices,
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

// ----------------------------------------------------------------------------- eigenvalue estimate

// z = D^-1 r with the inverted 3 x 3 diagonal blocks (summed as the CPU's block Jacobi).
extern "C" __global__ void lanczos_jacobi(u32 nodes, const double* dinv, const double* r, double* z) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nodes) return;
    const double* m = dinv + (u64)i * 9;
    u64 o = (u64)i * 3;
    double r0 = r[o], r1 = r[o + 1], r2 = r[o + 2];
    for (int k = 0; k < 3; ++k) {
        double s = 0.0;
        s += m[k * 3] * r0;
        s += m[k * 3 + 1] * r1;
        s += m[k * 3 + 2] * r2;
        z[o + k] = s;
    }
}
// r -= alpha q
extern "C" __global__ void lanczos_axpy(u32 len, double alpha, const double* q, double* r) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < len) r[t] -= alpha * q[t];
}
// p = z + beta p
extern "C" __global__ void lanczos_xpby(u32 len, const double* z, double beta, double* p) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < len) p[t] = z[t] + beta * p[t];
}

// ----------------------------------------------------------------------------- host stages' inputs

// The squared Frobenius norm of every stored block (summed as the CPU's block_norm2): the
// strength graph's input.
extern "C" __global__ void block_norms(u64 nnz, const double* vals, double* norm2) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nnz) return;
    const double* v = vals + t * 9;
    double s = 0.0;
    for (int e = 0; e < 9; ++e) s = __dadd_rn(s, __dmul_rn(v[e], v[e]));
    norm2[t] = s;
}

// The diagonal block of every block row (zeros where none is stored).
extern "C" __global__ void diagonal_blocks(u32 nrows, const u32* row_ptr, const u32* cols, const double* vals,
                                           double* diag) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nrows) return;
    u32 end = row_ptr[i + 1];
    u32 k = find_col(cols, row_ptr[i], end, (u32)i);
    for (int e = 0; e < 9; ++e) diag[i * 9 + e] = k < end ? vals[(u64)k * 9 + e] : 0.0;
}
