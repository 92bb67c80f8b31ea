// The skiplock /client/v4 API, and the operator API (/admin/v1, on the operator address), as the
// dashboard uses them. Every failure becomes an ApiError with a message a person can act on; the
// server's own message is kept.

const BASE = '/client/v4';
const ADMIN_BASE = '/admin/v1';
const TIMEOUT_MS = 15000;

/** The server's error codes the dashboard answers in its own way. */
export const CODES = {
  /** A token used outside its validity window (expired, or not valid yet): 401. */
  tokenOutsideWindow: 10001,
  /** Every request of an account the operator suspended: 403. */
  accountSuspended: 11016,
};

/** An operator token's text starts so (an account's token with `skl_`). */
export const OPERATOR_PREFIX = 'sko_';

/** What the dashboard says of a suspended account, wherever it meets one. */
export const SUSPENDED_TEXT = 'This account is suspended by the operator: its requests are refused and its deliveries are '
  + 'stopped until the operator resumes it. Nothing of it is deleted. Ask your skiplock operator why.';

/** The error says the account is suspended by the operator. */
export function isSuspended(err) {
  return err instanceof ApiError && err.code === CODES.accountSuspended;
}

export class ApiError extends Error {
  /** kind: network | timeout | unauthorized | forbidden | not_found | conflict | invalid | server */
  constructor(kind, status, message, code) {
    super(message);
    this.name = 'ApiError';
    this.kind = kind;
    this.status = status;
    this.code = code;
  }
}

function kindOf(status) {
  if (status === 401) return 'unauthorized';
  if (status === 403) return 'forbidden';
  if (status === 404) return 'not_found';
  if (status === 409) return 'conflict';
  if (status >= 400 && status < 500) return 'invalid';
  return 'server';
}

/** What to tell the user about an error: the server's message, framed by what kind of failure it is. */
export function describe(err) {
  if (!(err instanceof ApiError)) return `Something went wrong in the dashboard: ${err && err.message ? err.message : err}`;
  if (isSuspended(err)) return SUSPENDED_TEXT;
  switch (err.kind) {
    case 'network':
      return 'Cannot reach the skiplock server. Check that it is running and that your network is up, then try again.';
    case 'timeout':
      return 'The skiplock server did not answer in time. Try again in a moment.';
    case 'unauthorized':
      if (err.code === CODES.tokenOutsideWindow) return `The API token cannot be used now: ${err.message}.`;
      return `The API token was refused: ${err.message}.`;
    case 'forbidden':
      return `Not allowed: ${err.message}.`;
    case 'invalid':
      return err.status === 429 ? `Too many requests: ${err.message}` : err.message;
    case 'server':
      if (err.status === 503) return `The server is unavailable for the moment: ${err.message}`;
      return `The server failed (${err.status}): ${err.message}`;
    default:
      return err.message;
  }
}

async function send(token, method, path, body, base = BASE) {
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  if (typeof AbortSignal !== 'undefined' && AbortSignal.timeout) init.signal = AbortSignal.timeout(TIMEOUT_MS);
  let response;
  try {
    response = await fetch(base + path, init);
  } catch (err) {
    if (err && (err.name === 'TimeoutError' || err.name === 'AbortError')) {
      throw new ApiError('timeout', 0, 'the server did not answer in time');
    }
    throw new ApiError('network', 0, 'cannot reach the server');
  }
  let envelope = null;
  try {
    envelope = await response.json();
  } catch {
    envelope = null;
  }
  if (!envelope || typeof envelope !== 'object') {
    if (response.ok) throw new ApiError('server', response.status, 'the server sent an answer that is not JSON');
    throw new ApiError(kindOf(response.status), response.status, `HTTP ${response.status} ${response.statusText}`.trim());
  }
  if (!response.ok || envelope.success === false) {
    const errors = Array.isArray(envelope.errors) ? envelope.errors : [];
    const message = errors.map((e) => e && e.message).filter(Boolean).join('; ') || `HTTP ${response.status}`;
    const code = errors[0] ? errors[0].code : undefined;
    throw new ApiError(kindOf(response.status || 500), response.status, message, code);
  }
  return envelope;
}

/** Checks a token: resolves {id, status, account_id, scopes} or throws an ApiError. */
export async function verifyToken(token) {
  return (await send(token, 'GET', '/user/tokens/verify')).result;
}

/** The token's account ({id, name}, Cloudflare's Account object), or null when the server lists none. */
export async function ownAccount(token, accountId) {
  const accounts = (await send(token, 'GET', '/accounts')).result;
  return (Array.isArray(accounts) && accounts.find((a) => a && a.id === accountId)) || null;
}

/**
 * Checks an operator token (`sko_…`) against the operator API: resolves when it may read the accounts,
 * or throws an ApiError. On the public address there is no operator API: a `not_found` ApiError.
 */
export async function verifyOperatorToken(token) {
  await send(token, 'GET', '/accounts?per_page=1', undefined, ADMIN_BASE);
}

/** Query text (`?a=1&b=x`) of the pairs whose value is neither empty nor null. */
function query(pairs) {
  const text = Object.entries(pairs)
    .filter(([, v]) => v !== '' && v !== null && v !== undefined)
    .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
    .join('&');
  return text ? `?${text}` : '';
}

/**
 * A flow key as the path's last part: percent-encoded (a key may hold `/`, `?` or `#`). "." and ".." are
 * refused here, before anything is sent: an address reads them as a step in the path, encoded or not
 * (…/flow_keys/.. would be the queue itself).
 */
function flowKeyPath(key) {
  if (key === '.' || key === '..') {
    throw new ApiError('invalid', 0, `the flow key "${key}" cannot be named in an address: a browser reads it as a step in the path`);
  }
  return `/flow_keys/${encodeURIComponent(key)}`;
}

/** A paged list's helpers over `call(method, path)`: one page, and every item. */
function pager(call) {
  /** One page of a list: its items and the server's result_info {page, per_page, count, total_count, total_pages}. */
  const page = async (path) => {
    const envelope = await call('GET', path);
    return { items: envelope.result, info: envelope.result_info };
  };
  /** Every item of a paged list, a page of 1000 (the most the server gives) at a time. */
  const all = async (path) => {
    const items = [];
    for (let number = 1; ; number += 1) {
      const { items: got, info } = await page(`${path}?page=${number}&per_page=1000`);
      items.push(...got);
      if (got.length === 0 || number >= info.total_pages) return items;
    }
  };
  return { page, all };
}

/**
 * A client for one signed-in session. `onUnauthorized(err)` runs when the server refuses the token
 * (revoked while the page was open); the error is thrown as well. `onStanding(err)` runs with the
 * error when the server says the account is suspended, and with null after any successful answer (the
 * account is served, or was resumed).
 */
export function createClient({ accountId, token }, onUnauthorized, onStanding) {
  async function call(method, path, body) {
    let envelope;
    try {
      envelope = await send(token, method, path, body);
    } catch (err) {
      if (err instanceof ApiError && err.kind === 'unauthorized' && onUnauthorized) onUnauthorized(err);
      if (onStanding && isSuspended(err)) onStanding(err);
      throw err;
    }
    if (onStanding) onStanding(null);
    return envelope;
  }
  const acct = (p) => `/accounts/${accountId}${p}`;
  const q = (queueId, p = '') => acct(`/queues/${encodeURIComponent(queueId)}${p}`);
  const topic = (topicId, p = '') => acct(`/topics/${encodeURIComponent(topicId)}${p}`);
  const result = async (method, path, body) => (await call(method, path, body)).result;
  const names = (list) => list.map((n) => `name=${encodeURIComponent(n)}`).join('&');
  const { page, all } = pager(call);

  return {
    accountId,
    // queues
    listQueues: () => result('GET', acct('/queues?per_page=1000')),
    /** The queues with these names (at most 1000). */
    queuesNamed: (list) => (list.length ? result('GET', acct(`/queues?per_page=${list.length}&${names(list)}`)) : Promise.resolve([])),
    getQueue: (id) => result('GET', q(id)),
    createQueue: (queue_name, settings) => result('POST', acct('/queues'), settings ? { queue_name, settings } : { queue_name }),
    updateQueue: (id, settings) => result('PATCH', q(id), { settings }),
    deleteQueue: (id) => result('DELETE', q(id)),
    purgeQueue: (id) => result('POST', q(id, '/purge'), { delete_messages_permanently: true }),
    // stats (skiplock extension)
    statsPage: (number, perPage) => page(acct(`/stats/queues?page=${number}&per_page=${perPage}`)),
    queueStats: (id) => result('GET', q(id, '/stats')),
    // consumers
    listConsumers: (id) => result('GET', q(id, '/consumers')),
    createConsumer: (id, body) => result('POST', q(id, '/consumers'), body),
    updateConsumer: (id, cid, body) => result('PUT', q(id, `/consumers/${encodeURIComponent(cid)}`), body),
    deleteConsumer: (id, cid) => result('DELETE', q(id, `/consumers/${encodeURIComponent(cid)}`)),
    rotateSecret: (id, cid) => result('POST', q(id, `/consumers/${encodeURIComponent(cid)}/rotate_secret`)),
    // webhook attempts (skiplock extension)
    /**
     * A page of the webhook consumer's attempts to POST batches to its endpoint, newest first: {items, info}.
     * `outcome` (an outcome class, such as server_error), `since` (at or after), `until` (before; both
     * RFC 3339) and `messageId` (attempts whose batch held that message) filter them.
     */
    consumerAttempts: (id, cid, { outcome, since, until, messageId, page: number = 1, perPage = 20 } = {}) =>
      page(q(id, `/consumers/${encodeURIComponent(cid)}/attempts${query({
        outcome, since, until, message_id: messageId, page: number, per_page: perPage,
      })}`)),
    /** A page of the attempts (by any consumer of the queue) whose batch held the message: {items, info}; filtered as consumerAttempts. */
    messageAttempts: (id, mid, { outcome, since, until, page: number = 1, perPage = 20 } = {}) =>
      page(q(id, `/messages/${encodeURIComponent(mid)}/attempts${query({ outcome, since, until, page: number, per_page: perPage })}`)),
    /** Sends a signed sample batch of one message to the webhook consumer's endpoint now; resolves the attempt (`test` true). */
    sendTest: (id, cid) => result('POST', q(id, `/consumers/${encodeURIComponent(cid)}/test`), {}),
    // messages
    sendMessage: (id, message) => result('POST', q(id, '/messages'), message),
    peek: (id, batch_size) => result('POST', q(id, '/messages/peek'), { batch_size }),
    purgeMessages: (id, refs) => result('POST', q(id, '/messages/purge'), { refs: refs.map((ref) => ({ ref })) }),
    // flow control per key (skiplock extension)
    /**
     * A page of the queue's flow keys (those with messages or limits of their own), those holding the most
     * back first: {items, info}. `waiting` lists only the keys holding messages back.
     */
    listFlowKeys: (id, { waiting = false, page: number = 1, perPage = 20 } = {}) =>
      page(q(id, `/flow_keys${query({ page: number, per_page: perPage, waiting: waiting ? 'true' : null })}`)),
    /** One key, whether or not it has messages. */
    getFlowKey: async (id, key) => result('GET', q(id, flowKeyPath(key))),
    /** The key's own limits, `body` {parallelism, rate, period} (null: the consumer's), and `paused` if given. */
    setFlowKey: async (id, key, body) => result('PUT', q(id, flowKeyPath(key)), body),
    /** Removes the key's own limits and its pause; not_found when it had none. */
    clearFlowKey: async (id, key) => result('DELETE', q(id, flowKeyPath(key))),
    pauseFlowKey: async (id, key) => result('POST', q(id, `${flowKeyPath(key)}/pause`), {}),
    resumeFlowKey: async (id, key) => result('POST', q(id, `${flowKeyPath(key)}/resume`), {}),
    // redrive (skiplock extension)
    startRedrive: (id, body) => result('POST', q(id, '/redrive'), body),
    listRedrives: (id) => result('GET', q(id, '/redrive')),
    getRedrive: (id, rid) => result('GET', q(id, `/redrive/${encodeURIComponent(rid)}`)),
    cancelRedrive: (id, rid) => result('DELETE', q(id, `/redrive/${encodeURIComponent(rid)}`)),
    // schedules (skiplock extension)
    /** A page of the account's schedules, oldest first: {items, info}. */
    listSchedules: (number = 1, perPage = 50) => page(acct(`/schedules?page=${number}&per_page=${perPage}`)),
    /** `body`: {queue_id, cron and time_zone or interval_seconds, message: {body, content_type, delay_seconds?}, idempotency_key?, paused?}. */
    createSchedule: (body) => result('POST', acct('/schedules'), body),
    /** Changes the fields `body` names; the others stay. */
    updateSchedule: (id, body) => result('PATCH', acct(`/schedules/${encodeURIComponent(id)}`), body),
    pauseSchedule: (id) => result('POST', acct(`/schedules/${encodeURIComponent(id)}/pause`)),
    resumeSchedule: (id) => result('POST', acct(`/schedules/${encodeURIComponent(id)}/resume`)),
    deleteSchedule: (id) => result('DELETE', acct(`/schedules/${encodeURIComponent(id)}`)),
    // event subscriptions (Cloudflare's routes; the sources are skiplock's queues)
    /** A page of the account's event subscriptions, oldest first: {items, info}. */
    listEventSubscriptions: (number = 1, perPage = 50) =>
      page(acct(`/event_subscriptions/subscriptions${query({ page: number, per_page: perPage, order: 'created_at', direction: 'asc' })}`)),
    /** `body`: {name, enabled, source: {type, queue_id?, backlog_threshold?}, events, destination: {type, queue_id}}. */
    createEventSubscription: (body) => result('POST', acct('/event_subscriptions/subscriptions'), body),
    /** Changes the fields `body` names (name, enabled, events, destination); the source cannot change. */
    updateEventSubscription: (id, body) => result('PATCH', acct(`/event_subscriptions/subscriptions/${encodeURIComponent(id)}`), body),
    deleteEventSubscription: (id) => result('DELETE', acct(`/event_subscriptions/subscriptions/${encodeURIComponent(id)}`)),
    // topics (skiplock extension)
    /** A page of the account's topics, by name: {items, info}. */
    listTopics: (number = 1, perPage = 50) => page(acct(`/topics?page=${number}&per_page=${perPage}`)),
    /** One topic, with its `bindings`. */
    getTopic: (id) => result('GET', topic(id)),
    createTopic: (name) => result('POST', acct('/topics'), { name }),
    /** Deletes the topic and its bindings; the messages it stored stay in their queues. */
    deleteTopic: (id) => result('DELETE', topic(id)),
    /** `body`: {queue_id, pattern, filter?} (filter: attribute name → the values it may take). */
    createBinding: (id, body) => result('POST', topic(id, '/bindings'), body),
    deleteBinding: (id, bid) => result('DELETE', topic(id, `/bindings/${encodeURIComponent(bid)}`)),
    /** Where `body` ({routing_key, attributes?}) would go, storing nothing: {routing_key, queues, reached: [{queue_id, queue_name}]}. */
    routeTopic: (id, body) => result('POST', topic(id, '/route'), body),
    /** `body`: {routing_key, attributes?, messages: [{body, content_type, ...}]}; resolves as routeTopic, once stored. */
    publishToTopic: (id, body) => result('POST', topic(id, '/messages'), body),
    // tokens
    listTokens: () => all(acct('/tokens')),
    /** `validity` is {} or {expires_on} (RFC 3339). */
    createToken: (name, scopes, validity = {}) => result('POST', acct('/tokens'), { name, scopes, ...validity }),
    revokeToken: (tokenId) => result('DELETE', acct(`/tokens/${encodeURIComponent(tokenId)}`)),
    // plan and limits (skiplock extension)
    /**
     * {plan, limits, quotas}: the account's plan, every limit it is held to, and what it used of its
     * quotas ({operations_today, operations_this_month: {used, limit, resets_at}, stored_bytes: {used,
     * limit}}; a limit null or 0 is none). A server without quotas answers no `quotas`.
     */
    getLimits: () => result('GET', acct('/limits')),
    // usage (skiplock extension)
    /**
     * The account's usage per period and queue, oldest first: [{start, queue_id, queue_name, operations,
     * write_operations, read_operations, delete_operations, messages_published, messages_delivered,
     * messages_acked, …, bytes_published, bytes_delivered, storage_byte_hours}]. `since` and `until` (a
     * date, 2026-11-01, or an RFC 3339 time; by default the start of this month in UTC, and now),
     * `granularity` (hour, day or month; day by default) and `queueId` (one queue's) narrow it.
     */
    getUsage: ({ since, until, granularity, queueId } = {}) =>
      result('GET', acct(`/usage${query({ since, until, granularity, queue_id: queueId })}`)),
    // audit log (any token of the account)
    /**
     * A page of the account's audit log, newest first: {items, info}. `action` (an action type, such
     * as queue.create), `since` (at or after) and `before` (RFC 3339) filter it.
     */
    listAuditLogs: ({ action, since, before, page: number = 1, perPage = 20 } = {}) =>
      page(acct(`/audit_logs${query({ 'action.type': action, since, before, page: number, per_page: perPage })}`)),
  };
}

/**
 * A client of the operator API for one operator session (on the operator address). `onUnauthorized`
 * as for createClient.
 */
export function createOperatorClient({ token }, onUnauthorized) {
  async function call(method, path, body) {
    try {
      return await send(token, method, path, body, ADMIN_BASE);
    } catch (err) {
      if (err instanceof ApiError && err.kind === 'unauthorized' && onUnauthorized) onUnauthorized(err);
      throw err;
    }
  }
  const result = async (method, path, body) => (await call(method, path, body)).result;
  const { page, all } = pager(call);
  const account = (id, p = '') => `/accounts/${encodeURIComponent(id)}${p}`;
  const plan = (name) => `/plans/${encodeURIComponent(name)}`;

  return {
    operator: true,
    /** A page of the accounts: {items, info}; `name` (contains, any case), `status` and `plan` filter them. */
    listAccounts: ({ name, status, plan: planName, page: number = 1, perPage = 50 } = {}) =>
      page(`/accounts${query({ name, status, plan: planName, page: number, per_page: perPage })}`),
    getAccount: (id) => result('GET', account(id)),
    /** Resolves {account, token}: the account (on `planName`, the default plan when not given) and its first token, with the token's text. */
    createAccount: (name, planName) => result('POST', '/accounts', planName ? { name, plan: planName } : { name }),
    renameAccount: (id, name) => result('PATCH', account(id), { name }),
    /** Changes the account's plan and its own limits; `limit_overrides` is a merge patch (null removes a limit). */
    changeLimits: (id, planName, overrides) => result('PATCH', account(id), { plan: planName, limit_overrides: overrides }),
    suspendAccount: (id, reason) => result('POST', account(id, '/suspend'), reason ? { reason } : {}),
    resumeAccount: (id) => result('POST', account(id, '/resume')),
    /**
     * Starts deleting the account (its tokens go at once, its queues and messages in the background);
     * asking again is harmless. Resolves its Deletion: {account_id, status (deleting | deleted),
     * started_on, finished_on, deleted_queues, deleted_messages, remaining_queues, remaining_messages}.
     */
    deleteAccount: (id) => result('DELETE', account(id)),
    /** How far the account's deletion went (a Deletion, as deleteAccount's); not_found when it is not being deleted. */
    getDeletion: (id) => result('GET', account(id, '/deletion')),
    // the account's tokens, on its behalf
    listTokens: (id) => all(account(id, '/tokens')),
    createToken: (id, name, scopes, validity = {}) => result('POST', account(id, '/tokens'), { name, scopes, ...validity }),
    revokeToken: (id, tokenId) => result('DELETE', account(id, `/tokens/${encodeURIComponent(tokenId)}`)),
    // plans: named sets of limits
    /** Every plan, by name: {name, limits (those it sets), effective_limits, accounts, created_on, modified_on}. */
    listPlans: () => result('GET', '/plans'),
    /** `limits`: the limits it sets (the others are the node's). */
    createPlan: (name, limits) => result('POST', '/plans', { name, limits }),
    /** `limits` is a merge patch: a number sets a limit, null removes it. */
    updatePlan: (name, limits) => result('PATCH', plan(name), { limits }),
    deletePlan: (name) => result('DELETE', plan(name)),
    // the audit log
    /** A page of the account's audit log, newest first: {items, info}; filtered as the tenant's listAuditLogs. */
    listAuditLogs: (accountId, { action, since, before, page: number = 1, perPage = 20 } = {}) =>
      page(`/audit_logs${query({
        account_id: accountId, 'action.type': action, since, before, page: number, per_page: perPage,
      })}`),
  };
}
