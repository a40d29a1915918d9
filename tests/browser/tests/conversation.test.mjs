// The run page's Conversation and Log tabs with a REAL pam-worker whose
// `claude` provider is pam-fake-provider (its claude stream-json): a
// run's entries appear live while it runs (after the page said it had not
// started), the prompt and messages as bubbles, a tool call with its
// result, a failed run's error in red with its API retry and the refused
// tool call marked, the summary's permissions, agent session and
// PermissionDenied condition, the raw log tab, a host gone offline
// answered with pamd's message, and no sideways scrolling at 420 px.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { startPamd, launchBrowser, signIn, eventually, bin } from '../lib.mjs';

const HOST = 'conv-worker-1';

let pamd, browser, worker, workerDir;

// Each run says what the fake provider does through its environment
// (FAKE_ARGS, FAKE_RESULT): one worker config serves them all.
const SCRIPT = 'exec "$0" --format claude $FAKE_ARGS ${FAKE_RESULT:+--result-text "$FAKE_RESULT"} -p "$1"';

before(async () => {
  pamd = await startPamd({ configToml: '[hosts]\nheartbeat_seconds = 1\noffline_after_seconds = 3\n' });
  pamd.pamctl(['apply', '-f', 'examples/webshop/project.yaml', '-f', 'examples/webshop/tasks/']);
  workerDir = join(pamd.dir, 'worker');
  mkdirSync(workerDir, { recursive: true });
  const token = pamd.pamctl(['token', 'create', '--worker', HOST]).trim().split(/\s+/).find((w) => w.startsWith('pamw_'));
  assert.ok(token, 'a worker token');
  writeFileSync(join(workerDir, 'token'), token);
  const argv = ['sh', '-c', SCRIPT, bin('pam-fake-provider'), '{prompt}'];
  writeFileSync(join(workerDir, 'worker.toml'), [
    `tmux_socket = "${join(workerDir, 'tmux.sock')}"`,
    'heartbeat_seconds = 1', 'tick_seconds = 1', 'snapshot_interval_ms = 200', 'capacity = 4',
    '[providers.claude]',
    `command = [${argv.map((a) => JSON.stringify(a)).join(', ')}]`,
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

function applyRun(name, { prompt, args, result, extra = '' }) {
  const env = [`    - {name: FAKE_ARGS, value: ${JSON.stringify(args)}}`];
  if (result) env.push(`    - {name: FAKE_RESULT, value: ${JSON.stringify(result)}}`);
  const file = join(pamd.dir, `${name}.yaml`);
  writeFileSync(file, `apiVersion: pam.dev/v1
kind: Run
metadata:
  name: ${name}
  project: webshop
spec:
  task: product-search
  provider: claude
  prompt: ${JSON.stringify(prompt)}
  cwd: /tmp
  target:
    host: ${HOST}
  env:
${env.join('\n')}
${extra}`);
  pamd.pamctl(['apply', '-f', file]);
}

const phaseOf = async (name) => (await pamd.get(`/api/v1/projects/webshop/runs/${name}`)).status.phase;

test('the conversation appears live while the run runs, after saying it has not started', async () => {
  applyRun('conv-live', { prompt: 'Count to eight, slowly.', args: '--tool-use --lines 8 --sleep-ms 700' });
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/runs/webshop/conv-live`);
  await page.waitForSelector('.page-head [data-phase="pending"]');
  await page.waitForSelector('#conv-status[data-state="notstarted"]');
  assert.match(await page.textContent('#conv-status'), /Attempt 1 \(current\) · not started yet/);
  await page.evaluate(() => { window.__noReload = true; });
  startWorker();
  // The first step is there while the run is still running: no result yet.
  await page.waitForSelector('#conversation .msg-assistant:has-text("step 1")', { timeout: 30000 });
  assert.equal(await page.locator('#conversation [data-kind="result"]').count(), 0, 'no result while step 1 is the news');
  assert.equal(await phaseOf('conv-live'), 'running');
  await page.waitForSelector('#conv-status[data-state="live"]');
  assert.match(await page.textContent('#conv-status'), /Attempt 1 \(current\) · live/);
  // The prompt is the user's bubble; the tool call got its result live.
  assert.equal((await page.textContent('#conversation .msg-user .msg-text')).trim(), 'Count to eight, slowly.');
  await page.waitForSelector('#conversation details.tool[data-tool="Write"][data-state="ok"]');
  // Later steps arrive without a reload, then the result; the stream ends.
  await page.waitForSelector('#conversation .msg-assistant:has-text("step 8")', { timeout: 30000 });
  await page.waitForSelector('#conversation [data-kind="result"][data-ok="true"]', { timeout: 30000 });
  await page.waitForSelector('#conv-status[data-state="complete"]', { timeout: 30000 });
  const steps = await page.locator('#conversation .msg-assistant').allTextContents();
  assert.deepEqual(steps.map((t) => t.match(/step \d/)?.[0]), ['step 1', 'step 2', 'step 3', 'step 4', 'step 5', 'step 6', 'step 7', 'step 8']);
  assert.equal(await page.evaluate(() => window.__noReload), true, 'the page was not reloaded');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('messages, a tool call with its result, usage, the result, the summary and the raw log', async () => {
  if (!worker || worker.exitCode !== null) startWorker();
  applyRun('conv-ok', { prompt: 'Write hello.txt.\nThen say <b>done</b>.', args: '--tool-use --lines 2' });
  await eventually('conv-ok exited', async () => (await phaseOf('conv-ok')) === 'exited', 60000);
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/runs/webshop/conv-ok`);
  await page.waitForSelector('#conv-status[data-state="complete"]', { timeout: 30000 });
  // The tab is Conversation; the prompt is text, never markup.
  assert.equal(await page.getAttribute('#tab-btn-conversation', 'aria-selected'), 'true');
  assert.equal(await page.textContent('#conversation .msg-user .msg-text'), 'Write hello.txt.\nThen say <b>done</b>.');
  assert.equal(await page.locator('#conversation b').count(), 0);
  assert.deepEqual((await page.locator('#conversation .msg-assistant .msg-text').allTextContents()), ['step 1', 'step 2']);
  assert.match(await page.textContent('#conversation [data-kind="session"]'), /fake-session/);
  // The tool call: its name and target in the summary, closed; opened,
  // its input and its result.
  const tool = page.locator('#conversation details.tool[data-tool="Write"]');
  assert.equal(await tool.getAttribute('data-state'), 'ok');
  assert.equal(await tool.locator('summary .tool-target').textContent(), 'hello.txt');
  assert.equal(await tool.evaluate((d) => d.open), false);
  await tool.locator('summary').click();
  assert.match(await tool.locator('.tool-input').textContent(), /hello from the fake provider/);
  assert.match(await tool.locator('.tool-output').textContent(), /File created successfully at: hello\.txt/);
  assert.equal(await tool.locator('[data-result]').getAttribute('data-result'), 'ok');
  // Usage per step, and the final result.
  assert.match(await page.textContent('#conversation [data-kind="usage"]'), /20 in · 3 out · \$0\.2500/);
  assert.match(await page.textContent('#conversation [data-kind="result"].final-ok'), /done/);
  // The summary: permissions and where they came from, the agent's session.
  assert.equal(await page.textContent('[data-field="permissions"]'), 'edits (from default)');
  assert.equal(await page.textContent('[data-field="session-id"]'), 'fake-session');
  assert.equal(await page.locator('[data-condition="PermissionDenied"]').count(), 0);
  // The Log tab: the whole raw log (plain text lines the transcript has not).
  await page.click('#tab-btn-log');
  assert.equal(await page.getAttribute('#tab-btn-log', 'aria-selected'), 'true');
  assert.ok(await page.isHidden('#conversation'));
  await page.waitForSelector('#conv-status[data-state="complete"]');
  const log = await page.textContent('#log');
  assert.match(log, /plain text between events: no progress here/);
  assert.match(log, /"type":"result"/);
  assert.match(page.url(), /tab=log/);
  // The tab is kept in the URL: a reload opens it again.
  await page.reload();
  await page.waitForSelector('#tab-btn-log[aria-selected="true"]');
  await eventually('the log after reload', async () => /plain text between events/.test(await page.textContent('#log')));
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a failed run: the error in red, the API retry, the refused call marked, PermissionDenied in the summary', async () => {
  if (!worker || worker.exitCode !== null) startWorker();
  applyRun('conv-fail', {
    prompt: 'Clean the build and deploy.',
    args: '--api-retry --denied --fail-result --lines 1',
    result: 'API Error: 500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}',
    extra: '  permissions:\n    mode: readOnly\n    denyTools: ["Bash(rm:*)"]\n',
  });
  await eventually('conv-fail failed', async () => (await phaseOf('conv-fail')) === 'failed', 60000);
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/runs/webshop/conv-fail`);
  await page.waitForSelector('#conversation [data-kind="result"][data-ok="false"]', { timeout: 30000 });
  const error = page.locator('#conversation [data-kind="error"]');
  assert.match(await error.textContent(), /API Error: 500/);
  const colours = await error.evaluate((e) => { const s = getComputedStyle(e); return [s.color, s.borderLeftColor]; });
  assert.deepEqual(colours, ['rgb(138, 17, 24)', 'rgb(192, 38, 45)'], 'the error is red');
  assert.match(await page.textContent('#conversation [data-kind="retry"]'), /attempt 1 of 10: 529 overloaded_error/);
  // The refused call: its block marked, and a Refused line naming it.
  assert.equal(await page.getAttribute('#conversation details.tool[data-tool="Bash"]', 'data-state'), 'refused');
  assert.equal(await page.textContent('#conversation details.tool[data-tool="Bash"] .tool-state'), 'refused');
  const denied = page.locator('#conversation [data-kind="denied"]');
  assert.equal(await denied.count(), 1);
  assert.match(await denied.textContent(), /Refused\s*Bash\s*rm -rf build/);
  assert.match(await page.textContent('#conversation .final-failed'), /Failed/);
  // The summary.
  assert.match(await page.textContent('[data-condition="PermissionDenied"]'), /refused 1 tool call by the run's permissions: Bash rm -rf build/);
  assert.equal(await page.textContent('[data-field="permissions"]'), 'readOnly (from run) · denies Bash(rm:*)');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a restarted run: the view moves to the new attempt; ?attempt=1 reads the first one', async () => {
  if (!worker || worker.exitCode !== null) startWorker();
  const page = await signIn(browser, pamd);
  const asked = [];
  page.on('request', (r) => { if (/\/runs\/conv-again\/(transcript|log)\?/.test(r.url())) asked.push(new URL(r.url()).searchParams.get('attempt')); });
  applyRun('conv-again', {
    prompt: 'Fail, then try again.',
    args: '--lines 2 --sleep-ms 1500 --exit 3',
    extra: '  restartPolicy:\n    maxAttempts: 2\n    backoffSeconds: 0\n',
  });
  await page.goto(`${pamd.url}/#/runs/webshop/conv-again`);
  await page.waitForSelector('#conv-status strong[data-attempt="1"]', { timeout: 30000 });
  await page.waitForSelector('#conversation .msg-assistant:has-text("step 1")', { timeout: 30000 });
  // Attempt 2 replaces attempt 1 in the view, without a reload.
  await page.waitForSelector('#conv-status strong[data-attempt="2"]', { timeout: 60000 });
  await eventually('conv-again failed twice', async () => (await phaseOf('conv-again')) === 'failed', 60000);
  await page.waitForSelector('#conv-status[data-state="complete"]', { timeout: 30000 });
  assert.match(await page.textContent('#conv-status'), /Attempt 2 \(current\) · complete/);
  assert.equal(await page.locator('#conversation .msg-user').count(), 1, 'one attempt shown');
  assert.ok(asked.includes('1') && asked.includes('2'), `attempts read: ${asked}`);
  // The links to each attempt; the first one is read with attempt=1.
  assert.match(await page.textContent('#attempts'), /attempts: 1 · 2/);
  asked.length = 0;
  await page.click('#attempts a[data-attempt-link="1"]');
  await page.waitForSelector('#conv-status strong[data-attempt="1"]');
  await page.waitForSelector('#conv-status[data-state="complete"]');
  assert.match(await page.textContent('#conv-status'), /Attempt 1 · the run is at attempt 2/);
  assert.match(page.url(), /attempt=1/);
  await page.click('#tab-btn-log');
  await eventually('the first attempt\'s log', async () => /plain text between events/.test(await page.textContent('#log')));
  assert.ok(asked.length >= 2 && asked.every((a) => a === '1'), `attempts read: ${asked}`);
  // An attempt the run does not have is said so, not asked for.
  await page.goto(`${pamd.url}/#/runs/webshop/conv-again?attempt=7`);
  await page.waitForSelector('#conv-status[data-state="failed"]');
  assert.match(await page.textContent('#conv-status'), /has no attempt 7 \(its attempts are 1 to 2\)/);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('at 420 px the conversation and the log do not scroll sideways', async () => {
  const page = await signIn(browser, pamd, { width: 420, height: 860 });
  for (const name of ['conv-fail', 'conv-ok']) {
    await page.goto(`${pamd.url}/#/runs/webshop/${name}?tab=conversation`);
    await page.waitForSelector('#conv-status[data-state="complete"]', { timeout: 30000 });
    for (const d of await page.locator('#conversation details.tool summary').all()) await d.click();
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(wide <= 420, `${name} conversation: ${wide} px wide`);
    await page.click('#tab-btn-log');
    await page.waitForSelector('#conv-status[data-state="complete"]');
    const logWide = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(logWide <= 420, `${name} log: ${logWide} px wide`);
  }
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a host gone offline: pamd\'s answer is shown, not a blank view', async () => {
  if (!worker || worker.exitCode !== null) startWorker();
  applyRun('conv-away', { prompt: 'Finish, then lose your host.', args: '--lines 1' });
  await eventually('conv-away exited', async () => (await phaseOf('conv-away')) === 'exited', 60000);
  worker.kill('SIGKILL');
  await eventually('the host offline', async () => (await pamd.get(`/api/v1/hosts/${HOST}`)).status.phase === 'offline', 30000);
  const page = await signIn(browser, pamd);
  await page.goto(`${pamd.url}/#/runs/webshop/conv-away`);
  await page.waitForSelector('#conv-status[data-state="retrying"]', { timeout: 30000 });
  const words = await page.textContent('#conv-status');
  assert.match(words, /lives on host "conv-worker-1", offline since/);
  assert.ok(await page.$eval('#conv-status', (e) => e.classList.contains('error')));
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
