// A run's workspace result (issue 32): its branch, commits and diff
// stats, and the patch as a diff — one collapsible section per file,
// added and removed lines coloured. Plain DOM, no library.

import { h } from '../util.js';

// `+12 −3` (a real minus sign), as the board's cards show it too.
export const stat = (r) => `+${r.insertions ?? 0} −${r.deletions ?? 0}`;

// The patch split by file: [{ path, lines: [text…], added, removed }].
export function parsePatch(text) {
  const files = [];
  let cur = null;
  for (const line of (text || '').split('\n')) {
    const m = /^diff --git a\/(.*) b\/(.*)$/.exec(line);
    if (m) {
      cur = { path: m[2], lines: [], added: 0, removed: 0 };
      files.push(cur);
      continue;
    }
    if (!cur) continue;
    cur.lines.push(line);
    if (line.startsWith('+') && !line.startsWith('+++')) cur.added++;
    else if (line.startsWith('-') && !line.startsWith('---')) cur.removed++;
  }
  return files;
}

const lineClass = (l) => (l.startsWith('@@') ? 'hunk'
  : l.startsWith('+++') || l.startsWith('---') || /^(index|new file|deleted file|similarity|rename|old mode|new mode) /.test(l) ? 'meta'
    : l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : 'ctx');

export function resultView(r, patch) {
  const short = (c) => (c || '').slice(0, 10);
  const files = parsePatch(patch);
  return h('div.result', { id: 'result', 'data-insertions': r.insertions, 'data-deletions': r.deletions },
    h('p',
      h('code', r.branch), ' ',
      h('span.muted', `${short(r.baseCommit)}..${short(r.headCommit)}`), ' — ',
      `${r.commits} commit${r.commits === 1 ? '' : 's'}, ${r.filesChanged} file${r.filesChanged === 1 ? '' : 's'} changed, `,
      h('span.stat', h('span.add', `+${r.insertions}`), ' ', h('span.del', `−${r.deletions}`)),
      r.pushed === true ? h('span.tag', 'pushed') : r.pushed === false ? h('span.tag.blocked', { title: r.pushMessage || '' }, 'push refused') : null,
      r.attempt ? h('span.muted', ` (attempt ${r.attempt})`) : null),
    r.patchTruncated ? h('p.muted', 'The patch was longer than the worker sends: it is cut.') : null,
    files.length
      ? h('div.diff', files.map((f) => h('details.file', { open: files.length <= 20, 'data-file': f.path },
        h('summary', h('code', f.path), ' ', h('span.add', `+${f.added}`), ' ', h('span.del', `−${f.removed}`)),
        h('pre', f.lines.map((l) => h(`span.line.${lineClass(l)}`, `${l}\n`))))))
      : h('p.muted', 'No changes.'));
}
