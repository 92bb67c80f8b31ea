#!/usr/bin/env node
// Drives skiplock with wrangler (npm), unchanged: each `wrangler queues ...` command is run as a user
// would run it, and after each one the server's state is read over plain HTTP, so a step passes only
// when the server did what the command asked (not when wrangler merely printed success).
//
// Usage: node wrangler.mjs --wrangler 4.86|4.164 [--node PATH] [--base-url URL] [--flow FLOW]
//   --wrangler  which installed wrangler to run (wrangler-4.86 or wrangler-4.164 under node_modules)
//   --node      the Node binary to run it with (default: this one); wrangler 4.164 needs Node 22.12+
//   --base-url  the server's API root, e.g. http://127.0.0.1:8787/client/v4 (default $SKIPLOCK_BASE_URL)
//   --flow      core (default): queue and http consumer commands with CLOUDFLARE_ACCOUNT_ID set;
//               no-account-id: the same without it, so wrangler finds the account itself
//               (GET /accounts and /memberships); whoami: `wrangler whoami`;
//               jurisdiction: `queues create --jurisdiction eu` (wrangler 4.164)
// Environment: SKIPLOCK_TOKEN (queues_read + queues_write), SKIPLOCK_ACCOUNT (32 hex), and
// SKIPLOCK_BASE_URL when --base-url is not given.
//
// Wrangler runs in a fresh HOME with metrics and the update check off, proxies pointed at a closed
// local port (NO_PROXY for the server), and net-guard.cjs preloaded: any connection to a host other
// than the server under test is refused and fails the flow.
// Last line: `wrangler flow: N passed, 0 failed` (exit 0) or `..., 1 failed` (exit 1).

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { StepFailed, accountApi, expect, runSteps } from './steps.mjs';

const FLOWS = ['core', 'no-account-id', 'whoami', 'jurisdiction'];
const { values: args } = parseArgs({
  options: {
    wrangler: { type: 'string' },
    node: { type: 'string', default: process.execPath },
    'base-url': { type: 'string' },
    flow: { type: 'string', default: 'core' },
  },
});
const baseUrl = (args['base-url'] ?? process.env.SKIPLOCK_BASE_URL ?? '').replace(/\/+$/, '');
const token = process.env.SKIPLOCK_TOKEN;
const account = process.env.SKIPLOCK_ACCOUNT;
if (!['4.86', '4.164'].includes(args.wrangler) || !baseUrl || !token || !account || !FLOWS.includes(args.flow)) {
  console.error(`usage: node wrangler.mjs --wrangler 4.86|4.164 [--node PATH] [--base-url URL] [--flow ${FLOWS.join('|')}]`);
  console.error('       with SKIPLOCK_TOKEN, SKIPLOCK_ACCOUNT (and SKIPLOCK_BASE_URL without --base-url)');
  process.exit(2);
}

if (args.flow === 'jurisdiction' && args.wrangler === '4.86') {
  console.error('wrangler 4.86 has no `queues create --jurisdiction`: run this flow with --wrangler 4.164');
  process.exit(2);
}

const here = fileURLToPath(new URL('.', import.meta.url));
const wranglerDir = join(here, 'node_modules', `wrangler-${args.wrangler}`);
const wranglerBin = join(wranglerDir, 'bin', 'wrangler.js');
const version = JSON.parse(readFileSync(join(wranglerDir, 'package.json'), 'utf8')).version;
const serverHostPort = new URL(baseUrl).host;

const sandbox = mkdtempSync(join(tmpdir(), 'skiplock-wrangler-'));
const netLog = join(sandbox, 'net.log');
// Only what wrangler needs: no inherited Cloudflare credentials, proxies or npm settings.
const env = {
  PATH: process.env.PATH,
  HOME: join(sandbox, 'home'),
  XDG_CONFIG_HOME: join(sandbox, 'home', '.config'),
  TMPDIR: sandbox,
  CLOUDFLARE_API_BASE_URL: baseUrl,
  CLOUDFLARE_API_TOKEN: token,
  ...(args.flow === 'no-account-id' ? {} : { CLOUDFLARE_ACCOUNT_ID: account }),
  WRANGLER_SEND_METRICS: 'false',
  // The banner is where wrangler checks npm for a newer version.
  WRANGLER_HIDE_BANNER: 'true',
  NO_COLOR: '1',
  FORCE_COLOR: '0',
  HTTPS_PROXY: 'http://127.0.0.1:9',
  HTTP_PROXY: 'http://127.0.0.1:9',
  https_proxy: 'http://127.0.0.1:9',
  http_proxy: 'http://127.0.0.1:9',
  NO_PROXY: new URL(baseUrl).hostname,
  no_proxy: new URL(baseUrl).hostname,
  NODE_OPTIONS: `--require ${join(here, 'net-guard.cjs')}`,
  SKIPLOCK_NET_ALLOW: serverHostPort,
  SKIPLOCK_NET_LOG: netLog,
};

const nodeVersion = await new Promise((resolve) => {
  const p = spawn(args.node, ['--version'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout.on('data', (d) => (out += d));
  p.on('close', () => resolve(out.trim()));
  p.on('error', () => resolve('(does not run)'));
});
console.log(`wrangler ${version} on node ${nodeVersion} against ${baseUrl} (flow ${args.flow})`);

/** Runs `wrangler ...args` and returns its output; a non-zero exit fails the step with that output. */
async function wrangler(...cmd) {
  const child = spawn(args.node, [wranglerBin, ...cmd], { cwd: sandbox, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const code = await new Promise((resolve) => {
    child.on('close', resolve);
    child.on('error', (e) => {
      out += String(e);
      resolve(-1);
    });
  });
  clearTimeout(timer);
  if (code !== 0) throw new StepFailed(`\`wrangler ${cmd.join(' ')}\` exited ${code}:\n${out.trimEnd()}`);
  return out;
}

const api = accountApi(baseUrl, account, token);

/** The queue of this name on the server, or null. */
async function serverQueueByName(name) {
  const r = await api('GET', `queues?name=${encodeURIComponent(name)}`);
  expect(r.status === 200 && r.body.success === true, 'GET queues?name= to answer 200', r.body);
  return r.body.result.find((q) => q.queue_name === name) ?? null;
}

async function mustExist(name) {
  const q = await serverQueueByName(name);
  expect(q !== null, `queue ${name} on the server`, 'no such queue');
  return q;
}

const suffix = `${Date.now()}-${randomBytes(3).toString('hex')}`;
const name = `wrangler-${args.wrangler.replace('.', '-')}-${suffix}`;
const dlq = `${name}-dlq`;
const created = new Set();

// ---- steps ----------------------------------------------------------------------------------------

async function queues_create() {
  created.add(name);
  await wrangler('queues', 'create', name, '--delivery-delay-secs', '3', '--message-retention-period-secs', '7200');
  const q = await mustExist(name);
  expect(q.settings.delivery_delay === 3 && q.settings.message_retention_period === 7200,
    'delivery_delay 3 and message_retention_period 7200 on the server', q.settings);
}

async function queues_list() {
  const out = await wrangler('queues', 'list');
  expect(out.includes(name), `\`queues list\` to show ${name}`, out);
}

async function queues_info() {
  const q = await mustExist(name);
  const out = await wrangler('queues', 'info', name);
  expect(out.includes(q.queue_id), `\`queues info\` to show the queue id ${q.queue_id}`, out);
}

async function queues_update() {
  await wrangler('queues', 'update', name, '--delivery-delay-secs', '0', '--message-retention-period-secs', '3600');
  const q = await mustExist(name);
  expect(q.settings.delivery_delay === 0 && q.settings.message_retention_period === 3600,
    'delivery_delay 0 and message_retention_period 3600 on the server', q.settings);
}

async function consumer_http_add() {
  created.add(dlq);
  await wrangler('queues', 'consumer', 'http', 'add', name, '--batch-size', '7', '--message-retries', '4',
    '--visibility-timeout-secs', '40', '--retry-delay-secs', '2', '--dead-letter-queue', dlq);
  const q = await mustExist(name);
  const r = await api('GET', `queues/${q.queue_id}/consumers`);
  const c = r.body.result?.[0];
  expect(r.status === 200 && r.body.result.length === 1 && c.type === 'http_pull', 'one http_pull consumer on the server', r.body);
  const s = c.settings;
  expect(s.batch_size === 7 && s.max_retries === 4 && s.visibility_timeout_ms === 40000 && s.retry_delay === 2,
    'batch_size 7, max_retries 4, visibility_timeout_ms 40000, retry_delay 2', c);
  expect(c.dead_letter_queue === dlq, `dead_letter_queue ${dlq}`, c);
  await mustExist(dlq);
}

async function pause_delivery() {
  await wrangler('queues', 'pause-delivery', name);
  const q = await mustExist(name);
  expect(q.settings.delivery_paused === true, 'delivery_paused true on the server', q.settings);
  const pull = await api('POST', `queues/${q.queue_id}/messages/pull`, { batch_size: 1 });
  expect(pull.status === 409, 'a pull from the paused queue to be refused with 409', pull);
}

async function resume_delivery() {
  await wrangler('queues', 'resume-delivery', name);
  const q = await mustExist(name);
  expect(q.settings.delivery_paused === false, 'delivery_paused false on the server', q.settings);
  expect(q.settings.message_retention_period === 3600, 'the other settings kept', q.settings);
}

async function queues_purge() {
  const q = await mustExist(name);
  const messages = [1, 2, 3].map((n) => ({ body: `to purge ${n}`, content_type: 'text' }));
  const pushed = await api('POST', `queues/${q.queue_id}/messages/batch`, { messages });
  expect(pushed.status === 200, 'three messages published over HTTP', pushed.body);
  const before = await api('GET', `queues/${q.queue_id}/metrics`);
  expect(before.body.result?.backlog_count === 3, 'backlog 3 before the purge', before.body);
  await wrangler('queues', 'purge', name, '--force');
  const after = await api('GET', `queues/${q.queue_id}/metrics`);
  expect(after.body.result?.backlog_count === 0, 'backlog 0 on the server after `queues purge`', after.body);
  const status = await api('GET', `queues/${q.queue_id}/purge`);
  expect(status.body.result?.completed === 'true' && status.body.result?.started_at, 'a completed purge on the server', status.body);
}

async function consumer_http_remove() {
  // A second http consumer beside the first (several consumers per queue); `remove` takes the oldest.
  await wrangler('queues', 'consumer', 'http', 'add', name, '--batch-size', '3');
  const q = await mustExist(name);
  const two = await api('GET', `queues/${q.queue_id}/consumers`);
  expect(two.status === 200 && two.body.result.length === 2 && two.body.result[1].settings.batch_size === 3,
    'two http_pull consumers on the server, the new one last', two.body);
  await wrangler('queues', 'consumer', 'http', 'remove', name);
  const one = await api('GET', `queues/${q.queue_id}/consumers`);
  expect(one.status === 200 && one.body.result.length === 1 && one.body.result[0].consumer_id === two.body.result[1].consumer_id,
    'the oldest consumer removed', one.body);
  await wrangler('queues', 'consumer', 'http', 'remove', name);
  const r = await api('GET', `queues/${q.queue_id}/consumers`);
  expect(r.status === 200 && r.body.result.length === 0, 'no consumer left on the server', r.body);
}

async function queues_delete() {
  const q = await mustExist(name);
  await wrangler('queues', 'delete', name);
  expect((await serverQueueByName(name)) === null, `queue ${name} gone from the server`, 'still listed');
  expect((await api('GET', `queues/${q.queue_id}`)).status === 404, 'a 404 for its id', null);
  created.delete(name);
  await wrangler('queues', 'delete', dlq);
  expect((await serverQueueByName(dlq)) === null, `queue ${dlq} gone from the server`, 'still listed');
  created.delete(dlq);
}

async function whoami() {
  const out = await wrangler('whoami');
  expect(out.includes(account), `\`whoami\` to show the account id ${account}`, out);
}

async function create_in_jurisdiction() {
  created.add(name);
  await wrangler('queues', 'create', name, '--jurisdiction', 'eu');
  const q = await mustExist(name);
  expect(q.jurisdiction === 'eu', "jurisdiction 'eu' on the server", q);
  await wrangler('queues', 'delete', name);
  expect((await serverQueueByName(name)) === null, `queue ${name} gone from the server`, 'still listed');
  created.delete(name);
}

async function no_outside_connections() {
  let lines = [];
  try {
    lines = readFileSync(netLog, 'utf8').trim().split('\n').filter(Boolean);
  } catch {
    // No log: wrangler opened no connection at all, which the steps above would have noticed.
  }
  const outside = lines.filter((l) => !l.startsWith(`${serverHostPort} `) && !l.startsWith('unix:'));
  expect(outside.length === 0, `wrangler to connect to ${serverHostPort} only`, [...new Set(outside)].join(', '));
  expect(lines.length > 0, 'the connection log to record the calls to the server', 'an empty log');
}

const queueSteps = [
  queues_create, queues_list, queues_info, queues_update, consumer_http_add, pause_delivery, resume_delivery,
  queues_purge, consumer_http_remove, queues_delete,
];
const flows = {
  core: [...queueSteps, no_outside_connections],
  'no-account-id': [...queueSteps, no_outside_connections],
  whoami: [whoami, no_outside_connections],
  jurisdiction: [create_in_jurisdiction, no_outside_connections],
};

const describe = (e) => (e instanceof StepFailed ? e.message : (e?.stack ?? String(e)));
await runSteps('wrangler flow', flows[args.flow], describe, async () => {
  // Best effort: leave no queue behind on a shared server when a step failed.
  for (const leftover of created) {
    const q = await serverQueueByName(leftover).catch(() => null);
    if (q) await api('DELETE', `queues/${q.queue_id}`).catch(() => {});
  }
  rmSync(sandbox, { recursive: true, force: true });
});
