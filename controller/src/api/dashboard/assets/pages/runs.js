// Runs: a live table of every run, filterable by phase, host and project
// (the filters live in the URL hash, so a filtered view can be shared).

import { get, enc } from '../api.js';
import { onEvent } from '../sse.js';
import { h, empty, phase, timeEl, debounce, hashParams, code, cost, duration } from '../util.js';

const PHASES = ['pending', 'spawning', 'running', 'exited', 'failed', 'stopped'];

export function render(root) {
  const params = hashParams();
  const f = { phase: params.get('phase') || '', host: params.get('host') || '', project: params.get('project') || '' };

  const setFilter = (k, v) => {
    const q = new URLSearchParams({ ...f, [k]: v });
    for (const [key, val] of [...q]) if (!val) q.delete(key);
    const s = q.toString();
    location.hash = `#/runs${s ? `?${s}` : ''}`;
  };
  const select = (k, label, options) => h('label.filter', label,
    h('select', { 'data-filter': k, onchange: (e) => setFilter(k, e.target.value) },
      h('option', { value: '' }, 'all'),
      options.map((o) => h('option', { value: o, selected: f[k] === o }, o))));

  const load = async () => {
    try {
      const q = new URLSearchParams();
      if (f.phase) q.set('phase', f.phase);
      if (f.host) q.set('host', f.host);
      const path = f.project ? `/api/v1/projects/${enc(f.project)}/runs` : '/api/v1/runs';
      const [runs, hosts, projects] = await Promise.all([
        get(`${path}?${q}`), get('/api/v1/hosts'), get('/api/v1/projects')]);
      draw(runs.items, hosts.items.map((x) => x.metadata.name), projects.items.map((x) => x.metadata.name));
    } catch (e) {
      root.replaceChildren(h('h1', 'Runs'), h('p.error', { role: 'alert' }, `Could not load runs: ${e.message}`));
    }
  };

  const draw = (runs, hosts, projects) => {
    runs.sort((a, b) => (b.metadata.creationTimestamp || '').localeCompare(a.metadata.creationTimestamp || ''));
    const filtered = f.phase || f.host || f.project;
    const row = (r) => {
      const s = r.status || {};
      const href = `#/runs/${enc(r.metadata.project)}/${enc(r.metadata.name)}`;
      // Issue 31: why a pending run waits, its message in the tooltip.
      const waits = s.phase === 'pending' && (s.conditions || []).find((c) => c.type === 'Scheduled' && c.status === 'False');
      return h('tr', { 'data-run': r.metadata.name, 'data-project': r.metadata.project },
        h('td', h('a', { href }, r.metadata.name)),
        h('td', h('a', { href: `#/board/${enc(r.metadata.project)}` }, r.metadata.project)),
        h('td', r.spec.task),
        h('td', phase(s.phase)),
        h('td.num', String(s.attempt ?? 0), h('span.muted', `/${r.spec.restartPolicy?.maxAttempts ?? 1}`)),
        h('td', s.host || h('span.muted', '—')),
        h('td', r.spec.provider),
        h('td', timeEl(r.metadata.creationTimestamp)),
        h('td.num', duration(s)),
        h('td', waits ? h('span.reason', { 'data-condition': 'Scheduled', title: waits.message || '' }, waits.reason)
          : s.failureReason ? h('span.reason', { title: s.message || '' }, s.failureReason) : (s.exitCode != null ? h('span.muted', `exit ${s.exitCode}`) : '')),
        // Issue 21: every attempt's usage together.
        h('td.num', { 'data-cost': s.usage?.total?.costUsd ?? '' }, cost(s.usage?.total) ?? h('span.muted', '—')));
    };
    root.replaceChildren(
      h('h1', 'Runs'),
      h('div.filters', select('phase', 'Phase', PHASES), select('host', 'Host', hosts), select('project', 'Project', projects),
        filtered ? h('a.ghost', { href: '#/runs' }, 'Clear filters') : null),
      runs.length === 0
        ? (filtered ? empty('No runs match these filters.', 'Clear them to see every run.')
          : empty('No runs yet.', 'Start one by applying a Run manifest: ', code('pamctl apply -f runs.yaml'), '.'))
        : h('div.table-wrap', h('table.runs',
          h('thead', h('tr', ['Run', 'Project', 'Task', 'Phase', 'Attempt', 'Host', 'Provider', 'Created', 'Duration', 'Waits / failure / exit', 'Cost'].map((c) => h('th', c)))),
          h('tbody', runs.map(row)))));
  };

  const reload = debounce(load, 200);
  const off = onEvent((e) => { if (/^(run|worker)\./.test(e.topic) && e.topic !== 'run.output_appended') reload(); });
  load();
  return off;
}
