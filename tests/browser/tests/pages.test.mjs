// Runs, hosts and activity pages on seeded data (no worker needed): the
// runs table and its filters, host disable/enable through the UI, the
// activity feed's topic filter, and the empty states.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startPamd, launchBrowser, signIn, eventually } from '../lib.mjs';

let pamd, browser;

before(async () => {
  pamd = await startPamd();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await pamd?.stop();
});

test('empty pages say what to do next', async () => {
  const page = await signIn(browser, pamd);
  await page.waitForSelector('.empty:has-text("pamctl apply")');
  await page.goto(`${pamd.url}/#/runs`);
  await page.waitForSelector('.empty:has-text("No runs yet")');
  await page.goto(`${pamd.url}/#/hosts`);
  await page.waitForSelector('.empty:has-text("pamctl token create --worker")');
  await page.context().close();
});

test('runs table with filters; host disable/enable; activity filtered by topic', async () => {
  pamd.pamctl(['apply', '-R', '-f', 'examples/']);
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/runs`);
  for (const r of ['cart-api-impl', 'search-index-impl', 'webhook-tests']) {
    await page.waitForSelector(`tr[data-run="${r}"] [data-phase="pending"]`);
  }
  await page.selectOption('select[data-filter="phase"]', 'running');
  await page.waitForSelector('.empty:has-text("No runs match")');
  assert.match(page.url(), /#\/runs\?phase=running$/);
  await page.selectOption('select[data-filter="phase"]', 'pending');
  await page.waitForSelector('tr[data-run="webhook-tests"]');
  await page.click('tr[data-run="cart-api-impl"] a');
  await page.waitForSelector('.page-head h1:has-text("cart-api-impl")');
  await page.waitForSelector('.timeline [data-topic="run.created"]');
  assert.equal(await page.isDisabled('#attach-btn'), true, 'a pending run cannot be attached');

  await page.goto(`${pamd.url}/#/hosts`);
  await page.waitForSelector('tr[data-host="studio-mac"]');
  await page.click('tr[data-host="studio-mac"] [data-action="disable"]');
  await page.click('[role=dialog] [data-confirm="ok"]');
  await page.waitForSelector('tr[data-host="studio-mac"][data-phase="disabled"] [data-action="enable"]');
  assert.equal((await pamd.get('/api/v1/hosts/studio-mac')).spec.disabled, true);
  await page.click('tr[data-host="studio-mac"] [data-action="enable"]');
  await eventually('studio-mac enabled', async () => (await pamd.get('/api/v1/hosts/studio-mac')).spec.disabled === false);
  await page.waitForSelector('tr[data-host="studio-mac"] [data-action="disable"]');

  await page.goto(`${pamd.url}/#/activity`);
  await page.waitForSelector('.feed [data-topic="project.created"]');
  await page.selectOption('select[data-filter="topic"]', 'run.');
  await page.waitForSelector('.feed [data-topic="run.created"]');
  const topics = await page.$$eval('.feed li[data-topic]', (els) => els.map((e) => e.dataset.topic));
  assert.ok(topics.length >= 3 && topics.every((t) => t.startsWith('run.')), topics.join(','));
  // Live: a new event shows up at the top without a reload.
  await pamd.api('POST', '/api/v1/projects/webshop/runs/webhook-tests/stop');
  await page.waitForSelector('.feed li[data-topic="run.stopped"]');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
