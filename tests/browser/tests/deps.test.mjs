// Task dependencies (issue 17) on the dashboard: a card whose task waits
// for others shows a badge naming them, and the run page of a blocked run
// shows its Blocked condition. No worker: the runs stay pending.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startPamd, launchBrowser, signIn } from '../lib.mjs';

let pamd, browser;

const YAML = `apiVersion: pam.dev/v1
kind: Project
metadata: {name: deps}
spec: {}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: design, project: deps}
spec: {title: Design}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: infra, project: deps}
spec: {title: Infra}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: build, project: deps}
spec: {title: Build, dependsOn: [design, infra]}
---
apiVersion: pam.dev/v1
kind: Run
metadata: {name: build-1, project: deps}
spec: {task: build, provider: claude, cwd: /tmp}
`;

before(async () => {
  pamd = await startPamd();
  const r = await pamd.api('POST', '/api/v1/apply', { files: [{ name: 'deps.yaml', content: YAML }] });
  assert.equal(r.status, 200, `apply: ${JSON.stringify(r.body)}`);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await pamd?.stop();
});

test('a blocked card names what it waits for; the run page shows the Blocked condition', async () => {
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/board/deps`);
  const badge = await page.waitForSelector('[data-task="build"] .tag.blocked');
  assert.equal(await badge.textContent(), 'waits for design, infra');
  assert.equal(await badge.getAttribute('data-blocked-by'), 'design,infra');
  assert.equal(await page.$('[data-task="design"] .tag.blocked'), null, 'design waits for nothing');
  // Done with design: the badge follows (the board reloads on work_item events).
  await pamd.api('POST', '/api/v1/projects/deps/tasks/design/transition', { to: 'done' });
  await page.waitForSelector('[data-task="build"] .tag.blocked:text-is("waits for infra")');
  await page.goto(`${pamd.url}/#/runs/deps/build-1`);
  const cond = await page.waitForSelector('[data-condition="Blocked"]');
  assert.equal(await cond.textContent(), 'waiting for infra to be done');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
