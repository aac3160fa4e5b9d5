// Study view: ratio and extra work against load, per world and strategy,
// from the results.json of "hedge study" (GET /api/study).
import { el, clear, linear, log, logTicks, linearTicks, path, fmt, tickLabel } from './svg.js';

const $ = (id) => document.getElementById(id);

// The series: which points of results.json each one draws.
const SERIES = [
  { id: 'per-load', label: 'p95 per load', strategy: 'hedge-p95-per-load', color: '#0072b2' },
  { id: 'quiet', label: 'p95 of a quiet day', strategy: 'hedge-p95-quiet', color: '#d55e00' },
  { id: 'live', label: 'live p95', strategy: 'hedge-p95-live', color: '#009e73' },
  { id: 'budget5', label: 'quiet p95, budget 5%', strategy: 'hedge-quiet-budget', budget: 0.05, color: '#a4508b' },
  { id: 'budget15', label: 'budget 15%', strategy: 'hedge-quiet-budget', budget: 0.15, color: '#a4508b', dash: true, off: true },
  { id: 'tied', label: 'tied', strategy: 'tied', cancelDelay: 0, color: '#3f9fd6' },
  { id: 'tied01', label: 'tied, cancel delay 0.1', strategy: 'tied', cancelDelay: 0.1, color: '#3f9fd6', dash: true, off: true },
  { id: 'random', label: 'p95 per load, random routing', strategy: 'hedge-p95-per-load', routing: 'random', color: '#0072b2', dash: true, off: true },
  // The library's zero Config: in results.json from studies that ran it.
  { id: 'default', label: 'library default', strategy: 'default', color: '#333333' },
];
const PCT_NAME = { p50: 'p50', p95: 'p95', p99: 'p99', p999: 'p99.9' };

let data = null;
const shown = Object.fromEntries(SERIES.map((s) => [s.id, !s.off]));

export async function initStudy() {
  const box = $('st-series');
  for (const s of SERIES) {
    const lab = document.createElement('label');
    const cb = document.createElement('input');
    cb.type = 'checkbox';
    cb.checked = shown[s.id];
    cb.dataset.series = s.id;
    cb.addEventListener('change', () => { shown[s.id] = cb.checked; draw(); });
    const sw = document.createElement('i');
    sw.style.borderTopColor = s.color;
    if (s.dash) sw.className = 'dash';
    lab.append(cb, sw, s.label);
    box.appendChild(lab);
  }
  document.querySelectorAll('input[name="st-world"]').forEach((r) => r.addEventListener('change', draw));
  $('st-pct').addEventListener('change', draw);
  try {
    const res = await fetch('/api/study');
    if (!res.ok) throw new Error((await res.json()).error);
    data = await res.json();
  } catch (e) {
    $('st-note').textContent = 'Could not load the study results: ' + e.message;
    return;
  }
  draw();
}

function world() {
  return document.querySelector('input[name="st-world"]:checked').value;
}

function pointsOf(s, w) {
  return data.filter((p) =>
    p.world === w && p.strategy === s.strategy &&
    p.routing === (s.routing || 'two-choice') &&
    !p.discipline && p.sigma === undefined && // the FCFS world, not its variants
    !p.clients && !p.fanout && !p.low_priority_copies && !p.idle_only_copies && // one client, one leaf, no server help
    (p.stall_mean === undefined || p.stall_mean === 50) &&
    (s.budget === undefined || p.budget === s.budget) &&
    (s.cancelDelay === undefined || (p.cancel_delay || 0) === s.cancelDelay),
  ).sort((a, b) => a.load - b.load);
}

function keyFor(p) {
  const k = $('st-pct').value;
  return k === 'headline' ? p.headline : k;
}

function draw() {
  if (!data) return;
  const w = world();
  const series = SERIES.map((s) => ({ ...s, pts: pointsOf(s, w) }));
  for (const s of series) {
    const cb = document.querySelector(`input[data-series="${s.id}"]`);
    cb.disabled = s.pts.length === 0;
    cb.parentElement.title = s.pts.length ? ''
      : data.some((p) => p.strategy === s.strategy) ? 'not in the study for this world'
        : 'not in these results: the study that wrote them did not run it';
  }
  const vis = series.filter((s) => shown[s.id] && s.pts.length);
  const headlineName = PCT_NAME[keyFor({ headline: w === 'stalls' || w === 'mixed' ? 'p999' : 'p99' })];
  $('st-ratio-title').textContent = `${headlineName} ratio against load: hedged over unhedged`;
  drawRatio(vis);
  drawWork(vis);
  writeNote(vis, w);
  writeTable(vis);
}

function ratioOf(p) {
  const k = keyFor(p);
  return { v: p['ratio_' + k], se: p['ratio_' + k + '_se'], k };
}

const X_TICKS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];

function frame(svg, W, H, m, x, yTicks, yFmt, yTitle) {
  for (const t of X_TICKS) {
    svg.appendChild(el('line', { x1: x(t), x2: x(t), y1: m.t, y2: H - m.b, class: 'grid' }));
    svg.appendChild(el('text', { x: x(t), y: H - m.b + 16, 'text-anchor': 'middle' }, Math.round(t * 100) + '%'));
  }
  for (const t of yTicks) {
    svg.appendChild(el('line', { x1: m.l, x2: W - m.r, y1: t.y, y2: t.y, class: 'grid' + (t.major ? ' major' : '') }));
    svg.appendChild(el('text', { x: m.l - 7, y: t.y + 4, 'text-anchor': 'end' }, yFmt(t.v)));
  }
  svg.appendChild(el('rect', { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, class: 'frame' }));
  svg.appendChild(el('text', { x: (m.l + W - m.r) / 2, y: H - 8, 'text-anchor': 'middle', class: 'axis-title' }, 'load (utilisation before hedging)'));
  svg.appendChild(el('text', { x: 13, y: (m.t + H - m.b) / 2, 'text-anchor': 'middle', class: 'axis-title', transform: `rotate(-90 13 ${(m.t + H - m.b) / 2})` }, yTitle));
}

function lines(svg, vis, x, yOf, hits) {
  for (const s of vis) {
    const pts = s.pts.map((p) => [x(p.load), yOf(p), p]).filter((q) => isFinite(q[1]));
    svg.appendChild(el('path', { d: path(pts), fill: 'none', stroke: s.color, 'stroke-width': 2.2, 'stroke-dasharray': s.dash ? '6 4' : null, 'stroke-linejoin': 'round' }));
    for (const [px, py, p] of pts) {
      svg.appendChild(el('circle', { cx: px, cy: py, r: 3.3, fill: s.dash ? '#fff' : s.color, stroke: s.color, 'stroke-width': 1.6 }));
      hits.push({ x: px, y: py, s, p });
    }
  }
}

function tooltip(svg, hits, W, describe) {
  const tip = el('g', { 'pointer-events': 'none', visibility: 'hidden' });
  const bg = el('rect', { rx: 5, class: 'tip-bg' });
  const tx = el('text', { class: 'tip-text' });
  tip.append(bg, tx);
  svg.appendChild(tip);
  svg.onpointerleave = () => tip.setAttribute('visibility', 'hidden');
  svg.onpointermove = (e) => {
    const pt = svg.createSVGPoint();
    pt.x = e.clientX; pt.y = e.clientY;
    const loc = pt.matrixTransform(svg.getScreenCTM().inverse());
    let best = null, bd = 26 * 26;
    for (const h of hits) {
      const d = (h.x - loc.x) ** 2 + (h.y - loc.y) ** 2;
      if (d < bd) { bd = d; best = h; }
    }
    if (!best) { tip.setAttribute('visibility', 'hidden'); return; }
    const lines = describe(best);
    tx.replaceChildren(...lines.map((l, i) => el('tspan', { x: 10, dy: i ? 16 : 18, 'font-weight': i ? null : 600 }, l)));
    const w = Math.max(...lines.map((l) => l.length)) * 6.4 + 20, h = lines.length * 16 + 12;
    let gx = best.x + 12, gy = best.y - h - 8;
    if (gx + w > W - 4) gx = best.x - w - 12;
    if (gy < 4) gy = best.y + 12;
    bg.setAttribute('width', w); bg.setAttribute('height', h);
    tip.setAttribute('transform', `translate(${gx} ${gy})`);
    tip.setAttribute('visibility', 'visible');
  };
}

function describe(h) {
  const p = h.p, r = ratioOf(p);
  return [
    `${h.s.label}, load ${Math.round(p.load * 100)}%`,
    `${PCT_NAME[r.k]} ratio ${fmt(r.v)} ± ${fmt(r.se || 0, 2)}`,
    `extra work ${(p.extra_work * 100).toFixed(1)}%, hedged ${(p.hedged_fraction * 100).toFixed(0)}%`,
    `utilisation ${(p.utilisation * 100).toFixed(0)}%`,
  ];
}

function drawRatio(vis) {
  const svg = $('st-ratio');
  clear(svg);
  const W = 640, H = 380, m = { l: 52, r: 16, t: 14, b: 46 };
  const x = linear(0.05, 0.98, m.l, W - m.r);
  const vals = vis.flatMap((s) => s.pts.map((p) => ratioOf(p).v)).filter((v) => v > 0);
  const lo = Math.min(0.5, ...vals) / 1.15, hi = Math.max(2, ...vals) * 1.15;
  const y = log(lo, hi, H - m.b, m.t);
  svg.appendChild(el('rect', { x: m.l, y: m.t, width: W - m.l - m.r, height: y(1) - m.t, fill: '#fcebe9', 'fill-opacity': 0.55 }));
  frame(svg, W, H, m, x, logTicks(lo, hi).map((t) => ({ ...t, y: y(t.v) })), (v) => tickLabel(v) + '×', 'ratio to no hedging (log scale)');
  svg.appendChild(el('line', { x1: m.l, x2: W - m.r, y1: y(1), y2: y(1), class: 'ref' }));
  const hits = [];
  lines(svg, vis, x, (p) => y(ratioOf(p).v), hits);
  svg.appendChild(el('text', { x: m.l + 8, y: m.t + 16, class: 'lbl halo' }, 'above 1: worse with hedging'));
  tooltip(svg, hits, W, describe);
  $('st-ratio-desc').textContent = `Ratio against load for ${vis.map((s) => s.label).join(', ')}.`;
}

function drawWork(vis) {
  const svg = $('st-work');
  clear(svg);
  const W = 500, H = 380, m = { l: 52, r: 14, t: 14, b: 46 };
  const x = linear(0.05, 0.98, m.l, W - m.r);
  const vals = vis.flatMap((s) => s.pts.map((p) => p.extra_work * 100));
  const lo = Math.min(0, ...vals), hi = Math.max(5, ...vals) * 1.1;
  const y = linear(lo, hi, H - m.b, m.t);
  frame(svg, W, H, m, x, linearTicks(lo, hi, 6).map((v) => ({ v, y: y(v), major: v === 0 })), (v) => v + '%', 'extra work, % of one copy each');
  const hits = [];
  lines(svg, vis, x, (p) => y(p.extra_work * 100), hits);
  tooltip(svg, hits, W, describe);
  $('st-work-desc').textContent = `Extra work against load for ${vis.map((s) => s.label).join(', ')}.`;
}

function writeNote(vis, w) {
  let best = null, worst = null;
  for (const s of vis) {
    for (const p of s.pts) {
      const r = ratioOf(p).v;
      if (!(r > 0)) continue;
      if (!best || r < best.r) best = { r, s, p };
      if (!worst || r > worst.r) worst = { r, s, p };
    }
  }
  const n = $('st-note');
  if (!best) { n.textContent = 'Nothing to show: tick a series.'; return; }
  const k = PCT_NAME[ratioOf(best.p).k];
  let t = `In the ${w} world the best shown point is ${best.s.label} at ${Math.round(best.p.load * 100)}% load: the ${k} is ${fmt(1 / best.r, 2)}× better than without hedging.`;
  if (worst.r > 1.05) {
    t += ` The worst is ${worst.s.label} at ${Math.round(worst.p.load * 100)}%: ${fmt(worst.r, 3)}× worse, with ${(worst.p.hedged_fraction * 100).toFixed(0)}% of requests hedged and the servers ${(worst.p.utilisation * 100).toFixed(0)}% busy.`;
  }
  n.textContent = t;
}

function writeTable(vis) {
  const t = $('st-table');
  const cap = t.querySelector('caption');
  t.replaceChildren(cap);
  const head = document.createElement('thead');
  head.innerHTML = '<tr><th scope="col">Strategy</th><th scope="col">Load</th><th scope="col">Percentile</th><th scope="col">Unhedged</th><th scope="col">Hedged</th><th scope="col">Ratio</th><th scope="col">± SE</th><th scope="col">Extra work</th><th scope="col">Hedged</th><th scope="col">Utilisation</th></tr>';
  t.appendChild(head);
  const body = document.createElement('tbody');
  for (const s of vis) {
    for (const p of s.pts) {
      const r = ratioOf(p);
      const tr = document.createElement('tr');
      const cells = [s.label, Math.round(p.load * 100) + '%', PCT_NAME[r.k], fmt(p[r.k] / r.v), fmt(p[r.k]), fmt(r.v), fmt(r.se || 0, 2),
        (p.extra_work * 100).toFixed(1) + '%', (p.hedged_fraction * 100).toFixed(1) + '%', (p.utilisation * 100).toFixed(1) + '%'];
      cells.forEach((c, i) => {
        const td = document.createElement(i === 0 ? 'th' : 'td');
        if (i === 0) td.scope = 'row';
        td.textContent = c;
        tr.appendChild(td);
      });
      body.appendChild(tr);
    }
  }
  t.appendChild(body);
}
