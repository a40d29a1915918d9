// A project's Schedules and Secrets (issue 18): each Schedule's timetable,
// last and next tick, active runs, last result and a "Run now" button;
// each Secret by key only — name, size, digest — never a value (the API
// has none to give). Live: schedule.* and run.* events reload the page.

import { get, post, enc, may } from '../api.js';
import { onEvent } from '../sse.js';
import { h, empty, phase, timeEl, debounce, toast, code } from '../util.js';

export function render(root, [project]) {
  const base = `/api/v1/projects/${enc(project)}`;
  const trigger = async (name) => {
    try {
      const r = await post(`${base}/schedules/${enc(name)}/trigger`);
      toast(`${name}: run ${r.run} started`, 'ok');
    } catch (e) {
      toast(`Cannot trigger ${name}: ${e.message}`, 'error');
    }
    load();
  };

  const schedule = (x) => {
    const s = x.status || {};
    const name = x.metadata.name;
    const runLink = (r) => h('a.tag', { href: `#/runs/${enc(project)}/${enc(r)}` }, r);
    return h('article.source', { 'data-schedule': name },
      h('div.row',
        h('h3', name),
        x.spec.suspend ? h('span.tag', 'suspended') : phase('active'),
        h('button.small', { type: 'button', 'data-action': 'trigger', hidden: !may('trigger', 'schedules', project), onclick: () => trigger(name) }, 'Run now')),
      h('p.muted', code(x.spec.schedule), ' in ', code(x.spec.timeZone || 'UTC'), ' → task ',
        code(x.spec.runTemplate?.task || '?'), ' with ', code(x.spec.runTemplate?.provider || '?'),
        ' · ', x.spec.concurrencyPolicy || 'Allow'),
      h('dl.facts',
        h('dt', 'Last'), h('dd', { 'data-field': 'last' }, s.lastScheduleTime ? timeEl(s.lastScheduleTime) : h('span.muted', 'never')),
        h('dt', 'Next'), h('dd', { 'data-field': 'next' }, s.nextScheduleTime ? timeEl(s.nextScheduleTime) : h('span.muted', 'none')),
        h('dt', 'Active'), h('dd', { 'data-field': 'active' }, (s.active || []).length ? (s.active || []).map(runLink) : h('span.muted', 'none')),
        h('dt', 'Last result'), h('dd', { 'data-field': 'result' }, s.lastResult || h('span.muted', 'none yet'))));
  };

  const secret = (x) => {
    const keys = x.status?.keys || [];
    return h('article.source', { 'data-secret': x.metadata.name },
      h('div.row', h('h3', x.metadata.name), h('span.muted', `key ${x.status?.keyId || '?'}`)),
      keys.length
        ? h('ul', keys.map((k) => h('li', { 'data-key': k.name }, code(k.name), h('span.muted', ` ${k.size} bytes · ${k.digest}`))))
        : h('p.muted', 'no keys'));
  };

  const load = async () => {
    try {
      const [schedules, secrets] = await Promise.all([get(`${base}/schedules`), get(`${base}/secrets`)]);
      root.replaceChildren(
        h('div.page-head', h('h1', `${project}: schedules and secrets`),
          h('a.ghost', { href: `#/board/${enc(project)}` }, 'Board')),
        h('h2', 'Schedules'),
        schedules.items.length
          ? h('div.sources', schedules.items.map(schedule))
          : empty('No schedules.', 'Start runs on a timetable: apply a ', code('kind: Schedule'), ' (see ', code('examples/schedules.yaml'), ').'),
        h('h2', 'Secrets'),
        secrets.items.length
          ? h('div.sources', secrets.items.map(secret))
          : empty('No secrets.', 'Give runs provider keys: apply a ', code('kind: Secret'), ' (see ', code('examples/secrets.yaml'), ').'));
    } catch (e) {
      root.replaceChildren(h('h1', project), h('p.error', { role: 'alert' },
        e.status === 404 ? `No project named ${project}.` : `Could not load: ${e.message}`));
    }
  };
  const reload = debounce(load, 200);
  const off = onEvent((e) => { if (/^(schedule|run)\./.test(e.topic) && e.topic !== 'run.output_appended') reload(); });
  load();
  return off;
}
