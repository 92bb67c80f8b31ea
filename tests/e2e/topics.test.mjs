// End-to-end test of the Topics page (web/views/topics.js: #/topics, from the top bar) and a topic's page
// (web/views/topic.js: #/topics/{id}) in headless Chromium: a topic created through the form (and a second
// of the same name refused by the server, as the server words it), two queues bound through the page (one
// with a filter on attributes, after a malformed pattern was refused by the page), routing keys tried (a
// dry run: nothing stored), a message published to both queues, a binding deleted, and the topic deleted.
// Each step is checked against the API, the messages in the queues among them.
//
// It needs what tests/e2e/dashboard.test.mjs needs (SKIPLOCK_URL, SKIPLOCK_TOKEN with every scope,
// SKIPLOCK_ACCOUNT; see the top of that file). It creates queues named e2e-tp-a-<run> and e2e-tp-b-<run>
// and a topic named e2e-topic-<run> through the API and the page, and deletes them at the end.
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

/** The account's topics named `name`, as the API lists them (every page). */
async function topicsNamed(name) {
  const found = [];
  for (let number = 1; ; number += 1) {
    const { status, json } = await api('GET', `/topics?page=${number}&per_page=100`);
    assert.equal(status, 200, JSON.stringify(json));
    found.push(...json.result.filter((t) => t.name === name));
    if (json.result.length === 0 || number >= json.result_info.total_pages) return found;
  }
}

/** One topic with its bindings, as the API answers it. */
async function topic(id) {
  const { status, json } = await api('GET', `/topics/${id}`);
  assert.equal(status, 200, JSON.stringify(json));
  return json.result;
}

/** Creates a queue through the API; resolves its id. */
async function createQueue(name) {
  const { status, json } = await api('POST', '/queues', { queue_name: name });
  assert.equal(status, 200, JSON.stringify(json));
  return json.result.queue_id;
}

/** The queue's backlog, as its statistics count it. */
async function backlog(queueId) {
  const { status, json } = await api('GET', `/queues/${queueId}/stats`);
  assert.equal(status, 200, JSON.stringify(json));
  return json.result.backlog_count;
}

/** A form of the topic's page, by its heading. */
const form = (page, name) => page.getByRole('form', { name, exact: true });
const bindingsTable = (page) => page.getByRole('table', { name: 'Bindings' });
const cell = (row, label) => row.locator(`td[data-label="${label}"]`);

// ---- tests --------------------------------------------------------------------------------------

test('topics: a topic created, queues bound, keys tried, a message published to both, a binding and the topic deleted', async (t) => {
  const { context, page, log } = await openPage();
  const names = { a: `e2e-tp-a-${RUN}`, b: `e2e-tp-b-${RUN}` };
  const ids = {};
  const topicName = `e2e-topic-${RUN}`;
  let topicId = null;
  const { step } = steps(t, { 'failed-topics': page });
  try {
    await step('create the queues through the API', async () => {
      for (const [key, name] of Object.entries(names)) ids[key] = await createQueue(name);
    });

    await step('the top bar leads to the topics page', async () => {
      await signInAt(page, BASE, TOKEN);
      await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Topics' }).click();
      await page.getByRole('heading', { name: 'Topics', level: 1 }).waitFor();
      assert.match(page.url(), /#\/topics$/);
      assert.equal(await page.getByRole('link', { name: 'Topics' }).getAttribute('aria-current'), 'page');
    });

    await step('create a topic through the form: its page opens', async () => {
      await page.getByLabel('New topic name').fill(topicName);
      await page.getByRole('button', { name: 'Create topic' }).click();
      await page.getByRole('heading', { name: topicName, level: 1 }).waitFor();
      const m = /#\/topics\/([0-9a-f]{32})$/.exec(page.url());
      assert.ok(m, page.url());
      topicId = m[1];
      const made = await topic(topicId);
      assert.equal(made.name, topicName);
      assert.equal(made.binding_count, 0);
      assert.deepEqual(made.bindings, []);
      await waitForText(page.getByRole('region', { name: 'Bindings' }).locator('.empty-title'), 'No bindings yet');
    });

    await step('the list shows it; a second topic of the same name is refused as the server words it', async () => {
      await page.getByRole('navigation', { name: 'Breadcrumb' }).getByRole('link', { name: 'Topics' }).click();
      await page.getByRole('heading', { name: 'Topics', level: 1 }).waitFor();
      const row = page.getByRole('table', { name: 'Topics' }).locator(`tr[data-topic="${topicId}"]`);
      await waitForText(cell(row, 'Topic'), topicName);
      await waitForText(cell(row, 'Bindings'), '0');
      assert.equal(await cell(row, 'Created').locator('time').getAttribute('datetime'), (await topic(topicId)).created_at);

      await page.getByLabel('New topic name').fill(topicName);
      await page.getByRole('button', { name: 'Create topic' }).click();
      const alert = page.getByRole('form', { name: 'Create a topic' }).getByRole('alert');
      await waitForText(alert, /\S/);
      assert.doesNotMatch(await alert.textContent(), /A topic name is/, 'the server\'s message, not the page\'s');
      assert.equal(await page.getByLabel('New topic name').getAttribute('aria-invalid'), 'true');
      assert.equal((await topicsNamed(topicName)).length, 1, 'one topic of that name');
      await row.getByRole('link', { name: topicName }).click();
      await page.getByRole('heading', { name: topicName, level: 1 }).waitFor();
    });

    await step('a malformed pattern is refused before anything is sent', async () => {
      const bind = form(page, 'Bind a queue');
      for (const name of Object.values(names)) {
        await bind.getByLabel('Queue', { exact: true }).locator('option', { hasText: name }).waitFor({ state: 'attached' });
      }
      await bind.getByLabel('Queue', { exact: true }).selectOption({ label: names.a });
      await bind.getByLabel('Pattern').fill('orders..created');
      await bind.getByRole('button', { name: 'Add binding' }).click();
      await waitForText(bind.getByRole('alert'), /A pattern is 1 to 255 characters/);
      assert.equal(await bind.getByLabel('Pattern').getAttribute('aria-invalid'), 'true');
      assert.equal((await topic(topicId)).binding_count, 0, 'nothing was bound');
    });

    await step('bind queue A by orders.*.created, and queue B by orders.# with a filter', async () => {
      const bind = form(page, 'Bind a queue');
      await bind.getByLabel('Pattern').fill('orders.*.created');
      await bind.getByRole('button', { name: 'Add binding' }).click();
      await waitForText(bind.getByRole('status'), `Bound ${names.a} by orders.*.created.`);
      const rowA = bindingsTable(page).locator('tr[data-binding]').filter({ hasText: names.a });
      await waitForText(cell(rowA, 'Pattern'), 'orders.*.created');
      await waitForText(cell(rowA, 'Filter'), 'Any attributes');
      assert.equal(await cell(rowA, 'Queue').getByRole('link', { name: names.a }).getAttribute('href'), `#/queues/${ids.a}`);

      await bind.getByLabel('Queue', { exact: true }).selectOption({ label: names.b });
      await bind.getByLabel('Pattern').fill('orders.#');
      await bind.getByLabel('Filter (optional)').fill('{"region": ["eu", "us"]}');
      await bind.getByRole('button', { name: 'Add binding' }).click();
      await waitForText(bind.getByRole('status'), `Bound ${names.b} by orders.#.`);
      const rowB = bindingsTable(page).locator('tr[data-binding]').filter({ hasText: names.b });
      await waitForText(cell(rowB, 'Pattern'), 'orders.#');
      await waitForText(cell(rowB, 'Filter'), 'region=eu|us');

      const made = await topic(topicId);
      assert.equal(made.binding_count, 2);
      const byQueue = Object.fromEntries(made.bindings.map((b) => [b.queue_id, b]));
      assert.equal(byQueue[ids.a].pattern, 'orders.*.created');
      assert.equal(byQueue[ids.a].filter, null);
      assert.equal(byQueue[ids.a].queue_name, names.a);
      assert.equal(byQueue[ids.b].pattern, 'orders.#');
      assert.deepEqual(byQueue[ids.b].filter, { region: ['eu', 'us'] });
      assert.equal(await rowB.getAttribute('data-binding'), byQueue[ids.b].id);
      await waitForText(page.getByRole('region', { name: 'Bindings' }).locator('.count'), '2 bindings');
    });

    await step('try routing keys: the queues each would reach, nothing stored', async () => {
      const tryForm = form(page, 'Try a routing key');
      await tryForm.getByLabel('Routing key').fill('orders.eu.created');
      await tryForm.getByRole('button', { name: 'Try' }).click();
      // Without attributes, B's filter (region) does not match.
      await waitForText(tryForm.getByRole('status'), `Would reach 1 queue: ${names.a}.`);

      await tryForm.getByLabel('Attributes (optional)').fill('{"region": "eu"}');
      await tryForm.getByRole('button', { name: 'Try' }).click();
      await waitForText(tryForm.getByRole('status'), `Would reach 2 queues: ${names.a}, ${names.b}.`);
      assert.equal(await tryForm.getByRole('status').getByRole('link', { name: names.b }).getAttribute('href'), `#/queues/${ids.b}`);

      await tryForm.getByLabel('Routing key').fill('billing.paid');
      await tryForm.getByRole('button', { name: 'Try' }).click();
      await waitForText(tryForm.getByRole('status'), 'Would reach no queue: no binding matches billing.paid.');

      await tryForm.getByLabel('Attributes (optional)').fill('["eu"]');
      await tryForm.getByRole('button', { name: 'Try' }).click();
      await waitForText(tryForm.getByRole('alert'), /The attributes must be a JSON object/);

      assert.equal(await backlog(ids.a), 0, 'a dry run stores nothing');
      assert.equal(await backlog(ids.b), 0, 'a dry run stores nothing');
    });

    await step('publish: reached both queues, and the message is in each', async () => {
      const publish = form(page, 'Publish');
      await publish.getByLabel('Routing key').fill('orders.eu.created');
      await publish.getByLabel('Attributes (optional)').fill('{"region": "eu"}');
      await publish.getByLabel('Content type').selectOption('json');
      await publish.getByLabel('Message body').fill('{"order": 42}');
      await publish.getByRole('button', { name: 'Publish' }).click();
      await waitForText(publish.getByRole('status'), `Reached 2 queues: ${names.a}, ${names.b}.`);

      for (const key of ['a', 'b']) {
        await waitFor(`one message in ${names[key]}`, () => backlog(ids[key]), (n) => n === 1);
        const { status, json } = await api('POST', `/queues/${ids[key]}/messages/peek`, { batch_size: 10 });
        assert.equal(status, 200, JSON.stringify(json));
        assert.equal(json.result.messages.length, 1, JSON.stringify(json.result));
        const [message] = json.result.messages;
        assert.deepEqual(JSON.parse(Buffer.from(message.body, 'base64').toString('utf8')), { order: 42 }, JSON.stringify(message));
      }
      await shot(page, 'topic-desktop.png', { fullPage: true });
    });

    await step('phone-sized screen: the topic page fits', async () => {
      await page.setViewportSize(PHONE);
      await page.getByRole('heading', { name: topicName, level: 1 }).waitFor();
      const fits = await page.waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth, null, { timeout: 5000 })
        .then(() => true, () => false);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(fits, `the page is ${overflow}px wider than a phone screen`);
      await shot(page, 'topic-phone.png', { fullPage: true });
      await page.setViewportSize(DESKTOP);
    });

    await step('delete the binding of B: gone from the page and the server; the key reaches A alone', async () => {
      const rowB = bindingsTable(page).locator('tr[data-binding]').filter({ hasText: names.b });
      await rowB.getByRole('button', { name: `Delete the binding orders.# to ${names.b}` }).click();
      await confirm(page, 'Delete binding');
      await waitForText(page.locator('.toast-text').filter({ hasText: 'Binding deleted' }), 'Binding deleted.');
      await rowB.waitFor({ state: 'detached' });
      const left = await topic(topicId);
      assert.equal(left.binding_count, 1);
      assert.deepEqual(left.bindings.map((b) => b.queue_id), [ids.a]);

      const tryForm = form(page, 'Try a routing key');
      await tryForm.getByLabel('Routing key').fill('orders.eu.created');
      await tryForm.getByLabel('Attributes (optional)').fill('{"region": "eu"}');
      await tryForm.getByRole('button', { name: 'Try' }).click();
      await waitForText(tryForm.getByRole('status'), `Would reach 1 queue: ${names.a}.`);
    });

    await step('delete the topic: back to the list, gone from the server; the messages stay', async () => {
      await page.locator('.page-head').getByRole('button', { name: 'Delete…' }).click();
      await confirm(page, 'Delete topic');
      await waitForText(page.locator('.toast-text').filter({ hasText: topicName }), `Topic ${topicName} deleted.`);
      await page.getByRole('heading', { name: 'Topics', level: 1 }).waitFor();
      assert.match(page.url(), /#\/topics$/);
      const { status } = await api('GET', `/topics/${topicId}`);
      assert.equal(status, 404, 'the topic is deleted on the server');
      await waitFor('no topic of that name', () => topicsNamed(topicName), (list) => list.length === 0);
      assert.equal(await page.getByRole('table', { name: 'Topics' }).locator(`tr[data-topic="${topicId}"]`).count(), 0);
      topicId = null;
      assert.equal(await backlog(ids.a), 1);
      assert.equal(await backlog(ids.b), 1);
    });

    // The second topic of a taken name is the one failed request the page made on purpose.
    assertNoConsoleErrors(log, [/Failed to load resource: the server responded with a status of 409/]);
  } finally {
    if (topicId) await api('DELETE', `/topics/${topicId}`).catch(() => {});
    for (const queueId of Object.values(ids)) await api('DELETE', `/queues/${queueId}`).catch(() => {});
    await context.close();
  }
});
