// Explorer: controls -> /api/explore (the real simulator) -> verdict,
// percentile table, costs and a CCDF chart.
import { el, clear, log, logTicks, path, fmt, tickLabel } from './svg.js';

const $ = (id) => document.getElementById(id);

const WORLD_HINTS = {
  lognormal: 'Request sizes are log-normal; each copy draws its own size, so a second copy is a fresh chance.',
  noise: 'Every copy needs a fresh exponential amount of work: slowness is pure bad luck.',
  stalls: 'Servers stall 2% of the time at 1/20 speed; copies share the request\'s size.',
  bigjobs: 'Sizes are heavy-tailed (SCV 10) and shared by both copies: a big job is big everywhere.',
  mixed: 'Big jobs on stalling servers.',
};

// The page opens on the first: the library's default, what hedge.New
// runs with a zero Config.
const PRESETS = {
  default: { world: 'lognormal', sigma: 1, load: 0.5, routing: 'pool', strategy: 'default', cancel: true, tied: false, clients: 1, help: 'none', width: 1, need: 0, fancall: true },
  p95: { world: 'lognormal', sigma: 1, load: 0.5, routing: 'pool', strategy: 'percentile', p: '95', calib: 'quiet', cancel: true, tied: false, clients: 1, help: 'none', width: 1, need: 0, fancall: true },
  collapse: { world: 'lognormal', sigma: 1, load: 0.85, routing: 'pool', strategy: 'percentile', p: '95', calib: 'quiet', cancel: false, tied: false, clients: 1, help: 'none', width: 1, need: 0, fancall: true },
  stalls: { world: 'stalls', load: 0.5, routing: 'two-choice', strategy: 'percentile', p: '95', calib: 'quiet', cancel: true, tied: false, clients: 1, help: 'none', width: 1, need: 0, fancall: true },
  budget: { world: 'lognormal', sigma: 1, load: 0.85, routing: 'pool', strategy: 'budget', budget: 5, p: '95', calib: 'quiet', cancel: false, tied: false, clients: 1, help: 'none', width: 1, need: 0, fancall: true },
  manyclients: { world: 'bigjobs', load: 0.8, routing: 'two-choice', strategy: 'default', cancel: true, tied: false, clients: 10, help: 'none', width: 1, need: 0, fancall: true },
  fanout: { world: 'stalls', load: 0.3, routing: 'two-choice', strategy: 'default', cancel: true, tied: false, clients: 1, help: 'none', width: 40, need: 0, fancall: true },
};

const ICON_WARN = 'M8 1.5 15 14H1zM7.2 6v4h1.6V6zm0 5.2v1.6h1.6v-1.6z';
const ICON_INFO = 'M8 1a7 7 0 1 0 0 14A7 7 0 0 0 8 1zm-.8 3.5h1.6v1.6H7.2zm0 3h1.6v4.3H7.2z';

let form, results, timer, ctrl, seq = 0, updates = 0;

export function initExplorer() {
  form = $('ex-form');
  results = $('ex-results');
  const req = document.body.dataset.requests;
  const sel = $('ex-requests');
  if (req && ![...sel.options].some((o) => o.value === req)) {
    const o = document.createElement('option');
    o.value = req;
    o.textContent = (+req / 1000) + 'k';
    sel.prepend(o);
  }
  if (req) sel.value = req;
  setValues(fromURL());
  // A typed value (the delay) runs when it is complete: on change or
  // Enter, not at every key.
  form.addEventListener('input', (e) => { if (e.target.type !== 'text') onChange(); });
  form.addEventListener('change', onChange);
  form.addEventListener('submit', (e) => { e.preventDefault(); onChange(); });
  form.querySelectorAll('[data-preset]').forEach((b) =>
    b.addEventListener('click', () => applyPreset(PRESETS[b.dataset.preset])));
  syncVisibility();
  run();
}

function onChange() {
  syncVisibility();
  schedule(160);
}

// schedule runs the simulation after ms, replacing any run already
// scheduled. Until the last scheduled run has answered, #ex-results has
// data-pending="true": tests wait on it instead of guessing how long the
// debounce lasts.
function schedule(ms) {
  clearTimeout(timer);
  results.dataset.pending = 'true';
  timer = setTimeout(() => { timer = null; run(); }, ms);
}

function applyPreset(p) {
  setValues(p);
  syncVisibility();
  schedule(0);
}

// setValues sets the form's controls from p, by their names. A value
// that a radio group or a list does not offer is left out, so that the
// control keeps what it had; the server checks the rest and names any
// value out of range.
function setValues(p) {
  for (const [k, v] of Object.entries(p)) {
    const inputs = [...form.querySelectorAll(`[name="${k}"]`)];
    const s = String(v);
    if (inputs.length === 0) continue;
    if (inputs[0].type === 'radio') {
      if (inputs.some((i) => i.value === s)) inputs.forEach((i) => { i.checked = i.value === s; });
      continue;
    }
    for (const i of inputs) {
      if (i.type === 'checkbox') i.checked = s === 'true';
      else if (i.tagName === 'SELECT' && ![...i.options].some((o) => o.value === s)) continue;
      else i.value = s;
    }
  }
}

// SCENARIO are the parameters that the address bar keeps, by the form's
// names (those of /api/explore): read when the page opens, written on
// every change, so that a copied address opens the same scenario.
const SCENARIO = ['world', 'sigma', 'load', 'routing', 'strategy', 'delay', 'p', 'calib', 'livep', 'budget',
  'cancel', 'tied', 'clients', 'help', 'width', 'need', 'fancall', 'runs', 'requests', 'seed'];

// fromURL returns the scenario's parameters that the address gives.
function fromURL() {
  const q = new URLSearchParams(location.search);
  const p = {};
  for (const k of SCENARIO) if (q.has(k)) p[k] = q.get(k);
  return p;
}

// toURL writes the form's scenario into the address, keeping the tab.
// Requests is the size chosen, before a fan-out lowers it.
function toURL() {
  const q = new URLSearchParams();
  for (const k of SCENARIO) {
    const v = val(k);
    if (v !== undefined) q.set(k, String(v));
  }
  const url = location.pathname + '?' + q + location.hash;
  if (url !== location.pathname + location.search + location.hash) history.replaceState(null, '', url);
}

function val(name) {
  const inputs = form.querySelectorAll(`[name="${name}"]`);
  if (inputs.length === 0) return undefined;
  const i = inputs[0];
  if (i.type === 'radio') return [...inputs].find((x) => x.checked)?.value;
  if (i.type === 'checkbox') return i.checked;
  return i.value;
}

function params() {
  const runs = val('runs'), width = val('width');
  return {
    world: val('world'), sigma: val('sigma'), load: val('load'), routing: val('routing'),
    strategy: val('strategy'), delay: val('delay'), p: val('p'), calib: val('calib'),
    livep: val('livep'), budget: val('budget'), cancel: val('cancel'), tied: val('tied'),
    clients: val('clients'), help: val('help'), width, need: val('need'), fancall: val('fancall'),
    runs, requests: requestsFor(val('requests'), runs, width), seed: val('seed'),
  };
}

// requestsFor returns the requests per run to ask for: the chosen size,
// lowered for a fan-out so that its leaves fit the lab's limits, which
// count each leaf as a request (data-max-requests per run, data-max-work
// per point), but not below the lab's least, 1,000. Where the limits
// cannot be met the chosen size goes, and the server says what to lower.
function requestsFor(chosen, runs, width) {
  const d = document.body.dataset;
  const most = Math.floor(Math.min(+d.maxRequests, +d.maxWork / +runs) / +width);
  return most >= 1000 && most < +chosen ? String(most) : chosen;
}

function syncVisibility() {
  const p = params();
  $('ex-sigma-field').hidden = p.world !== 'lognormal';
  $('ex-fixed-sub').hidden = p.strategy !== 'fixed';
  $('ex-pct-sub').hidden = !(p.strategy === 'percentile' || p.strategy === 'budget');
  $('ex-budget-field').hidden = p.strategy !== 'budget';
  $('ex-live-sub').hidden = p.strategy !== 'live';
  $('ex-default-sub').hidden = p.strategy !== 'default';
  $('ex-strategy-set').disabled = !!p.tied;
  const fan = +p.width > 1;
  $('ex-fan-sub').hidden = !fan;
  // The call governs hedges: none and tied requests send none.
  $('ex-fancall').disabled = !!p.tied || p.strategy === 'none';
  $('ex-need').max = p.width;
  if (+p.need > +p.width) $('ex-need').value = p.width;
  $('ex-width-out').textContent = fan ? p.width + ' leaves' : '1: no fan-out';
  $('ex-width').setAttribute('aria-valuetext', fan ? p.width + ' leaves per request' : 'one leaf per request, no fan-out');
  $('ex-world-hint').textContent = WORLD_HINTS[p.world] || '';
  $('ex-sigma-out').textContent = 'σ ' + Number(p.sigma).toFixed(1);
  $('ex-load-out').textContent = Math.round(p.load * 100) + '%';
  $('ex-budget-out').textContent = p.budget + '%';
  $('ex-load').setAttribute('aria-valuetext', Math.round(p.load * 100) + ' percent');
  $('ex-sigma').setAttribute('aria-valuetext', 'sigma ' + Number(p.sigma).toFixed(1));
  $('ex-budget').setAttribute('aria-valuetext', p.budget + ' hedges per 100 requests');
}

async function run() {
  toURL();
  const q = new URLSearchParams(params());
  if (ctrl) ctrl.abort();
  ctrl = new AbortController();
  const my = ++seq;
  results.classList.add('busy');
  results.setAttribute('aria-busy', 'true');
  const t0 = performance.now();
  try {
    const res = await fetch('/api/explore?' + q, { signal: ctrl.signal });
    const body = await res.json();
    if (my !== seq) return;
    if (res.status === 503) {
      status(body.error + ' Retrying…', true);
      schedule(700);
      return;
    }
    if (!res.ok) {
      status(`The server refused these settings (${res.status}): ${body.error}`, true);
      return;
    }
    render(body, performance.now() - t0);
  } catch (e) {
    if (e.name === 'AbortError') return;
    if (my === seq) status('Could not reach the lab server: ' + e.message + '. Is "hedge lab" still running?', true);
  } finally {
    if (my === seq) {
      results.classList.remove('busy');
      results.setAttribute('aria-busy', 'false');
      if (!timer) results.dataset.pending = 'false';
    }
  }
}

function status(text, err) {
  const s = $('ex-status');
  s.textContent = text;
  s.classList.toggle('err', !!err);
}

function note(kind, text) {
  const icon = kind === 'warning' ? ICON_WARN : ICON_INFO;
  const div = document.createElement('div');
  div.className = 'note ' + kind;
  div.dataset.kind = kind;
  const svg = el('svg', { viewBox: '0 0 16 16', 'aria-hidden': 'true' }, [el('path', { d: icon })]);
  div.appendChild(svg);
  const p = document.createElement('p');
  const b = document.createElement('b');
  b.textContent = kind === 'warning' ? 'Warning. ' : 'Heads-up. ';
  p.append(b, text.replace(/^Measured: /, 'Measured: '));
  div.appendChild(p);
  return div;
}

function gapText(r) {
  if (!(r > 0)) return ['–', 'same'];
  if (r < 0.95) return [fmtX(1 / r) + ' better', 'better'];
  if (r > 1.05) return [fmtX(r) + ' worse', 'worse'];
  return ['≈ same', 'same'];
}

function fmtX(x) {
  if (x >= 10) return Math.round(x).toLocaleString('en') + '×';
  return x.toFixed(1) + '×';
}

function pct(x, signed = true) {
  const v = x * 100;
  const s = Math.abs(v) < 0.05 ? '0' : (Math.abs(v) >= 10 ? v.toFixed(0) : v.toFixed(1));
  if (!signed) return s + '%';
  return (v > 0.05 ? '+' : v < -0.05 ? '−' : '') + s.replace('-', '') + '%';
}

function render(r, clientMs) {
  const p = r.params;
  const hedging = p.tied || p.strategy !== 'none';
  // verdict
  const v = $('ex-verdict');
  v.className = 'card verdict fade ' + r.verdict.tone;
  v.dataset.tone = r.verdict.tone;
  $('ex-verdict-title').textContent = r.verdict.title;
  $('ex-verdict-text').textContent = r.verdict.text;
  // notes
  const w = $('ex-warnings');
  w.replaceChildren(...r.warnings.map((n) => note('warning', n.text)));
  const h = $('ex-headsup');
  h.replaceChildren(...r.heads_up.map((n) => note('headsup', n.text)));
  // table
  $('ex-caption-hedged').textContent = hedging ? `Hedged: ${r.label}.` : 'No hedging chosen.';
  for (const tr of document.querySelectorAll('#ex-table tbody tr')) {
    const k = tr.dataset.k;
    tr.classList.toggle('headline', k === r.headline);
    tr.querySelector('.b').textContent = fmt(r.baseline[k]);
    tr.querySelector('.h').textContent = hedging ? fmt(r.hedged[k]) : '–';
    const [txt, cls] = hedging ? gapText(r.gap[k]) : ['–', 'same'];
    const g = tr.querySelector('.gap');
    g.textContent = txt;
    g.className = 'gap ' + cls;
  }
  // stats
  const fan = r.baseline.fan;
  setStat('ex-attempts', hedging ? pct(r.extra_attempts) : '0%',
    fan ? 'leaves that sent a second copy' : 'requests that sent a second copy', r.extra_attempts >= 0.5);
  setStat('ex-work', hedging ? pct(r.extra_work) : '0%',
    r.extra_work < -0.0005 ? 'winning copies were shorter than the primaries they replaced' : 'server time beyond one copy each', r.extra_work >= 0.3);
  setStat('ex-util', hedging ? `${pct(r.baseline.utilisation, false)} → ${pct(r.hedged.utilisation, false)}` : pct(r.baseline.utilisation, false),
    hedging ? 'no hedging → hedged' : 'no hedging', r.hedged.utilisation >= 0.97);
  const delayText = p.tied ? 'at arrival' : hedging ? fmt(r.delay) : '–';
  setStat('ex-delayout', delayText, p.tied ? 'tied: both copies go out at once' : hedging ? r.delay_note : 'no hedging');
  $('ex-fan').hidden = !fan;
  if (fan) renderFan(r, hedging);
  drawCCDF(r, hedging);
  updates++;
  results.dataset.updates = String(updates);
  const size = `${p.runs} × ${p.requests.toLocaleString('en')} requests` + (fan ? ` of ${p.width} leaves` : '');
  status(r.cached
    ? `From the cache (${size}); server ${r.server_ms.toFixed(1)} ms, round trip ${clientMs.toFixed(0)} ms.`
    : `Simulated ${r.simulated_requests.toLocaleString('en')} requests (${size} per point, calibration and baseline included) in ${r.server_ms.toFixed(0)} ms on the server; round trip ${clientMs.toFixed(0)} ms.`);
  $('ex-status').title = r.config;
}

// renderFan fills the fan-out card: request and leaf percentiles side by
// side, copies per request, and the fan-out call's own numbers when it ran.
function renderFan(r, hedging) {
  const p = r.params, b = r.baseline.fan, h = r.hedged.fan;
  const waits = p.need > 0 && p.need < p.width ? `the first ${p.need} of its ${p.width} leaves` : `all ${p.width} of its leaves`;
  $('ex-fan-caption').textContent = `Each request waits for ${waits}; a leaf is timed from its own start. Latency in mean service times.`;
  for (const tr of document.querySelectorAll('#ex-fan-table tbody tr')) {
    const k = tr.dataset.k;
    tr.classList.toggle('headline', k === r.headline);
    tr.querySelector('.b').textContent = fmt(r.baseline[k]);
    tr.querySelector('.h').textContent = hedging ? fmt(r.hedged[k]) : '–';
    tr.querySelector('.lb').textContent = fmt(b['leaf_' + k]);
    tr.querySelector('.lh').textContent = hedging ? fmt(h['leaf_' + k]) : '–';
    for (const [col, ratio] of [['rgap', r.gap[k]], ['lgap', r.gap.leaf[k]]]) {
      const [txt, cls] = hedging ? gapText(ratio) : ['–', 'same'];
      const g = tr.querySelector('.' + col);
      g.textContent = txt;
      g.className = `${col} gap ${cls}`;
    }
  }
  setStat('ex-copies', hedging ? `${fmt(b.copies)} → ${fmt(h.copies)}` : fmt(b.copies),
    hedging ? 'no hedging → hedged; one per leaf without hedges' : 'one per leaf: nothing hedged');
  const call = h.call;
  for (const id of ['ex-fanextra', 'ex-fanrefused', 'ex-fanpeak']) $(id).hidden = !call;
  if (call) {
    setStat('ex-fanextra', fmt(call.extra));
    setStat('ex-fanrefused', fmt(call.refused));
    setStat('ex-fanpeak', String(call.peak));
  }
}

function setStat(id, value, hint, hot) {
  const s = $(id);
  s.querySelector('b').textContent = value;
  if (hint !== null && hint !== undefined) s.querySelector('.hint').textContent = hint;
  s.classList.toggle('hot', !!hot);
}

const BASE = '#b4582f', ACCENT = '#1f6f8b';
const LEVELS = [[0.5, 'p50'], [0.05, 'p95'], [0.01, 'p99'], [0.001, 'p99.9']];
const HEADLINE_P = { p99: 0.01, p999: 0.001 };

function drawCCDF(r, hedging) {
  const svg = $('ex-ccdf');
  clear(svg);
  const W = 720, H = 360, m = { l: 62, r: 58, t: 16, b: 46 };
  const curves = [{ d: r.baseline, color: BASE, dash: '7 5', name: 'No hedging' }];
  if (hedging) curves.push({ d: r.hedged, color: ACCENT, name: 'Hedged' });
  const ts = [];
  for (const c of curves) {
    c.d.ccdf.forEach((q) => ts.push(q.t));
    c.d.run_ccdfs.forEach((run) => run.forEach((q) => ts.push(q.t)));
  }
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...ts) / 1.3) * 2) / 2);
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...ts) * 1.3) * 2) / 2);
  const x = log(lo, hi, m.l, W - m.r);
  const pmin = Math.min(0.0004, ...curves.flatMap((c) => c.d.ccdf.map((q) => q.p)));
  const y = log(pmin / 1.5, 1, H - m.b, m.t);
  // grid
  for (const t of logTicks(lo, hi)) {
    svg.appendChild(el('line', { x1: x(t.v), x2: x(t.v), y1: m.t, y2: H - m.b, class: 'grid' + (t.major ? ' major' : '') }));
    svg.appendChild(el('text', { x: x(t.v), y: H - m.b + 16, 'text-anchor': 'middle' }, tickLabel(t.v)));
  }
  for (const [v, lab] of [[1, '100%'], [0.1, '10%'], [0.01, '1%'], [0.001, '0.1%'], [0.0001, '0.01%']].filter(([v]) => v >= pmin)) {
    svg.appendChild(el('line', { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v), class: 'grid major' }));
    svg.appendChild(el('text', { x: m.l - 8, y: y(v) + 4, 'text-anchor': 'end' }, lab));
  }
  for (const [v, lab] of LEVELS) {
    svg.appendChild(el('text', { x: W - m.r + 8, y: y(v) + 4, class: 'lbl' }, lab));
  }
  svg.appendChild(el('rect', { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, class: 'frame' }));
  svg.appendChild(el('text', { x: (m.l + W - m.r) / 2, y: H - 8, 'text-anchor': 'middle', class: 'axis-title' }, 'latency t, in mean service times (log scale)'));
  svg.appendChild(el('text', { x: 14, y: (m.t + H - m.b) / 2, 'text-anchor': 'middle', class: 'axis-title', transform: `rotate(-90 14 ${(m.t + H - m.b) / 2})` }, 'share of requests slower than t'));
  // runs, curves, markers
  for (const c of curves) {
    for (const run of c.d.run_ccdfs) {
      const rp = run.map((q) => [x(q.t), y(q.p)]);
      svg.appendChild(el('path', { d: path(rp), fill: 'none', stroke: c.color, 'stroke-width': 1, 'stroke-opacity': 0.35 }));
    }
  }
  const named = new Set(LEVELS.map(([v]) => v));
  for (const c of curves) {
    const pts = c.d.ccdf.map((q) => [x(q.t), y(q.p)]);
    svg.appendChild(el('path', { d: path(pts), fill: 'none', stroke: c.color, 'stroke-width': 2.6, 'stroke-dasharray': c.dash, 'stroke-linejoin': 'round', class: 'curve' }));
    c.d.ccdf.forEach((q, i) => {
      if (named.has(q.p)) svg.appendChild(el('circle', { cx: pts[i][0], cy: pts[i][1], r: 4.2, fill: '#fff', stroke: c.color, 'stroke-width': 2.2 }));
    });
  }
  // gap at the headline percentile
  if (hedging) {
    const lvl = HEADLINE_P[r.headline];
    const k = r.headline;
    const b = r.baseline[k], h = r.hedged[k];
    const ratio = h / b;
    if (ratio < 0.95 || ratio > 1.05) {
      const yy = y(lvl) - 12;
      const x1 = x(Math.min(b, h)), x2 = x(Math.max(b, h));
      const color = ratio < 1 ? '#2d7a4b' : '#b3261e';
      svg.appendChild(el('path', { d: `M${x1} ${yy + 5} V${yy} H${x2} V${yy + 5}`, fill: 'none', stroke: color, 'stroke-width': 1.5 }));
      const label = ratio < 1 ? fmtX(1 / ratio) + ' better' : fmtX(ratio) + ' worse';
      const lx = Math.min(Math.max((x1 + x2) / 2, m.l + 50), W - m.r - 50);
      svg.appendChild(el('text', { x: lx, y: yy - 5, 'text-anchor': 'middle', class: 'lbl halo ' + (ratio < 1 ? 'good' : 'bad') }, label));
    }
  }
  const desc = el('desc', {}, `CCDF of latency. No hedging: p50 ${fmt(r.baseline.p50)}, p99 ${fmt(r.baseline.p99)}, p99.9 ${fmt(r.baseline.p999)}.` +
    (hedging ? ` Hedged: p50 ${fmt(r.hedged.p50)}, p99 ${fmt(r.hedged.p99)}, p99.9 ${fmt(r.hedged.p999)}.` : ''));
  desc.id = 'ex-ccdf-desc';
  svg.querySelector('desc')?.remove();
  svg.insertBefore(desc, svg.firstChild);
}
