// Small SVG helpers for the lab's charts: elements, scales and ticks.
// Hand-written; no dependencies.

const NS = 'http://www.w3.org/2000/svg';

// el creates an SVG element with attributes and optional text or children.
export function el(tag, attrs = {}, kids) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v);
  }
  if (typeof kids === 'string' || typeof kids === 'number') e.textContent = String(kids);
  else if (Array.isArray(kids)) kids.forEach((k) => k && e.appendChild(k));
  return e;
}

// clear removes every child of svg except its <desc> and <title>.
export function clear(svg) {
  for (const c of [...svg.childNodes]) {
    if (c.nodeName !== 'desc' && c.nodeName !== 'title') svg.removeChild(c);
  }
}

// linear maps [d0, d1] onto [r0, r1].
export function linear(d0, d1, r0, r1) {
  const f = (x) => r0 + ((x - d0) / (d1 - d0)) * (r1 - r0);
  f.inv = (y) => d0 + ((y - r0) / (r1 - r0)) * (d1 - d0);
  return f;
}

// log maps [d0, d1] (positive) onto [r0, r1] on a log scale.
export function log(d0, d1, r0, r1) {
  const l0 = Math.log10(d0), l1 = Math.log10(d1);
  const f = (x) => r0 + ((Math.log10(Math.max(x, 1e-300)) - l0) / (l1 - l0)) * (r1 - r0);
  f.inv = (y) => Math.pow(10, l0 + ((y - r0) / (r1 - r0)) * (l1 - l0));
  return f;
}

// logTicks returns tick values in [lo, hi]: every decade (major) and,
// when the range is short, 2 and 5 multiples (minor).
export function logTicks(lo, hi) {
  const out = [];
  const decades = Math.log10(hi / lo);
  const mult = decades <= 1.2 ? [1, 1.5, 2, 3, 5, 7] : decades <= 3.5 ? [1, 2, 5] : [1];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of mult) {
      const v = m * Math.pow(10, e);
      if (v >= lo * 0.999 && v <= hi * 1.001) out.push({ v, major: m === 1 });
    }
  }
  return out;
}

// linearTicks returns about n round tick values covering [lo, hi].
export function linearTicks(lo, hi, n = 5) {
  const span = hi - lo || 1;
  const raw = span / n;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + 1e-9; v += step) out.push(+v.toFixed(10));
  return out;
}

// fmt formats a number compactly: 3 significant digits, thousands with k.
export function fmt(x, digits = 3) {
  if (!isFinite(x)) return '–';
  const a = Math.abs(x);
  if (a >= 1e5) return (x / 1000).toFixed(0) + 'k';
  if (a >= 1000) return Math.round(x).toLocaleString('en');
  if (a >= 100) return x.toFixed(0);
  return String(+x.toPrecision(digits));
}

// tickLabel formats an axis tick.
export function tickLabel(v) {
  if (v >= 1000) return fmt(v);
  if (v >= 1) return String(+v.toPrecision(3));
  return String(+v.toPrecision(2));
}

// path returns an SVG path through points [[x, y], ...].
export function path(pts) {
  return pts.map((p, i) => (i ? 'L' : 'M') + p[0].toFixed(1) + ' ' + p[1].toFixed(1)).join(' ');
}
