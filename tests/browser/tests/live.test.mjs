// Live updates through the SSE stream: a change made elsewhere appears
// without a reload, and after pamd goes away the page reconnects with
// Last-Event-ID set to the last event it saw, and keeps updating.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startPamd, launchBrowser, signIn } from '../lib.mjs';

let pamd, browser;

before(async () => {
  pamd = await startPamd();
  pamd.pamctl(['apply', '-R', '-f', 'examples/']);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await pamd?.stop();
});

async function lastSeq() {
  let after = 0;
  for (;;) {
    const { items, next } = await pamd.get(`/api/v1/events?after=${after}&limit=10000`);
    if (!items.length) return after;
    after = next ?? items[items.length - 1].seq;
  }
}

test('the board follows changes live and resumes from the last event id after pamd restarts', async () => {
  const page = await signIn(browser, pamd);
  const streams = [];
  page.on('request', (r) => { if (r.url().includes('/api/v1/events/stream')) streams.push(r.headers()); });
  await page.goto(`${pamd.url}/#/board/webshop`);
  await page.waitForSelector('#live[data-state="live"]');
  await page.waitForSelector('.cell[data-column="todo"] [data-task="order-emails"]');
  // Moved through the API (as pamctl would): the card follows, no reload.
  await page.evaluate(() => { window.__noReload = true; });
  const r = await pamd.api('POST', '/api/v1/projects/webshop/tasks/order-emails/transition', { to: 'doing' });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await page.waitForSelector('.cell[data-column="doing"] [data-task="order-emails"]');
  const seen = await lastSeq();
  const before = streams.length;
  await pamd.kill();
  await page.waitForSelector('#live[data-state="reconnecting"]');
  await pamd.restart();
  await page.waitForSelector('#live[data-state="live"]', { timeout: 30000 });
  const resumed = streams.slice(before).find((h) => h['last-event-id']);
  assert.ok(resumed, `a reconnect sent Last-Event-ID (${JSON.stringify(streams.slice(before))})`);
  assert.equal(resumed['last-event-id'], String(seen));
  // The token travels in a header, never in the URL.
  assert.ok(streams.every((h) => h.authorization === `Bearer ${pamd.token}`));
  const r2 = await pamd.api('POST', '/api/v1/projects/webshop/tasks/order-emails/transition', { to: 'done' });
  assert.equal(r2.status, 200, JSON.stringify(r2.body));
  await page.waitForSelector('.cell[data-column="done"] [data-task="order-emails"]');
  assert.equal(await page.evaluate(() => window.__noReload), true, 'the page was not reloaded');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
