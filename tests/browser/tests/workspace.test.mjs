// Issue 32 on the dashboard: a run's workspace result — branch, commits,
// +N −M — and its patch as a diff, one collapsible section per file with
// added and removed lines marked; the board's card shows the latest
// result's +N −M. A worker is simulated over the worker protocol (the
// real git flow is tests/tests/workspaces.rs): it claims the run and
// finishes it with a result.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startPamd, launchBrowser, signIn, eventually } from '../lib.mjs';

let pamd, browser;

const YAML = `apiVersion: pam.dev/v1
kind: Project
metadata: {name: ws}
spec:
  repository: {url: "file:///srv/git/shop.git"}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: cart, project: ws}
spec: {title: Cart}
---
apiVersion: pam.dev/v1
kind: Run
metadata: {name: cart-1, project: ws}
spec:
  task: cart
  provider: exec
  command: [sh, -c, "edit"]
  workspace: {}
`;

const PATCH = [
  'diff --git a/notes.txt b/notes.txt',
  'index 1111111..2222222 100644',
  '--- a/notes.txt',
  '+++ b/notes.txt',
  '@@ -1,2 +1,2 @@',
  ' base',
  '-old line',
  '+new line from the agent',
  'diff --git a/src/cart.rs b/src/cart.rs',
  'new file mode 100644',
  'index 0000000..3333333',
  '--- /dev/null',
  '+++ b/src/cart.rs',
  '@@ -0,0 +1 @@',
  '+pub fn add() {}',
  '',
].join('\n');

before(async () => {
  pamd = await startPamd();
  const r = await pamd.api('POST', '/api/v1/apply', { files: [{ name: 'ws.yaml', content: YAML }] });
  assert.equal(r.status, 200, `apply: ${JSON.stringify(r.body)}`);
  const token = (await pamd.api('POST', '/api/v1/tokens', { worker: 'ws-host' })).body.token;
  const worker = async (method, path, body) => {
    const res = await fetch(`${pamd.url}${path}`, {
      method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    assert.ok(res.status < 400, `${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  await worker('POST', '/api/v1/workers/register', { name: 'ws-host', platform: 'linux', instance_id: randomUUID(), capacity: 2, labels: {}, version: 'browser-test' });
  // Long-polled: the run may become claimable a moment after the apply
  // answered (CI saw an immediate claim come back empty once).
  let claimed = [];
  await eventually('the run claimed', async () => {
    claimed = (await worker('POST', '/api/v1/workers/claim?wait=2&max=1')).runs;
    return claimed.length === 1;
  });
  const { run_id: runId, attempt } = claimed[0];
  const at = () => new Date().toISOString();
  await worker('POST', '/api/v1/workers/signals', { signals: [{ run_id: runId, attempt, kind: 'started', at: at() }] });
  await worker('POST', '/api/v1/workers/signals', {
    signals: [{
      run_id: runId, attempt, kind: 'finished', at: at(), exit_code: 0,
      result: {
        branch: 'pam/cart/cart-1-a1', base_commit: 'a'.repeat(40), head_commit: 'b'.repeat(40),
        commits: 1, files_changed: 2, insertions: 2, deletions: 1, patch: PATCH, patch_truncated: false,
      },
    }],
  });
  await eventually('the result stored', async () => (await pamd.get('/api/v1/projects/ws/runs/cart-1')).status?.result?.insertions === 2);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await pamd?.stop();
});

test('the run page shows the result and its diff; the card shows +N −M', async () => {
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/runs/ws/cart-1`);
  const result = await page.waitForSelector('#result');
  const summary = await result.$eval('p', (p) => p.textContent);
  assert.match(summary, /pam\/cart\/cart-1-a1/);
  assert.match(summary, /1 commit, 2 files changed, \+2 −1/);
  const files = await page.$$eval('.diff details.file', (ds) => ds.map((d) => [d.dataset.file, d.open, d.querySelector('summary').textContent]));
  assert.deepEqual(files, [['notes.txt', true, 'notes.txt +1 −1'], ['src/cart.rs', true, 'src/cart.rs +1 −0']]);
  const added = await page.$$eval('.diff .line.add', (ls) => ls.map((l) => l.textContent.trim()));
  assert.deepEqual(added, ['+new line from the agent', '+pub fn add() {}']);
  const removed = await page.$$eval('.diff .line.del', (ls) => ls.map((l) => l.textContent.trim()));
  assert.deepEqual(removed, ['-old line']);
  assert.equal(await page.$$eval('.diff .line.hunk', (ls) => ls.length), 2);
  // Per-file collapse.
  await page.click('.diff details.file[data-file="notes.txt"] summary');
  assert.equal(await page.$eval('.diff details.file[data-file="notes.txt"]', (d) => d.open), false);

  await page.goto(`${pamd.url}/#/board/ws`);
  const stat = await page.waitForSelector('[data-task="cart"] [data-diffstat="cart-1"]');
  assert.equal((await stat.textContent()).trim(), '+2 −1');
  assert.equal(await stat.getAttribute('href'), '#/runs/ws/cart-1');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
