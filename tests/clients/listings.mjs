#!/usr/bin/env node
// Walks every list with the official Cloudflare TypeScript SDK's own iteration (`for await`), unchanged.
//
// The SDK's auto-pagination decides when to stop: a step passes only if the iteration ends and yields
// every item exactly once. The lists hold more items than one page wherever the server lets them grow that
// long (tests/api/listings.rs makes them); a queue has at most one consumer and the server has no event
// sources, so those two iterations yield what there is (one consumer, no subscription) and must still end.
// Redrive tasks are a skiplock extension the SDK has no method for; they are walked with the SDK's own
// paginator (`client.getAPIList` with `V4PagePaginationArray`).
//
// Usage: node listings.mjs --sdk 5|7 --expect JSON
//   --expect  {"queues": n, "tokens": n, "queue_id": "...", "redrive_tasks": n}
// Environment: SKIPLOCK_BASE_URL, SKIPLOCK_TOKEN (every scope), SKIPLOCK_ACCOUNT.
// Last line: `listings flow: N passed, 0 failed` (exit 0) or `listings flow: N passed, 1 failed` (exit 1).

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { StepFailed, expect, runSteps } from './steps.mjs';

const { values: args } = parseArgs({ options: { sdk: { type: 'string' }, expect: { type: 'string' } } });
const major = Number(args.sdk);
const baseUrl = (process.env.SKIPLOCK_BASE_URL ?? '').replace(/\/+$/, '');
const token = process.env.SKIPLOCK_TOKEN;
const account = process.env.SKIPLOCK_ACCOUNT;
if (![5, 7].includes(major) || !args.expect || !baseUrl || !token || !account) {
  console.error('usage: node listings.mjs --sdk 5|7 --expect JSON  (with SKIPLOCK_BASE_URL, SKIPLOCK_TOKEN, SKIPLOCK_ACCOUNT)');
  process.exit(2);
}
const want = JSON.parse(args.expect);

const pkg = `cloudflare${major}`;
const version = JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url))).version;
const { default: Cloudflare } = await import(pkg);
const { V4PagePaginationArray } = await import(`${pkg}/pagination`);
console.log(`cloudflare ${version} (${pkg}) on node ${process.version} against ${baseUrl}`);

const client = new Cloudflare({ apiToken: token, baseURL: baseUrl, maxRetries: 0, timeout: 30_000 });
const queueId = want.queue_id;

/**
 * The keys of a `for await` over `list`, failing if it yields more than `expected` items (it would never
 * end), any item twice, or not `expected` items.
 */
async function walk(list, expected, key, what) {
  const got = [];
  for await (const item of list) {
    got.push(key(item));
    // A bounded walk: an iteration that does not end yields past the bound and fails here.
    if (got.length > expected) throw new StepFailed(`expected the ${what} iteration to end after ${expected} items; got ${JSON.stringify(got)}`);
  }
  expect(new Set(got).size === got.length, `every one of the ${what} once`, got);
  expect(got.length === expected, `${expected} ${what}`, got);
  return got;
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

async function queues() {
  // Cloudflare's schema gives this list no paging parameters: the SDK asks once, with none.
  const names = await walk(client.queues.list({ account_id: account }), want.queues, (q) => q.queue_name, 'queues');
  expect(same(names, [...names].sort()), 'the queues in creation order (listed-00 ...)', names);
}

async function consumers() {
  // A queue has at most one consumer, so this list cannot outgrow a page; it must still end.
  await walk(client.queues.consumers.list(queueId, { account_id: account }), 1, (c) => c.consumer_id, 'consumers');
}

async function accounts() {
  // A token sees one account. The SDK asks for page 2, 3, ... until a page is empty.
  await walk(client.accounts.list(), 1, (a) => a.id, 'accounts');
  const ids = await walk(client.accounts.list({ per_page: 1 }), 1, (a) => a.id, 'accounts (per_page 1)');
  expect(same(ids, [account]), `the token's account ${account}`, ids);
}

async function memberships() {
  await walk(client.memberships.list(), 1, (m) => m.id, 'memberships');
  await walk(client.memberships.list({ per_page: 1 }), 1, (m) => m.id, 'memberships (per_page 1)');
}

async function tokens() {
  const ten = await walk(client.accounts.tokens.list({ account_id: account, per_page: 10 }), want.tokens, (t) => t.id, 'tokens (per_page 10)');
  const twenty = await walk(client.accounts.tokens.list({ account_id: account }), want.tokens, (t) => t.id, 'tokens');
  expect(same(ten, twenty), 'the same tokens in the same order whatever the page size', [ten, twenty]);
}

async function event_subscriptions() {
  // No event sources yet: nothing to yield, and the iteration ends.
  await walk(client.queues.subscriptions.list({ account_id: account }), 0, (s) => s.id, 'event subscriptions');
  await walk(client.queues.subscriptions.list({ account_id: account, per_page: 5 }), 0, (s) => s.id, 'event subscriptions (per_page 5)');
}

async function redrive_tasks() {
  const tasks = (query) => client.getAPIList(`/accounts/${account}/queues/${queueId}/redrive`, V4PagePaginationArray, { query });
  const ten = await walk(tasks({ per_page: 10 }), want.redrive_tasks, (t) => t.redrive_id, 'redrive tasks (per_page 10)');
  const twenty = await walk(tasks({}), want.redrive_tasks, (t) => t.redrive_id, 'redrive tasks');
  expect(same(ten, twenty), 'the same tasks, newest first, whatever the page size', [ten, twenty]);
}

function describe(e) {
  if (e instanceof StepFailed) return e.message;
  if (e instanceof Cloudflare.APIError) return `the SDK call failed with HTTP ${e.message}`;
  return e?.stack ?? String(e);
}

await runSteps(
  'listings flow',
  [queues, consumers, accounts, memberships, tokens, event_subscriptions, redrive_tasks],
  describe,
  async () => {},
);
