// Activity: the event journal, newest first, live, filterable by topic.
// Each event reads as a sentence — its reason, object and message, as the
// server renders them (issue 31) — never as its payload's JSON. The
// high-rate run.output_appended (one per output snapshot) is collapsed
// into a count unless shown.

import { get } from '../api.js';
import { onEvent } from '../sse.js';
import { h, empty, timeEl, hashParams } from '../util.js';

const GROUPS = ['project.', 'work_item.', 'run.', 'worker.', 'source.', 'schedule.'];
const OUTPUT = 'run.output_appended';
const KEEP = 300;

/** One event's words: reason, object, message (shared with the run page). */
export function said(e) {
  return [h('span.ev-reason', e.reason || ''), ' ',
    e.object ? h('span.ev-object.muted', e.object) : null, ' ',
    h('span.ev-message', e.message || '')];
}

export function render(root) {
  const params = hashParams();
  let topic = params.get('topic') || '';
  let showOutput = params.get('output') === '1';
  let events = [];
  const list = h('ol.feed', { 'aria-label': 'events' });
  const match = (e) => !topic || (topic.endsWith('.') ? e.topic.startsWith(topic) : e.topic === topic);
  const item = (e) => h('li', { 'data-topic': e.topic, 'data-seq': e.seq },
    h('span.seq.muted', `#${e.seq}`), h('span.topic', { class: `t-${e.topic.split('.')[0]}` }, e.topic),
    h('span.summary', said(e)), timeEl(e.createdAt));
  const toggle = h('input', { type: 'checkbox', 'data-filter': 'output', checked: showOutput,
    onchange: (e) => { showOutput = e.target.checked; draw(); } });
  const hiddenCount = h('span.muted', { 'data-hidden-output': '' });
  const draw = () => {
    const matching = events.filter(match);
    const hidden = showOutput ? 0 : matching.filter((e) => e.topic === OUTPUT).length;
    hiddenCount.textContent = hidden ? `(${hidden} hidden)` : '';
    const shown = matching.filter((e) => showOutput || e.topic !== OUTPUT).slice(0, KEEP);
    list.replaceChildren(...(shown.length ? shown.map(item)
      : [h('li', empty(topic ? `No ${topic} events yet.` : 'No events yet.', 'Events appear here as projects, tasks, runs and workers change.'))]));
  };
  const select = h('select', { 'data-filter': 'topic', onchange: (e) => { topic = e.target.value; draw(); } },
    h('option', { value: '' }, 'all topics'),
    GROUPS.map((g) => h('option', { value: g, selected: topic === g }, `${g}*`)));
  root.replaceChildren(h('h1', 'Activity'),
    h('div.filters', h('label.filter', 'Topic', select), h('label.filter', toggle, ' Run output events ', hiddenCount)), list);

  const load = async () => {
    // The journal reads oldest-first; page to its end and keep the newest.
    let after = 0, all = [];
    for (let i = 0; i < 50; i++) {
      const { items } = await get(`/api/v1/events?after=${after}&limit=1000`);
      all = all.concat(items).slice(-2000);
      if (items.length < 1000) break;
      after = items[items.length - 1].seq;
    }
    const seen = new Set(events.map((e) => e.seq));
    events = events.concat(all.filter((e) => !seen.has(e.seq))).sort((a, b) => b.seq - a.seq).slice(0, 2000);
    draw();
  };
  const off = onEvent((e) => {
    if (e.topic === 'gap' || events.some((x) => x.seq === e.seq)) return;
    events.unshift(e);
    if (events.length > 2000) events.length = 2000;
    draw();
  });
  load().catch((e) => list.replaceChildren(h('li.error', `Could not load events: ${e.message}`)));
  return off;
}
