// The 2D view: a grid field drawn as an R32F texture (R16F for f16 frames) and colored in a
// fragment shader through the ramp texture, so a color-map change is one 1 KiB texture
// upload and a redraw - no server round trip (dissertation §6.3.1). Zoom (wheel, pinch), pan
// (drag) and the hover probe are local too; the probe reads the value from the frame's
// typed array, not from pixels.

import { ENCODING_F16, halfToFloat } from './protocol.js';

const VS = `#version 300 es
in vec2 a_pos;
void main() { gl_Position = vec4(a_pos, 0.0, 1.0); }`;

const FS = `#version 300 es
precision highp float;
uniform highp sampler2D u_field;
uniform sampler2D u_ramp;
uniform vec2 u_dims;     // grid cells nx, ny
uniform vec2 u_center;   // grid coordinate at the canvas centre
uniform float u_scale;   // canvas pixels per cell
uniform vec2 u_canvas;   // canvas size in pixels
uniform vec2 u_range;    // min, max of the color map
out vec4 color;
void main() {
  vec2 g = (gl_FragCoord.xy - 0.5 * u_canvas) / u_scale + u_center;
  if (g.x < 0.0 || g.y < 0.0 || g.x >= u_dims.x || g.y >= u_dims.y) {
    color = vec4(0.13, 0.13, 0.15, 1.0);
    return;
  }
  float v = texelFetch(u_field, ivec2(floor(g)), 0).r;
  if (isnan(v) || isinf(v)) { color = vec4(0.5, 0.5, 0.5, 1.0); return; }
  float t = u_range.y > u_range.x ? (v - u_range.x) / (u_range.y - u_range.x) : 0.5;
  color = texture(u_ramp, vec2(clamp(t, 0.0, 1.0) * (255.0 / 256.0) + 0.5 / 256.0, 0.5));
}`;

function compile(gl, type, src) {
  const s = gl.createShader(type);
  gl.shaderSource(s, src);
  gl.compileShader(s);
  if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
  return s;
}

export class View2D extends EventTarget {
  constructor(canvas) {
    super();
    this.canvas = canvas;
    const gl = canvas.getContext('webgl2', { antialias: false, preserveDrawingBuffer: true });
    if (!gl) throw new Error('WebGL2 is not available in this browser');
    this.gl = gl;
    const prog = gl.createProgram();
    gl.attachShader(prog, compile(gl, gl.VERTEX_SHADER, VS));
    gl.attachShader(prog, compile(gl, gl.FRAGMENT_SHADER, FS));
    gl.linkProgram(prog);
    if (!gl.getProgramParameter(prog, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(prog));
    this.prog = prog;
    this.u = {};
    for (const n of ['u_field', 'u_ramp', 'u_dims', 'u_center', 'u_scale', 'u_canvas', 'u_range']) {
      this.u[n] = gl.getUniformLocation(prog, n);
    }
    const vao = gl.createVertexArray();
    gl.bindVertexArray(vao);
    const buf = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, buf);
    gl.bufferData(gl.ARRAY_BUFFER, new Float32Array([-1, -1, 1, -1, -1, 1, 1, 1]), gl.STATIC_DRAW);
    const loc = gl.getAttribLocation(prog, 'a_pos');
    gl.enableVertexAttribArray(loc);
    gl.vertexAttribPointer(loc, 2, gl.FLOAT, false, 0, 0);
    this.fieldTex = gl.createTexture();
    this.rampTex = gl.createTexture();
    for (const t of [this.fieldTex, this.rampTex]) {
      gl.bindTexture(gl.TEXTURE_2D, t);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
    }
    gl.bindTexture(gl.TEXTURE_2D, this.rampTex);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.LINEAR);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.LINEAR);
    this.texDims = [0, 0, -1];
    this.dims = null;       // [nx, ny] of the field on screen
    this.field = null;      // { name, array, encoding, min, max, unit }
    this.range = [0, 1];
    this.center = [0, 0];
    this.scale = 1;
    this.fitted = false;
    this.dirty = true;
    this.renders = [];      // times of the last second's draws
    this.pointers = new Map();
    this.hover = null;
    this.bindInput();
    new ResizeObserver(() => { this.resize(); if (!this.userMoved) this.fit(); this.dirty = true; })
      .observe(canvas);
    const loop = () => { if (this.dirty) this.render(); requestAnimationFrame(loop); };
    requestAnimationFrame(loop);
  }

  resize() {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(c.clientWidth * dpr));
    const h = Math.max(1, Math.round(c.clientHeight * dpr));
    if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
  }

  // Fit the whole grid into the canvas.
  fit() {
    if (!this.dims) return;
    this.resize();
    const [nx, ny] = this.dims;
    this.scale = Math.min(this.canvas.width / nx, this.canvas.height / ny);
    this.center = [nx / 2, ny / 2];
    this.userMoved = false;
    this.dirty = true;
  }

  setRamp(ramp) {
    const gl = this.gl;
    gl.bindTexture(gl.TEXTURE_2D, this.rampTex);
    gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA8, 256, 1, 0, gl.RGBA, gl.UNSIGNED_BYTE, ramp.texels(256));
    this.dirty = true;
  }

  setRange(min, max) {
    this.range = [min, max];
    this.dirty = true;
  }

  // Show one field of a grid frame: dims [nx, ny, nz] (the slice k = 0), block with `.array`.
  setField(dims, block, unit) {
    const gl = this.gl;
    const [nx, ny] = dims;
    const enc = block.values ? block.values.encoding : 0;
    const first = !this.dims || this.dims[0] !== nx || this.dims[1] !== ny;
    this.dims = [nx, ny];
    this.field = { name: block.name, array: block.array, encoding: enc, min: block.min, max: block.max, unit };
    gl.bindTexture(gl.TEXTURE_2D, this.fieldTex);
    gl.pixelStorei(gl.UNPACK_ALIGNMENT, enc === ENCODING_F16 ? 2 : 4);
    const data = block.array.subarray(0, nx * ny);
    const [tw, th, te] = this.texDims;
    if (tw === nx && th === ny && te === enc) {
      gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, nx, ny, gl.RED,
        enc === ENCODING_F16 ? gl.HALF_FLOAT : gl.FLOAT, data);
    } else {
      gl.texImage2D(gl.TEXTURE_2D, 0, enc === ENCODING_F16 ? gl.R16F : gl.R32F, nx, ny, 0, gl.RED,
        enc === ENCODING_F16 ? gl.HALF_FLOAT : gl.FLOAT, data);
      this.texDims = [nx, ny, enc];
    }
    if (first) this.fit();
    this.dirty = true;
    if (this.hover) this.probeAt(this.hover[0], this.hover[1]);
  }

  render() {
    const gl = this.gl;
    this.resize();
    gl.viewport(0, 0, this.canvas.width, this.canvas.height);
    gl.clearColor(0.13, 0.13, 0.15, 1);
    gl.clear(gl.COLOR_BUFFER_BIT);
    if (this.dims) {
      gl.useProgram(this.prog);
      gl.activeTexture(gl.TEXTURE0);
      gl.bindTexture(gl.TEXTURE_2D, this.fieldTex);
      gl.uniform1i(this.u.u_field, 0);
      gl.activeTexture(gl.TEXTURE1);
      gl.bindTexture(gl.TEXTURE_2D, this.rampTex);
      gl.uniform1i(this.u.u_ramp, 1);
      gl.uniform2f(this.u.u_dims, this.dims[0], this.dims[1]);
      gl.uniform2f(this.u.u_center, this.center[0], this.center[1]);
      gl.uniform1f(this.u.u_scale, this.scale);
      gl.uniform2f(this.u.u_canvas, this.canvas.width, this.canvas.height);
      gl.uniform2f(this.u.u_range, this.range[0], this.range[1]);
      gl.drawArrays(gl.TRIANGLE_STRIP, 0, 4);
    }
    this.dirty = false;
    const now = performance.now();
    this.renders.push(now);
    while (this.renders.length && now - this.renders[0] > 1000) this.renders.shift();
  }

  // draws per second over the last second
  fps() {
    const now = performance.now();
    while (this.renders.length && now - this.renders[0] > 1000) this.renders.shift();
    return this.renders.length;
  }

  // RGBA of canvas pixel (x, y), CSS pixels from the top left (renders first).
  readPixel(x, y) {
    this.render();
    const dpr = window.devicePixelRatio || 1;
    const px = Math.floor(x * dpr);
    const py = this.canvas.height - 1 - Math.floor(y * dpr);
    const out = new Uint8Array(4);
    this.gl.readPixels(px, py, 1, 1, this.gl.RGBA, this.gl.UNSIGNED_BYTE, out);
    return Array.from(out);
  }

  // The grid cell under CSS pixel (x, y) of the canvas, or null.
  cellAt(x, y) {
    if (!this.dims) return null;
    const dpr = window.devicePixelRatio || 1;
    const fx = x * dpr + 0.5;
    const fy = this.canvas.height - (y * dpr + 0.5);
    const gx = (fx - 0.5 * this.canvas.width) / this.scale + this.center[0];
    const gy = (fy - 0.5 * this.canvas.height) / this.scale + this.center[1];
    const i = Math.floor(gx);
    const j = Math.floor(gy);
    if (i < 0 || j < 0 || i >= this.dims[0] || j >= this.dims[1]) return null;
    return [i, j];
  }

  valueAt(i, j) {
    const f = this.field;
    const raw = f.array[i + this.dims[0] * j];
    return f.encoding === ENCODING_F16 ? halfToFloat(raw) : raw;
  }

  probeAt(x, y) {
    this.hover = [x, y];
    const c = this.cellAt(x, y);
    const detail = c && this.field
      ? { i: c[0], j: c[1], value: this.valueAt(c[0], c[1]), name: this.field.name, unit: this.field.unit }
      : null;
    this.dispatchEvent(new CustomEvent('probe', { detail }));
  }

  bindInput() {
    const c = this.canvas;
    c.style.touchAction = 'none';
    const local = (e) => {
      const r = c.getBoundingClientRect();
      return [e.clientX - r.left, e.clientY - r.top];
    };
    c.addEventListener('wheel', (e) => {
      e.preventDefault();
      const [x, y] = local(e);
      this.zoomAbout(x, y, Math.exp(-e.deltaY * 0.0015));
    }, { passive: false });
    c.addEventListener('pointerdown', (e) => {
      c.setPointerCapture(e.pointerId);
      this.pointers.set(e.pointerId, local(e));
    });
    c.addEventListener('pointermove', (e) => {
      const p = local(e);
      const prev = this.pointers.get(e.pointerId);
      if (prev && this.pointers.size === 1) {
        this.panBy(p[0] - prev[0], p[1] - prev[1]);
      } else if (prev && this.pointers.size === 2) {
        const other = [...this.pointers].find(([id]) => id !== e.pointerId)[1];
        const d0 = Math.hypot(prev[0] - other[0], prev[1] - other[1]);
        const d1 = Math.hypot(p[0] - other[0], p[1] - other[1]);
        if (d0 > 0) this.zoomAbout((p[0] + other[0]) / 2, (p[1] + other[1]) / 2, d1 / d0);
      }
      if (prev) this.pointers.set(e.pointerId, p);
      this.probeAt(p[0], p[1]);
    });
    const up = (e) => this.pointers.delete(e.pointerId);
    c.addEventListener('pointerup', up);
    c.addEventListener('pointercancel', up);
    c.addEventListener('pointerleave', () => {
      this.hover = null;
      this.dispatchEvent(new CustomEvent('probe', { detail: null }));
    });
    c.addEventListener('dblclick', () => this.fit());
  }

  panBy(dx, dy) {
    const dpr = window.devicePixelRatio || 1;
    this.center[0] -= dx * dpr / this.scale;
    this.center[1] += dy * dpr / this.scale;
    this.userMoved = true;
    this.dirty = true;
  }

  zoomAbout(x, y, factor) {
    if (!this.dims) return;
    const dpr = window.devicePixelRatio || 1;
    const fx = x * dpr - 0.5 * this.canvas.width;
    const fy = (this.canvas.height - y * dpr) - 0.5 * this.canvas.height;
    const gx = fx / this.scale + this.center[0];
    const gy = fy / this.scale + this.center[1];
    this.scale = Math.min(512, Math.max(0.01, this.scale * factor));
    this.center = [gx - fx / this.scale, gy - fy / this.scale];
    this.userMoved = true;
    this.dirty = true;
  }
}
