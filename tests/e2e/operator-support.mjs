// What the browser tests of the operator view share (operator.test.mjs, plans.test.mjs,
// deletion.test.mjs): the two addresses and the operator token, the skip without an operator address,
// the hooks that check the environment and start the browser, calls to the operator and tenant APIs,
// and what of the operator view they all read (an account's row, a new account's first token). Not a
// test itself; each of those files imports it (and support.mjs) and runs in its own process.
//
// Environment: SKIPLOCK_URL, SKIPLOCK_ADMIN_URL and SKIPLOCK_OPERATOR_TOKEN (see the top of
// tests/e2e/operator.test.mjs).

import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { address, launch, close, waitForText } from './support.mjs';

/** The public address (the tenant API and an account's dashboard). */
export const BASE = address('SKIPLOCK_URL');
/** The operator address (the operator API and the operator view). */
export const ADMIN = address('SKIPLOCK_ADMIN_URL');
export const OPERATOR_TOKEN = process.env.SKIPLOCK_OPERATOR_TOKEN || '';

/** Each test's `skip`: without an operator address there is nothing to test, and the run says so. */
export const SKIP = ADMIN ? false : 'SKIPLOCK_ADMIN_URL is not set: no operator address to test (see the top of tests/e2e/operator.test.mjs)';

/**
 * Registers the test file's `before` and `after`; call it at the file's top level, as node:test wants.
 * Before: unless skipped, fails at once on a missing address or a token that is not an operator's
 * (rather than in every step), then starts the browser. After: closes it.
 */
export function operatorHooks() {
  before(async () => {
    if (SKIP) return;
    const missing = ['SKIPLOCK_URL', 'SKIPLOCK_OPERATOR_TOKEN'].filter((k) => !process.env[k]);
    assert.deepEqual(missing, [], `set ${missing.join(', ')}: see the top of tests/e2e/operator.test.mjs`);
    assert.match(OPERATOR_TOKEN, /^sko_/, 'SKIPLOCK_OPERATOR_TOKEN must be an operator token (sko_...)');
    await launch();
  });
  after(close);
}

/** A JSON request with a bearer token: its status and its parsed answer. */
async function call(url, method, body, token) {
  const res = await fetch(url, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await res.json();
  return { status: res.status, json };
}

/** The operator API, with the operator token (setup, cross-checks and cleanup). */
export const admin = (method, apiPath, body) => call(`${ADMIN}/admin/v1${apiPath}`, method, body, OPERATOR_TOKEN);

/** The tenant API on the public address, with an account's token. */
export const tenant = (method, apiPath, token, body) => call(`${BASE}/client/v4${apiPath}`, method, body, token);

/** The accounts table's row of the account named `name`. */
export const accountRow = (page, name) => page.getByRole('table', { name: 'Accounts' })
  .locator('tr', { has: page.getByRole('link', { name, exact: true }) });

/**
 * The account just created in the operator view, from the box that shows its first token once: the
 * box, the token, and the account id and scopes the tenant API gives for the token (the server's word,
 * not the page's).
 */
export async function createdAccount(page, name) {
  const box = page.getByRole('region', { name: `Account “${name}” created` });
  await waitForText(box, /shown only once/);
  const firstToken = await box.getByRole('textbox', { name: 'First API token' }).inputValue();
  assert.match(firstToken, /^skl_/);
  const verified = await tenant('GET', '/user/tokens/verify', firstToken);
  assert.equal(verified.status, 200, JSON.stringify(verified.json));
  return { box, firstToken, accountId: verified.json.result.account_id, scopes: verified.json.result.scopes };
}

/** A request the test makes the server refuse on purpose (the browser logs each). */
export const refusedWith = (...statuses) => new RegExp(`Failed to load resource: the server responded with a status of (${statuses.join('|')})`);
