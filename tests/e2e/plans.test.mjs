// End-to-end test of plans in the dashboard, in headless Chromium: the operator's Plans pages
// (web/views/operator/plans.js), an account put on a plan with a limit of its own (the accounts list's
// plan filter, the account page's "Plan and limits" card), and the tenant's "Plan and limits" card on
// its token page (web/views/limits/panel.js), which reads GET /client/v4/accounts/{id}/limits.
//
// It needs what tests/e2e/operator.test.mjs needs (see the top of that file): SKIPLOCK_URL,
// SKIPLOCK_ADMIN_URL and SKIPLOCK_OPERATOR_TOKEN (read and write); without SKIPLOCK_ADMIN_URL it is
// skipped, saying so. It creates a plan e2e-plan-<run>, which it deletes, and an account named
// e2e-plan-<run>-account, which it leaves in place, back on the default plan (the operator API can
// delete an account, DELETE /admin/v1/accounts/{id}, but that is deletion.test.mjs's test).
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
  BASE, ADMIN, OPERATOR_TOKEN, SKIP, operatorHooks, admin, tenant, accountRow, createdAccount,
  refusedWith,
} from './operator-support.mjs';

operatorHooks(); // before: check the environment and start the browser; after: close it

// ---- helpers ------------------------------------------------------------------------------------

/** The plans table's row of the plan named `name`. */
const planRow = (page, name) => page.getByRole('table', { name: 'Plans' })
  .locator('tr', { has: page.getByRole('link', { name, exact: true }) });

/** One limit's line in a list of limits in words, within `scope`. */
const limitLine = (scope, key) => scope.locator(`li[data-limit="${key}"]`);

const PUBLISH_WORDS = 'Published messages: 2,000 per second across the service';

// ---- tests --------------------------------------------------------------------------------------

test('plans: create one, change it, put an account on it; the tenant sees its limits; delete it', { skip: SKIP }, async (t) => {
  const { context, page, log } = await openPage({ clipboard: true, origin: ADMIN });
  // The account's own dashboard, on the public address.
  const tenantView = await openPage();
  const planName = `e2e-plan-${RUN}`;
  const accountName = `${planName}-account`;
  let accountId = null;
  let firstToken = null;
  let planMade = false;
  const { step, failed } = steps(t, { 'failed-plans': page, 'failed-plans-tenant': tenantView.page });
  try {
    await step('sign in with the operator token and open the plans', async () => {
      await signInAt(page, ADMIN, OPERATOR_TOKEN);
      await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Plans' }).click();
      await page.getByRole('heading', { name: 'Plans', level: 1 }).waitFor();
      assert.match(page.url(), /#\/operator\/plans$/);
      // The default plan is listed; it cannot be deleted, so it offers no Delete.
      const row = planRow(page, 'default');
      await row.waitFor();
      assert.equal(await row.getByRole('button', { name: 'Delete default' }).count(), 0);
    });

    await step('create a plan with a publish rate and a queue limit', async () => {
      const form = page.getByRole('form', { name: 'Create a plan' });
      await form.getByLabel('Plan name').fill(planName);
      await form.getByLabel('Published messages per second').fill('2000');
      await form.getByLabel('Queues per account').fill('5');
      // A value out of range is caught before it is sent, naming the field.
      await form.getByLabel('Request burst').fill('0');
      await form.getByRole('button', { name: 'Create plan' }).click();
      await waitForText(form.getByRole('alert'), /Request burst must be a whole number from 1 to 10,000,000, or empty\./);
      assert.equal((await admin('GET', `/plans/${planName}`)).status, 404, 'nothing was created');
      await form.getByLabel('Request burst').fill('');
      await form.getByRole('button', { name: 'Create plan' }).click();
      await waitForText(page.locator('.toast-text').filter({ hasText: 'created' }), `Plan ${planName} created.`);
      planMade = true;

      const row = planRow(page, planName);
      await waitForText(limitLine(row, 'publish_rate_per_second'), PUBLISH_WORDS);
      await waitForText(limitLine(row, 'max_queues_per_account'), 'Queues: up to 5 in the account');
      assert.equal(await row.locator('li').count(), 2, 'only the limits it sets are listed');
      await waitForText(row.locator('td[data-label="Accounts"]'), 'None');
      assert.equal(await form.getByLabel('Plan name').inputValue(), '', 'the form is emptied');
      await shot(page, 'operator-plans.png', { fullPage: true });

      const { status, json } = await admin('GET', `/plans/${planName}`);
      assert.equal(status, 200, JSON.stringify(json));
      assert.deepEqual(json.result.limits, { max_queues_per_account: 5, publish_rate_per_second: 2000 });
      assert.equal(json.result.effective_limits.publish_rate_per_second, 2000);
      assert.equal(json.result.accounts, 0);
    });

    await step('change its limits on its page: an emptied field removes the limit', async () => {
      await planRow(page, planName).getByRole('link', { name: `Edit ${planName}` }).click();
      await page.getByRole('heading', { name: planName, level: 1 }).waitFor();
      assert.match(page.url(), new RegExp(`#/operator/plans/${planName}$`));
      const card = page.getByRole('region', { name: 'Limits it sets' });
      const publish = card.getByLabel('Published messages per second');
      await waitFor('the plan\'s limits in the form', () => publish.inputValue(), (v) => v === '2000');
      assert.equal(await card.getByLabel('Queues per account').inputValue(), '5');
      assert.equal(await card.getByLabel('Request burst').inputValue(), '');
      await card.getByLabel('Queues per account').fill('');
      await card.getByLabel('Request burst').fill('300');
      await card.getByRole('button', { name: 'Save limits' }).click();
      await waitForText(card.getByRole('status'), `Limits of ${planName} saved. Every node holds its accounts to them within about a second.`);
      const { json } = await admin('GET', `/plans/${planName}`);
      assert.deepEqual(json.result.limits, { publish_rate_per_second: 2000, rate_burst: 300 }, JSON.stringify(json));
      // What its accounts are held to: its limits over the node's.
      const inForce = page.getByRole('region', { name: 'In force for its accounts' });
      await waitForText(limitLine(inForce, 'publish_rate_per_second'), PUBLISH_WORDS);
      assert.equal(await limitLine(inForce, 'max_queues_per_account').count(), 1, 'every limit in force is listed');
    });

    await step('create an account on the plan: its first token is shown once', async () => {
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Accounts' }).click();
      await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
      const form = page.getByRole('form', { name: 'Create an account' });
      await form.getByLabel('New account name').fill(accountName);
      // The plans are read after the page shows: selectOption waits for the option.
      await form.getByLabel('Plan', { exact: true }).selectOption(planName);
      await form.getByRole('button', { name: 'Create account' }).click();
      ({ firstToken, accountId } = await createdAccount(page, accountName));
      await waitForText(page.locator('p', { hasText: accountId }), new RegExp(`plan ${planName}`));
      await page.getByRole('button', { name: 'I have copied it' }).click();
      assertNotLeaked(log, firstToken);

      const { json } = await admin('GET', `/accounts/${accountId}`);
      assert.equal(json.result.plan, planName, JSON.stringify(json));
      assert.deepEqual(json.result.limit_overrides, {});
      assert.equal(json.result.limits.publish_rate_per_second, 2000);
      assert.equal(json.result.limits.rate_burst, 300);
    });

    await step('the plan filter finds it', async () => {
      const filter = page.getByRole('search', { name: 'Filter the accounts' });
      await filter.getByLabel('Plan', { exact: true }).selectOption(planName);
      await waitForText(page.locator('.card-head .count'), '1–1 of 1 account matching');
      assert.match(page.url(), new RegExp(`[?&]plan=${planName}(&|$)`));
      const rows = page.getByRole('table', { name: 'Accounts' }).locator('tbody tr');
      assert.equal(await rows.count(), 1);
      await waitForText(accountRow(page, accountName).locator('td[data-label="Plan"]'), planName);
    });

    await step('its page: a limit of its own over the plan\'s', async () => {
      await accountRow(page, accountName).getByRole('link', { name: accountName, exact: true }).click();
      await page.getByRole('heading', { name: accountName, level: 1 }).waitFor();
      const card = page.getByRole('region', { name: 'Plan and limits' });
      assert.equal(await card.getByLabel('Plan', { exact: true }).inputValue(), planName);
      await waitForText(limitLine(card, 'publish_rate_per_second'), PUBLISH_WORDS);
      await card.getByLabel('Queues per account').fill('3');
      await card.getByRole('button', { name: 'Save plan and limits' }).click();
      await waitForText(card.getByRole('status'), new RegExp(`^Saved: ${accountName} is on ${planName}\\.`));
      await waitForText(limitLine(card, 'max_queues_per_account'), 'Queues: up to 3 in the account');
      await waitForText(limitLine(card, 'publish_rate_per_second'), PUBLISH_WORDS);
      await shot(page, 'operator-account-plan.png', { fullPage: true });

      const { json } = await admin('GET', `/accounts/${accountId}`);
      assert.equal(json.result.plan, planName, JSON.stringify(json));
      assert.deepEqual(json.result.limit_overrides, { max_queues_per_account: 3 });
      assert.equal(json.result.limits.max_queues_per_account, 3);
      assert.equal(json.result.limits.publish_rate_per_second, 2000);
    });

    await step('the tenant\'s token page shows the plan and its limits in words', async () => {
      // The answering node holds the account to the plan within about a second.
      await waitFor('the tenant API to report the plan', () => tenant('GET', `/accounts/${accountId}/limits`, firstToken),
        (r) => r.status === 200 && r.json.result.plan === planName
          && r.json.result.limits.publish_rate_per_second === 2000 && r.json.result.limits.max_queues_per_account === 3);
      const tp = tenantView.page;
      await signInAt(tp, BASE, firstToken);
      await tp.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      await tp.getByRole('link', { name: 'Tokens' }).click();
      await tp.getByRole('heading', { name: 'API tokens', level: 1 }).waitFor();
      const panel = tp.getByRole('region', { name: 'Plan and limits' });
      await waitForText(panel.locator('p', { hasText: 'Plan:' }), `Plan: ${planName}`);
      await waitForText(limitLine(panel, 'publish_rate_per_second'), PUBLISH_WORDS);
      await waitForText(limitLine(panel, 'max_queues_per_account'), 'Queues: up to 3 in the account');
      assert.equal(await panel.locator('li').count(), 11, 'every limit is said');
      await shot(tp, 'tenant-plan-and-limits.png', { fullPage: true });
    });

    await step('deleting the plan while an account is on it shows the server\'s refusal', async () => {
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Plans' }).click();
      await page.getByRole('heading', { name: 'Plans', level: 1 }).waitFor();
      const row = planRow(page, planName);
      await waitForText(row.locator('td[data-label="Accounts"]'), '1 account');
      await row.getByRole('button', { name: `Delete ${planName}` }).click();
      await confirm(page, 'Delete plan');
      await waitForText(page.getByRole('alert').filter({ hasText: 'accounts are on the plan' }),
        new RegExp(`accounts are on the plan "${planName}"; move them to another plan before deleting it`));
      assert.equal((await admin('GET', `/plans/${planName}`)).status, 200, 'the plan is still there');
    });

    await step('move the account back to the default plan; then the plan is deleted', async () => {
      // The plan's account count links to the accounts on it.
      await planRow(page, planName).getByRole('link', { name: `1 account on ${planName}` }).click();
      await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
      await accountRow(page, accountName).getByRole('link', { name: accountName, exact: true }).click();
      await page.getByRole('heading', { name: accountName, level: 1 }).waitFor();
      const card = page.getByRole('region', { name: 'Plan and limits' });
      await card.getByLabel('Plan', { exact: true }).selectOption('default');
      await card.getByLabel('Queues per account').fill('');
      await card.getByRole('button', { name: 'Save plan and limits' }).click();
      await waitForText(card.getByRole('status'), new RegExp(`^Saved: ${accountName} is on default\\.`));
      const { json } = await admin('GET', `/accounts/${accountId}`);
      assert.equal(json.result.plan, 'default', JSON.stringify(json));
      assert.deepEqual(json.result.limit_overrides, {});

      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Plans' }).click();
      await page.getByRole('heading', { name: 'Plans', level: 1 }).waitFor();
      const row = planRow(page, planName);
      await waitForText(row.locator('td[data-label="Accounts"]'), 'None');
      await row.getByRole('button', { name: `Delete ${planName}` }).click();
      await confirm(page, 'Delete plan');
      await waitForText(page.locator('.toast-text').filter({ hasText: 'deleted' }), `Plan ${planName} deleted.`);
      await row.waitFor({ state: 'detached' });
      assert.equal((await admin('GET', `/plans/${planName}`)).status, 404);
      planMade = false;
    });

    assert.equal(failed(), null, `step "${failed()}" failed`);
    assertNotLeaked(log, OPERATOR_TOKEN);
    assertNoConsoleErrors(log, [refusedWith(409)]);
    assertNotLeaked(tenantView.log, firstToken);
    assertNoConsoleErrors(tenantView.log);
  } finally {
    await writeFile(path.join(ARTIFACTS, 'console-plans.log'), `${log.messages.join('\n')}\n`);
    await tenantView.context.close();
    await context.close();
    // After a failed run: the account back on the default plan (it stays, as after a passing run), the
    // plan deleted.
    if (accountId) await admin('PATCH', `/accounts/${accountId}`, { plan: 'default', limit_overrides: { max_queues_per_account: null } });
    if (planMade) await admin('DELETE', `/plans/${planName}`);
  }
});
