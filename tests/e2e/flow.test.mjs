// End-to-end test of flow control per key on the queue page (web/views/queue/flow.js and flow-editor.js,
// the consumers card's limits, the Flow control tile) in headless Chromium: a pull consumer given a
// parallelism of 1 through its form (after the server's refusal of a period without a rate, shown in the
// form); three messages of one flow key published through the API, seen as one let go and two held back
// at the key's parallelism; the key paused and resumed from its row; a parallelism of 3 of its own set
// from the page, after which nothing waits; its own limits removed; a key without messages looked up by
// name, given a rate of its own and cleared. Each change is checked against the API as well.
//
// It needs what tests/e2e/dashboard.test.mjs needs (SKIPLOCK_URL, SKIPLOCK_TOKEN with every scope,
// SKIPLOCK_ACCOUNT; see the top of that file). It creates a queue named e2e-flow-<run> through the API,
// and deletes it at the end.
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

/** The flow key the test's messages carry. */
const KEY = 'shop-7';
/** A key without messages, looked up by name. */
const IDLE = 'idle-tenant';

// ---- helpers ------------------------------------------------------------------------------------


/** One flow key of the queue, as the API answers it. */
async function flowKey(queueId, key) {
  const { status, json } = await api('GET', `/queues/${queueId}/flow_keys/${encodeURIComponent(key)}`);
  assert.equal(status, 200, JSON.stringify(json));
  return json.result;
}

/** The queue's consumers, as the API lists them. */
async function consumers(queueId) {
  const { status, json } = await api('GET', `/queues/${queueId}/consumers`);
  assert.equal(status, 200, JSON.stringify(json));
  return json.result;
}

const tileOf = (page) => page.getByRole('group', { name: 'Flow control', exact: true });
const cardOf = (page) => page.getByRole('region', { name: 'Flow control', exact: true });
/** The list's row of the flow key `key`. */
const rowOf = (page, key) => cardOf(page).getByRole('table', { name: 'Flow keys' }).locator(`tr[data-flow-key="${key}"]`);
const cell = (row, label) => row.locator(`td[data-label="${label}"]`);
/** The flow card's form for a key by name. */
const editorOf = (page) => cardOf(page).getByRole('form', { name: 'A key by name' });
/** Waits for the toast saying `text`, then dismisses every toast (so that the next ones are seen). */
async function toastSays(page, text) {
  await waitForText(page.locator('.toast-text').filter({ hasText: text }), text);
  await page.evaluate(() => document.querySelectorAll('.toast-close').forEach((b) => b.click()));
}

// ---- tests --------------------------------------------------------------------------------------

test('flow control: consumer limits, a key held back, paused, resumed, given and cleared limits of its own', async (t) => {
  const { context, page, log } = await openPage();
  const queueName = `e2e-flow-${RUN}`;
  let queueId = null;
  const { step } = steps(t, { 'failed-flow': page });
  try {
    await step('create a queue through the API and open its page', async () => {
      const { status, json } = await api('POST', '/queues', { queue_name: queueName });
      assert.equal(status, 200, JSON.stringify(json));
      queueId = json.result.queue_id;
      await signInAt(page, BASE, TOKEN);
      await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      await page.goto(`${BASE}/#/queues/${queueId}`);
      await page.getByRole('heading', { name: queueName, level: 1 }).waitFor();
      // No consumer and nothing held back: no tile for flow control; the card says where limits come from.
      await waitForText(cardOf(page).getByText(/^No consumer yet/), /a key is held back only by limits of its own, or a pause/);
      await waitForText(cardOf(page).locator('.empty'), /No flow keys yet/);
      assert.equal(await tileOf(page).isVisible(), false, 'no flow control tile without limits or held messages');
    });

    await step('the consumer form: a period without a rate is refused by the server; a parallelism of 1 is set', async () => {
      const card = page.getByRole('region', { name: 'Consumers', exact: true });
      await card.getByRole('button', { name: 'Add a consumer' }).click();
      assert.equal(await card.getByRole('radio', { name: /^HTTP pull/ }).isChecked(), true);
      const period = card.getByLabel('Period (seconds)', { exact: true });
      await period.fill('60');
      await card.getByRole('button', { name: 'Create consumer' }).click();
      await waitForText(card.getByRole('alert'), /settings\.flow_control\.period applies to a rate/);
      assert.equal(await period.getAttribute('aria-invalid'), 'true');
      assert.deepEqual(await consumers(queueId), [], 'nothing was created');

      await period.fill('');
      await card.getByLabel('Parallelism', { exact: true }).fill('1');
      await card.getByRole('button', { name: 'Create consumer' }).click();
      await toastSays(page, 'Consumer created.');
      await waitForText(card.locator('dl'), /Flow control\s*1 at once per key/);
      const [made] = await consumers(queueId);
      assert.equal(made.type, 'http_pull');
      assert.deepEqual(made.settings.flow_control, { parallelism: 1, rate: null, period: null });
      // The consumer sets limits: the tile shows, with nothing held back yet; the card names the limits.
      await waitForText(tileOf(page).locator('.tile-value'), '0');
      await waitForText(tileOf(page).locator('.tile-sub'), 'nothing held back');
      await waitForText(cardOf(page).getByText(/^The consumer's limits/), /1 at once per key/);
    });

    await step('three messages of one key: one let go, two held back at its parallelism', async () => {
      const messages = [1, 2, 3].map((i) => ({ body: `order ${i}`, content_type: 'text', flow_control_key: KEY }));
      const { status, json } = await api('POST', `/queues/${queueId}/messages/batch`, { messages });
      assert.equal(status, 200, JSON.stringify(json));
      await waitForText(tileOf(page).locator('.tile-value'), '2');
      await waitForText(tileOf(page).locator('.tile-sub'), 'messages held back by 1 key');
      const row = rowOf(page, KEY);
      await waitForText(cell(row, 'Waiting'), '2');
      await waitForText(cell(row, 'Released'), '1');
      await waitForText(cell(row, 'Held by'), /^At its parallelism/);
      await waitForText(cell(row, 'Limits'), '1 at once');
      assert.equal(await row.getByRole('button', { name: /^Remove the own limits/ }).count(), 0, 'no limits of its own to remove');
      const key = await flowKey(queueId, KEY);
      assert.equal(key.released, 1, JSON.stringify(key));
      assert.equal(key.waiting, 2, JSON.stringify(key));
      assert.equal(key.held_by, 'parallelism');
      assert.equal(key.parallelism, 1);
      assert.equal(key.overrides, null);
      const stats = await api('GET', `/queues/${queueId}/stats`);
      assert.equal(stats.json.result.flow_keys_waiting, 1, JSON.stringify(stats.json));
      assert.equal(stats.json.result.flow_waiting_count, 2, JSON.stringify(stats.json));

      // Only the keys holding messages back: it is one of them.
      await cardOf(page).getByLabel('Only keys holding messages back').check();
      await waitForText(cardOf(page).locator('.count'), '1–1 of 1 key');
      await waitForText(cell(row, 'Waiting'), '2');
      await shot(page, 'flow-held.png', { fullPage: true });
    });

    await step('peek shows the flow key of each message', async () => {
      const messages = page.getByRole('region', { name: 'Messages' });
      await messages.getByRole('button', { name: 'Peek', exact: true }).click();
      await waitForText(messages.getByRole('status').filter({ hasText: 'Showing' }), /Showing 3 messages/);
      const keys = messages.getByRole('list', { name: 'Peeked messages' }).locator('.message-key');
      assert.deepEqual(await keys.allTextContents(), [1, 2, 3].map(() => `Flow key ${KEY}`));
    });

    await step('pause the key from its row: paused here and on the server; resume it', async () => {
      const row = rowOf(page, KEY);
      await row.getByRole('button', { name: `Pause the flow key ${KEY}` }).click();
      await toastSays(page, `Flow key ${KEY} paused.`);
      await waitForText(cell(row, 'Held by'), 'Paused');
      const paused = await flowKey(queueId, KEY);
      assert.equal(paused.paused, true, JSON.stringify(paused));
      assert.equal(paused.held_by, 'paused');
      assert.equal(paused.waiting, 2);

      await row.getByRole('button', { name: `Resume the flow key ${KEY}` }).click();
      await toastSays(page, `Flow key ${KEY} resumed.`);
      await waitForText(cell(row, 'Held by'), /^At its parallelism/);
      const resumed = await flowKey(queueId, KEY);
      assert.equal(resumed.paused, false, JSON.stringify(resumed));
      assert.equal(resumed.held_by, 'parallelism');
    });

    await step('a parallelism of 3 of its own, set from the page: nothing waits any more', async () => {
      const row = rowOf(page, KEY);
      await row.getByRole('button', { name: `Set the limits of the flow key ${KEY}` }).click();
      const editor = editorOf(page);
      assert.equal(await editor.getByLabel('Flow key', { exact: true }).inputValue(), KEY);
      await waitForText(editor.getByRole('status'), `Key ${KEY}: 2 held back · at its parallelism.`);
      await editor.getByLabel('Parallelism', { exact: true }).fill('3');
      await editor.getByRole('button', { name: 'Save limits' }).click();
      await toastSays(page, `Limits of ${KEY} saved.`);
      await waitForText(editor.getByRole('status'), `Key ${KEY}: nothing held back · not held.`);
      // With only the keys holding messages back shown, it leaves the list; with all, it is there, its
      // own limit marked.
      await row.waitFor({ state: 'detached' });
      await waitForText(cardOf(page).locator('.empty'), /No key is holding messages back/);
      await cardOf(page).getByLabel('Only keys holding messages back').uncheck();
      await waitForText(cell(row, 'Waiting'), '0');
      await waitForText(cell(row, 'Released'), '3');
      await waitForText(cell(row, 'Held by'), 'Not held');
      await waitForText(cell(row, 'Limits'), /^3 at once\s*own$/);
      await waitForText(tileOf(page).locator('.tile-value'), '0');
      const key = await flowKey(queueId, KEY);
      assert.equal(key.waiting, 0, JSON.stringify(key));
      assert.equal(key.released, 3);
      assert.equal(key.held_by, null);
      assert.equal(key.parallelism, 3);
      assert.deepEqual(key.overrides, { parallelism: 3, rate: null, period: null });
      await shot(page, 'flow-own-limits.png', { fullPage: true });
    });

    await step('remove its own limits: the consumer\'s apply again', async () => {
      const row = rowOf(page, KEY);
      await row.getByRole('button', { name: `Remove the own limits of the flow key ${KEY}` }).click();
      await confirm(page, 'Remove limits');
      await toastSays(page, `Own limits of ${KEY} removed.`);
      await waitForText(cell(row, 'Limits'), '1 at once');
      await row.getByRole('button', { name: /^Remove the own limits/ }).waitFor({ state: 'detached' });
      const key = await flowKey(queueId, KEY);
      assert.equal(key.overrides, null, JSON.stringify(key));
      assert.equal(key.paused, false);
      assert.equal(key.parallelism, 1);
      assert.equal(key.waiting, 0, 'what was let go stays let go');
    });

    await step('a key without messages, by name: refused with a space, looked up, given a rate, cleared', async () => {
      const editor = editorOf(page);
      const name = editor.getByLabel('Flow key', { exact: true });
      // A key the server refuses (a space): its message, the field marked.
      await name.fill('idle tenant');
      await editor.getByRole('button', { name: 'Look up' }).click();
      await waitForText(editor.getByRole('alert'), /flow key/);
      assert.equal(await name.getAttribute('aria-invalid'), 'true');

      await name.fill(IDLE);
      await editor.getByRole('button', { name: 'Look up' }).click();
      await waitForText(editor.getByRole('status'), `Key ${IDLE}: nothing held back · not held.`);
      assert.equal(await editor.getByLabel('Parallelism', { exact: true }).inputValue(), '', 'no limits of its own');
      await editor.getByLabel('Rate', { exact: true }).fill('5');
      await editor.getByLabel('Period (seconds)', { exact: true }).fill('60');
      await editor.getByRole('button', { name: 'Save limits' }).click();
      await toastSays(page, `Limits of ${IDLE} saved.`);
      const key = await flowKey(queueId, IDLE);
      assert.deepEqual(key.overrides, { parallelism: null, rate: 5, period: 60 }, JSON.stringify(key));
      assert.equal(key.rate, 5);
      assert.equal(key.period, 60);
      assert.equal(key.parallelism, 1, 'the consumer\'s parallelism still applies');
      // Listed now, for its limits of its own.
      const row = rowOf(page, IDLE);
      await waitForText(cell(row, 'Limits'), /^1 at once · 5 per minute\s*own$/);
      await waitForText(cell(row, 'Waiting'), '0');

      await editor.getByRole('button', { name: 'Remove own limits…' }).click();
      await confirm(page, 'Remove limits');
      await toastSays(page, `Own limits of ${IDLE} removed.`);
      await row.waitFor({ state: 'detached' });
      const cleared = await flowKey(queueId, IDLE);
      assert.equal(cleared.overrides, null, JSON.stringify(cleared));
      assert.equal(cleared.rate, null);
    });

    await step('phone-sized screen: the queue page with its flow control card fits', async () => {
      await page.setViewportSize(PHONE);
      await rowOf(page, KEY).waitFor();
      const fits = await page.waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth, null, { timeout: 5000 })
        .then(() => true, () => false);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(fits, `the page is ${overflow}px wider than a phone screen`);
      await shot(page, 'flow-phone.png', { fullPage: true });
      await page.setViewportSize(DESKTOP);
    });

    // The refused consumer and the refused key are the failed requests the page made on purpose.
    assertNoConsoleErrors(log, [/Failed to load resource: the server responded with a status of 400/]);
  } finally {
    await context.close();
    if (queueId) await api('DELETE', `/queues/${queueId}`).catch(() => {});
  }
});

test('flow control: a key held back at its rate says when its next message goes', async () => {
  const queueName = `e2e-flow-rate-${RUN}`;
  const made = await api('POST', '/queues', { queue_name: queueName });
  assert.equal(made.status, 200, JSON.stringify(made.json));
  const queueId = made.json.result.queue_id;
  const { context, page, log } = await openPage();
  try {
    const consumer = await api('POST', `/queues/${queueId}/consumers`, { type: 'http_pull', settings: { flow_control: { rate: 1, period: 3600 } } });
    assert.equal(consumer.status, 200, JSON.stringify(consumer.json));
    await signInAt(page, BASE, TOKEN);
    await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
    await page.goto(`${BASE}/#/queues/${queueId}`);
    await page.getByRole('heading', { name: queueName, level: 1 }).waitFor();
    await waitForText(page.getByRole('region', { name: 'Consumers', exact: true }).locator('dl'), /Flow control\s*1 per hour per key/);
    const messages = [1, 2, 3].map((i) => ({ body: `tick ${i}`, content_type: 'text', flow_control_key: 'rated' }));
    assert.equal((await api('POST', `/queues/${queueId}/messages/batch`, { messages })).status, 200);
    // One let go now, one an hour on (a period's worth ahead at most), the third held back.
    const key = await waitFor('the key to hold one back at its rate', () => flowKey(queueId, 'rated'), (k) => k.held_by === 'rate');
    assert.equal(key.waiting, 1, JSON.stringify(key));
    assert.ok(key.next_release_at, JSON.stringify(key));
    const row = rowOf(page, 'rated');
    await waitForText(cell(row, 'Waiting'), '1');
    await waitForText(cell(row, 'Released'), '2');
    await waitForText(cell(row, 'Held by'), /^At its rate \(next at \d\d:\d\d:\d\d(\s?[AP]M)?\)$/);
    assert.equal(await cell(row, 'Held by').locator('time').getAttribute('datetime'), key.next_release_at);
    await waitForText(cell(row, 'Limits'), '1 per hour');
    await waitForText(tileOf(page).locator('.tile-value'), '1');
    await waitForText(tileOf(page).locator('.tile-sub'), 'message held back by 1 key');
    assertNoConsoleErrors(log);
  } finally {
    await context.close();
    await api('DELETE', `/queues/${queueId}`).catch(() => {});
  }
});
