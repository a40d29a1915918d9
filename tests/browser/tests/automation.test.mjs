// A project's Schedules and Secrets page (issue 18) on a real pamd: the
// Schedule's timetable, next tick and "Run now" (the run shows up as
// active), and the Secret by key, size and digest — its value nowhere in
// the page.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPamd, launchBrowser, signIn } from '../lib.mjs';

let pamd, browser;

before(async () => {
  pamd = await startPamd();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await pamd?.stop();
});

const VALUE = `pamdashsecret${Date.now()}`;

test('schedules and secrets page: next tick, run now, keys only', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'pam-auto-')), 'auto.yaml');
  writeFileSync(file, `apiVersion: pam.dev/v1
kind: Project
metadata: {name: auto}
spec: {}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: t1, project: auto}
spec: {title: Nightly}
---
apiVersion: pam.dev/v1
kind: Secret
metadata: {name: provider-keys, project: auto}
spec:
  stringData: {ANTHROPIC_API_KEY: ${VALUE}}
---
apiVersion: pam.dev/v1
kind: Schedule
metadata: {name: nightly, project: auto}
spec:
  schedule: "30 2 * * *"
  timeZone: Europe/Berlin
  runTemplate: {task: t1, provider: claude, cwd: /tmp}
`);
  pamd.pamctl(['apply', '-f', file]);
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/board/auto`);
  await page.click('a[href="#/automation/auto"]');
  const card = 'article[data-schedule="nightly"]';
  await page.waitForSelector(`${card} [data-field="next"] time`);
  assert.match(await page.textContent(card), /30 2 \* \* \*/);
  assert.match(await page.textContent('[data-secret="provider-keys"] [data-key="ANTHROPIC_API_KEY"]'),
    new RegExp(`${VALUE.length} bytes · sha256:[0-9a-f]{16}`));

  await page.click(`${card} [data-action="trigger"]`);
  await page.waitForSelector(`${card} [data-field="active"] a.tag`);
  const active = await page.textContent(`${card} [data-field="active"]`);
  assert.match(active, /^nightly-\d+$/);

  assert.ok(!(await page.content()).includes(VALUE), 'the value is not in the page');
});
