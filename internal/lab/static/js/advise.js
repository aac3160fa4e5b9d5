// Advise: upload recorded latencies and show what "hedge advise" says of
// them. The server runs package advise (the same code as the terminal
// command); this file only sends the file and shows the answer. The chart
// is an SVG document shown as an image (a data: URL), never inserted as
// markup.
const $ = (id) => document.getElementById(id);
const MAX_BYTES = 4 << 20; // the server's limit (lab.MaxAdviseBody)

let ctrl = null;

export function initAdvise() {
  $('ad-form').addEventListener('submit', (e) => {
    e.preventDefault();
    run();
  });
}

// query returns the parameters the form sets; empty fields are left out
// so that the server's defaults apply.
function query() {
  const q = new URLSearchParams();
  const set = (name, id) => {
    const v = $(id).value.trim();
    if (v !== '') q.set(name, v);
  };
  if ($('ad-format').value !== 'auto') q.set('format', $('ad-format').value);
  set('load', 'ad-load');
  if ($('ad-objective').value !== 'p99') q.set('objective', $('ad-objective').value);
  set('replicas', 'ad-replicas');
  set('concurrency', 'ad-concurrency');
  set('time-field', 'ad-time');
  q.set('percentiles', $('ad-pcts').value.trim());
  set('field', 'ad-field');
  set('unit', 'ad-unit');
  set('delays', 'ad-delays');
  return q;
}

function error(text) {
  $('ad-error').textContent = text;
}

async function run() {
  error('');
  const file = $('ad-file').files[0];
  const body = file || $('ad-paste').value;
  const size = file ? file.size : new Blob([body]).size;
  if (size === 0) {
    error('Choose a file or paste latencies first.');
    return;
  }
  if (size > MAX_BYTES) {
    error(`The file is ${(size / 1048576).toFixed(1)} MiB, over the lab's limit of 4 MiB: thin it, or run "hedge advise --in FILE", which has no limit.`);
    return;
  }
  if (ctrl) ctrl.abort();
  ctrl = new AbortController();
  const my = ctrl;
  $('ad-run').disabled = true;
  $('ad-badge').textContent = '…';
  $('ad-badge').className = 'badge';
  $('ad-verdict').textContent = 'Analysing ' + (file ? file.name : 'the pasted latencies') + '…';
  try {
    const r = await fetch('/api/advise?' + query(), {
      method: 'POST', body, signal: my.signal, headers: { 'Content-Type': 'text/plain' },
    });
    const res = await r.json();
    if (!r.ok) {
      $('ad-verdict').textContent = 'No report.';
      error(`The server refused this (${r.status}): ${res.error}`);
      return;
    }
    show(res);
  } catch (e) {
    if (e.name !== 'AbortError') error('Could not reach the lab server: ' + e.message + '. Is "hedge lab" still running?');
  } finally {
    if (ctrl === my) {
      ctrl = null;
      $('ad-run').disabled = false;
    }
  }
}

function show(res) {
  const badge = $('ad-badge');
  if (res.recommended && res.keep_default) {
    badge.textContent = 'KEEP THE DEFAULT';
    badge.className = 'badge TAIL_CUT';
  } else if (res.recommended) {
    badge.textContent = 'HEDGE AT ' + res.recommended.delay.toUpperCase();
    badge.className = 'badge TAIL_CUT';
  } else {
    badge.textContent = 'DO NOT HEDGE';
    badge.className = 'badge NO_TAIL_GAIN';
  }
  // The headline's lines: the library's default, then the recommendation.
  $('ad-verdict').textContent = (res.headline && res.headline.length ? res.headline : [res.verdict]).join('\n');
  const img = $('ad-chart');
  img.src = 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(res.svg);
  img.alt = `Chart of the predictions for ${res.n} latencies: ${res.verdict}`;
  $('ad-report').textContent = res.report;
  $('ad-out').hidden = false;
}
