// Makes docs/dashboard.png, the picture in docs/dashboard.md: a queue page with a few minutes
// of live traffic in its charts. Not a test (the test is dashboard.test.mjs); run it by hand when
// the dashboard's look changes, against a server with an empty account of its own:
//
//   SKIPLOCK_URL=http://127.0.0.1:8787 SKIPLOCK_TOKEN=skl_... SKIPLOCK_ACCOUNT=<32 hex> \
//     node tests/e2e/docs-screenshot.mjs            # SKIPLOCK_DOCS_SECONDS=240 by default
//
// It creates the queues orders, orders-dlq, emails and webhooks-out in that account.

import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const BASE = process.env.SKIPLOCK_URL.replace(/\/+$/, '');
const TOKEN = process.env.SKIPLOCK_TOKEN;
const ACCOUNT = process.env.SKIPLOCK_ACCOUNT;
const SECONDS = Number(process.env.SKIPLOCK_DOCS_SECONDS || 240);
const OUT = process.env.SKIPLOCK_DOCS_OUT || path.join(here, '..', '..', 'docs', 'dashboard.png');

async function api(method, p, body) {
  const res = await fetch(`${BASE}/client/v4/accounts/${ACCOUNT}${p}`, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await res.json();
  if (!json.success) throw new Error(`${method} ${p}: ${JSON.stringify(json.errors)}`);
  return json.result;
}

async function queue(name) {
  const found = await api('GET', `/queues?name=${name}`);
  return found[0] || api('POST', '/queues', { queue_name: name });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const orders = await queue('orders');
await queue('emails');
await queue('webhooks-out');
if (!orders.consumers.length) {
  await api('POST', `/queues/${orders.queue_id}/consumers`, {
    type: 'http_pull', dead_letter_queue: 'orders-dlq', settings: { batch_size: 20, max_retries: 5 },
  });
}
const dlq = await queue('orders-dlq');
const emails = await queue('emails');
for (let i = 0; i < 3; i++) {
  await api('POST', `/queues/${dlq.queue_id}/messages`, { body: { order: 9000 + i, error: 'card declined' }, content_type: 'json' });
}
for (let i = 0; i < 14; i++) {
  await api('POST', `/queues/${emails.queue_id}/messages`, { body: `welcome mail #${i}`, content_type: 'text' });
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
await page.goto(`${BASE}/`);
await page.getByLabel('API token').fill(TOKEN);
await page.getByRole('button', { name: 'Sign in' }).click();
await page.getByRole('link', { name: 'orders', exact: true }).click();
await page.getByRole('heading', { name: 'orders', level: 1 }).waitFor();

// Traffic: publishing swells and ebbs; the consumer keeps up at first, falls behind, then catches up.
const start = Date.now();
let n = 0;
while (Date.now() - start < SECONDS * 1000) {
  const phase = (Date.now() - start) / (SECONDS * 1000);
  const publish = Math.max(0, Math.round(3 + 2.5 * Math.sin(phase * Math.PI * 2.2) + Math.random() * 1.5));
  if (publish) {
    await api('POST', `/queues/${orders.queue_id}/messages/batch`, {
      // Orders keyed by customer (nine of them), so the Ordering keys tile has a count to show.
      messages: Array.from({ length: publish }, () => ({
        body: { order: ++n, total_cents: 1200 + ((n * 37) % 9000) }, content_type: 'json', ordering_key: `customer-${n % 9}`,
      })),
    });
  }
  const capacity = phase < 0.25 ? 4 : phase < 0.55 ? 1 : phase < 0.85 ? 7 : 2;
  const pulled = await api('POST', `/queues/${orders.queue_id}/messages/pull`, { batch_size: capacity, visibility_timeout_ms: 30000 });
  if (pulled.messages.length) {
    await api('POST', `/queues/${orders.queue_id}/messages/ack`, { acks: pulled.messages.map((m) => ({ lease_id: m.lease_id })) });
  }
  await sleep(1000);
}
// Let the page poll the last bucket, then take the picture from the top of the page.
await page.waitForTimeout(4000);
await page.evaluate(() => window.scrollTo(0, 0));
await page.mouse.move(0, 0);
await page.screenshot({ path: OUT });
await browser.close();
console.log(`wrote ${OUT}`);
