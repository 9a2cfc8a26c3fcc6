// The Tessera streaming protocol in the browser (see tessera_stream.proto, served at
// /tessera_stream.proto): a small protobuf reader for the header of server messages, zero-copy
// typed-array views of the payload, and the encoder of the two client messages.
//
// Server message = [u32 LE header length H][H bytes protobuf ServerMessage][zero padding]
// [arrays at the absolute, 8-byte aligned offsets named by the header]. Decoding a frame is
// reading a header of a few dozen bytes and making a Float32Array view: no per-value work
// (dissertation Table 6.1 measured 86.5 ms per 1024^2 field for packed repeated floats).

export const ENCODING_F32 = 0;
export const ENCODING_F16 = 1;

const utf8 = new TextDecoder();

class Reader {
  constructor(buffer, pos, end) {
    this.view = new DataView(buffer);
    this.bytes = new Uint8Array(buffer);
    this.pos = pos;
    this.end = end;
  }
  varint() {
    // Values up to 2^53 are exact (frame ids, counts, offsets are far below).
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new Error('truncated varint');
      const b = this.bytes[this.pos++];
      result += (b & 0x7f) * mul;
      if (b < 0x80) return result;
      mul *= 128;
    }
    throw new Error('varint longer than 10 bytes');
  }
  float() {
    this.need(4);
    const v = this.view.getFloat32(this.pos, true);
    this.pos += 4;
    return v;
  }
  double() {
    this.need(8);
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return v;
  }
  need(n) {
    if (this.pos + n > this.end) throw new Error('truncated message');
  }
  lengthDelimited() {
    const n = this.varint();
    this.need(n);
    const start = this.pos;
    this.pos += n;
    return [start, start + n];
  }
  string() {
    const [s, e] = this.lengthDelimited();
    return utf8.decode(this.bytes.subarray(s, e));
  }
  skip(wireType) {
    switch (wireType) {
      case 0: this.varint(); break;
      case 1: this.need(8); this.pos += 8; break;
      case 2: this.lengthDelimited(); break;
      case 5: this.need(4); this.pos += 4; break;
      default: throw new Error(`unsupported wire type ${wireType}`);
    }
  }
  // Calls onField(fieldNumber, wireType) for each field up to `end`; it returns false for
  // fields it did not read (they are skipped).
  fields(end, onField) {
    const outer = this.end;
    this.end = end;
    while (this.pos < end) {
      const key = this.varint();
      const field = Math.floor(key / 8);
      const wt = key & 7;
      if (!onField(field, wt)) this.skip(wt);
    }
    this.end = outer;
  }
  message(decode) {
    const [s, e] = this.lengthDelimited();
    this.pos = s;
    const m = decode(this, e);
    this.pos = e;
    return m;
  }
  // repeated uint32, packed (proto3 default) or not
  uint32s(wt, out) {
    if (wt === 2) {
      const [s, e] = this.lengthDelimited();
      this.pos = s;
      while (this.pos < e) out.push(this.varint());
      this.pos = e;
    } else out.push(this.varint());
  }
  doubles(wt, out) {
    if (wt === 2) {
      const [s, e] = this.lengthDelimited();
      this.pos = s;
      while (this.pos < e) out.push(this.double());
      this.pos = e;
    } else out.push(this.double());
  }
}

function decodeHello(r, end) {
  const m = { server: '', protocolVersion: 0, simulation: '', grid: null, fields: [],
    maxOutstanding: 0, maxClientMessageBytes: 0, maxExpressionBytes: 0, gpu: false };
  r.fields(end, (f, wt) => {
    switch (f) {
      case 1: m.server = r.string(); return true;
      case 2: m.protocolVersion = r.varint(); return true;
      case 3: m.simulation = r.string(); return true;
      case 4: m.grid = r.message(decodeGrid); return true;
      case 5: m.fields.push(r.message(decodeFieldInfo)); return true;
      case 6: m.maxOutstanding = r.varint(); return true;
      case 7: m.maxClientMessageBytes = r.varint(); return true;
      case 8: m.maxExpressionBytes = r.varint(); return true;
      case 9: m.gpu = r.varint() !== 0; return true;
      case 10: m.scene3d = r.message(decodeScene3D); return true;
      default: return false;
    }
  });
  return m;
}

function decodeScene3D(r, end) {
  const m = { center: [], radius: 0 };
  r.fields(end, (f, wt) => {
    switch (f) {
      case 1: r.doubles(wt, m.center); return true;
      case 2: m.radius = r.double(); return true;
      default: return false;
    }
  });
  return m;
}

// The 3D view's frame (RixelFrame): `data` is a Uint8Array view of the rixel frame inside
// the message (docs/rixel-frame.md; decoded by rixel.js).
function decodeRixelFrame(r, end) {
  const m = { offset: 0, length: 0, name: '', derived: false, cameraId: 0, visible: 0,
    compressed: false, data: null };
  r.fields(end, (f) => {
    switch (f) {
      case 1: m.offset = r.varint(); return true;
      case 2: m.length = r.varint(); return true;
      case 3: m.name = r.string(); return true;
      case 4: m.derived = r.varint() !== 0; return true;
      case 5: m.cameraId = r.varint(); return true;
      case 6: m.visible = r.varint(); return true;
      case 7: m.compressed = r.varint() !== 0; return true;
      default: return false;
    }
  });
  if (m.offset % 8 !== 0 || m.offset < end || m.offset + m.length > r.bytes.byteLength) {
    throw new Error(`rixel frame at offset ${m.offset} (${m.length} bytes) is outside the message`);
  }
  m.data = r.bytes.subarray(m.offset, m.offset + m.length);
  return m;
}

function decodeGrid(r, end) {
  const m = { dims: [], spacing: 0, origin: [] };
  r.fields(end, (f, wt) => {
    switch (f) {
      case 1: r.uint32s(wt, m.dims); return true;
      case 2: m.spacing = r.double(); return true;
      case 3: r.doubles(wt, m.origin); return true;
      default: return false;
    }
  });
  return m;
}

function decodeFieldInfo(r, end) {
  const m = { name: '', unit: '' };
  r.fields(end, (f) => {
    switch (f) {
      case 1: m.name = r.string(); return true;
      case 2: m.unit = r.string(); return true;
      default: return false;
    }
  });
  return m;
}

function decodePayload(r, end) {
  const m = { offset: 0, count: 0, encoding: ENCODING_F32 };
  r.fields(end, (f) => {
    switch (f) {
      case 1: m.offset = r.varint(); return true;
      case 2: m.count = r.varint(); return true;
      case 3: m.encoding = r.varint(); return true;
      default: return false;
    }
  });
  return m;
}

function decodeFieldBlock(r, end) {
  const m = { name: '', min: 0, max: 0, values: null, derived: false };
  r.fields(end, (f) => {
    switch (f) {
      case 1: m.name = r.string(); return true;
      case 2: m.min = r.float(); return true;
      case 3: m.max = r.float(); return true;
      case 4: m.values = r.message(decodePayload); return true;
      case 5: m.derived = r.varint() !== 0; return true;
      default: return false;
    }
  });
  return m;
}

function decodeGridFrame(r, end) {
  const m = { dims: [], fields: [] };
  r.fields(end, (f, wt) => {
    switch (f) {
      case 1: r.uint32s(wt, m.dims); return true;
      case 2: m.fields.push(r.message(decodeFieldBlock)); return true;
      default: return false;
    }
  });
  return m;
}

// Decoders of the frame kinds (Frame.kind oneof): field number -> [kind name, decoder].
// A further view registers its kind here (registerFrameKind) without touching the rest.
const frameKinds = new Map([[10, ['grid', decodeGridFrame]], [11, ['rixel', decodeRixelFrame]]]);

export function registerFrameKind(fieldNumber, name, decoder) {
  frameKinds.set(fieldNumber, [name, decoder]);
}

function decodeFrame(r, end) {
  const m = { frameId: 0, time: 0, subscription: 0, kind: null, body: null };
  r.fields(end, (f) => {
    switch (f) {
      case 1: m.frameId = r.varint(); return true;
      case 2: m.time = r.double(); return true;
      case 3: m.subscription = r.varint(); return true;
      default: {
        const k = frameKinds.get(f);
        if (!k) return false;
        m.kind = k[0];
        m.body = r.message(k[1]);
        return true;
      }
    }
  });
  return m;
}

function decodeSubscribed(r, end) {
  const m = { subscription: 0, names: [], precision: 0, queryOnGpu: false };
  r.fields(end, (f) => {
    switch (f) {
      case 1: m.subscription = r.varint(); return true;
      case 2: m.names.push(r.string()); return true;
      case 3: m.precision = r.varint(); return true;
      case 4: m.queryOnGpu = r.varint() !== 0; return true;
      default: return false;
    }
  });
  return m;
}

function decodeQueryError(r, end) {
  const m = { subscription: 0, expression: '', message: '', hasSpan: false, start: 0, end: 0 };
  r.fields(end, (f) => {
    switch (f) {
      case 1: m.subscription = r.varint(); return true;
      case 2: m.expression = r.string(); return true;
      case 3: m.message = r.string(); return true;
      case 4: m.hasSpan = r.varint() !== 0; return true;
      case 5: m.start = r.varint(); return true;
      case 6: m.end = r.varint(); return true;
      default: return false;
    }
  });
  return m;
}

export const ERROR_CODES = ['unspecified', 'unknown field', 'bad request', 'limit', 'simulation'];

function decodeError(r, end) {
  const m = { code: 0, message: '', subscription: 0 };
  r.fields(end, (f) => {
    switch (f) {
      case 1: m.code = r.varint(); return true;
      case 2: m.message = r.string(); return true;
      case 3: m.subscription = r.varint(); return true;
      default: return false;
    }
  });
  return m;
}

function decodeStats(r, end) {
  const m = { stepsPerSecond: 0, stepMs: 0, buildMs: 0, steps: 0, framesSent: 0, bytesSent: 0,
    clients: 0, outstanding: 0 };
  r.fields(end, (f) => {
    switch (f) {
      case 1: m.stepsPerSecond = r.double(); return true;
      case 2: m.stepMs = r.double(); return true;
      case 3: m.buildMs = r.double(); return true;
      case 4: m.steps = r.varint(); return true;
      case 5: m.framesSent = r.varint(); return true;
      case 6: m.bytesSent = r.varint(); return true;
      case 7: m.clients = r.varint(); return true;
      case 8: m.outstanding = r.varint(); return true;
      default: return false;
    }
  });
  return m;
}

const serverKinds = [null, ['hello', decodeHello], ['frame', decodeFrame],
  ['queryError', decodeQueryError], ['error', decodeError], ['stats', decodeStats],
  ['subscribed', decodeSubscribed]];

// A typed-array view of one array of the message: Float32Array for f32, Uint16Array (binary16
// bit patterns, uploaded as HALF_FLOAT) for f16. No copy.
export function payloadView(buffer, p, headerEnd) {
  const size = p.encoding === ENCODING_F16 ? 2 : 4;
  if (p.offset % 4 !== 0 || p.offset < headerEnd || p.offset + p.count * size > buffer.byteLength) {
    throw new Error(`array at offset ${p.offset} (${p.count} values) is outside the message`);
  }
  return p.encoding === ENCODING_F16
    ? new Uint16Array(buffer, p.offset, p.count)
    : new Float32Array(buffer, p.offset, p.count);
}

// Decodes one server message (an ArrayBuffer). Returns { kind, message }; for grid frames
// every field block gets `.array`, a typed-array view into `buffer`.
export function decodeServerMessage(buffer) {
  if (buffer.byteLength < 4) throw new Error('message shorter than its header length');
  const h = new DataView(buffer).getUint32(0, true);
  if (h > buffer.byteLength - 4) throw new Error(`header length ${h} exceeds the message`);
  const r = new Reader(buffer, 4, 4 + h);
  let out = null;
  r.fields(4 + h, (f) => {
    const k = serverKinds[f];
    if (!k) return false;
    out = { kind: k[0], message: r.message(k[1]) };
    return true;
  });
  if (!out) throw new Error('empty or unknown server message');
  if (out.kind === 'frame' && out.message.kind === 'grid') {
    for (const b of out.message.body.fields) {
      if (b.values) b.array = payloadView(buffer, b.values, 4 + h);
    }
  }
  return out;
}

// ---------------------------------------------------------------------- client messages

class Writer {
  constructor() { this.bytes = []; }
  varint(v) {
    while (v >= 0x80) { this.bytes.push((v % 128) | 0x80); v = Math.floor(v / 128); }
    this.bytes.push(v);
  }
  tag(field, wt) { this.varint(field * 8 + wt); }
  string(field, s) {
    const b = new TextEncoder().encode(s);
    this.tag(field, 2); this.varint(b.length);
    for (const x of b) this.bytes.push(x);
  }
  message(field, w) {
    this.tag(field, 2); this.varint(w.bytes.length);
    for (const x of w.bytes) this.bytes.push(x);
  }
  floats(field, arr) { // packed repeated float
    const b = new Uint8Array(new Float32Array(arr).buffer);
    this.tag(field, 2); this.varint(b.length);
    for (const x of b) this.bytes.push(x);
  }
  finish() { return new Uint8Array(this.bytes); }
}

// `rixel` ({ depthBits, compress }) asks for the 3D view's frames.
export function encodeSubscribe({ fields = [], expression = '', precision = ENCODING_F32, subscription = 0, rixel = null }) {
  const s = new Writer();
  for (const f of fields) s.string(1, f);
  if (expression) s.string(2, expression);
  if (precision) { s.tag(3, 0); s.varint(precision); }
  if (subscription) { s.tag(4, 0); s.varint(subscription); }
  if (rixel) {
    const v = new Writer();
    if (rixel.depthBits) { v.tag(1, 0); v.varint(rixel.depthBits); }
    if (rixel.compress) { v.tag(2, 0); v.varint(1); }
    s.message(5, v);
  }
  const m = new Writer();
  m.message(1, s);
  return m.finish();
}

// `camera` ({ id, width, height, view, proj }; matrices column-major) for the 3D view.
export function encodeRequest(count, camera = null) {
  const q = new Writer();
  q.tag(1, 0); q.varint(count);
  if (camera) {
    const c = new Writer();
    if (camera.id) { c.tag(1, 0); c.varint(camera.id); }
    c.tag(2, 0); c.varint(camera.width);
    c.tag(3, 0); c.varint(camera.height);
    c.floats(4, camera.view);
    c.floats(5, camera.proj);
    q.message(2, c);
  }
  const m = new Writer();
  m.message(2, q);
  return m.finish();
}

// binary16 bit pattern -> number (for probing f16 fields)
export function halfToFloat(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}
