// Tessera GPU volumetric Catmull-Clark subdivision (dissertation §3.4.3, Eqs. 3.1-3.10,
// Figs. 3.3, 3.7-3.9). One thread per input element; every output slot is known from the
// offsets of the input relations (count-scan-fill), so no kernel allocates or appends.
// Numbering, orientations and position rules are those of the CPU reference
// (crates/tessera-mesh/src/subdivide.rs); sums are formed in the same order.
// TCSR entries encode the sign in the column (v < 0: -1 at column ~v).
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

#define TID ((u64)blockIdx.x * blockDim.x + threadIdx.x)
#define UNSET ((i32)0x80000000)

__device__ __forceinline__ u32 tcol(i32 v) { return (u32)(v ^ (v >> 31)); }
__device__ __forceinline__ i32 tenc(u32 c, bool neg) { return (i32)c ^ -(i32)neg; }
__device__ __forceinline__ int tsign(i32 v) { return v < 0 ? -1 : 1; }
__device__ __forceinline__ void ends(const u32* ev, i32 v, u32& s, u32& t) {
    u32 e = tcol(v);
    u32 a = ev[2 * (u64)e], b = ev[2 * (u64)e + 1];
    if (v >= 0) { s = a; t = b; } else { s = b; t = a; }
}
// index of `key` in the sorted plain-id row a[0..n), or -1
__device__ __forceinline__ int bsearch_row(const i32* a, u32 n, i32 key) {
    u32 lo = 0, hi = n;
    while (lo < hi) {
        u32 mid = (lo + hi) >> 1;
        i32 x = a[mid];
        if (x == key) return (int)mid;
        if (x < key) lo = mid + 1; else hi = mid;
    }
    return -1;
}
__device__ __forceinline__ void flag(u32* err) { atomicOr(err, 1u); }

// ---------------------------------------------------------------- loop order of ∂2 rows
extern "C" __global__ void cc_loop_order_flags(const u32* offs, const i32* cols, const u32* ev, u64 nf, u32* flag_out) {
    u64 f = TID;
    if (f >= nf) return;
    u32 a = offs[f], n = offs[f + 1] - a;
    for (u32 i = 0; i < n; i++) {
        u32 s0, t0, s1, t1;
        ends(ev, cols[a + i], s0, t0);
        ends(ev, cols[a + (i + 1) % n], s1, t1);
        if (t0 != s1) { flag(flag_out); return; }
    }
}
// reorder every row into loop order in place (as subdivide::with_loop_ordered_faces: rows
// already in order stay unchanged); err is set when a row does not chain into one loop
extern "C" __global__ void cc_loop_order_fix(const u32* offs, i32* cols, const u32* ev, u64 nf, u32* err) {
    u64 f = TID;
    if (f >= nf) return;
    u32 a = offs[f], n = offs[f + 1] - a;
    i32* row = cols + a;
    for (u32 k = 1; k < n; k++) {
        u32 s, cur;
        ends(ev, row[k - 1], s, cur);
        u32 j = k;
        for (; j < n; j++) {
            u32 sj, tj;
            ends(ev, row[j], sj, tj);
            if (sj == cur) break;
        }
        if (j == n) { flag(err); return; }
        i32 tmp = row[k]; row[k] = row[j]; row[j] = tmp;
    }
    if (n > 0) {
        u32 s0, t0, s1, t1;
        ends(ev, row[n - 1], s0, t0);
        ends(ev, row[0], s1, t1);
        if (t0 != s1) flag(err);
    }
}

// ---------------------------------------------------------------- manifold checks
// (subdivide::check_manifold; any hit sets err, the host then asks the CPU reference for
// the exact error)
extern "C" __global__ void cc_check_faces(const u32* fe_offs, const u32* fc_offs, const i32* fc_cols, const u32* fv_offs,
                                          const i32* fv_cols, u64 nf, u32* err) {
    u64 f = TID;
    if (f >= nf) return;
    if (fe_offs[f + 1] - fe_offs[f] < 3) { flag(err); return; }
    u32 a = fc_offs[f], k = fc_offs[f + 1] - a;
    if (k == 2) {
        i32 x = fc_cols[a], y = fc_cols[a + 1];
        if (tcol(x) == tcol(y) || tsign(x) == tsign(y)) { flag(err); return; }
    } else if (k != 1) { flag(err); return; }
    u32 b = fv_offs[f], n = fv_offs[f + 1] - b;
    for (u32 i = 1; i < n; i++)
        for (u32 j = 0; j < i; j++)
            if (fv_cols[b + i] == fv_cols[b + j]) { flag(err); return; }
}
extern "C" __global__ void cc_check_edges(const u32* ef_offs, const i32* ef_cols, const u32* fc_offs, const u32* ev, u64 ne,
                                          u32* err) {
    u64 e = TID;
    if (e >= ne) return;
    if (ev[2 * e] == ev[2 * e + 1]) { flag(err); return; }
    u32 a = ef_offs[e], n = ef_offs[e + 1] - a;
    if (n == 0) { flag(err); return; }
    u32 nb = 0;
    for (u32 i = 0; i < n; i++) {
        u32 f = tcol(ef_cols[a + i]);
        if (fc_offs[f + 1] - fc_offs[f] == 1) nb++;
    }
    if (nb != 0 && nb != 2) flag(err);
}

// ---------------------------------------------------------------- positions (§3.4.3 rules)
// out holds [vertex points | edge points | face points | cell points], xyz-interleaved;
// `at` is the index of the block's first point.
__device__ __forceinline__ void avg_rows(const u32* offs, const i32* cols, const double* p, u64 r, double* s) {
    s[0] = s[1] = s[2] = 0.0;
    u32 a = offs[r], n = offs[r + 1] - a;
    for (u32 i = 0; i < n; i++) {
        u64 j = tcol(cols[a + i]);
        s[0] += p[3 * j]; s[1] += p[3 * j + 1]; s[2] += p[3 * j + 2];
    }
    double w = 1.0 / (double)n;
    s[0] *= w; s[1] *= w; s[2] *= w;
}
// Eq. 3.5: cell points = cell centroids over ∂̂3²
extern "C" __global__ void cc_cell_points(const u32* cv_offs, const i32* cv_cols, const double* pos, u64 nc, u64 at, double* out) {
    u64 c = TID;
    if (c >= nc) return;
    double s[3];
    avg_rows(cv_offs, cv_cols, pos, c, s);
    for (int k = 0; k < 3; k++) out[3 * (at + c) + k] = s[k];
}
// Eq. 3.6: face centroids over ∂̂2¹
extern "C" __global__ void cc_face_centroids(const u32* fv_offs, const i32* fv_cols, const double* pos, u64 nf, double* fcen) {
    u64 f = TID;
    if (f >= nf) return;
    double s[3];
    avg_rows(fv_offs, fv_cols, pos, f, s);
    for (int k = 0; k < 3; k++) fcen[3 * f + k] = s[k];
}
// Eq. 3.8: face points (cells of f from δ3; cell points already in out at at_c)
extern "C" __global__ void cc_face_points(const u32* fc_offs, const i32* fc_cols, const double* fcen, u64 nf, u64 at_f, u64 at_c,
                                          double* out) {
    u64 f = TID;
    if (f >= nf) return;
    const double* p = fcen + 3 * f;
    double* o = out + 3 * (at_f + f);
    if (fc_offs[f + 1] - fc_offs[f] == 1) {
        for (int k = 0; k < 3; k++) o[k] = p[k];
        return;
    }
    double c[3];
    avg_rows(fc_offs, fc_cols, out + 3 * at_c, f, c);
    for (int k = 0; k < 3; k++) o[k] = 0.5 * (p[k] + c[k]);
}
// per edge: boundary flag and the sum / count of the face centroids its rule averages
extern "C" __global__ void cc_edge_acc(const u32* ef_offs, const i32* ef_cols, const u32* fc_offs, const double* fcen, u64 ne,
                                       double* esum, u32* enf, u32* ebnd) {
    u64 e = TID;
    if (e >= ne) return;
    u32 a = ef_offs[e], n = ef_offs[e + 1] - a;
    bool boundary = false;
    for (u32 i = 0; i < n; i++) {
        u32 f = tcol(ef_cols[a + i]);
        if (fc_offs[f + 1] - fc_offs[f] == 1) boundary = true;
    }
    double s0 = 0.0, s1 = 0.0, s2 = 0.0;
    u32 m = 0;
    for (u32 i = 0; i < n; i++) {
        u64 f = tcol(ef_cols[a + i]);
        if (!boundary || fc_offs[f + 1] - fc_offs[f] == 1) {
            s0 += fcen[3 * f]; s1 += fcen[3 * f + 1]; s2 += fcen[3 * f + 2];
            m++;
        }
    }
    esum[3 * e] = s0; esum[3 * e + 1] = s1; esum[3 * e + 2] = s2;
    enf[e] = m;
    ebnd[e] = boundary ? 1u : 0u;
}
__device__ __forceinline__ void midpoint(const double* pos, const u32* ev, u64 e, double* m) {
    u64 a = ev[2 * e], b = ev[2 * e + 1];
    for (int k = 0; k < 3; k++) m[k] = 0.5 * (pos[3 * a + k] + pos[3 * b + k]);
}
// edge points: boundary (avg boundary face centroids + midpoint) / 2, interior
// (avg p_C + 2 avg p̂_F + (n - 3) p̂_E) / n (cells of e from the transpose of ∂̂3¹)
extern "C" __global__ void cc_edge_points(const u32* ev, const double* pos, const double* esum, const u32* enf, const u32* ebnd,
                                          const u32* ec_offs, const i32* ec_cols, u64 ne, u64 at_e, u64 at_c, double* out) {
    u64 e = TID;
    if (e >= ne) return;
    double m[3], fa[3];
    midpoint(pos, ev, e, m);
    double w = 1.0 / (double)enf[e];
    for (int k = 0; k < 3; k++) fa[k] = esum[3 * e + k] * w;
    double* o = out + 3 * (at_e + e);
    if (ebnd[e]) {
        for (int k = 0; k < 3; k++) o[k] = 0.5 * (fa[k] + m[k]);
        return;
    }
    double n = (double)enf[e];
    double ca[3];
    avg_rows(ec_offs, ec_cols, out + 3 * at_c, e, ca);
    double w1 = 1.0 / n, w2 = 2.0 / n, w3 = (n - 3.0) / n;
    for (int k = 0; k < 3; k++) {
        double p = ca[k] * w1;
        p = p + fa[k] * w2;
        p = p + m[k] * w3;
        o[k] = p;
    }
}
// vertex points: boundary (avg p̂_F + 2 avg p̂_E + (n - 3) p_V) / n over the boundary faces
// and edges, interior (avg p_C + 3 avg p̂_F + 3 avg p̂_E + p_V) / 8; isolated vertices stay
extern "C" __global__ void cc_vertex_points(const u32* ve_offs, const i32* ve_cols, const u32* ev, const double* pos,
                                            const double* esum, const u32* enf, const u32* ebnd, const u32* vc_offs,
                                            const i32* vc_cols, u64 nv, u64 at_c, double* out) {
    u64 v = TID;
    if (v >= nv) return;
    const double* p = pos + 3 * v;
    double* o = out + 3 * v;
    u32 a = ve_offs[v], n = ve_offs[v + 1] - a;
    if (n == 0) {
        for (int k = 0; k < 3; k++) o[k] = p[k];
        return;
    }
    bool boundary = false;
    for (u32 i = 0; i < n; i++)
        if (ebnd[tcol(ve_cols[a + i])]) boundary = true;
    double fs[3] = {0.0, 0.0, 0.0}, es[3] = {0.0, 0.0, 0.0};
    u32 nf = 0, nE = 0;
    for (u32 i = 0; i < n; i++) {
        u64 e = tcol(ve_cols[a + i]);
        if (boundary && !ebnd[e]) continue;
        double m[3];
        midpoint(pos, ev, e, m);
        for (int k = 0; k < 3; k++) { es[k] += m[k]; fs[k] += esum[3 * e + k]; }
        nE++;
        nf += enf[e];
    }
    double fa[3], ea[3];
    double wf = 1.0 / (double)nf, we = 1.0 / (double)nE;
    for (int k = 0; k < 3; k++) { fa[k] = fs[k] * wf; ea[k] = es[k] * we; }
    if (boundary) {
        double nn = (double)nf / 2.0;
        double w1 = 1.0 / nn, w2 = 2.0 / nn, w3 = (nn - 3.0) / nn;
        for (int k = 0; k < 3; k++) {
            double q = fa[k] * w1;
            q = q + ea[k] * w2;
            q = q + p[k] * w3;
            o[k] = q;
        }
    } else {
        double ca[3];
        avg_rows(vc_offs, vc_cols, out + 3 * at_c, v, ca);
        for (int k = 0; k < 3; k++) {
            double q = ca[k] * 0.125;
            q = q + fa[k] * 0.375;
            q = q + ea[k] * 0.375;
            q = q + p[k] * 0.125;
            o[k] = q;
        }
    }
}

// ---------------------------------------------------------------- new ∂1 (Eqs. 3.9, 3.10, Fig. 3.8)
// edge-edges: 2e = (v1, ep), 2e + 1 = (ep, v2)
extern "C" __global__ void cc_edge_edges(const u32* ev, u64 ne, u32 nv, u32* out) {
    u64 i = TID;
    if (i >= 2 * ne) return;
    u64 e = i / 2;
    if (i % 2 == 0) { out[2 * i] = ev[2 * e]; out[2 * i + 1] = nv + (u32)e; }
    else { out[2 * i] = nv + (u32)e; out[2 * i + 1] = ev[2 * e + 1]; }
}
// face-edges: ∂2 entry k (face f, edge e) gives edge 2|E| + k = (ep(e), fp(f))
extern "C" __global__ void cc_face_edges(const u32* fe_offs, const i32* fe_cols, u64 nf, u32 nv, u32 ne, u32* out) {
    u64 f = TID;
    if (f >= nf) return;
    u32 fp = nv + ne + (u32)f;
    for (u32 k = fe_offs[f]; k < fe_offs[f + 1]; k++) {
        u64 o = 2 * ((u64)2 * ne + k);
        out[o] = nv + tcol(fe_cols[k]);
        out[o + 1] = fp;
    }
}
// cell-edges: ∂3 entry k (cell c, face f) gives edge 2|E| + nnz(∂2) + k = (fp(f), cp(c))
extern "C" __global__ void cc_cell_edges(const u32* cf_offs, const i32* cf_cols, u64 nc, u32 nv, u32 ne, u32 nf, u64 base,
                                         u32* out) {
    u64 c = TID;
    if (c >= nc) return;
    u32 cp = nv + ne + nf + (u32)c;
    for (u32 k = cf_offs[c]; k < cf_offs[c + 1]; k++) {
        u64 o = 2 * (base + k);
        out[o] = nv + ne + tcol(cf_cols[k]);
        out[o + 1] = cp;
    }
}

// ---------------------------------------------------------------- new ∂2 and ∂3 (Fig. 3.9, Fig. 3.3)
extern "C" __global__ void cc_iota4(u64 n, u32* out) {
    u64 i = TID;
    if (i < n) out[i] = 4 * (u32)i;
}
// face-faces: corner i of f is v_i -> ep(e_i) -> fp(f) -> ep(e_{i-1})
extern "C" __global__ void cc_face_faces(const u32* fe_offs, const i32* fe_cols, u64 nf, u32 e2, i32* cols2) {
    u64 f = TID;
    if (f >= nf) return;
    u32 a = fe_offs[f], n = fe_offs[f + 1] - a;
    u32 base = e2 + a;
    for (u32 i = 0; i < n; i++) {
        u32 ip = (i + n - 1) % n;
        i32 xn = fe_cols[a + i], xp = fe_cols[a + ip];
        u32 en = tcol(xn), ep = tcol(xp);
        i32* q = cols2 + 4 * ((u64)a + i);
        q[0] = xn >= 0 ? tenc(2 * en, false) : tenc(2 * en + 1, true);
        q[1] = tenc(base + i, false);
        q[2] = tenc(base + ip, true);
        q[3] = xp >= 0 ? tenc(2 * ep + 1, false) : tenc(2 * ep, true);
    }
}
// The same for faces of one length n (offsets n f, known on the host): one thread per ∂2
// entry, writing its face-face as one 16-byte store.
extern "C" __global__ void cc_face_faces_uniform(const i32* fe_cols, u64 nnz, u32 n, u32 e2, i32* cols2) {
    u64 j = TID;
    if (j >= nnz) return;
    u32 i = (u32)(j % n);
    u64 a = j - i;
    u32 ip = (i + n - 1) % n;
    i32 xn = fe_cols[j], xp = fe_cols[a + ip];
    u32 en = tcol(xn), ep = tcol(xp);
    int4 q;
    q.x = xn >= 0 ? tenc(2 * en, false) : tenc(2 * en + 1, true);
    q.y = tenc(e2 + (u32)j, false);
    q.z = tenc(e2 + (u32)(a + ip), true);
    q.w = xp >= 0 ? tenc(2 * ep + 1, false) : tenc(2 * ep, true);
    reinterpret_cast<int4*>(cols2)[j] = q;
}

#define CC_SMALL_E 12
#define CC_SMALL_V 8
// Steps 1-3 for one cell on its rows `edges` (∂̂3¹) and `verts` (∂̂3²), writing the
// cell-faces to `cfseg`, the row starts of its cell-cells to `cursor` and their entries to
// `seg` (absolute positions base..base + len). False when err was set.
__device__ bool cc_cell_body(const i32* cf_cols, u32 f0, u32 f1, const u32* fe_offs, const i32* fe_cols, const u32* fv_offs,
                             const i32* fv_cols, const i32* edges, u32 nedges, const i32* verts, u32 nverts, u32 e2, u32 e3,
                             u32 nnz2, u32 ce0, i32* cfseg, u32* cursor, i32* seg, u32* err) {
    // 1. cell-faces
    for (u32 j = 0; j < 4 * nedges; j++) cfseg[j] = UNSET;
    for (u32 k = 0; k < f1 - f0; k++) {
        i32 x = cf_cols[f0 + k];
        u32 f = tcol(x);
        int sf = tsign(x);
        u32 cell_edge = e3 + f0 + k;
        u32 o2 = fe_offs[f];
        for (u32 i = 0; i < fe_offs[f + 1] - o2; i++) {
            i32 y = fe_cols[o2 + i];
            u32 e = tcol(y);
            u32 face_edge = e2 + o2 + i;
            int j = bsearch_row(edges, nedges, (i32)e);
            if (j < 0) { flag(err); return false; }
            i32* q = cfseg + 4 * j;
            if (sf * tsign(y) < 0) {
                if (q[0] != UNSET) { flag(err); return false; }
                q[0] = tenc(face_edge, false);
                q[1] = tenc(cell_edge, false);
            } else {
                if (q[2] != UNSET) { flag(err); return false; }
                q[2] = tenc(cell_edge, true);
                q[3] = tenc(face_edge, true);
            }
        }
    }
    for (u32 j = 0; j < 4 * nedges; j++)
        if (cfseg[j] == UNSET) { flag(err); return false; }
    // 2. count
    u32 base = 4 * ce0, len = 4 * nedges;
    for (u32 l = 0; l < nverts; l++) cursor[l] = 0;
    for (u32 k = f0; k < f1; k++) {
        u32 f = tcol(cf_cols[k]);
        for (u32 i = fv_offs[f]; i < fv_offs[f + 1]; i++) {
            int l = bsearch_row(verts, nverts, fv_cols[i]);
            if (l < 0) { flag(err); return false; }
            cursor[l] += 2;
        }
    }
    // 3. scan and fill
    u32 acc = base;
    for (u32 l = 0; l < nverts; l++) {
        u32 n = cursor[l];
        cursor[l] = acc;
        acc += n;
    }
    if (acc != base + len) { flag(err); return false; }
    for (u32 k = f0; k < f1; k++) {
        i32 x = cf_cols[k];
        u32 f = tcol(x);
        int sf = tsign(x);
        u32 o2 = fe_offs[f];
        const i32* lp = fv_cols + fv_offs[f];
        u32 n = fv_offs[f + 1] - fv_offs[f];
        for (u32 i = 0; i < n; i++) {
            i32 vi = lp[i];
            int l = bsearch_row(verts, nverts, vi);
            if (l < 0 || cursor[l] - base >= len) { flag(err); return false; }
            seg[cursor[l]++ - base] = tenc(o2 + i, sf < 0);
            i32 y = fe_cols[o2 + i];
            int se = tsign(y);
            if (sf * se > 0) {
                u32 e = tcol(y);
                int j = bsearch_row(edges, nedges, (i32)e);
                if (j < 0) { flag(err); return false; }
                u32 face = nnz2 + ce0 + (u32)j;
                i32 vn = lp[(i + 1) % n];
                i32 from = se > 0 ? vi : vn, to = se > 0 ? vn : vi;
                int lf = bsearch_row(verts, nverts, from), lt = bsearch_row(verts, nverts, to);
                if (lf < 0 || lt < 0 || cursor[lf] - base >= len) { flag(err); return false; }
                seg[cursor[lf]++ - base] = tenc(face, false);
                if (cursor[lt] - base >= len) { flag(err); return false; }
                seg[cursor[lt]++ - base] = tenc(face, true);
            }
        }
    }
    // every cursor sits at the start of the next row: shift back into offsets
    for (u32 l = nverts; l-- > 1;) cursor[l] = cursor[l - 1];
    if (nverts > 0) cursor[0] = base;
    return true;
}
// cc_cell_body on thread-local copies of the cell's rows (cells of at most E edges and V
// vertices), then one write of its rows
template <int E, int V>
__device__ __forceinline__ void cc_cell_local(const i32* cf_cols, u32 f0, u32 f1, const u32* fe_offs, const i32* fe_cols,
                                              const u32* fv_offs, const i32* fv_cols, const i32* ce_cols, u32 ce0,
                                              u32 nedges, const i32* cv_cols, u32 cv0, u32 nverts, u32 e2, u32 e3,
                                              u32 nnz2, i32* cfseg, u32* cursor, i32* seg, u32* err) {
    i32 le[E], lv[V], lcf[4 * E], lseg[4 * E];
    u32 lcur[V];
    for (u32 i = 0; i < nedges; i++) le[i] = ce_cols[ce0 + i];
    for (u32 i = 0; i < nverts; i++) lv[i] = cv_cols[cv0 + i];
    if (!cc_cell_body(cf_cols, f0, f1, fe_offs, fe_cols, fv_offs, fv_cols, le, nedges, lv, nverts, e2, e3, nnz2, ce0, lcf,
                      lcur, lseg, err))
        return;
    for (u32 j = 0; j < 4 * nedges; j++) {
        cfseg[j] = lcf[j];
        seg[j] = lseg[j];
    }
    for (u32 l = 0; l < nverts; l++) cursor[l] = lcur[l];
}
// Register arrays with run-time indices: every access is an unrolled select over the
// compile-time positions, so the arrays stay in registers (no local memory).
template <int N, typename T>
__device__ __forceinline__ T rget(const T (&a)[N], int i) {
    T r = a[0];
#pragma unroll
    for (int t = 1; t < N; t++)
        if (t == i) r = a[t];
    return r;
}
template <int N, typename T>
__device__ __forceinline__ void rset(T (&a)[N], int i, T v) {
#pragma unroll
    for (int t = 0; t < N; t++)
        if (t == i) a[t] = v;
}
// position of key in a (distinct entries), or -1
template <int N>
__device__ __forceinline__ int rfind(const i32 (&a)[N], i32 key) {
    int r = -1;
#pragma unroll
    for (int t = 0; t < N; t++)
        if (a[t] == key) r = t;
    return r;
}
// cc_cell_body for cells of exactly E edges and V vertices (tetrahedra: 6, 4) with every
// per-cell array in registers; same steps, checks and results
template <int E, int V>
__device__ __forceinline__ void cc_cell_regs(const i32* cf_cols, u32 f0, u32 f1, const u32* fe_offs, const i32* fe_cols,
                                             const u32* fv_offs, const i32* fv_cols, const i32* ce_cols, u32 ce0,
                                             const i32* cv_cols, u32 cv0, u32 e2, u32 e3, u32 nnz2, i32* cfseg,
                                             u32* cursor, i32* seg, u32* err) {
    i32 le[E], lv[V], lcf[4 * E], lseg[4 * E];
    u32 lcur[V];
#pragma unroll
    for (int i = 0; i < E; i++) le[i] = ce_cols[ce0 + i];
#pragma unroll
    for (int i = 0; i < V; i++) lv[i] = cv_cols[cv0 + i];
#pragma unroll
    for (int j = 0; j < 4 * E; j++) lcf[j] = UNSET;
#pragma unroll
    for (int j = 0; j < 4 * E; j++) lseg[j] = UNSET;
    // 1. cell-faces
    for (u32 k = 0; k < f1 - f0; k++) {
        i32 x = cf_cols[f0 + k];
        u32 f = tcol(x);
        int sf = tsign(x);
        u32 cell_edge = e3 + f0 + k;
        u32 o2 = fe_offs[f], n2 = fe_offs[f + 1] - o2;
        for (u32 i = 0; i < n2; i++) {
            i32 y = fe_cols[o2 + i];
            u32 face_edge = e2 + o2 + i;
            int j = rfind<E>(le, (i32)tcol(y));
            if (j < 0) { flag(err); return; }
            if (sf * tsign(y) < 0) {
                if (rget<4 * E>(lcf, 4 * j) != UNSET) { flag(err); return; }
                rset<4 * E>(lcf, 4 * j, tenc(face_edge, false));
                rset<4 * E>(lcf, 4 * j + 1, tenc(cell_edge, false));
            } else {
                if (rget<4 * E>(lcf, 4 * j + 2) != UNSET) { flag(err); return; }
                rset<4 * E>(lcf, 4 * j + 2, tenc(cell_edge, true));
                rset<4 * E>(lcf, 4 * j + 3, tenc(face_edge, true));
            }
        }
    }
#pragma unroll
    for (int j = 0; j < 4 * E; j++)
        if (lcf[j] == UNSET) { flag(err); return; }
    // 2. count
    const u32 len = 4 * E;
#pragma unroll
    for (int l = 0; l < V; l++) lcur[l] = 0;
    for (u32 k = f0; k < f1; k++) {
        u32 f = tcol(cf_cols[k]);
        for (u32 i = fv_offs[f]; i < fv_offs[f + 1]; i++) {
            int l = rfind<V>(lv, fv_cols[i]);
            if (l < 0) { flag(err); return; }
            rset<V>(lcur, l, rget<V>(lcur, l) + 2u);
        }
    }
    // 3. scan (positions relative to the cell's first entry) and fill
    u32 acc = 0;
#pragma unroll
    for (int l = 0; l < V; l++) {
        u32 n = lcur[l];
        lcur[l] = acc;
        acc += n;
    }
    if (acc != len) { flag(err); return; }
    for (u32 k = f0; k < f1; k++) {
        i32 x = cf_cols[k];
        u32 f = tcol(x);
        int sf = tsign(x);
        u32 o2 = fe_offs[f];
        const i32* lp = fv_cols + fv_offs[f];
        u32 n = fv_offs[f + 1] - fv_offs[f];
        for (u32 i = 0; i < n; i++) {
            i32 vi = lp[i];
            int l = rfind<V>(lv, vi);
            if (l < 0) { flag(err); return; }
            u32 p = rget<V>(lcur, l);
            if (p >= len) { flag(err); return; }
            rset<4 * E>(lseg, (int)p, tenc(o2 + i, sf < 0));
            rset<V>(lcur, l, p + 1u);
            i32 y = fe_cols[o2 + i];
            int se = tsign(y);
            if (sf * se > 0) {
                int j = rfind<E>(le, (i32)tcol(y));
                if (j < 0) { flag(err); return; }
                u32 face = nnz2 + ce0 + (u32)j;
                i32 vn = lp[(i + 1) % n];
                i32 from = se > 0 ? vi : vn, to = se > 0 ? vn : vi;
                int lf = rfind<V>(lv, from), lt = rfind<V>(lv, to);
                if (lf < 0 || lt < 0) { flag(err); return; }
                u32 pf = rget<V>(lcur, lf);
                if (pf >= len) { flag(err); return; }
                rset<4 * E>(lseg, (int)pf, tenc(face, false));
                rset<V>(lcur, lf, pf + 1u);
                u32 pt = rget<V>(lcur, lt);
                if (pt >= len) { flag(err); return; }
                rset<4 * E>(lseg, (int)pt, tenc(face, true));
                rset<V>(lcur, lt, pt + 1u);
            }
        }
    }
    // rows out in 16-byte stores (both segments start at a multiple of 4 entries: 4 (nnz2 +
    // ce0) and 4 ce0); the cursor of vertex l ends at the start of row l + 1
    u32 base = 4 * ce0;
    int4* cf4 = reinterpret_cast<int4*>(cfseg);
    int4* sg4 = reinterpret_cast<int4*>(seg);
#pragma unroll
    for (int j = 0; j < E; j++) {
        cf4[j] = make_int4(lcf[4 * j], lcf[4 * j + 1], lcf[4 * j + 2], lcf[4 * j + 3]);
        sg4[j] = make_int4(lseg[4 * j], lseg[4 * j + 1], lseg[4 * j + 2], lseg[4 * j + 3]);
    }
    cursor[0] = base;
#pragma unroll
    for (int l = 1; l < V; l++) cursor[l] = base + lcur[l - 1];
}
// Per cell, as subdivide::new_faces_and_cells: 1. the cell-faces of the cell's edges
// (ep(e) -> fp(f_b) -> cp(c) -> fp(f_a)), 2. count the faces of each cell-cell
// (2 x corners at v), 3. scan in the cell's slice of the new ∂3 offsets and fill: the
// face-face of each corner (sign of the face in c), then for the use of each edge along
// the outward orientation its cell-face at the start (+1) and end (-1) vertex. The rows of
// cell c start at 4 off(∂̂3¹)[c]. err is set for cells that are not closed or whose
// corners and edges do not pair up. Tetrahedra keep every per-cell array in registers;
// other cells of up to 12 edges and 8 vertices (hexahedra, ...) work in thread-local arrays
// (interleaved across the warp, cached); both write their rows once at the end; larger
// cells work in place in global memory.
extern "C" __global__ void cc_cells(const u32* cf_offs, const i32* cf_cols, const u32* fe_offs, const i32* fe_cols,
                                    const u32* fv_offs, const i32* fv_cols, const u32* ce_offs, const i32* ce_cols,
                                    const u32* cv_offs, const i32* cv_cols, u64 nc, u32 e2, u32 e3, u32 nnz2, i32* cols2,
                                    u32* offsets3, u64 nnz32, i32* cols3, u32* err) {
    u64 c = TID;
    if (c >= nc) return;
    if (c == nc - 1) offsets3[nnz32] = 4 * ce_offs[nc];
    u32 f0 = cf_offs[c], f1 = cf_offs[c + 1];
    if (f0 == f1) { flag(err); return; }
    u32 ce0 = ce_offs[c], nedges = ce_offs[c + 1] - ce0;
    u32 cv0 = cv_offs[c], nverts = cv_offs[c + 1] - cv0;
    i32* cfseg = cols2 + 4 * ((u64)nnz2 + ce0);
    u32* cursor = offsets3 + cv0;
    i32* seg = cols3 + 4 * (u64)ce0;
    if (nedges == 6 && nverts == 4) {
        // tetrahedra: every per-cell array in registers
        cc_cell_regs<6, 4>(cf_cols, f0, f1, fe_offs, fe_cols, fv_offs, fv_cols, ce_cols, ce0, cv_cols, cv0, e2, e3, nnz2,
                           cfseg, cursor, seg, err);
    } else if (nedges <= CC_SMALL_E && nverts <= CC_SMALL_V) {
        cc_cell_local<CC_SMALL_E, CC_SMALL_V>(cf_cols, f0, f1, fe_offs, fe_cols, fv_offs, fv_cols, ce_cols, ce0, nedges,
                                              cv_cols, cv0, nverts, e2, e3, nnz2, cfseg, cursor, seg, err);
    } else {
        cc_cell_body(cf_cols, f0, f1, fe_offs, fe_cols, fv_offs, fv_cols, ce_cols + ce0, nedges, cv_cols + cv0, nverts, e2,
                     e3, nnz2, ce0, cfseg, cursor, seg, err);
    }
}
