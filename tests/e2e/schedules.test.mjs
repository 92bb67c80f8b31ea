// End-to-end test of the schedules page (web/views/schedules.js: #/schedules, from the top bar) in headless
// Chromium: a schedule created through the page's form, listed with its next run, paused, resumed and
// deleted; the server's refusal of a bad one shown in the form; an interval schedule seen running.
//
// It needs what tests/e2e/dashboard.test.mjs needs (SKIPLOCK_URL, SKIPLOCK_TOKEN with every scope,
// SKIPLOCK_ACCOUNT; see the top of that file). It creates a queue named e2e-sched-<run> through the API,
// and deletes it at the end (its schedules go with it).
//
// As the other tests: every check waits for a visible condition (no fixed sleeps), and the page fails the
// test on a console error it does not provoke on purpose.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  PHONE, DESKTOP, RUN, TOKEN, address, tenantHooks, openPage, assertNoConsoleErrors, waitForText, waitFor,
  shot, steps, signInAt, confirm, api,
} from './support.mjs';

const BASE = address('SKIPLOCK_URL');
tenantHooks();

// ---- helpers ------------------------------------------------------------------------------------


/** The account's schedules of the queue `queueId`, as the API lists them. */
async function schedulesOf(queueId) {
  const { status, json } = await api('GET', '/schedules?per_page=1000');
  assert.equal(status, 200, JSON.stringify(json));
  return json.result.filter((s) => s.queue_id === queueId);
}

/** One schedule, as the API answers it. */
async function schedule(id) {
  const { status, json } = await api('GET', `/schedules/${id}`);
  assert.equal(status, 200, JSON.stringify(json));
  return json.result;
}

/** The list's row of the schedule `id`. */
const rowOf = (page, id) => page.getByRole('table', { name: 'Schedules' }).locator(`tr[data-schedule="${id}"]`);
const cell = (row, label) => row.locator(`td[data-label="${label}"]`);

// ---- tests --------------------------------------------------------------------------------------

test('schedules: created through the form, listed with the next run, paused, resumed, deleted', async (t) => {
  const { context, page, log } = await openPage();
  const queueName = `e2e-sched-${RUN}`;
  let queueId = null;
  let cronId = null;
  let made = null;
  const { step } = steps(t, { 'failed-schedules': page });
  try {
    await step('create a queue through the API', async () => {
      const { status, json } = await api('POST', '/queues', { queue_name: queueName });
      assert.equal(status, 200, JSON.stringify(json));
      queueId = json.result.queue_id;
    });

    await step('the top bar leads to the schedules page', async () => {
      await signInAt(page, BASE, TOKEN);
      await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Schedules' }).click();
      await page.getByRole('heading', { name: 'Schedules', level: 1 }).waitFor();
      assert.match(page.url(), /#\/schedules$/);
      assert.equal(await page.getByRole('link', { name: 'Schedules' }).getAttribute('aria-current'), 'page');
      // The form offers the account's queues, the new one among them, by name.
      await page.getByLabel('Queue', { exact: true }).locator('option', { hasText: queueName }).waitFor({ state: 'attached' });
    });

    await step('a cron expression that never matches is refused by the server, and the form says why', async () => {
      await page.getByLabel('Queue', { exact: true }).selectOption({ label: queueName });
      await page.getByLabel('Cron expression', { exact: true }).fill('0 0 30 2 *');
      await page.getByLabel('Time zone', { exact: true }).fill('Europe/Berlin');
      await page.getByLabel('Content type').selectOption('json');
      await page.getByLabel('Message body').fill('{"report": "daily"}');
      await page.getByRole('button', { name: 'Create schedule' }).click();
      await waitForText(page.getByRole('alert').filter({ hasText: 'cron' }), /cron never matches a date to come/);
      assert.equal(await page.getByLabel('Cron expression', { exact: true }).getAttribute('aria-invalid'), 'true');
      assert.deepEqual(await schedulesOf(queueId), [], 'nothing was created');
    });

    await step('create a schedule through the form', async () => {
      await page.getByLabel('Cron expression', { exact: true }).fill('0 3 * * *');
      await page.getByRole('button', { name: 'Create schedule' }).click();
      await waitForText(page.getByRole('status').filter({ hasText: 'Schedule created' }),
        new RegExp(`Schedule created on ${queueName}\\. Its first run is `));
      const mine = await schedulesOf(queueId);
      assert.equal(mine.length, 1, JSON.stringify(mine));
      [made] = mine;
      cronId = made.schedule_id;
      assert.equal(made.cron, '0 3 * * *');
      assert.equal(made.time_zone, 'Europe/Berlin');
      assert.equal(made.interval_seconds, null);
      assert.deepEqual(made.message, { body: { report: 'daily' }, content_type: 'json', delay_seconds: null });
      assert.equal(made.paused, false);
      assert.equal(made.next_runs.length, 5);
      assert.equal(made.next_run_at, made.next_runs[0]);
    });

    await step('the list shows it: queue, cadence, next run, never run yet, active', async () => {
      const row = rowOf(page, cronId);
      await waitForText(cell(row, 'Queue'), queueName);
      assert.equal(await cell(row, 'Queue').getByRole('link', { name: queueName }).getAttribute('href'), `#/queues/${queueId}`);
      await waitForText(cell(row, 'Cadence'), /0 3 \* \* \*\s*Europe\/Berlin/);
      // The next run: the server's time, shown in the page's zone (UTC here: 03:00 in Berlin is 01:00 or
      // 02:00 UTC), and how far off it is.
      const next = cell(row, 'Next run').locator('time');
      assert.equal(await next.getAttribute('datetime'), made.next_run_at);
      await waitForText(next, /\b0?[12]:00:00\b/);
      await waitForText(cell(row, 'Next run'), /in \d+ (s|min|h|d)\b/);
      assert.match(await next.getAttribute('title'), /^Next runs:\n/);
      await waitForText(cell(row, 'Last run'), 'Never');
      await waitForText(cell(row, 'Runs'), '0');
      await waitForText(cell(row, 'State'), 'Active');
      await waitForText(cell(row, 'Last error'), '—');
      await shot(page, 'schedules-desktop.png', { fullPage: true });
    });

    await step('pause it: no next run, paused on the server; resume it: a next run again', async () => {
      const row = rowOf(page, cronId);
      await row.getByRole('button', { name: /^Pause the schedule 0 3 \* \* \*/ }).click();
      await waitForText(page.locator('.toast-text').filter({ hasText: 'paused' }), 'Schedule paused.');
      await waitForText(cell(row, 'State'), 'Paused');
      await waitForText(cell(row, 'Next run'), 'Paused');
      const paused = await schedule(cronId);
      assert.equal(paused.paused, true);
      assert.equal(paused.next_run_at, null);
      assert.deepEqual(paused.next_runs, []);

      await row.getByRole('button', { name: /^Resume the schedule 0 3 \* \* \*/ }).click();
      await waitForText(page.locator('.toast-text').filter({ hasText: 'resumed' }), 'Schedule resumed.');
      await waitForText(cell(row, 'State'), 'Active');
      await waitForText(cell(row, 'Next run'), /in \d+ (s|min|h|d)\b/);
      const resumed = await schedule(cronId);
      assert.equal(resumed.paused, false);
      assert.equal(resumed.next_runs.length, 5);
      assert.equal(await cell(row, 'Next run').locator('time').getAttribute('datetime'), resumed.next_run_at);
    });

    let everyId = null;
    await step('an interval schedule runs: the list shows its runs and its last run', async () => {
      await page.getByRole('radio', { name: /Every so many seconds/ }).check();
      assert.equal(await page.getByLabel('Cron expression', { exact: true }).isVisible(), false, 'the cron fields are hidden');
      await page.getByLabel('Interval (seconds)').fill('1');
      await page.getByLabel('Content type').selectOption('text');
      await page.getByLabel('Message body').fill('tick');
      await page.getByRole('button', { name: 'Create schedule' }).click();
      await waitForText(page.getByRole('status').filter({ hasText: 'Schedule created' }), /Its first run is/);
      const every = (await schedulesOf(queueId)).find((s) => s.interval_seconds === 1);
      assert.ok(every, 'the interval schedule is on the server');
      everyId = every.schedule_id;
      assert.deepEqual(every.message, { body: 'tick', content_type: 'text', delay_seconds: null });
      const row = rowOf(page, everyId);
      await waitForText(cell(row, 'Cadence'), 'Every 1 s');
      // It publishes every second; the page refreshes every 5 s.
      await waitForText(cell(row, 'Runs'), /^[1-9][0-9,]*$/, 20000);
      await waitForText(cell(row, 'Last run'), /ago|now/);
      const { json } = await api('GET', `/queues/${queueId}/metrics`);
      assert.ok(json.result.backlog_count >= 1, `its messages are in the queue: ${JSON.stringify(json.result)}`);
    });

    await step('phone-sized screen: the top bar and the list fit', async () => {
      await page.setViewportSize(PHONE);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Schedules' }).waitFor();
      const fits = await page.waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth, null, { timeout: 5000 })
        .then(() => true, () => false);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(fits, `the page is ${overflow}px wider than a phone screen`);
      await shot(page, 'schedules-phone.png', { fullPage: true });
      await page.setViewportSize(DESKTOP);
    });

    await step('delete both: gone from the list and from the server', async () => {
      for (const [scheduleId, cadence] of [[everyId, 'Every 1 s'], [cronId, '0 3 \\* \\* \\*']]) {
        const row = rowOf(page, scheduleId);
        await row.getByRole('button', { name: new RegExp(`^Delete the schedule ${cadence}`) }).click();
        await confirm(page, 'Delete schedule');
        await waitForText(page.locator('.toast-text').filter({ hasText: 'deleted' }), 'Schedule deleted.');
        await row.waitFor({ state: 'detached' });
        const { status } = await api('GET', `/schedules/${scheduleId}`);
        assert.equal(status, 404, 'the schedule is deleted on the server');
        await page.evaluate(() => document.querySelectorAll('.toast-close').forEach((b) => b.click()));
      }
      await waitFor('no schedule of the queue', () => schedulesOf(queueId), (list) => list.length === 0);
    });

    // The refused create is the one failed request the page made on purpose.
    assertNoConsoleErrors(log, [/Failed to load resource: the server responded with a status of 400/]);
  } finally {
    if (queueId) await api('DELETE', `/queues/${queueId}`).catch(() => {});
    await context.close();
  }
});
