// runwire studio: the router and the shell. Views live in views/, pure
// state in state/. No framework, no build step, no network beyond this
// server (the page's CSP allows nothing else).

import { getJson, initToken, token, unauthorized } from './api.js';
import { describeServer, footerText } from './state/server.js';
import { h, setText } from './views/dom.js';
import { ChatView } from './views/chat.js';
import { CompareView } from './views/compare.js';
import { RunView } from './views/run.js';
import { RunsView } from './views/runs.js';

initToken();

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const banner = document.getElementById('banner');
const info = document.getElementById('server-info');

const views = {
  runs: new RunsView(),
  run: new RunView(),
  chat: new ChatView(),
  compare: new CompareView(),
};
const titles = { runs: 'Runs', run: 'Run / task', chat: 'Chat', compare: 'Compare', pick: 'Run / task' };
let current = null;
let lastRun = null;

const pick = {
  el: h(
    'section.view',
    { 'aria-labelledby': 'pick-h' },
    h('h1', { id: 'pick-h', tabindex: '-1' }, 'Run / task'),
    h('p.empty', null, 'No run is open. Pick one in ', h('a', { href: '#/runs' }, 'Runs'), ', or start one from ', h('a', { href: '#/chat' }, 'Chat'), '.'),
  ),
  mount() {},
  unmount() {},
};

function route() {
  const hash = location.hash || '#/runs';
  const seg = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  if (seg[0] === 'runs' && seg.length === 2) return ['run', [seg[1], null]];
  if (seg[0] === 'runs' && seg.length === 4 && seg[2] === 'tasks') return ['run', [seg[1], seg[3]]];
  if (seg[0] === 'run') return lastRun ? ['redirect', lastRun] : ['pick', []];
  if (seg[0] === 'chat') return ['chat', seg.length === 2 ? [seg[1]] : []];
  if (seg[0] === 'compare') return ['compare', []];
  return ['runs', []];
}

function show(userNavigated) {
  if (!location.hash.startsWith('#/') && location.hash !== '') return; // e.g. the skip link
  const [name, params] = route();
  if (name === 'redirect') {
    location.replace(params);
    return;
  }
  const view = name === 'pick' ? pick : views[name];
  if (current && current !== view) current.unmount();
  if (name === 'run') lastRun = location.hash;
  if (main.firstElementChild !== view.el) main.replaceChildren(view.el);
  current = view;
  view.mount(params);
  document.title = `${titles[name]} · runwire studio`;
  const section = name === 'pick' ? 'run' : name;
  for (const a of nav.querySelectorAll('a[data-view]')) {
    if (a.dataset.view === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
    if (a.dataset.view === 'run') a.setAttribute('href', lastRun || '#/run');
  }
  if (userNavigated) {
    const h1 = view.el.querySelector('h1');
    if (h1) h1.focus({ preventScroll: false });
  }
}

window.addEventListener('hashchange', () => {
  // A token typed into the address of an open page (as the banner says):
  // taken, cleared from the address and history, and the page loaded again
  // with it (every view asked without it so far).
  if (/(^|[#&?])token=/.test(location.hash)) {
    initToken();
    location.reload();
    return;
  }
  show(true);
});

document.getElementById('skip').addEventListener('click', (e) => {
  e.preventDefault();
  main.focus();
});

document.addEventListener('runwire:unauthorized', () => {
  banner.hidden = false;
  setText(
    banner,
    token()
      ? 'The server refused the token this page has. Open the page again as /#token=YOUR_TOKEN.'
      : 'This server needs a token: open the page as /#token=YOUR_TOKEN (the token is kept for this tab only).',
  );
});

(async () => {
  const a = await getJson('/api/info');
  if (a.status === 200 && a.body && typeof a.body === 'object') {
    const b = a.body;
    setText(info, describeServer(b).label);
    setText(document.getElementById('footer-text'), footerText(b));
    views.chat.setServer(b);
    if (b.tokenRequired === true && !token()) unauthorized();
  }
})();

show(false);
