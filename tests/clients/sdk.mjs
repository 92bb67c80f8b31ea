#!/usr/bin/env node
// Drives skiplock with the official Cloudflare TypeScript SDK (npm `cloudflare`), unchanged.
//
// Every call goes through the SDK's own resource methods; after each change the server's state is
// read back over plain HTTP (fetch), so a step passes only when the server really did what the SDK
// asked. Nothing here works around the server: a step that fails says which call and what came back.
//
// Usage: node sdk.mjs --sdk 5|7 [--base-url URL] [--flow core|jurisdiction]
//   --sdk       which installed SDK to load: 5 (cloudflare5 = cloudflare@5.x) or 7 (cloudflare7 = 7.3.0)
//   --base-url  the server's API root, e.g. http://127.0.0.1:8787/client/v4 (default $SKIPLOCK_BASE_URL)
//   --flow      core (default): queues, consumers and messages end to end;
//               jurisdiction: create a queue with `jurisdiction: "eu"` (SDK 7 sends it), and its dead-letter
//               queue (made in eu; one in us refused)
// Environment: SKIPLOCK_TOKEN (queues_read + queues_write), SKIPLOCK_ACCOUNT (32 hex), and
// SKIPLOCK_BASE_URL when --base-url is not given.
// Last line: `sdk flow: N passed, 0 failed` (exit 0) or `sdk flow: N passed, 1 failed` (exit 1).

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { StepFailed, accountApi, expect, runSteps } from './steps.mjs';

const HEX32 = /^[0-9a-f]{32}$/;

const { values: args } = parseArgs({
  options: {
    sdk: { type: 'string' },
    'base-url': { type: 'string' },
    flow: { type: 'string', default: 'core' },
  },
});
const major = Number(args.sdk);
const baseUrl = (args['base-url'] ?? process.env.SKIPLOCK_BASE_URL ?? '').replace(/\/+$/, '');
const token = process.env.SKIPLOCK_TOKEN;
const account = process.env.SKIPLOCK_ACCOUNT;
if (![5, 7].includes(major) || !baseUrl || !token || !account || !['core', 'jurisdiction'].includes(args.flow)) {
  console.error('usage: node sdk.mjs --sdk 5|7 [--base-url URL] [--flow core|jurisdiction]');
  console.error('       with SKIPLOCK_TOKEN, SKIPLOCK_ACCOUNT (and SKIPLOCK_BASE_URL without --base-url)');
  process.exit(2);
}

const pkg = `cloudflare${major}`;
// Read from the file: the SDK's `exports` map does not expose its package.json.
const version = JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url))).version;
const { default: Cloudflare } = await import(pkg);
console.log(`cloudflare ${version} (${pkg}) on node ${process.version} against ${baseUrl}`);

// maxRetries 0: a 5xx or 429 must fail the step, not be retried away.
const client = new Cloudflare({ apiToken: token, baseURL: baseUrl, maxRetries: 0, timeout: 30_000 });

const api = accountApi(baseUrl, account, token);

async function serverQueue(id) {
  const r = await api('GET', `queues/${id}`);
  expect(r.status === 200 && r.body.success === true, `GET queues/${id} to answer 200`, r);
  return r.body.result;
}

async function serverBacklog(id) {
  const r = await api('GET', `queues/${id}/metrics`);
  expect(r.status === 200, `GET queues/${id}/metrics to answer 200`, r);
  return r.body.result.backlog_count;
}

/** An SDK call that must fail with this error class and status. */
async function expectApiError(promise, ErrorClass, status, what) {
  try {
    const got = await promise;
    throw new StepFailed(`expected ${what} (HTTP ${status}); the call succeeded with ${JSON.stringify(got)}`);
  } catch (e) {
    if (e instanceof StepFailed) throw e;
    expect(e instanceof ErrorClass && e.status === status, `${what}: ${ErrorClass.name} with HTTP ${status}`, {
      error: e.constructor?.name,
      status: e.status,
      message: e.message,
    });
    return e;
  }
}

/** Pull and peek give `text` bodies plain and `json` bodies as base64 of their bytes, as Cloudflare does. */
function decodePulled(body, contentType) {
  if (contentType === 'text') return body;
  return JSON.parse(Buffer.from(body ?? '', 'base64').toString('utf8'));
}

const sameValue = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// The two SDK generations name a consumer differently: 5.x takes (queueId, consumerId, params),
// 7.x takes (consumerId, { queue_id, ...params }).
const consumers = {
  get: (q, c) =>
    major === 5
      ? client.queues.consumers.get(q, c, { account_id: account })
      : client.queues.consumers.get(c, { account_id: account, queue_id: q }),
  update: (q, c, body) =>
    major === 5
      ? client.queues.consumers.update(q, c, { account_id: account, ...body })
      : client.queues.consumers.update(c, { account_id: account, queue_id: q, ...body }),
  delete: (q, c) =>
    major === 5
      ? client.queues.consumers.delete(q, c, { account_id: account })
      : client.queues.consumers.delete(c, { account_id: account, queue_id: q }),
};

const suffix = `${Date.now()}-${randomBytes(4).toString('hex')}`;
const queueName = `ts-sdk${major}-${suffix}`;
const hookQueueName = `ts-sdk${major}-hook-${suffix}`;
const state = { extraQueues: [] };
const q = () => state.queueId;

const singleText = ['text', `hello from the ts sdk ${randomBytes(4).toString('hex')}`];
const singleJson = ['json', { kind: 'single', n: 1, nested: { ok: true, list: [1, 2, 3] } }];
const bulk = [
  ['text', 'bulk text one'],
  ['json', [1, 'two', { three: 3.5 }]],
  ['text', 'bulk text two: ünïcødé ✓'],
  ['json', 'a json string'],
];
const published = [singleText, singleJson, ...bulk];

// ---- steps ----------------------------------------------------------------------------------------

async function tokens_verify() {
  const r = await client.user.tokens.verify();
  expect(r && r.id && r.status === 'active', "a token id and status 'active'", r);
}

async function create_queue() {
  const r = await client.queues.create({ account_id: account, queue_name: queueName });
  expect(HEX32.test(r?.queue_id ?? ''), 'queue_id of 32 lowercase hex', r);
  expect(r.queue_name === queueName, `queue_name ${queueName}`, r);
  expect(
    r.settings?.delivery_delay === 0 && r.settings?.delivery_paused === false && r.settings?.message_retention_period === 345600,
    'default settings (delivery_delay 0, delivery_paused false, message_retention_period 345600)',
    r.settings,
  );
  state.queueId = r.queue_id;
  const s = await serverQueue(r.queue_id);
  expect(s.queue_name === queueName, 'the server to hold the new queue', s);
}

async function list_queues() {
  const names = [];
  for await (const queue of client.queues.list({ account_id: account })) names.push(queue.queue_name);
  expect(names.includes(queueName), `the list to include ${queueName}`, names);
}

async function get_queue() {
  const r = await client.queues.get(q(), { account_id: account });
  expect(r.queue_id === q() && r.queue_name === queueName, `queue ${q()} named ${queueName}`, r);
  expect(r.consumers_total_count === 0 && Array.isArray(r.consumers), 'no consumers yet', r);
  expect(typeof r.created_on === 'string' && typeof r.modified_on === 'string', 'created_on and modified_on', r);
}

async function update_queue() {
  // PUT is a full overwrite: the delay and retention given here, delivery_paused back to its default.
  const r = await client.queues.update(q(), {
    account_id: account,
    queue_name: queueName,
    settings: { delivery_delay: 0, message_retention_period: 7200 },
  });
  expect(r.settings?.message_retention_period === 7200, 'message_retention_period 7200 echoed', r);
  const s = await serverQueue(q());
  expect(s.settings.message_retention_period === 7200 && s.settings.delivery_delay === 0, 'the server to keep retention 7200', s);
}

async function pause_and_resume() {
  const paused = await client.queues.edit(q(), { account_id: account, settings: { delivery_paused: true } });
  expect(paused.settings?.delivery_paused === true, 'delivery_paused true echoed', paused);
  expect(paused.settings?.message_retention_period === 7200, 'PATCH to keep the other settings', paused);
  expect((await serverQueue(q())).settings.delivery_paused === true, 'the server to hold delivery_paused true', null);
  const resumed = await client.queues.edit(q(), { account_id: account, settings: { delivery_paused: false } });
  expect(resumed.settings?.delivery_paused === false, 'delivery_paused false echoed', resumed);
  expect((await serverQueue(q())).settings.delivery_paused === false, 'the server to hold delivery_paused false', null);
}

async function worker_consumer_refused() {
  // Worker consumers need Cloudflare Workers; the server must say so with a 400, not accept it.
  const e = await expectApiError(
    client.queues.consumers.create(q(), { account_id: account, type: 'worker', script_name: 'some-worker' }),
    Cloudflare.BadRequestError,
    400,
    'a worker consumer to be refused',
  );
  expect(/worker/i.test(e.message), 'the refusal to name the worker type', e.message);
}

async function create_consumer() {
  const r = await client.queues.consumers.create(q(), {
    account_id: account,
    type: 'http_pull',
    settings: { batch_size: 10, max_retries: 3, retry_delay: 0, visibility_timeout_ms: 30000 },
  });
  expect(r?.type === 'http_pull' && HEX32.test(r.consumer_id ?? ''), 'an http_pull consumer with a 32-hex id', r);
  expect(r.queue_name === queueName && !r.dead_letter_queue, `queue_name ${queueName} and no dead_letter_queue`, r);
  const st = r.settings ?? {};
  expect(
    st.batch_size === 10 && st.max_retries === 3 && st.retry_delay === 0 && st.visibility_timeout_ms === 30000,
    'settings echoed (batch_size 10, max_retries 3, retry_delay 0, visibility_timeout_ms 30000)',
    r,
  );
  state.consumerId = r.consumer_id;
  const s = await serverQueue(q());
  expect(s.consumers_total_count === 1 && s.consumers[0]?.consumer_id === r.consumer_id, 'the queue to show the consumer', s);
}

async function list_and_get_consumer() {
  const ids = [];
  for await (const c of client.queues.consumers.list(q(), { account_id: account })) ids.push(c.consumer_id);
  expect(ids.length === 1 && ids[0] === state.consumerId, `the list to be [${state.consumerId}]`, ids);
  const r = await consumers.get(q(), state.consumerId);
  expect(r?.consumer_id === state.consumerId && r.type === 'http_pull', 'the consumer back from get', r);
}

async function update_consumer() {
  const r = await consumers.update(q(), state.consumerId, {
    type: 'http_pull',
    settings: { batch_size: 20, max_retries: 5, retry_delay: 0, visibility_timeout_ms: 30000 },
  });
  expect(r?.settings?.batch_size === 20 && r.settings.max_retries === 5, 'batch_size 20 and max_retries 5 echoed', r);
  const s = await api('GET', `queues/${q()}/consumers/${state.consumerId}`);
  expect(s.body.result?.settings?.batch_size === 20 && s.body.result.settings.max_retries === 5, 'the server to keep them', s.body);
}

async function webhook_consumer() {
  // skiplock's push consumer, created through the same SDK call (the SDK passes the body through).
  const hook = await client.queues.create({ account_id: account, queue_name: hookQueueName });
  state.hookQueueId = hook.queue_id;
  const r = await client.queues.consumers.create(hook.queue_id, {
    account_id: account,
    type: 'webhook',
    url: 'http://127.0.0.1:9/never-delivered',
    settings: { batch_size: 5, max_retries: 2, max_wait_time_ms: 1000 },
  });
  expect(r?.type === 'webhook' && HEX32.test(r.consumer_id ?? ''), 'a webhook consumer', r);
  expect(typeof r.signing_secret === 'string' && r.signing_secret.startsWith('whsec_'), 'a whsec_ signing_secret on create', r);
  expect(r.settings?.batch_size === 5 && r.settings?.max_wait_time_ms === 1000, 'settings echoed', r);
  await consumers.delete(hook.queue_id, r.consumer_id);
  const left = await api('GET', `queues/${hook.queue_id}/consumers`);
  expect(left.status === 200 && left.body.result.length === 0, 'no consumer left after delete', left.body);
  await client.queues.delete(hook.queue_id, { account_id: account });
  state.hookQueueId = undefined;
  expect((await api('GET', `queues/${hook.queue_id}`)).status === 404, 'the webhook queue gone', null);
}

async function push_text() {
  const [content_type, body] = singleText;
  const r = await client.queues.messages.push(q(), { account_id: account, body, content_type });
  if (major === 5) {
    // 5.x returns the whole envelope for push.
    expect(r?.success === true, 'the envelope with success true', r);
  } else {
    expect(r?.metadata?.metrics?.backlog_count === 1, 'metadata.metrics.backlog_count 1', r);
  }
  expect((await serverBacklog(q())) === 1, 'backlog 1 on the server', null);
}

async function push_json() {
  const [content_type, body] = singleJson;
  const r = await client.queues.messages.push(q(), { account_id: account, body, content_type });
  expect(major === 5 ? r?.success === true : r?.metadata?.metrics?.backlog_count === 2, 'a push answer (backlog 2)', r);
  expect((await serverBacklog(q())) === 2, 'backlog 2 on the server', null);
}

async function bulk_push() {
  const messages = bulk.map(([content_type, body]) => ({ body, content_type }));
  const r = await client.queues.messages.bulkPush(q(), { account_id: account, messages });
  expect(
    major === 5 ? r?.success === true : r?.metadata?.metrics?.backlog_count === published.length,
    `a bulk push answer (backlog ${published.length})`,
    r,
  );
  expect((await serverBacklog(q())) === published.length, `backlog ${published.length} on the server`, null);
}

async function metrics() {
  const r = await client.queues.getMetrics(q(), { account_id: account });
  expect(r?.backlog_count === published.length && r.backlog_bytes > 0, `backlog_count ${published.length}, bytes > 0`, r);
  const now = Date.now();
  expect(now - 600_000 < r.oldest_message_timestamp_ms && r.oldest_message_timestamp_ms <= now + 60_000, 'a recent oldest timestamp', r);
}

async function paused_pull_refused() {
  await client.queues.edit(q(), { account_id: account, settings: { delivery_paused: true } });
  try {
    await expectApiError(
      client.queues.messages.pull(q(), { account_id: account, batch_size: 10 }),
      Cloudflare.ConflictError,
      409,
      'a pull from a paused queue to be refused',
    );
  } finally {
    await client.queues.edit(q(), { account_id: account, settings: { delivery_paused: false } });
  }
  expect((await serverBacklog(q())) === published.length, 'the refused pull to lease nothing', null);
}

async function pull() {
  // A short lease: the message left un-acked must come back for the peek step.
  const r = await client.queues.messages.pull(q(), { account_id: account, batch_size: 10, visibility_timeout_ms: 3000 });
  const msgs = r?.messages ?? [];
  expect(msgs.length === published.length, `${published.length} messages`, r);
  expect(typeof r.message_backlog_count === 'number', 'message_backlog_count', r);
  expect(new Set(msgs.map((m) => m.id)).size === msgs.length && msgs.every((m) => m.id), 'distinct ids', msgs);
  expect(new Set(msgs.map((m) => m.lease_id)).size === msgs.length && msgs.every((m) => m.lease_id), 'distinct lease ids', msgs);
  const remaining = [...published];
  state.byId = new Map();
  for (const m of msgs) {
    expect(m.attempts === 1, `attempts 1 for ${m.id}`, m);
    const ct = m.metadata?.['CF-Content-Type'];
    expect(ct === 'text' || ct === 'json', `metadata CF-Content-Type text|json for ${m.id}`, m);
    let value;
    try {
      value = decodePulled(m.body, ct);
    } catch (e) {
      throw new StepFailed(`body of ${m.id} (${ct}) is not base64 of JSON bytes: ${JSON.stringify(m.body)} (${e.message})`);
    }
    const at = remaining.findIndex(([c, v]) => c === ct && sameValue(v, value));
    expect(at >= 0, `body of ${m.id} to be one of the published ${ct} bodies`, { body: m.body, decoded: value });
    remaining.splice(at, 1);
    state.byId.set(m.id, [ct, value]);
  }
  state.pulled = msgs;
}

async function ack_and_retry() {
  const msgs = state.pulled;
  const [toAck, toRetry, toLeave] = [msgs.slice(0, 4), msgs[4], msgs[5]];
  const r = await client.queues.messages.ack(q(), {
    account_id: account,
    acks: toAck.map((m) => ({ lease_id: m.lease_id })),
    retries: [{ lease_id: toRetry.lease_id, delay_seconds: 1 }],
  });
  expect(r?.ackCount === 4 && r.retryCount === 1, 'ackCount 4 and retryCount 1', r);
  expect(!r.warnings || Object.keys(r.warnings).length === 0, 'no warnings', r);
  expect((await serverBacklog(q())) === 2, 'backlog 2 on the server (one retried, one still leased)', null);
  state.remainingIds = new Set([toRetry.id, toLeave.id]);
}

async function redelivery() {
  // 5.x has no peek: pull again until both remaining messages come back (the retry after 1 s, the
  // un-acked one after its 3 s lease), then ack them so the queue is empty.
  const want = state.remainingIds;
  const got = new Map();
  const deadline = Date.now() + 15_000;
  while (got.size < want.size && Date.now() < deadline) {
    const r = await client.queues.messages.pull(q(), { account_id: account, batch_size: 10, visibility_timeout_ms: 30000 });
    for (const m of r.messages ?? []) {
      expect(want.has(m.id), `only the two remaining messages to come back`, m);
      expect(m.attempts === 2, `attempts 2 for the redelivered ${m.id}`, m);
      const [ct, value] = state.byId.get(m.id);
      expect(sameValue(decodePulled(m.body, ct), value), `the same body for ${m.id}`, m);
      got.set(m.id, m);
    }
    if (got.size < want.size) await new Promise((resolve) => setTimeout(resolve, 250));
  }
  expect(got.size === want.size, `both remaining messages redelivered within 15 s`, [...got.keys()]);
  const r = await client.queues.messages.ack(q(), { account_id: account, acks: [...got.values()].map((m) => ({ lease_id: m.lease_id })) });
  expect(r?.ackCount === 2, 'ackCount 2', r);
  expect((await serverBacklog(q())) === 0, 'backlog 0 on the server', null);
}

async function peek() {
  // Polled with a deadline: the retried message is visible after 1 s, the un-acked one after 3 s.
  const want = state.remainingIds;
  const deadline = Date.now() + 15_000;
  let r;
  let seen;
  for (;;) {
    r = await client.queues.messages.peek(q(), { account_id: account, batch_size: 10 });
    seen = new Set((r?.messages ?? []).map((m) => m.id));
    expect([...seen].every((id) => want.has(id)), `peek to list only the un-acked messages`, r);
    if (seen.size === want.size || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  expect(seen.size === want.size, 'peek to see both remaining messages', r);
  for (const m of r.messages) {
    const [ct, value] = state.byId.get(m.id);
    expect(m.ref && m.attempts >= 1, `a ref and attempts for ${m.id}`, m);
    expect(sameValue(decodePulled(m.body, ct), value), `peek body of ${m.id} encoded as in pull`, m);
  }
  state.peeked = r.messages;
  const again = await client.queues.messages.peek(q(), { account_id: account, batch_size: 10 });
  expect((again?.messages ?? []).length === want.size, 'a second peek to see the same messages (no lease)', again);
}

async function purge_messages() {
  const victim = state.peeked[0];
  const r = await client.queues.messages.purge(q(), { account_id: account, refs: [{ ref: victim.ref }] });
  expect(r && !(r.errors ?? []).length && !Object.keys(r.warnings ?? {}).length, 'no errors or warnings', r);
  expect((await serverBacklog(q())) === 1, 'backlog 1 on the server after purging one ref', null);
}

async function purge_queue() {
  await client.queues.messages.bulkPush(q(), {
    account_id: account,
    messages: [
      { body: 'to purge', content_type: 'text' },
      { body: 'to purge', content_type: 'text' },
    ],
  });
  const before = await serverBacklog(q());
  expect(before >= 2, 'a backlog to purge', before);
  const r = await client.queues.purge.start(q(), { account_id: account, delete_messages_permanently: true });
  expect(r?.queue_id === q() && r.queue_name === queueName, 'the queue back from purge', r);
  const status = await client.queues.purge.status(q(), { account_id: account });
  expect(status?.completed === 'true' && status.started_at, "completed 'true' and started_at", status);
  expect((await serverBacklog(q())) === 0, 'backlog 0 on the server after purge', null);
  const p = await client.queues.messages.pull(q(), { account_id: account, batch_size: 10 });
  expect((p?.messages ?? []).length === 0, 'pull to find nothing after purge', p);
}

async function several_consumers() {
  // A second consumer through the SDK unchanged: listed after the first, receiving what is published from
  // then on, pulled by naming it (consumer_id goes in the body as any other field), deleted on its own.
  const second = await client.queues.consumers.create(q(), { account_id: account, type: 'http_pull' });
  const ids = [];
  for await (const c of client.queues.consumers.list(q(), { account_id: account })) ids.push(c.consumer_id);
  expect(ids.length === 2 && ids[0] === state.consumerId && ids[1] === second.consumer_id, 'both consumers listed, oldest first', ids);
  await client.queues.messages.push(q(), { account_id: account, body: 'for both', content_type: 'text' });
  for (const consumer of ids) {
    const p = await client.queues.messages.pull(q(), { account_id: account, batch_size: 10, consumer_id: consumer });
    expect((p?.messages ?? []).length === 1, `consumer ${consumer} to receive the message`, p);
  }
  await consumers.delete(q(), second.consumer_id);
  const left = await api('GET', `queues/${q()}/consumers`);
  expect(left.status === 200 && left.body.result.length === 1 && left.body.result[0].consumer_id === state.consumerId,
    'the first consumer left', left.body);
}

async function delete_consumer() {
  const r = await consumers.delete(q(), state.consumerId);
  expect(r?.success === true || r !== undefined, 'a delete answer', r);
  const left = await api('GET', `queues/${q()}/consumers`);
  expect(left.status === 200 && left.body.result.length === 0, 'no consumer left on the server', left.body);
  await expectApiError(consumers.get(q(), state.consumerId), Cloudflare.NotFoundError, 404, 'get of the deleted consumer');
}

async function delete_queue() {
  const r = await client.queues.delete(q(), { account_id: account });
  expect(r?.success === true, 'the delete envelope with success true', r);
  state.deleted = true;
  expect((await api('GET', `queues/${q()}`)).status === 404, 'the server to answer 404 for the queue', null);
  await expectApiError(client.queues.get(q(), { account_id: account }), Cloudflare.NotFoundError, 404, 'get after delete');
}

async function create_queue_in_jurisdiction() {
  // 7.x sends `jurisdiction`; Cloudflare fixes it at creation and shows it on the queue.
  if (major === 5) throw new StepFailed('cloudflare 5.x has no jurisdiction parameter: run this flow with --sdk 7');
  const r = await client.queues.create({ account_id: account, queue_name: queueName, jurisdiction: 'eu' });
  state.queueId = r?.queue_id;
  expect(r?.jurisdiction === 'eu', "jurisdiction 'eu' echoed", r);
  expect((await serverQueue(r.queue_id)).jurisdiction === 'eu', "the server to keep jurisdiction 'eu'", null);
  const got = await client.queues.get(r.queue_id, { account_id: account });
  expect(got?.jurisdiction === 'eu', "get to show jurisdiction 'eu'", got);
}

async function dead_letter_queue_made_in_the_queues_jurisdiction() {
  // Cloudflare creates a missing dead-letter queue in its source queue's jurisdiction.
  const dlqName = `${queueName}-dlq`;
  const c = await client.queues.consumers.create(q(), { account_id: account, type: 'http_pull', dead_letter_queue: dlqName });
  expect(c?.dead_letter_queue === dlqName, `dead_letter_queue ${dlqName} echoed`, c);
  state.consumerId = c.consumer_id;
  const list = await api('GET', `queues?name=${dlqName}`);
  const dlq = list.body.result?.[0];
  if (dlq) state.extraQueues.push(dlq.queue_id);
  expect(dlq?.jurisdiction === 'eu', `the dead-letter queue ${dlqName} made in jurisdiction 'eu'`, list.body);
}

async function dead_letter_queue_elsewhere_refused() {
  // A dead-letter queue in another jurisdiction is a 400 that names both.
  const us = await client.queues.create({ account_id: account, queue_name: `${queueName}-us`, jurisdiction: 'us' });
  state.extraQueues.push(us.queue_id);
  const e = await expectApiError(
    consumers.update(q(), state.consumerId, { type: 'http_pull', dead_letter_queue: us.queue_name }),
    Cloudflare.BadRequestError,
    400,
    'a dead-letter queue in jurisdiction us for a queue in eu to be refused',
  );
  expect(/jurisdiction us/.test(e.message) && /jurisdiction eu/.test(e.message), 'the refusal to name both jurisdictions', e.message);
  const kept = await consumers.get(q(), state.consumerId);
  expect(kept?.dead_letter_queue === `${queueName}-dlq`, 'the consumer to keep its dead-letter queue', kept);
}

async function delete_jurisdiction_queues() {
  await client.queues.delete(q(), { account_id: account });
  state.deleted = true;
  for (const id of state.extraQueues.splice(0)) await client.queues.delete(id, { account_id: account });
}

const flows = {
  // 5.x has no getMetrics, peek or message purge (the server's backlog is read over HTTP instead);
  // it checks redelivery by pulling again.
  core: [
    tokens_verify, create_queue, list_queues, get_queue, update_queue, pause_and_resume,
    worker_consumer_refused, create_consumer, list_and_get_consumer, update_consumer, webhook_consumer,
    push_text, push_json, bulk_push, ...(major === 5 ? [] : [metrics]), paused_pull_refused, pull,
    ack_and_retry, ...(major === 5 ? [redelivery] : [peek, purge_messages]), purge_queue, several_consumers,
    delete_consumer,
    delete_queue,
  ],
  jurisdiction: [
    create_queue_in_jurisdiction, dead_letter_queue_made_in_the_queues_jurisdiction, dead_letter_queue_elsewhere_refused,
    delete_jurisdiction_queues,
  ],
};

function describe(e) {
  if (e instanceof StepFailed) return e.message;
  if (e instanceof Cloudflare.APIError && e.status === undefined) {
    return `no answer from ${baseUrl}: ${e.message} ${e.cause?.message ?? ''}`;
  }
  if (e instanceof Cloudflare.APIError) return `the SDK call failed with HTTP ${e.message}`;
  return e?.stack ?? String(e);
}

if (major === 5) {
  const missing = ['getMetrics', 'messages.peek', 'messages.purge'].filter((m) =>
    m.split('.').reduce((o, k) => o?.[k], client.queues) !== undefined);
  if (missing.length) console.log(`note: cloudflare ${version} has ${missing.join(', ')}; this flow does not use them`);
  else console.log(`note: cloudflare ${version} has no getMetrics, messages.peek or messages.purge; not exercised`);
}

await runSteps('sdk flow', flows[args.flow], describe, async (failed) => {
  // Best effort: leave no queue behind on a shared server when a step failed.
  for (const id of [state.queueId, state.hookQueueId, ...state.extraQueues]) {
    if (failed && id && !(id === state.queueId && state.deleted)) {
      await api('DELETE', `queues/${id}`).catch(() => {});
    }
  }
});
