// A run attempt's Conversation and raw Log, on the run page: the
// attempt's transcript (GET …/runs/{name}/transcript, one JSON entry a
// line, docs/api.md "Run logs and transcripts") drawn as a chat — the
// prompt and the assistant's messages as bubbles, tool calls as
// collapsible blocks with their results (paired by call_id), errors,
// API retries, refused tool calls, usage and the final result — and the
// whole raw log (…/log) beside it. Both follow the attempt live
// (`follow=true`, the body read as it arrives) and resume from the byte
// they got to when a stream is cut; text only ever goes in as text.

import { openStream, enc } from '../api.js';
import { h } from '../util.js';

const LIVE = new Set(['spawning', 'running']);
const TERMINAL = new Set(['exited', 'failed', 'stopped']);
// The most of a raw log the tab holds; a longer log shows its end.
const LOG_SHOW_MAX = 8 << 20;
// A tool's output longer than this is cut until "show all".
const OUTPUT_EXCERPT = 2000;

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

/** How many leading bytes of `b` end on a line end (`\n`). */
const upToLastLine = (b) => b.lastIndexOf(10) + 1;

/**
 * How many leading bytes of `b` are whole UTF-8 characters and not the
 * start of an escape sequence still arriving (held back for the next
 * chunk).
 */
function wholeText(b) {
  let n = b.length;
  // An unfinished multi-byte character at the end.
  for (let i = n - 1, k = 0; i >= 0 && k < 4; i--, k++) {
    const c = b[i];
    if ((c & 0xc0) === 0x80) continue;
    const len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (n - i < len) n = i;
    break;
  }
  // An escape sequence cut at the end (ESC, then no final letter yet).
  for (let i = n - 1; i >= 0 && i >= n - 64; i--) {
    if (b[i] === 0x1b) {
      const rest = b.subarray(i + 1, n);
      if (!rest.some((c, j) => (j > 0 || c !== 0x5b) && c >= 0x40 && c <= 0x7e)) n = i;
      break;
    }
  }
  return n;
}

// Terminal escape sequences (colours, cursor moves, titles) are not text.
// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g;
export const plain = (s) => s.replace(ANSI, '');

/**
 * Follows one attempt's file (`route`: transcript or log) from `offset`,
 * handing `deliver` the bytes `cut` says are whole, resuming where it got
 * to when a stream ends before the attempt did. `state(kind, detail)`
 * says what it is doing: live | reading | complete | waiting | retrying |
 * absent (a 404 that will not change) | failed.
 */
function follower({ url, accept, cut, deliver, state, runNow, startAt }) {
  let ctrl = null;
  let wake = null;
  let offset = 0;
  let first = true;

  async function loop(signal) {
    // Backoff after an error answer, and after a stream that ended with
    // nothing new (the worker unreachable for a while).
    let errDelay = 1000;
    let idleDelay = 1000;
    while (!signal.aborted) {
      let res;
      try {
        res = await openStream(url(offset), signal, accept);
      } catch (e) {
        if (signal.aborted) return;
        const phase = runNow()?.status?.phase;
        // Final answers: a bad request; a 404 or 409 of a finished run
        // (an attempt it does not have, an exec run's missing transcript).
        if (e.status === 400 || ((e.status === 404 || e.status === 409) && TERMINAL.has(phase))) {
          state(e.status === 404 ? 'absent' : 'failed', e.message);
          return;
        }
        // Not started (again) yet: the run's next change starts it.
        if (e.status === 404 && !LIVE.has(phase)) { state(phase === 'pending' ? 'notstarted' : 'waiting', e.message); return; }
        wake = new AbortController();
        const until = AbortSignal.any([signal, wake.signal]);
        if (e.status === 404) {
          // Started, the worker has not written it yet.
          state('waiting', 'waiting for the worker…');
          await sleep(Math.min(errDelay, 2000), until);
        } else {
          // pamd's answer (503 host_offline, 504 worker_timeout, …) is
          // shown; asked again later, or at the run's next change.
          state('retrying', e.message);
          await sleep(errDelay, until);
        }
        errDelay = Math.min(errDelay * 2, 30000);
        continue;
      }
      errDelay = 1000;
      const done = res.headers.get('x-pam-done') === 'true';
      const size = Number(res.headers.get('x-pam-size'));
      let at = Number(res.headers.get('x-pam-offset') ?? offset);
      if (first) {
        first = false;
        const skip = startAt?.(size);
        if (skip != null && skip > offset) {
          offset = skip;
          try { await res.body.cancel(); } catch { /* gone */ }
          continue;
        }
      }
      const from = at;
      state(done ? 'reading' : 'live');
      let pending = new Uint8Array(0);
      let ended = false;
      try {
        const reader = res.body.getReader();
        for (;;) {
          const { value, done: end } = await reader.read();
          if (end) { ended = true; break; }
          const joined = new Uint8Array(pending.length + value.length);
          joined.set(pending);
          joined.set(value, pending.length);
          const n = cut(joined);
          if (n > 0) deliver(joined.subarray(0, n));
          at += n;
          pending = joined.slice(n);
        }
      } catch (e) {
        if (signal.aborted) return;
      }
      offset = at;
      if (done && ended && (at + pending.length >= size || at === from)) {
        // The attempt is over and all of it arrived (what is left is a
        // last line with no line end, or no progress is possible).
        if (pending.length) deliver(pending);
        offset = at + pending.length;
        state('complete');
        return;
      }
      // The stream ended before the attempt did (it ended just now, or
      // the worker was unreachable for a while): ask again from here.
      if (at > from) {
        idleDelay = 1000;
        await sleep(200, signal);
      } else {
        await sleep(idleDelay, signal);
        idleDelay = Math.min(idleDelay * 2, 30000);
      }
    }
  }

  return {
    /** Starts (again) from where it got to; no-op while running. */
    start() {
      if (ctrl) { wake?.abort(); return; }
      ctrl = new AbortController();
      const mine = ctrl;
      loop(mine.signal).finally(() => { if (ctrl === mine) ctrl = null; });
    },
    stop() { ctrl?.abort(); ctrl = null; },
    get running() { return Boolean(ctrl); },
  };
}

// —— The conversation ————————————————————————————————————————————————

const clock = (at) => {
  if (!at) return null;
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return null;
  return h('time', { datetime: at, title: d.toString() }, d.toLocaleTimeString([], { hour12: false }));
};

const n = (x) => Number(x || 0).toLocaleString('en-US');

/** A usage entry's figures in a line: `1,200 in (800 cached) · 56 out · $0.0123 · model`. */
export function usageWords(u) {
  if (!u) return '';
  const parts = [`${n(u.input_tokens)} in${u.cached_input_tokens ? ` (${n(u.cached_input_tokens)} cached)` : ''}`, `${n(u.output_tokens)} out`];
  if (u.cost_usd != null) parts.push(`$${Number(u.cost_usd).toFixed(4)}`);
  if (u.model) parts.push(u.model);
  return parts.join(' · ');
}

/** An entry in a few words (status.lastActivity; describe in activity.rs). */
export function describe(e) {
  if (!e) return null;
  const j = (...p) => p.filter(Boolean).join(' ');
  switch (e.kind) {
    case 'message': return e.text || '';
    case 'tool_call': return j('tool', e.tool, e.target || e.text);
    case 'tool_result': return j(e.tool, e.ok === false ? 'failed' : 'ok', e.text);
    case 'denied': return j('denied', e.tool, e.target);
    case 'error': return j('error:', e.text);
    case 'retry': return j('retrying:', e.text);
    case 'result': return j(e.ok === false ? 'failed:' : 'done:', e.text);
    default: return j(e.kind, e.text);
  }
}

// A tool's input as the worker summarizes it (JSON), indented to read.
function pretty(text) {
  if (!/^\s*[{[]/.test(text)) return text;
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

// Text that may be long: the first OUTPUT_EXCERPT characters, and a
// button for the rest.
function longText(text, cls) {
  const pre = h(`pre.${cls}`);
  if (text.length <= OUTPUT_EXCERPT) { pre.textContent = text; return pre; }
  pre.textContent = `${text.slice(0, OUTPUT_EXCERPT)}…`;
  const more = h('button.ghost.small', {
    type: 'button',
    onclick: () => { pre.textContent = text; more.remove(); },
  }, `show all (${n(text.length)} characters)`);
  return h('div', pre, more);
}

/** The conversation's list: `add(entries)` draws them in order. */
function conversation(list) {
  const calls = new Map();
  const byTool = [];
  let prompted = false;
  let lastError = null;
  let count = 0;

  const setState = (call, st, label) => {
    call.el.dataset.state = st;
    call.badge.className = `tool-state st-${st}`;
    call.badge.textContent = label;
  };

  const toolBlock = (e) => {
    const badge = h('span.tool-state.st-running', 'running…');
    const body = h('div.tool-body',
      e.text ? [h('div.tool-label', 'Input'), longText(pretty(e.text), 'tool-input')] : null);
    const el = h('details.tool', { 'data-kind': 'tool_call', 'data-tool': e.tool || '', 'data-call-id': e.call_id || null, 'data-state': 'running' },
      h('summary',
        h('span.tool-name', e.tool || 'tool'),
        e.target ? h('code.tool-target', { title: e.target }, e.target) : h('span.tool-target'),
        badge,
        clock(e.at)),
      body);
    const call = { el, badge, body, tool: e.tool, target: e.target, result: false, refused: false };
    if (e.call_id) calls.set(e.call_id, call);
    byTool.push(call);
    return el;
  };

  const attachResult = (call, e) => {
    call.result = true;
    if (!call.refused) setState(call, e.ok === false ? 'failed' : 'ok', e.ok === false ? 'failed' : 'ok');
    call.body.append(h('div.tool-label', { 'data-result': e.ok === false ? 'failed' : 'ok' }, e.ok === false ? 'Output (failed)' : 'Output'),
      e.text ? longText(e.text, 'tool-output') : h('p.muted.tool-none', 'no output'));
  };

  const draw = (e) => {
    const kind = e.kind;
    switch (kind) {
      case 'message': {
        const user = e.role === 'user';
        const label = user ? (prompted ? 'User' : 'Prompt') : (e.role === 'assistant' ? 'Assistant' : e.role || 'Message');
        if (user) prompted = true;
        return h(`div.msg.${user ? 'msg-user' : 'msg-assistant'}`, { 'data-kind': 'message', 'data-role': e.role || '' },
          h('div.msg-head', h('span', label), clock(e.at)),
          h('div.msg-text', e.text || ''));
      }
      case 'session':
        return h('div.note', { 'data-kind': 'session' }, 'session ', e.session_id ? h('code', e.session_id) : null,
          e.model ? ` · ${e.model}` : null, ' ', clock(e.at));
      case 'tool_call':
        return toolBlock(e);
      case 'tool_result': {
        const call = e.call_id && calls.get(e.call_id);
        if (call && !call.result) { attachResult(call, e); return null; }
        // A result whose call was not seen: on its own.
        const badge = h('span.tool-state', { class: `st-${e.ok === false ? 'failed' : 'ok'}` }, e.ok === false ? 'failed' : 'ok');
        return h('details.tool', { 'data-kind': 'tool_result', 'data-state': e.ok === false ? 'failed' : 'ok' },
          h('summary', h('span.tool-name', `${e.tool || 'tool'} result`), h('span.tool-target'), badge, clock(e.at)),
          h('div.tool-body', e.text ? longText(e.text, 'tool-output') : h('p.muted.tool-none', 'no output')));
      }
      case 'denied': {
        // The refused call's block says so too: the latest call of that
        // tool on that target not marked yet.
        for (let i = byTool.length - 1; i >= 0; i--) {
          const c = byTool[i];
          if (!c.refused && c.tool === e.tool && (c.target || null) === (e.target || null)) {
            c.refused = true;
            setState(c, 'refused', 'refused');
            break;
          }
        }
        return h('div.entry.denied', { 'data-kind': 'denied', role: 'note' },
          h('span.entry-label', 'Refused'), ' ', h('strong', e.tool || 'a tool'), e.target ? [' ', h('code', e.target)] : null,
          e.text ? h('div.entry-text', e.text) : null);
      }
      case 'error':
        lastError = e.text || '';
        return h('div.entry.error-entry', { 'data-kind': 'error' },
          h('div.msg-head', h('span.entry-label', 'Error'), clock(e.at)), h('div.entry-text', e.text || ''));
      case 'retry':
        return h('div.entry.retry', { 'data-kind': 'retry' }, h('span.entry-label', 'Retry'), ' ', e.text || '', ' ', clock(e.at));
      case 'usage': {
        const u = e.usage || {};
        const models = (u.by_model || []).map((m) => `${m.model}: ${usageWords(m)}`).join('\n');
        return h('div.usage-line', { 'data-kind': 'usage', title: models || null }, 'usage · ', usageWords({ ...u, model: u.model || e.model }));
      }
      case 'result': {
        const ok = e.ok !== false;
        const same = !ok && lastError !== null && lastError === (e.text || '');
        return h('div.entry.final', { 'data-kind': 'result', class: ok ? 'final-ok' : 'final-failed', 'data-ok': String(ok) },
          h('div.msg-head', h('span.entry-label', ok ? 'Result' : 'Failed'), clock(e.at)),
          same ? h('div.entry-text.muted', 'the agent reported the error above') : h('div.entry-text', e.text || ''));
      }
      default:
        return h('div.note', { 'data-kind': kind || 'unknown' }, `${kind || 'entry'}: `, e.text || '');
    }
  };

  return {
    add(entries) {
      const frag = document.createDocumentFragment();
      for (const e of entries) {
        count++;
        const el = draw(e);
        if (el) frag.append(el);
      }
      list.append(frag);
    },
    /** The attempt is over: a call with no result never got one. */
    finish() {
      for (const c of byTool) if (!c.result && !c.refused) setState(c, 'none', 'no result');
    },
    get count() { return count; },
  };
}

/**
 * The panel: tabs Conversation | Log over one attempt of the run.
 * `pinned`: the attempt asked for in the URL (`?attempt=N`), else the
 * run's current one, followed to its next attempt when it restarts.
 * `tab`: the tab asked for (`?tab=log`). Returns {el, update(run), stop()}.
 */
export function transcriptPanel({ base, project, name, pinned, tab }) {
  let run = null;
  let attempt = null;
  let shown = tab === 'log' ? 'log' : tab === 'conversation' ? 'conversation' : null;
  const status = h('p.conv-status', { id: 'conv-status' });
  const attempts = h('p.attempts.muted', { id: 'attempts', hidden: true });
  const convList = h('div.conversation', { id: 'conversation', 'aria-label': 'conversation', tabindex: '0' });
  const logPre = h('pre.output.log-output', { id: 'log', 'aria-label': 'raw log', tabindex: '0' });
  const logNote = h('p.muted', { id: 'log-note', hidden: true });
  const convPanel = h('div', { role: 'tabpanel', id: 'tab-conversation', 'aria-labelledby': 'tab-btn-conversation' }, convList);
  const logPanel = h('div', { role: 'tabpanel', id: 'tab-log', 'aria-labelledby': 'tab-btn-log', hidden: true }, logNote, logPre);
  const tabBtn = (key, label) => h('button', {
    type: 'button', role: 'tab', id: `tab-btn-${key}`, 'aria-controls': `tab-${key}`, 'data-tab': key,
    onclick: () => select(key, true),
  }, label);
  const tabs = h('div.tabs', { role: 'tablist', 'aria-label': 'the attempt as' }, tabBtn('conversation', 'Conversation'), tabBtn('log', 'Log'));
  // Shown once the run is read.
  const el = h('section.panel.agent', { 'aria-label': 'the agent', id: 'agent', hidden: true }, tabs, status, attempts, convPanel, logPanel);

  // What each view is doing, for the status line.
  const st = { conversation: { kind: 'idle' }, log: { kind: 'idle' } };
  let conv = null;
  let convFollow = null;
  let logFollow = null;
  let logStarted = false;

  // Stick to the bottom while the reader is there.
  const stick = (box, f) => {
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 48;
    f();
    if (atBottom) box.scrollTop = box.scrollHeight;
  };

  const q = (extra) => `attempt=${attempt}&${extra}`;

  const drawStatus = () => {
    const s = run?.status || {};
    const current = s.attempt ?? 0;
    const view = st[shown] || { kind: 'idle' };
    const parts = [];
    const a = attempt ?? pinned ?? (current || null);
    if (a) {
      parts.push(h('strong', { 'data-attempt': a }, `Attempt ${a}`));
      if (a === current) parts.push(' (current)');
      else parts.push(' · the run is at attempt ', String(current), ' (',
        h('a', { href: `#/runs/${enc(project)}/${enc(name)}?tab=${shown}` }, 'show it'), ')');
    }
    let cls = 'muted';
    let word = '';
    switch (view.kind) {
      case 'waiting': word = view.detail || 'not started yet'; break;
      case 'notstarted': word = 'not started yet: the conversation and the log appear here when it starts.'; break;
      case 'live': word = shown === 'conversation' ? `live · ${conv?.count ?? 0} entries` : 'live'; cls = 'live-text'; break;
      case 'reading': word = 'reading…'; break;
      case 'complete': word = shown === 'conversation' ? `complete · ${conv?.count ?? 0} entries` : 'complete'; break;
      case 'retrying': word = `${view.detail} (trying again)`; cls = 'error'; break;
      case 'failed': word = view.detail; cls = 'error'; break;
      case 'absent': word = view.detail; break;
      default: word = '';
    }
    status.className = `conv-status ${cls}`;
    status.dataset.state = view.kind;
    if (!parts.length && word) word = word[0].toUpperCase() + word.slice(1);
    status.replaceChildren(...parts, parts.length && word ? ' · ' : '', word);
    // Links to the other attempts (the current one without ?attempt=).
    if (current > 1) {
      attempts.hidden = false;
      const links = [];
      for (let i = 1; i <= current; i++) {
        const href = `#/runs/${enc(project)}/${enc(name)}?${i === current ? '' : `attempt=${i}&`}tab=${shown}`;
        links.push(i === a ? h('strong', String(i)) : h('a', { href, 'data-attempt-link': i }, String(i)));
        if (i < current) links.push(' · ');
      }
      attempts.replaceChildren('attempts: ', ...links);
    } else attempts.hidden = true;
  };

  const setView = (which) => (kind, detail) => {
    st[which] = { kind, detail };
    if (which === 'conversation' && kind === 'complete') conv?.finish();
    if (shown === which) drawStatus();
  };

  const decoder = new TextDecoder();
  const startConv = () => {
    conv = conversation(convList);
    convList.replaceChildren();
    convFollow = follower({
      url: (offset) => `${base}/transcript?${q(`offset=${offset}&follow=true`)}`,
      accept: 'application/x-ndjson',
      cut: upToLastLine,
      runNow: () => run,
      state: setView('conversation'),
      deliver: (bytes) => {
        const entries = [];
        for (const line of decoder.decode(bytes).split('\n')) {
          if (!line.trim()) continue;
          try { entries.push(JSON.parse(line)); } catch { entries.push({ kind: 'unreadable', text: line }); }
        }
        stick(convList, () => conv.add(entries));
        if (shown === 'conversation') drawStatus();
      },
    });
    convFollow.start();
  };

  const startLog = () => {
    logStarted = true;
    logPre.replaceChildren();
    logNote.hidden = true;
    logFollow = follower({
      url: (offset) => `${base}/log?${q(`offset=${offset}&follow=true`)}`,
      accept: 'text/plain',
      cut: wholeText,
      runNow: () => run,
      state: setView('log'),
      startAt: (size) => {
        if (!(size > LOG_SHOW_MAX)) return null;
        logNote.hidden = false;
        logNote.textContent = `The log is ${n(size)} bytes: this shows its end from byte ${n(size - LOG_SHOW_MAX)} (pamctl logs ${name} -p ${project} has all of it).`;
        return size - LOG_SHOW_MAX;
      },
      deliver: (bytes) => stick(logPre, () => logPre.append(plain(decoder.decode(bytes)))),
    });
    logFollow.start();
  };

  let selected = false;
  function select(key, user) {
    shown = key;
    selected = true;
    for (const b of tabs.children) {
      const on = b.dataset.tab === key;
      b.setAttribute('aria-selected', String(on));
      b.tabIndex = on ? 0 : -1;
    }
    convPanel.hidden = key !== 'conversation';
    logPanel.hidden = key !== 'log';
    if (user) {
      // Kept in the URL without reloading the page (no hashchange).
      const [path, query] = location.hash.split('?');
      const params = new URLSearchParams(query || '');
      params.set('tab', key);
      history.replaceState(null, '', `${path}?${params}`);
    }
    if (key === 'log' && attempt && !logStarted) startLog();
    drawStatus();
  }
  tabs.addEventListener('keydown', (e) => {
    if (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') return;
    const next = shown === 'log' ? 'conversation' : 'log';
    select(next, true);
    tabs.querySelector(`[data-tab="${next}"]`).focus();
  });

  const reset = () => {
    convFollow?.stop();
    logFollow?.stop();
    convFollow = null;
    logFollow = null;
    logStarted = false;
    conv = null;
    convList.replaceChildren();
    logPre.replaceChildren();
    st.conversation = { kind: 'idle' };
    st.log = { kind: 'idle' };
  };

  return {
    el,
    /** The run changed (loaded, or an event about it). */
    update(r) {
      run = r;
      el.hidden = false;
      const s = r.status || {};
      const current = s.attempt ?? 0;
      if (!selected) select(shown || (r.spec.provider === 'exec' ? 'log' : 'conversation'), false);
      // A run pending since it was created has an attempt number but
      // nothing to read yet.
      const started = s.phase !== 'pending' || Boolean(s.startedAt || s.host);
      const want = pinned ?? (current >= 1 && started ? current : null);
      if (want && want > current) {
        reset();
        const no = `Run ${name} has no attempt ${want}${current ? ` (its attempts are 1 to ${current})` : ' yet'}.`;
        st.conversation = { kind: 'failed', detail: no };
        st.log = { kind: 'failed', detail: no };
        drawStatus();
        return;
      }
      if (!want) {
        st.conversation = { kind: 'notstarted' };
        st.log = { kind: 'notstarted' };
        drawStatus();
        return;
      }
      if (want !== attempt) {
        reset();
        attempt = want;
        startConv();
        if (shown === 'log') startLog();
      } else {
        // Waiting for the run to start, or retrying after an error: a
        // change of the run is a reason to ask again now.
        const wakeable = (k) => k === 'waiting' || k === 'retrying' || k === 'notstarted' || k === 'idle';
        if (wakeable(st.conversation.kind) && convFollow) convFollow.start();
        if (wakeable(st.log.kind) && logFollow && logStarted) logFollow.start();
      }
      drawStatus();
    },
    stop() { reset(); },
  };
}
