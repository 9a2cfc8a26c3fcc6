// Compute rasterizer and rixel encoder (dissertation §6.3.5).
//
// Every floating-point expression mirrors crates/tessera-render/src/raster.rs and rixel.rs
// operation by operation; the module is compiled with --fmad=false (no contraction into
// fused multiply-adds), and IEEE division, sqrt and round-to-nearest conversions are the
// defaults, so the GPU produces the bits of the CPU reference.

typedef unsigned long long u64;
typedef long long i64;

#define GUARD 8.0f
#define NO_TRI 0xffffffffu
#define EMPTY_KEY 0xffffffffffffffffull
// Triangles whose pixel bounds exceed this many samples go to the block-per-triangle pass.
#define SMALL_MAX_PIXELS 64
#define HEADER_BYTES 160

struct Snapped {
    i64 x[3];
    i64 y[3];
    float z[3];
    i64 area;
    i64 x0, x1, y0, y1;
};

__device__ __forceinline__ bool finite4(float4 c) {
    return isfinite(c.x) && isfinite(c.y) && isfinite(c.z) && isfinite(c.w);
}

__device__ __forceinline__ unsigned outcode(float4 c) {
    float gw = GUARD * c.w;
    return ((c.z + c.w < 0.0f) ? 1u : 0u) | (((c.w - c.z) < 0.0f) ? 2u : 0u) |
           (((c.x + gw) < 0.0f) ? 4u : 0u) | (((gw - c.x) < 0.0f) ? 8u : 0u) |
           (((c.y + gw) < 0.0f) ? 16u : 0u) | (((gw - c.y) < 0.0f) ? 32u : 0u);
}

__device__ __forceinline__ float plane_dist(float4 c, int plane) {
    float gw = GUARD * c.w;
    switch (plane) {
    case 0: return c.z + c.w;
    case 1: return c.w - c.z;
    case 2: return c.x + gw;
    case 3: return gw - c.x;
    case 4: return c.y + gw;
    default: return gw - c.y;
    }
}

// Sutherland-Hodgman against the planes in `mask`; the intersection is interpolated from the
// inside vertex. Returns the polygon length (0 when fewer than 3 vertices remain).
__device__ int clip_polygon(float4 t0, float4 t1, float4 t2, unsigned mask, float4* out) {
    float4 a[9], b[9];
    a[0] = t0; a[1] = t1; a[2] = t2;
    int n = 3;
    for (int plane = 0; plane < 6; ++plane) {
        if ((mask & (1u << plane)) == 0) continue;
        int m = 0;
        for (int i = 0; i < n; ++i) {
            float4 cur = a[i];
            float4 nxt = a[(i + 1 == n) ? 0 : i + 1];
            float dc = plane_dist(cur, plane);
            float dn = plane_dist(nxt, plane);
            bool ic = dc >= 0.0f, inn = dn >= 0.0f;
            if (ic) b[m++] = cur;
            if (ic != inn) {
                float4 p = ic ? cur : nxt;
                float4 q = ic ? nxt : cur;
                float dp = ic ? dc : dn;
                float dq = ic ? dn : dc;
                float t = dp / (dp - dq);
                float4 r;
                r.x = p.x + t * (q.x - p.x);
                r.y = p.y + t * (q.y - p.y);
                r.z = p.z + t * (q.z - p.z);
                r.w = p.w + t * (q.w - p.w);
                b[m++] = r;
            }
        }
        n = m;
        for (int i = 0; i < n; ++i) a[i] = b[i];
        if (n < 3) return 0;
    }
    for (int i = 0; i < n; ++i) out[i] = a[i];
    return n;
}

__device__ __forceinline__ void to_window(float4 c, float half_w, float half_h, i64* x, i64* y, float* z) {
    float sx = (c.x / c.w + 1.0f) * half_w;
    float sy = (c.y / c.w + 1.0f) * half_h;
    float sz = (c.z / c.w) * 0.5f + 0.5f;
    *x = __float2ll_rn(sx * 256.0f);
    *y = __float2ll_rn(sy * 256.0f);
    *z = sz;
}

// Snap and orient counter-clockwise; false for a degenerate triangle or empty pixel bounds.
__device__ bool snap(float4 c0, float4 c1, float4 c2, float half_w, float half_h, int W, int H, Snapped* s) {
    to_window(c0, half_w, half_h, &s->x[0], &s->y[0], &s->z[0]);
    to_window(c1, half_w, half_h, &s->x[1], &s->y[1], &s->z[1]);
    to_window(c2, half_w, half_h, &s->x[2], &s->y[2], &s->z[2]);
    i64 area = (s->x[1] - s->x[0]) * (s->y[2] - s->y[0]) - (s->y[1] - s->y[0]) * (s->x[2] - s->x[0]);
    if (area == 0) return false;
    if (area < 0) {
        i64 tx = s->x[1]; s->x[1] = s->x[2]; s->x[2] = tx;
        i64 ty = s->y[1]; s->y[1] = s->y[2]; s->y[2] = ty;
        float tz = s->z[1]; s->z[1] = s->z[2]; s->z[2] = tz;
        area = -area;
    }
    s->area = area;
    i64 minx = min(min(s->x[0], s->x[1]), s->x[2]);
    i64 maxx = max(max(s->x[0], s->x[1]), s->x[2]);
    i64 miny = min(min(s->y[0], s->y[1]), s->y[2]);
    i64 maxy = max(max(s->y[0], s->y[1]), s->y[2]);
    s->x0 = max((minx + 127) >> 8, (i64)0);
    s->x1 = min((maxx - 128) >> 8, (i64)(W - 1));
    s->y0 = max((miny + 127) >> 8, (i64)0);
    s->y1 = min((maxy - 128) >> 8, (i64)(H - 1));
    return s->x0 <= s->x1 && s->y0 <= s->y1;
}

__device__ __forceinline__ bool top_left(i64 dx, i64 dy) { return dy < 0 || (dy == 0 && dx < 0); }

__device__ __forceinline__ i64 edge(const Snapped& s, int a, int b, i64 cx, i64 cy) {
    return (s.x[b] - s.x[a]) * (cy - s.y[a]) - (s.y[b] - s.y[a]) * (cx - s.x[a]);
}

__device__ __forceinline__ float clamp_depth(float d) {
    if (!(d > 0.0f)) return 0.0f;
    if (d > 1.0f) return 1.0f;
    return d;
}

// Coverage (top-left rule at the pixel centre) and depth of one sample.
__device__ __forceinline__ bool sample(const Snapped& s, i64 px, i64 py, float* depth) {
    i64 cx = px * 256 + 128, cy = py * 256 + 128;
    i64 w0 = edge(s, 1, 2, cx, cy);
    i64 w1 = edge(s, 2, 0, cx, cy);
    i64 w2 = edge(s, 0, 1, cx, cy);
    bool in0 = w0 > 0 || (w0 == 0 && top_left(s.x[2] - s.x[1], s.y[2] - s.y[1]));
    bool in1 = w1 > 0 || (w1 == 0 && top_left(s.x[0] - s.x[2], s.y[0] - s.y[2]));
    bool in2 = w2 > 0 || (w2 == 0 && top_left(s.x[1] - s.x[0], s.y[1] - s.y[0]));
    if (!(in0 && in1 && in2)) return false;
    float d = (((float)w0 * s.z[0] + (float)w1 * s.z[1]) + (float)w2 * s.z[2]) / (float)s.area;
    *depth = clamp_depth(d);
    return true;
}

__device__ __forceinline__ u64 pack_key(float depth, unsigned id) {
    return ((u64)__float_as_uint(depth) << 32) | (u64)id;
}

// ---------------------------------------------------------------- vertex stage

// clip[v] = mvp * (x, y, z, 1) with the operation order of Mat4::transform_point.
extern "C" __global__ void rx_transform(const float4* __restrict__ verts, unsigned nv,
                                        const float* __restrict__ mvp, float4* __restrict__ clip) {
    unsigned v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= nv) return;
    float4 p = verts[v];
    float m[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) m[k] = __ldg(mvp + k);
    float4 c;
    c.x = ((m[0] * p.x + m[4] * p.y) + m[8] * p.z) + m[12];
    c.y = ((m[1] * p.x + m[5] * p.y) + m[9] * p.z) + m[13];
    c.z = ((m[2] * p.x + m[6] * p.y) + m[10] * p.z) + m[14];
    c.w = ((m[3] * p.x + m[7] * p.y) + m[11] * p.z) + m[15];
    clip[v] = c;
}

extern "C" __global__ void rx_clear(u64* __restrict__ keys, unsigned n, unsigned* __restrict__ large_count) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) keys[i] = EMPTY_KEY;
    if (i == 0) *large_count = 0;
}

// ---------------------------------------------------------------- rasterization

// One thread per triangle: small unclipped triangles are rasterized here; clipped ones and
// those with more than SMALL_MAX_PIXELS samples in their bounds are queued.
extern "C" __global__ void rx_raster(const float4* __restrict__ clip, const unsigned* __restrict__ idx,
                                     unsigned nt, int W, int H, u64* __restrict__ keys,
                                     unsigned* __restrict__ large_list, unsigned* __restrict__ large_count) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nt) return;
    float4 c0 = clip[__ldg(idx + 3 * (size_t)t)];
    float4 c1 = clip[__ldg(idx + 3 * (size_t)t + 1)];
    float4 c2 = clip[__ldg(idx + 3 * (size_t)t + 2)];
    if (!(finite4(c0) && finite4(c1) && finite4(c2))) return;
    unsigned o0 = outcode(c0), o1 = outcode(c1), o2 = outcode(c2);
    if (o0 & o1 & o2) return;
    if (o0 | o1 | o2) {
        large_list[atomicAdd(large_count, 1u)] = t;
        return;
    }
    if (!(c0.w > 0.0f && c1.w > 0.0f && c2.w > 0.0f)) return;
    Snapped s;
    if (!snap(c0, c1, c2, 0.5f * (float)W, 0.5f * (float)H, W, H, &s)) return;
    i64 npx = (s.x1 - s.x0 + 1) * (s.y1 - s.y0 + 1);
    if (npx > SMALL_MAX_PIXELS) {
        large_list[atomicAdd(large_count, 1u)] = t;
        return;
    }
    for (i64 py = s.y0; py <= s.y1; ++py) {
        for (i64 px = s.x0; px <= s.x1; ++px) {
            float d;
            if (sample(s, px, py, &d)) atomicMin(keys + (px + py * (i64)W), pack_key(d, t));
        }
    }
}

// One block per queued triangle (grid-stride over the queue): thread 0 clips and snaps the
// fan into shared memory, then all threads sample its pixel bounds.
extern "C" __global__ void rx_raster_large(const float4* __restrict__ clip, const unsigned* __restrict__ idx,
                                           int W, int H, u64* __restrict__ keys,
                                           const unsigned* __restrict__ large_list,
                                           const unsigned* __restrict__ large_count) {
    __shared__ Snapped subs[7];
    __shared__ int nsub;
    unsigned count = *large_count;
    float half_w = 0.5f * (float)W, half_h = 0.5f * (float)H;
    for (unsigned i = blockIdx.x; i < count; i += gridDim.x) {
        unsigned t = large_list[i];
        if (threadIdx.x == 0) {
            float4 c0 = clip[idx[3 * (size_t)t]];
            float4 c1 = clip[idx[3 * (size_t)t + 1]];
            float4 c2 = clip[idx[3 * (size_t)t + 2]];
            unsigned any = outcode(c0) | outcode(c1) | outcode(c2);
            int k = 0;
            if (any == 0) {
                if (c0.w > 0.0f && c1.w > 0.0f && c2.w > 0.0f && snap(c0, c1, c2, half_w, half_h, W, H, &subs[0])) k = 1;
            } else {
                float4 poly[9];
                int n = clip_polygon(c0, c1, c2, any, poly);
                for (int j = 1; j + 1 < n; ++j) {
                    float4 a = poly[0], b = poly[j], c = poly[j + 1];
                    if (!(a.w > 0.0f && b.w > 0.0f && c.w > 0.0f)) continue;
                    if (snap(a, b, c, half_w, half_h, W, H, &subs[k])) ++k;
                }
            }
            nsub = k;
        }
        __syncthreads();
        for (int j = 0; j < nsub; ++j) {
            Snapped s = subs[j];
            i64 bw = s.x1 - s.x0 + 1;
            i64 npx = bw * (s.y1 - s.y0 + 1);
            for (i64 p = threadIdx.x; p < npx; p += blockDim.x) {
                i64 px = s.x0 + p % bw, py = s.y0 + p / bw;
                float d;
                if (sample(s, px, py, &d)) atomicMin(keys + (px + py * (i64)W), pack_key(d, t));
            }
        }
        __syncthreads();
    }
}

// Winner's depth and id from the key; value by the triangle's homogeneous barycentrics at
// the pixel centre (raster.rs, resolve_value).
extern "C" __global__ void rx_resolve(const u64* __restrict__ keys, const float4* __restrict__ clip,
                                      const float4* __restrict__ verts, const unsigned* __restrict__ idx,
                                      int W, int H, float* __restrict__ depth, float* __restrict__ value,
                                      unsigned* __restrict__ tri) {
    unsigned p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= (unsigned)W * (unsigned)H) return;
    u64 key = keys[p];
    if (key == EMPTY_KEY) {
        depth[p] = 1.0f;
        value[p] = __uint_as_float(0x7fc00000u);
        tri[p] = NO_TRI;
        return;
    }
    unsigned t = (unsigned)key;
    unsigned i0 = idx[3 * (size_t)t], i1 = idx[3 * (size_t)t + 1], i2 = idx[3 * (size_t)t + 2];
    float4 c0 = clip[i0], c1 = clip[i1], c2 = clip[i2];
    float v0 = verts[i0].w, v1 = verts[i1].w, v2 = verts[i2].w;
    unsigned x = p % (unsigned)W, y = p / (unsigned)W;
    float px = (float)(2 * x + 1) / (float)W - 1.0f;
    float py = (float)(2 * y + 1) / (float)H - 1.0f;
    float r10 = c0.x - px * c0.w, r11 = c1.x - px * c1.w, r12 = c2.x - px * c2.w;
    float r20 = c0.y - py * c0.w, r21 = c1.y - py * c1.w, r22 = c2.y - py * c2.w;
    float b0 = r11 * r22 - r12 * r21;
    float b1 = r12 * r20 - r10 * r22;
    float b2 = r10 * r21 - r11 * r20;
    float s = (b0 + b1) + b2;
    float q0 = b0 / s, q1 = b1 / s, q2 = b2 / s;
    if (!(q0 > 0.0f)) q0 = 0.0f;
    if (!(q1 > 0.0f)) q1 = 0.0f;
    if (!(q2 > 0.0f)) q2 = 0.0f;
    float tt = (q0 + q1) + q2;
    float v = (tt > 0.0f) ? ((q0 * v0 + q1 * v1) + q2 * v2) / tt : v0;
    if (isnan(v)) v = __uint_as_float(0x7fc00000u);  // one NaN bit pattern (raster.rs)
    depth[p] = __uint_as_float((unsigned)(key >> 32));
    value[p] = v;
    tri[p] = t;
}

// ---------------------------------------------------------------- surfaces on the device

// Height-field vertices (x0 + i h, y0 + j h, zscale * z, value), value NaN where `wet` is
// given and not above `wet_min` (Surface::heightfield plus the dry mask).
extern "C" __global__ void rx_heightfield(const float* __restrict__ z, const float* __restrict__ val,
                                          const float* __restrict__ wet, int use_wet, float wet_min,
                                          unsigned nx, unsigned ny, double h, double x0, double y0,
                                          float zscale, float4* __restrict__ verts) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nx * ny) return;
    unsigned ix = i % nx, iy = i / nx;
    float4 o;
    o.x = (float)(x0 + (double)ix * h);
    o.y = (float)(y0 + (double)iy * h);
    o.z = zscale * z[i];
    float v = val[i];
    if (use_wet && !(wet[i] > wet_min)) v = __uint_as_float(0x7fc00000u);
    o.w = v;
    verts[i] = o;
}

// ---------------------------------------------------------------- rixel encoder

__device__ __forceinline__ unsigned okey(float v) {
    unsigned u = __float_as_uint(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float from_okey(unsigned k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Pass 1 (256 threads per block): visible count per block, and the finite min/max of the
// visible values as order-preserving keys (range[0] = min, range[1] = max).
extern "C" __global__ void rx_count(const unsigned* __restrict__ tri, const float* __restrict__ value,
                                    unsigned n, unsigned* __restrict__ block_counts,
                                    unsigned* __restrict__ range, int auto_range) {
    __shared__ unsigned wc[8], wmin[8], wmax[8];
    unsigned p = blockIdx.x * 256 + threadIdx.x;
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    bool vis = p < n && tri[p] != NO_TRI;
    unsigned ballot = __ballot_sync(0xffffffffu, vis);
    unsigned lo = 0xffffffffu, hi = 0u;
    if (auto_range && vis) {
        float v = value[p];
        if (isfinite(v)) { lo = okey(v); hi = lo; }
    }
    for (int o = 16; o > 0; o >>= 1) {
        lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, o));
        hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o));
    }
    if (lane == 0) { wc[warp] = __popc(ballot); wmin[warp] = lo; wmax[warp] = hi; }
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned c = 0, l = 0xffffffffu, h = 0u;
        for (int w = 0; w < 8; ++w) { c += wc[w]; l = min(l, wmin[w]); h = max(h, wmax[w]); }
        block_counts[blockIdx.x] = c;
        if (auto_range && l != 0xffffffffu) { atomicMin(range, l); atomicMax(range + 1, h); }
    }
}

extern "C" __global__ void rx_range_init(unsigned* range) {
    range[0] = 0xffffffffu;
    range[1] = 0u;
}

// Pass 2 (one block of 1024 threads): exclusive scan of the block counts in place; the total
// (the frame's visible count) goes to *total.
extern "C" __global__ void rx_scan(unsigned* __restrict__ counts, unsigned nb, unsigned* __restrict__ total) {
    __shared__ unsigned s[1024];
    unsigned carry = 0;
    for (unsigned base = 0; base < nb; base += 1024) {
        unsigned i = base + threadIdx.x;
        unsigned v = i < nb ? counts[i] : 0u;
        s[threadIdx.x] = v;
        __syncthreads();
        for (unsigned o = 1; o < 1024; o <<= 1) {
            unsigned a = threadIdx.x >= o ? s[threadIdx.x - o] : 0u;
            __syncthreads();
            s[threadIdx.x] += a;
            __syncthreads();
        }
        if (i < nb) counts[i] = carry + s[threadIdx.x] - v;
        unsigned chunk = s[1023];
        __syncthreads();
        carry += chunk;
    }
    if (threadIdx.x == 0) *total = carry;
}

// Pass 3 (256 threads per block): the frame. Header from the template with n, min, max
// patched in; depth and value of each visible pixel at its rank; the mask after them.
extern "C" __global__ void rx_write(const unsigned* __restrict__ tri, const float* __restrict__ depth,
                                    const float* __restrict__ value, unsigned n,
                                    const unsigned* __restrict__ block_offsets,
                                    const unsigned* __restrict__ total,
                                    const unsigned* __restrict__ range, int auto_range,
                                    float fixed_min, float fixed_max, int depth16,
                                    const unsigned* __restrict__ header_template,
                                    unsigned char* __restrict__ out) {
    __shared__ unsigned woff[8];
    unsigned nvis = *total;
    float vmin = fixed_min, vmax = fixed_max;
    if (auto_range) {
        unsigned l = range[0], h = range[1];
        if (l == 0xffffffffu) { vmin = 0.0f; vmax = 0.0f; }
        else { vmin = from_okey(l); vmax = from_okey(h); }
    }
    if (blockIdx.x == 0 && threadIdx.x < HEADER_BYTES / 4) {
        unsigned w = header_template[threadIdx.x];
        if (threadIdx.x == 5) w = nvis;
        if (threadIdx.x == 6) w = __float_as_uint(vmin);
        if (threadIdx.x == 7) w = __float_as_uint(vmax);
        ((unsigned*)out)[threadIdx.x] = w;
    }
    float scale = (vmax > vmin) ? 65534.0f / (vmax - vmin) : 0.0f;
    unsigned p = blockIdx.x * 256 + threadIdx.x;
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    bool vis = p < n && tri[p] != NO_TRI;
    unsigned ballot = __ballot_sync(0xffffffffu, vis);
    if (lane == 0) woff[warp] = __popc(ballot);
    __syncthreads();
    unsigned off = block_offsets[blockIdx.x];
    for (unsigned w = 0; w < warp; ++w) off += woff[w];
    unsigned db = depth16 ? 2u : 4u;
    unsigned char* values = out + HEADER_BYTES + (size_t)nvis * db;
    unsigned char* mask = out + HEADER_BYTES + (size_t)nvis * (db + 2);
    if (vis) {
        unsigned rank = off + __popc(ballot & ((1u << lane) - 1u));
        float d = depth[p];
        if (depth16) ((unsigned short*)(out + HEADER_BYTES))[rank] = (unsigned short)__float2uint_rn(d * 65535.0f);
        else ((float*)(out + HEADER_BYTES))[rank] = d;
        float v = value[p];
        unsigned short q;
        if (!isfinite(v)) q = 65535;
        else {
            float t = (v - vmin) * scale;
            if (!(t > 0.0f)) t = 0.0f;
            else if (t > 65534.0f) t = 65534.0f;
            q = (unsigned short)__float2uint_rn(t);
        }
        ((unsigned short*)values)[rank] = q;
    }
    unsigned mask_bytes = (n + 7) / 8;
    unsigned byte = (p - lane) / 8 + lane;
    if (lane < 4 && byte < mask_bytes) mask[byte] = (unsigned char)(ballot >> (8 * lane));
}
