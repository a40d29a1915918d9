// With a REAL pam-worker (running pam-fake-provider in tmux): watch a run go
// pending → exited live on its page and in the runs table, then SIGKILL the
// worker and watch its host turn offline on the hosts page (pamd's
// thresholds shortened through its config).
// Also: attach to a running run from its page and type into its pane.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { startPamd, launchBrowser, signIn, eventually, bin } from '../lib.mjs';

const HOST = 'dash-worker-1';

let pamd, browser, worker, workerDir;

before(async () => {
  pamd = await startPamd({ configToml: '[hosts]\nheartbeat_seconds = 1\noffline_after_seconds = 3\n' });
  pamd.pamctl(['apply', '-f', 'examples/webshop/project.yaml', '-f', 'examples/webshop/tasks/']);
  workerDir = join(pamd.dir, 'worker');
  mkdirSync(workerDir, { recursive: true });
  const token = pamd.pamctl(['token', 'create', '--worker', HOST]).trim().split(/\s+/).find((w) => w.startsWith('pamw_'));
  assert.ok(token, 'a worker token');
  writeFileSync(join(workerDir, 'token'), token);
  writeFileSync(join(workerDir, 'worker.toml'), [
    `tmux_socket = "${join(workerDir, 'tmux.sock')}"`,
    'heartbeat_seconds = 1', 'tick_seconds = 1', 'snapshot_interval_ms = 200', 'capacity = 2',
    '[providers.claude]',
    `command = ["${bin('pam-fake-provider')}", "--format", "claude", "--lines", "6", "--sleep-ms", "300", "-p", "{prompt}"]`,
    '',
  ].join('\n'));
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  if (worker && worker.exitCode === null) worker.kill('SIGKILL');
  try { execFileSync('tmux', ['-S', join(workerDir, 'tmux.sock'), 'kill-server'], { stdio: 'ignore' }); } catch { /* none */ }
  await pamd?.stop();
});

function startWorker() {
  const log = openSync(join(workerDir, 'worker.log'), 'a');
  worker = spawn(bin('pam-worker'), ['--server', pamd.url, '--token-file', join(workerDir, 'token'), '--name', HOST,
    '--data-dir', join(workerDir, 'data'), '--config', join(workerDir, 'worker.toml')],
  { stdio: ['ignore', log, log], env: { ...process.env, PAM_LOG: 'info' } });
  return worker;
}

const runManifest = `apiVersion: pam.dev/v1
kind: Run
metadata:
  name: dash-live
  project: webshop
spec:
  task: product-search
  provider: claude
  prompt: Say hello from the dashboard test.
  cwd: /tmp
  target:
    host: ${HOST}
`;

test('a run goes pending → exited live on its page while a real pam-worker runs it', async () => {
  const page = await signIn(browser, pamd);
  writeFileSync(join(pamd.dir, 'run.yaml'), runManifest);
  pamd.pamctl(['apply', '-f', join(pamd.dir, 'run.yaml')]);
  await page.goto(`${pamd.url}/#/runs`);
  await page.waitForSelector('tr[data-run="dash-live"] [data-phase="pending"]');
  await page.click('tr[data-run="dash-live"] a');
  await page.waitForSelector('.page-head [data-phase="pending"]');
  // From here on, no reload: every change arrives as an event.
  await page.evaluate(() => { window.__noReload = true; });
  startWorker();
  await page.waitForSelector('.page-head [data-phase="exited"]', { timeout: 60000 });
  assert.equal(await page.evaluate(() => window.__noReload), true, 'the page was not reloaded');
  // The timeline shows the run's events, the output panel the fake provider's text.
  await page.waitForSelector('.timeline [data-topic="run.started"]');
  await page.waitForSelector('.timeline [data-topic="run.finished"]');
  await eventually('the output snapshot', async () => /hello from the dashboard/i.test(await page.textContent('#output')), 20000);
  assert.equal((await pamd.get('/api/v1/projects/webshop/runs/dash-live')).status.phase, 'exited');
  await page.context().close();
});

test('attach: take the lease on a running run and type into it', async () => {
  if (!worker || worker.exitCode !== null) startWorker();
  writeFileSync(join(pamd.dir, 'cat.yaml'), `apiVersion: pam.dev/v1
kind: Run
metadata:
  name: dash-cat
  project: webshop
spec:
  task: order-emails
  provider: exec
  command: ["cat"]
  cwd: /tmp
  target:
    host: ${HOST}
`);
  pamd.pamctl(['apply', '-f', join(pamd.dir, 'cat.yaml')]);
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/runs/webshop/dash-cat`);
  await page.waitForSelector('.page-head [data-phase="running"]', { timeout: 30000 });
  // A run that is not a re-run: no "re-run of" line, and no stray "null"
  // where it would be.
  const head = await page.evaluate(() => document.querySelector('.page-head').parentElement.innerText);
  assert.ok(!/\bnull\b/.test(head), head);
  assert.equal(await page.locator('[data-field="rerun-of"]').count(), 0);
  await page.click('#attach-btn:not([disabled])');
  await page.fill('#attach-input', 'hello-from-the-browser');
  await page.press('#attach-input', 'Enter');
  await eventually('the typed line in the output', async () => (await page.textContent('#output')).includes('hello-from-the-browser'), 30000);
  // Leaving the page releases the lease: a second holder can take it.
  await page.goto(`${pamd.url}/#/hosts`);
  await eventually('the lease released', async () => {
    const r = await pamd.api('POST', '/api/v1/projects/webshop/runs/dash-cat/attach', { holder: 'test' });
    return r.status === 201;
  }, 10000);
  await pamd.api('POST', '/api/v1/projects/webshop/runs/dash-cat/stop');
  await page.context().close();
});

test('a killed worker\'s host turns offline live on the hosts page', async () => {
  if (!worker || worker.exitCode !== null) startWorker();
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/hosts`);
  await page.waitForSelector(`tr[data-host="${HOST}"][data-phase="online"]`, { timeout: 30000 });
  worker.kill('SIGKILL');
  await page.waitForSelector(`tr[data-host="${HOST}"][data-phase="offline"] .phase-offline`, { timeout: 30000 });
  assert.equal((await pamd.get(`/api/v1/hosts/${HOST}`)).status.phase, 'offline');
  await page.context().close();
});
