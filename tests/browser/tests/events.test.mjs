// Issue 31: events read as sentences. A run driven through the worker API
// (register, claim, started, three output snapshots, finished), then the
// activity feed and the run's timeline: each event shows its reason and
// message — never its payload's JSON — and run.output_appended is
// collapsed into a count until shown.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { startPamd, launchBrowser, signIn } from '../lib.mjs';

const HOST = 'ev-box';
let pamd, browser;

before(async () => {
  pamd = await startPamd();
  browser = await launchBrowser();
  pamd.pamctl(['apply', '-f', 'examples/webshop/project.yaml', '-f', 'examples/webshop/tasks/']);
  writeFileSync(join(pamd.dir, 'run.yaml'), `apiVersion: pam.dev/v1
kind: Run
metadata:
  name: ev-run
  project: webshop
spec:
  task: product-search
  provider: claude
  prompt: Say hello.
  cwd: /tmp
  target:
    host: ${HOST}
`);
  pamd.pamctl(['apply', '-f', join(pamd.dir, 'run.yaml')]);
  // The worker's side, through its API.
  const token = pamd.pamctl(['token', 'create', '--worker', HOST]).trim().split(/\s+/).find((w) => w.startsWith('pamw_'));
  const post = async (path, body) => {
    const r = await fetch(`${pamd.url}${path}`, {
      method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await r.text();
    assert.ok(r.status < 300, `${path}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  await post('/api/v1/workers/register', { name: HOST, platform: 'linux', instance_id: randomUUID(), capacity: 2, labels: {}, version: 't' });
  // Long-polled until the run is claimed: it may become claimable a
  // moment after the apply answered (as in workspace.test.mjs).
  let run;
  for (let i = 0; i < 20 && !run; i++) {
    run = (await post('/api/v1/workers/claim?wait=2', {})).runs.find((r) => r.run_id);
  }
  assert.ok(run, 'a run was claimed');
  const at = new Date().toISOString();
  const signal = (kind, extra = {}) => post('/api/v1/workers/signals',
    { signals: [{ run_id: run.run_id, attempt: 1, kind, at, ...extra }] });
  await signal('started');
  for (const lines of [1, 2, 3]) {
    await post('/api/v1/workers/snapshots', { run_id: run.run_id, attempt: 1, text: 'hello\n'.repeat(lines), lines, bytes: lines * 6 });
  }
  await signal('finished', { exit_code: 0 });
});

after(async () => {
  await browser?.close();
  await pamd?.stop();
});

/** The texts of every listed event, and what it must not look like. */
async function noJson(page, selector) {
  const texts = await page.$$eval(selector, (els) => els.map((e) => e.textContent));
  assert.ok(texts.length > 0, `no ${selector}`);
  for (const t of texts) {
    assert.doesNotMatch(t, /[{}]|"\w+":/, `raw JSON in ${JSON.stringify(t)}`);
  }
  return texts;
}

test('the activity feed shows messages, not JSON, with run output collapsed', async () => {
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/activity`);
  const finished = '.feed li[data-topic="run.finished"]';
  await page.waitForSelector(finished);
  assert.equal(await page.textContent(`${finished} .ev-reason`), 'Completed');
  assert.equal(await page.textContent(`${finished} .ev-object`), 'run/ev-run');
  assert.equal(await page.textContent(`${finished} .ev-message`), 'run ev-run exited with code 0 (attempt 1 of 1)');
  assert.equal(await page.textContent('.feed li[data-topic="run.spawning"] .ev-message'),
    `run ev-run dispatched to host ${HOST} as session ${await sessionName()} (attempt 1 of 1)`);
  assert.equal(await page.textContent('.feed li[data-topic="worker.registered"] .ev-message'), `host ${HOST} is online (was registered)`);
  // Every row has a message.
  const messages = await page.$$eval('.feed li[data-topic] .ev-message', (els) => els.map((e) => e.textContent));
  assert.ok(messages.length >= 8 && messages.every((m) => m.length > 0), messages.join(' | '));
  await noJson(page, '.feed li[data-topic]');
  // Output snapshots: collapsed into a count, shown on demand.
  assert.equal(await page.$$eval('.feed li[data-topic="run.output_appended"]', (els) => els.length), 0);
  assert.equal(await page.textContent('[data-hidden-output]'), '(3 hidden)');
  await page.check('input[data-filter="output"]');
  await page.waitForSelector('.feed li[data-topic="run.output_appended"]');
  const outputs = await page.$$eval('.feed li[data-topic="run.output_appended"] .ev-message', (els) => els.map((e) => e.textContent));
  assert.deepEqual(outputs, [3, 2, 1].map((n) => `run ev-run output: ${n} lines, ${n * 6} bytes (attempt 1 of 1)`));
  await noJson(page, '.feed li[data-topic]');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('the run timeline shows messages, not JSON, with run output collapsed', async () => {
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/runs/webshop/ev-run`);
  await page.waitForSelector('.timeline li[data-topic="run.finished"]');
  assert.equal(await page.textContent('.timeline li[data-topic="run.finished"] .ev-message'), 'run ev-run exited with code 0 (attempt 1 of 1)');
  assert.equal(await page.textContent('.timeline li[data-topic="run.created"] .ev-message'), 'run ev-run created for task product-search (provider claude)');
  await noJson(page, '.timeline li[data-topic]');
  assert.equal(await page.$$eval('.timeline li[data-topic="run.output_appended"]', (els) => els.length), 0);
  await page.click('.timeline [data-collapsed="run.output_appended"] button:has-text("3 output snapshots")');
  await page.waitForSelector('.timeline li[data-topic="run.output_appended"]');
  assert.equal(await page.$$eval('.timeline li[data-topic="run.output_appended"]', (els) => els.length), 3);
  await noJson(page, '.timeline li[data-topic]');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

async function sessionName() {
  return (await pamd.get('/api/v1/projects/webshop/runs/ev-run')).status.sessionName;
}
