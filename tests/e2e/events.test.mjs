// End-to-end test of the Events page (web/views/events.js: #/events, from the top bar) in headless Chromium:
// an event subscription created through the page's form (after the page refused one whose destination is
// its source, and the server one whose destination queue was deleted meanwhile), listed with its source's
// and destination's names, disabled and enabled again, and deleted. Each step is checked against the API.
//
// It needs what tests/e2e/dashboard.test.mjs needs (SKIPLOCK_URL, SKIPLOCK_TOKEN with every scope,
// SKIPLOCK_ACCOUNT; see the top of that file). It creates queues named e2e-ev-src-<run>, e2e-ev-dst-<run>
// and e2e-ev-gone-<run> through the API, and deletes them at the end.
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

const SUBSCRIPTIONS = '/event_subscriptions/subscriptions';

/** The account's subscriptions named `name`, as the API lists them (every page). */
async function subscriptionsNamed(name) {
  const found = [];
  for (let number = 1; ; number += 1) {
    const { status, json } = await api('GET', `${SUBSCRIPTIONS}?page=${number}&per_page=50`);
    assert.equal(status, 200, JSON.stringify(json));
    found.push(...json.result.filter((s) => s.name === name));
    if (json.result.length === 0 || number >= json.result_info.total_pages) return found;
  }
}

/** One subscription, as the API answers it. */
async function subscription(id) {
  const { status, json } = await api('GET', `${SUBSCRIPTIONS}/${id}`);
  assert.equal(status, 200, JSON.stringify(json));
  return json.result;
}

/** Creates a queue through the API; resolves its id. */
async function createQueue(name) {
  const { status, json } = await api('POST', '/queues', { queue_name: name });
  assert.equal(status, 200, JSON.stringify(json));
  return json.result.queue_id;
}

/** The list's row of the subscription `id`. */
const rowOf = (page, id) => page.getByRole('table', { name: 'Event subscriptions' }).locator(`tr[data-subscription="${id}"]`);
const cell = (row, label) => row.locator(`td[data-label="${label}"]`);
/** The form's checkbox of an event type (its label starts with the type). */
const eventBox = (page, type) => page.getByRole('checkbox', { name: new RegExp(`^${type.replace(/\./g, '\\.')}\\b`) });

// ---- tests --------------------------------------------------------------------------------------

test('events: a subscription created through the form, listed, disabled, enabled and deleted', async (t) => {
  const { context, page, log } = await openPage();
  const names = { src: `e2e-ev-src-${RUN}`, dst: `e2e-ev-dst-${RUN}`, gone: `e2e-ev-gone-${RUN}` };
  const ids = {};
  const subscriptionName = `e2e-events-${RUN}`;
  let subscriptionId = null;
  const { step } = steps(t, { 'failed-events': page });
  try {
    await step('create the queues through the API', async () => {
      for (const [key, name] of Object.entries(names)) ids[key] = await createQueue(name);
    });

    await step('the top bar leads to the events page, which offers the account\'s queues', async () => {
      await signInAt(page, BASE, TOKEN);
      await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Events' }).click();
      await page.getByRole('heading', { name: 'Events', level: 1 }).waitFor();
      assert.match(page.url(), /#\/events$/);
      assert.equal(await page.getByRole('link', { name: 'Events' }).getAttribute('aria-current'), 'page');
      await waitForText(page.locator('.page-head'), /JSON message in Cloudflare's event envelope/);
      for (const name of Object.values(names)) {
        await page.getByLabel('Source queue', { exact: true }).locator('option', { hasText: name }).waitFor({ state: 'attached' });
        await page.getByLabel('Destination queue', { exact: true }).locator('option', { hasText: name }).waitFor({ state: 'attached' });
      }
      // Every event type the server takes, in its order, consumer.disabled among them.
      await eventBox(page, 'consumer.disabled').waitFor();
      assert.deepEqual(await page.getByRole('group', { name: 'Events', exact: true }).getByRole('checkbox').evaluateAll((boxes) => boxes.map((b) => b.value)),
        ['consumer.failing', 'consumer.recovered', 'consumer.disabled', 'messages.dead_lettered', 'backlog.over_threshold', 'redrive.finished', 'quota.warning', 'quota.exceeded']);
      assert.match(await page.getByRole('group', { name: 'Events', exact: true }).textContent(), /consumer\.disabled.*disable_after_hours and was disabled/s);
    });

    await step('the form shows the backlog threshold only for backlog.over_threshold, the source queue and the backlog event only for one queue', async () => {
      const threshold = page.getByLabel('Backlog threshold (messages)');
      assert.equal(await threshold.isVisible(), false);
      await eventBox(page, 'backlog.over_threshold').check();
      await threshold.waitFor();
      await eventBox(page, 'backlog.over_threshold').uncheck();
      await threshold.waitFor({ state: 'hidden' });
      // Every queue of the account: no source queue, and no backlog event (a backlog is one queue's).
      await eventBox(page, 'backlog.over_threshold').check();
      await page.getByLabel('Source', { exact: true }).selectOption({ label: 'Every queue of the account' });
      await page.getByLabel('Source queue', { exact: true }).waitFor({ state: 'hidden' });
      assert.equal(await eventBox(page, 'backlog.over_threshold').isDisabled(), true);
      assert.equal(await eventBox(page, 'backlog.over_threshold').isChecked(), false);
      await threshold.waitFor({ state: 'hidden' });
      await page.getByLabel('Source', { exact: true }).selectOption({ label: 'One queue' });
      await page.getByLabel('Source queue', { exact: true }).waitFor();
      assert.equal(await eventBox(page, 'backlog.over_threshold').isEnabled(), true);
    });

    await step('a destination that is the source queue is refused before anything is sent', async () => {
      await page.getByLabel('Name', { exact: true }).fill(subscriptionName);
      await page.getByLabel('Source queue', { exact: true }).selectOption({ label: names.src });
      await eventBox(page, 'consumer.failing').check();
      await page.getByLabel('Destination queue', { exact: true }).selectOption({ label: names.src });
      await page.getByRole('button', { name: 'Create subscription' }).click();
      await waitForText(page.getByRole('alert').filter({ hasText: 'destination' }), /cannot be the source queue/);
      assert.equal(await page.getByLabel('Destination queue', { exact: true }).getAttribute('aria-invalid'), 'true');
      assert.deepEqual(await subscriptionsNamed(subscriptionName), [], 'nothing was created');
    });

    await step('a destination queue deleted meanwhile is refused by the server, and the form says so', async () => {
      await page.getByLabel('Destination queue', { exact: true }).selectOption({ label: names.gone });
      const { status, json } = await api('DELETE', `/queues/${ids.gone}`);
      assert.equal(status, 200, JSON.stringify(json));
      delete ids.gone;
      await page.getByRole('button', { name: 'Create subscription' }).click();
      const alert = page.locator('form').getByRole('alert');
      await waitForText(alert, /\S/);
      assert.doesNotMatch(await alert.textContent(), /cannot be the source queue|Choose/, 'the server\'s message, not the page\'s');
      assert.deepEqual(await subscriptionsNamed(subscriptionName), [], 'nothing was created');
      // The queues are read again: the deleted one is no longer offered.
      await page.getByLabel('Destination queue', { exact: true }).locator('option', { hasText: names.gone }).waitFor({ state: 'detached' });
    });

    await step('create a subscription through the form', async () => {
      await eventBox(page, 'messages.dead_lettered').check();
      await eventBox(page, 'backlog.over_threshold').check();
      await page.getByLabel('Backlog threshold (messages)').fill('100');
      await page.getByLabel('Destination queue', { exact: true }).selectOption({ label: names.dst });
      await page.getByRole('button', { name: 'Create subscription' }).click();
      await waitForText(page.getByRole('status').filter({ hasText: 'created' }),
        `Subscription ${subscriptionName} created: events of ${names.src} go to ${names.dst}.`);
      const mine = await subscriptionsNamed(subscriptionName);
      assert.equal(mine.length, 1, JSON.stringify(mine));
      const [made] = mine;
      subscriptionId = made.id;
      assert.match(subscriptionId, /^[0-9a-f]{32}$/);
      assert.equal(made.enabled, true);
      assert.deepEqual(made.source, { type: 'queues.queue', queue_id: ids.src, queue_name: names.src, backlog_threshold: 100 });
      assert.deepEqual([...made.events].sort(), ['backlog.over_threshold', 'consumer.failing', 'messages.dead_lettered']);
      assert.deepEqual(made.destination, { type: 'queues.queue', queue_id: ids.dst });
    });

    await step('the list shows it: name, source, events, destination by name, enabled, created', async () => {
      const row = rowOf(page, subscriptionId);
      await waitForText(cell(row, 'Name'), subscriptionName);
      await waitForText(cell(row, 'Source'), names.src);
      assert.equal(await cell(row, 'Source').getByRole('link', { name: names.src }).getAttribute('href'), `#/queues/${ids.src}`);
      await waitForText(cell(row, 'Events'), /consumer\.failing/);
      await waitForText(cell(row, 'Events'), /messages\.dead_lettered/);
      await waitForText(cell(row, 'Events'), /backlog\.over_threshold over 100/);
      await waitForText(cell(row, 'Destination'), names.dst);
      assert.equal(await cell(row, 'Destination').getByRole('link', { name: names.dst }).getAttribute('href'), `#/queues/${ids.dst}`);
      await waitForText(cell(row, 'State'), 'Enabled');
      const created = cell(row, 'Created').locator('time');
      assert.equal(await created.getAttribute('datetime'), (await subscription(subscriptionId)).created_at);
      await shot(page, 'events-desktop.png', { fullPage: true });
    });

    await step('disable it: disabled in the list and on the server; enable it again', async () => {
      const row = rowOf(page, subscriptionId);
      await row.getByRole('button', { name: new RegExp(`^Disable the subscription ${subscriptionName}`) }).click();
      await waitForText(page.locator('.toast-text').filter({ hasText: 'disabled' }), 'Subscription disabled.');
      await waitForText(cell(row, 'State'), 'Disabled');
      assert.equal((await subscription(subscriptionId)).enabled, false);

      await row.getByRole('button', { name: new RegExp(`^Enable the subscription ${subscriptionName}`) }).click();
      await waitForText(page.locator('.toast-text').filter({ hasText: 'enabled' }), 'Subscription enabled.');
      await waitForText(cell(row, 'State'), 'Enabled');
      assert.equal((await subscription(subscriptionId)).enabled, true);
    });

    await step('phone-sized screen: the top bar and the list fit', async () => {
      await page.setViewportSize(PHONE);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Events' }).waitFor();
      const fits = await page.waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth, null, { timeout: 5000 })
        .then(() => true, () => false);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(fits, `the page is ${overflow}px wider than a phone screen`);
      await shot(page, 'events-phone.png', { fullPage: true });
      await page.setViewportSize(DESKTOP);
    });

    await step('delete it: gone from the list and from the server', async () => {
      const row = rowOf(page, subscriptionId);
      await row.getByRole('button', { name: new RegExp(`^Delete the subscription ${subscriptionName}`) }).click();
      await confirm(page, 'Delete subscription');
      await waitForText(page.locator('.toast-text').filter({ hasText: 'deleted' }), 'Subscription deleted.');
      await row.waitFor({ state: 'detached' });
      const { status } = await api('GET', `${SUBSCRIPTIONS}/${subscriptionId}`);
      assert.equal(status, 404, 'the subscription is deleted on the server');
      await waitFor('no subscription of that name', () => subscriptionsNamed(subscriptionName), (list) => list.length === 0);
    });

    // The create refused for its deleted destination is the one failed request the page made on purpose.
    assertNoConsoleErrors(log, [/Failed to load resource: the server responded with a status of 404/]);
  } finally {
    if (subscriptionId) await api('DELETE', `${SUBSCRIPTIONS}/${subscriptionId}`).catch(() => {});
    for (const queueId of Object.values(ids)) await api('DELETE', `/queues/${queueId}`).catch(() => {});
    await context.close();
  }
});
