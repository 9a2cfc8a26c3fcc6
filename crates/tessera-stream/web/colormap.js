// Color mapping on the client (dissertation §6.3.1, Fig. 6.5: "color mapping can be modified
// interactively by clicking and dragging the color ramp widget"): presets, a ramp of control
// points, and the widget. Changing the ramp never talks to the server.

// Control points [position 0..1, r, g, b] (0..255).
export const PRESETS = {
  // viridis (matplotlib), sampled at 9 points
  viridis: [
    [0.0, 68, 1, 84], [0.125, 71, 44, 122], [0.25, 59, 81, 139], [0.375, 44, 113, 142],
    [0.5, 33, 144, 141], [0.625, 39, 173, 129], [0.75, 92, 200, 99], [0.875, 170, 220, 50],
    [1.0, 253, 231, 37],
  ],
  // Moreland's diverging cool-warm
  coolwarm: [
    [0.0, 59, 76, 192], [0.25, 124, 159, 249], [0.5, 221, 221, 221], [0.75, 244, 154, 123],
    [1.0, 180, 4, 38],
  ],
  grayscale: [[0.0, 0, 0, 0], [1.0, 255, 255, 255]],
};

export class Ramp extends EventTarget {
  constructor(preset = 'viridis') {
    super();
    this.setPreset(preset);
  }
  setPreset(name) {
    const p = PRESETS[name];
    if (!p) throw new Error(`unknown color map ${name}`);
    this.preset = name;
    this.points = p.map((q) => q.slice());
    this.changed();
  }
  changed() {
    this.points.sort((a, b) => a[0] - b[0]);
    this.dispatchEvent(new Event('change'));
  }
  // color at t in [0, 1]
  at(t) {
    const p = this.points;
    if (t <= p[0][0]) return p[0].slice(1);
    for (let i = 1; i < p.length; i++) {
      if (t <= p[i][0]) {
        const a = p[i - 1];
        const b = p[i];
        const u = b[0] > a[0] ? (t - a[0]) / (b[0] - a[0]) : 0;
        return [0, 1, 2].map((k) => a[k + 1] + (b[k + 1] - a[k + 1]) * u);
      }
    }
    return p[p.length - 1].slice(1);
  }
  // 256 RGBA texels for the shader's ramp texture
  texels(n = 256) {
    const out = new Uint8Array(4 * n);
    for (let i = 0; i < n; i++) {
      const c = this.at(i / (n - 1));
      out.set([Math.round(c[0]), Math.round(c[1]), Math.round(c[2]), 255], 4 * i);
    }
    return out;
  }
}

// The ramp widget: a gradient bar with a handle per control point. Drag a handle to move
// its point (the end points stay at 0 and 1), double-click the bar to add a point there,
// double-click a handle to remove it.
export class RampWidget {
  constructor(canvas, ramp) {
    this.canvas = canvas;
    this.ramp = ramp;
    this.drag = -1;
    ramp.addEventListener('change', () => this.draw());
    canvas.addEventListener('pointerdown', (e) => this.down(e));
    canvas.addEventListener('pointermove', (e) => this.move(e));
    canvas.addEventListener('pointerup', () => { this.drag = -1; });
    canvas.addEventListener('pointercancel', () => { this.drag = -1; });
    canvas.addEventListener('dblclick', (e) => this.dbl(e));
    new ResizeObserver(() => this.draw()).observe(canvas);
    this.draw();
  }
  pos(e) {
    const r = this.canvas.getBoundingClientRect();
    return Math.min(1, Math.max(0, (e.clientX - r.left) / Math.max(1, r.width)));
  }
  handleAt(e) {
    const r = this.canvas.getBoundingClientRect();
    const x = e.clientX - r.left;
    let best = -1;
    let dist = 10; // pixels
    this.ramp.points.forEach((p, i) => {
      const d = Math.abs(p[0] * r.width - x);
      if (d < dist) { dist = d; best = i; }
    });
    return best;
  }
  down(e) {
    this.drag = this.handleAt(e);
    if (this.drag >= 0) this.canvas.setPointerCapture(e.pointerId);
  }
  move(e) {
    const n = this.ramp.points.length;
    if (this.drag <= 0 || this.drag >= n - 1) return; // end points are fixed
    const lo = this.ramp.points[this.drag - 1][0] + 0.001;
    const hi = this.ramp.points[this.drag + 1][0] - 0.001;
    this.ramp.points[this.drag][0] = Math.min(hi, Math.max(lo, this.pos(e)));
    this.ramp.changed();
  }
  dbl(e) {
    const i = this.handleAt(e);
    const pts = this.ramp.points;
    if (i > 0 && i < pts.length - 1) {
      pts.splice(i, 1);
    } else if (i < 0) {
      const t = this.pos(e);
      pts.push([t, ...this.ramp.at(t)]);
    }
    this.ramp.changed();
  }
  draw() {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(c.clientWidth * dpr));
    const h = Math.max(1, Math.round(c.clientHeight * dpr));
    if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
    const g = c.getContext('2d');
    const bar = Math.round(h * 0.6);
    const img = g.createImageData(w, 1);
    for (let x = 0; x < w; x++) {
      const col = this.ramp.at(x / Math.max(1, w - 1));
      img.data.set([col[0], col[1], col[2], 255], 4 * x);
    }
    for (let y = 0; y < bar; y++) g.putImageData(img, 0, y);
    g.clearRect(0, bar, w, h - bar);
    for (const p of this.ramp.points) {
      const x = p[0] * (w - 1);
      g.beginPath();
      g.moveTo(x, bar);
      g.lineTo(x - 6 * dpr, h - 1);
      g.lineTo(x + 6 * dpr, h - 1);
      g.closePath();
      g.fillStyle = `rgb(${p[1]},${p[2]},${p[3]})`;
      g.fill();
      g.strokeStyle = '#eee';
      g.stroke();
    }
  }
}
