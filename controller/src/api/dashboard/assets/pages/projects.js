// Projects: active and archived, with completion ratios (done / non-cancelled
// tasks and subtasks).

import { get } from '../api.js';
import { onEvent } from '../sse.js';
import { h, empty, phase, ratio, fixBars, debounce, code, cost } from '../util.js';

export function render(root) {
  const load = async () => {
    try {
      const [projects, tasks] = await Promise.all([get('/api/v1/projects'), get('/api/v1/tasks')]);
      draw(projects.items, tasks.items);
    } catch (e) {
      root.replaceChildren(h('p.error', { role: 'alert' }, `Could not load projects: ${e.message}`));
    }
  };
  const draw = (projects, tasks) => {
    const per = new Map();
    // Milestones and epics are containers: the ratio counts tasks and subtasks.
    for (const t of tasks) {
      if (t.spec.type === 'milestone' || t.spec.type === 'epic') continue;
      const c = per.get(t.metadata.project) || { done: 0, total: 0, open: 0 };
      const p = t.status?.phase;
      if (p !== 'cancelled') c.total += 1;
      if (p === 'done') c.done += 1;
      if (p === 'todo' || p === 'doing') c.open += 1;
      per.set(t.metadata.project, c);
    }
    const card = (p) => {
      const c = per.get(p.metadata.name) || { done: 0, total: 0, open: 0 };
      return h('a.project-card', { href: `#/board/${encodeURIComponent(p.metadata.name)}`, 'data-project': p.metadata.name },
        h('div.row', h('h3', p.spec.displayName || p.metadata.name), phase(p.status?.phase || 'active')),
        p.spec.description ? h('p.muted', p.spec.description) : null,
        p.status?.source ? h('p.muted', { 'data-source': p.status.source }, 'from Source ', h('strong', p.status.source)) : null,
        h('div.row', c.total ? h('span', ratio(c), h('span.muted', ' tasks done')) : h('span.muted', 'no tasks yet'), h('span.muted', `${c.open} open`)),
        // Issue 21: what all its runs cost.
        p.status?.usage ? h('p.muted', { 'data-cost': p.status.usage.costUsd }, cost(p.status.usage)) : null);
    };
    const active = projects.filter((p) => p.status?.phase !== 'archived');
    const archived = projects.filter((p) => p.status?.phase === 'archived');
    root.replaceChildren(
      h('h1', 'Projects'),
      projects.length === 0
        ? empty('No projects yet.', 'Describe one in YAML and apply it: ', code('pamctl apply -f examples/'), '.')
        : h('div',
          h('h2', `Active (${active.length})`),
          active.length ? h('div.grid', active.map(card)) : empty('No active projects.'),
          archived.length ? [h('h2', `Archived (${archived.length})`), h('div.grid', archived.map(card))] : null));
    fixBars(root);
  };
  const reload = debounce(load, 200);
  const off = onEvent((e) => { if (/^(project|work_item|source)\./.test(e.topic)) reload(); });
  load();
  return off;
}
