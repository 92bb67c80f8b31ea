// End-to-end test of the skiplock dashboard (web/) in headless Chromium, through playwright-core.
//
// It needs a running skiplock server and a token with every scope in that server's account. The page
// signs in with the token alone; the account id is for the test's own API calls and cross-checks:
//
//   bash tests/e2e/setup.sh          # once: Chromium (Debian package, as root) + npm ci
//   SKIPLOCK_URL=http://127.0.0.1:8787 \
//   SKIPLOCK_TOKEN=skl_... \
//   SKIPLOCK_ACCOUNT=0123456789abcdef0123456789abcdef \
//     node --test --test-concurrency=1 tests/e2e/
//
// (`skiplock account create --name e2e` prints the account id and such a token.) Optional:
// SKIPLOCK_E2E_ARTIFACTS (default tests/e2e/artifacts) for the screenshots, CHROMIUM (default
// /usr/bin/chromium). The test creates its own queues and tokens, named e2e-*, and removes them.
// The operator view has its own test, operator.test.mjs (it needs SKIPLOCK_ADMIN_URL and
// SKIPLOCK_OPERATOR_TOKEN as well); the helpers both use are in support.mjs.
//
// Every check waits for a visible condition (no fixed sleeps) and fails the test when it is not
// met in time. Every page also fails the test on any console error or uncaught exception, except
// the network errors a test provokes on purpose (a refused token, a missing scope, a dead server).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  ARTIFACTS, DESKTOP, PHONE, WAIT, RUN, TOKEN, ACCOUNT, address, tenantHooks, openPage, assertNoConsoleErrors,
  assertNotLeaked, waitForText, waitFor, shot, steps, signInAt, confirm,
} from './support.mjs';

const BASE = address('SKIPLOCK_URL');
tenantHooks();

// ---- helpers ------------------------------------------------------------------------------------

/** Calls the API directly (setup and cross-checks), with the all-scopes token unless told otherwise. */
async function api(method, apiPath, body, token = TOKEN) {
  const res = await fetch(`${BASE}/client/v4${apiPath}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await res.json();
  return { status: res.status, json };
}

/** Cleanup after a failed run: deletes this run's queues (and tokens) left behind. */
async function removeQueues(prefix) {
  const { json } = await api('GET', `/accounts/${ACCOUNT}/queues?per_page=1000`);
  for (const q of (json.result || []).filter((q) => q.queue_name.startsWith(prefix))) {
    await api('DELETE', `/accounts/${ACCOUNT}/queues/${q.queue_id}`);
  }
}
async function removeTokens(prefix) {
  const { json } = await api('GET', `/accounts/${ACCOUNT}/tokens`);
  for (const tok of (json.result || []).filter((tok) => tok.name.startsWith(prefix))) {
    await api('DELETE', `/accounts/${ACCOUNT}/tokens/${tok.id}`);
  }
}

/** Signs in with a token alone, as a user does. */
async function signIn(page, token = TOKEN) {
  await signInAt(page, BASE, token);
}

/** Types an account id in the optional field (opened if collapsed) and signs in again. */
async function signInWithAccount(page, account, token = TOKEN) {
  const field = page.getByLabel('Account ID');
  if (!(await field.isVisible())) await page.getByText('Account ID (optional)').click();
  await field.fill(account);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** The account's name, from the API: the top bar must show it with the account id. */
async function accountName() {
  const { status, json } = await api('GET', '/accounts');
  assert.equal(status, 200, JSON.stringify(json));
  assert.deepEqual(json.result.map((a) => a.id), [ACCOUNT], 'the token lists its one account');
  return json.result[0].name;
}

/** Fails unless the top bar shows this account (name and short id; the full id on hover). */
async function assertAccountShown(page) {
  const label = page.locator('#account-id');
  await waitForText(label, `${await accountName()} · ${ACCOUNT.slice(0, 8)}…`);
  assert.equal(await label.getAttribute('title'), `Account ID ${ACCOUNT}`);
  const stored = await page.evaluate(() => JSON.parse(sessionStorage.getItem('skiplock.session')).accountId);
  assert.equal(stored, ACCOUNT, 'the session uses the token\'s account');
}

const tile = (page, label) => page.getByRole('group', { name: label }).locator('.tile-value');

// ---- tests --------------------------------------------------------------------------------------

test('the dashboard runs under a strict content security policy and refuses to be framed', async () => {
  const { context, page, log } = await openPage();
  try {
    const response = await page.goto(`${BASE}/`);
    const headers = response.headers();
    const policy = headers['content-security-policy'] || '';
    assert.match(policy, /script-src 'self'(;|$)/, `scripts only from the server itself: ${policy}`);
    assert.match(policy, /frame-ancestors 'none'/, `no page may frame the dashboard: ${policy}`);
    assert.doesNotMatch(policy, /unsafe-inline|unsafe-eval/, `no inline script or eval: ${policy}`);
    assert.equal(headers['x-content-type-options'], 'nosniff');
    assert.equal(headers['referrer-policy'], 'no-referrer');
    await page.getByRole('heading', { name: 'Sign in to the dashboard' }).waitFor();
    // Script injected into the page (what a stored cross-site script would be) is refused, not run.
    const outcome = await page.evaluate(
      () =>
        new Promise((resolve) => {
          document.addEventListener('securitypolicyviolation', (e) =>
            resolve({ refused: e.effectiveDirective, ran: Boolean(window.injected) }),
          );
          const script = document.createElement('script');
          script.textContent = 'window.injected = true';
          document.head.append(script);
          // A script allowed to run would have run as it was appended; give up on the event by then.
          setTimeout(() => resolve({ refused: 'nothing', ran: Boolean(window.injected) }), 5000);
        }),
    );
    assert.match(outcome.refused, /^script-src/, 'the injected script was refused by the policy');
    assert.equal(outcome.ran, false, 'the injected script ran');
    // Another page framing the dashboard (clickjacking) gets nothing of it.
    // setContent returns once the page and its frame have loaded: Chromium puts its error page in the
    // frame in the dashboard's place.
    await page.goto('about:blank');
    await page.setContent(`<iframe src="${BASE}/" title="framed"></iframe>`);
    const frame = page.frames().find((f) => f !== page.mainFrame());
    assert.match(frame.url(), /^chrome-error:/, `the dashboard loaded inside another page's frame: ${frame.url()}`);
    const framed = page.frameLocator('iframe[title="framed"]');
    assert.equal(await framed.getByRole('heading', { name: 'Sign in to the dashboard' }).count(), 0);
    assertNoConsoleErrors(log, [/Content Security Policy/, /frame-ancestors/]);
  } finally {
    await context.close();
  }
});

test('a wrong token shows a clear message and nothing else; an account id typed is checked', async () => {
  const { context, page, log } = await openPage();
  try {
    const wrong = `skl_${'0'.repeat(32)}_thisIsNotARealTokenSecretValue0000000000`;
    await page.goto(`${BASE}/`);
    await page.getByRole('heading', { name: 'Sign in to the dashboard' }).waitFor();
    // The token is all a user needs: the account id is an option, folded away.
    assert.equal(await page.getByLabel('Account ID').isVisible(), false, 'the account id field starts folded');
    await signIn(page, wrong);
    const alert = page.getByRole('alert');
    await waitForText(alert, /This API token is not valid: invalid or revoked API token/);
    await shot(page, 'signin-wrong-token.png');
    // Nothing but the sign-in form: no navigation, no queue data, no stored session.
    assert.equal(await page.getByRole('navigation', { name: 'Main' }).isVisible(), false);
    assert.equal(await page.getByRole('heading', { name: 'Queues' }).count(), 0);
    assert.equal(await page.getByRole('table').count(), 0);
    assert.equal(await page.evaluate(() => sessionStorage.length + localStorage.length), 0);
    assert.equal(await page.evaluate(() => document.cookie), '');
    assertNotLeaked(log, wrong);
    assertNoConsoleErrors(log, [/Failed to load resource: the server responded with a status of 401/]);

    // An operator's account id that the valid token does not belong to: told, and still signed out.
    await signInWithAccount(page, '0123456789abcdef0123456789abcdef');
    await waitForText(page.getByRole('alert'), /does not belong to that account/);
    assert.equal(await page.getByRole('navigation', { name: 'Main' }).isVisible(), false);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);

    // A malformed account id is caught before anything is sent.
    await signInWithAccount(page, 'not-an-account');
    await waitForText(page.getByRole('alert'), /32 hexadecimal characters/);

    // The token's own account id, typed: signed in to that account.
    await signInWithAccount(page, ACCOUNT.toUpperCase());
    await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
    await assertAccountShown(page);
    assertNoConsoleErrors(log, [/Failed to load resource: the server responded with a status of 401/]);
  } finally {
    await context.close();
  }
});

test('sign in, create a queue, send, watch the backlog, peek, purge, manage tokens, sign out', async (t) => {
  const { context, page, log } = await openPage({ clipboard: true });
  const queueName = `e2e-${RUN}`;
  const dlqName = `e2e-${RUN}-dlq`;
  const tokenName = `e2e-token-${RUN}`;
  const { step, failed } = steps(t, { failed: page });
  try {
    await step('sign in', async () => {
      await signIn(page);
      await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).waitFor();
      await assertAccountShown(page);
      const stored = await page.evaluate(() => ({ session: sessionStorage.length, local: localStorage.length, cookie: document.cookie }));
      assert.deepEqual(stored, { session: 1, local: 0, cookie: '' });
      assert.ok(!page.url().includes(TOKEN.slice(-16)));
    });

    let queueUrl;
    await step('create a queue', async () => {
      await page.getByLabel('New queue name').fill(queueName);
      await page.getByRole('button', { name: 'Create queue' }).click();
      await page.getByRole('heading', { name: queueName, level: 1 }).waitFor();
      queueUrl = page.url();
      assert.match(queueUrl, /#\/queues\/[0-9a-f]{32}$/);
      await waitForText(tile(page, 'Backlog'), '0');
      await waitForText(page.getByText(/^Delivering$/), 'Delivering');
      await waitForText(page.locator('.toast-text'), `Queue ${queueName} created.`);
    });

    await step('send messages and see the backlog change', async () => {
      await page.getByLabel('Content type').selectOption('text');
      await page.getByLabel('Message body').fill('hello from the e2e test');
      await page.getByRole('button', { name: 'Send message' }).click();
      await waitForText(page.getByRole('status').filter({ hasText: 'Message sent' }), /The queue now holds 1 message\./);
      await waitForText(tile(page, 'Backlog'), '1');

      await page.getByLabel('Content type').selectOption('json');
      await page.getByLabel('Message body').fill('{"order": 42, "items": ["tea"]}');
      await page.getByRole('button', { name: 'Send message' }).click();
      await waitForText(page.getByRole('status').filter({ hasText: 'Message sent' }), /holds 2 messages/);
      await waitForText(tile(page, 'Backlog'), '2');

      // Invalid JSON is refused in the page, with a message, and nothing is sent.
      await page.getByLabel('Message body').fill('{not json');
      await page.getByRole('button', { name: 'Send message' }).click();
      await waitForText(page.getByRole('alert').filter({ hasText: 'not valid JSON' }), /The body is not valid JSON/);
      await waitForText(tile(page, 'Backlog'), '2');
    });

    await step('the queue list shows the backlog', async () => {
      await page.getByRole('link', { name: 'Queues', exact: true }).first().click();
      const row = page.locator('tr', { has: page.getByRole('link', { name: queueName, exact: true }) });
      await waitForText(row.locator('td[data-label="Backlog"] .value'), '2');
      await waitForText(row.locator('td[data-label="Oldest message"]'), /\d+ s|min/);
      await shot(page, 'queues-desktop.png');
      await row.getByRole('link', { name: queueName, exact: true }).click();
      await page.getByRole('heading', { name: queueName, level: 1 }).waitFor();
    });

    await step('the live chart shows throughput and backlog', async () => {
      // The server's series fills within seconds; the page polls by itself.
      await waitForText(page.locator('.totals'), /Last 10 minutes: 2 published, 0 acked\./, 30000);
      const published = page.locator('path.chart-line[data-series="published"]');
      await published.waitFor();
      assert.ok(Number(await published.getAttribute('data-points')) >= 50, 'a point per 10-second bucket');
      const peak = await page.evaluate(() => {
        const d = document.querySelector('path.chart-line[data-series="published"]').getAttribute('d');
        const ys = [...d.matchAll(/[ML][\d.]+,([\d.]+)/g)].map((m) => Number(m[1]));
        return Math.max(...ys) - Math.min(...ys);
      });
      assert.ok(peak > 10, 'the published line rises above zero');
      // Backlog samples accumulate in the page (one per poll): wait for a second one.
      await page.waitForFunction(() => Number(document.querySelector('path.chart-line[data-series="backlog"]')?.dataset.points) >= 2, null, { timeout: WAIT });
      await waitForText(page.locator('.chart-legend').nth(1), /Backlog\s*2/);
      await page.getByRole('heading', { name: 'Activity' }).scrollIntoViewIfNeeded();
      await shot(page, 'queue-desktop.png');
    });

    await step('peek shows the messages, oldest first', async () => {
      await page.getByRole('button', { name: 'Peek', exact: true }).click();
      const items = page.getByRole('list', { name: 'Peeked messages' }).getByRole('listitem');
      await waitForText(items.nth(0).locator('.message-body'), 'hello from the e2e test');
      const json = await waitForText(items.nth(1).locator('.message-body'), /"order": 42/);
      assert.deepEqual(JSON.parse(json), { order: 42, items: ['tea'] }, 'the JSON body, decoded and pretty-printed');
      assert.equal(await items.count(), 2);
      await waitForText(items.nth(1).locator('.badge'), 'json');
      await shot(page, 'queue-peek-desktop.png', { fullPage: true });
    });

    await step('delete a peeked message, then purge the queue', async () => {
      const items = page.getByRole('list', { name: 'Peeked messages' }).getByRole('listitem');
      await items.nth(0).getByRole('checkbox').check();
      await page.getByRole('button', { name: 'Delete 1 selected' }).click();
      await confirm(page, 'Delete messages');
      await waitForText(page.locator('.toast-text').filter({ hasText: 'Deleted' }), 'Deleted 1 message.');
      await waitForText(tile(page, 'Backlog'), '1');
      await page.waitForFunction(() => document.querySelectorAll('.messages .message').length === 1, null, { timeout: WAIT });
      await waitForText(items.nth(0).locator('.message-body'), /"order": 42/);

      await page.getByRole('button', { name: 'Purge…' }).click();
      await confirm(page, 'Purge messages');
      await waitForText(page.locator('.toast-text').filter({ hasText: 'were deleted' }), `All messages in ${queueName} were deleted.`);
      await waitForText(tile(page, 'Backlog'), '0');
      await waitForText(tile(page, 'Oldest message'), '—');
      await page.getByRole('button', { name: 'Peek', exact: true }).click();
      await waitForText(page.getByRole('status').filter({ hasText: 'No messages' }), 'No messages are waiting in this queue right now.');
      assert.equal(await items.count(), 0);
    });

    await step('pause and resume delivery; edit the settings', async () => {
      await page.getByRole('button', { name: 'Pause delivery' }).click();
      await waitForText(page.getByText('Delivery paused', { exact: true }), 'Delivery paused');
      await page.getByRole('button', { name: 'Resume delivery' }).click();
      await waitForText(page.getByText('Delivering', { exact: true }), 'Delivering');
      await page.getByLabel('Delivery delay (seconds)').fill('5');
      await page.getByLabel('Idempotency window (seconds)').fill('600');
      await page.getByRole('button', { name: 'Save settings' }).click();
      await waitForText(page.locator('.toast-text').filter({ hasText: 'Settings saved' }), 'Settings saved.');
      const { json } = await api('GET', `/accounts/${ACCOUNT}/queues/${queueUrl.split('/').pop()}`);
      assert.equal(json.result.settings.delivery_delay, 5);
      assert.equal(json.result.settings.delivery_paused, false);
      assert.equal(json.result.settings.idempotency_window, 600);
      // Out of range: the server's rule, shown in the page.
      await page.getByLabel('Message retention (seconds)').fill('10');
      await page.getByRole('button', { name: 'Save settings' }).click();
      await waitForText(page.getByRole('alert').filter({ hasText: 'Message retention' }), /whole number from 60 to 1,209,600/);
    });

    await step('a consumer: create a webhook, rotate its secret, edit, delete; dead-letter queue', async () => {
      const card = page.getByRole('region', { name: 'Consumers', exact: true });
      await card.getByRole('button', { name: 'Add a consumer' }).click();
      assert.equal(await card.getByLabel('Disable after (hours)').isVisible(), false, 'only for a webhook consumer');
      await card.getByRole('radio', { name: /^Webhook/ }).check();
      await card.getByLabel('Disable after (hours)').waitFor();
      await card.getByLabel('Webhook URL').fill('https://example.com/skiplock-e2e');
      await card.getByLabel('Dead-letter queue').fill(dlqName);
      await card.getByLabel('Batch size').fill('20');
      await card.getByRole('button', { name: 'Create consumer' }).click();
      const secret = card.getByRole('textbox', { name: 'Signing secret' });
      await secret.waitFor();
      const first = await secret.inputValue();
      assert.match(first, /^whsec_/);
      await waitForText(card.locator('dl'), /Webhook \(push\).*https:\/\/example\.com\/skiplock-e2e.*e2e-.*-dlq.*20/s);
      await waitForText(tile(page, 'Dead-letter queue'), '0');

      await card.getByRole('button', { name: 'Rotate secret…' }).click();
      await confirm(page, 'Rotate secret');
      await waitForText(card.getByText('New webhook signing secret'), 'New webhook signing secret');
      assert.notEqual(await secret.inputValue(), first);

      await card.getByRole('button', { name: 'Edit' }).click();
      await card.getByLabel('Max retries').fill('7');
      assert.equal(await card.getByLabel('Max retry delay (seconds)').isVisible(), false, 'only for an exponential backoff');
      await card.getByLabel('Retry backoff').selectOption('exponential');
      await card.getByLabel('Max retry delay (seconds)').fill('600');
      // An exponential backoff doubles the retry delay, which must then be 1 s or more.
      await card.getByLabel('Retry delay (seconds)', { exact: true }).fill('30');
      // Disable after: out of range is caught before anything is sent; 48 hours is saved.
      const disableAfter = card.getByLabel('Disable after (hours)');
      await disableAfter.fill('721');
      await card.getByRole('button', { name: 'Save consumer' }).click();
      await waitForText(card.getByRole('alert').filter({ hasText: 'Disable after' }), /whole number from 1 to 720/);
      assert.equal(await disableAfter.getAttribute('aria-invalid'), 'true');
      await disableAfter.fill('48');
      await card.getByRole('button', { name: 'Save consumer' }).click();
      await waitForText(card.locator('dl'), /Max retries\s*7/);
      await waitForText(card.locator('dl'), /30 s, doubled at each retry up to 10 min/);
      await waitForText(card.locator('dl'), /Disable after\s*48 hours of failing/);
      // A later edit of another field keeps the backoff (a save replaces every setting).
      await card.getByRole('button', { name: 'Edit' }).click();
      await card.getByLabel('Max retries').fill('8');
      await card.getByRole('button', { name: 'Save consumer' }).click();
      await waitForText(card.locator('dl'), /Max retries\s*8/);
      const consumers = await api('GET', `/accounts/${ACCOUNT}/queues/${queueUrl.split('/').pop()}/consumers`);
      const saved = consumers.json.result[0].settings;
      assert.deepEqual([saved.max_retries, saved.retry_delay, saved.retry_backoff, saved.retry_delay_max], [8, 30, 'exponential', 600]);
      assert.equal(saved.disable_after_hours, 48, JSON.stringify(saved));
      // Emptied: never disabled, and the setting is sent no more (a save replaces every setting).
      await card.getByRole('button', { name: 'Edit' }).click();
      assert.equal(await card.getByLabel('Disable after (hours)').inputValue(), '48');
      await card.getByLabel('Disable after (hours)').fill('');
      await card.getByRole('button', { name: 'Save consumer' }).click();
      await waitForText(card.locator('dl'), /Max retries\s*8/);
      assert.doesNotMatch(await card.locator('dl').textContent(), /Disable after/);
      const cleared = (await api('GET', `/accounts/${ACCOUNT}/queues/${queueUrl.split('/').pop()}/consumers`)).json.result[0].settings;
      assert.equal(cleared.disable_after_hours ?? null, null, JSON.stringify(cleared));
      assert.equal(cleared.retry_delay_max, 600, 'the other settings kept');

      // The dead-letter queue names where its messages come from.
      await page.getByRole('group', { name: 'Dead-letter queue' }).getByRole('link', { name: dlqName }).click();
      await page.getByRole('heading', { name: dlqName, level: 1 }).waitFor();
      await waitForText(page.getByRole('note'), new RegExp(`Dead-letter queue\\. Messages arrive here when a consumer of ${queueName} has used up their retries`));
      await page.getByRole('note').getByRole('link', { name: queueName }).click();
      await page.getByRole('heading', { name: queueName, level: 1 }).waitFor();

      await card.getByRole('button', { name: 'Delete…' }).click();
      await confirm(page, 'Delete consumer');
      await waitForText(card.getByText(/^No consumer/), /No consumer\. Messages wait in the queue/);
    });

    await step('phone-sized screen', async () => {
      await page.setViewportSize(PHONE);
      await page.getByRole('heading', { name: queueName, level: 1 }).waitFor();
      // The layout (and the chart, redrawn for the new width) settles within a frame or two.
      const fits = await page.waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth, null, { timeout: 5000 })
        .then(() => true, () => false);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(fits, `the page is ${overflow}px wider than a phone screen`);
      const svgWidth = await page.locator('svg.chart-svg').first().evaluate((el) => el.getBoundingClientRect().width);
      assert.ok(svgWidth > 250 && svgWidth <= PHONE.width, `the chart fits the phone (${svgWidth}px)`);
      // Toasts can be dismissed; then show the activity card (the charts) below the sticky top bar.
      await page.evaluate(() => document.querySelectorAll('.toast-close').forEach((b) => b.click()));
      await page.locator('.toast').first().waitFor({ state: 'detached' });
      await page.evaluate(() => {
        const card = document.getElementById('activity-title').closest('.card');
        window.scrollTo(0, card.getBoundingClientRect().top + window.scrollY - 70);
      });
      await shot(page, 'queue-phone.png');
      await shot(page, 'queue-phone-full.png', { fullPage: true });
      await page.getByRole('link', { name: 'Queues', exact: true }).first().click();
      await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
      await page.waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth, null, { timeout: 5000 });
      await shot(page, 'queues-phone.png');
      await page.setViewportSize(DESKTOP);
    });

    await step('create a token (shown once, copied), then revoke it', async () => {
      await page.getByRole('link', { name: 'Tokens' }).click();
      await page.getByRole('heading', { name: 'API tokens', level: 1 }).waitFor();
      await page.getByLabel('Token name').fill(tokenName);
      await page.getByRole('checkbox', { name: /Write queues/ }).check();
      await page.getByRole('button', { name: 'Create token' }).click();
      const box = page.getByRole('region', { name: `Token “${tokenName}” created` });
      await waitForText(box, /shown only once/);
      const created = await box.getByRole('textbox', { name: 'New API token' }).inputValue();
      assert.match(created, /^skl_/);
      await box.getByRole('button', { name: 'Copy' }).click();
      await waitForText(box.getByRole('status'), 'Copied to the clipboard');
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), created);
      const row = page.locator('tr', { hasText: tokenName });
      await waitForText(row.locator('td[data-label="Scopes"]'), /queues_read\s*queues_write/);
      await shot(page, 'tokens-desktop.png');
      assertNotLeaked(log, created);

      // The new token works against the API, with the scopes it was given.
      const verified = await api('GET', '/user/tokens/verify', undefined, created);
      assert.equal(verified.json.result.status, 'active');
      assert.equal((await api('GET', `/accounts/${ACCOUNT}/tokens`, undefined, created)).status, 403);

      await page.getByRole('button', { name: 'I have copied it' }).click();
      assert.equal(await box.count(), 0, 'the token is gone from the page once dismissed');
      await row.getByRole('button', { name: `Revoke ${tokenName}` }).click();
      await confirm(page, 'Revoke token');
      await waitForText(page.locator('.toast-text').filter({ hasText: 'revoked' }), `Token ${tokenName} revoked.`);
      await row.waitFor({ state: 'detached' });
      const { json } = await api('GET', `/accounts/${ACCOUNT}/tokens`);
      assert.ok(!json.result.some((tok) => tok.name === tokenName), 'the token is revoked on the server');
    });

    await step('a token created with an expiry shows when it expires; one allowed from an address shows it', async () => {
      const name = `${tokenName}-expiring`;
      await page.getByLabel('Token name').fill(name);
      await page.getByLabel('Expires', { exact: true }).selectOption({ label: 'In 30 days' });
      await page.getByRole('button', { name: 'Create token' }).click();
      const box = page.getByRole('region', { name: `Token “${name}” created` });
      await waitForText(box, /shown only once.*It expires/s);
      const { json } = await api('GET', `/accounts/${ACCOUNT}/tokens?per_page=1000`);
      const made = json.result.find((tok) => tok.name === name);
      assert.ok(made && made.expires_on, `the server holds the token's expiry: ${JSON.stringify(made)}`);
      const days = (Date.parse(made.expires_on) - Date.now()) / 86400000;
      assert.ok(days > 29.9 && days < 30.01, `it expires in 30 days (${days})`);
      assert.equal(made.status, 'active');

      const row = page.locator('tr', { hasText: name });
      const expires = row.locator('td[data-label="Expires"]');
      await waitForText(expires, /in (29 d 23 h|30 d)/);
      assert.equal(await expires.locator('time').getAttribute('datetime'), made.expires_on);
      await waitForText(row.locator('td[data-label="Status"]'), 'Active');
      await waitForText(row.locator('td[data-label="Allowed from"]'), 'Any address');
      // A token without an expiry says "Never": the session's own, when it has none.
      const own = (await api('GET', '/user/tokens/verify')).json.result;
      if (own.expires_on === null) {
        const mine = page.locator('tr', { has: page.getByText('This session', { exact: true }) });
        await waitForText(mine.locator('td[data-label="Expires"]'), 'Never');
      }
      await shot(page, 'tokens-expiry.png');
      await page.getByRole('button', { name: 'I have copied it' }).click();
      assert.equal((await api('DELETE', `/accounts/${ACCOUNT}/tokens/${made.id}`)).status, 200);

      // A token allowed from one address: the list shows it as the server normalized it (a /32).
      const pinned = `${tokenName}-pinned`;
      await page.getByLabel('Token name').fill(pinned);
      await page.getByLabel('Allowed from', { exact: true }).fill('127.0.0.1');
      await page.getByRole('button', { name: 'Create token' }).click();
      const pinnedBox = page.getByRole('region', { name: `Token “${pinned}” created` });
      await waitForText(pinnedBox, /shown only once.*used only from 127\.0\.0\.1\/32/s);
      const pinnedRow = page.locator('tr', { hasText: pinned });
      await waitForText(pinnedRow.locator('td[data-label="Allowed from"]'), '127.0.0.1/32');
      const listed = (await api('GET', `/accounts/${ACCOUNT}/tokens?per_page=1000`)).json.result.find((tok) => tok.name === pinned);
      assert.deepEqual(listed && listed.condition, { request_ip: { in: ['127.0.0.1/32'], not_in: [] } });
      assert.equal(await page.getByLabel('Allowed from', { exact: true }).inputValue(), '', 'the form is emptied');
      await page.getByRole('button', { name: 'I have copied it' }).click();
      assert.equal((await api('DELETE', `/accounts/${ACCOUNT}/tokens/${listed.id}`)).status, 200);
    });

    await step('delete the queues', async () => {
      for (const name of [queueName, dlqName]) {
        await page.getByRole('link', { name: 'Queues', exact: true }).first().click();
        await page.getByRole('link', { name, exact: true }).click();
        await page.getByRole('heading', { name, level: 1 }).waitFor();
        await page.getByRole('button', { name: 'Delete…' }).first().click();
        await confirm(page, 'Delete queue');
        await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
        await waitForText(page.locator('.toast-text').filter({ hasText: `Queue ${name} deleted.` }), `Queue ${name} deleted.`);
        await page.getByRole('link', { name, exact: true }).waitFor({ state: 'detached' });
      }
    });

    await step('sign out', async () => {
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { name: 'Sign in to the dashboard' }).waitFor();
      await waitForText(page.getByRole('status').filter({ hasText: 'signed out' }), 'You are signed out.');
      assert.equal(await page.evaluate(() => sessionStorage.length), 0);
      assert.equal(await page.getByRole('navigation', { name: 'Main' }).isVisible(), false);
      // A reload stays signed out.
      await page.reload();
      await page.getByRole('heading', { name: 'Sign in to the dashboard' }).waitFor();
    });

    assert.equal(failed(), null, `step "${failed()}" failed`);
    assertNotLeaked(log, TOKEN);
    assertNoConsoleErrors(log);
  } finally {
    await writeFile(path.join(ARTIFACTS, 'console-main.log'), `${log.messages.join('\n')}\n`);
    await context.close();
    await removeQueues(`e2e-${RUN}`);
    await removeTokens(`e2e-token-${RUN}`);
  }
});

test('the queue list shows a page at a time, with previous and next', async () => {
  const prefix = `e2e-${RUN}-pg`;
  const PER_PAGE = 50; // web/views/queues.js
  // More queues than one page holds, beside whatever the account has already.
  const made = [];
  for (let i = 0; i < PER_PAGE + 2; i += 1) {
    const name = `${prefix}-${String(i).padStart(2, '0')}`;
    const { status, json } = await api('POST', `/accounts/${ACCOUNT}/queues`, { queue_name: name });
    assert.equal(status, 200, JSON.stringify(json));
    made.push(name);
  }
  const { context, page, log } = await openPage();
  try {
    const stats = (n) => api('GET', `/accounts/${ACCOUNT}/stats/queues?page=${n}&per_page=${PER_PAGE}`);
    const total = (await stats(1)).json.result_info.total_count;
    const pages = Math.ceil(total / PER_PAGE);
    assert.ok(pages >= 2, `${total} queues make ${pages} pages`);
    const count = page.locator('.card-head .count');
    const pager = page.getByRole('navigation', { name: 'Queue pages' });
    const previous = pager.getByRole('button', { name: /Previous/ });
    const next = pager.getByRole('button', { name: /Next/ });
    const shown = () => page.locator('table[aria-label="Queues"] tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.queue));
    const fmt = new Intl.NumberFormat('en-US').format;
    const range = (n) => `${fmt((n - 1) * PER_PAGE + 1)}–${fmt(Math.min(n * PER_PAGE, total))} of ${fmt(total)} queues`;

    await signIn(page);
    await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
    await waitForText(count, range(1));
    await waitForText(pager.locator('.pager-text'), `Page 1 of ${pages}`);
    assert.equal(await previous.isDisabled(), true, 'no page before the first');
    const seen = await shown();
    assert.equal(seen.length, PER_PAGE);
    assert.deepEqual(seen, (await stats(1)).json.result.map((s) => s.queue_name), 'page 1 is the server\'s page 1');
    await shot(page, 'queues-paged.png', { fullPage: true });

    // Next, to the last page: each shows the server's page, and the address follows.
    for (let n = 2; n <= pages; n += 1) {
      await next.click();
      await waitForText(count, range(n));
      assert.match(page.url(), new RegExp(`#/queues\\?page=${n}$`));
      const names = await shown();
      assert.deepEqual(names, (await stats(n)).json.result.map((s) => s.queue_name), `page ${n}`);
      seen.push(...names);
    }
    assert.equal(await next.isDisabled(), true, 'no page after the last');
    assert.equal(seen.length, total);
    for (const name of made) assert.equal(seen.filter((n) => n === name).length, 1, `${name} shows on exactly one page`);

    // A queue opened from the last page, then Back: the same page again.
    const last = (await shown())[0];
    await page.getByRole('link', { name: last, exact: true }).click();
    await page.getByRole('heading', { name: last, level: 1 }).waitFor();
    await page.goBack();
    await waitForText(count, range(pages));
    assert.ok((await shown()).includes(last));

    // Previous, back to the first page.
    for (let n = pages - 1; n >= 1; n -= 1) {
      await previous.click();
      await waitForText(count, range(n));
    }
    assert.equal(await previous.isDisabled(), true);
    assert.match(page.url(), /#\/queues$/);
    assertNoConsoleErrors(log);
  } finally {
    await context.close();
    await removeQueues(prefix);
  }
});

test('a dead-letter queue shows its sources and redrives its messages back', async () => {
  const prefix = `e2e-${RUN}-rd`;
  const base = `/accounts/${ACCOUNT}/queues`;
  const src = await api('POST', base, { queue_name: `${prefix}-src` });
  assert.equal(src.status, 200, JSON.stringify(src.json));
  const srcId = src.json.result.queue_id;
  const consumer = { type: 'http_pull', dead_letter_queue: `${prefix}-dlq`, settings: { max_retries: 0 } };
  assert.equal((await api('POST', `${base}/${srcId}/consumers`, consumer)).status, 200);
  // Publishes the texts and spends their one delivery, so they move to the dead-letter queue.
  const deadLetter = async (texts) => {
    const messages = texts.map((body) => ({ body, content_type: 'text' }));
    assert.equal((await api('POST', `${base}/${srcId}/messages/batch`, { messages })).status, 200);
    const pulled = await api('POST', `${base}/${srcId}/messages/pull`, { batch_size: 100, visibility_timeout_ms: 60000 });
    const retries = pulled.json.result.messages.map((m) => ({ lease_id: m.lease_id }));
    assert.equal(retries.length, texts.length);
    assert.equal((await api('POST', `${base}/${srcId}/messages/ack`, { acks: [], retries })).status, 200);
  };
  const { context, page, log } = await openPage();
  try {
    await deadLetter(['one', 'two', 'three']);
    await signIn(page);
    await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
    await page.getByRole('link', { name: `${prefix}-dlq`, exact: true }).click();
    await page.getByRole('heading', { name: `${prefix}-dlq`, level: 1 }).waitFor();
    const card = page.getByRole('region', { name: 'Redrive' });
    const sources = card.getByRole('list', { name: 'Dead-letter sources' });
    await waitForText(sources, `${prefix}-src · 3 messages here`);

    // One peeked message, redriven by itself.
    const messages = page.getByRole('region', { name: 'Messages' });
    await messages.getByRole('button', { name: 'Peek' }).click();
    await waitForText(messages.locator('.message-meta'), new RegExp(`from ${prefix}-src`));
    await messages.getByLabel(/^Select message/).first().check();
    await messages.getByRole('button', { name: 'Redrive 1 selected' }).click();
    const progress = card.getByRole('status', { name: 'Redrive task' });
    await waitForText(progress, /Redrive completed: moved 1 of 1 message to their source queues\./);
    await waitForText(sources, `${prefix}-src · 2 messages here`);

    // Then the rest.
    await card.getByRole('button', { name: 'Redrive all' }).click();
    await confirm(page, 'Redrive');
    await waitForText(progress, /Redrive completed: moved 2 of 2 messages to their source queues\./);
    await waitForText(sources, `${prefix}-src · 0 messages here`);
    await messages.locator('.message').first().waitFor({ state: 'detached' });
    await shot(page, 'redrive.png', { fullPage: true });
    await card.screenshot({ path: path.join(ARTIFACTS, 'redrive-card.png') });

    // All three are back in their source, ready.
    await sources.getByRole('link', { name: `${prefix}-src` }).click();
    await page.getByRole('heading', { name: `${prefix}-src`, level: 1 }).waitFor();
    await waitForText(tile(page, 'Backlog'), '3');
    assertNoConsoleErrors(log);
  } finally {
    await context.close();
    await removeQueues(prefix);
  }
});

test('ordering keys: the queue counts its keys, peek shows each message\'s key, a message is sent with one', async () => {
  const prefix = `e2e-${RUN}-ok`;
  const base = `/accounts/${ACCOUNT}/queues`;
  const made = await api('POST', base, { queue_name: prefix });
  assert.equal(made.status, 200, JSON.stringify(made.json));
  const queueId = made.json.result.queue_id;
  const text = (body, ordering_key) => ({ body, content_type: 'text', ...(ordering_key ? { ordering_key } : {}) });
  // Two keys (one with two messages) and a message without a key.
  const batch = [text('first of customer-1', 'customer-1'), text('only of customer/2', 'customer/2'),
    text('second of customer-1', 'customer-1'), text('no key')];
  const published = await api('POST', `${base}/${queueId}/messages/batch`, { messages: batch });
  assert.equal(published.status, 200, JSON.stringify(published.json));
  const { context, page, log } = await openPage();
  try {
    await signIn(page);
    await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
    await page.goto(`${BASE}/#/queues/${queueId}`);
    await page.getByRole('heading', { name: prefix, level: 1 }).waitFor();
    await waitForText(tile(page, 'Backlog'), '4');
    await waitForText(tile(page, 'Ordering keys'), '2');

    // Peek shows each message's key; the message without one shows none.
    const messages = page.getByRole('region', { name: 'Messages' });
    await messages.getByRole('button', { name: 'Peek', exact: true }).click();
    const items = messages.getByRole('list', { name: 'Peeked messages' }).getByRole('listitem');
    await waitForText(messages.getByRole('status').filter({ hasText: 'Showing' }), /Showing 4 messages/);
    const item = (body) => items.filter({ has: page.locator('.message-body', { hasText: body }) });
    await waitForText(item('first of customer-1').locator('.message-key'), 'Ordering key customer-1');
    await waitForText(item('second of customer-1').locator('.message-key'), 'Ordering key customer-1');
    await waitForText(item('only of customer/2').locator('.message-key'), 'Ordering key customer/2');
    assert.equal(await item('no key').locator('.message-key').count(), 0, 'a message without a key shows none');
    const bodies = await items.locator('.message-body').allTextContents();
    assert.ok(bodies.indexOf('first of customer-1') < bodies.indexOf('second of customer-1'), `a key's messages in publish order: ${bodies}`);
    await shot(page, 'ordering-keys-peek.png', { fullPage: true });

    // A message sent from the page with a third key: the count follows, and peek shows its key.
    await messages.getByLabel('Content type').selectOption('text');
    await messages.getByLabel('Message body').fill('from the dashboard');
    await messages.getByLabel('Ordering key', { exact: true }).fill('customer-3');
    await messages.getByRole('button', { name: 'Send message' }).click();
    await waitForText(messages.getByRole('status').filter({ hasText: 'Message sent' }), /The queue now holds 5 messages\./);
    await waitForText(tile(page, 'Ordering keys'), '3');
    await messages.getByRole('button', { name: 'Peek', exact: true }).click();
    await waitForText(item('from the dashboard').locator('.message-key'), 'Ordering key customer-3');

    // A key the server refuses (a space): its message names the field, and nothing is stored.
    await messages.getByLabel('Ordering key', { exact: true }).fill('customer 4');
    await messages.getByRole('button', { name: 'Send message' }).click();
    await waitForText(messages.getByRole('alert').filter({ hasText: 'ordering_key' }), /message\.ordering_key/);
    const stats = await api('GET', `${base}/${queueId}/stats`);
    assert.equal(stats.json.result.backlog_count, 5, JSON.stringify(stats.json));
    assert.equal(stats.json.result.ordering_key_count, 3, JSON.stringify(stats.json));
    await waitForText(tile(page, 'Backlog'), '5');
    await waitForText(tile(page, 'Ordering keys'), '3');
    assertNoConsoleErrors(log, [/Failed to load resource: the server responded with a status of 400/]);
  } finally {
    await context.close();
    await removeQueues(prefix);
  }
});

test('a queue deleted elsewhere while its page is open: the page says it no longer exists', async () => {
  const prefix = `e2e-${RUN}-gone`;
  const base = `/accounts/${ACCOUNT}/queues`;
  const made = await api('POST', base, { queue_name: prefix });
  assert.equal(made.status, 200, JSON.stringify(made.json));
  const queueId = made.json.result.queue_id;
  const { context, page, log } = await openPage();
  try {
    await signIn(page);
    await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
    await page.goto(`${BASE}/#/queues/${queueId}`);
    await page.getByRole('heading', { name: prefix, level: 1 }).waitFor();
    await waitForText(tile(page, 'Backlog'), '0');

    // Deleted through the API, not the page: the page's next poll finds it gone and says so.
    assert.equal((await api('DELETE', `${base}/${queueId}`)).status, 200);
    await waitForText(page.getByRole('alert').filter({ hasText: 'no longer exists' }),
      'This queue no longer exists. It was deleted, perhaps from another window.');
    assertNoConsoleErrors(log, [/Failed to load resource: the server responded with a status of 404/]);
  } finally {
    await context.close();
    await removeQueues(prefix);
  }
});

test('a token without a scope gets the server message; a revoked token ends the session', async () => {
  const made = await api('POST', `/accounts/${ACCOUNT}/tokens`, { name: `e2e-readonly-${RUN}`, scopes: ['queues_read'] });
  assert.equal(made.status, 200, JSON.stringify(made.json));
  const readOnly = made.json.result;
  const { context, page, log } = await openPage();
  try {
    await signIn(page, readOnly.token);
    await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
    await page.getByLabel('New queue name').fill(`e2e-${RUN}-denied`);
    await page.getByRole('button', { name: 'Create queue' }).click();
    await waitForText(page.getByRole('alert'), /Not allowed: this token lacks the queues_write scope/);
    await page.getByRole('link', { name: 'Tokens' }).click();
    await waitForText(page.getByRole('alert'), /Not allowed: this token lacks the tokens_write scope/);
    await shot(page, 'missing-scope.png');

    // Revoked while signed in: the next request is refused and the page goes back to sign-in.
    assert.equal((await api('DELETE', `/accounts/${ACCOUNT}/tokens/${readOnly.id}`)).status, 200);
    await page.getByRole('link', { name: 'Queues', exact: true }).first().click();
    await waitForText(page.getByRole('alert'), /Your session ended: invalid or revoked API token/, 30000);
    await page.getByRole('heading', { name: 'Sign in to the dashboard' }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    assertNotLeaked(log, readOnly.token);
    assertNoConsoleErrors(log, [/Failed to load resource: the server responded with a status of (401|403)/]);
  } finally {
    await context.close();
    await api('DELETE', `/accounts/${ACCOUNT}/tokens/${readOnly.id}`);
  }
});

test('an expired token is refused at sign-in with when it expired, and listed as expired', async () => {
  const name = `e2e-expired-${RUN}`;
  // The server takes an expiry in the future only: a few seconds from now, then wait for it to pass.
  const expiresOn = new Date(Date.now() + 3000).toISOString();
  const made = await api('POST', `/accounts/${ACCOUNT}/tokens`, { name, scopes: ['queues_read'], expires_on: expiresOn });
  assert.equal(made.status, 200, JSON.stringify(made.json));
  const expiring = made.json.result;
  assert.equal(Date.parse(expiring.expires_on), Date.parse(expiresOn));
  const { context, page, log } = await openPage();
  try {
    const refused = await waitFor('the token to expire', () => api('GET', '/user/tokens/verify', undefined, expiring.token),
      (r) => r.status === 401);
    assert.equal(refused.json.errors[0].code, 10001, JSON.stringify(refused.json));
    await signIn(page, expiring.token);
    await waitForText(page.getByRole('alert'), /This API token cannot be used now: this API token expired at \d{4}-\d\d-\d\dT[\d:]+Z\./);
    assert.equal(await page.getByRole('navigation', { name: 'Main' }).isVisible(), false);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    await shot(page, 'signin-expired-token.png');

    // The account's token list marks it expired (until it is revoked).
    await signIn(page);
    await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
    await page.getByRole('link', { name: 'Tokens' }).click();
    const row = page.locator('tr', { hasText: name });
    await waitForText(row.locator('td[data-label="Status"]'), 'Expired');
    await waitForText(row.locator('td[data-label="Expires"]'), /ago$/);
    assertNotLeaked(log, expiring.token);
    assertNoConsoleErrors(log, [/Failed to load resource: the server responded with a status of 401/]);
  } finally {
    await context.close();
    await api('DELETE', `/accounts/${ACCOUNT}/tokens/${expiring.id}`);
  }
});

test('an unreachable server is reported, and the page recovers when it is back', async () => {
  const { context, page, log } = await openPage();
  try {
    await signIn(page);
    await page.getByRole('heading', { name: 'Queues', level: 1 }).waitFor();
    await page.locator('.live').filter({ hasText: 'Live' }).waitFor();
    await context.route('**/client/v4/**', (route) => route.abort('connectionrefused'));
    const banner = page.locator('#banner');
    await waitForText(banner, /Cannot reach the skiplock server\. Check that it is running.*Retrying every few seconds/, 20000);
    await waitForText(page.locator('.live'), 'Not updating');
    await shot(page, 'server-unreachable.png');
    // An action while the server is away says so, too.
    await page.getByLabel('New queue name').fill(`e2e-${RUN}-offline`);
    await page.getByRole('button', { name: 'Create queue' }).click();
    await waitForText(page.locator('.card').getByRole('alert'), /Cannot reach the skiplock server/);
    await context.unroute('**/client/v4/**');
    await banner.waitFor({ state: 'hidden', timeout: 20000 });
    await waitForText(page.locator('.live'), /^Live · updated/);
    assert.equal(await page.getByRole('heading', { name: 'Queues', level: 1 }).isVisible(), true);
    assertNoConsoleErrors(log, [/Failed to load resource: net::ERR_(CONNECTION_REFUSED|FAILED)/]);
  } finally {
    await context.close();
  }
});
