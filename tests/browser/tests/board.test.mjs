// Sign-in and the board: see the seeded tasks, drag todo → doing (persisted
// through the API), an illegal move refused and snapped back, a cancel that
// shows its cascade first.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startPamd, launchBrowser, signIn, eventually } from '../lib.mjs';

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

const phaseOf = async (name) => (await pamd.get(`/api/v1/projects/webshop/tasks/${name}`)).status.phase;

test('a wrong token is refused; the right one signs in and never enters the URL', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const res = await page.goto(pamd.url + '/');
  assert.match(res.headers()['content-security-policy'], /default-src 'none'/);
  await page.fill('#token', 'pam_not-a-real-token');
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('#signin .error:has-text("refused")');
  await page.fill('#token', pamd.token);
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('h1:has-text("Projects")');
  assert.ok(!page.url().includes(pamd.token), 'the token is not in the URL');
  // Completion ratio on the project card (done / non-cancelled tasks).
  const ratio = await page.getAttribute('[data-project="webshop"] .ratio', 'data-ratio');
  const tasks = (await pamd.get('/api/v1/projects/webshop/tasks')).items
    .filter((t) => t.spec.type === 'task' || t.spec.type === 'subtask');
  const done = tasks.filter((t) => t.status.phase === 'done').length;
  const live = tasks.filter((t) => t.status.phase !== 'cancelled').length;
  assert.equal(ratio, `${done}/${live}`);
  // A reload keeps the session (sessionStorage); signing out forgets it.
  await page.reload();
  await page.waitForSelector('h1:has-text("Projects")');
  await page.click('#signout');
  await page.waitForSelector('#signin');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('pam.token')), null);
  await context.close();
});

test('the seeded board shows tasks in their columns under their epic, with roll-ups', async () => {
  const page = await signIn(browser, pamd);
  await page.click('[data-project="webshop"]');
  await page.waitForSelector('.board');
  // product-search is todo, under the catalogue epic; cart-api is doing under checkout.
  await page.waitForSelector('.lane[data-lane="catalogue"] .cell[data-column="todo"] [data-task="product-search"]');
  await page.waitForSelector('.lane[data-lane="checkout"] .cell[data-column="doing"] [data-task="cart-api"]');
  await page.waitForSelector('.cell[data-column="cancelled"] [data-task="price-import"]');
  await page.waitForSelector('.cell[data-column="done"] [data-task="product-pages"]');
  // The epic's roll-up ratio is shown on its lane (display only).
  const epic = await pamd.get('/api/v1/projects/webshop/tasks/catalogue');
  const c = epic.status.completion;
  assert.equal(await page.getAttribute('.lane[data-lane="catalogue"] .lane-head .ratio', 'data-ratio'), `${c.done}/${c.total}`);
  // Phases carry text labels, not colour alone.
  assert.equal(await page.textContent('[data-col-head="doing"] .phase'), 'doing');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('dragging a task from todo to doing is persisted through the API', async () => {
  assert.equal(await phaseOf('product-search'), 'todo');
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/board/webshop`);
  const card = '[data-task="product-search"]';
  await page.dragAndDrop(card, '.lane[data-lane="catalogue"] .cell[data-column="doing"]');
  await eventually('product-search doing in the API', async () => (await phaseOf('product-search')) === 'doing');
  await page.waitForSelector(`.cell[data-column="doing"] ${card}`);
  await page.waitForSelector('.toast-ok:has-text("todo → doing")');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('an illegal move (cancelled → doing) is refused and the card snaps back with the reason', async () => {
  assert.equal(await phaseOf('price-import'), 'cancelled');
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/board/webshop`);
  const card = '[data-task="price-import"]';
  await page.dragAndDrop(card, '.lane[data-lane="catalogue"] .cell[data-column="doing"]');
  const alert = await page.waitForSelector('[role=alert]:has-text("illegal")');
  assert.match(await alert.textContent(), /cancelled → doing/);
  await page.waitForSelector(`.cell[data-column="cancelled"] ${card}.refused`);
  assert.equal(await phaseOf('price-import'), 'cancelled');
  await page.context().close();
});

test('cancelling shows the cascade first; keeping it changes nothing, confirming cancels the subtree', async () => {
  // product-search has the subtask search-index.
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/board/webshop`);
  const card = '[data-task="product-search"]';
  await page.waitForSelector(card);
  const before = await phaseOf('product-search');
  await page.dragAndDrop(card, '.lane[data-lane="catalogue"] .cell[data-column="cancelled"]');
  await page.waitForSelector('[role=dialog] [data-cascade="search-index"]');
  await page.click('[data-confirm="cancel"]');
  await page.waitForSelector(`.cell[data-column="${before}"] ${card}`);
  assert.equal(await phaseOf('product-search'), before);
  await page.dragAndDrop(card, '.lane[data-lane="catalogue"] .cell[data-column="cancelled"]');
  await page.click('[role=dialog] [data-confirm="ok"]');
  await eventually('product-search cancelled', async () => (await phaseOf('product-search')) === 'cancelled');
  assert.equal(await phaseOf('search-index'), 'cancelled');
  await page.waitForSelector(`.cell[data-column="cancelled"] [data-task="search-index"]`);
  await page.context().close();
});

test('keyboard: → on a focused card moves it to the next column through the same gate', async () => {
  assert.equal(await phaseOf('payment-provider'), 'todo');
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/board/webshop`);
  await page.focus('[data-task="payment-provider"]');
  await page.keyboard.press('ArrowRight');
  await eventually('payment-provider doing', async () => (await phaseOf('payment-provider')) === 'doing');
  await page.waitForSelector('.cell[data-column="doing"] [data-task="payment-provider"]');
  await page.context().close();
});
