// Drill: the twenty-request replay. The server computes the run (package
// drill, the same code as "hedge drill"); this file only draws and plays it.
import { el, clear, linear, linearTicks } from './svg.js';

const $ = (id) => document.getElementById(id);
const RATE = 100; // drill milliseconds per second of playback at 1x
const C = { primary: '#5b6b7a', backup: '#1f6f8b', ghost: '#dfdbd1', win: '#2d7a4b', cancel: '#b3261e', commit: '#6a4bb0', dup: '#b3261e', refuse: '#b07a00' };
const PRESETS = {
  50: { hedge: true, delay: 50, budget: 100, cancel: true, op: 'read' },
  130: { hedge: true, delay: 130, budget: 100, cancel: true, op: 'read' },
  budget: { hedge: true, delay: 50, budget: 10, cancel: true, op: 'read' },
  write: { hedge: true, delay: 130, budget: 100, cancel: true, op: 'write' },
};

let form, res = null, t = 0, cursor = 0, playing = false, last = 0, timer, ctrl, items = [];

export function initDrill() {
  form = $('dr-form');
  form.addEventListener('input', onChange);
  form.addEventListener('change', onChange);
  form.addEventListener('submit', (e) => e.preventDefault());
  form.querySelectorAll('[data-drill]').forEach((b) => b.addEventListener('click', () => applyPreset(PRESETS[b.dataset.drill])));
  $('dr-play').addEventListener('click', () => (playing ? pause() : play()));
  $('dr-next').addEventListener('click', next);
  $('dr-restart').addEventListener('click', restart);
  $('dr-time').addEventListener('input', (e) => { pause(); setTime(+e.target.value); });
  $('dr-legend').replaceChildren(...legend());
  sync();
  load();
}

function legend() {
  const mk = (cls, color, text) => {
    const s = document.createElement('span');
    const i = document.createElement('i');
    i.style.borderTopColor = color;
    i.style.borderTopWidth = '6px';
    if (cls) i.className = cls;
    s.append(i, text);
    return s;
  };
  return [mk('', C.primary, 'primary'), mk('', C.backup, 'backup'), mk('', C.ghost, 'still to play'),
    mark('●', C.win, 'answer'), mark('×', C.cancel, 'cancelled'), mark('◆', C.commit, 'commit')];
}

function mark(sym, color, text) {
  const s = document.createElement('span');
  const b = document.createElement('b');
  b.textContent = sym;
  b.style.color = color;
  s.append(b, text);
  return s;
}

function val(name) {
  const inputs = form.querySelectorAll(`[name="${name}"]`);
  const i = inputs[0];
  if (i.type === 'radio') return [...inputs].find((x) => x.checked).value;
  if (i.type === 'checkbox') return i.checked;
  return i.value;
}

function params() {
  return { hedge: val('hedge'), delay: val('delay'), budget: val('budget'), cancel: val('cancel'), op: val('op') };
}

function sync() {
  const p = params();
  $('dr-delay-out').textContent = p.delay + ' ms';
  $('dr-budget-out').textContent = p.budget + '%';
  $('dr-delay').setAttribute('aria-valuetext', p.delay + ' milliseconds');
  $('dr-budget').setAttribute('aria-valuetext', p.budget + ' percent');
  for (const id of ['dr-delay', 'dr-budget', 'dr-cancel']) $(id).disabled = !p.hedge;
}

function onChange() {
  sync();
  clearTimeout(timer);
  timer = setTimeout(load, 60);
}

function applyPreset(p) {
  $('dr-hedge').checked = p.hedge;
  $('dr-delay').value = p.delay;
  $('dr-budget').value = p.budget;
  $('dr-cancel').checked = p.cancel;
  form.querySelectorAll('[name="op"]').forEach((r) => { r.checked = r.value === p.op; });
  sync();
  load();
}

async function load() {
  if (ctrl) ctrl.abort();
  ctrl = new AbortController();
  try {
    const r = await fetch('/api/drill?' + new URLSearchParams(params()), { signal: ctrl.signal });
    const body = await r.json();
    if (!r.ok) {
      $('dr-summary').textContent = 'The server refused these settings: ' + body.error;
      return;
    }
    res = body;
  } catch (e) {
    if (e.name !== 'AbortError') $('dr-summary').textContent = 'Could not reach the lab server: ' + e.message;
    return;
  }
  pause();
  t = 0;
  cursor = 0;
  preview();
  fixture();
  buildTrace();
  const sl = $('dr-time');
  sl.max = String(res.end_ms);
  render();
}

const fmtMs = (x) => (Math.round(x * 10) / 10) + ' ms';

function preview() {
  const b = $('dr-outcome');
  b.textContent = res.outcome;
  b.className = 'badge ' + res.outcome.replace(/ /g, '_');
  $('dr-preview').dataset.outcome = res.outcome;
  $('dr-summary').textContent = res.summary;
  const hedged = res.requests.filter((q) => q.hedged).map((q) => q.n);
  stat('dr-p95', fmtMs(res.p95_ms), `${fmtMs(res.baseline_p95_ms)} without hedging`, res.p95_ms < res.baseline_p95_ms ? 'good' : '');
  stat('dr-extra', `+${res.extra_load_pct}%`,
    res.hedges ? `${res.hedges} hedge${res.hedges > 1 ? 's' : ''}${hedged.length <= 4 ? ': ' + hedged.join(', ') : ''} · limit ${res.load_limit_pct}%` : `no hedges · limit ${res.load_limit_pct}%`,
    res.extra_load_pct > res.load_limit_pct ? 'hot' : '');
  stat('dr-loser', fmtMs(res.loser_work_ms), !res.hedges ? 'no losing copies' : res.cancel ? 'losers cancelled when the winner answers' : 'losers run to completion', '');
  if (res.op === 'read') stat('dr-writes', '–', 'reads have no side effects', '');
  else if (res.op === 'write') {
    const dup = res.requests.filter((q) => q.writes > 1).map((q) => q.n);
    stat('dr-writes', String(res.duplicate_writes), dup.length ? `requests ${dup.join(', ')} wrote twice` : 'no request wrote twice', dup.length ? 'hot' : '');
  } else stat('dr-writes', '0', `${res.deduplicated} second commit${res.deduplicated === 1 ? '' : 's'} deduplicated by the key`, '');
}

function fixture() {
  const rows = res.requests.map((q) => {
    const tr = document.createElement('tr');
    tr.classList.toggle('hedged', q.hedged);
    tr.classList.toggle('slow', q.primary_ms > 200);
    const th = document.createElement('th');
    th.scope = 'row';
    th.textContent = q.n;
    const p = document.createElement('td');
    p.textContent = q.primary_ms;
    p.classList.toggle('won', q.winner === 'primary');
    const b = document.createElement('td');
    b.textContent = q.backup_ms;
    b.classList.toggle('won', q.hedged && q.winner === 'backup');
    b.classList.toggle('idle', !q.hedged);
    const seen = document.createElement('td');
    seen.textContent = q.latency_ms;
    tr.append(th, p, b, seen);
    return tr;
  });
  document.querySelector('#dr-fixture tbody').replaceChildren(...rows);
}

function stat(id, v, hint, cls) {
  const s = $(id);
  s.querySelector('b').textContent = v;
  s.querySelector('.hint').textContent = hint;
  s.classList.toggle('hot', cls === 'hot');
}

function buildTrace() {
  const ol = $('dr-trace');
  items = res.events.map((e) => {
    const li = document.createElement('li');
    const tm = document.createElement('span'); tm.className = 't'; tm.textContent = fmtMs(e.at_ms);
    const rq = document.createElement('span'); rq.className = 'r'; rq.textContent = '#' + e.req;
    const k = document.createElement('span'); k.className = 'kind ' + e.kind + (/DUPLICATE/.test(e.text) ? ' dup' : ''); k.textContent = e.kind;
    const tx = document.createElement('span'); tx.textContent = e.text;
    li.append(tm, rq, k, tx);
    return li;
  });
  ol.replaceChildren(...items);
  ol.scrollTop = 0;
  $('dr-count').textContent = `· ${res.events.length} events`;
}

function setTime(v) {
  t = Math.min(Math.max(v, 0), res.end_ms);
  let n = 0;
  while (n < res.events.length && res.events[n].at_ms <= t + 1e-9) n++;
  cursor = n;
  render();
}

function play() {
  if (!res) return;
  if (t >= res.end_ms) { t = 0; cursor = 0; }
  playing = true;
  last = performance.now();
  playButton();
  requestAnimationFrame(frame);
}

function pause() {
  playing = false;
  playButton();
}

function playButton() {
  const b = $('dr-play');
  b.querySelector('span').textContent = playing ? 'Pause' : 'Play';
  b.setAttribute('aria-label', playing ? 'Pause' : 'Play');
  b.querySelector('path').setAttribute('d', playing ? 'M3.5 2.5h3.2v11H3.5zm5.8 0h3.2v11H9.3z' : 'M4 2.5v11l9-5.5z');
}

function frame(now) {
  if (!playing) return;
  const dt = (now - last) / 1000;
  last = now;
  setTime(t + dt * RATE * Number($('dr-speed').value));
  if (t >= res.end_ms) { pause(); return; }
  requestAnimationFrame(frame);
}

function next() {
  if (!res) return;
  pause();
  if (cursor >= res.events.length) return;
  cursor++;
  const e = res.events[cursor - 1];
  t = e.at_ms;
  $('dr-live').textContent = `${fmtMs(e.at_ms)}, request ${e.req}: ${e.text}`;
  render();
}

function restart() {
  pause();
  t = 0;
  cursor = 0; // before the sends at 0 ms, so Next event starts with the first
  render();
  $('dr-live').textContent = 'Rewound to 0 ms.';
}

function render() {
  $('dr-time').value = String(t);
  $('dr-time-out').textContent = fmtMs(t);
  $('dr-time').setAttribute('aria-valuetext', fmtMs(t));
  items.forEach((li, i) => {
    li.classList.toggle('future', i >= cursor);
    li.classList.toggle('current', i === cursor - 1);
  });
  const cur = items[cursor - 1];
  const ol = $('dr-trace');
  if (cur) {
    if (cur.offsetTop < ol.scrollTop || cur.offsetTop + cur.offsetHeight > ol.scrollTop + ol.clientHeight) {
      ol.scrollTop = cur.offsetTop - ol.clientHeight / 2;
    }
  } else ol.scrollTop = 0;
  gantt();
}

// stops returns when each copy of request q stopped running.
function copies(q) {
  const out = [];
  const winT = q.latency_ms;
  const pStop = q.hedged && q.winner === 'backup' && res.cancel ? winT : q.primary_ms;
  out.push({ c: 'primary', start: 0, stop: pStop, won: q.winner === 'primary', cancelled: pStop < q.primary_ms });
  if (q.hedged) {
    const bEnd = res.delay_ms + q.backup_ms;
    const bStop = q.winner === 'primary' && res.cancel ? winT : bEnd;
    out.push({ c: 'backup', start: res.delay_ms, stop: bStop, won: q.winner === 'backup', cancelled: bStop < bEnd });
  }
  return out;
}

function niceMax(v) {
  const step = v > 600 ? 100 : 50;
  return Math.ceil((v * 1.04) / step) * step;
}

function gantt() {
  const svg = $('dr-gantt');
  clear(svg);
  const W = 540, H = 470, m = { l: 30, r: 34, t: 24, b: 42 };
  const max = niceMax(Math.max(res.end_ms, res.hedge ? res.delay_ms : 0));
  const x = linear(0, max, m.l, W - m.r);
  const rowH = (H - m.t - m.b) / res.requests.length;
  for (const v of linearTicks(0, max, 6)) {
    svg.appendChild(el('line', { x1: x(v), x2: x(v), y1: m.t - 4, y2: H - m.b, class: 'grid' }));
    svg.appendChild(el('text', { x: x(v), y: H - m.b + 16, 'text-anchor': 'middle' }, v + (v === 0 ? '' : '')));
  }
  svg.appendChild(el('text', { x: W - m.r, y: H - 4, 'text-anchor': 'end', class: 'axis-title' }, 'ms since the requests were sent'));
  if (res.hedge && res.delay_ms <= max) {
    svg.appendChild(el('line', { x1: x(res.delay_ms), x2: x(res.delay_ms), y1: m.t - 6, y2: H - m.b, stroke: C.backup, 'stroke-dasharray': '4 3', 'stroke-width': 1.2 }));
    svg.appendChild(el('text', { x: Math.min(x(res.delay_ms) + 4, W - 120), y: m.t - 10, class: 'lbl' }, `backup after ${res.delay_ms} ms`));
  }
  const ev = res.events.slice(0, cursor);
  res.requests.forEach((q, i) => {
    const y0 = m.t + i * rowH;
    const slow = q.primary_ms > 200;
    if (i % 2 === 1) svg.appendChild(el('rect', { x: m.l, y: y0, width: W - m.l - m.r, height: rowH, fill: '#faf9f6' }));
    svg.appendChild(el('text', { x: m.l - 8, y: y0 + rowH / 2 + 4, 'text-anchor': 'end', 'font-weight': slow ? 700 : null, class: slow ? 'lbl' : null }, String(q.n)));
    const cs = copies(q);
    cs.forEach((c, j) => {
      const by = y0 + 3 + j * (rowH - 6) / 2, bh = (rowH - 6) / 2 - 1;
      const col = C[c.c];
      svg.appendChild(el('rect', { x: x(c.start), y: by, width: Math.max(0, x(c.stop) - x(c.start)), height: bh, fill: C.ghost, rx: 2 }));
      if (t > c.start) {
        const end = Math.min(t, c.stop);
        const done = t >= c.stop;
        svg.appendChild(el('rect', { x: x(c.start), y: by, width: Math.max(0, x(end) - x(c.start)), height: bh, fill: col, rx: 2, 'fill-opacity': done && !c.won ? 0.35 : 1 }));
      }
    });
    // marks from the events so far
    for (const e of ev) {
      if (e.req !== q.n) continue;
      const j = e.copy === 'backup' ? 1 : 0;
      const cy = y0 + 3 + j * (rowH - 6) / 2 + ((rowH - 6) / 2 - 1) / 2;
      if (e.kind === 'win') {
        svg.appendChild(el('circle', { cx: x(e.at_ms), cy, r: 3.6, fill: C.win, stroke: '#fff', 'stroke-width': 1 }));
        svg.appendChild(el('text', { x: x(e.at_ms) + 7, y: y0 + rowH / 2 + 4, class: 'lbl' }, String(Math.round(e.at_ms))));
      } else if (e.kind === 'cancel') {
        const cx = x(e.at_ms);
        svg.appendChild(el('path', { d: `M${cx - 3} ${cy - 3}l6 6m0 -6l-6 6`, stroke: C.cancel, 'stroke-width': 1.8 }));
      } else if (e.kind === 'commit' || e.kind === 'dedupe') {
        const cx = x(e.at_ms);
        const dup = /DUPLICATE/.test(e.text);
        svg.appendChild(el('path', { d: `M${cx} ${cy - 4}l4 4l-4 4l-4 -4z`, fill: e.kind === 'dedupe' ? '#fff' : dup ? C.dup : C.commit, stroke: dup ? C.dup : C.commit, 'stroke-width': 1.2 }));
      } else if (e.kind === 'refuse') {
        svg.appendChild(el('circle', { cx: x(e.at_ms), cy: y0 + rowH - 6, r: 2.6, fill: 'none', stroke: C.refuse, 'stroke-width': 1.4 }));
      }
    }
  });
  // playhead
  svg.appendChild(el('line', { x1: x(t), x2: x(t), y1: m.t - 4, y2: H - m.b, stroke: '#1c232b', 'stroke-width': 1.4 }));
  const label = fmtMs(t), lw = label.length * 6.6 + 12;
  const lx = Math.min(Math.max(x(t) - lw / 2, 2), W - lw - 2);
  svg.appendChild(el('rect', { x: lx, y: H - m.b + 3, width: lw, height: 17, rx: 8.5, class: 'pill' }));
  svg.appendChild(el('text', { x: lx + lw / 2, y: H - m.b + 15.5, 'text-anchor': 'middle', class: 'pill-text' }, label));
  $('dr-gantt-desc').textContent = `Timeline at ${fmtMs(t)}: ${cursor} of ${res.events.length} events. ${res.outcome}: ${res.summary}`;
}
