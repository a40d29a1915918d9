// The Sources page (GitOps) on a real pamd syncing a watched directory: sync
// and health badges, the revision, the inventory, the owning Source on the
// projects page, a failed sync's error with file:line shown live (no
// reload) printed once, "Sync now", Suspend/Resume (issue 36), and the
// owned objects' tree with each one's own sync and health (issue 35).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPamd, launchBrowser, signIn, eventually } from '../lib.mjs';

let pamd, browser;

before(async () => {
  // The watched directory is a temporary one: allowed (issue 30).
  pamd = await startPamd({ configToml: `[sources]\nallowed_roots = [${JSON.stringify(tmpdir())}]\n` });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await pamd?.stop();
});

const TREE = `apiVersion: pam.dev/v1
kind: Project
metadata: {name: gp}
spec: {displayName: GitOps project}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: t1, project: gp}
spec: {title: Declared in a directory}
`;

test('sources page: badges, revision, owner, live failure with file:line, sync now', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pam-src-'));
  writeFileSync(join(dir, 'tree.yaml'), TREE);
  const manifest = join(dir, '..', `${dir.split('/').pop()}-source.yaml`);
  writeFileSync(manifest, `apiVersion: pam.dev/v1\nkind: Source\nmetadata: {name: docs}\nspec:\n  path: '${dir}'\n  interval: 1h\n  projects: [gp]\n`);
  pamd.pamctl(['apply', '-f', manifest]);
  await eventually('docs synced', async () => (await pamd.get('/api/v1/sources/docs')).status?.sync === 'Synced');

  const page = await signIn(browser, pamd);
  // The projects page says which Source owns the project.
  await page.waitForSelector('[data-project="gp"] [data-source="docs"]');

  await page.click('[data-nav="sources"]');
  const card = 'article[data-source="docs"]';
  await page.waitForSelector(`${card}[data-sync="Synced"][data-health="Healthy"]`);
  await page.waitForSelector(`${card} .phase[data-phase="Synced"]`);
  await page.waitForSelector(`${card} .phase[data-phase="Healthy"]`);
  const src = await pamd.get('/api/v1/sources/docs');
  const rev = src.status.revision.replace(/^sha256:/, '').slice(0, 7);
  assert.equal(await page.textContent(`${card} [data-field="revision"]`), rev);
  assert.equal(await page.textContent(`${card} [data-field="inventory"]`), '2');

  // Issue 35: the objects' tree — each owned object with its own sync and
  // health; a task changed by another path turns OutOfSync live, with no
  // sync (the interval is an hour).
  await page.click(`${card} [data-objects="docs"] summary`);
  const taskRow = `${card} [data-object="Task/gp/t1"]`;
  await page.waitForSelector(`${taskRow}[data-sync="Synced"][data-health="Healthy"]`);
  await page.waitForSelector(`${card} [data-object="Project/gp"][data-sync="Synced"]`);
  pamd.pamctl(['apply', '--force-conflicts', '-f', '-'], 'apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: t1, project: gp}\nspec: {title: Changed by hand}\n');
  await page.waitForSelector(`${taskRow}[data-sync="OutOfSync"]`, { timeout: 10000 });
  assert.match(await page.textContent(taskRow), /spec\.title/);
  pamd.pamctl(['apply', '--force-conflicts', '-f', '-'], 'apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: t1, project: gp}\nspec: {title: Declared in a directory}\n');
  await page.waitForSelector(`${taskRow}[data-sync="Synced"]`, { timeout: 10000 });

  // A truncated file: the sync fails whole; the page shows it live, with
  // the file and line, and without a reload.
  await page.evaluate(() => { window.__samePage = true; });
  writeFileSync(join(dir, 'bad.yaml'), 'apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: t2, project: gp\nspec: {title: x}\n');
  await page.waitForSelector(`${card}[data-sync="Failed"] .source-errors li[data-file="bad.yaml"]`, { timeout: 20000 });
  const err = await page.textContent(`${card} .source-errors li[data-file="bad.yaml"]`);
  assert.match(err, /^bad\.yaml, document 0, line \d+/, err);
  assert.equal(await page.evaluate(() => window.__samePage), true, 'updated live, not by a reload');
  // Issue 36: each error is printed once (the sync message repeated it).
  const first = (await pamd.get('/api/v1/sources/docs')).status.errors[0].message;
  const shownTimes = (await page.textContent(card)).split(first).length - 1;
  assert.equal(shownTimes, 1, `${JSON.stringify(first)} shown ${shownTimes} times`);
  assert.equal(await page.textContent(`${card} [data-field="revision"]`), rev, 'the last good revision stays');

  // Mended: Synced again; then "Sync now" runs a sync (lastSyncedAt moves).
  rmSync(join(dir, 'bad.yaml'));
  await page.waitForSelector(`${card}[data-sync="Synced"]`, { timeout: 20000 });
  const before = (await pamd.get('/api/v1/sources/docs')).status.lastSyncedAt;
  await new Promise((r) => setTimeout(r, 1100));
  await page.click(`${card} [data-action="sync"]`);
  await eventually('a sync after Sync now', async () => {
    const s = (await pamd.get('/api/v1/sources/docs')).status;
    return s.lastSyncedAt !== before && !s.syncRequestedAt;
  });
  await page.waitForSelector(`${card} [data-action="sync"]:has-text("Sync now")`);

  // Issue 36: Suspend (spec.suspend, no sync; Sync now disabled), Resume.
  await page.click(`${card} [data-action="suspend"]`);
  await page.waitForSelector(`${card} [data-action="resume"]`);
  assert.equal((await pamd.get('/api/v1/sources/docs')).spec.suspend, true);
  assert.equal(await page.isDisabled(`${card} [data-action="sync"]`), true);
  assert.match(await page.textContent(card), /suspended/);
  await page.click(`${card} [data-action="resume"]`);
  await page.waitForSelector(`${card} [data-action="suspend"]`);
  assert.notEqual((await pamd.get('/api/v1/sources/docs')).spec.suspend, true);
  assert.equal(await page.isDisabled(`${card} [data-action="sync"]`), false);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
