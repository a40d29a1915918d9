// Takes the README's dashboard screenshots (docs/screenshots/*.png) with the
// same driver as the browser tests, against seeded data: examples/ applied,
// and a worker simulated over the worker protocol (so the pictures are the
// same on every machine): one run running with output, one exited, one
// failed, one host online, one gone offline and flagged instance-suspect,
// and a workspace run's result with its diff (run-result.png); issue 36's
// charts, Webhooks page and 420 px shots; the running run's Conversation
// (conversation.png, conversation-420.png). A simulated worker holds no
// watch for pamd to read an attempt's transcript through, so the browser
// is answered the transcripts below (in the worker's format, as `pamctl
// transcript` prints them) on those two runs' transcript routes.
//
//   CARGO_TARGET_DIR=… node screenshots.mjs   (or: npm run screenshots)

import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPamd, launchBrowser, signIn, eventually, REPO } from './lib.mjs';

const OUT = join(REPO, 'docs', 'screenshots');

// cart-api-impl's transcript so far (one JSON entry a line, as the worker
// writes it): the run is still running, so no result yet.
const t0 = Date.now() - 4 * 60 * 1000;
const at = (s) => new Date(t0 + s * 1000).toISOString();
const CONVERSATION = [
  { kind: 'message', role: 'user', text: 'Implement the cart API described in docs/cart.md, with tests.', at: at(0) },
  { kind: 'session', session_id: '5b0e2c4a-91d7-4f3e-a1c2-7d8e9f0a1b2c', model: 'claude-sonnet-4-5', at: at(2) },
  { kind: 'message', role: 'assistant', text: 'I will read the cart spec and the existing routes first.', at: at(5) },
  { kind: 'tool_call', tool: 'Read', target: 'docs/cart.md', call_id: 'toolu_01', text: '{"file_path":"docs/cart.md"}', at: at(6) },
  { kind: 'tool_result', tool: 'Read', call_id: 'toolu_01', ok: true, at: at(6), text: [
    '# Cart API', '',
    '- POST /cart/items adds an item; adding the same item id twice is one item',
    '- DELETE /cart/items/{id} removes it; 404 when it is not there',
    '- GET /cart lists the items with their quantities'].join('\n') },
  { kind: 'usage', usage: { input_tokens: 8412, cached_input_tokens: 6200, output_tokens: 164, model: 'claude-sonnet-4-5' }, at: at(7) },
  { kind: 'retry', text: 'retrying the API call, attempt 1 of 10: 529 overloaded_error, next in 0.6s', at: at(8) },
  { kind: 'message', role: 'assistant', text: 'Adds must be idempotent. Plan: a CartService over Postgres (upsert on item id), then the routes, then API tests.', at: at(14) },
  { kind: 'tool_call', tool: 'Write', target: 'src/cart/service.rs', call_id: 'toolu_02', at: at(31),
    text: JSON.stringify({ file_path: 'src/cart/service.rs', content: 'use sqlx::PgPool;\n\npub struct CartService { db: PgPool }\n…' }) },
  { kind: 'tool_result', tool: 'Write', call_id: 'toolu_02', ok: true, text: 'File created successfully at: src/cart/service.rs', at: at(31) },
  { kind: 'tool_call', tool: 'Write', target: 'tests/cart_api.rs', call_id: 'toolu_03', at: at(52),
    text: JSON.stringify({ file_path: 'tests/cart_api.rs', content: 'mod common;\n\n#[tokio::test]\nasync fn add_twice_is_idempotent() {…' }) },
  { kind: 'tool_result', tool: 'Write', call_id: 'toolu_03', ok: true, text: 'File created successfully at: tests/cart_api.rs', at: at(52) },
  { kind: 'tool_call', tool: 'Bash', target: 'cargo test cart_api', call_id: 'toolu_04', text: '{"command":"cargo test cart_api","description":"Run the cart API tests"}', at: at(60) },
  { kind: 'tool_result', tool: 'Bash', call_id: 'toolu_04', ok: false, at: at(95), text: [
    'running 9 tests', 'test cart_api::add_twice_is_idempotent ... ok', 'test cart_api::remove_missing_is_404 ... FAILED', '',
    'failures:', '---- cart_api::remove_missing_is_404 stdout ----', 'assertion `left == right` failed', '  left: 500', ' right: 404', '',
    'test result: FAILED. 8 passed; 1 failed'].join('\n') },
  { kind: 'usage', usage: { input_tokens: 15230, cached_input_tokens: 12800, output_tokens: 2114, model: 'claude-sonnet-4-5' }, at: at(96) },
  { kind: 'message', role: 'assistant', text: 'remove() turns a missing row into a 500. It should answer NotFound.', at: at(99) },
  { kind: 'tool_call', tool: 'Edit', target: 'src/cart/service.rs', call_id: 'toolu_05', at: at(104),
    text: JSON.stringify({ file_path: 'src/cart/service.rs', old_string: 'Err(e) => Err(e.into())', new_string: 'Err(sqlx::Error::RowNotFound) => Err(CartError::NotFound)' }) },
  { kind: 'tool_result', tool: 'Edit', call_id: 'toolu_05', ok: true, text: 'The file src/cart/service.rs has been updated.', at: at(104) },
  { kind: 'tool_call', tool: 'Bash', target: 'cargo test cart_api', call_id: 'toolu_06', text: '{"command":"cargo test cart_api"}', at: at(110) },
  { kind: 'tool_result', tool: 'Bash', call_id: 'toolu_06', ok: true, text: 'running 9 tests\n…\ntest result: ok. 9 passed; 0 failed', at: at(141) },
  { kind: 'tool_call', tool: 'Bash', target: 'git push origin HEAD', call_id: 'toolu_07', text: '{"command":"git push origin HEAD"}', at: at(150) },
  { kind: 'tool_result', tool: 'Bash', call_id: 'toolu_07', ok: false, text: 'Claude requested permissions to use Bash, but you have not granted it yet.', at: at(150) },
  { kind: 'denied', tool: 'Bash', target: 'git push origin HEAD', text: 'Claude requested permissions to use Bash, but you have not granted it yet.', at: at(150) },
  { kind: 'message', role: 'assistant', text: 'All 9 cart API tests pass. Pushing is not allowed here, so the commit stays on the branch. Writing the summary for the pull request…', at: at(158) },
];

// cart-totals-1's (finished, beside its workspace result).
const TOTALS = [
  { kind: 'message', role: 'user', text: 'Add a totals line to the cart and test it.', at: at(0) },
  { kind: 'session', session_id: '0c7d1e2f-3a4b-4c5d-8e9f-a0b1c2d3e4f5', model: 'claude-sonnet-4-5', at: at(1) },
  { kind: 'tool_call', tool: 'Edit', target: 'src/cart.rs', call_id: 'toolu_11', text: JSON.stringify({ file_path: 'src/cart.rs', old_string: '    }\n}', new_string: '    }\n\n    pub fn total_cents(&self) -> u64 {…}\n}' }), at: at(20) },
  { kind: 'tool_result', tool: 'Edit', call_id: 'toolu_11', ok: true, text: 'The file src/cart.rs has been updated.', at: at(20) },
  { kind: 'tool_call', tool: 'Bash', target: 'cargo test', call_id: 'toolu_12', text: '{"command":"cargo test"}', at: at(41) },
  { kind: 'tool_result', tool: 'Bash', call_id: 'toolu_12', ok: true, text: 'test result: ok. 10 passed; 0 failed', at: at(70) },
  { kind: 'usage', usage: { input_tokens: 21044, cached_input_tokens: 17310, output_tokens: 1260, model: 'claude-sonnet-4-5', cost_usd: 0.0912 }, at: at(72) },
  { kind: 'result', ok: true, text: 'Added Cart::total_cents and a test for it; cargo test passes.', at: at(72) },
];

const ndjson = (entries) => Buffer.from(entries.map((e) => JSON.stringify(e)).join('\n') + '\n');

/**
 * Answers `page`'s reads of `run`'s transcript with `entries` (`done`:
 * the attempt is over; else live, more may come).
 */
async function cannedTranscript(page, run, entries, done) {
  const bytes = ndjson(entries);
  await page.route(new RegExp(`/runs/${run}/transcript\\?`), (route) => {
    const offset = Number(new URL(route.request().url()).searchParams.get('offset') || 0);
    route.fulfill({
      status: 200,
      headers: { 'content-type': 'application/x-ndjson', 'x-pam-attempt': '1', 'x-pam-offset': String(offset), 'x-pam-size': String(bytes.length), 'x-pam-done': String(done) },
      body: bytes.subarray(Math.min(offset, bytes.length)),
    });
  });
}

mkdirSync(OUT, { recursive: true });

// The Sources shot watches a temporary directory: allowed (issue 30).
const pamd = await startPamd({ configToml: `[hosts]\nheartbeat_seconds = 1\noffline_after_seconds = 3\n[sources]\nallowed_roots = [${JSON.stringify(tmpdir())}]\n` });
let browser;
try {
  pamd.pamctl(['apply', '-R', '-f', 'examples/']);
  const worker = async (host) => {
    const r = await pamd.api('POST', '/api/v1/tokens', { worker: host });
    const token = r.body.token;
    return async (method, path, body) => {
      const res = await fetch(`${pamd.url}${path}`, {
        method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return text ? JSON.parse(text) : null;
    };
  };
  const linux = await worker('build-linux-1');
  const linuxInstance = randomUUID();
  await linux('POST', '/api/v1/workers/register', { name: 'build-linux-1', platform: 'linux', instance_id: linuxInstance, capacity: 8, labels: { os: 'linux', pool: 'fast' }, version: 'screenshot' });
  const claimed = (await linux('POST', '/api/v1/workers/claim?wait=0&max=10')).runs;
  const byName = {};
  for (const r of (await pamd.get('/api/v1/projects/webshop/runs')).items) byName[r.metadata.name] = r.metadata.uid;
  const now = () => new Date().toISOString();
  const sig = (name, attempt, kind, extra = {}) => ({ run_id: byName[name], attempt, kind, at: now(), ...extra });
  const attemptOf = (name) => claimed.find((c) => c.run_id === byName[name])?.attempt ?? 1;
  const send = (...signals) => linux('POST', '/api/v1/workers/signals', { signals });
  for (const n of Object.keys(byName)) if (claimed.some((c) => c.run_id === byName[n])) await send(sig(n, attemptOf(n), 'started'));
  if (claimed.some((c) => c.run_id === byName['search-index-impl'])) {
    await send(sig('search-index-impl', attemptOf('search-index-impl'), 'finished',
      { exit_code: 0, usage: { input_tokens: 48200, output_tokens: 6100, cost_usd: 0.84 } }));
  }
  if (claimed.some((c) => c.run_id === byName['webhook-tests'])) await send(sig('webhook-tests', attemptOf('webhook-tests'), 'failed', { exit_code: 2, reason: 'make: *** [test-webhooks] Error 2' }));
  const text = [
    '● Reading docs/cart.md',
    '● Planning: CartService with add/remove/list, Postgres-backed, idempotent adds',
    '✎ src/cart/service.rs (+142)', '✎ src/cart/routes.rs (+88)', '✎ tests/cart_api.rs (+121)',
    '$ cargo test cart_api', '   running 9 tests', '   test cart_api::add_twice_is_idempotent ... ok',
    '   test cart_api::remove_missing_is_404 ... ok', '   test result: ok. 9 passed; 0 failed',
    '● Writing the summary for the pull request…',
  ].join('\n');
  await linux('POST', '/api/v1/workers/snapshots', { run_id: byName['cart-api-impl'], attempt: attemptOf('cart-api-impl'), text, lines: 11, bytes: text.length });
  // What the agent did, as the worker's progress signals say it: the
  // session id, the newest activity, a refused push (PermissionDenied).
  if (claimed.some((c) => c.run_id === byName['cart-api-impl'])) {
    await send(sig('cart-api-impl', attemptOf('cart-api-impl'), 'progress', {
      seq: 1,
      session_id: '5b0e2c4a-91d7-4f3e-a1c2-7d8e9f0a1b2c',
      activity: [
        { kind: 'tool_call', tool: 'Bash', target: 'git push origin HEAD' },
        { kind: 'denied', tool: 'Bash', target: 'git push origin HEAD' },
        { kind: 'message', role: 'assistant', text: 'All 9 cart API tests pass. Pushing is not allowed here, so the commit stays on the branch.' },
      ],
    }));
  }
  // studio-mac: seen once, then silent (offline), then a second instance id (suspect).
  const mac = await worker('studio-mac');
  await mac('POST', '/api/v1/workers/register', { name: 'studio-mac', platform: 'macos', instance_id: randomUUID(), capacity: 2, labels: { os: 'macos' }, version: 'screenshot' });
  await mac('POST', '/api/v1/workers/register', { name: 'studio-mac', platform: 'macos', instance_id: randomUUID(), capacity: 2, labels: { os: 'macos' }, version: 'screenshot' }).catch(() => {});
  const beat = setInterval(() => linux('POST', '/api/v1/workers/heartbeat', { instance_id: linuxInstance, running: [] }).catch(() => {}), 700);
  await eventually('studio-mac offline', async () => (await pamd.get('/api/v1/hosts/studio-mac')).status.phase === 'offline', 20000);
  // Some board movement.
  await pamd.api('POST', '/api/v1/projects/webshop/tasks/product-search/transition', { to: 'doing' });

  browser = await launchBrowser();
  const page = await signIn(browser, pamd, { width: 1400, height: 860 });
  await cannedTranscript(page, 'cart-api-impl', CONVERSATION, false);
  await page.goto(`${pamd.url}/#/board/webshop`);
  await page.waitForSelector('.board [data-task="cart-api"]');
  await page.screenshot({ path: join(OUT, 'board.png'), fullPage: true });
  await page.goto(`${pamd.url}/#/runs/webshop/cart-api-impl`);
  await page.waitForSelector('#output:has-text("cargo test")');
  await page.waitForSelector('.timeline [data-topic="run.started"]');
  await page.waitForSelector('#conversation [data-kind="denied"]');
  await page.screenshot({ path: join(OUT, 'run.png'), fullPage: true });
  // The Conversation tab, on a taller screen: the failed test run opened.
  await page.setViewportSize({ width: 1400, height: 1650 });
  await page.click('#conversation details.tool[data-call-id="toolu_04"] summary');
  await page.$eval('#conversation', (c) => { c.scrollTop = 0; });
  await page.locator('#agent').screenshot({ path: join(OUT, 'conversation.png') });
  await page.setViewportSize({ width: 1400, height: 860 });
  await page.goto(`${pamd.url}/#/hosts`);
  await page.waitForSelector('tr[data-host="studio-mac"][data-phase="offline"]');
  await page.screenshot({ path: join(OUT, 'hosts.png'), fullPage: true });
  await page.goto(`${pamd.url}/#/runs`);
  await page.waitForSelector('tr[data-run="cart-api-impl"]');
  await page.screenshot({ path: join(OUT, 'runs.png'), fullPage: true });
  // Sources: a watched directory in sync next to examples/sources.yaml's
  // git Source, which cannot reach its (example) remote here.
  const tree = mkdtempSync(join(tmpdir(), 'pam-shot-'));
  writeFileSync(join(tree, 'docs.yaml'), 'apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: docs-site}\nspec: {displayName: Docs site}\n---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: search-page, project: docs-site}\nspec: {title: Search page}\n');
  const src = join(tree, '..', `${tree.split('/').pop()}.yaml`);
  writeFileSync(src, `apiVersion: pam.dev/v1\nkind: Source\nmetadata: {name: docs-site}\nspec:\n  path: '${tree}'\n  interval: 5m\n  projects: [docs-site]\n`);
  pamd.pamctl(['apply', '-f', src]);
  await eventually('docs-site synced', async () => (await pamd.get('/api/v1/sources/docs-site')).status?.sync === 'Synced', 20000);
  await eventually('webshop source tried', async () => (await pamd.get('/api/v1/sources/webshop')).status?.sync === 'Failed', 60000);
  await page.goto(`${pamd.url}/#/sources`);
  await page.waitForSelector('article[data-source="docs-site"][data-sync="Synced"]');
  await page.waitForSelector('article[data-source="webshop"][data-sync="Failed"]');
  await page.screenshot({ path: join(OUT, 'sources.png'), fullPage: true });
  // Issue 32: a workspace run's result and diff.
  const wsYaml = 'apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: shop}\nspec:\n  repository: {url: "file:///srv/git/shop.git"}\n---\n'
    + 'apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: cart-totals, project: shop}\nspec: {title: Cart totals}\n---\n'
    + 'apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: cart-totals-1, project: shop}\nspec:\n  task: cart-totals\n  provider: claude\n  prompt: Add a totals line to the cart and test it.\n  workspace: {push: true}\n';
  await pamd.api('POST', '/api/v1/apply', { files: [{ name: 'shop.yaml', content: wsYaml }] });
  // Long-polled until this run is the one claimed: it may become
  // claimable a moment after the apply answered, and a webshop run left
  // pending may come first (the claim was flaky with wait=0).
  const wsId = (await pamd.get('/api/v1/projects/shop/runs/cart-totals-1')).metadata.uid;
  let ws;
  await eventually('cart-totals-1 claimed', async () => {
    ws = (await linux('POST', '/api/v1/workers/claim?wait=2&max=10')).runs.find((r) => r.run_id === wsId);
    return ws;
  }, 30000);
  await send({ run_id: ws.run_id, attempt: ws.attempt, kind: 'started', at: now() });
  const patch = [
    'diff --git a/src/cart.rs b/src/cart.rs', 'index 4f2a9c1..8b0d3e7 100644', '--- a/src/cart.rs', '+++ b/src/cart.rs',
    '@@ -12,6 +12,10 @@ impl Cart {', '     pub fn items(&self) -> &[Item] {', '         &self.items', '     }',
    '+', '+    pub fn total_cents(&self) -> u64 {', '+        self.items.iter().map(|i| i.price_cents * u64::from(i.qty)).sum()', '+    }',
    ' }', 'diff --git a/tests/cart_api.rs b/tests/cart_api.rs', 'index 9c1e2aa..1d7f0b2 100644', '--- a/tests/cart_api.rs', '+++ b/tests/cart_api.rs',
    '@@ -40,3 +40,9 @@ fn remove_missing_is_404() {', '     assert_eq!(res.status(), 404);', ' }', '-// TODO: totals',
    '+', '+#[test]', '+fn total_sums_price_times_quantity() {', '+    let cart = Cart::with(&[(250, 2), (99, 1)]);', '+    assert_eq!(cart.total_cents(), 599);', '+}', '',
  ].join('\n');
  await send({ run_id: ws.run_id, attempt: ws.attempt, kind: 'finished', at: now(), exit_code: 0, result: {
    branch: 'pam/cart-totals/cart-totals-1-a1', base_commit: '4c1d9e0a7b3f2e19d8c6a5b4e3f2d1c0b9a8f7e6', head_commit: 'a9e8d7c6b5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0',
    commits: 2, files_changed: 2, insertions: 10, deletions: 1, patch, patch_truncated: false, pushed: true,
  } });
  await cannedTranscript(page, 'cart-totals-1', TOTALS, true);
  await page.goto(`${pamd.url}/#/runs/shop/cart-totals-1`);
  await page.waitForSelector('#result .diff');
  await page.waitForSelector('#conv-status[data-state="complete"]');
  await page.screenshot({ path: join(OUT, 'run-result.png'), fullPage: true });
  // Issue 36: the project's charts (outcomes, throughput, duration, cost
  // against a budget, dispatch latency), the Webhooks page (the example's
  // receiver is unreachable here: its delivery shows the error), and the
  // board at 420 px.
  const project = readFileSync(join(REPO, 'examples/webshop/project.yaml'), 'utf8');
  await pamd.api('POST', '/api/v1/apply', { files: [{ name: 'project.yaml', content: `${project.trimEnd()}\n  budget: {maxCostUsd: 2}\n` }] });
  await page.goto(`${pamd.url}/#/charts/webshop`);
  await page.waitForSelector('svg[data-chart-svg="outcomes"] rect');
  await page.screenshot({ path: join(OUT, 'charts.png'), fullPage: true });
  await eventually('a webhook delivery attempted', async () =>
    (await pamd.get('/api/v1/webhookdeliveries?webhook=ci')).items.some((d) => d.attempts > 0), 30000).catch(() => {});
  await page.goto(`${pamd.url}/#/webhooks`);
  await page.waitForSelector('article[data-webhook="ci"]');
  await page.screenshot({ path: join(OUT, 'webhooks.png'), fullPage: true });
  const narrow = await signIn(browser, pamd, { width: 420, height: 860 });
  await narrow.goto(`${pamd.url}/#/board/webshop`);
  await narrow.waitForSelector('.board [data-task="cart-api"]');
  await narrow.screenshot({ path: join(OUT, 'board-420.png'), fullPage: true });
  await narrow.goto(`${pamd.url}/#/charts/webshop`);
  await narrow.waitForSelector('svg[data-chart-svg="outcomes"] rect');
  await narrow.screenshot({ path: join(OUT, 'charts-420.png'), fullPage: true });
  await cannedTranscript(narrow, 'cart-api-impl', CONVERSATION, false);
  await narrow.goto(`${pamd.url}/#/runs/webshop/cart-api-impl`);
  await narrow.waitForSelector('#conversation [data-kind="denied"]');
  await narrow.click('#conversation details.tool[data-call-id="toolu_04"] summary');
  await narrow.$eval('#conversation', (c) => { c.scrollTop = 0; });
  await narrow.locator('#agent').screenshot({ path: join(OUT, 'conversation-420.png') });
  clearInterval(beat);
  console.log(`screenshots written to ${OUT}`);
} finally {
  await browser?.close();
  await pamd.stop();
}
