// One run: its state (with its permissions, the agent's session and any
// refused tool calls), the attempt's Conversation and raw Log
// (transcript.js, following the attempt live), a timeline of its events
// (grouped by attempt), its workspace result with the diff (issue 32), the
// latest output snapshot (updating live), the stop button, and attach: take
// the run's attach lease (POST …/attach), type into its pane through the
// input box (…/attach/input), renew the lease while the page is open and
// release it on leaving.

import { get, post, enc, may } from '../api.js';
import { onEvent } from '../sse.js';
import { h, phase, timeEl, debounce, toast, cost, duration, hashParams } from '../util.js';
import { said } from './activity.js';
import { resultView } from './diff.js';
import { transcriptPanel, describe } from './transcript.js';

// Issue 21: spec.budget in words.
const budgetText = (b) => [b.maxCostUsd != null ? `$${b.maxCostUsd}` : null, b.maxTokens != null ? `${b.maxTokens} tokens` : null]
  .filter(Boolean).join(' or ') || null;

const TERMINAL = new Set(['exited', 'failed', 'stopped']);

// status.permissions: `edits (from project)`, and the tool lists.
const permissionsView = (p) => {
  if (!p) return null;
  const rules = (label, list) => (list?.length
    ? [h('span.muted', ` · ${label} `), list.map((t, i) => [i ? ' ' : '', h('code', t)])] : null);
  return h('span', { 'data-field': 'permissions', 'data-mode': p.mode, 'data-from': p.from },
    h('strong', p.mode), ` (from ${p.from})`, rules('allows', p.allowTools), rules('denies', p.denyTools));
};

export function render(root, [project, name]) {
  const base = `/api/v1/projects/${enc(project)}/runs/${enc(name)}`;
  let run = null;
  const head = h('div');
  // The attempt's Conversation and Log: ?attempt=N (else the current
  // one), ?tab=conversation|log.
  const params = hashParams();
  const pinned = /^[1-9][0-9]*$/.test(params.get('attempt') || '') ? Number(params.get('attempt')) : null;
  const agent = transcriptPanel({ base, project, name, pinned, tab: params.get('tab') });
  const timeline = h('ol.timeline', { 'aria-label': 'timeline' });
  // run.output_appended: one per output snapshot, collapsed into a count
  // per attempt unless shown (issue 31).
  let showOutput = false;
  const output = h('pre.output', { id: 'output', 'aria-label': 'latest output' }, 'No output yet.');
  const outputMeta = h('p.muted', { id: 'output-meta' });
  const attachBox = h('div.attach', { id: 'attach' });
  // Issue 32: what the run's workspace attempt left, with its diff.
  const resultBox = h('section.panel', { hidden: true, 'aria-label': 'workspace result' });
  let shownResult = null;
  root.replaceChildren(head,
    agent.el,
    h('div.two',
      h('section.panel', h('h2', 'Timeline'), timeline),
      h('section.panel', h('h2', 'Latest output'), outputMeta, output, attachBox)),
    resultBox);

  // Attach lease: held while this page is open.
  let lease = null;
  let renewTimer = null;
  let expiry = null;
  const dropLease = () => { lease = null; clearInterval(renewTimer); renewTimer = null; };
  const release = async () => {
    if (!lease) return;
    const id = lease.leaseId;
    dropLease();
    try { await post(`${base}/attach/release`, { leaseId: id }); } catch { /* expired already */ }
  };
  const drawAttach = () => {
    const live = run && !TERMINAL.has(run.status?.phase) && run.status?.phase !== 'pending';
    if (!lease) {
      attachBox.replaceChildren(h('button', {
        type: 'button', id: 'attach-btn', disabled: !live, hidden: !may('attach', 'runs', project),
        title: live ? 'Take the attach lease and type into the run' : 'Only a started, unfinished run can be attached',
        onclick: acquire,
      }, 'Attach'));
      return;
    }
    const input = h('input', { type: 'text', id: 'attach-input', placeholder: 'Type a line for the agent, Enter to send', 'aria-label': 'input for the run', autocomplete: 'off' });
    const form = h('form.attach-form', { id: 'attach-form' }, input, h('button', { type: 'submit' }, 'Send'),
      h('button.ghost', { type: 'button', onclick: async () => { await release(); drawAttach(); } }, 'Detach'));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const text = input.value;
      if (!text || !lease) return;
      try {
        await post(`${base}/attach/input`, { leaseId: lease.leaseId, text });
        input.value = '';
      } catch (ex) {
        toast(`Input not sent: ${ex.message}`, 'error');
        if (ex.status === 404) { dropLease(); drawAttach(); }
      }
    });
    expiry = timeEl(lease.expiresAt);
    attachBox.replaceChildren(h('p.muted', `Attached as ${lease.holder}; lease expires `, expiry, ' (renewed while this page is open).'), form);
    input.focus();
  };
  async function acquire() {
    try {
      lease = await post(`${base}/attach`, {});
    } catch (e) {
      toast(e.status === 404 && e.code === 'not_found' && /no route/.test(e.message)
        ? 'This pamd cannot attach to runs.' : `Cannot attach: ${e.message}`, 'error');
      return;
    }
    const every = Math.max(1000, ((lease.ttlSeconds || 30) * 1000) / 2);
    renewTimer = setInterval(async () => {
      if (!lease) return;
      try {
        lease = { ...lease, ...(await post(`${base}/attach/renew`, { leaseId: lease.leaseId })) };
        const t = timeEl(lease.expiresAt);
        expiry?.replaceWith(t);
        expiry = t;
      } catch (e) {
        toast(`Attach lease lost: ${e.message}`, 'error');
        dropLease();
        drawAttach();
      }
    }, every);
    drawAttach();
  }

  const loadRun = async () => {
    try {
      run = await get(base);
    } catch (e) {
      head.replaceChildren(h('h1', name), h('p.error', { role: 'alert' },
        e.status === 404 ? `No run ${name} in ${project}.` : `Could not load the run: ${e.message}`));
      return;
    }
    const s = run.status || {};
    const stopped = run.spec.stopped || TERMINAL.has(s.phase);
    const stopBtn = h('button.danger', {
      type: 'button', id: 'stop', disabled: stopped, hidden: !may('signal', 'runs', project),
      title: stopped ? (TERMINAL.has(s.phase) ? 'The run has finished' : 'A stop was requested') : 'Ask the worker to stop this run',
      onclick: async () => {
        stopBtn.disabled = true;
        try { await post(`${base}/stop`); toast(`Stop requested for ${name}`, 'ok'); } catch (e) { toast(`Cannot stop ${name}: ${e.message}`, 'error'); }
        loadRun();
      },
    }, run.spec.stopped && !TERMINAL.has(s.phase) ? 'Stopping…' : 'Stop');
    // Issue 36: a finished run runs again as a new run with the same spec.
    const rerunBtn = (st) => {
      const done = TERMINAL.has(st.phase);
      const b = h('button.ghost', {
        type: 'button', id: 'rerun', disabled: !done, hidden: !may('create', 'runs', project),
        title: done ? 'Create a new run with the same spec' : 'Only a finished run can be re-run',
        onclick: async () => {
          b.disabled = true;
          try {
            const r = await post(`${base}/rerun`);
            toast(`Re-run ${r.metadata.name} created`, 'ok');
            location.hash = `#/runs/${enc(project)}/${enc(r.metadata.name)}`;
          } catch (e) {
            toast(`Cannot re-run ${name}: ${e.message}`, 'error');
            b.disabled = false;
          }
        },
      }, 'Re-run');
      return b;
    };
    const kv = (k, v) => [h('dt', k), h('dd', v ?? h('span.muted', '—'))];
    const blocked = (s.conditions || []).find((c) => c.type === 'Blocked' && c.status === 'True');
    const refused = (s.conditions || []).find((c) => c.type === 'PermissionDenied' && c.status === 'True');
    const overBudget = (s.conditions || []).find((c) => c.type === 'BudgetExceeded' && c.status === 'True');
    // Issue 31: why a pending run has no host yet.
    const waits = s.phase === 'pending' && (s.conditions || []).find((c) => c.type === 'Scheduled' && c.status === 'False');
    // Only nodes: replaceChildren would show a null as the text "null".
    head.replaceChildren(...[
      h('div.page-head', h('h1', name), phase(s.phase), stopBtn, rerunBtn(s)),
      run.metadata.annotations?.['pam.dev/rerun-of']
        ? h('p.muted', { 'data-field': 'rerun-of' }, 're-run of ',
          h('a', { href: `#/runs/${enc(project)}/${enc(run.metadata.annotations['pam.dev/rerun-of'])}` }, run.metadata.annotations['pam.dev/rerun-of']))
        : null,
      h('p', h('a', { href: `#/runs?project=${enc(project)}` }, `← runs in ${project}`)),
      h('dl.kv',
        kv('Task', h('a', { href: `#/board/${enc(project)}` }, run.spec.task)),
        kv('Provider', run.spec.provider),
        kv('Attempt', `${s.attempt ?? 0} of ${run.spec.restartPolicy?.maxAttempts ?? 1}`),
        kv('Host', s.host),
        kv('Created', timeEl(run.metadata.creationTimestamp)),
        kv('Pending since', timeEl(s.pendingSince)),
        // Issue 17: a pending run of a task with dependencies not done yet.
        ...(waits ? kv('Not scheduled', h('span.reason', { 'data-condition': 'Scheduled', title: waits.message || '' }, `${waits.reason}: ${waits.message || ''}`)) : []),
        ...(blocked ? kv('Blocked', h('span.blocked', { 'data-condition': 'Blocked' }, blocked.message)) : []),
        kv('Started', timeEl(s.startedAt)),
        kv('Finished', timeEl(s.finishedAt)),
        kv('Duration', duration(s)),
        kv('Exit code', s.exitCode != null ? String(s.exitCode) : null),
        kv('Failure reason', s.failureReason ? h('span.reason', s.failureReason) : null),
        kv('Message', s.message ? h('span.message', s.message) : null),
        // Issue 21: usage and cost, this attempt and all; the budget.
        kv('Cost', s.usage ? h('span', { 'data-cost': s.usage.total.costUsd }, cost(s.usage.total)) : null),
        kv('This attempt', s.usage ? cost(s.usage.attempt) : null),
        kv('Budget', run.spec.budget ? budgetText(run.spec.budget) : null),
        ...(overBudget ? kv('Budget exceeded', h('span.reason', { 'data-condition': 'BudgetExceeded' }, overBudget.message)) : []),
        kv('Permissions', permissionsView(s.permissions)),
        ...(refused ? kv('Permission denied', h('span.reason', { 'data-condition': 'PermissionDenied', title: refused.message || '' }, refused.message)) : []),
        kv('Session', s.sessionName ? h('code', s.sessionName) : null),
        kv('Agent session', s.sessionId ? h('code', { 'data-field': 'session-id' }, s.sessionId) : null),
        kv('Last activity', s.lastActivity ? h('span.message', { 'data-field': 'last-activity' }, describe(s.lastActivity)) : null),
        kv(run.spec.command ? 'Command' : 'Prompt', h('span.prompt', run.spec.command ? run.spec.command.join(' ') : (run.spec.prompt || '')))),
    ].filter(Boolean));
    if (lease && TERMINAL.has(s.phase)) dropLease();
    if (!lease) drawAttach();
    loadResult(s.result);
    agent.update(run);
  };

  // The latest attempt's result and its patch, read again only when the
  // run's result changed (another attempt, another head).
  const loadResult = async (r) => {
    const key = r ? `${r.attempt}/${r.headCommit}` : null;
    if (key === shownResult) return;
    shownResult = key;
    if (!r) { resultBox.hidden = true; return; }
    try {
      const full = await get(`${base}/result?attempt=${r.attempt}`);
      resultBox.replaceChildren(h('h2', 'Result'), resultView(full, full.patch));
      resultBox.hidden = false;
    } catch (e) {
      shownResult = null;
      resultBox.replaceChildren(h('h2', 'Result'), h('p.error', `Could not load the result: ${e.message}`));
      resultBox.hidden = false;
    }
  };

  const loadEvents = async () => {
    try {
      const items = (await get(`${base}/events`)).items;
      if (!items.length) { timeline.replaceChildren(h('li.muted', 'No events yet.')); return; }
      let attempt = null;
      let hidden = 0;
      const out = [];
      // A run of consecutive output events, while collapsed: one line
      // saying how many, which shows them all when clicked.
      const flush = () => {
        if (!hidden) return;
        out.push(h('li.collapsed', { 'data-collapsed': 'run.output_appended' },
          h('button.ghost', { type: 'button', onclick: () => { showOutput = true; loadEvents(); } },
            `${hidden} output snapshot${hidden === 1 ? '' : 's'} (show)`)));
        hidden = 0;
      };
      for (const e of items) {
        const a = e.payload?.attempt;
        if (a !== undefined && a !== attempt) { flush(); attempt = a; out.push(h('li.attempt', `attempt ${a}`)); }
        if (e.topic === 'run.output_appended' && !showOutput) { hidden++; continue; }
        flush();
        const st = e.payload?.status ? phase(e.payload.status) : null;
        out.push(h('li', { 'data-topic': e.topic, 'data-seq': e.seq }, h('span.topic', e.topic), ' ', st, ' ', said(e), ' ', timeEl(e.createdAt)));
      }
      flush();
      timeline.replaceChildren(...out);
    } catch (e) {
      timeline.replaceChildren(h('li.error', `Could not load events: ${e.message}`));
    }
  };

  const loadOutput = async () => {
    try {
      const o = await get(`${base}/output`);
      output.textContent = o.text || '';
      outputMeta.replaceChildren(`attempt ${o.attempt}, ${o.lines} lines, ${o.bytes} bytes, received `, timeEl(o.receivedAt));
      output.scrollTop = output.scrollHeight;
    } catch (e) {
      if (e.status !== 404) outputMeta.textContent = `Could not load output: ${e.message}`;
    }
  };

  const reloadRun = debounce(() => { loadRun(); loadEvents(); }, 150);
  const reloadOutput = debounce(loadOutput, 300);
  // Snapshots arrive every few seconds: their count (or rows) in the
  // timeline is re-read once they pause for a second (or with any other
  // event of the run), not once per snapshot.
  const reloadTimeline = debounce(loadEvents, 1000);
  const off = onEvent((e) => {
    if (!run || e.payload?.run_id !== run.metadata.uid) return;
    if (e.topic === 'run.output_appended') { reloadOutput(); reloadTimeline(); }
    else { reloadRun(); reloadOutput(); }
  });
  loadRun().then(() => { loadEvents(); loadOutput(); });
  const onUnload = () => { release(); };
  window.addEventListener('pagehide', onUnload);
  return () => { off(); agent.stop(); window.removeEventListener('pagehide', onUnload); release(); };
}
