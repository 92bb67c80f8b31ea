// What the dashboard's browser tests share: the browser, a page that records console errors and
// every URL it visits, waiting on visible conditions, screenshots, the confirmation dialog, sign-in.
// Not a test itself (node --test runs the *.test.mjs files); each test file imports it and runs in its
// own process, so the browser here is that file's.
//
// Environment: SKIPLOCK_E2E_ARTIFACTS (default tests/e2e/artifacts) for the screenshots, CHROMIUM
// (default /usr/bin/chromium); for the tenant's tests (tenantHooks), SKIPLOCK_URL, SKIPLOCK_TOKEN and
// SKIPLOCK_ACCOUNT (see the top of tests/e2e/dashboard.test.mjs).

import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const ARTIFACTS = process.env.SKIPLOCK_E2E_ARTIFACTS || path.join(here, 'artifacts');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const LAUNCH_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };
export const WAIT = 15000; // ms for any one visible condition

/** This run's tag, in the names of what the tests create (e2e-…-<RUN>), so runs never collide. */
export const RUN = `${Date.now().toString(36)}${Math.floor(Math.random() * 1296).toString(36)}`;

/** An address from the environment, without a trailing slash ('' when unset). */
export function address(name) {
  return (process.env[name] || '').replace(/\/+$/, '');
}

let browser;

/** Starts the browser (in `before`), and makes the screenshots' folder. */
export async function launch() {
  await mkdir(ARTIFACTS, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: LAUNCH_ARGS });
}

/** Closes the browser (in `after`). */
export async function close() {
  if (browser) await browser.close();
  browser = null;
}

/** The tenant's token, with every scope in its account. */
export const TOKEN = process.env.SKIPLOCK_TOKEN || '';
/** That token's account id. */
export const ACCOUNT = process.env.SKIPLOCK_ACCOUNT || '';

/** Calls the account's API directly (a test's setup and cross-checks) with the all-scopes token. */
export async function api(method, apiPath, body) {
  const res = await fetch(`${address('SKIPLOCK_URL')}/client/v4/accounts/${ACCOUNT}${apiPath}`, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, json: await res.json() };
}

/**
 * Registers the tenant test file's `before` and `after`; call it at the file's top level, as node:test
 * wants. Before: fails at once on a missing address, token or account id (rather than in every step),
 * then starts the browser. After: closes it. (The operator's tests have operatorHooks, in
 * operator-support.mjs.)
 */
export function tenantHooks() {
  before(async () => {
    const missing = ['SKIPLOCK_URL', 'SKIPLOCK_TOKEN', 'SKIPLOCK_ACCOUNT'].filter((k) => !process.env[k]);
    assert.deepEqual(missing, [], `set ${missing.join(', ')}: see the top of tests/e2e/dashboard.test.mjs`);
    assert.match(ACCOUNT, /^[0-9a-f]{32}$/, 'SKIPLOCK_ACCOUNT must be a 32-character hex account id');
    await launch();
  });
  after(close);
}

/**
 * A fresh browser context and page that records console errors, uncaught exceptions and every URL
 * it requests or navigates to. `clipboard` grants the clipboard to the page at `origin`.
 */
export async function openPage({ viewport = DESKTOP, clipboard = false, origin = address('SKIPLOCK_URL') } = {}) {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1, locale: 'en-US', timezoneId: 'UTC' });
  if (clipboard) await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  const log = { errors: [], messages: [], urls: [] };
  page.on('console', (m) => {
    log.messages.push(`${m.type()}: ${m.text()}`);
    if (m.type() === 'error') log.errors.push(m.text());
  });
  page.on('pageerror', (e) => log.errors.push(`uncaught exception: ${e.message}`));
  page.on('request', (r) => log.urls.push(r.url()));
  page.on('framenavigated', (f) => log.urls.push(f.url()));
  return { context, page, log };
}

/** Fails unless every console error matches one of `allowed` (regexps). */
export function assertNoConsoleErrors(log, allowed = []) {
  const unexpected = log.errors.filter((text) => !allowed.some((re) => re.test(text)));
  assert.deepEqual(unexpected, [], `console errors:\n${unexpected.join('\n')}`);
}

/** Fails if a secret ever showed up in a URL or in the console. */
export function assertNotLeaked(log, secret) {
  const short = secret.slice(-16);
  assert.ok(!log.urls.some((u) => u.includes(short)), 'the token appeared in a URL');
  assert.ok(!log.messages.some((m) => m.includes(short)), 'the token appeared in the console');
}

/** Waits until the locator's text matches (a RegExp) or equals (a string, trimmed). */
export async function waitForText(locator, expected, timeout = WAIT) {
  const ok = (text) => (expected instanceof RegExp ? expected.test(text) : text.trim() === expected);
  const deadline = Date.now() + timeout;
  let last = '';
  for (;;) {
    try {
      last = (await locator.first().textContent({ timeout: Math.max(1, deadline - Date.now()) })) ?? '';
      if (ok(last)) return last;
    } catch {
      // not there yet
    }
    if (Date.now() > deadline) {
      assert.fail(`waited ${timeout} ms for ${locator} to read ${expected}; it reads ${JSON.stringify(last.trim())}`);
    }
    await locator.page().waitForTimeout(100); // polling interval, not a fixed wait for a result
  }
}

/**
 * Calls `probe()` until `done(result)` holds, or fails after `timeout` ms with `what` and the last
 * result: for a condition outside the page (what the server answers).
 */
export async function waitFor(what, probe, done, timeout = WAIT) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const result = await probe();
    if (done(result)) return result;
    if (Date.now() > deadline) assert.fail(`waited ${timeout} ms for ${what}; the last answer: ${JSON.stringify(result)}`);
    await new Promise((resolve) => { setTimeout(resolve, 200); }); // polling interval, not a fixed wait
  }
}

export async function shot(page, name, options = {}) {
  // A full-page capture of a scrolled page draws the sticky top bar mid-page: start from the top.
  if (options.fullPage) await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(ARTIFACTS, name), ...options });
}

/**
 * The steps of one test, as subtests sharing its pages: after a failure the rest are skipped rather
 * than failing in cascade, and every page in `shots` (a file-name prefix to a page) is shot as the
 * failure left it, <prefix>-<step title>.png. `failed()` names the step that failed (null if none).
 */
export function steps(t, shots) {
  let failed = null;
  const step = (title, fn) => t.test(title, { skip: failed ? `skipped: "${failed}" failed` : false }, async () => {
    try {
      await fn();
    } catch (err) {
      failed = title;
      const slug = title.replace(/[^a-z0-9]+/gi, '-');
      for (const [prefix, page] of Object.entries(shots)) await shot(page, `${prefix}-${slug}.png`).catch(() => {});
      throw err;
    }
  });
  return { step, failed: () => failed };
}

/** Signs in at the dashboard on `base` with a token alone, as a user does. */
export async function signInAt(page, base, token) {
  await page.goto(`${base}/`);
  await page.getByRole('heading', { name: 'Sign in to the dashboard' }).waitFor();
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Answers the confirmation dialog with `button`; `fill(dialog)` first fills what it asks. */
export async function confirm(page, button, fill = null) {
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  if (fill) await fill(dialog);
  await dialog.getByRole('button', { name: button }).click();
  await dialog.waitFor({ state: 'detached' });
}
