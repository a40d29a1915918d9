// Issue 36 on the dashboard: a project's charts (outcomes, throughput,
// duration, cost with the budget line, dispatch latency) show their empty
// states, then draw the data live once runs finish; every run shows a
// duration (runs table, run page, the board's card); a finished run is
// re-run from its page; the main pages fit a 420 px screen. A worker is
// simulated over the worker protocol, so durations and costs are exact.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startPamd, launchBrowser, signIn, eventually } from '../lib.mjs';

let pamd, browser, worker;

const YAML = `apiVersion: pam.dev/v1
kind: Project
metadata: {name: ch}
spec: {budget: {maxCostUsd: 5}}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: build, project: ch}
spec: {title: Build}
---
apiVersion: pam.dev/v1
kind: Project
metadata: {name: quiet}
spec: {}
`;

const run = (name) => `apiVersion: pam.dev/v1
kind: Run
metadata: {name: ${name}, project: ch}
spec: {task: build, provider: exec, command: [sh, -c, "true"], cwd: /tmp}
`;

before(async () => {
  pamd = await startPamd();
  const r = await pamd.api('POST', '/api/v1/apply', { files: [{ name: 'ch.yaml', content: YAML }] });
  assert.equal(r.status, 200, `apply: ${JSON.stringify(r.body)}`);
  const token = (await pamd.api('POST', '/api/v1/tokens', { worker: 'ch-host' })).body.token;
  worker = async (method, path, body) => {
    const res = await fetch(`${pamd.url}${path}`, {
      method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    assert.ok(res.status < 400, `${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  await worker('POST', '/api/v1/workers/register', { name: 'ch-host', platform: 'linux', instance_id: randomUUID(), capacity: 4, labels: {}, version: 'browser-test' });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await pamd?.stop();
});

const at = () => new Date().toISOString();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Applies runs, claims them all and starts them: [{run_id, attempt}]. */
async function startRuns(names) {
  const r = await pamd.api('POST', '/api/v1/apply', { files: [{ name: 'runs.yaml', content: names.map(run).join('---\n') }] });
  assert.equal(r.status, 200, `apply: ${JSON.stringify(r.body)}`);
  let claimed = [];
  await eventually('the runs claimed', async () => {
    claimed = claimed.concat((await worker('POST', `/api/v1/workers/claim?wait=2&max=${names.length}`)).runs);
    return claimed.length === names.length;
  });
  for (const c of claimed) {
    await worker('POST', '/api/v1/workers/signals', { signals: [{ run_id: c.run_id, attempt: c.attempt, kind: 'started', at: at() }] });
  }
  return claimed;
}

async function finish(c, exitCode, costUsd) {
  const usage = costUsd === undefined ? undefined : { input_tokens: 100, output_tokens: 20, cost_usd: costUsd };
  await worker('POST', '/api/v1/workers/signals', { signals: [{ run_id: c.run_id, attempt: c.attempt, kind: 'finished', at: at(), exit_code: exitCode, usage }] });
}

test('charts: empty states, then outcomes, throughput, duration, cost with the budget line and latency live', async () => {
  const page = await signIn(browser, pamd);
  // A project with no runs: every chart says so.
  await page.goto(`${pamd.url}/#/charts/quiet`);
  await page.waitForSelector('[data-empty="outcomes"]');
  for (const c of ['outcomes', 'throughput', 'duration', 'latency']) {
    assert.ok(await page.$(`[data-empty="${c}"]`), `${c}: empty state`);
  }
  assert.equal(await page.$$eval('svg[data-chart-svg]', (s) => s.length), 0);

  // ch, from the board's link, before any run finished.
  await page.goto(`${pamd.url}/#/board/ch`);
  await page.click('[data-link="charts"]');
  await page.waitForSelector('[data-empty="outcomes"]');
  // The budget line is drawn even before anything was spent.
  await page.waitForSelector('svg[data-chart-svg="cost"] [data-budget="5"] line', { state: 'attached' });
  await page.evaluate(() => { window.__samePage = true; });

  const runs = await startRuns(['c1', 'c2', 'c3']);
  await sleep(300);
  await finish(runs[0], 0, 1.25);
  await finish(runs[1], 0, 0.5);
  await finish(runs[2], 3, 0.25);

  // Live: run.* events redraw the page (no reload).
  await page.waitForSelector('svg[data-chart-svg="outcomes"] rect[data-series="exited"]', { timeout: 15000 });
  const bars = await page.$$eval('svg[data-chart-svg="outcomes"] rect', (rs) => rs.map((r) => [r.dataset.series, Number(r.dataset.value)]));
  assert.deepEqual(bars.sort(), [['exited', 2], ['failed', 1]]);
  const points = async (chart, series) => page.$$eval(`svg[data-chart-svg="${chart}"] circle[data-series="${series}"]`,
    (cs) => cs.map((c) => Number(c.dataset.value)));
  assert.equal((await points('throughput', 'started')).reduce((a, b) => a + b, 0), 3);
  assert.equal((await points('throughput', 'finished')).reduce((a, b) => a + b, 0), 3);
  const p50 = await points('duration', 'p50');
  assert.equal(p50.filter((v) => v >= 300).length, 1, `one bucket with a median of at least 300 ms: ${p50}`);
  assert.ok(await page.$('svg[data-chart-svg="latency"] circle[data-series="p50"]'), 'dispatch latency drawn');
  // Cost: the spend line ends at $2 (all runs), under the $5 budget line.
  const spent = await points('cost', 'spent');
  assert.equal(spent[spent.length - 1], 2);
  assert.ok(await page.$('svg[data-chart-svg="cost"] polyline[data-series="spent"]'), 'a line');
  const [budgetY, lastY] = await page.evaluate(() => {
    const svg = document.querySelector('svg[data-chart-svg="cost"]');
    const cs = svg.querySelectorAll('circle[data-series="spent"]');
    return [Number(svg.querySelector('[data-budget] line').getAttribute('y1')), Number(cs[cs.length - 1].getAttribute('cy'))];
  });
  assert.ok(budgetY < lastY, `the budget line (y ${budgetY}) above the spend (y ${lastY})`);
  assert.match(await page.textContent('.page'), /Spent \$2\.00 of a \$5\.00 budget/);
  assert.equal(await page.evaluate(() => window.__samePage), true, 'updated live, not by a reload');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('durations on the runs table, the run page and the card; re-run from the run page', async () => {
  const page = await signIn(browser, pamd);
  const [live] = await startRuns(['slow']);
  await page.goto(`${pamd.url}/#/runs?project=ch`);
  const cell = (name) => page.textContent(`tr[data-run="${name}"] [data-duration]`);
  await page.waitForSelector('tr[data-run="c1"] [data-duration]');
  assert.match(await cell('c1'), /^\d+ ms$|^\d+ s$/);
  assert.match(await cell('slow'), /^running /);
  // Live runs count up on their own.
  const first = await cell('slow');
  await page.waitForFunction((f) => document.querySelector('tr[data-run="slow"] [data-duration]').textContent !== f, first, { timeout: 5000 });

  await page.goto(`${pamd.url}/#/board/ch`);
  await page.waitForSelector('[data-task="build"] [data-latest-run="slow"] [data-duration="running"]');

  await finish(live, 0);
  await page.goto(`${pamd.url}/#/runs/ch/c1`);
  await page.waitForSelector('.kv [data-duration]');
  const rerun = await page.waitForSelector('#rerun:not([disabled])');
  await rerun.click();
  await page.waitForFunction(() => location.hash === '#/runs/ch/c1-r1');
  await page.waitForSelector('[data-field="rerun-of"] a[href="#/runs/ch/c1"]');
  const r = await pamd.get('/api/v1/projects/ch/runs/c1-r1');
  assert.equal(r.metadata.annotations['pam.dev/rerun-of'], 'c1');
  assert.deepEqual(r.spec.command, ['sh', '-c', 'true']);
  // A pending run cannot be re-run yet.
  assert.equal(await page.isDisabled('#rerun'), true);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('at 420 px the main pages do not scroll sideways', async () => {
  const page = await signIn(browser, pamd, { width: 420, height: 860 });
  for (const [hash, ready] of [
    ['#/projects', '[data-project="ch"]'],
    ['#/board/ch', '[data-task="build"]'],
    ['#/runs', 'tr[data-run="c1"]'],
    ['#/runs/ch/c1', '.kv'],
    ['#/charts/ch', 'svg[data-chart-svg="outcomes"]'],
    ['#/hosts', 'h1'],
    ['#/sources', 'h1'],
    ['#/webhooks', 'h1'],
    ['#/activity', 'h1'],
  ]) {
    await page.goto(`${pamd.url}/${hash}`);
    await page.waitForSelector(ready);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 420, `${hash}: ${width} px wide`);
  }
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
