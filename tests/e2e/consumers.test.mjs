// End-to-end test of a queue's several consumers on the queue page (web/views/queue/consumers.js,
// consumer.js, consumer-form.js, consumer-picker.js) in headless Chromium: an HTTP pull consumer added
// through the card's form, then a second beside it (after the line saying it receives only what is
// published from then on); both listed, each with its consumer_id and the note that a pull names it, which
// the API's pull then takes; the first deleted from its part of the card, the other left. Then two webhook
// consumers made through the API: the delivery attempts card asks which one's log it shows.
//
// It needs what tests/e2e/dashboard.test.mjs needs (SKIPLOCK_URL, SKIPLOCK_TOKEN with every scope,
// SKIPLOCK_ACCOUNT; see the top of that file). It creates queues named e2e-consumers-<run> and
// e2e-consumers-hooks-<run> through the API, and deletes them at the end.
//
// As the other tests: every check waits for a visible condition (no fixed sleeps), and the page fails the
// test on a console error it does not provoke on purpose.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  RUN, TOKEN, address, tenantHooks, openPage, assertNoConsoleErrors, waitForText, waitFor, shot, steps, signInAt,
  confirm, api,
} from './support.mjs';

const BASE = address('SKIPLOCK_URL');
tenantHooks();

// ---- helpers ------------------------------------------------------------------------------------

/** The queue's consumers, as the API lists them (oldest first). */
async function consumers(queueId) {
  const { status, json } = await api('GET', `/queues/${queueId}/consumers`);
  assert.equal(status, 200, JSON.stringify(json));
  return json.result;
}

const cardOf = (page) => page.getByRole('region', { name: 'Consumers', exact: true });
/** The parts of the card, one per consumer shown. */
const partsOf = (page) => cardOf(page).getByRole('article');
/** The part of consumer `id`. */
const partOf = (page, id) => cardOf(page).locator(`article[data-consumer-id="${id}"]`);
/** Waits for the toast saying `text`, then dismisses every toast (so that the next ones are seen). */
async function toastSays(page, text) {
  await waitForText(page.locator('.toast-text').filter({ hasText: text }), text);
  await page.evaluate(() => document.querySelectorAll('.toast-close').forEach((b) => b.click()));
}

/** Signs in and opens the page of queue `queueId`, named `name`. */
async function openQueue(page, queueId, name) {
  await signInAt(page, BASE, TOKEN);
  await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
  await page.goto(`${BASE}/#/queues/${queueId}`);
  await page.getByRole('heading', { name, level: 1 }).waitFor();
}

/** Adds an HTTP pull consumer through the card's form; resolves its id, as the API lists it last. */
async function addPull(page, queueId) {
  const card = cardOf(page);
  await card.getByRole('button', { name: 'Add a consumer' }).click();
  const form = card.getByRole('form', { name: 'Create a consumer' });
  assert.equal(await form.getByRole('radio', { name: /^HTTP pull/ }).isChecked(), true);
  await form.getByLabel('Batch size').fill('4');
  await form.getByRole('button', { name: 'Create consumer' }).click();
  await toastSays(page, 'Consumer created.');
  await form.waitFor({ state: 'detached' });
  const listed = await consumers(queueId);
  return listed[listed.length - 1].consumer_id;
}

// ---- tests --------------------------------------------------------------------------------------

test('several consumers: two added through the page, both listed, one deleted', async (t) => {
  const { context, page, log } = await openPage();
  const queueName = `e2e-consumers-${RUN}`;
  let queueId = null;
  let first = null;
  let second = null;
  const { step } = steps(t, { 'failed-consumers': page });
  try {
    await step('a queue made through the API: its page has no consumer, and offers to add one', async () => {
      const { status, json } = await api('POST', '/queues', { queue_name: queueName });
      assert.equal(status, 200, JSON.stringify(json));
      queueId = json.result.queue_id;
      await openQueue(page, queueId, queueName);
      await waitForText(cardOf(page).getByText(/^No consumer/), /Messages wait in the queue until one is attached/);
      assert.equal(await partsOf(page).count(), 0);
      // Nothing to add a consumer beside yet: the first receives the backlog.
      assert.equal(await cardOf(page).getByText(/^A consumer added beside others/).isVisible(), false);
    });

    await step('an HTTP pull consumer added: listed with its id, which a pull need not name while it is alone', async () => {
      first = await addPull(page, queueId);
      assert.equal((await consumers(queueId)).length, 1);
      const part = partOf(page, first);
      await waitForText(part.getByRole('heading', { level: 3 }), `HTTP pull …${first.slice(-8)}`);
      await waitForText(part.locator('dl'), new RegExp(`Type\\s*HTTP pull.*Batch size\\s*4.*Consumer ID\\s*${first}`, 's'));
      await waitForText(part.getByText(/^A pull gives its consumer's ID as consumer_id/), /while this is the only one, it need not/);
      await waitForText(cardOf(page).locator('.card-head .count'), '1 of 8');
      assert.equal(await partsOf(page).count(), 1);
    });

    await step('a second consumer added beside it: both listed, each pull naming its consumer_id', async () => {
      const card = cardOf(page);
      await waitForText(card.getByText(/^A consumer added beside others/), /receives the messages published from then on, not the backlog/);
      second = await addPull(page, queueId);
      assert.notEqual(second, first);
      assert.deepEqual((await consumers(queueId)).map((c) => c.consumer_id), [first, second]);
      await waitForText(card.locator('.card-head .count'), '2 of 8');
      assert.equal(await partsOf(page).count(), 2);
      // Oldest first, as the API lists them.
      assert.deepEqual(await partsOf(page).evaluateAll((els) => els.map((el) => el.dataset.consumerId)), [first, second]);
      for (const id of [first, second]) {
        await waitForText(partOf(page, id).getByText(/^This queue has 2 HTTP pull consumers/),
          'This queue has 2 HTTP pull consumers: a pull gives this one\'s consumer ID as consumer_id in its body.');
        await waitForText(partOf(page, id).locator('dl'), new RegExp(`Consumer ID\\s*${id}$`));
      }
      // Told apart by the end of their ids (their start is the minute they were made).
      const titles = await partsOf(page).getByRole('heading', { level: 3 }).allTextContents();
      assert.deepEqual(titles, [`HTTP pull …${first.slice(-8)}`, `HTTP pull …${second.slice(-8)}`]);
      // The id shown is the one a pull names; without it, the API asks for it.
      const unnamed = await api('POST', `/queues/${queueId}/messages/pull`, { batch_size: 1 });
      assert.equal(unnamed.status, 400, JSON.stringify(unnamed.json));
      assert.match(JSON.stringify(unnamed.json), /consumer_id/);
      const named = await api('POST', `/queues/${queueId}/messages/pull`, { consumer_id: second, batch_size: 1 });
      assert.equal(named.status, 200, JSON.stringify(named.json));
      await shot(page, 'consumers-two.png', { fullPage: true });
    });

    await step('the first deleted from its part of the card: the other is left', async () => {
      await partOf(page, first).getByRole('button', { name: 'Delete…' }).click();
      await confirm(page, 'Delete consumer');
      await toastSays(page, 'Consumer deleted.');
      await partOf(page, first).waitFor({ state: 'detached' });
      await waitFor('the API to list one consumer', () => consumers(queueId), (list) => list.length === 1);
      assert.deepEqual((await consumers(queueId)).map((c) => c.consumer_id), [second]);
      assert.equal(await partsOf(page).count(), 1);
      await waitForText(cardOf(page).locator('.card-head .count'), '1 of 8');
      await waitForText(partOf(page, second).getByText(/^A pull gives its consumer's ID as consumer_id/), /while this is the only one/);
      // The one left is still added beside: another would still get only what is published from then on.
      await cardOf(page).getByRole('button', { name: 'Add a consumer' }).waitFor();
      await waitForText(cardOf(page).getByText(/^A consumer added beside others/), /not the backlog/);
    });

    assertNoConsoleErrors(log);
  } finally {
    await context.close();
    if (queueId) await api('DELETE', `/queues/${queueId}`).catch(() => {});
  }
});

test('several webhook consumers: the delivery attempts card shows the log of the one picked', async () => {
  const queueName = `e2e-consumers-hooks-${RUN}`;
  const made = await api('POST', '/queues', { queue_name: queueName });
  assert.equal(made.status, 200, JSON.stringify(made.json));
  const queueId = made.json.result.queue_id;
  const { context, page, log } = await openPage();
  try {
    const ids = [];
    for (const path of ['a', 'b']) {
      const hook = await api('POST', `/queues/${queueId}/consumers`, { type: 'webhook', url: `https://example.com/e2e-${path}` });
      assert.equal(hook.status, 200, JSON.stringify(hook.json));
      ids.push(hook.json.result.consumer_id);
    }
    await openQueue(page, queueId, queueName);
    await waitForText(cardOf(page).locator('.card-head .count'), '2 of 8');
    for (const id of ids) await partOf(page, id).getByRole('group', { name: 'Endpoint health' }).waitFor();
    const attemptsCard = page.getByRole('region', { name: 'Delivery attempts', exact: true });
    const picker = attemptsCard.getByLabel('Consumer', { exact: true });
    // The first by default; the second's log when it is picked.
    assert.equal(await picker.inputValue(), ids[0]);
    assert.deepEqual(await picker.locator('option').evaluateAll((os) => os.map((o) => o.value)), ids);
    await waitForText(attemptsCard.locator('.empty'), /No attempts yet/);
    const read = page.waitForRequest((r) => r.url().includes(`/consumers/${ids[1]}/attempts`));
    await picker.selectOption(ids[1]);
    await read;
    assert.equal(await picker.inputValue(), ids[1]);
    await waitForText(attemptsCard.locator('.empty'), /No attempts yet/);
    await shot(page, 'consumers-webhooks.png', { fullPage: true });
    assertNoConsoleErrors(log);
  } finally {
    await context.close();
    await api('DELETE', `/queues/${queueId}`).catch(() => {});
  }
});
