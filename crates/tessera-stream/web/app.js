// The Tessera streaming client: wires the connection, the color ramp and the views together.
// Frames are dispatched to a view by their frame kind (Frame.kind in the .proto): `grid`
// frames go to the 2D view, `rixel` frames to the 3D view (dissertation §6.3.5: the client
// sends its camera with every frame request, reprojects the last frame while the user
// drags, and asks for a new frame when the camera rests).

import { Connection } from './connection.js';
import { PRESETS, Ramp, RampWidget } from './colormap.js';
import { ERROR_CODES } from './protocol.js';
import { View2D } from './view2d.js';
import { View3D } from './view3d.js';
import { decodeFrame, parseHeader } from './rixel.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const token = params.get('token');
const wsUrl = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`
  + (token ? `?token=${encodeURIComponent(token)}` : '');

const state = {
  hello: null,
  frame: null,        // last frame shown
  pinned: false,      // min/max pinned by the user (else taken from each frame)
  expression: '',
  units: new Map(),
  error: null,
  view: '2d',         // '2d' or '3d' (when the simulation has a 3D view)
  rixelSeq: 0,        // last rixel frame handed to the decoder
  rixelShown: 0,      // rixel frames drawn
  cameraId: 0,        // id of the 3D camera last sent
};

const conn = new Connection(wsUrl, { outstanding: Number(params.get('outstanding') || 2) });
const ramp = new Ramp(params.get('colormap') || 'viridis');
const rampWidget = new RampWidget($('ramp'), ramp);

// Views by frame kind. Each view has setRamp(ramp), setRange(min, max) and show(frame).
const view2d = new View2D($('view2d'));
const views = new Map([
  ['grid', {
    view: view2d,
    element: $('view2d'),
    show(frame) {
      const g = frame.body;
      const b = g.fields[g.fields.length - 1]; // the subscribed field, or the derived one
      view2d.setField(g.dims, b, b.derived ? '' : state.units.get(b.name) || '');
      return b;
    },
  }],
]);

// The 3D view: the rixel frame is decoded (mask -> full-viewport depth and value codes) and
// drawn as splats reprojected for the current camera.
const view3d = new View3D($('view3d'), ramp);
views.set('rixel', {
  view: view3d,
  element: $('view3d'),
  show(frame) {
    const r = frame.body;
    const h = parseHeader(r.data);
    const seq = ++state.rixelSeq;
    const t0 = performance.now();
    decodeFrame(r.data, view3d.frame).then((f) => {
      if (seq < state.rixelShown) return; // a newer frame was drawn meanwhile
      state.rixelShown = seq;
      f.decodeMs = performance.now() - t0;
      f.bytes = r.length;
      view3d.setFrame(f);
    }).catch((err) => {
      $('error').textContent = `undecodable rixel frame: ${err.message}`;
      $('error').hidden = false;
    });
    return { min: h.valueMin, max: h.valueMax, name: r.name, derived: r.derived };
  },
});
let lastCamera = null;
conn.camera = () => {
  if (state.view !== '3d') return null;
  const c = view3d.request();
  const key = JSON.stringify([c.width, c.height, Array.from(c.view), Array.from(c.proj)]);
  if (key !== lastCamera) {
    lastCamera = key;
    state.cameraId++;
  }
  return { id: state.cameraId, ...c };
};
// No messages while the user drags: the last frame is reprojected locally.
view3d.addEventListener('camera', () => { conn.held = true; });
view3d.addEventListener('rest', () => {
  conn.held = false;
  if (state.view === '3d') conn.sendCamera();
});

function setView(mode) {
  state.view = mode === '3d' && state.hello && state.hello.scene3d ? '3d' : '2d';
  $('view').value = state.view;
  $('view2d').hidden = state.view !== '2d';
  $('view3d').hidden = state.view !== '3d';
  if (state.view === '3d') view3d.resize();
}
$('view').addEventListener('change', () => {
  setView($('view').value);
  subscribe();
});

function applyRamp() {
  for (const v of views.values()) v.view.setRamp(ramp);
}
ramp.addEventListener('change', applyRamp);
applyRamp();

// ------------------------------------------------------------------------- controls
for (const name of Object.keys(PRESETS)) {
  const o = document.createElement('option');
  o.value = o.textContent = name;
  $('preset').append(o);
}
$('preset').value = ramp.preset;
$('preset').addEventListener('change', () => ramp.setPreset($('preset').value));

function setRange(min, max) {
  $('min').value = fmt(min);
  $('max').value = fmt(max);
  for (const v of views.values()) v.view.setRange(min, max);
}
$('pin').addEventListener('change', () => {
  state.pinned = $('pin').checked;
  if (!state.pinned && state.frame) showFrame(state.frame);
});
for (const id of ['min', 'max']) {
  $(id).addEventListener('change', () => {
    state.pinned = $('pin').checked = true;
    for (const v of views.values()) v.view.setRange(Number($('min').value), Number($('max').value));
  });
}

$('field').addEventListener('change', () => subscribe());
$('precision').addEventListener('change', () => subscribe());
$('expr-form').addEventListener('submit', (e) => {
  e.preventDefault();
  state.expression = $('expr').value.trim();
  if (!state.expression) return;
  $('field').value = '__expr';
  subscribe();
});
$('pause').addEventListener('click', () => {
  conn.setPaused(!conn.paused);
  $('pause').textContent = conn.paused ? 'Resume' : 'Pause';
});
$('outstanding').value = String(conn.outstanding);
$('outstanding').addEventListener('change', () => conn.setOutstanding(Number($('outstanding').value)));

function subscribe() {
  const field = $('field').value;
  const expression = field === '__expr' ? state.expression : '';
  if (field === '__expr' && !expression) return;
  clearQueryError();
  conn.subscribe({
    fields: field === '__expr' ? [] : [field],
    expression,
    precision: Number($('precision').value),
    rixel: state.view === '3d'
      ? { depthBits: Number(params.get('depth') || 16), compress: params.get('compress') === '1' }
      : null,
  });
}

// ------------------------------------------------------------------------- messages
conn.addEventListener('hello', (e) => {
  const h = e.detail;
  state.hello = h;
  const sel = $('field');
  sel.textContent = '';
  for (const f of h.fields) {
    state.units.set(f.name, f.unit);
    const o = document.createElement('option');
    o.value = f.name;
    o.textContent = f.unit ? `${f.name} [${f.unit}]` : f.name;
    sel.append(o);
  }
  const o = document.createElement('option');
  o.value = '__expr';
  o.textContent = 'expression';
  sel.append(o);
  const want = params.get('field');
  if (want && h.fields.some((f) => f.name === want)) sel.value = want;
  const expr = params.get('expr');
  if (expr) {
    $('expr').value = state.expression = expr;
    sel.value = '__expr';
  }
  $('title').textContent = `${h.simulation} ${h.grid ? h.grid.dims.slice(0, 2).join('×') : ''}`
    + (h.gpu ? ' · GPU' : ' · CPU');
  $('view-choice').hidden = !h.scene3d;
  if (h.scene3d) view3d.camera.frame(h.scene3d.center, h.scene3d.radius);
  setView(params.get('view') || (h.scene3d ? '3d' : '2d'));
  subscribe();
});

conn.addEventListener('subscribed', (e) => {
  const s = e.detail;
  $('subscription').textContent = s.names.join(', ') + (s.queryOnGpu ? ' (query on the GPU)' : '');
});

function showFrame(frame) {
  const v = views.get(frame.kind);
  if (!v) return;
  for (const [k, w] of views) w.element.hidden = k !== frame.kind;
  const block = v.show(frame);
  if (!state.pinned && block) setRange(block.min, block.max);
  if (frame.kind === 'rixel') {
    const r = frame.body;
    $('probe').textContent = `${r.name}: ${r.visible} visible pixels, ${(r.length / 1024).toFixed(1)} KiB`
      + `${r.compressed ? ' compressed' : ''} (camera ${r.cameraId})`;
  }
}

conn.addEventListener('frame', (e) => {
  state.frame = e.detail;
  showFrame(e.detail);
  $('time').textContent = `t = ${e.detail.time.toFixed(3)} s, step ${e.detail.frameId}`;
});

function clearQueryError() {
  $('expr-error').hidden = true;
  $('expr-error-text').textContent = '';
  $('expr-error-source').textContent = '';
}

// Byte offsets (UTF-8) of the server -> indices of the JS string.
function byteToIndex(s, byte) {
  const enc = new TextEncoder();
  let bytes = 0;
  for (let i = 0; i < s.length; i++) {
    if (bytes >= byte) return i;
    bytes += enc.encode(s[i]).length;
  }
  return s.length;
}

conn.addEventListener('queryError', (e) => {
  const q = e.detail;
  const src = $('expr-error-source');
  src.textContent = '';
  if (q.hasSpan) {
    const s = byteToIndex(q.expression, q.start);
    const t = byteToIndex(q.expression, Math.max(q.end, q.start + 1));
    const bad = document.createElement('mark');
    bad.textContent = q.expression.slice(s, t) || ' ';
    src.append(q.expression.slice(0, s), bad, q.expression.slice(t));
  } else {
    src.textContent = q.expression;
  }
  $('expr-error-text').textContent = q.message;
  $('expr-error').hidden = false;
});

conn.addEventListener('error', (e) => {
  const m = e.detail;
  state.error = m;
  $('error').textContent = `${ERROR_CODES[m.code] || 'error'}: ${m.message}`;
  $('error').hidden = false;
});

conn.addEventListener('stats', (e) => { state.serverStats = e.detail; });

conn.addEventListener('close', (e) => {
  $('error').textContent = `disconnected${e.detail.reason ? `: ${e.detail.reason}` : ''}`;
  $('error').hidden = false;
});

view2d.addEventListener('probe', (e) => {
  const p = e.detail;
  $('probe').textContent = p
    ? `${p.name} = ${fmt(p.value)}${p.unit ? ' ' + p.unit : ''} at cell (${p.i}, ${p.j})`
    : '';
  $('probe').dataset.value = p ? String(p.value) : '';
});

function fmt(v) {
  if (!Number.isFinite(v)) return String(v);
  return Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(4) : v.toPrecision(6);
}

// ------------------------------------------------------------------------- status line
setInterval(() => {
  const r = conn.rates();
  const s = state.serverStats;
  $('status').textContent = `${r.fps.toFixed(0)} frames/s · ${r.mbps.toFixed(1)} MB/s · `
    + `latency ${r.latencyMs.toFixed(1)} ms · decode ${r.decodeMs.toFixed(3)} ms · `
    + (state.view === '3d'
      ? `rixel decode ${view3d.frame ? (view3d.frame.decodeMs || 0).toFixed(2) : '-'} ms`
      : `draw ${view2d.fps()} /s`)
    + (s ? ` · server ${s.stepsPerSecond.toFixed(0)} steps/s, ${s.clients} client${s.clients === 1 ? '' : 's'}` : '')
    + (conn.paused ? ' · paused' : '');
}, 500);

conn.open();

// For tests and the console.
window.tessera = { conn, ramp, rampWidget, views, view2d, view3d, state };
