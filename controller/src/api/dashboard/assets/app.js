// The dashboard shell: sign-in, navigation (a hash router), the live
// indicator. Pages live in pages/*.js and export
// `render(root, params) → cleanup`.

import { api, setToken, signedIn, setMe, may } from './api.js';
import * as sse from './sse.js';
import { h } from './util.js';
import * as projects from './pages/projects.js';
import * as board from './pages/board.js';
import * as runs from './pages/runs.js';
import * as run from './pages/run.js';
import * as hosts from './pages/hosts.js';
import * as activity from './pages/activity.js';
import * as sources from './pages/sources.js';
import * as automation from './pages/automation.js';
import * as charts from './pages/charts.js';
import * as webhooks from './pages/webhooks.js';

const routes = [
  [/^#\/projects$/, projects, 'projects'],
  [/^#\/board\/([^/]+)$/, board, 'projects'],
  [/^#\/automation\/([^/]+)$/, automation, 'projects'],
  [/^#\/charts\/([^/]+)$/, charts, 'projects'],
  [/^#\/runs$/, runs, 'runs'],
  [/^#\/runs\/([^/]+)\/([^/]+)$/, run, 'runs'],
  [/^#\/hosts$/, hosts, 'hosts'],
  [/^#\/sources$/, sources, 'sources'],
  [/^#\/webhooks$/, webhooks, 'webhooks'],
  [/^#\/activity$/, activity, 'activity'],
];

const view = document.getElementById('view');
let cleanup = null;

// Whether pamd offers SSO (issue 34: [oidc]); asked once.
const sso = fetch('/auth/info').then((r) => r.json()).then((j) => Boolean(j.oidc)).catch(() => false);

function signIn(message) {
  setMe(null);
  document.getElementById('top').hidden = true;
  sse.stop();
  const input = h('input', { type: 'password', name: 'token', id: 'token', autocomplete: 'off', required: true,
    placeholder: 'pam_…', 'aria-label': 'operator token', spellcheck: 'false' });
  const err = h('p.error', { role: 'alert', hidden: !message }, message || '');
  const form = h('form.signin', { id: 'signin', novalidate: true },
    h('h1', 'Sign in to pam'),
    h('p.muted', 'Paste an operator token. pamd wrote one to ', h('code', '<data-dir>/admin.token'),
      '; create more with ', h('code', 'pamctl token create NAME'), '. It is kept for this browser tab only.'),
    h('label', { for: 'token' }, 'Operator token'),
    input,
    err,
    h('button', { type: 'submit' }, 'Sign in'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const t = input.value.trim();
    if (!t) { err.hidden = false; err.textContent = 'Enter a token.'; return; }
    try {
      await api('GET', '/api/v1/projects', undefined, t);
    } catch (ex) {
      err.hidden = false;
      err.textContent = ex.status === 401 ? 'That token was refused (unknown, revoked or not an operator token).'
        : ex.status === 403 ? 'That is a worker token; the dashboard needs an operator token.'
          : `Could not sign in: ${ex.message}`;
      return;
    }
    setToken(t);
    if (!location.hash || location.hash === '#/signin') location.hash = '#/projects';
    else route();
  });
  view.replaceChildren(form);
  input.focus();
  // SSO beside the token: a plain link, the issuer's sign-in page is a
  // full navigation.
  sso.then((yes) => {
    if (yes) form.querySelector('h1').after(h('a.button', { id: 'sso', href: '/auth/login' }, 'Sign in with SSO'), h('p.muted', 'or paste a token:'));
  });
}

// Who is signed in: the pages show only what the role may do, and the
// admin-only pages leave the navigation.
async function loadMe() {
  try { setMe(await api('GET', '/api/v1/whoami')); } catch { setMe(null); return; }
  for (const [nav, resource] of [['sources', 'sources'], ['webhooks', 'webhookdeliveries']]) {
    const a = document.querySelector(`[data-nav="${nav}"]`);
    if (a) a.hidden = !may('list', resource);
  }
}
let meLoaded = null;

function route() {
  if (cleanup) { try { cleanup(); } catch { /* page gone */ } cleanup = null; }
  if (!signedIn()) { signIn(); return; }
  if (!meLoaded) { meLoaded = loadMe(); meLoaded.then(route); return; }
  document.getElementById('top').hidden = false;
  sse.start();
  const hash = (location.hash || '#/projects').split('?')[0];
  for (const [re, page, nav] of routes) {
    const m = hash.match(re);
    if (!m) continue;
    for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('active', a.dataset.nav === nav);
    const root = h('section.page');
    view.replaceChildren(root);
    cleanup = page.render(root, m.slice(1).map(decodeURIComponent)) || null;
    return;
  }
  location.hash = '#/projects';
}

window.addEventListener('hashchange', route);
window.addEventListener('pam:unauthorized', () => {
  setToken(null);
  // A session pamd no longer knows (expired, or pamd restarted): forget
  // its CSRF value, else the dashboard would think it is signed in.
  document.cookie = 'pam_csrf=; Max-Age=0; Path=/';
  meLoaded = null;
  signIn('Your token or session is no longer accepted; sign in again.');
});
document.getElementById('signout').addEventListener('click', async () => {
  // An SSO session ends on pamd too (its cookie goes with it).
  try { await api('POST', '/auth/logout'); } catch { /* no session, or gone */ }
  setToken(null);
  meLoaded = null;
  location.hash = '#/signin';
  signIn();
});
// Events purged before we could resume them: refetch the page instead.
sse.onEvent((e) => { if (e.topic === 'gap') route(); });
const live = document.getElementById('live');
const labels = { live: 'live', polling: 'live (polling)', reconnecting: 'reconnecting…', off: 'offline' };
sse.onState((s) => { live.dataset.state = s; live.textContent = labels[s] || s; });

route();
