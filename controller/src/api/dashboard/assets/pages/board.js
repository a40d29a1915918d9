// Board: one project's tasks and subtasks in columns todo/doing/done/
// cancelled, in lanes under their milestone/epic. Dragging a card asks the
// API for the transition (the same state-machine gate as pamctl's task
// verbs); a refused move snaps back with the reason. Cancelling first shows
// the cascade (a dry run) and asks. Parents' roll-up ratios are display
// only: a parent never auto-completes. A card whose task depends on tasks
// that are not done shows a badge naming them (issue 17).

import { get, post, enc } from '../api.js';
import { onEvent } from '../sse.js';
import { h, empty, phase, ratio, fixBars, debounce, toast, confirmDialog, code, cost, duration } from '../util.js';

// Issue 21: a project over its budget dispatches no new runs; say so.
const budgetHeld = (p) => {
  const c = (p.status?.conditions || []).find((x) => x.type === 'BudgetExceeded' && x.status === 'True');
  return c ? h('span.reason', { 'data-condition': 'BudgetExceeded', title: c.message }, 'over budget') : null;
};

const COLUMNS = ['todo', 'doing', 'done', 'cancelled'];
const CONTAINERS = new Set(['milestone', 'epic']);

export function render(root, [project]) {
  let tasks = [];
  let byName = new Map();
  let results = new Map();
  let latest = new Map();
  let busy = false;

  const load = async () => {
    try {
      const [p, list, runs] = await Promise.all([
        get(`/api/v1/projects/${enc(project)}`),
        get(`/api/v1/projects/${enc(project)}/tasks`),
        get(`/api/v1/projects/${enc(project)}/runs`),
      ]);
      tasks = list.items;
      // Issue 36: each task's latest run, with its duration on the card.
      latest = new Map();
      for (const r of [...runs.items].sort((a, b) => a.metadata.creationTimestamp.localeCompare(b.metadata.creationTimestamp))) {
        latest.set(r.spec.task, r);
      }
      // Issue 32: each task's latest run with a workspace result.
      results = new Map();
      for (const r of runs.items.filter((x) => x.status?.result)
        .sort((a, b) => a.metadata.creationTimestamp.localeCompare(b.metadata.creationTimestamp))) {
        results.set(r.spec.task, r);
      }
      byName = new Map(tasks.map((t) => [t.metadata.name, t]));
      draw(p);
    } catch (e) {
      root.replaceChildren(h('p.error', { role: 'alert' },
        e.status === 404 ? `No project named ${project}.` : `Could not load the board: ${e.message}`));
    }
  };

  // The nearest milestone/epic above a task, or null.
  const container = (t) => {
    let p = t.spec.parent && byName.get(t.spec.parent);
    const seen = new Set();
    while (p && !seen.has(p.metadata.name)) {
      seen.add(p.metadata.name);
      if (CONTAINERS.has(p.spec.type)) return p;
      p = p.spec.parent && byName.get(p.spec.parent);
    }
    return null;
  };
  const crumbs = (c) => {
    const out = [];
    for (let p = c; p; p = p.spec.parent && byName.get(p.spec.parent)) {
      out.unshift(p.spec.title || p.metadata.name);
      if (out.length > 8) break;
    }
    return out.join(' › ');
  };
  const order = (a, b) => (a.spec.sortOrder ?? 0) - (b.spec.sortOrder ?? 0) || a.metadata.name.localeCompare(b.metadata.name);

  const card = (t) => {
    const parent = t.spec.parent && byName.get(t.spec.parent);
    const sub = t.spec.type === 'subtask' || (parent && !CONTAINERS.has(parent.spec.type));
    return h('article.card', {
      draggable: 'true', 'data-task': t.metadata.name, 'data-phase': t.status.phase, tabindex: '0',
      title: `${t.metadata.name} — drag to another column (or focus and press ← →) to change its status`,
      'aria-label': `${t.spec.title || t.metadata.name}, ${t.status.phase}`,
      onkeydown: (e) => {
        // Keyboard moves: ← / → to the neighbouring column, through the same gate.
        const i = COLUMNS.indexOf(t.status.phase);
        const to = e.key === 'ArrowRight' ? COLUMNS[i + 1] : e.key === 'ArrowLeft' ? COLUMNS[i - 1] : null;
        if (!to) return;
        e.preventDefault();
        move(t.metadata.name, to, e.currentTarget.closest('.lane')?.querySelector(`.cell[data-column="${to}"]`));
      },
      ondragstart: (e) => { e.dataTransfer.setData('text/plain', t.metadata.name); e.dataTransfer.effectAllowed = 'move'; e.currentTarget.classList.add('dragging'); },
      ondragend: (e) => e.currentTarget.classList.remove('dragging'),
    },
    h('div.card-title', t.spec.title || t.metadata.name),
    sub && parent ? h('div.card-parent.muted', `↳ ${parent.spec.title || parent.metadata.name}`) : null,
    h('div.card-meta',
      h('span.name', t.metadata.name),
      t.spec.type === 'subtask' ? h('span.tag', 'subtask') : null,
      t.spec.assignee ? h('span.tag', `@${t.spec.assignee}`) : null,
      // Issue 17: its runs wait until these tasks are done.
      t.status.blockedBy?.length
        ? h('span.tag.blocked', { 'data-blocked-by': t.status.blockedBy.join(','), title: `Runs of ${t.metadata.name} wait until these tasks are done` },
          `waits for ${t.status.blockedBy.join(', ')}`)
        : null,
      t.status.usage ? h('span.tag', { 'data-cost': t.status.usage.costUsd }, cost(t.status.usage)) : null,
      latest.has(t.metadata.name) ? (() => {
        const r = latest.get(t.metadata.name);
        return h('a.tag', { href: `#/runs/${enc(project)}/${enc(r.metadata.name)}`, 'data-latest-run': r.metadata.name,
          title: `latest run ${r.metadata.name}: ${r.status?.phase}` }, phase(r.status?.phase), ' ', duration(r.status));
      })() : null,
      results.has(t.metadata.name) ? (() => {
        const r = results.get(t.metadata.name);
        return h('a.tag.diffstat', { href: `#/runs/${enc(project)}/${enc(r.metadata.name)}`, 'data-diffstat': r.metadata.name,
          title: `${r.metadata.name}: ${r.status.result.filesChanged} file(s) changed on ${r.status.result.branch}` },
        h('span.add', `+${r.status.result.insertions}`), ' ', h('span.del', `−${r.status.result.deletions}`));
      })() : null,
      ratio(t.status.completion)));
  };

  const cell = (col, cards) => h('div.cell', {
    'data-column': col,
    ondragover: (e) => { e.preventDefault(); e.dataTransfer.dropEffect = 'move'; e.currentTarget.classList.add('over'); },
    ondragleave: (e) => e.currentTarget.classList.remove('over'),
    ondrop: (e) => {
      e.preventDefault();
      e.currentTarget.classList.remove('over');
      const name = e.dataTransfer.getData('text/plain');
      if (name) move(name, col, e.currentTarget);
    },
  }, cards);

  const draw = (p) => {
    const items = tasks.filter((t) => !CONTAINERS.has(t.spec.type));
    const containers = tasks.filter((t) => CONTAINERS.has(t.spec.type))
      .sort((a, b) => (a.status.path || '').localeCompare(b.status.path || ''));
    const lanes = new Map([[null, []]]);
    for (const c of containers) lanes.set(c.metadata.name, []);
    for (const t of items) lanes.get(container(t)?.metadata.name ?? null).push(t);
    const lane = (c, list) => h('div.lane', { 'data-lane': c ? c.metadata.name : '' },
      h('div.lane-head',
        h('span.lane-title', c ? crumbs(c) : 'Not under a milestone or epic'),
        c ? h('span.tag', c.spec.type) : null,
        c ? phase(c.status.phase) : null,
        c ? ratio(c.status.completion) : null),
      c && !list.length
        ? h('p.muted.lane-empty', `No tasks directly under this ${c.spec.type}.`)
        : h('div.lane-cells', COLUMNS.map((col) => cell(col, list.filter((t) => t.status.phase === col).sort(order).map(card)))));
    const laneEls = [];
    for (const c of containers) laneEls.push(lane(c, lanes.get(c.metadata.name)));
    if (lanes.get(null).length) laneEls.push(lane(null, lanes.get(null)));
    root.replaceChildren(
      h('div.page-head',
        h('h1', p.spec.displayName || p.metadata.name), phase(p.status?.phase),
        // Issue 21: the project's total, and why nothing dispatches.
        p.status?.usage ? h('span.muted', { 'data-cost': p.status.usage.costUsd }, cost(p.status.usage)) : null,
        budgetHeld(p),
        h('a.ghost', { href: `#/runs?project=${enc(project)}` }, 'Runs in this project'),
        h('a.ghost', { href: `#/charts/${enc(project)}`, 'data-link': 'charts' }, 'Charts'),
        h('a.ghost', { href: `#/automation/${enc(project)}` }, 'Schedules and secrets')),
      tasks.length === 0
        ? empty('This project has no tasks yet.', 'Add some in YAML and apply them: ', code(`pamctl apply -f tasks.yaml`), '.')
        : h('div.board',
          h('div.columns', COLUMNS.map((c) => h('div.col-head', { 'data-col-head': c }, phase(c), h('span.count', String(items.filter((t) => t.status.phase === c).length))))),
          laneEls));
    fixBars(root);
  };

  const move = async (name, to, target) => {
    const t = byName.get(name);
    if (!t || t.status.phase === to || busy) return;
    const url = `/api/v1/projects/${enc(project)}/tasks/${enc(name)}/transition`;
    busy = true;
    let refused = false;
    try {
      if (to === 'cancelled') {
        const dry = await post(url, { to, dryRun: true });
        const others = (dry.cascade || []).filter((n) => n !== name);
        const ok = await confirmDialog(`Cancel ${t.spec.title || name}?`,
          others.length
            ? h('div', h('p', `This also cancels ${others.length} task(s) under it:`), h('ul.cascade', others.map((n) => h('li', { 'data-cascade': n }, n))))
            : h('p', 'Nothing under it is cancelled with it.'),
          'Cancel task');
        if (!ok) { await load(); return; }
      }
      const el = root.querySelector(`[data-task="${CSS.escape(name)}"]`);
      if (el && target) { el.classList.add('moving'); target.append(el); }
      const res = await post(url, { to });
      const extra = (res.cascade || []).filter((n) => n !== name);
      toast(`${name}: ${t.status.phase} → ${to}${extra.length ? ` (also cancelled: ${extra.join(', ')})` : ''}`, 'ok');
    } catch (e) {
      refused = true;
      toast(`Cannot move ${name} to ${to}: ${e.message}`, 'error');
    } finally {
      busy = false;
      await load();
    }
    const after = root.querySelector(`[data-task="${CSS.escape(name)}"]`);
    if (refused) after?.classList.add('refused');
    after?.focus();
  };

  const reload = debounce(() => { if (!busy) load(); }, 200);
  const off = onEvent((e) => { if (/^(work_item|project)\./.test(e.topic)) reload(); });
  load();
  return off;
}
