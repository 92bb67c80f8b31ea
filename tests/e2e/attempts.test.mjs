// End-to-end test of a webhook consumer's delivery attempts, endpoint health and test send on the queue page
// (web/views/queue/attempts.js, health.js and test-send.js) and the queue list's badge, in headless
// Chromium: a webhook consumer pointed at a receiver this test runs, answering 500; a message published
// through the API, its failed attempts seen in the log (server_error, HTTP 500, the answer's body in the
// details) and the endpoint's health seen failing, on the queue page and in the queue list; the log filtered
// by outcome, time range and message id; a disabled endpoint as the page shows it (the server's answers
// rewritten in the browser: only hours of failing disable one); then the receiver answering 200, a test sent from the consumer
// card: its success shown there and in the log, marked as a test, and the endpoint healthy again. Each
// step is checked against the API as well.
//
// It needs what tests/e2e/dashboard.test.mjs needs (SKIPLOCK_URL, SKIPLOCK_TOKEN with every scope,
// SKIPLOCK_ACCOUNT; see the top of that file), and a server that runs the webhook dispatcher (as
// `skiplock serve` does by default; under `cargo test`, the node tests/api/dashboard.rs starts must be
// made with spawn_app_dispatching) and may reach 127.0.0.1, where the receiver listens
// (SKIPLOCK_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8, as the tests' nodes have). It creates a queue named e2e-attempts-<run> through the API, and deletes it at the end.
//
// As the other tests: every check waits for a visible condition (no fixed sleeps), and the page fails the
// test on any console error (it provokes none: the filters it gets wrong are caught before a request).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {
  PHONE, DESKTOP, RUN, TOKEN, address, tenantHooks, openPage, assertNoConsoleErrors, waitForText, waitFor,
  shot, steps, signInAt, api,
} from './support.mjs';

const BASE = address('SKIPLOCK_URL');
tenantHooks();

/** How long the first attempt may take to be made and logged (the dispatcher finds a new consumer first). */
const FIRST_ATTEMPT = 30000;
/** The consumer's retries: a message failing throughout is attempted this many times plus one. */
const MAX_RETRIES = 3;
const HOUR = 3600000;
/** A datetime-local field's value for a time (the page runs in UTC). */
const localField = (ms) => new Date(ms).toISOString().slice(0, 16);

// ---- helpers ------------------------------------------------------------------------------------


/** A page of the consumer's attempts as the API lists them (`query` its filters): {items, info}. */
async function attempts(queueId, consumerId, query = '') {
  const { status, json } = await api('GET', `/queues/${queueId}/consumers/${consumerId}/attempts${query}`);
  assert.equal(status, 200, JSON.stringify(json));
  return { items: json.result, info: json.result_info };
}

/** The consumer's endpoint health, as the API shows it. */
async function health(queueId) {
  const { status, json } = await api('GET', `/queues/${queueId}/consumers`);
  assert.equal(status, 200, JSON.stringify(json));
  return json.result[0].health;
}

/**
 * A webhook receiver on loopback: it answers `answer.status` (500 with the body "boom", or 200 with `{}`,
 * an answer that acks) and keeps what it got. close() ends it and its kept-alive connections.
 */
async function startReceiver() {
  const answer = { status: 500 };
  const received = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      const ok = answer.status < 300;
      res.writeHead(answer.status, { 'Content-Type': ok ? 'application/json' : 'text/plain' });
      res.end(ok ? '{}' : 'boom');
    });
  });
  await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
  return {
    answer,
    received,
    url: `http://127.0.0.1:${server.address().port}/hook`,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}

const consumerCard = (page) => page.getByRole('region', { name: 'Consumers', exact: true });
const healthOf = (page) => consumerCard(page).getByRole('group', { name: 'Endpoint health' });
const logCard = (page) => page.getByRole('region', { name: 'Delivery attempts', exact: true });
const rowsOf = (page) => logCard(page).getByRole('table', { name: 'Delivery attempts' }).locator('tr[data-attempt]');
/** The log's empty list, while it shows. */
const emptyOf = (page) => logCard(page).locator('.empty:not([hidden])');
const cell = (row, label) => row.locator(`td[data-label="${label}"]`);
const filterOf = (page) => logCard(page).getByRole('search', { name: 'Filter the delivery attempts' });
/**
 * Rewrites, in the page's browser, every answer of the API that carries consumer `consumerId`'s health
 * to show it disabled at `disabledAt` (as the server does after its disable_after_hours of failing,
 * which an end-to-end test cannot wait for). Returns the function that stops it.
 */
async function showDisabled(page, consumerId, disabledAt) {
  const disable = (value) => {
    if (Array.isArray(value)) value.forEach(disable);
    else if (value && typeof value === 'object') {
      if (value.consumer_id === consumerId && value.health) {
        Object.assign(value.health, { state: 'disabled', disabled_at: disabledAt, next_probe_at: null });
      }
      Object.values(value).forEach(disable);
    }
  };
  const matches = (url) => url.pathname.startsWith('/client/v4/') && /\/queues(\/|$|\?)/.test(url.pathname + url.search);
  const handler = async (route) => {
    if (route.request().method() !== 'GET') return route.fallback();
    const response = await route.fetch();
    const json = await response.json().catch(() => null);
    if (!json) return route.fulfill({ response });
    disable(json.result);
    return route.fulfill({ response, json });
  };
  await page.route(matches, handler);
  return () => page.unroute(matches, handler);
}

/** The outcomes of the rows shown, top to bottom. */
const shownOutcomes = (page) => rowsOf(page).evaluateAll((rows) => rows.map((r) => r.dataset.outcome));

// ---- tests --------------------------------------------------------------------------------------

test('webhook attempts: failures logged and filtered, the endpoint failing, a test send that succeeds', async (t) => {
  const receiver = await startReceiver();
  const { context, page, log } = await openPage();
  const queueName = `e2e-attempts-${RUN}`;
  let queueId = null;
  let consumerId = null;
  let messageId = null;
  const { step } = steps(t, { 'failed-attempts': page });
  try {
    await step('a queue with a webhook consumer, made through the API; its page shows no attempt yet', async () => {
      const made = await api('POST', '/queues', { queue_name: queueName });
      assert.equal(made.status, 200, JSON.stringify(made.json));
      queueId = made.json.result.queue_id;
      const settings = { batch_size: 1, max_wait_time_ms: 0, max_retries: MAX_RETRIES, retry_delay: 0 };
      const consumer = await api('POST', `/queues/${queueId}/consumers`, { type: 'webhook', url: receiver.url, settings });
      assert.equal(consumer.status, 200, JSON.stringify(consumer.json));
      consumerId = consumer.json.result.consumer_id;

      await signInAt(page, BASE, TOKEN);
      await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      await page.goto(`${BASE}/#/queues/${queueId}`);
      await page.getByRole('heading', { name: queueName, level: 1 }).waitFor();
      await waitForText(healthOf(page), /^Healthy\s*No delivery attempted yet\.$/);
      await waitForText(emptyOf(page), /No attempts yet/);
    });

    await step('a message published: its failed attempts are logged, server_error with HTTP 500', async () => {
      const sent = await api('POST', `/queues/${queueId}/messages`, { body: 'order 1', content_type: 'text' });
      assert.equal(sent.status, 200, JSON.stringify(sent.json));
      // Every attempt the message gets (its first and its retries) fails, then it is dropped.
      const all = await waitFor(
        `${MAX_RETRIES + 1} attempts in the API's log (the server must run the webhook dispatcher and may reach 127.0.0.1: see the top of this file)`,
        () => attempts(queueId, consumerId),
        ({ info }) => info.total_count >= MAX_RETRIES + 1,
        FIRST_ATTEMPT,
      );
      assert.equal(all.info.total_count, MAX_RETRIES + 1, JSON.stringify(all.info));
      for (const a of all.items) {
        assert.deepEqual([a.outcome, a.status, a.test, a.response, a.error], ['server_error', 500, false, 'boom', 'HTTP 500'], JSON.stringify(a));
      }
      [messageId] = all.items[0].message_ids;
      assert.match(messageId, /^[0-9a-f]{32}$/);

      // The page's first page follows: the attempts show as they are read, newest first.
      await waitForText(logCard(page).locator('.count'), `1–${MAX_RETRIES + 1} of ${MAX_RETRIES + 1} attempts`);
      assert.deepEqual(await shownOutcomes(page), all.items.map(() => 'server_error'));
      assert.deepEqual(await rowsOf(page).evaluateAll((rows) => rows.map((r) => r.dataset.attempt)), all.items.map((a) => a.attempt_id));
      const newest = rowsOf(page).first();
      await waitForText(cell(newest, 'Status'), '500');
      await waitForText(cell(newest, 'Outcome'), 'server_error');
      await waitForText(cell(newest, 'Batch'), '1');
      await waitForText(cell(newest, 'Error or answer'), 'HTTP 500');
      assert.match(await cell(newest, 'Latency').textContent(), /^\d[\d,]* ms$/);
      assert.equal(await cell(newest, 'Node').locator('code').getAttribute('title'), `Node ${all.items[0].node}`);
      assert.equal(await newest.getAttribute('data-test'), null, 'a delivery, not a test');

      // Its details: the answer's body, the batch's message, the attempt's id.
      await newest.getByRole('button', { name: `Details of attempt ${all.items[0].attempt_id}` }).click();
      const details = logCard(page).locator('tr.attempt-detail:not([hidden])');
      await waitForText(details.locator('pre'), 'boom');
      await waitForText(details.getByRole('list', { name: 'Message IDs' }), messageId);
      await shot(page, 'attempts-failing.png', { fullPage: true });
    });

    await step('the endpoint\'s health says failing, on the queue page and in the queue list', async () => {
      const h = await health(queueId);
      assert.deepEqual([h.state, h.consecutive_failures, h.circuit], ['failing', MAX_RETRIES + 1, 'closed'], JSON.stringify(h));
      assert.deepEqual([h.last_failure.outcome, h.last_failure.status], ['server_error', 500], JSON.stringify(h));
      // Read again with the page's refreshes.
      await waitForText(healthOf(page), new RegExp(`^Failing\\s*${MAX_RETRIES + 1} failed attempts in a row since`));
      await waitForText(healthOf(page), /Last failure .*: server_error, HTTP 500/);
      await waitForText(healthOf(page), /No success yet\./);
      assert.equal(await healthOf(page).getAttribute('data-health'), 'failing');

      await page.getByRole('link', { name: 'Queues', exact: true }).first().click();
      await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      const row = page.locator(`tr[data-queue="${queueName}"]`);
      const badge = row.locator('td[data-label="Queue"] .badge').filter({ hasText: 'Endpoint failing' });
      await waitForText(badge, 'Endpoint failing');
      assert.match(await badge.getAttribute('title'), new RegExp(`${MAX_RETRIES + 1} failed attempts in a row, the last server_error, HTTP 500`));
      await row.getByRole('link', { name: queueName, exact: true }).click();
      await page.getByRole('heading', { name: queueName, level: 1 }).waitFor();
      await waitForText(healthOf(page), /^Failing/);
    });

    await step('filter the log by outcome, time range and message id; clear the filters', async () => {
      const filter = filterOf(page);
      const count = logCard(page).locator('.count');
      // By outcome (the select filters at once): no success yet; every failure is a server_error.
      await filter.getByLabel('Outcome', { exact: true }).selectOption('success');
      await waitForText(emptyOf(page), /No attempt matches/);
      assert.equal(await rowsOf(page).count(), 0);
      await filter.getByLabel('Outcome', { exact: true }).selectOption('server_error');
      await waitForText(count, `1–${MAX_RETRIES + 1} of ${MAX_RETRIES + 1} attempts matching`);
      assert.deepEqual(await shownOutcomes(page), Array(MAX_RETRIES + 1).fill('server_error'));
      const cross = await attempts(queueId, consumerId, '?outcome=server_error');
      assert.equal(cross.info.total_count, MAX_RETRIES + 1);

      // A time range: none from an hour on; a range that ends before it starts is caught before a request.
      const from = filter.getByLabel('From', { exact: true });
      const to = filter.getByLabel('To', { exact: true });
      await from.fill(localField(Date.now() + HOUR));
      await filter.getByRole('button', { name: 'Filter', exact: true }).click();
      await waitForText(emptyOf(page), /No attempt matches/);
      await to.fill(localField(Date.now() - HOUR));
      await filter.getByRole('button', { name: 'Filter', exact: true }).click();
      await waitForText(logCard(page).getByRole('alert'), 'The end of the range (To) must be after its start (From).');
      assert.equal(await to.getAttribute('aria-invalid'), 'true');
      await from.fill(localField(Date.now() - HOUR));
      await to.fill(localField(Date.now() + HOUR));
      await filter.getByRole('button', { name: 'Filter', exact: true }).click();
      await waitForText(count, `1–${MAX_RETRIES + 1} of ${MAX_RETRIES + 1} attempts matching`);

      // By message id: a malformed one is caught in the page; another message's none; this one's (any case) all.
      const message = filter.getByLabel('Message ID', { exact: true });
      await message.fill('not-an-id');
      await filter.getByRole('button', { name: 'Filter', exact: true }).click();
      await waitForText(logCard(page).getByRole('alert'), 'A message ID is 32 hexadecimal characters.');
      assert.equal(await message.getAttribute('aria-invalid'), 'true');
      await message.fill('0'.repeat(32));
      await filter.getByRole('button', { name: 'Filter', exact: true }).click();
      await waitForText(emptyOf(page), /No attempt matches/);
      await message.fill(messageId.toUpperCase());
      await filter.getByRole('button', { name: 'Filter', exact: true }).click();
      await waitForText(count, `1–${MAX_RETRIES + 1} of ${MAX_RETRIES + 1} attempts matching`);
      const byMessage = await api('GET', `/queues/${queueId}/messages/${messageId}/attempts`);
      assert.equal(byMessage.status, 200, JSON.stringify(byMessage.json));
      assert.equal(byMessage.json.result_info.total_count, MAX_RETRIES + 1);

      await logCard(page).getByRole('button', { name: 'Clear filters' }).click();
      await waitForText(count, `1–${MAX_RETRIES + 1} of ${MAX_RETRIES + 1} attempts`);
      assert.equal(await filter.getByLabel('Outcome', { exact: true }).inputValue(), '');
      assert.equal(await message.inputValue(), '');
    });

    await step('a disabled endpoint (its answers rewritten in the browser): in the queue list and on the queue page, with when', async () => {
      const disabledAt = new Date(Date.now() - 60000).toISOString();
      const stop = await showDisabled(page, consumerId, disabledAt);
      try {
        await page.getByRole('link', { name: 'Queues', exact: true }).first().click();
        await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
        const row = page.locator(`tr[data-queue="${queueName}"]`);
        const badge = row.locator('td[data-label="Queue"] .badge').filter({ hasText: 'Consumer disabled' });
        await waitForText(badge, 'Consumer disabled');
        assert.equal(await badge.getAttribute('class'), 'badge badge-danger');
        assert.match(await badge.getAttribute('title'), /no deliveries until a test send succeeds/);
        assert.equal(await row.locator('.badge').filter({ hasText: /Endpoint failing|Circuit open/ }).count(), 0);

        await row.getByRole('link', { name: queueName, exact: true }).click();
        await page.getByRole('heading', { name: queueName, level: 1 }).waitFor();
        await waitForText(healthOf(page), new RegExp(`^Disabled\\s*${MAX_RETRIES + 1} failed attempts in a row since`));
        await waitForText(healthOf(page),
          /Disabled .* for failing too long\. It gets no deliveries, not even probes; a test send that succeeds enables it again\./);
        assert.equal(await healthOf(page).getAttribute('data-health'), 'disabled');
        assert.equal(await healthOf(page).locator('.health-head .badge').getAttribute('class'), 'badge badge-danger');
        assert.equal(await healthOf(page).locator('.health-facts time').first().getAttribute('datetime'), disabledAt);
        assert.doesNotMatch(await healthOf(page).textContent(), /Next probe/);
        await shot(page, 'attempts-disabled.png', { fullPage: true });
      } finally {
        await stop();
      }
      // The server's own answers again: failing, as it is.
      await waitForText(healthOf(page), /^Failing/);
    });

    await step('the receiver answers 200: a test sent from the card succeeds, is logged as a test, and the endpoint is healthy', async () => {
      receiver.answer.status = 200;
      const before = receiver.received.length;
      await consumerCard(page).getByRole('button', { name: 'Send test' }).click();
      const answer = consumerCard(page).getByRole('status', { name: 'Test send' });
      await waitForText(answer, /^Test send\s*success\s*HTTP 200 in \d[\d,]* ms/);
      await waitForText(answer.locator('pre'), '{}');
      assert.equal(await answer.getAttribute('data-outcome'), 'success');
      // The receiver got the sample, signed.
      const got = receiver.received.slice(before);
      assert.equal(got.length, 1, 'one request for the test');
      assert.ok(got[0].headers['webhook-signature'], JSON.stringify(got[0].headers));
      assert.match(got[0].body, /test send/);

      // The log shows it at the top, marked as a test; the API agrees.
      const newest = rowsOf(page).first();
      await waitForText(cell(newest, 'Outcome'), /^success\s*Test$/);
      assert.equal(await newest.getAttribute('data-test'), 'true');
      assert.equal(await newest.getAttribute('data-outcome'), 'success');
      await waitForText(cell(newest, 'Status'), '200');
      await waitForText(logCard(page).locator('.count'), `1–${MAX_RETRIES + 2} of ${MAX_RETRIES + 2} attempts`);
      const { items } = await attempts(queueId, consumerId, '?outcome=success');
      assert.deepEqual(items.map((a) => [a.test, a.status]), [[true, 200]]);
      assert.equal(await newest.getAttribute('data-attempt'), items[0].attempt_id);

      // A success ends the failures in a row.
      await waitForText(healthOf(page), /^Healthy\s*Last success /);
      await waitForText(healthOf(page), /Last failure .*: server_error, HTTP 500/);
      const h = await health(queueId);
      assert.deepEqual([h.state, h.consecutive_failures, h.circuit], ['healthy', 0, 'closed'], JSON.stringify(h));
      await shot(page, 'attempts-test-send.png', { fullPage: true });
    });

    await step('the queue list no longer marks it', async () => {
      await page.getByRole('link', { name: 'Queues', exact: true }).first().click();
      await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      const row = page.locator(`tr[data-queue="${queueName}"]`);
      await waitForText(row.locator('td[data-label="Consumer"]'), 'Webhook');
      assert.equal(await row.locator('.badge').filter({ hasText: /Endpoint failing|Circuit open/ }).count(), 0);
      await row.getByRole('link', { name: queueName, exact: true }).click();
      await page.getByRole('heading', { name: queueName, level: 1 }).waitFor();
    });

    await step('phone-sized screen: the queue page with its attempts fits', async () => {
      await page.setViewportSize(PHONE);
      await rowsOf(page).first().waitFor();
      const fits = await page.waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth, null, { timeout: 5000 })
        .then(() => true, () => false);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(fits, `the page is ${overflow}px wider than a phone screen`);
      await shot(page, 'attempts-phone.png', { fullPage: true });
      await page.setViewportSize(DESKTOP);
    });

    assertNoConsoleErrors(log);
  } finally {
    await context.close();
    if (queueId) await api('DELETE', `/queues/${queueId}`).catch(() => {});
    await receiver.close();
  }
});
