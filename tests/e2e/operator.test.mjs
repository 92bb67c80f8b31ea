// End-to-end test of the dashboard's operator view (web/views/operator.js) in headless Chromium: the
// same dashboard, served on the operator address, signed in with an operator token (sko_…).
//
// It needs a running skiplock server with both addresses, and an operator token with read and write:
//
//   bash tests/e2e/setup.sh          # once: Chromium (Debian package, as root) + npm ci
//   SKIPLOCK_URL=http://127.0.0.1:8787 \
//   SKIPLOCK_ADMIN_URL=http://127.0.0.1:9788 \
//   SKIPLOCK_OPERATOR_TOKEN=sko_... \
//     node --test --test-concurrency=1 tests/e2e/
//
// (`skiplock operator token create --name e2e` prints such a token.) Without SKIPLOCK_ADMIN_URL the
// test is skipped, saying so. It creates an account named e2e-op-<run>, which it leaves in place with
// its first token (the operator API can delete an account, DELETE /admin/v1/accounts/{id}, but that is
// deletion.test.mjs's test), and a token of it, which it revokes.
//
// As dashboard.test.mjs: every check waits for a visible condition (no fixed sleeps), and every page
// fails the test on a console error it does not provoke on purpose.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  ARTIFACTS, RUN, openPage, assertNoConsoleErrors, assertNotLeaked, waitForText, waitFor, shot,
  steps, signInAt, confirm,
} from './support.mjs';
import {
  BASE, ADMIN, OPERATOR_TOKEN, SKIP, operatorHooks, admin, tenant, accountRow, createdAccount,
  refusedWith,
} from './operator-support.mjs';

operatorHooks(); // before: check the environment and start the browser; after: close it

// ---- tests --------------------------------------------------------------------------------------

test('the operator view: create, find, suspend and resume an account; its page, its tokens', { skip: SKIP }, async (t) => {
  const { context, page, log } = await openPage({ clipboard: true, origin: ADMIN });
  // The account's own dashboard, on the public address: it sees the suspension.
  const tenantView = await openPage();
  const name = `e2e-op-${RUN}`;
  const tokenName = `e2e-op-token-${RUN}`;
  const reason = `e2e test ${RUN}: unpaid invoice`;
  let accountId = null;
  let firstToken = null;
  const { step, failed } = steps(t, { 'failed-operator': page });
  try {
    await step('sign in with the operator token', async () => {
      await signInAt(page, ADMIN, OPERATOR_TOKEN);
      await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
      assert.match(page.url(), /#\/operator\/accounts$/);
      // The operator's navigation only: no queues, no account tokens.
      const nav = page.getByRole('navigation', { name: 'Main' });
      await nav.getByRole('link', { name: 'Accounts' }).waitFor();
      assert.equal(await nav.getByRole('link', { name: 'Queues' }).count(), 0);
      assert.equal(await nav.getByRole('link', { name: 'Tokens' }).count(), 0);
      await waitForText(page.locator('#account-id'), 'Operator');
      const stored = await page.evaluate(() => ({
        mode: JSON.parse(sessionStorage.getItem('skiplock.session')).mode, local: localStorage.length, cookie: document.cookie,
      }));
      assert.deepEqual(stored, { mode: 'operator', local: 0, cookie: '' });
    });

    await step('create an account: its first token is shown once, with a copy button', async () => {
      await page.getByLabel('New account name').fill(name);
      await page.getByRole('button', { name: 'Create account' }).click();
      const created = await createdAccount(page, name);
      ({ firstToken, accountId } = created);
      const { box } = created;
      // The token is the new account's, with every scope.
      assert.deepEqual([...created.scopes].sort(), ['queues_read', 'queues_write', 'tokens_write']);
      await box.getByRole('button', { name: 'Copy' }).click();
      await waitForText(box.getByRole('status'), 'Copied to the clipboard');
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), firstToken);
      await waitForText(page.locator('code', { hasText: accountId }), accountId);
      await waitForText(page.locator('.toast-text').filter({ hasText: 'created' }), `Account ${name} created.`);
      await shot(page, 'operator-account-created.png');
      await page.getByRole('button', { name: 'I have copied it' }).click();
      assert.equal(await box.count(), 0, 'the token is gone from the page once dismissed');
      assertNotLeaked(log, firstToken);
    });

    await step('find it with the name filter', async () => {
      await page.getByLabel('Name contains').fill(name);
      await page.getByRole('button', { name: 'Filter', exact: true }).click();
      await waitForText(page.locator('.card-head .count'), '1–1 of 1 account matching');
      assert.match(page.url(), /#\/operator\/accounts\?name=e2e-op-/);
      const rows = page.getByRole('table', { name: 'Accounts' }).locator('tbody tr');
      assert.equal(await rows.count(), 1);
      const row = accountRow(page, name);
      await waitForText(row.locator('td[data-label="Status"]'), 'Active');
      await waitForText(row.locator('td[data-label="Account ID"]'), accountId);
      // The account's own dashboard, signed in before the suspension.
      await signInAt(tenantView.page, BASE, firstToken);
      await tenantView.page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      assert.equal(await tenantView.page.locator('#standing').isVisible(), false);
    });

    await step('suspend it with a reason: the status changes', async () => {
      const row = accountRow(page, name);
      await row.getByRole('button', { name: `Suspend ${name}` }).click();
      await confirm(page, 'Suspend account', (dialog) => dialog.getByLabel('Reason (optional)').fill(reason));
      await waitForText(page.locator('.toast-text').filter({ hasText: 'suspended' }), `Account ${name} suspended.`);
      await waitForText(row.locator('td[data-label="Status"]'), `SuspendedReason: ${reason}`);
      await waitForText(row.getByRole('button', { name: `Resume ${name}` }), 'Resume…');
      const { json } = await admin('GET', `/accounts/${accountId}`);
      assert.equal(json.result.status, 'suspended', JSON.stringify(json));
      assert.equal(json.result.status_reason, reason);
      assert.ok(json.result.status_changed_on, 'the time of the change is kept');
      await shot(page, 'operator-account-suspended.png');
    });

    await step('the status filter finds it among the suspended, not the active', async () => {
      const status = page.getByLabel('Status', { exact: true });
      await status.selectOption('suspended');
      await waitForText(accountRow(page, name).locator('td[data-label="Status"]'), /^Suspended/);
      await waitForText(page.locator('.card-head .count'), '1–1 of 1 account matching');
      assert.match(page.url(), /status=suspended/);
      await status.selectOption('active');
      await waitForText(page.locator('.empty-title:visible'), 'No account matches');
      assert.equal(await accountRow(page, name).count(), 0);
      await status.selectOption('');
      await waitForText(accountRow(page, name).locator('td[data-label="Status"]'), /^Suspended/);
    });

    await step('its token is refused on the public API with code 11016; its users are told', async () => {
      const refused = await waitFor('the suspended account\'s token to be refused',
        () => tenant('GET', `/accounts/${accountId}/queues`, firstToken), (r) => r.status === 403);
      assert.equal(refused.json.success, false);
      assert.equal(refused.json.errors[0].code, 11016, JSON.stringify(refused.json));
      assert.match(refused.json.errors[0].message, /^account_suspended: /);
      // The dashboard signed in before: a banner on its next refresh (every 5 s).
      const tp = tenantView.page;
      await waitForText(tp.locator('#standing'), /^Account suspended\. This account is suspended by the operator/, 20000);
      await shot(tp, 'tenant-account-suspended.png');
      // Signing in again: told at once, and not signed in.
      await tp.getByRole('button', { name: 'Sign out' }).click();
      await signInAt(tp, BASE, firstToken);
      await waitForText(tp.getByRole('alert').filter({ hasText: 'suspended' }), /This account is suspended by the operator/);
      assert.equal(await tp.getByRole('navigation', { name: 'Main' }).isVisible(), false);
      assert.equal(await tp.evaluate(() => sessionStorage.length), 0);
    });

    await step('resume it: the status changes and its token works again', async () => {
      const row = accountRow(page, name);
      await row.getByRole('button', { name: `Resume ${name}` }).click();
      await confirm(page, 'Resume account');
      await waitForText(page.locator('.toast-text').filter({ hasText: 'resumed' }), `Account ${name} resumed.`);
      await waitForText(row.locator('td[data-label="Status"]'), 'Active');
      await waitForText(row.getByRole('button', { name: `Suspend ${name}` }), 'Suspend…');
      await waitFor('the resumed account\'s token to be served',
        () => tenant('GET', `/accounts/${accountId}/queues`, firstToken), (r) => r.status === 200);
      const tp = tenantView.page;
      await tp.getByLabel('API token').fill(firstToken);
      await tp.getByRole('button', { name: 'Sign in' }).click();
      await tp.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      assert.equal(await tp.locator('#standing').isVisible(), false);
    });

    await step('its page: the fields, and a rename', async () => {
      await accountRow(page, name).getByRole('link', { name, exact: true }).click();
      await page.getByRole('heading', { name, level: 1 }).waitFor();
      assert.match(page.url(), new RegExp(`#/operator/accounts/${accountId}$`));
      const card = page.getByRole('region', { name: 'Account', exact: true });
      await waitForText(card.locator('dl'), new RegExp(`Name${name}Status\\s*Active.*Account ID${accountId}`, 's'));
      await card.getByLabel('Account name').fill(`${name}-renamed`);
      await card.getByRole('button', { name: 'Rename', exact: true }).click();
      await waitForText(card.getByRole('status'), `Renamed to ${name}-renamed.`);
      await page.getByRole('heading', { name: `${name}-renamed`, level: 1 }).waitFor();
      assert.equal((await admin('GET', `/accounts/${accountId}`)).json.result.name, `${name}-renamed`);
      // The first token, "owner", never expires.
      const owner = page.locator('tr', { hasText: 'owner' });
      await waitForText(owner.locator('td[data-label="Expires"]'), 'Never');
      await waitForText(owner.locator('td[data-label="Status"]'), 'Active');
    });

    await step('issue a token with an expiry: it is shown; revoke it', async () => {
      const year = new Date().getUTCFullYear() + 2;
      await page.getByLabel('Token name').fill(tokenName);
      await page.getByRole('checkbox', { name: /Write queues/ }).check();
      await page.getByLabel('Expires', { exact: true }).selectOption({ label: 'On a date…' });
      // The page's time zone is UTC (openPage): this local time is 12:30 UTC.
      await page.getByLabel('Expiry date and time').fill(`${year}-06-15T12:30`);
      await page.getByRole('button', { name: 'Issue token' }).click();
      const box = page.getByRole('region', { name: `Token “${tokenName}” created` });
      await waitForText(box, new RegExp(`shown only once.*It expires Jun 15, ${year}`, 's'));
      const issued = await box.getByRole('textbox', { name: 'New API token' }).inputValue();
      assert.match(issued, /^skl_/);
      const expected = Date.UTC(year, 5, 15, 12, 30);

      const row = page.locator('tr', { hasText: tokenName });
      const expires = row.locator('td[data-label="Expires"]');
      await waitForText(expires, new RegExp(`Jun 15, ${year}`));
      assert.equal(Date.parse(await expires.locator('time').getAttribute('datetime')), expected);
      await waitForText(row.locator('td[data-label="Status"]'), 'Active');
      await waitForText(row.locator('td[data-label="Scopes"]'), /queues_read\s*queues_write/);
      await shot(page, 'operator-account-page.png', { fullPage: true });
      // The server holds it so, and the token works for its account.
      const listed = (await admin('GET', `/accounts/${accountId}/tokens`)).json.result.find((tok) => tok.name === tokenName);
      assert.equal(Date.parse(listed.expires_on), expected, JSON.stringify(listed));
      const verified = await tenant('GET', '/user/tokens/verify', issued);
      assert.equal(verified.status, 200, JSON.stringify(verified.json));
      assert.equal(verified.json.result.account_id, accountId);
      assertNotLeaked(log, issued);

      await page.getByRole('button', { name: 'I have copied it' }).click();
      await row.getByRole('button', { name: `Revoke ${tokenName}` }).click();
      await confirm(page, 'Revoke token');
      await waitForText(page.locator('.toast-text').filter({ hasText: 'revoked' }), `Token ${tokenName} revoked.`);
      await row.waitFor({ state: 'detached' });
      // Refused on every node within the verifier's cache time (5 s).
      await waitFor('the revoked token to be refused', () => tenant('GET', '/user/tokens/verify', issued), (r) => r.status === 401);
    });

    await step('a tenant page is not the operator\'s; sign out', async () => {
      await page.goto(`${ADMIN}/#/queues`);
      await page.getByRole('heading', { name: 'Page not found', level: 1 }).waitFor();
      await page.getByRole('link', { name: 'Go to the accounts' }).click();
      await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { name: 'Sign in to the dashboard' }).waitFor();
      await waitForText(page.getByRole('status').filter({ hasText: 'signed out' }), 'You are signed out.');
      assert.equal(await page.evaluate(() => sessionStorage.length), 0);
      assert.equal(await page.getByRole('navigation', { name: 'Main' }).isVisible(), false);
    });

    assert.equal(failed(), null, `step "${failed()}" failed`);
    assertNotLeaked(log, OPERATOR_TOKEN);
    assertNoConsoleErrors(log);
    // The account's dashboard was refused while the account was suspended (and signed in with the
    // first token before and after).
    assertNotLeaked(tenantView.log, firstToken);
    assertNoConsoleErrors(tenantView.log, [refusedWith(403)]);
  } finally {
    await writeFile(path.join(ARTIFACTS, 'console-operator.log'), `${log.messages.join('\n')}\n`);
    await tenantView.context.close();
    await context.close();
    // An account left suspended by a failed run is resumed; the account stays, as after a passing run.
    if (accountId) await admin('POST', `/accounts/${accountId}/resume`);
  }
});

test('each address takes its own tokens, and says where the other belongs', { skip: SKIP }, async () => {
  const { context, page, log } = await openPage();
  try {
    // An account's token on the operator address: there is no tenant API here.
    const accountToken = `skl_${'0'.repeat(32)}_thisIsNotARealTokenSecretValue0000000000`;
    await signInAt(page, ADMIN, accountToken);
    await waitForText(page.getByRole('alert'), /This is the operator address: sign in here with an operator token \(sko_…\)\. An account's token \(skl_…\) is used on the public API address/);
    assert.equal(await page.getByRole('navigation', { name: 'Main' }).isVisible(), false);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    await shot(page, 'operator-signin-account-token.png');

    // A wrong operator token on the operator address: the server's message.
    const wrong = `sko_${'0'.repeat(32)}_${'A'.repeat(43)}`;
    await signInAt(page, ADMIN, wrong);
    await waitForText(page.getByRole('alert'), /This operator token is not valid: invalid or revoked operator token/);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);

    // The operator token on the public address: there is no operator API there.
    await signInAt(page, BASE, OPERATOR_TOKEN);
    await waitForText(page.getByRole('alert'), /Operator tokens \(sko_…\) are used on the operator address \(SKIPLOCK_ADMIN_BIND/);
    assert.equal(await page.getByRole('navigation', { name: 'Main' }).isVisible(), false);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    await shot(page, 'signin-operator-token-public.png');
    for (const secret of [accountToken, wrong, OPERATOR_TOKEN]) assertNotLeaked(log, secret);
    assertNoConsoleErrors(log, [refusedWith(401, 404)]);
  } finally {
    await context.close();
  }
});
