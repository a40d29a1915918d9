// Sources (GitOps): each Source's sync and health, the revision it applied,
// when it last synced, the last failed sync's errors with file:line, the
// drift list, a "Sync now" button, and (issue 35) its owned objects as a
// tree — project, then each object with its own sync and health, read from
// a get of the one Source when the tree is opened and on every change. Live: every source.* event (and the
// project/work_item/run changes that move health) reloads the list.

import { get, post, enc } from '../api.js';
import { onEvent } from '../sse.js';
import { h, empty, phase, timeEl, debounce, toast, code } from '../util.js';

/** Where a Source reads from, in one line. */
function origin(spec) {
  if (spec.path) return h('span', 'directory ', code(spec.path));
  const g = spec.git || {};
  return h('span', 'git ', code(g.url || '?'), g.ref ? [' @ ', code(g.ref)] : null, g.path ? [' / ', code(g.path)] : null);
}

/** `file: document N, line L, column C: path: message`, as pamctl prints it. */
function where(e) {
  const at = [e.file || '-'];
  if (e.document !== undefined && e.document !== null) at.push(`document ${e.document}`);
  if (e.line) at.push(`line ${e.line}`);
  if (e.column) at.push(`column ${e.column}`);
  return at.join(', ');
}

export function render(root) {
  let gone = false;
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const syncNow = async (name) => {
    try {
      await post(`/api/v1/sources/${enc(name)}/sync`);
      toast(`${name}: sync requested`, 'ok');
    } catch (e) {
      toast(`Cannot sync ${name}: ${e.message}`, 'error');
      load();
      return;
    }
    load();
    // A sync that finds nothing new journals no event: watch the request
    // until the loop has taken it (at most 30 s), then redraw.
    for (let i = 0; i < 60 && !gone; i++) {
      await sleep(500);
      try {
        const s = await get(`/api/v1/sources/${enc(name)}`);
        if (!s.status?.syncRequestedAt) break;
      } catch { break; }
    }
    if (!gone) load();
  };

  // Issue 36: suspend (no sync until resumed) and resume, like `flux
  // suspend source`; pamd sets spec.suspend.
  const setSuspend = async (name, suspend) => {
    const verb = suspend ? 'suspend' : 'resume';
    try {
      await post(`/api/v1/sources/${enc(name)}/${verb}`);
      toast(`${name}: ${suspend ? 'suspended' : 'resumed'}`, 'ok');
    } catch (e) {
      toast(`Cannot ${verb} ${name}: ${e.message}`, 'error');
    }
    load();
  };

  // Issue 35: the open object trees (by Source name) and what they show.
  const openTrees = new Set();
  const trees = new Map();
  const loadTree = async (name) => {
    try {
      const s = await get(`/api/v1/sources/${enc(name)}`);
      trees.set(name, { objects: s.status?.objects || [], omitted: s.status?.objectsOmitted || 0 });
    } catch (e) {
      trees.set(name, { error: e.message });
    }
    const slot = root.querySelector(`[data-objects="${CSS.escape(name)}"] .tree`);
    if (slot) slot.replaceChildren(treeOf(name));
  };
  const treeOf = (name) => {
    const t = trees.get(name);
    if (!t) return h('p.muted', 'Loading…');
    if (t.error) return h('p.error', `Could not load the objects: ${t.error}`);
    if (!t.objects.length) return h('p.muted', 'No objects owned yet.');
    const byProject = new Map();
    for (const o of t.objects) {
      const p = o.kind === 'Project' ? o.name : (o.project || '');
      if (!byProject.has(p)) byProject.set(p, []);
      byProject.get(p).push(o);
    }
    return h('ul.tree', [...byProject].map(([p, objs]) => h('li',
      h('span.muted', p ? `project ${p}` : 'cluster'),
      h('ul', objs.map((o) => h('li', {
        'data-object': `${o.kind}/${o.project ? `${o.project}/` : ''}${o.name}`,
        'data-sync': o.sync, 'data-health': o.health,
      }, `${o.kind} `, code(o.name), ' ', phase(o.sync), ' ', phase(o.health),
      o.message ? h('span.muted', ` ${o.message}`) : null))))),
    t.omitted ? h('p.muted', `… and ${t.omitted} more`) : null);
  };

  // A failed load shows its message once: the reloads that follow (every
  // source.* event) do not repeat it while it is the same.
  let shown = null;
  const load = async () => {
    try {
      draw((await get('/api/v1/sources')).items);
      shown = null;
      for (const name of openTrees) loadTree(name);
    } catch (e) {
      const msg = `Could not load sources: ${e.message}`;
      if (shown === msg) return;
      shown = msg;
      root.replaceChildren(h('h1', 'Sources'), h('p.error', { role: 'alert' }, msg));
    }
  };

  const card = (x) => {
    const s = x.status || {};
    const name = x.metadata.name;
    const errors = s.errors || [];
    const drift = s.drift || [];
    const rev = s.revision ? s.revision.replace(/^sha256:/, '').slice(0, 7) : null;
    return h('article.source', { 'data-source': name, 'data-sync': s.sync || 'Unknown', 'data-health': s.health || 'Unknown' },
      h('div.row',
        h('h3', name),
        h('span', phase(s.sync || 'Unknown', s.syncMessage), ' ', phase(s.health || 'Unknown', s.healthMessage)),
        h('button.small', { type: 'button', 'data-action': 'sync', disabled: x.spec.suspend,
          title: x.spec.suspend ? 'suspended: resume it (spec.suspend: false) to sync' : 'fetch and apply now',
          onclick: () => syncNow(name) }, s.syncRequestedAt ? 'Sync requested…' : 'Sync now'),
        h('button.small.ghost', { type: 'button', 'data-action': x.spec.suspend ? 'resume' : 'suspend',
          title: x.spec.suspend ? 'sync again (spec.suspend: false)' : 'stop syncing until resumed (spec.suspend: true)',
          onclick: () => setSuspend(name, !x.spec.suspend) }, x.spec.suspend ? 'Resume' : 'Suspend')),
      h('p.muted', origin(x.spec), ' → projects ', (x.spec.projects || []).map((p) => h('a.tag', { href: `#/board/${enc(p)}` }, p)),
        x.spec.suspend ? h('span.tag', 'suspended') : null,
        x.spec.selfHeal ? h('span.tag', 'self-heal') : null,
        x.spec.prune === false ? h('span.tag', 'no prune') : null),
      h('dl.facts',
        h('dt', 'Revision'), h('dd', { 'data-field': 'revision', title: s.revision || '' }, rev ? code(rev) : h('span.muted', 'none applied yet')),
        h('dt', 'Last synced'), h('dd', timeEl(s.lastSyncedAt)),
        h('dt', 'Objects'), h('dd', { 'data-field': 'inventory' }, String(s.inventory ?? 0))),
      s.syncMessage && s.sync !== 'Synced' && !errors.length ? h('p', { class: s.sync === 'Failed' ? 'error' : 'muted', 'data-field': 'message' }, s.syncMessage) : null,
      errors.length
        ? h('div.source-errors', { role: s.sync === 'Failed' ? 'alert' : null },
          h('h4', `Last error${errors.length > 1 ? `s (${errors.length})` : ''}`),
          h('ul', errors.map((e) => h('li', { 'data-file': e.file || '', 'data-line': e.line ?? '' },
            code(where(e)), ': ', e.path ? [code(e.path), ': '] : null, e.message))))
        : null,
      h('details.source-objects', {
        'data-objects': name,
        open: openTrees.has(name),
        ontoggle: (ev) => {
          // (A redraw of an open tree fires this too: load() reloads it.)
          if (ev.target.open && !openTrees.has(name)) { openTrees.add(name); loadTree(name); }
          if (!ev.target.open) openTrees.delete(name);
        },
      }, h('summary', `Objects (${s.inventory ?? 0})`), h('div.tree', treeOf(name))),
      drift.length
        ? h('div.source-drift',
          h('h4', `Drift (${drift.length})`),
          h('ul', drift.map((d) => h('li', { 'data-drift': `${d.kind}/${d.project ? `${d.project}/` : ''}${d.name}` },
            `${d.kind} `, code(d.project ? `${d.project}/${d.name}` : d.name), ': ', (d.fields || []).map((f) => h('span.tag', f))))))
        : null);
  };

  const draw = (sources) => {
    sources.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    root.replaceChildren(
      h('h1', 'Sources'),
      sources.length === 0
        ? empty('No sources yet.', 'Let pamd pull desired state from git or a directory: apply a ', code('kind: Source'),
          ' (see ', code('examples/sources.yaml'), ' and docs/gitops.md).')
        : h('div.sources', sources.map(card)));
  };

  const reload = debounce(load, 200);
  const off = onEvent((e) => { if (/^(source|project|work_item|run)\./.test(e.topic) && e.topic !== 'run.output_appended') reload(); });
  load();
  return () => { gone = true; off(); };
}
