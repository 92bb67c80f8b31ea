// End-to-end test of the audit log in the dashboard, in headless Chromium: the tenant's "Audit log" page
// (web/views/audit.js: #/audit, from the top bar), which reads GET /client/v4/accounts/{id}/audit_logs,
// and the operator's account page's "Audit log" card (web/views/operator/account-audit.js), which reads
// GET /admin/v1/audit_logs?account_id=…; both draw the entries with web/views/audit/entries.js.
//
// It needs what tests/e2e/dashboard.test.mjs needs (SKIPLOCK_URL, SKIPLOCK_TOKEN with every scope,
// SKIPLOCK_ACCOUNT; see the top of that file); the operator's card needs SKIPLOCK_ADMIN_URL and
// SKIPLOCK_OPERATOR_TOKEN as well (see the top of operator.test.mjs), and is skipped without them,
// saying so. Each test creates a queue named e2e-audit-…-<run> through the tenant API, and deletes it.
//
// As the other tests: every check waits for a visible condition (no fixed sleeps), and every page
// fails the test on a console error it does not provoke on purpose.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  ARTIFACTS, RUN, TOKEN, ACCOUNT, tenantHooks, openPage, assertNoConsoleErrors, assertNotLeaked, waitForText, waitFor,
  shot, steps, signInAt,
} from './support.mjs';
import { BASE, ADMIN, OPERATOR_TOKEN, SKIP, admin, tenant } from './operator-support.mjs';

tenantHooks();

// ---- helpers ------------------------------------------------------------------------------------

/** The tenant API with the all-scopes token. */
const api = (method, apiPath, body) => tenant(method, apiPath, TOKEN, body);

/** The account's audit log as the tenant API gives it (`q`: the query, with its `?`). */
async function auditLog(q = '') {
  const { status, json } = await api('GET', `/accounts/${ACCOUNT}/audit_logs${q}`);
  assert.equal(status, 200, JSON.stringify(json));
  return json;
}

/** Creates a queue through the tenant API; resolves its id. */
async function createQueue(name) {
  const { status, json } = await api('POST', `/accounts/${ACCOUNT}/queues`, { queue_name: name });
  assert.equal(status, 200, JSON.stringify(json));
  return json.result.queue_id;
}

/** The table of entries within `scope` (the page, or the operator's card). */
const entries = (scope) => scope.getByRole('table', { name: 'Audit log entries' });

/** The entry (its table row, not its "What changed" row) of `action` on the queue named `name`. */
const entryRow = (scope, name, action) => entries(scope).locator('tr[data-audit]', { hasText: name }).filter({ hasText: action });

/** The ids of the entries shown, in order. */
const shownIds = (scope) => entries(scope).locator('tr[data-audit]').evaluateAll((rows) => rows.map((r) => r.dataset.audit));

/** The entry's "What changed" row, opened. */
async function openChanges(page, row) {
  const toggle = row.getByRole('button', { name: /What changed/ });
  await toggle.click();
  assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
  const detail = page.locator(`tr[data-audit-detail="${await row.getAttribute('data-audit')}"]`);
  await detail.waitFor();
  return detail;
}

/** A time as a datetime-local field takes it, in the page's time zone (UTC: see openPage). */
const localField = (ms) => new Date(ms).toISOString().slice(0, 16);

const HOUR = 3600000;

// ---- tests --------------------------------------------------------------------------------------

test('the audit log page: a change made through the API, who made it, what changed; filtered by action and time', async (t) => {
  const { context, page, log } = await openPage();
  const queueName = `e2e-audit-${RUN}`;
  let queueId = null;
  let createdEntry = null;
  const { step, failed } = steps(t, { 'failed-audit': page });
  try {
    await step('create a queue and change it through the API: the log records both', async () => {
      queueId = await createQueue(queueName);
      const changed = await api('PATCH', `/accounts/${ACCOUNT}/queues/${queueId}`, { settings: { delivery_delay: 5 } });
      assert.equal(changed.status, 200, JSON.stringify(changed.json));
      createdEntry = await waitFor('the queue.create entry',
        async () => (await auditLog('?action.type=queue.create&per_page=50')).result.find((e) => e.resource.id === queueId),
        Boolean);
      assert.equal(createdEntry.actor.type, 'token', JSON.stringify(createdEntry));
      assert.equal(createdEntry.resource.type, 'queue');
      assert.equal(createdEntry.oldValueJson, null);
      assert.equal(createdEntry.newValueJson.queue_name, queueName);
    });

    await step('the top bar leads to the audit log, newest first', async () => {
      await signInAt(page, BASE, TOKEN);
      await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Audit log' }).click();
      await page.getByRole('heading', { name: 'Audit log', level: 1 }).waitFor();
      assert.match(page.url(), /#\/audit$/);
      const created = entryRow(page, queueName, 'queue.create');
      const updated = entryRow(page, queueName, 'queue.update');
      await created.waitFor();
      await updated.waitFor();
      // The server's first page, in its order: the newest first.
      const shown = await shownIds(page);
      const { result } = await auditLog('?per_page=20');
      assert.deepEqual(shown, result.map((e) => String(e.id)));
      assert.ok(shown.indexOf(await updated.getAttribute('data-audit')) < shown.indexOf(String(createdEntry.id)),
        'the change is listed before the creation');
    });

    await step('an entry shows when, the action, the queue, and the token that made it', async () => {
      const row = entryRow(page, queueName, 'queue.create');
      // Local time (UTC here) with the server's time as the title.
      const time = row.locator('td[data-label="When"] time');
      assert.equal(await time.getAttribute('title'), createdEntry.when);
      assert.equal(await time.getAttribute('datetime'), createdEntry.when);
      await waitForText(row.locator('td[data-label="Action"]'), /queue\.create\s*Queue created/);
      // The queue, linked to its page while it exists.
      const link = row.locator('td[data-label="Resource"]').getByRole('link', { name: queueName, exact: true });
      assert.equal(await link.getAttribute('href'), `#/queues/${queueId}`);
      const actor = row.locator('td[data-label="Actor"]');
      await waitForText(actor, /Token/);
      const actorText = await actor.textContent();
      assert.doesNotMatch(actorText, /Operator/);
      assert.ok(actorText.includes(createdEntry.actor.id.slice(0, 8)), `the token's id, shortened: ${actorText}`);
      // The test's API calls use the token this page signed in with.
      assert.match(actorText, /This session/);
    });

    await step('"What changed" shows the new queue, and a change\'s fields', async () => {
      const created = await openChanges(page, entryRow(page, queueName, 'queue.create'));
      await waitForText(created.getByRole('figure', { name: 'After' }).locator('pre'), new RegExp(`"queue_name": "${queueName}"`));
      await waitForText(created.getByRole('figure', { name: 'Before' }), /Nothing recorded before the change/);
      await waitForText(created.locator('.audit-diff'), new RegExp(`queue_name"${queueName}"`));

      const updated = await openChanges(page, entryRow(page, queueName, 'queue.update'));
      await waitForText(updated.locator('.audit-diff'), /settings\.delivery_delay[^→]*→\s*changed to 5/);
      await waitForText(updated.getByRole('figure', { name: 'Before' }).locator('pre'), /"delivery_delay": 0/);
      await waitForText(updated.getByRole('figure', { name: 'After' }).locator('pre'), /"delivery_delay": 5/);
      await shot(page, 'audit-log.png', { fullPage: true });
    });

    await step('filter by action: the address keeps it', async () => {
      await page.getByLabel('Action', { exact: true }).selectOption('queue.create');
      await waitFor('only queue.create entries',
        () => entries(page).locator('tr[data-audit]').evaluateAll((rows) => rows.map((r) => r.dataset.action)),
        (actions) => actions.length > 0 && actions.every((a) => a === 'queue.create'));
      assert.match(page.url(), /#\/audit\?action=queue\.create$/);
      await entryRow(page, queueName, 'queue.create').waitFor();
      assert.equal(await entryRow(page, queueName, 'queue.update').count(), 0);
      await waitForText(page.locator('.card-head .count'), /(entry|entries) matching$/);
      const { result } = await auditLog('?action.type=queue.create&per_page=20');
      assert.deepEqual(await shownIds(page), result.map((e) => String(e.id)));
    });

    await step('a time range: none after tomorrow; this one within the hour; kept on reload', async () => {
      const from = page.getByLabel('From', { exact: true });
      const to = page.getByLabel('To', { exact: true });
      const filter = page.getByRole('search', { name: 'Filter the audit log' });
      await from.fill(localField(Date.now() + 24 * HOUR));
      await filter.getByRole('button', { name: 'Filter', exact: true }).click();
      await page.getByText('No entry matches').waitFor();
      assert.equal(await entries(page).isVisible(), false, 'no entries listed');
      assert.match(page.url(), /[?&]since=/);

      // A range that ends before it starts is caught before anything is sent.
      await to.fill(localField(Date.now() - 24 * HOUR));
      await filter.getByRole('button', { name: 'Filter', exact: true }).click();
      await waitForText(page.getByRole('alert').filter({ hasText: 'must be after' }), /The end of the range \(To\) must be after its start \(From\)\./);

      const since = localField(Date.now() - HOUR);
      const until = localField(Date.now() + HOUR);
      await from.fill(since);
      await to.fill(until);
      await filter.getByRole('button', { name: 'Filter', exact: true }).click();
      await entryRow(page, queueName, 'queue.create').waitFor();
      assert.match(page.url(), /#\/audit\?action=queue\.create&since=[^&]+&before=[^&]+$/);

      await page.reload();
      await page.getByRole('heading', { name: 'Audit log', level: 1 }).waitFor();
      await entryRow(page, queueName, 'queue.create').waitFor();
      assert.equal(await page.getByLabel('Action', { exact: true }).inputValue(), 'queue.create');
      assert.equal(await from.inputValue(), since);
      assert.equal(await to.inputValue(), until);
      assert.equal(await entryRow(page, queueName, 'queue.update').count(), 0);
    });

    await step('clear the filters; a page past the last shows the last', async () => {
      await page.getByRole('button', { name: 'Clear filters' }).click();
      await entryRow(page, queueName, 'queue.update').waitFor();
      assert.match(page.url(), /#\/audit$/);
      assert.equal(await page.getByLabel('From', { exact: true }).inputValue(), '');

      await page.goto(`${BASE}/#/audit?action=queue.create&page=999`);
      await page.getByRole('heading', { name: 'Audit log', level: 1 }).waitFor();
      await waitFor('the last page instead of page 999', () => Promise.resolve(page.url()), (url) => !url.includes('page=999'));
      assert.match(page.url(), /#\/audit\?action=queue\.create(&page=\d+)?$/);
      await waitFor('entries on the last page', () => shownIds(page), (ids) => ids.length > 0);
    });

    await step('the queue\'s link opens its page', async () => {
      await page.goto(`${BASE}/#/audit`);
      await page.getByRole('heading', { name: 'Audit log', level: 1 }).waitFor();
      await entryRow(page, queueName, 'queue.create').getByRole('link', { name: queueName, exact: true }).click();
      await page.getByRole('heading', { name: queueName, level: 1 }).waitFor();
      assert.match(page.url(), new RegExp(`#/queues/${queueId}$`));
    });

    assert.equal(failed(), null, `step "${failed()}" failed`);
    assertNotLeaked(log, TOKEN);
    assertNoConsoleErrors(log);
  } finally {
    await writeFile(path.join(ARTIFACTS, 'console-audit.log'), `${log.messages.join('\n')}\n`);
    await context.close();
    if (queueId) await api('DELETE', `/accounts/${ACCOUNT}/queues/${queueId}`);
  }
});

test('the operator\'s account page shows the account\'s audit log', { skip: SKIP }, async (t) => {
  const { context, page, log } = await openPage({ origin: ADMIN });
  const queueName = `e2e-audit-op-${RUN}`;
  let queueId = null;
  const { step, failed } = steps(t, { 'failed-audit-operator': page });
  try {
    await step('a change by the account\'s token: the operator API lists it', async () => {
      queueId = await createQueue(queueName);
      const found = await waitFor('the queue.create entry on the operator API',
        () => admin('GET', `/audit_logs?account_id=${ACCOUNT}&action.type=queue.create&per_page=50`),
        (r) => r.status === 200 && r.json.result.some((e) => e.resource.id === queueId));
      const entry = found.json.result.find((e) => e.resource.id === queueId);
      assert.equal(entry.actor.type, 'token', JSON.stringify(entry));
      assert.equal(entry.owner.id, ACCOUNT);
    });

    await step('the account page\'s "Audit log" card lists the latest entries, the change first', async () => {
      await signInAt(page, ADMIN, OPERATOR_TOKEN);
      await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
      await page.goto(`${ADMIN}/#/operator/accounts/${ACCOUNT}`);
      const card = page.getByRole('region', { name: 'Audit log' });
      const row = entryRow(card, queueName, 'queue.create');
      await row.waitFor();
      const { json } = await admin('GET', `/audit_logs?account_id=${ACCOUNT}&per_page=20`);
      const shown = await shownIds(card);
      assert.deepEqual(shown, json.result.map((e) => String(e.id)), 'the latest 20, newest first');
      assert.equal(shown[0], await row.getAttribute('data-audit'), 'the change is the newest entry');
      const total = json.result_info.total_count;
      const fmt = new Intl.NumberFormat('en-US').format;
      await waitForText(card.locator('.card-head .count'), `1–${fmt(Math.min(20, total))} of ${fmt(total)} ${total === 1 ? 'entry' : 'entries'}`);

      const actor = row.locator('td[data-label="Actor"]');
      await waitForText(actor, /Token/);
      assert.doesNotMatch(await actor.textContent(), /This session/, 'the operator signed in with no account token');
      // The operator view has no queue pages: the queue is named, not linked.
      await waitForText(row.locator('td[data-label="Resource"]'), new RegExp(queueName));
      assert.equal(await row.getByRole('link').count(), 0);

      const detail = await openChanges(page, row);
      await waitForText(detail.getByRole('figure', { name: 'After' }).locator('pre'), new RegExp(`"queue_name": "${queueName}"`));
      await shot(page, 'operator-account-audit.png', { fullPage: true });

      // Older entries, a page at a time.
      const pager = card.getByRole('navigation', { name: 'Audit log pages' });
      if (total > 20) {
        await pager.getByRole('button', { name: /Older/ }).click();
        await waitForText(pager.locator('.pager-text'), /^Page 2 of /);
        const older = await admin('GET', `/audit_logs?account_id=${ACCOUNT}&per_page=20&page=2`);
        assert.deepEqual(await shownIds(card), older.json.result.map((e) => String(e.id)));
      } else {
        assert.equal(await pager.isVisible(), false, 'one page: no pager');
      }
    });

    assert.equal(failed(), null, `step "${failed()}" failed`);
    assertNotLeaked(log, OPERATOR_TOKEN);
    assertNoConsoleErrors(log);
  } finally {
    await writeFile(path.join(ARTIFACTS, 'console-audit-operator.log'), `${log.messages.join('\n')}\n`);
    await context.close();
    if (queueId) await api('DELETE', `/accounts/${ACCOUNT}/queues/${queueId}`);
  }
});
