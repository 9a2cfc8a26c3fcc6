// Rixel frame decoder for the browser (dissertation §6.3.5; layout in docs/rixel-frame.md).
//
// decodeFrame(bytes) turns an uncompressed or compressed frame into full-viewport arrays:
//   depth: Float32Array(w * h), window depth in [0, 1] of visible pixels, 2.0 where empty;
//   code:  Uint16Array(w * h), value code (0..65534; 65535 = no value or empty);
// plus the header (matrices, value range). Pixel (x, y) is at x + w * y, row 0 at the bottom.
// Compressed frames are inflated with the browser's native DecompressionStream("deflate-raw").

export const HEADER_BYTES = 160;
export const FLAG_DEPTH16 = 1;
export const FLAG_COMPRESSED = 2;
export const NO_VALUE = 65535;
export const VALUE_QMAX = 65534;
export const EMPTY_DEPTH = 2.0;

export function parseHeader(bytes) {
  if (bytes.byteLength < HEADER_BYTES) throw new Error(`rixel frame: ${bytes.byteLength} bytes, shorter than the header`);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  if (magic !== "RIX1") throw new Error("not a rixel frame");
  const version = dv.getUint16(4, true);
  if (version !== 1) throw new Error(`rixel frame version ${version}`);
  const flags = dv.getUint16(6, true);
  const h = {
    flags,
    depth16: (flags & FLAG_DEPTH16) !== 0,
    compressed: (flags & FLAG_COMPRESSED) !== 0,
    frameId: dv.getUint32(8, true),
    width: dv.getUint32(12, true),
    height: dv.getUint32(16, true),
    visible: dv.getUint32(20, true),
    valueMin: dv.getFloat32(24, true),
    valueMax: dv.getFloat32(28, true),
    view: new Float32Array(16),
    proj: new Float32Array(16),
  };
  for (let k = 0; k < 16; k++) {
    h.view[k] = dv.getFloat32(32 + 4 * k, true);
    h.proj[k] = dv.getFloat32(96 + 4 * k, true);
  }
  if (!(h.width >= 1 && h.height >= 1 && h.width <= 16384 && h.height <= 16384)) throw new Error("rixel frame: bad size");
  if (h.visible > h.width * h.height) throw new Error("rixel frame: more visible pixels than pixels");
  return h;
}

/// Raw DEFLATE through the browser's native decompressor; `expected` bounds the output.
export async function inflateRaw(data, expected) {
  const ds = new DecompressionStream("deflate-raw");
  const out = new Uint8Array(expected);
  const reader = new Blob([data]).stream().pipeThrough(ds).getReader();
  let off = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (off + value.length > expected) throw new Error("rixel frame: inflated body longer than announced");
    out.set(value, off);
    off += value.length;
  }
  if (off !== expected) throw new Error(`rixel frame: inflated ${off} bytes, expected ${expected}`);
  return out;
}

function allocate(h, reuse) {
  const n = h.width * h.height;
  if (reuse && reuse.depth.length === n) return reuse;
  return { depth: new Float32Array(n), code: new Uint16Array(n) };
}

// Uncompressed: scatter the compacted depths and values through the mask.
function decodePlain(bytes, h, out) {
  const n = h.visible, npx = h.width * h.height;
  const db = h.depth16 ? 2 : 4;
  const size = HEADER_BYTES + n * (db + 2) + Math.ceil(npx / 8);
  if (bytes.byteLength !== size) throw new Error(`rixel frame: ${bytes.byteLength} bytes, layout needs ${size}`);
  const base = bytes.byteOffset + HEADER_BYTES;
  // typed views need aligned offsets; copy when the frame sits at an odd place in its buffer
  const aligned = base % 4 === 0 ? bytes : bytes.slice();
  const off = aligned.byteOffset + HEADER_BYTES;
  const dep = h.depth16 ? new Uint16Array(aligned.buffer, off, n) : new Float32Array(aligned.buffer, off, n);
  const val = new Uint16Array(aligned.buffer, off + n * db, n);
  const mask = new Uint8Array(aligned.buffer, off + n * (db + 2), Math.ceil(npx / 8));
  const { depth, code } = out;
  depth.fill(EMPTY_DEPTH);
  code.fill(NO_VALUE);
  const s16 = 1 / 65535;
  let k = 0;
  for (let i = 0; i < mask.length; i++) {
    let b = mask[i];
    if (b === 0) continue;
    const p0 = i << 3;
    while (b !== 0) {
      const bit = 31 - Math.clz32(b & -b);
      const p = p0 + bit;
      if (k >= n || p >= npx) throw new Error("rixel frame: mask and count disagree");
      depth[p] = h.depth16 ? dep[k] * s16 : dep[k];
      code[p] = val[k];
      k++;
      b &= b - 1;
    }
  }
  if (k !== n) throw new Error("rixel frame: mask and count disagree");
}

// Residual planes -> codes (compress.rs, `residual_planes`), in tight typed-array loops.
function undo16(planes, n, order, out) {
  const p0 = planes.subarray(0, n), p1 = planes.subarray(n, 2 * n);
  let c1 = 0, c2 = 0;
  for (let k = 0; k < n; k++) {
    const z = p0[k] | (p1[k] << 8);
    const pred = order === 2 && k >= 2 ? (c1 << 1) - c2 : c1;
    const c = (pred + ((z >>> 1) ^ -(z & 1))) & 0xffff;
    out[k] = c;
    c2 = c1;
    c1 = c;
  }
}
function undo32(planes, n, order, out) {
  const p0 = planes.subarray(0, n), p1 = planes.subarray(n, 2 * n);
  const p2 = planes.subarray(2 * n, 3 * n), p3 = planes.subarray(3 * n, 4 * n);
  let c1 = 0, c2 = 0;
  for (let k = 0; k < n; k++) {
    const z = (p0[k] | (p1[k] << 8) | (p2[k] << 16) | (p3[k] << 24)) >>> 0;
    const pred = order === 2 && k >= 2 ? (c1 << 1) - c2 : c1;
    const c = (pred + ((z >>> 1) ^ -(z & 1))) >>> 0;
    out[k] = c;
    c2 = c1;
    c1 = c;
  }
}

const scratch = { n: 0, d16: null, d32: null, df: null, v: null };
function scratchFor(n) {
  if (scratch.n < n) {
    scratch.n = n;
    scratch.d16 = new Uint16Array(n);
    scratch.d32 = new Uint32Array(n);
    scratch.df = new Float32Array(n);
    scratch.v = new Uint16Array(n);
  }
  return scratch;
}

// Compressed: inflate (native), undo the residual planes into compacted codes, then copy
// each visible run into place.
async function decodeCompressed(bytes, h, out) {
  if (bytes.byteLength < HEADER_BYTES + 12) throw new Error("rixel frame: truncated prefix");
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dord = bytes[160], vord = bytes[161];
  const r = dv.getUint32(164, true), l = dv.getUint32(168, true);
  const n = h.visible, npx = h.width * h.height, db = h.depth16 ? 2 : 4;
  if (l !== r + n * (db + 2) || r === 0 || r > 10 * (npx + 1)) throw new Error("rixel frame: bad compressed lengths");
  const body = await inflateRaw(bytes.subarray(HEADER_BYTES + 12), l);
  const s = scratchFor(n);
  let dsrc;
  if (db === 2) {
    undo16(body.subarray(r, r + 2 * n), n, dord, s.d16);
    const f = s.df, c = s.d16, k16 = 1 / 65535;
    for (let k = 0; k < n; k++) f[k] = c[k] * k16;
    dsrc = new Uint32Array(f.buffer, 0, n);
  } else {
    undo32(body.subarray(r, r + 4 * n), n, dord, s.d32);
    dsrc = s.d32;
  }
  undo16(body.subarray(r + n * db, r + n * (db + 2)), n, vord, s.v);
  const { depth, code } = out;
  const bits = new Uint32Array(depth.buffer, depth.byteOffset, npx);
  const emptyBits = new Uint32Array(new Float32Array([EMPTY_DEPTH]).buffer)[0];
  let pos = 0, p = 0, vis = false, k = 0;
  while (pos < r) {
    let run = 0, shift = 0, byte;
    do {
      byte = body[pos++];
      run += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80 && pos < r);
    if (run > npx - p) throw new Error("rixel frame: runs exceed the frame");
    if (vis) {
      if (k + run > n) throw new Error("rixel frame: runs exceed the visible count");
      bits.set(dsrc.subarray(k, k + run), p);
      code.set(s.v.subarray(k, k + run), p);
      k += run;
    } else {
      bits.fill(emptyBits, p, p + run);
      code.fill(NO_VALUE, p, p + run);
    }
    p += run;
    vis = !vis;
  }
  if (p !== npx || k !== n) throw new Error("rixel frame: runs do not cover the frame");
}

/// Decodes a frame (Uint8Array). `reuse` may pass the previous result to reuse its arrays.
export async function decodeFrame(bytes, reuse) {
  const header = parseHeader(bytes);
  const out = allocate(header, reuse);
  if (header.compressed) await decodeCompressed(bytes, header, out);
  else decodePlain(bytes, header, out);
  return { header, depth: out.depth, code: out.code };
}

/// The physical value of a code, or NaN for "no value".
export function codeValue(h, c) {
  if (c === NO_VALUE) return NaN;
  return h.valueMin + (c * (h.valueMax - h.valueMin)) / VALUE_QMAX;
}

// ---- matrices (column-major, as in the frame)

export function mul4(a, b) {
  const m = new Float32Array(16);
  for (let c = 0; c < 4; c++)
    for (let r = 0; r < 4; r++) {
      let s = 0;
      for (let k = 0; k < 4; k++) s += a[k * 4 + r] * b[c * 4 + k];
      m[c * 4 + r] = s;
    }
  return m;
}

export function invert4(m) {
  // Gauss-Jordan in double precision
  const a = [];
  for (let r = 0; r < 4; r++) {
    a.push([m[r], m[4 + r], m[8 + r], m[12 + r], r === 0 ? 1 : 0, r === 1 ? 1 : 0, r === 2 ? 1 : 0, r === 3 ? 1 : 0]);
  }
  for (let c = 0; c < 4; c++) {
    let piv = c;
    for (let r = c + 1; r < 4; r++) if (Math.abs(a[r][c]) > Math.abs(a[piv][c])) piv = r;
    if (Math.abs(a[piv][c]) < 1e-300) return null;
    [a[c], a[piv]] = [a[piv], a[c]];
    const p = a[c][c];
    for (let k = 0; k < 8; k++) a[c][k] /= p;
    for (let r = 0; r < 4; r++) {
      if (r === c) continue;
      const f = a[r][c];
      if (f !== 0) for (let k = 0; k < 8; k++) a[r][k] -= f * a[c][k];
    }
  }
  const out = new Float32Array(16);
  for (let r = 0; r < 4; r++) for (let c = 0; c < 4; c++) out[c * 4 + r] = a[r][4 + c];
  return out;
}

/// Eqs. 6.5-6.6: world position of pixel (x, y) with window depth d.
export function unproject(invPV, x, y, w, h, d) {
  const p = [(2 * x + 1) / w - 1, (2 * y + 1) / h - 1, 2 * d - 1, 1];
  const q = [0, 0, 0, 0];
  for (let r = 0; r < 4; r++) for (let k = 0; k < 4; k++) q[r] += invPV[k * 4 + r] * p[k];
  return [q[0] / q[3], q[1] / q[3], q[2] / q[3]];
}
