// Small DOM and formatting helpers shared by every page.

/** h('div.card', {title: 'x', onclick: f}, child, 'text', [more]) */
export function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split('.');
  const el = document.createElement(tag || 'div');
  if (classes.length) el.className = classes.join(' ');
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'class') el.className += (el.className ? ' ' : '') + v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** "3 min ago" / "in 2 s" for an RFC 3339 time. */
export function ago(iso, now = Date.now()) {
  if (!iso) return '—';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  let s = Math.round((now - t) / 1000);
  const future = s < 0;
  s = Math.abs(s);
  let txt;
  if (s < 5) return 'just now';
  if (s < 60) txt = `${s} s`;
  else if (s < 3600) txt = `${Math.floor(s / 60)} min`;
  else if (s < 86400) txt = `${Math.floor(s / 3600)} h`;
  else txt = `${Math.floor(s / 86400)} d`;
  return future ? `in ${txt}` : `${txt} ago`;
}

/** A <time> showing "3 min ago", the exact time on hover; kept fresh. */
export function timeEl(iso) {
  if (!iso) return h('span.muted', '—');
  const exact = new Date(iso);
  return h('time', { datetime: iso, title: isNaN(exact) ? iso : exact.toString(), 'data-ago': '' }, ago(iso));
}

setInterval(() => {
  for (const t of document.querySelectorAll('time[data-ago]')) t.textContent = ago(t.getAttribute('datetime'));
}, 15000);

/** Milliseconds as "850 ms", "42 s", "3 min 5 s", "2 h 10 min". */
export function span(msecs) {
  if (msecs < 1000) return `${Math.max(0, Math.round(msecs))} ms`;
  const s = Math.floor(msecs / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ''}`;
}

// Issue 36: a run's duration — finished: finishedAt − startedAt; live
// (started, not finished): the time so far, counting up every second.
const LIVE = new Set(['spawning', 'running']);
export function duration(status) {
  const s = status || {};
  if (!s.startedAt) return h('span.muted', { 'data-duration': '' }, '—');
  const start = Date.parse(s.startedAt);
  if (s.finishedAt) {
    const ms = Date.parse(s.finishedAt) - start;
    return h('span.duration', { 'data-duration': ms, title: `ran ${span(ms)}` }, span(ms));
  }
  if (!LIVE.has(s.phase)) return h('span.muted', { 'data-duration': '' }, '—');
  return h('span.duration.ticking', { 'data-duration': 'running', 'data-since': start, title: 'running' },
    `running ${span(Date.now() - start)}`);
}

setInterval(() => {
  for (const d of document.querySelectorAll('[data-since]')) d.textContent = `running ${span(Date.now() - Number(d.dataset.since))}`;
}, 1000);

/** A phase badge: colour AND text, never colour alone. */
export function phase(p, extra) {
  const label = p || 'unknown';
  return h('span.phase', { class: `phase-${label}`, 'data-phase': label, title: extra || label }, label);
}

/** A completion ratio `{done,total}` as "2/5" with a bar. */
export function ratio(c) {
  if (!c || !c.total) return null;
  const pct = Math.round((100 * c.done) / c.total);
  return h('span.ratio', { title: `${c.done} of ${c.total} done (${pct}%)`, 'data-ratio': `${c.done}/${c.total}` },
    h('span.bar', h('span.fill', { style: null, 'data-pct': pct })), `${c.done}/${c.total}`);
}

// CSP forbids inline style attributes; widths are set through CSSOM, which it allows.
export function fixBars(root) {
  for (const f of root.querySelectorAll('.fill[data-pct]')) f.style.width = `${f.dataset.pct}%`;
}

export function empty(title, ...hint) {
  return h('div.empty', h('p.empty-title', title), hint.length ? h('p.muted', ...hint) : null);
}

export function code(text) {
  return h('code', text);
}

/** A transient message; `kind` error|ok|info. Errors use role=alert. */
export function toast(message, kind = 'info') {
  const box = document.getElementById('toasts');
  // Shown once (issue 36): the same message still on screen is not repeated.
  for (const t of box.children) if (t.textContent === message && t.classList.contains(`toast-${kind}`)) return t;
  const t = h('div.toast', { class: `toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, message);
  box.append(t);
  setTimeout(() => t.remove(), kind === 'error' ? 8000 : 4000);
  return t;
}

/** A modal confirmation; resolves true/false. */
export function confirmDialog(title, body, okLabel = 'Confirm') {
  return new Promise((resolve) => {
    const done = (v) => { overlay.remove(); resolve(v); };
    const ok = h('button.danger', { type: 'button', 'data-confirm': 'ok', onclick: () => done(true) }, okLabel);
    const overlay = h('div.overlay', { role: 'dialog', 'aria-modal': 'true', 'aria-label': title },
      h('div.dialog',
        h('h2', title),
        body,
        h('div.actions',
          h('button.ghost', { type: 'button', 'data-confirm': 'cancel', onclick: () => done(false) }, 'Keep it'),
          ok)));
    overlay.addEventListener('keydown', (e) => { if (e.key === 'Escape') done(false); });
    document.body.append(overlay);
    ok.focus();
  });
}

/** Debounce: call `f` once after `ms` of quiet. */
export function debounce(f, ms = 150) {
  let t = null;
  return (...args) => { clearTimeout(t); t = setTimeout(() => f(...args), ms); };
}

/** Hash query string → URLSearchParams (`#/runs?phase=running`). */
export function hashParams() {
  const q = location.hash.split('?')[1] || '';
  return new URLSearchParams(q);
}

// Issue 21: usage figures ({inputTokens, cachedInputTokens, outputTokens,
// costUsd}) as "$0.2500 · 36 tok", or null when there are none.
export function cost(u) {
  if (!u) return null;
  const tokens = (u.inputTokens || 0) + (u.outputTokens || 0);
  return `$${(u.costUsd || 0).toFixed(4)} · ${tokens.toLocaleString('en-US')} tok`;
}
