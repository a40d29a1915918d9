// Takes the README's dashboard screenshots (docs/screenshots/*.png) with the
// same driver as the browser tests, against seeded data: examples/ applied,
// and a worker simulated over the worker protocol (so the pictures are the
// same on every machine): one run running with output, one exited, one
// failed, one host online, one gone offline and flagged instance-suspect,
// and a workspace run's result with its diff (run-result.png); issue 36's
// charts, Webhooks page and 420 px shots.
//
//   CARGO_TARGET_DIR=… node screenshots.mjs   (or: npm run screenshots)

import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPamd, launchBrowser, signIn, eventually, REPO } from './lib.mjs';

const OUT = join(REPO, 'docs', 'screenshots');
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
  const at = () => new Date().toISOString();
  const sig = (name, attempt, kind, extra = {}) => ({ run_id: byName[name], attempt, kind, at: at(), ...extra });
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
  await page.goto(`${pamd.url}/#/board/webshop`);
  await page.waitForSelector('.board [data-task="cart-api"]');
  await page.screenshot({ path: join(OUT, 'board.png'), fullPage: true });
  await page.goto(`${pamd.url}/#/runs/webshop/cart-api-impl`);
  await page.waitForSelector('#output:has-text("cargo test")');
  await page.waitForSelector('.timeline [data-topic="run.started"]');
  await page.screenshot({ path: join(OUT, 'run.png'), fullPage: true });
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
  await send({ run_id: ws.run_id, attempt: ws.attempt, kind: 'started', at: at() });
  const patch = [
    'diff --git a/src/cart.rs b/src/cart.rs', 'index 4f2a9c1..8b0d3e7 100644', '--- a/src/cart.rs', '+++ b/src/cart.rs',
    '@@ -12,6 +12,10 @@ impl Cart {', '     pub fn items(&self) -> &[Item] {', '         &self.items', '     }',
    '+', '+    pub fn total_cents(&self) -> u64 {', '+        self.items.iter().map(|i| i.price_cents * u64::from(i.qty)).sum()', '+    }',
    ' }', 'diff --git a/tests/cart_api.rs b/tests/cart_api.rs', 'index 9c1e2aa..1d7f0b2 100644', '--- a/tests/cart_api.rs', '+++ b/tests/cart_api.rs',
    '@@ -40,3 +40,9 @@ fn remove_missing_is_404() {', '     assert_eq!(res.status(), 404);', ' }', '-// TODO: totals',
    '+', '+#[test]', '+fn total_sums_price_times_quantity() {', '+    let cart = Cart::with(&[(250, 2), (99, 1)]);', '+    assert_eq!(cart.total_cents(), 599);', '+}', '',
  ].join('\n');
  await send({ run_id: ws.run_id, attempt: ws.attempt, kind: 'finished', at: at(), exit_code: 0, result: {
    branch: 'pam/cart-totals/cart-totals-1-a1', base_commit: '4c1d9e0a7b3f2e19d8c6a5b4e3f2d1c0b9a8f7e6', head_commit: 'a9e8d7c6b5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0',
    commits: 2, files_changed: 2, insertions: 10, deletions: 1, patch, patch_truncated: false, pushed: true,
  } });
  await page.goto(`${pamd.url}/#/runs/shop/cart-totals-1`);
  await page.waitForSelector('#result .diff');
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
  clearInterval(beat);
  console.log(`screenshots written to ${OUT}`);
} finally {
  await browser?.close();
  await pamd.stop();
}
