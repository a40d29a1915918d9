// Webhooks (issue 36): each Webhook with its URL, topics and backlog, and
// its recent deliveries — status, attempts, the last HTTP code or error —
// failed ones highlighted first, each with a Redeliver button (the same
// delivery, id and body, due now). Live: a delivery changes no event, so
// the page polls every 5 s while shown; a failed poll shows its message
// once, not once per poll.

import { get, post, enc } from '../api.js';
import { h, empty, timeEl, toast, code } from '../util.js';

const POLL_MS = 5000;

export function render(root) {
  let gone = false;
  let shown = null;
  let timer = null;

  const redeliver = async (d) => {
    try {
      await post(`/api/v1/webhookdeliveries/${enc(d.id)}/redeliver`);
      toast(`Delivery ${d.topic} #${d.seq} to ${d.webhook}: due now`, 'ok');
    } catch (e) {
      toast(`Cannot redeliver: ${e.message}`, 'error');
    }
    load();
  };

  const row = (d) => h('tr', { 'data-delivery': d.id, 'data-status': d.status, class: d.status === 'failed' ? 'failed-row' : null },
    // The phase badge's colours (delivered green, failed red, pending amber), the status's word.
    h('td', h('span.phase', { class: `phase-${{ delivered: 'exited', failed: 'failed' }[d.status] || 'pending'}`, 'data-phase': d.status }, d.status)),
    h('td', code(d.topic), h('span.muted', ` #${d.seq}`)),
    h('td', { 'data-field': 'attempts' }, String(d.attempts)),
    h('td', { 'data-field': 'last' }, d.lastCode ? code(String(d.lastCode)) : null, d.lastError ? h('span.error', ` ${d.lastError}`) : null,
      !d.lastCode && !d.lastError ? h('span.muted', '—') : null),
    h('td', d.lastAttemptAt ? timeEl(d.lastAttemptAt) : h('span.muted', 'never'),
      d.status === 'pending' && d.nextAttemptAt ? h('span.muted', ' · next ', timeEl(d.nextAttemptAt)) : null),
    h('td', d.status === 'pending' ? null
      : h('button.small', { type: 'button', 'data-action': 'redeliver', onclick: () => redeliver(d) }, 'Redeliver')));

  const hook = (w, deliveries) => {
    const mine = deliveries.filter((d) => d.webhook === w.metadata.name);
    // Failures first, then newest first.
    mine.sort((a, b) => (a.status === 'failed' ? 0 : 1) - (b.status === 'failed' ? 0 : 1) || b.seq - a.seq);
    const st = w.status || {};
    return h('article.source', { 'data-webhook': w.metadata.name },
      h('div.row', h('h3', w.metadata.name),
        h('span', st.failed ? h('span.reason', { 'data-field': 'failed' }, `${st.failed} failed`) : null,
          ' ', h('span.muted', { 'data-field': 'pending' }, `${st.pending || 0} pending`))),
      h('p.muted.wrap', code(w.spec?.url || '?'), ' · topics ', (w.spec?.topics || []).length
        ? (w.spec.topics).map((t) => h('span.tag', t)) : h('span.tag', 'all'),
      (w.spec?.projects || []).length ? [' · projects ', w.spec.projects.map((p) => h('span.tag', p))] : null),
      mine.length
        ? h('div.table-wrap', h('table.deliveries',
          h('thead', h('tr', ['Status', 'Event', 'Attempts', 'Last response', 'Last attempt', ''].map((c) => h('th', c)))),
          h('tbody', mine.map(row))))
        : h('p.muted', 'No deliveries yet.'));
  };

  const load = async () => {
    clearTimeout(timer);
    try {
      const [hooks, deliveries] = await Promise.all([get('/api/v1/webhooks'), get('/api/v1/webhookdeliveries?limit=200')]);
      shown = null;
      if (gone) return;
      root.replaceChildren(
        h('h1', 'Webhooks'),
        hooks.items.length === 0
          ? empty('No webhooks.', 'Send pam\'s events to a URL: apply a ', code('kind: Webhook'), ' (see ', code('examples/webhooks.yaml'), ').')
          : h('div.sources', hooks.items.map((w) => hook(w, deliveries.items))));
    } catch (e) {
      const msg = `Could not load webhooks: ${e.message}`;
      if (shown !== msg && !gone) {
        shown = msg;
        root.replaceChildren(h('h1', 'Webhooks'), h('p.error', { role: 'alert' }, msg));
      }
    }
    if (!gone) timer = setTimeout(load, POLL_MS);
  };
  load();
  return () => { gone = true; clearTimeout(timer); };
}
