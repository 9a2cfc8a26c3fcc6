// The 3D view (dissertation §6.3.5): draws the last rixel frame as screen-aligned splats.
// Each visible pixel's world position is rebuilt in the vertex shader from its depth with the
// frame's matrices (Eqs. 6.5-6.6) and projected with the client's current camera (Eq. 6.4),
// so orbiting and zooming reproject the last frame without a round trip; when the camera
// rests the app asks for a new frame rendered for it. Values are color-mapped locally with
// the ramp (the same widget as the 2D view); pixels without a value (dry terrain) are drawn
// as shaded grey. Normals come from the neighbouring pixels' rebuilt positions.

import { invert4, mul4, NO_VALUE, VALUE_QMAX } from './rixel.js';

const BACKGROUND = [0.13, 0.13, 0.15];

const VS = `#version 300 es
precision highp float;
precision highp int;
uniform highp sampler2D u_depth;   // window depth per frame pixel, > 1 where empty
uniform highp usampler2D u_code;   // value code per frame pixel
uniform ivec2 u_size;              // frame width, height
uniform mat4 u_inv;                // (P_o V_o)^-1 of the frame
uniform mat4 u_pv;                 // P_c V_c of the current camera
uniform vec2 u_canvas;             // canvas size in pixels
uniform vec3 u_light;              // world-space direction to the light
flat out uint v_code;
out float v_shade;

vec3 world(ivec2 p, float d) {
  vec4 o = vec4((2.0 * float(p.x) + 1.0) / float(u_size.x) - 1.0,
                (2.0 * float(p.y) + 1.0) / float(u_size.y) - 1.0, 2.0 * d - 1.0, 1.0);
  vec4 w = u_inv * o;
  return w.xyz / w.w;
}
vec2 screen(vec3 w) {
  vec4 c = u_pv * vec4(w, 1.0);
  return (c.xy / c.w * 0.5 + 0.5) * u_canvas;
}
void main() {
  ivec2 p = ivec2(gl_VertexID % u_size.x, gl_VertexID / u_size.x);
  float d = texelFetch(u_depth, p, 0).r;
  v_code = texelFetch(u_code, p, 0).r;
  v_shade = 1.0;
  if (!(d <= 1.0)) { gl_Position = vec4(2.0, 2.0, 2.0, 1.0); gl_PointSize = 1.0; return; }
  vec3 w = world(p, d);
  gl_Position = u_pv * vec4(w, 1.0);
  // neighbours: normal and splat size (the reprojected spacing of the frame's pixels)
  ivec2 px = ivec2(min(p.x + 1, u_size.x - 1), p.y), mx = ivec2(max(p.x - 1, 0), p.y);
  ivec2 py = ivec2(p.x, min(p.y + 1, u_size.y - 1)), my = ivec2(p.x, max(p.y - 1, 0));
  float dpx = texelFetch(u_depth, px, 0).r, dmx = texelFetch(u_depth, mx, 0).r;
  float dpy = texelFetch(u_depth, py, 0).r, dmy = texelFetch(u_depth, my, 0).r;
  ivec2 ax = dpx <= 1.0 ? px : mx; float dax = dpx <= 1.0 ? dpx : dmx;
  ivec2 ay = dpy <= 1.0 ? py : my; float day = dpy <= 1.0 ? dpy : dmy;
  float size = 1.5;
  if (dax <= 1.0 && day <= 1.0 && ax != p && ay != p) {
    vec3 wx = world(ax, dax), wy = world(ay, day);
    vec3 n = normalize(cross(wx - w, wy - w));
    v_shade = 0.35 + 0.65 * abs(dot(n, u_light));
    vec2 s0 = screen(w);
    size = max(length(screen(wx) - s0), length(screen(wy) - s0));
    size = clamp(size + 0.5, 1.0, 12.0);
  }
  gl_PointSize = size;
}`;

const FS = `#version 300 es
precision highp float;
precision highp int;
uniform sampler2D u_ramp;
uniform vec2 u_frame_range;  // the frame's value min, max
uniform vec2 u_range;        // the color map's min, max
flat in uint v_code;
in float v_shade;
out vec4 color;
void main() {
  if (v_code == ${NO_VALUE}u) { color = vec4(vec3(0.62, 0.58, 0.52) * v_shade, 1.0); return; }
  float v = u_frame_range.x + float(v_code) * (u_frame_range.y - u_frame_range.x) / ${VALUE_QMAX}.0;
  float t = u_range.y > u_range.x ? (v - u_range.x) / (u_range.y - u_range.x) : 0.5;
  vec3 c = texture(u_ramp, vec2(clamp(t, 0.0, 1.0) * (255.0 / 256.0) + 0.5 / 256.0, 0.5)).rgb;
  color = vec4(c * (0.55 + 0.45 * v_shade), 1.0);
}`;

function compile(gl, type, src) {
  const s = gl.createShader(type);
  gl.shaderSource(s, src);
  gl.compileShader(s);
  if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
  return s;
}

// ---- camera (the Rust Camera::orbit: z up, yaw around z from +x, pitch above the xy plane)

function lookAt(eye, t, up) {
  const sub = (a, b) => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
  const cross = (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
  const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
  const norm = (a) => { const l = Math.hypot(a[0], a[1], a[2]); return [a[0] / l, a[1] / l, a[2] / l]; };
  const f = norm(sub(t, eye));
  const s = norm(cross(f, up));
  const u = cross(s, f);
  return new Float32Array([s[0], u[0], -f[0], 0, s[1], u[1], -f[1], 0, s[2], u[2], -f[2], 0,
    -dot(s, eye), -dot(u, eye), dot(f, eye), 1]);
}

function perspective(fovy, aspect, near, far) {
  const f = 1 / Math.tan((fovy * Math.PI) / 360);
  const m = new Float32Array(16);
  m[0] = f / aspect; m[5] = f; m[10] = (far + near) / (near - far); m[11] = -1;
  m[14] = (2 * far * near) / (near - far);
  return m;
}

export class OrbitCamera {
  constructor(target = [0, 0, 0], radius = 1) { this.frame(target, radius); }
  // frame a bounding sphere from yaw 225, pitch 35 (as `tessera render rixels`)
  frame(target, radius) {
    this.target = target.slice();
    this.radius = radius;
    this.fovy = 40;
    this.distance = (radius / Math.sin((this.fovy * Math.PI) / 360)) * 1.05;
    this.yaw = 225;
    this.pitch = 35;
  }
  eye() {
    const y = (this.yaw * Math.PI) / 180, p = (this.pitch * Math.PI) / 180;
    const t = this.target, d = this.distance;
    return [t[0] + d * Math.cos(p) * Math.cos(y), t[1] + d * Math.cos(p) * Math.sin(y), t[2] + d * Math.sin(p)];
  }
  matrices(aspect) {
    const near = Math.max(this.distance - 1.5 * this.radius, this.distance * 0.01);
    const far = this.distance + 1.5 * this.radius;
    return { view: lookAt(this.eye(), this.target, [0, 0, 1]), proj: perspective(this.fovy, aspect, near, far) };
  }
}

export class View3D extends EventTarget {
  constructor(canvas, ramp) {
    super();
    this.canvas = canvas;
    this.ramp = ramp;
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
    for (const n of ['u_depth', 'u_code', 'u_size', 'u_inv', 'u_pv', 'u_canvas', 'u_light', 'u_ramp', 'u_frame_range', 'u_range']) {
      this.u[n] = gl.getUniformLocation(prog, n);
    }
    this.vao = gl.createVertexArray();
    this.depthTex = gl.createTexture();
    this.codeTex = gl.createTexture();
    this.rampTex = gl.createTexture();
    for (const t of [this.depthTex, this.codeTex, this.rampTex]) {
      gl.bindTexture(gl.TEXTURE_2D, t);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
    }
    gl.bindTexture(gl.TEXTURE_2D, this.rampTex);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.LINEAR);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.LINEAR);
    this.camera = new OrbitCamera();
    this.frame = null;
    this.range = null; // color-map range [min, max]; null: the frame's
    this.dragging = false;
    this.restTimer = null;
    ramp.addEventListener('change', () => { this.uploadRamp(); this.draw(); });
    this.uploadRamp();
    canvas.addEventListener('pointerdown', (e) => this.down(e));
    canvas.addEventListener('pointermove', (e) => this.move(e));
    canvas.addEventListener('pointerup', (e) => this.up(e));
    canvas.addEventListener('pointercancel', (e) => this.up(e));
    canvas.addEventListener('wheel', (e) => this.wheel(e), { passive: false });
    new ResizeObserver(() => { this.resize(); this.draw(); this.rested(); }).observe(canvas);
    this.resize();
  }
  resize() {
    if (this.canvas.clientWidth === 0 || this.canvas.clientHeight === 0) return; // hidden
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(this.canvas.clientWidth * dpr));
    const h = Math.max(1, Math.round(this.canvas.clientHeight * dpr));
    if (this.canvas.width !== w || this.canvas.height !== h) { this.canvas.width = w; this.canvas.height = h; }
  }
  // The viewport and camera the next frame should be rendered for.
  request() {
    const { width, height } = this.canvas;
    return { width, height, ...this.camera.matrices(width / height) };
  }
  // The app's view interface (as the 2D view): the ramp and the color-map range.
  setRamp(ramp) {
    this.ramp = ramp;
    this.uploadRamp();
    this.draw();
  }
  setRange(min, max) {
    this.range = [min, max];
    this.draw();
  }
  // The last frame was rendered for the current camera and viewport (no reprojection).
  frameMatchesCamera() {
    if (!this.frame) return false;
    const h = this.frame.header;
    const c = this.request();
    return h.width === c.width && h.height === c.height
      && h.view.every((v, i) => v === Math.fround(c.view[i]))
      && h.proj.every((v, i) => v === Math.fround(c.proj[i]));
  }
  uploadRamp() {
    const gl = this.gl;
    gl.bindTexture(gl.TEXTURE_2D, this.rampTex);
    gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA8, 256, 1, 0, gl.RGBA, gl.UNSIGNED_BYTE, this.ramp.texels(256));
  }
  // A decoded rixel frame (rixel.js decodeFrame).
  setFrame(f) {
    const gl = this.gl;
    const { width, height } = f.header;
    gl.pixelStorei(gl.UNPACK_ALIGNMENT, 1);
    gl.bindTexture(gl.TEXTURE_2D, this.depthTex);
    gl.texImage2D(gl.TEXTURE_2D, 0, gl.R32F, width, height, 0, gl.RED, gl.FLOAT, f.depth);
    gl.bindTexture(gl.TEXTURE_2D, this.codeTex);
    gl.texImage2D(gl.TEXTURE_2D, 0, gl.R16UI, width, height, 0, gl.RED_INTEGER, gl.UNSIGNED_SHORT, f.code);
    this.inv = invert4(mul4(f.header.proj, f.header.view));
    this.frame = f;
    this.draw();
    this.dispatchEvent(new Event('frame'));
  }
  draw() {
    const gl = this.gl;
    this.resize();
    gl.viewport(0, 0, this.canvas.width, this.canvas.height);
    gl.clearColor(BACKGROUND[0], BACKGROUND[1], BACKGROUND[2], 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
    const f = this.frame;
    if (!f || !this.inv) return;
    gl.enable(gl.DEPTH_TEST);
    gl.useProgram(this.prog);
    gl.bindVertexArray(this.vao);
    const { view, proj } = this.camera.matrices(this.canvas.width / this.canvas.height);
    const h = f.header;
    gl.activeTexture(gl.TEXTURE0); gl.bindTexture(gl.TEXTURE_2D, this.depthTex); gl.uniform1i(this.u.u_depth, 0);
    gl.activeTexture(gl.TEXTURE1); gl.bindTexture(gl.TEXTURE_2D, this.codeTex); gl.uniform1i(this.u.u_code, 1);
    gl.activeTexture(gl.TEXTURE2); gl.bindTexture(gl.TEXTURE_2D, this.rampTex); gl.uniform1i(this.u.u_ramp, 2);
    gl.uniform2i(this.u.u_size, h.width, h.height);
    gl.uniformMatrix4fv(this.u.u_inv, false, this.inv);
    gl.uniformMatrix4fv(this.u.u_pv, false, mul4(proj, view));
    gl.uniform2f(this.u.u_canvas, this.canvas.width, this.canvas.height);
    const l = this.camera.eye().map((v, i) => v - this.camera.target[i]);
    const ll = Math.hypot(l[0], l[1], l[2] + this.camera.distance) || 1;
    gl.uniform3f(this.u.u_light, l[0] / ll, l[1] / ll, (l[2] + this.camera.distance) / ll);
    gl.uniform2f(this.u.u_frame_range, h.valueMin, h.valueMax);
    const r = this.range || [h.valueMin, h.valueMax];
    gl.uniform2f(this.u.u_range, r[0], r[1]);
    gl.drawArrays(gl.POINTS, 0, h.width * h.height);
  }
  // Pixels that differ from the background (for tests).
  coveredPixels() {
    const gl = this.gl, w = this.canvas.width, h = this.canvas.height;
    const px = new Uint8Array(4 * w * h);
    gl.readPixels(0, 0, w, h, gl.RGBA, gl.UNSIGNED_BYTE, px);
    const bg = BACKGROUND.map((c) => Math.round(c * 255));
    let n = 0;
    for (let i = 0; i < px.length; i += 4) {
      if (Math.abs(px[i] - bg[0]) > 2 || Math.abs(px[i + 1] - bg[1]) > 2 || Math.abs(px[i + 2] - bg[2]) > 2) n++;
    }
    return n;
  }
  // ---- navigation: drag orbits, wheel zooms; both reproject the last frame at once
  down(e) {
    this.dragging = true;
    this.last = [e.clientX, e.clientY];
    this.canvas.setPointerCapture?.(e.pointerId);
    clearTimeout(this.restTimer);
    this.dispatchEvent(new Event('camera')); // the camera is in hand: hold frame requests
  }
  move(e) {
    if (!this.dragging) return;
    const dx = e.clientX - this.last[0], dy = e.clientY - this.last[1];
    this.last = [e.clientX, e.clientY];
    this.camera.yaw -= dx * 0.4;
    this.camera.pitch = Math.min(89, Math.max(-89, this.camera.pitch + dy * 0.4));
    this.moved();
  }
  up() {
    if (!this.dragging) return;
    this.dragging = false;
    this.moved();
  }
  wheel(e) {
    e.preventDefault();
    this.camera.distance *= Math.exp(e.deltaY * 0.001);
    this.moved();
  }
  moved() {
    this.draw();
    this.dispatchEvent(new Event('camera'));
    clearTimeout(this.restTimer);
    if (!this.dragging) this.restTimer = setTimeout(() => this.rested(), 150);
  }
  // The camera has come to rest: the app asks for a frame rendered for it.
  rested() {
    if (!this.dragging && !this.canvas.hidden) this.dispatchEvent(new Event('rest'));
  }
}
