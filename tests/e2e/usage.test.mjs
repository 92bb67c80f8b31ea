// End-to-end test of the Usage page in headless Chromium (web/views/usage.js: #/usage, from the top bar),
// which reads GET /client/v4/accounts/{id}/usage (by UTC day, since the first of the month) and the
// quotas of GET /client/v4/accounts/{id}/limits.
//
// It needs what tests/e2e/dashboard.test.mjs needs (SKIPLOCK_URL, SKIPLOCK_TOKEN with every scope,
// SKIPLOCK_ACCOUNT; see the top of that file). It creates a queue named e2e-usage-<run> through the
// tenant API, publishes, pulls and acks three messages, one of them over 64 KB (two operations each time
// it is written, read or deleted), and deletes the queue. Usage shows once the server has folded its
// counts, which it does every few seconds: the test waits for the page to show it, up to USAGE_WAIT.
//
// Quotas: a server without them answers no `quotas`, and the page shows none. The test gives the page
// the figures a server with quotas gives (the server's own answer with `quotas` set, as attempts.test.mjs
// shows a disabled consumer) to check the lines, the percentages and the marks at 80% and 100%; and when
// the server does report quotas, and the operator API is there (SKIPLOCK_ADMIN_URL and
// SKIPLOCK_OPERATOR_TOKEN, see the top of operator.test.mjs), it sets a daily quota of the account's own
// and removes it after. The empty state is an account made with the operator API for it, then deleted.
//
// As the other tests: every check waits for a visible condition (no fixed sleeps), and every page
// fails the test on a console error it does not provoke on purpose.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  ARTIFACTS, DESKTOP, PHONE, RUN, TOKEN, ACCOUNT, tenantHooks, openPage, assertNoConsoleErrors, assertNotLeaked, waitForText,
  waitFor, shot, steps, signInAt,
} from './support.mjs';
import { BASE, SKIP, admin, tenant } from './operator-support.mjs';

tenantHooks();

// ---- helpers ------------------------------------------------------------------------------------

/** The longest the test waits for the server to fold the usage and the page to show it (ms). */
const USAGE_WAIT = 60000;

/** The tenant API with the all-scopes token. */
const api = (method, apiPath, body) => tenant(method, apiPath, TOKEN, body);

/** The answer's result, once the call succeeded. */
async function ok(method, apiPath, body) {
  const { status, json } = await api(method, apiPath, body);
  assert.equal(status, 200, `${method} ${apiPath}: ${JSON.stringify(json)}`);
  return json.result;
}

/** Today in UTC, as the usage names a day ("2026-11-30"). */
const today = () => new Date().toISOString().slice(0, 10);

/** Numbers as the page writes them (its locale is en-US: see openPage). */
const fmt = new Intl.NumberFormat('en-US').format;

/** The table of the largest consumers, and the row of the queue `name`. */
const consumers = (page) => page.getByRole('table', { name: 'Usage by queue' });
const queueRow = (page, name) => consumers(page).locator(`tr[data-queue="${name}"]`);

/** One quota's item on the Quotas card. */
const quotaItem = (page, key) => page.getByRole('region', { name: 'Quotas' }).locator(`li[data-quota="${key}"]`);

/** The per-day card, its tiles and its chart. */
const daysCard = (page) => page.getByRole('region', { name: /^Operations per day, / });
const tileValue = (page, name) => daysCard(page).getByRole('group', { name }).locator('.tile-value');

// The body over 64 KB: two 64 KB chunks, so two operations each time it is written, read or deleted.
const LARGE = 'x'.repeat(70000);
/** Of the three messages below: 1 + 1 + 2 each time they are written, read and deleted. */
const EACH = 4;

// ---- tests --------------------------------------------------------------------------------------

test('the usage page: a queue\'s operations this month, per day, among the largest consumers; quotas', async (t) => {
  const { context, page, log } = await openPage();
  const queueName = `e2e-usage-${RUN}`;
  let queueId = null;
  let quotaSet = false;
  const { step, failed } = steps(t, { 'failed-usage': page });
  try {
    await step('a queue with a pull consumer: three messages published, pulled and acked through the API', async () => {
      queueId = (await ok('POST', `/accounts/${ACCOUNT}/queues`, { queue_name: queueName })).queue_id;
      await ok('POST', `/accounts/${ACCOUNT}/queues/${queueId}/consumers`, { type: 'http_pull' });
      const messages = ['a', 'b', LARGE].map((body) => ({ body, content_type: 'text' }));
      await ok('POST', `/accounts/${ACCOUNT}/queues/${queueId}/messages/batch`, { messages });
      // A pull may answer fewer than asked: pull until all three are leased.
      const leases = [];
      await waitFor('the three messages pulled', async () => {
        const got = await ok('POST', `/accounts/${ACCOUNT}/queues/${queueId}/messages/pull`, { batch_size: 10, visibility_timeout_ms: 60000 });
        leases.push(...got.messages.map((m) => m.lease_id));
        return leases.length;
      }, (n) => n >= 3);
      assert.equal(leases.length, 3);
      const acked = await ok('POST', `/accounts/${ACCOUNT}/queues/${queueId}/messages/ack`, { acks: leases.map((lease_id) => ({ lease_id })) });
      assert.equal(acked.ackCount, 3, JSON.stringify(acked));
    });

    await step('the top bar leads to the Usage page', async () => {
      await signInAt(page, BASE, TOKEN);
      await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Usage' }).click();
      await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
      assert.match(page.url(), /#\/usage$/);
      const link = page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Usage' });
      assert.equal(await link.getAttribute('aria-current'), 'page');
    });

    await step('once the server folds its counts, the queue is listed with its operations and messages', async () => {
      // The page reads the usage again every few seconds: this waits for it to show the fold.
      const row = queueRow(page, queueName);
      await waitForText(row.locator('td[data-label="Operations"] .value'), fmt(3 * EACH), USAGE_WAIT);
      await waitForText(row.locator('td[data-label="Operations"] .sub'), `${EACH} write · ${EACH} read · ${EACH} delete`);
      await waitForText(row.locator('td[data-label="Published"]'), '3');
      await waitForText(row.locator('td[data-label="Delivered"]'), '3');
      await waitForText(row.locator('td[data-label="Acked"]'), '3');
      // 70,002 bytes: 68.4 KiB, shown as the dashboard shows bytes.
      await waitForText(row.locator('td[data-label="Bytes published"]'), '68 KB');
      await waitForText(row.locator('td[data-label="Bytes delivered"]'), '68 KB');
      // The server's word for it, the same.
      const rows = await ok('GET', `/accounts/${ACCOUNT}/usage?queue_id=${queueId}`);
      assert.equal(rows.reduce((n, r) => n + r.operations, 0), 3 * EACH, JSON.stringify(rows));
      // The queue's name leads to its page while it exists.
      const link = row.getByRole('link', { name: queueName, exact: true });
      assert.equal(await link.getAttribute('href'), `#/queues/${queueId}`);
      // The largest consumers first.
      const shown = await consumers(page).locator('td[data-label="Operations"] .value')
        .evaluateAll((cells) => cells.map((c) => Number(c.textContent.replace(/,/g, ''))));
      assert.deepEqual(shown, [...shown].sort((a, b) => b - a), `sorted by operations: ${shown}`);
    });

    await step('the per-day figures: today, the month, and a chart of every day so far', async () => {
      // The account's figures as the server gives them, and as the page shows them, until they agree
      // (another test's last counts may still be folding).
      const figures = await waitFor('the page\'s Today and This month to match the server\'s usage', async () => {
        const rows = await ok('GET', `/accounts/${ACCOUNT}/usage`);
        const server = {
          today: rows.filter((r) => r.start.startsWith(today())).reduce((n, r) => n + r.operations, 0),
          month: rows.reduce((n, r) => n + r.operations, 0),
        };
        const shown = { today: await tileValue(page, 'Today').textContent(), month: await tileValue(page, 'This month').textContent() };
        return { server, shown };
      }, ({ server, shown }) => shown.today === fmt(server.today) && shown.month === fmt(server.month), USAGE_WAIT);
      assert.ok(figures.server.today >= 3 * EACH, JSON.stringify(figures));

      // The chart: one point a day from the 1st to today; its readout shows the latest, today's figure.
      const dayOfMonth = new Date().getUTCDate();
      const line = daysCard(page).locator('path.chart-line[data-series="operations"]');
      assert.equal(await line.getAttribute('data-points'), String(dayOfMonth));
      await waitForText(daysCard(page).locator('.legend-value').first(), fmt(figures.server.today));
      await waitForText(daysCard(page).locator('.legend-time'), /^latest · [A-Z][a-z]{2} \d{1,2}$/);

      // The queue's own chart: its operations today (all of its usage is today's).
      const block = page.locator(`.chart-block[data-queue-id="${queueId}"]`);
      await waitForText(block.locator('h3'), `${queueName} · ${fmt(3 * EACH)} operations`);
      await waitForText(block.locator('.legend-value').first(), fmt(3 * EACH));
      await shot(page, 'usage.png', { fullPage: true });
    });

    // Whether this server reports quotas at all (one being added to skiplock now).
    const limits = await ok('GET', `/accounts/${ACCOUNT}/limits`);
    const serverQuotas = Boolean(limits.quotas);

    await step('quotas as a server gives them: the lines, the percentages, the marks at 80% and 100%, the quota line', async () => {
      // The server's own /limits answer, with the quotas a server of a plan with quotas gives.
      const quotas = {
        operations_today: { used: 7412, limit: 10000, resets_at: '2026-12-01T00:00:00Z' },
        operations_this_month: { used: 9000, limit: 10000, resets_at: '2027-01-01T00:00:00Z' },
        stored_bytes: { used: 2048, limit: 2048 },
      };
      const matches = (url) => url.pathname === `/client/v4/accounts/${ACCOUNT}/limits`;
      const handler = async (route) => {
        const response = await route.fetch();
        const json = await response.json();
        json.result.quotas = quotas;
        return route.fulfill({ response, json });
      };
      await page.route(matches, handler);
      try {
        await page.reload();
        await waitForText(quotaItem(page, 'operations_today').locator('.quota-text'), '7,412 of 10,000 operations today (74%)');
        assert.equal(await quotaItem(page, 'operations_today').getAttribute('data-level'), 'ok');
        assert.equal(await quotaItem(page, 'operations_today').locator('.badge').count(), 0);
        await waitForText(quotaItem(page, 'operations_today'), /Resets /);
        // 90%: marked as near.
        await waitForText(quotaItem(page, 'operations_this_month').locator('.quota-text'), '9,000 of 10,000 operations this month (90%)');
        assert.equal(await quotaItem(page, 'operations_this_month').getAttribute('data-level'), 'near');
        await waitForText(quotaItem(page, 'operations_this_month').locator('.badge'), 'Near the quota');
        // 100%: marked as reached, saying what is refused.
        await waitForText(quotaItem(page, 'stored_bytes').locator('.quota-text'), '2.0 KB of 2.0 KB stored (100%)');
        assert.equal(await quotaItem(page, 'stored_bytes').getAttribute('data-level'), 'over');
        await waitForText(quotaItem(page, 'stored_bytes').locator('.badge'), 'Quota reached');
        await waitForText(quotaItem(page, 'stored_bytes'), /Publishes are refused \(HTTP 429\)/);
        assert.equal(await page.getByRole('meter', { name: 'Operations today used' }).getAttribute('max'), '10000');

        // The daily quota as a line on the chart, and the day and the month against their quotas.
        await daysCard(page).locator('path.chart-line[data-series="quota"]').waitFor({ state: 'attached' }); // a flat line: no height
        await waitForText(daysCard(page).locator('.legend-item', { hasText: 'Daily quota' }).locator('.legend-value'), '10,000');
        await waitForText(daysCard(page).locator('p', { hasText: 'dashed line' }), /daily quota, 10,000 operations a UTC day/);
        await waitForText(daysCard(page).getByRole('group', { name: 'Today' }).locator('.tile-sub'), /^of 10,000 a day \(\d+%\)$/);
        await waitForText(daysCard(page).getByRole('group', { name: 'This month' }).locator('.tile-sub'), /^of 10,000 this month \(\d+%\)$/);
        await shot(page, 'usage-quotas.png', { fullPage: true });
      } finally {
        await page.unroute(matches, handler);
      }
      // The server's own answer again: without quotas, no card and no quota line.
      await page.reload();
      await queueRow(page, queueName).waitFor();
      if (!serverQuotas) {
        assert.equal(await page.getByRole('region', { name: 'Quotas' }).count(), 0, 'no quotas: no card');
        assert.equal(await daysCard(page).locator('path.chart-line[data-series="quota"]').count(), 0);
      }
    });

    // A quota of the account's own needs a server that reports quotas, and the operator API to set it.
    const noRealQuota = (!serverQuotas && 'this server reports no quotas (GET /limits has no `quotas`)') || SKIP
      || (failed() && `skipped: "${failed()}" failed`) || false;
    await t.test('a daily quota of the account\'s own, set by the operator, shows with its percentage', { skip: noRealQuota }, async () => {
      // The operations the account used today, as the quota counts them: a quota a little over it is near.
      const used = limits.quotas.operations_today.used;
      const limit = Math.ceil((used + 1) / 0.9);
      const set = await admin('PATCH', `/accounts/${ACCOUNT}`, { limit_overrides: { max_operations_per_day: limit } });
      assert.equal(set.status, 200, JSON.stringify(set.json));
      quotaSet = true;
      await waitFor('the quota in force', () => ok('GET', `/accounts/${ACCOUNT}/limits`),
        (got) => got.quotas && got.quotas.operations_today.limit === limit);
      await page.reload();
      const item = quotaItem(page, 'operations_today');
      await waitForText(item.locator('.quota-text'), new RegExp(`^[\\d,]+ of ${fmt(limit)} operations today \\(\\d+%\\)$`));
      assert.match(await item.getAttribute('data-level'), /^(near|over)$/);
      await daysCard(page).locator('path.chart-line[data-series="quota"]').waitFor({ state: 'attached' }); // a flat line: no height
      // Removed at once (not only in `finally`): the steps after it must not meet the quota.
      const removed = await admin('PATCH', `/accounts/${ACCOUNT}`, { limit_overrides: { max_operations_per_day: null } });
      assert.equal(removed.status, 200, JSON.stringify(removed.json));
      quotaSet = false;
    });

    await step('a phone-sized screen: the page fits, the table as cards', async () => {
      await page.setViewportSize(PHONE);
      const fits = await page.waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth, null, { timeout: 5000 })
        .then(() => true, () => false);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(fits, `the page is ${overflow}px wider than a phone screen`);
      await shot(page, 'usage-phone.png', { fullPage: true });
      await page.setViewportSize(DESKTOP);
    });

    await step('a deleted queue\'s usage is still the account\'s: listed, marked deleted, not linked', async () => {
      await ok('DELETE', `/accounts/${ACCOUNT}/queues/${queueId}`);
      queueId = null;
      await page.reload();
      const row = queueRow(page, queueName);
      await waitForText(row.locator('td[data-label="Queue"]'), `${queueName}Deleted`);
      assert.equal(await row.getByRole('link').count(), 0);
      await waitForText(row.locator('td[data-label="Operations"] .value'), fmt(3 * EACH));
    });

    assert.equal(failed(), null, `step "${failed()}" failed`);
    assertNotLeaked(log, TOKEN);
    assertNoConsoleErrors(log);
  } finally {
    await writeFile(path.join(ARTIFACTS, 'console-usage.log'), `${log.messages.join('\n')}\n`);
    await context.close();
    if (quotaSet) await admin('PATCH', `/accounts/${ACCOUNT}`, { limit_overrides: { max_operations_per_day: null } });
    if (queueId) await api('DELETE', `/accounts/${ACCOUNT}/queues/${queueId}`);
  }
});

test('an account with no usage yet: the empty state', { skip: SKIP }, async () => {
  const { context, page, log } = await openPage();
  let accountId = null;
  try {
    // A new account of its own (the test's account has usage by now), made with the operator API.
    const made = await admin('POST', '/accounts', { name: `e2e-usage-${RUN}-empty` });
    assert.equal(made.status, 200, JSON.stringify(made.json));
    accountId = made.json.result.account.id;
    const firstToken = made.json.result.token.token;
    await signInAt(page, BASE, firstToken);
    await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
    await page.goto(`${BASE}/#/usage`);
    await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
    await waitForText(page.locator('.empty-title'), 'No usage yet this month');
    for (const name of [/^Operations per day/, 'Operations per day by queue', 'Largest consumers this month']) {
      assert.equal(await page.getByRole('region', { name }).count(), 0, `no ${name} card`);
    }
    await shot(page, 'usage-empty.png');
    assertNotLeaked(log, firstToken);
    assertNoConsoleErrors(log);
  } finally {
    await context.close();
    if (accountId) await admin('DELETE', `/accounts/${accountId}`);
  }
});
