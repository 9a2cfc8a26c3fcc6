// The WebSocket connection with frame-request flow control (dissertation §6.3.3): after the
// first subscription the client asks for N frames (N = 2: double buffering) and asks for one
// more whenever a frame arrives, so N requests stay outstanding and the server never sends
// more than the client can take.

import { decodeServerMessage, encodeRequest, encodeSubscribe } from './protocol.js';

export class Connection extends EventTarget {
  constructor(url, { outstanding = 2 } = {}) {
    super();
    this.url = url;
    this.outstanding = outstanding;
    this.hello = null;
    this.paused = false;
    this.subscription = 0;
    this.requested = 0;       // requests sent and not yet answered by a frame
    this.requestTimes = [];   // send times of outstanding requests (FIFO), for latency
    this.messagesSent = 0;
    this.window = [];         // [time, bytes, latency, decodeMs] of frames in the last second
    this.lastDecodeMs = 0;
    this.started = false;
    this.held = false;        // the 3D view is being dragged: no requests (reprojection only)
    this.camera = null;       // () => the 3D camera sent with every frame request, or null
  }

  open() {
    const ws = new WebSocket(this.url);
    ws.binaryType = 'arraybuffer';
    ws.onmessage = (e) => this.onMessage(e.data);
    ws.onclose = (e) => this.emit('close', { code: e.code, reason: e.reason });
    ws.onerror = () => this.emit('close', { code: 0, reason: 'connection failed' });
    this.ws = ws;
  }

  emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  send(bytes) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(bytes);
      this.messagesSent++;
    }
  }

  subscribe({ fields = [], expression = '', precision = 0, rixel = null }) {
    this.subscription++;
    this.send(encodeSubscribe({ fields, expression, precision, subscription: this.subscription, rixel }));
    return this.subscription;
  }

  request(n) {
    if (n <= 0) return;
    const now = performance.now();
    for (let i = 0; i < n; i++) this.requestTimes.push(now);
    this.requested += n;
    this.send(encodeRequest(n, this.camera ? this.camera() : null));
  }

  // Keep `outstanding` requests in flight (unless paused, or held while the 3D view is dragged).
  topUp() {
    if (!this.paused && this.started && !this.held) this.request(this.outstanding - this.requested);
  }

  // The 3D camera came to rest: send it with the requests that are missing (possibly none),
  // so the next frame is rendered for it.
  sendCamera() {
    if (!this.started || !this.camera) return;
    const n = this.paused ? 0 : Math.max(0, this.outstanding - this.requested);
    const now = performance.now();
    for (let i = 0; i < n; i++) this.requestTimes.push(now);
    this.requested += n;
    this.send(encodeRequest(n, this.camera()));
  }

  setPaused(p) {
    this.paused = p;
    this.topUp();
  }

  setOutstanding(n) {
    this.outstanding = n;
    this.topUp();
  }

  onMessage(buffer) {
    const t0 = performance.now();
    let m;
    try {
      m = decodeServerMessage(buffer);
    } catch (err) {
      this.emit('error', { code: 2, message: `undecodable message from the server: ${err.message}` });
      return;
    }
    const decodeMs = performance.now() - t0;
    switch (m.kind) {
      case 'hello':
        this.hello = m.message;
        this.emit('hello', m.message);
        break;
      case 'frame': {
        this.requested = Math.max(0, this.requested - 1);
        const sentAt = this.requestTimes.shift();
        const latency = sentAt === undefined ? 0 : t0 - sentAt;
        this.lastDecodeMs = decodeMs;
        this.window.push([t0, buffer.byteLength, latency, decodeMs]);
        this.topUp();
        m.message.decodeMs = decodeMs;
        m.message.bytes = buffer.byteLength;
        if (m.message.subscription === this.subscription) this.emit('frame', m.message);
        break;
      }
      case 'subscribed':
        if (!this.started) {
          this.started = true;
          this.topUp();
        }
        this.emit('subscribed', m.message);
        break;
      default:
        this.emit(m.kind, m.message);
    }
  }

  // frames/s, MB/s, mean latency (ms) and decode time (ms) over the last second
  rates() {
    const now = performance.now();
    while (this.window.length && now - this.window[0][0] > 1000) this.window.shift();
    const w = this.window;
    if (!w.length) return { fps: 0, mbps: 0, latencyMs: 0, decodeMs: this.lastDecodeMs };
    return {
      fps: w.length,
      mbps: w.reduce((a, x) => a + x[1], 0) / 1e6,
      latencyMs: w.reduce((a, x) => a + x[2], 0) / w.length,
      decodeMs: w.reduce((a, x) => a + x[3], 0) / w.length,
    };
  }
}
