// Hosts: online/offline/disabled, last seen, running runs vs capacity, the
// instance-suspect flag (with when it was raised and a clear button), and
// disable/enable.

import { get, post, enc, may } from '../api.js';
import { onEvent } from '../sse.js';
import { h, empty, phase, timeEl, debounce, toast, confirmDialog, code } from '../util.js';

export function render(root) {
  const act = async (name, action, confirmText) => {
    if (confirmText && !(await confirmDialog(`${action} ${name}?`, h('p', confirmText), action))) return;
    try {
      await post(`/api/v1/hosts/${enc(name)}/${action}`);
      toast(`${name}: ${action} done`, 'ok');
    } catch (e) {
      toast(`Cannot ${action} ${name}: ${e.message}`, 'error');
    }
    load();
  };

  const load = async () => {
    try {
      draw((await get('/api/v1/hosts')).items);
    } catch (e) {
      root.replaceChildren(h('h1', 'Hosts'), h('p.error', { role: 'alert' }, `Could not load hosts: ${e.message}`));
    }
  };

  const draw = (hosts) => {
    hosts.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    const row = (x) => {
      const s = x.status || {};
      const name = x.metadata.name;
      const cap = x.spec.capacity ?? 0;
      const running = s.runningRuns ?? 0;
      return h('tr', { 'data-host': name, 'data-phase': s.phase },
        h('td', h('strong', name), h('div.muted', x.spec.platform)),
        h('td', phase(s.phase)),
        h('td', timeEl(s.lastSeenAt)),
        h('td.num', { class: running >= cap && cap > 0 ? 'full' : '' }, `${running} / ${cap}`),
        h('td', s.instanceSuspect
          ? h('span.suspect', { 'data-suspect': 'true' }, '⚠ instance suspect, flagged ', timeEl(s.instanceFlaggedAt), ' ',
            h('button.small', { type: 'button', 'data-action': 'clear-suspect', onclick: () => act(name, 'clear-suspect', 'Clear it once you know the worker on this host is the one you installed (a reinstall or a cloned disk raises the flag).') }, 'Clear suspect'))
          : h('span.muted', 'ok')),
        h('td', Object.entries(s.labels || x.metadata.labels || {}).map(([k, v]) => h('span.tag', `${k}=${v}`))),
        // Issue 31: what its worker reported it can run.
        h('td', { 'data-capabilities': s.capabilities ? 'reported' : 'unreported' }, s.capabilities
          ? [...(s.capabilities.providers || []).map((p) => h('span.tag', p.version ? `${p.name} ${p.version}` : p.name)),
            s.capabilities.workspaceFreeBytes != null ? diskFree(s.capabilities) : null]
          : h('span.muted', 'not reported')),
        h('td', !may('update', 'hosts') ? null : x.spec.disabled
          ? h('button.small', { type: 'button', 'data-action': 'enable', onclick: () => act(name, 'enable') }, 'Enable')
          : h('button.small.ghost', { type: 'button', 'data-action': 'disable', onclick: () => act(name, 'disable', 'No new runs are dispatched to a disabled host; its running runs go on.') }, 'Disable')));
    };
    root.replaceChildren(
      h('h1', 'Hosts'),
      hosts.length === 0
        ? empty('No hosts yet.', 'Create a worker token with ', code('pamctl token create --worker HOST'),
          ' and start ', code('pam-worker --server URL --token-file FILE --name HOST'), ' on that machine.')
        : h('table.hosts',
          h('thead', h('tr', ['Host', 'Status', 'Last seen', 'Running / capacity', 'Instance', 'Labels', 'Providers', ''].map((c) => h('th', c)))),
          h('tbody', hosts.map(row))));
  };

  const reload = debounce(load, 200);
  const off = onEvent((e) => { if (/^(worker|run)\./.test(e.topic) && e.topic !== 'run.output_appended') reload(); });
  // Last seen ages on its own; the phase changes come as events.
  load();
  return off;
}

// Issue 32: free bytes of the workspace volume; below the worker's
// min_free_bytes the host takes no workspace runs, and says so.
function diskFree(c) {
  const gib = (b) => (b / 2 ** 30).toFixed(1);
  const low = c.workspaceMinFreeBytes != null && c.workspaceFreeBytes < c.workspaceMinFreeBytes;
  return low
    ? h('div.full', { 'data-disk': 'low', title: `below min_free_bytes (${gib(c.workspaceMinFreeBytes)} GiB): no workspace runs` }, `${gib(c.workspaceFreeBytes)} GiB free — low`)
    : h('div.muted', { 'data-disk': 'ok' }, `${gib(c.workspaceFreeBytes)} GiB free`);
}
