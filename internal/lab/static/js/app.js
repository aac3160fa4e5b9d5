// hedge lab: tabs and view start-up. Each view initialises the first
// time it is shown.
import { initExplorer } from './explorer.js';
import { initStudy } from './study.js';
import { initDrill } from './drill.js';
import { initAdvise } from './advise.js';

const views = { explorer: initExplorer, study: initStudy, drill: initDrill, advise: initAdvise };
const started = {};
const tabs = [...document.querySelectorAll('[role="tab"]')];

function show(name, focus) {
  if (!views[name]) name = 'explorer';
  for (const t of tabs) {
    const on = t.id === 'tab-' + name;
    t.setAttribute('aria-selected', String(on));
    t.tabIndex = on ? 0 : -1;
    document.getElementById(t.getAttribute('aria-controls')).hidden = !on;
    if (on && focus) t.focus();
  }
  if (!started[name]) {
    started[name] = true;
    views[name]();
  }
  // The query holds the explorer's scenario: switching views keeps it.
  if (location.hash !== '#' + name) history.replaceState(null, '', location.pathname + location.search + '#' + name);
}

for (const t of tabs) {
  t.addEventListener('click', () => show(t.id.slice(4)));
  t.addEventListener('keydown', (e) => {
    const i = tabs.indexOf(t);
    let j = null;
    if (e.key === 'ArrowRight') j = (i + 1) % tabs.length;
    else if (e.key === 'ArrowLeft') j = (i - 1 + tabs.length) % tabs.length;
    else if (e.key === 'Home') j = 0;
    else if (e.key === 'End') j = tabs.length - 1;
    if (j !== null) {
      e.preventDefault();
      show(tabs[j].id.slice(4), true);
    }
  });
}
window.addEventListener('hashchange', () => show(location.hash.slice(1)));
show(location.hash.slice(1) || 'explorer');
