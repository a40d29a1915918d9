// Issue 34: dashboard sign-in with SSO against a small OIDC issuer this
// test runs (discovery, JWKS, an authorization endpoint that signs the
// user in at once, a token endpoint answering an ES256 ID token made with
// node:crypto): a team-web user sees project web only, may stop a web run
// but is shown no stop for docs (read only), never sees api, and signing
// out ends the session on pamd.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { startPamd, launchBrowser, freePort } from '../lib.mjs';

let pamd, browser, issuer;

const b64 = (b) => Buffer.from(b).toString('base64url');

async function startIssuer() {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'k1', alg: 'ES256', use: 'sig' };
  const codes = new Map();
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, url);
    const json = (status, body) => { res.writeHead(status, { 'content-type': 'application/json' }); res.end(JSON.stringify(body)); };
    if (u.pathname === '/.well-known/openid-configuration') {
      return json(200, { issuer: url, authorization_endpoint: `${url}/authorize`, token_endpoint: `${url}/token`, jwks_uri: `${url}/jwks` });
    }
    if (u.pathname === '/jwks') return json(200, { keys: [jwk] });
    if (u.pathname === '/authorize') {
      const code = b64(createHash('sha256').update(u.searchParams.get('state')).digest());
      codes.set(code, { nonce: u.searchParams.get('nonce'), challenge: u.searchParams.get('code_challenge') });
      const back = new URL(u.searchParams.get('redirect_uri'));
      back.searchParams.set('code', code);
      back.searchParams.set('state', u.searchParams.get('state'));
      res.writeHead(303, { location: back.toString() });
      return res.end();
    }
    if (u.pathname === '/token' && req.method === 'POST') {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => {
        const f = new URLSearchParams(body);
        const c = codes.get(f.get('code'));
        codes.delete(f.get('code'));
        const pkce = c && b64(createHash('sha256').update(f.get('code_verifier') || '').digest()) === c.challenge;
        if (!pkce) return json(400, { error: 'invalid_grant' });
        const now = Math.floor(Date.now() / 1000);
        const head = b64(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid: 'k1' }));
        const claims = b64(JSON.stringify({ iss: url, aud: 'pam', sub: 'u-42', email: 'web@example.com',
          nonce: c.nonce, iat: now, exp: now + 3600, groups: ['team-web', 'team-docs'] }));
        const sig = sign('sha256', Buffer.from(`${head}.${claims}`), { key: privateKey, dsaEncoding: 'ieee-p1363' });
        return json(200, { id_token: `${head}.${claims}.${b64(sig)}`, token_type: 'Bearer' });
      });
      return undefined;
    }
    return json(404, { error: 'not_found' });
  });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  return { url, close: () => server.close() };
}

const tree = (p) => `apiVersion: pam.dev/v1
kind: Project
metadata: {name: ${p}}
spec: {}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: ${p}-task, project: ${p}}
spec: {title: T}
---
apiVersion: pam.dev/v1
kind: Run
metadata: {name: ${p}-run, project: ${p}}
spec: {task: ${p}-task, provider: claude, prompt: hi, cwd: /tmp}
`;

before(async () => {
  issuer = await startIssuer();
  pamd = await startPamd({
    configToml: (url) => `[oidc]
issuer = "${issuer.url}"
client_id = "pam"
redirect_url = "${url}/auth/callback"
[oidc.groups]
"team-web" = { role = "operator", projects = ["web"] }
"team-docs" = { role = "viewer", projects = ["docs"] }
`,
  });
  pamd.pamctl(['apply', '-f', '-'], [tree('web'), tree('api'), tree('docs')].join('---\n'));
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await pamd?.stop();
  issuer?.close();
});

test('SSO sign-in shows the groups projects and what they may do, and sign-out ends the session', async () => {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  await page.goto(`${pamd.url}/`);
  // Token paste stays, beside SSO.
  await page.waitForSelector('#token');
  await page.click('#sso');
  await page.waitForSelector('h1:has-text("Projects")');
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'pam_session');
  assert.ok(session && session.httpOnly && session.sameSite === 'Lax', JSON.stringify(cookies));
  // web and docs, never api; the admin-only pages are not offered.
  await page.waitForSelector('[data-project="web"]');
  await page.waitForSelector('[data-project="docs"]');
  assert.equal(await page.locator('[data-project="api"]').count(), 0);
  assert.equal(await page.isHidden('[data-nav="sources"]'), true);
  assert.equal(await page.isHidden('[data-nav="webhooks"]'), true);
  // docs is read only: no stop button; web's run can be stopped.
  await page.goto(`${pamd.url}/#/runs/docs/docs-run`);
  await page.waitForSelector('#stop', { state: 'attached' });
  assert.equal(await page.isHidden('#stop'), true);
  await page.goto(`${pamd.url}/#/runs/web/web-run`);
  await page.waitForSelector('#stop:visible');
  await page.click('#stop');
  await page.waitForSelector('text=Stop requested for web-run');
  const run = await pamd.get('/api/v1/projects/web/runs/web-run');
  assert.equal(run.spec.stopped, true, JSON.stringify(run.spec));
  // Sign out: the session ends on pamd, not only in the page.
  await page.click('#signout');
  await page.waitForSelector('#token');
  const r = await fetch(`${pamd.url}/api/v1/whoami`, { headers: { cookie: `pam_session=${session.value}` } });
  assert.equal(r.status, 401);
  assert.deepEqual(errors, []);
  await context.close();
});
