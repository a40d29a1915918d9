// Harness for the dashboard's browser tests: a real pamd (debug binaries
// from the cargo target dir) on a fresh database of the shared test cluster
// (`pam-testdb fresh`), real pamctl, and Debian's Chromium driven by
// playwright-core.
//
// Env: PAM_BIN_DIR (default: $CARGO_TARGET_DIR/debug, else <repo>/target/debug),
//      CHROMIUM (default /usr/bin/chromium).

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, mkdirSync, existsSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { chromium } from 'playwright-core';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN_DIR = process.env.PAM_BIN_DIR
  || join(process.env.CARGO_TARGET_DIR || join(REPO, 'target'), 'debug');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

export function bin(name) {
  const p = join(BIN_DIR, name);
  if (!existsSync(p)) throw new Error(`${p} is not built: run \`cargo build --workspace\` first (or set PAM_BIN_DIR)`);
  return p;
}

export function freePort() {
  return new Promise((ok, fail) => {
    const s = net.createServer();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => ok(port)); });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `f` until it returns a truthy value; throws after `ms`. */
export async function eventually(what, f, ms = 20000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { const v = await f(); if (v) return v; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
    await sleep(100);
  }
}

/** A running pamd on a fresh database. `stop()` kills it. */
export async function startPamd({ configToml = '' } = {}) {
  const databaseUrl = execFileSync(bin('pam-testdb'), ['fresh'], { encoding: 'utf8' }).trim();
  const dir = mkdtempSync(join(tmpdir(), 'pam-browser-'));
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir);
  const config = join(dir, 'pamd.toml');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // A function: a config that names pamd's own URL (OIDC's redirect_url).
  writeFileSync(config, typeof configToml === 'function' ? configToml(url) : configToml);
  const log = join(dataDir, 'pamd.log');
  const out = openSync(log, 'a');
  const launch = async () => {
    const child = spawn(bin('pamd'), ['--config', config, '--data-dir', dataDir, '--listen', `127.0.0.1:${port}`, '--database-url', databaseUrl],
      { env: { ...process.env, PAM_LOG: 'info' }, stdio: ['ignore', out, out] });
    let exited = null;
    child.on('exit', (code, sig) => { exited = `${code ?? sig}`; });
    await eventually('pamd /readyz', async () => {
      if (exited) throw new Error(`pamd exited (${exited}):\n${readFileSync(log, 'utf8')}`);
      const r = await fetch(`${url}/readyz`);
      return r.ok;
    }, 30000);
    return child;
  };
  let child = await launch();
  const token = readFileSync(join(dataDir, 'admin.token'), 'utf8').trim();
  const children = [];
  const pamd = {
    url, token, dir, dataDir, log: () => readFileSync(log, 'utf8'),
    /** pamctl with an isolated environment. */
    pamctl(args, input) {
      const home = join(dir, 'home');
      mkdirSync(home, { recursive: true });
      return execFileSync(bin('pamctl'), args, {
        encoding: 'utf8', cwd: REPO, input,
        env: { PATH: process.env.PATH, HOME: home, PAM_SERVER: url, PAM_TOKEN: token, NO_COLOR: '1' },
      });
    },
    async api(method, path, body) {
      const r = await fetch(`${url}${path}`, {
        method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await r.text();
      return { status: r.status, body: text ? JSON.parse(text) : null };
    },
    async get(path) {
      const r = await pamd.api('GET', path);
      if (r.status >= 400) throw new Error(`GET ${path}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    },
    /** SIGKILL pamd (a crash). */
    async kill() {
      if (child.exitCode === null && child.signalCode === null) {
        const gone = new Promise((r) => child.once('exit', r));
        child.kill('SIGKILL');
        await gone;
      }
    },
    /** Starts pamd again on the same port, data dir and database. */
    async restart() {
      await pamd.kill();
      child = await launch();
    },
    /** Tracks a child process to kill at stop(). */
    own(c) { children.push(c); return c; },
    async stop() {
      await pamd.kill();
      for (const c of children.reverse()) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    },
  };
  return pamd;
}

/** Headless Chromium (Debian's) through playwright-core. */
export async function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // We run as root in CI containers, where Chromium's sandbox cannot start.
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  });
}

/** Opens the dashboard and signs in with the admin token. */
export async function signIn(browser, pamd, viewport = { width: 1400, height: 900 }) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  page.errors = errors;
  await page.goto(pamd.url + '/');
  await page.fill('#token', pamd.token);
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('h1:has-text("Projects")');
  return page;
}
