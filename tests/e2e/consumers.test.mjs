// End-to-end test of a queue's several consumers on the queue page (web/views/queue/consumers.js,
// consumer.js, consumer-form.js, consumer-picker.js) in headless Chromium: an HTTP pull consumer added
// through the card's form, then a second beside it (after the line saying it receives only what is
// published from then on); both listed, each with its consumer_id and the note that a pull names it, which
// the API's pull then takes; the first deleted from its part of the card, the other left. Then two webhook
// consumers made through the API: the delivery attempts card asks which one's log it shows. Then each
// consumer's own figures (consumer-figures.js): two HTTP pull consumers, one of them pulling, acking and
// retrying, show backlogs, in-flight and delayed counts apart, as GET …/stats gives them; and a message
// dead-lettered by the second consumer shows in that consumer's dead-letter figure, and in the dead-letter
// queue's peek as from the source queue and that consumer (messages.js).
//
// It needs what tests/e2e/dashboard.test.mjs needs (SKIPLOCK_URL, SKIPLOCK_TOKEN with every scope,
// SKIPLOCK_ACCOUNT; see the top of that file). It creates queues named e2e-consumers-<run>,
// e2e-consumers-hooks-<run>, e2e-consumers-figures-<run>, e2e-consumers-dl-<run> and
// e2e-consumers-dl-<run>-dlq through the API, and deletes them at the end.
//
// As the other tests: every check waits for a visible condition (no fixed sleeps), and the page fails the
// test on a console error it does not provoke on purpose.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  ARTIFACTS, RUN, TOKEN, address, tenantHooks, openPage, assertNoConsoleErrors, waitForText, waitFor, shot, steps,
  signInAt, confirm, api,
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

/** One figure of consumer `id`'s part (data-figure: backlog, in-flight, delayed, oldest, dead-letter). */
const figureOf = (page, id, name) => partOf(page, id).locator(`.consumer-figures [data-figure="${name}"]`);

/** Makes an HTTP pull consumer through the API (`extra`: its dead_letter_queue, settings); resolves its id. */
async function addPullByApi(queueId, extra = {}) {
  const { status, json } = await api('POST', `/queues/${queueId}/consumers`, { type: 'http_pull', ...extra });
  assert.equal(status, 200, JSON.stringify(json));
  return json.result.consumer_id;
}

/** Publishes the texts to the queue, in one batch. */
async function publish(queueId, texts) {
  const { status, json } = await api('POST', `/queues/${queueId}/messages/batch`,
    { messages: texts.map((body) => ({ body, content_type: 'text' })) });
  assert.equal(status, 200, JSON.stringify(json));
}

/** Pulls up to `n` messages as consumer `consumerId`, leased for a minute; resolves their lease ids. */
async function pull(queueId, consumerId, n) {
  const { status, json } = await api('POST', `/queues/${queueId}/messages/pull`,
    { consumer_id: consumerId, batch_size: n, visibility_timeout_ms: 60000 });
  assert.equal(status, 200, JSON.stringify(json));
  return json.result.messages.map((m) => m.lease_id);
}

/** The queue's stats' `consumers`, by consumer_id. */
async function consumerStats(queueId) {
  const { status, json } = await api('GET', `/queues/${queueId}/stats`);
  assert.equal(status, 200, JSON.stringify(json));
  return Object.fromEntries(json.result.consumers.map((c) => [c.consumer_id, c]));
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

test('each consumer\'s own figures: backlogs, in-flight and delayed counts apart, as the stats give them', async (t) => {
  const { context, page, log } = await openPage();
  const queueName = `e2e-consumers-figures-${RUN}`;
  let queueId = null;
  let first = null;
  let second = null;
  const { step } = steps(t, { 'failed-consumer-figures': page });
  try {
    await step('two HTTP pull consumers, five messages: both show the same backlog, nothing in flight', async () => {
      const { status, json } = await api('POST', '/queues', { queue_name: queueName });
      assert.equal(status, 200, JSON.stringify(json));
      queueId = json.result.queue_id;
      first = await addPullByApi(queueId);
      second = await addPullByApi(queueId);
      // Published after both exist, so that each receives all five.
      await publish(queueId, ['one', 'two', 'three', 'four', 'five']);
      const stats = await waitFor('both consumers to count five', () => consumerStats(queueId),
        (c) => c[first] && c[second] && c[first].backlog_count === 5 && c[second].backlog_count === 5);
      await openQueue(page, queueId, queueName);
      for (const id of [first, second]) {
        await waitForText(figureOf(page, id, 'backlog').locator('.figure-value'), '5');
        // The bytes as the dashboard writes them elsewhere (bytes() in lib/dom.js): a few bytes here.
        await waitForText(figureOf(page, id, 'backlog').locator('.figure-sub'), `${stats[id].backlog_bytes} B`);
        await waitForText(figureOf(page, id, 'in-flight').locator('.figure-value'), '0');
        await waitForText(figureOf(page, id, 'delayed').locator('.figure-value'), '0');
        await waitForText(figureOf(page, id, 'oldest').locator('.figure-value'), /^\d+ s$|min/);
        await waitForText(figureOf(page, id, 'oldest').locator('.figure-sub'), /^since /);
        await waitForText(figureOf(page, id, 'dead-letter').locator('.figure-value'), '—');
        await waitForText(figureOf(page, id, 'dead-letter').locator('.figure-sub'), 'none');
      }
      // Read from the stats: the queue's own tiles are its first consumer's.
      await waitForText(page.getByRole('group', { name: 'Backlog' }).locator('.tile-value'), '5');
    });

    await step('the second pulls three, acks one and retries one with a delay: only its figures move', async () => {
      const leases = await pull(queueId, second, 3);
      assert.equal(leases.length, 3);
      const acked = await api('POST', `/queues/${queueId}/messages/ack`,
        { acks: [{ lease_id: leases[0] }], retries: [{ lease_id: leases[1], delay_seconds: 600 }] });
      assert.equal(acked.status, 200, JSON.stringify(acked.json));
      const stats = await waitFor('the second consumer\'s figures to move', () => consumerStats(queueId),
        (c) => c[second].backlog_count === 4 && c[second].in_flight_count === 1 && c[second].delayed_count === 1);
      assert.deepEqual([stats[first].backlog_count, stats[first].in_flight_count, stats[first].delayed_count], [5, 0, 0],
        JSON.stringify(stats[first]));
      // Without reloading: the page's next poll of the stats shows them.
      await waitForText(figureOf(page, second, 'backlog').locator('.figure-value'), '4');
      await waitForText(figureOf(page, second, 'backlog').locator('.figure-sub'), `${stats[second].backlog_bytes} B`);
      await waitForText(figureOf(page, second, 'in-flight').locator('.figure-value'), '1');
      await waitForText(figureOf(page, second, 'delayed').locator('.figure-value'), '1');
      await waitForText(figureOf(page, first, 'backlog').locator('.figure-value'), '5');
      await waitForText(figureOf(page, first, 'in-flight').locator('.figure-value'), '0');
      await waitForText(figureOf(page, first, 'delayed').locator('.figure-value'), '0');
      await partOf(page, second).screenshot({ path: path.join(ARTIFACTS, 'consumer-figures.png') });
      await shot(page, 'consumers-figures.png', { fullPage: true });
    });

    assertNoConsoleErrors(log);
  } finally {
    await context.close();
    if (queueId) await api('DELETE', `/queues/${queueId}`).catch(() => {});
  }
});

test('a message dead-lettered by the second consumer: its dead-letter figure counts it, the peek names it', async (t) => {
  const { context, page, log } = await openPage();
  const queueName = `e2e-consumers-dl-${RUN}`;
  const dlqName = `${queueName}-dlq`;
  let queueId = null;
  let first = null;
  let second = null;
  const { step } = steps(t, { 'failed-consumer-dead-letter': page });
  try {
    await step('the second consumer, with no retry, dead-letters a message: its figure counts it, the first\'s none', async () => {
      const { status, json } = await api('POST', '/queues', { queue_name: queueName });
      assert.equal(status, 200, JSON.stringify(json));
      queueId = json.result.queue_id;
      first = await addPullByApi(queueId);
      second = await addPullByApi(queueId, { dead_letter_queue: dlqName, settings: { max_retries: 0 } });
      await publish(queueId, ['given up by the second']);
      const leases = await pull(queueId, second, 1);
      assert.equal(leases.length, 1);
      const retried = await api('POST', `/queues/${queueId}/messages/ack`, { acks: [], retries: [{ lease_id: leases[0] }] });
      assert.equal(retried.status, 200, JSON.stringify(retried.json));
      await waitFor('the second consumer\'s dead-letter queue to hold the message', () => consumerStats(queueId),
        (c) => c[second].dead_letter_backlog_count === 1 && c[second].backlog_count === 0);
      await openQueue(page, queueId, queueName);
      const figure = figureOf(page, second, 'dead-letter');
      await waitForText(figure.locator('.figure-value'), '1');
      await waitForText(figure.locator('.figure-sub'), dlqName);
      assert.equal(await figure.evaluate((el) => el.classList.contains('figure-warning')), true);
      await waitForText(figureOf(page, second, 'backlog').locator('.figure-value'), '0');
      await waitForText(figureOf(page, second, 'backlog').locator('.figure-sub'), 'empty');
      await waitForText(figureOf(page, second, 'oldest').locator('.figure-value'), '—');
      // The first consumer still has its copy, and no dead-letter queue.
      await waitForText(figureOf(page, first, 'backlog').locator('.figure-value'), '1');
      await waitForText(figureOf(page, first, 'dead-letter').locator('.figure-sub'), 'none');
    });

    await step('its dead-letter queue, opened from the figure: the peek says from which queue and which consumer', async () => {
      await figureOf(page, second, 'dead-letter').getByRole('link', { name: dlqName, exact: true }).click();
      await page.getByRole('heading', { name: dlqName, level: 1 }).waitFor();
      const messages = page.getByRole('region', { name: 'Messages' });
      await messages.getByRole('button', { name: 'Peek', exact: true }).click();
      const item = messages.getByRole('list', { name: 'Peeked messages' }).getByRole('listitem')
        .filter({ has: page.locator('.message-body', { hasText: 'given up by the second' }) });
      const source = item.locator('.badge').filter({ hasText: /^from / });
      await waitForText(source, `from ${queueName} · consumer …${second.slice(-8)}`);
      assert.equal(await source.getAttribute('title'), `Consumer ID ${second}`);
      await shot(page, 'consumers-dead-letter-peek.png', { fullPage: true });
    });

    assertNoConsoleErrors(log);
  } finally {
    await context.close();
    if (queueId) await api('DELETE', `/queues/${queueId}`).catch(() => {});
    // Made with the second consumer, so there even when the test stopped before opening it.
    const dlq = await api('GET', `/queues?name=${dlqName}`).catch(() => ({ json: {} }));
    for (const q of dlq.json.result || []) await api('DELETE', `/queues/${q.queue_id}`).catch(() => {});
  }
});
