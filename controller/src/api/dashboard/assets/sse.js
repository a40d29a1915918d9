// Live updates: the SSE stream (GET /api/v1/events/stream, docs/api.md)
// read with fetch() so the token goes in the Authorization header, not a
// URL. A lost connection reconnects with Last-Event-ID and resumes after
// the last event seen. If this pamd has no stream endpoint (404), it falls
// back to polling GET /api/v1/events?after=SEQ with the same cursor.

import { authHeaders } from './api.js';

const listeners = new Set();
const stateListeners = new Set();
let lastId = null;
let started = false;
let controller = null;
let state = 'off';

/** `f(event)` for every event ({seq, topic, payload, createdAt}); returns an unsubscribe. */
export function onEvent(f) {
  listeners.add(f);
  return () => listeners.delete(f);
}

/** `f(state)` when the connection state changes: live|polling|reconnecting|off. */
export function onState(f) {
  stateListeners.add(f);
  f(state);
  return () => stateListeners.delete(f);
}

function setState(s) {
  if (s === state) return;
  state = s;
  for (const f of stateListeners) f(s);
}

function dispatch(ev) {
  if (typeof ev.seq === 'number') lastId = ev.seq;
  for (const f of listeners) {
    try { f(ev); } catch (e) { console.error('event listener failed', e); }
  }
}

export function lastEventId() {
  return lastId;
}

export function start() {
  if (started) return;
  started = true;
  loop();
}

export function stop() {
  started = false;
  if (controller) controller.abort();
  setState('off');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function loop() {
  let delay = 500;
  while (started) {
    try {
      const mode = await streamOnce();
      if (mode === 'unsupported') { await poll(); return; }
      delay = 500;
    } catch (e) {
      if (!started) return;
    }
    if (!started) return;
    setState('reconnecting');
    await sleep(delay);
    delay = Math.min(delay * 2, 10000);
  }
}

// One connection; returns when it ends. 'unsupported' when there is no stream endpoint.
async function streamOnce() {
  controller = new AbortController();
  const headers = { Accept: 'text/event-stream', ...authHeaders() };
  if (lastId !== null) headers['Last-Event-ID'] = String(lastId);
  const r = await fetch('/api/v1/events/stream', { headers, signal: controller.signal, cache: 'no-store' });
  if (r.status === 404 || r.status === 405) return 'unsupported';
  if (r.status === 401) { window.dispatchEvent(new CustomEvent('pam:unauthorized')); started = false; return 'closed'; }
  if (!r.ok || !r.body) throw new Error(`stream: HTTP ${r.status}`);
  setState('live');
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return 'closed';
    buf += value;
    let i;
    while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(buf[i] === '\r' ? i + 4 : i + 2);
      handleBlock(block);
    }
  }
}

function handleBlock(block) {
  let id = null, type = 'message', data = [];
  for (const line of block.split(/\r?\n/)) {
    if (!line || line.startsWith(':')) continue;
    const c = line.indexOf(':');
    const field = c < 0 ? line : line.slice(0, c);
    let value = c < 0 ? '' : line.slice(c + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') id = value;
    else if (field === 'event') type = value;
    else if (field === 'data') data.push(value);
  }
  if (!data.length) return;
  let payload;
  try { payload = JSON.parse(data.join('\n')); } catch { return; }
  if (type === 'gap') {
    dispatch({ seq: lastId, topic: 'gap', payload, createdAt: new Date().toISOString() });
    return;
  }
  if (id !== null && payload.seq === undefined) payload.seq = Number(id);
  dispatch(payload);
}

// Fallback for a pamd without the stream: poll the journal from its end.
async function poll() {
  const page = async (after) => {
    const q = after === null ? '' : `&after=${after}`;
    const r = await fetch(`/api/v1/events?limit=1000${q}`, { headers: authHeaders() });
    if (r.status === 401) { window.dispatchEvent(new CustomEvent('pam:unauthorized')); throw new Error('401'); }
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    return (await r.json()).items;
  };
  // Skip to the current end of the journal.
  if (lastId === null) {
    let after = null;
    for (;;) {
      const items = await page(after);
      if (items.length) after = items[items.length - 1].seq;
      if (items.length < 1000) break;
    }
    lastId = after === null ? 0 : after;
  }
  while (started) {
    try {
      const items = await page(lastId);
      setState('polling');
      for (const ev of items) dispatch(ev);
    } catch {
      if (!started) return;
      setState('reconnecting');
    }
    await sleep(1000);
  }
}
