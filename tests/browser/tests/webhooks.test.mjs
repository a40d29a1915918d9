// Issue 36: the Webhooks page. A receiver on loopback answers 500: the
// delivery is retried, then failed once its retry window is over (pamd's
// clock read from a file, moved past the window instead of waiting an
// hour); the page shows the failure highlighted with its last response.
// The receiver recovers; Redeliver sends the same delivery again and the
// page shows it delivered.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPamd, launchBrowser, signIn, eventually } from '../lib.mjs';

let pamd, browser, server;
let answer = 500;
const received = [];
const clockFile = join(mkdtempSync(join(tmpdir(), 'pam-clock-')), 'now');
const t0 = new Date();
const setClock = (d) => writeFileSync(clockFile, d.toISOString());

before(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => { received.push({ code: answer, body }); res.writeHead(answer); res.end(); });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  setClock(t0);
  process.env.PAM_CLOCK_FILE = clockFile;
  pamd = await startPamd({
    configToml: '[webhooks]\nallow_networks = ["127.0.0.0/8"]\nretry_initial_ms = 100\nretry_max_seconds = 1\nretry_for_hours = 1\n',
  });
  delete process.env.PAM_CLOCK_FILE;
  const yaml = `apiVersion: pam.dev/v1
kind: Project
metadata: {name: wh}
spec: {}
---
apiVersion: pam.dev/v1
kind: Secret
metadata: {name: hook, project: wh}
spec:
  stringData: {signing: not-a-real-signing-secret}
---
apiVersion: pam.dev/v1
kind: Webhook
metadata: {name: ci}
spec:
  url: http://127.0.0.1:${server.address().port}/hook
  topics: [work_item.]
  projects: [wh]
  signingSecretRef: {project: wh, name: hook, key: signing}
`;
  const r = await pamd.api('POST', '/api/v1/apply', { files: [{ name: 'wh.yaml', content: yaml }] });
  assert.equal(r.status, 200, `apply: ${JSON.stringify(r.body)}`);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await pamd?.stop();
  server?.close();
});

test('a failed delivery is shown highlighted; Redeliver delivers it', async () => {
  const task = 'apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: t1, project: wh}\nspec: {title: One}\n';
  const r = await pamd.api('POST', '/api/v1/apply', { files: [{ name: 't.yaml', content: task }] });
  assert.equal(r.status, 200, `apply: ${JSON.stringify(r.body)}`);
  // The first attempt gets the 500; the retry waits for the clock.
  const first = await eventually('a first failed attempt', async () => {
    const d = (await pamd.get('/api/v1/webhookdeliveries?webhook=ci')).items[0];
    return d && d.attempts >= 1 && d.lastCode === 500 ? d : null;
  });
  assert.equal(first.status, 'pending');
  setClock(new Date(t0.getTime() + 2 * 3600 * 1000));
  await eventually('the delivery failed', async () =>
    (await pamd.get(`/api/v1/webhookdeliveries/${first.id}`)).status === 'failed');

  const page = await signIn(browser, pamd);
  await page.click('[data-nav="webhooks"]');
  const row = `article[data-webhook="ci"] tr[data-delivery="${first.id}"]`;
  await page.waitForSelector(`${row}[data-status="failed"].failed-row`);
  assert.match(await page.textContent(`${row} [data-field="last"]`), /500.*HTTP 500/);
  assert.equal(await page.textContent('article[data-webhook="ci"] [data-field="failed"]'), '1 failed');
  assert.match(await page.textContent('article[data-webhook="ci"]'), /work_item\.created/);

  // The receiver is mended: Redeliver sends the same delivery (id and body).
  answer = 200;
  const before = received.length;
  await page.click(`${row} [data-action="redeliver"]`);
  await page.waitForSelector(`${row}[data-status="delivered"]`, { timeout: 20000 });
  assert.ok(!(await page.$(`${row}.failed-row`)), 'no longer highlighted');
  assert.equal(received.length, before + 1);
  assert.equal(received.at(-1).body, received.at(-2).body, 'the same body');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
