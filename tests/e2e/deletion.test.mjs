// End-to-end test of deleting an account in the dashboard's operator view, in headless Chromium
// (web/views/operator.js and its "Danger zone" card, web/views/operator/account-deletion.js): an
// account made in the operator view, given a queue with a few messages through the tenant API, then
// deleted from its page, the operator typing its name to confirm; the page follows the deletion until
// the account is deleted with nothing of it left, and the accounts list shows it deleted.
//
// It needs what tests/e2e/operator.test.mjs needs (see the top of that file): SKIPLOCK_URL,
// SKIPLOCK_ADMIN_URL and SKIPLOCK_OPERATOR_TOKEN (read and write); without SKIPLOCK_ADMIN_URL it is
// skipped, saying so. It creates an account named e2e-del-<run>, which it deletes (a deleted account
// stays listed, marked deleted).
//
// As the other tests: every check waits for a visible condition (no fixed sleeps), and every page
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
  ADMIN, OPERATOR_TOKEN, SKIP, operatorHooks, admin, tenant, accountRow, createdAccount,
} from './operator-support.mjs';

/** How long the background task may take to delete the account's queue and messages (it looks every second). */
const DELETION_WAIT = 30000;

operatorHooks(); // before: check the environment and start the browser; after: close it

// ---- helpers ------------------------------------------------------------------------------------

/** One figure of the deletion card (deleted_queues, remaining_queues, deleted_messages, remaining_messages, ...). */
const figure = (zone, key) => zone.locator(`dd[data-deletion="${key}"]`);

// ---- tests --------------------------------------------------------------------------------------

test('the operator deletes an account, typing its name; the page follows the deletion to the end', { skip: SKIP }, async (t) => {
  const { context, page, log } = await openPage();
  const name = `e2e-del-${RUN}`;
  const queueName = `e2e-del-${RUN}-q`;
  const MESSAGES = 3;
  let accountId = null;
  let firstToken = null;
  const { step, failed } = steps(t, { 'failed-deletion': page });
  /** The requests for the deletion's progress the page made so far. */
  const deletionPolls = () => log.urls.filter((u) => u.endsWith(`/admin/v1/accounts/${accountId}/deletion`)).length;
  try {
    await step('sign in with the operator token and create an account', async () => {
      await signInAt(page, ADMIN, OPERATOR_TOKEN);
      await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
      const form = page.getByRole('form', { name: 'Create an account' });
      await form.getByLabel('New account name').fill(name);
      await form.getByRole('button', { name: 'Create account' }).click();
      ({ firstToken, accountId } = await createdAccount(page, name));
      assertNotLeaked(log, firstToken);
    });

    await step('give it a queue with a few messages, through the tenant API', async () => {
      const made = await tenant('POST', `/accounts/${accountId}/queues`, firstToken, { queue_name: queueName });
      assert.equal(made.status, 200, JSON.stringify(made.json));
      const queueId = made.json.result.queue_id;
      const messages = Array.from({ length: MESSAGES }, (_, i) => ({ body: `e2e deletion ${RUN} #${i + 1}`, content_type: 'text' }));
      const sent = await tenant('POST', `/accounts/${accountId}/queues/${queueId}/messages/batch`, firstToken, { messages });
      assert.equal(sent.status, 200, JSON.stringify(sent.json));
      // Not being deleted: the operator API has no deletion of it to show.
      assert.equal((await admin('GET', `/accounts/${accountId}/deletion`)).status, 404);
    });

    await step('its page has a danger zone; cancelling the confirmation deletes nothing', async () => {
      await page.getByRole('link', { name: `Open ${name}`, exact: true }).click();
      await page.getByRole('heading', { name, level: 1 }).waitFor();
      assert.match(page.url(), new RegExp(`#/operator/accounts/${accountId}$`));
      // What an account that is not deleted offers: suspend, and issue a token.
      await page.getByRole('button', { name: 'Suspend…' }).waitFor();
      await page.getByRole('button', { name: 'Issue token' }).waitFor();
      const zone = page.getByRole('region', { name: 'Danger zone' });
      await zone.getByRole('button', { name: 'Delete account…' }).click();
      await confirm(page, 'Cancel', async (dialog) => {
        await waitForText(dialog.getByRole('heading'), `Delete “${name}”?`);
        await waitForText(dialog.locator('p', { hasText: 'To confirm, type' }), `To confirm, type ${name} below.`);
        await dialog.getByLabel('Account name to confirm').fill(name);
      });
      const { json } = await admin('GET', `/accounts/${accountId}`);
      assert.equal(json.result.status, 'active', JSON.stringify(json));
      assert.equal(await zone.getByRole('button', { name: 'Delete account…' }).isVisible(), true);
    });

    await step('delete it: the confirmation is enabled only once the name is typed', async () => {
      const zone = page.getByRole('region', { name: 'Danger zone' });
      const answered = page.waitForResponse((r) => r.request().method() === 'DELETE'
        && r.url().endsWith(`/admin/v1/accounts/${accountId}`));
      answered.catch(() => {}); // awaited below; not an unhandled rejection if a check fails first
      await zone.getByRole('button', { name: 'Delete account…' }).click();
      await confirm(page, 'Delete account', async (dialog) => {
        const typed = dialog.getByLabel('Account name to confirm');
        const go = dialog.getByRole('button', { name: 'Delete account' });
        assert.equal(await go.isDisabled(), true, 'nothing typed yet');
        await typed.fill(`${name}x`);
        assert.equal(await go.isDisabled(), true, 'another name');
        await typed.fill(name.toUpperCase());
        assert.equal(await go.isDisabled(), true, 'the name in another case');
        await typed.fill(name);
        assert.equal(await go.isEnabled(), true, 'the name typed');
      });
      const response = await answered;
      assert.equal(response.status(), 200);
      const started = (await response.json()).result;
      assert.equal(started.account_id, accountId, JSON.stringify(started));
      assert.ok(['deleting', 'deleted'].includes(started.status), JSON.stringify(started));
      assert.ok(started.started_on, 'the start is recorded');
      await waitForText(page.locator('.toast-text').filter({ hasText: 'Deleting account' }), `Deleting account ${name}.`);
      // A deleted account (or one being deleted) can no longer be suspended nor given a token.
      await page.getByRole('button', { name: 'Suspend…' }).waitFor({ state: 'hidden' });
      await page.getByRole('button', { name: 'Issue token' }).waitFor({ state: 'hidden' });
      await zone.getByRole('button', { name: 'Delete account…' }).waitFor({ state: 'hidden' });
    });

    await step('the page follows the deletion until the account is deleted, nothing of it left', async () => {
      const zone = page.getByRole('region', { name: 'Danger zone' });
      await waitForText(zone.getByRole('status'), 'Deleted Every queue and message of the account is deleted.', DELETION_WAIT);
      await waitForText(figure(zone, 'remaining_queues'), '0');
      await waitForText(figure(zone, 'remaining_messages'), '0');
      await waitForText(figure(zone, 'deleted_queues'), '1');
      await waitForText(figure(zone, 'deleted_messages'), String(MESSAGES));
      assert.notEqual((await figure(zone, 'finished_on').textContent()).trim(), 'Not yet');
      // The page's own fields say so too (read again once the deletion ended).
      await waitForText(page.locator('.title-row .badge'), 'Deleted');
      const card = page.getByRole('region', { name: 'Account', exact: true });
      await waitForText(card.locator('dl'), /Status\s*Deleted/);
      assert.ok(deletionPolls() >= 1, 'the page read the deletion\'s progress');
      await shot(page, 'operator-account-deleted.png', { fullPage: true });

      const { status, json } = await admin('GET', `/accounts/${accountId}/deletion`);
      assert.equal(status, 200, JSON.stringify(json));
      assert.equal(json.result.status, 'deleted');
      assert.ok(json.result.finished_on, 'the end is recorded');
      assert.equal(json.result.remaining_queues, 0);
      assert.equal(json.result.remaining_messages, 0);
      assert.equal(json.result.deleted_queues, 1);
      assert.equal(json.result.deleted_messages, MESSAGES);
      // Its token is gone: refused on every node within the verifier's cache time (5 s).
      await waitFor('the deleted account\'s token to be refused',
        () => tenant('GET', '/user/tokens/verify', firstToken), (r) => r.status === 401);
    });

    await step('the accounts list shows it deleted, with no suspend; the page stopped reading the deletion', async () => {
      const polls = deletionPolls();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Accounts' }).click();
      await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
      const filter = page.getByRole('search', { name: 'Filter the accounts' });
      const status = filter.getByLabel('Status', { exact: true });
      assert.deepEqual(await status.locator('option').allTextContents(), ['Any status', 'Active', 'Suspended', 'Deleting', 'Deleted']);
      await filter.getByLabel('Name contains').fill(name);
      await status.selectOption('deleted');
      await waitForText(page.locator('.card-head .count'), '1–1 of 1 account matching');
      assert.match(page.url(), /status=deleted/);
      const row = accountRow(page, name);
      await waitForText(row.locator('td[data-label="Status"]'), 'Deleted');
      assert.equal(await row.getByRole('button').count(), 0, 'a deleted account offers no suspend or resume');
      await status.selectOption('active');
      await waitForText(page.locator('.empty-title:visible'), 'No account matches');
      assert.equal(deletionPolls(), polls, 'no poll of the deletion after it ended and the page was left');
    });

    assert.equal(failed(), null, `step "${failed()}" failed`);
    assertNotLeaked(log, OPERATOR_TOKEN);
    assertNotLeaked(log, firstToken);
    assertNoConsoleErrors(log);
  } finally {
    await writeFile(path.join(ARTIFACTS, 'console-deletion.log'), `${log.messages.join('\n')}\n`);
    await context.close();
    // After a failed run: the account is deleted all the same (asking again is harmless).
    if (accountId) await admin('DELETE', `/accounts/${accountId}`);
  }
});
