// The limits an account is held to (its plan's, over the node's own, under its own overrides), as the
// tenant's "Plan and limits" panel and the operator's plan and account pages say them: each limit's
// name, its range, and its value in words ("Published messages: 2,000 per second across the service").

import { h, num } from '../../lib/dom.js';

const decimal = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

/** Bytes in the decimal units a limit is set in: "25 GB (25,000,000,000 bytes)". */
function byteWords(n) {
  const units = [[1e15, 'PB'], [1e12, 'TB'], [1e9, 'GB'], [1e6, 'MB'], [1e3, 'kB']];
  const unit = units.find(([size]) => n >= size);
  if (!unit) return `${num(n)} ${n === 1 ? 'byte' : 'bytes'}`;
  return `${decimal.format(n / unit[0])} ${unit[1]} (${num(n)} bytes)`;
}

/**
 * A message's or a batch's bytes: in binary units when the number is a whole number of them and not of
 * the decimal ones ("1 MiB (1,048,576 bytes)"), else as byteWords ("128 kB (128,000 bytes)").
 */
function messageByteWords(n) {
  const units = [[1024 * 1024, 'MiB'], [1024, 'KiB']];
  const unit = units.find(([size]) => n >= size && n % size === 0 && n % 1000 !== 0);
  return unit ? `${num(n / unit[0])} ${unit[1]} (${num(n)} bytes)` : byteWords(n);
}

/**
 * Seconds in the largest unit they are a whole number of: "1 day (86,400 seconds)", "14 days (1,209,600
 * seconds)", "25 hours (90,000 seconds)"; else in seconds alone.
 */
function secondsWords(n) {
  const units = [[86_400, 'day'], [3_600, 'hour'], [60, 'minute']];
  const unit = units.find(([size]) => n >= size && n % size === 0);
  if (!unit) return `${num(n)} ${n === 1 ? 'second' : 'seconds'}`;
  const v = n / unit[0];
  return `${num(v)} ${unit[1]}${v === 1 ? '' : 's'} (${num(n)} seconds)`;
}

/** The most a publish batch's bodies may total: Cloudflare's 256,000 bytes, or one message of the largest size. */
const BATCH_BYTES = 256_000;

/**
 * The limits, in the API's order: `key` (the API's name), `label` (what it is called in words),
 * `field` (the operator's input), the range the server takes (`min`, `max`), what 0 means when it is
 * allowed (`zero`), `about` (what the number counts) and `words(value)`.
 */
export const LIMITS = [
  {
    key: 'rate_per_second',
    label: 'API requests',
    field: 'Requests per second',
    min: 0,
    max: 10_000_000,
    zero: 'unlimited',
    about: 'per account, across the nodes',
    words: (v) => (v === 0 ? 'unlimited' : `${num(v)} per second across the service`),
  },
  {
    key: 'rate_burst',
    label: 'Request burst',
    field: 'Request burst',
    min: 1,
    max: 10_000_000,
    about: 'requests at once above the rate',
    words: (v) => `up to ${num(v)} ${v === 1 ? 'request' : 'requests'} at once above the rate`,
  },
  {
    key: 'publish_rate_per_second',
    label: 'Published messages',
    field: 'Published messages per second',
    min: 0,
    max: 10_000_000,
    zero: 'unlimited',
    about: 'per account, across the nodes',
    words: (v) => (v === 0 ? 'unlimited' : `${num(v)} per second across the service`),
  },
  {
    key: 'max_queues_per_account',
    label: 'Queues',
    field: 'Queues per account',
    min: 1,
    max: 1_000_000,
    about: 'queues in the account (dead-letter queues skiplock makes are not refused)',
    words: (v) => `up to ${num(v)} in the account`,
  },
  {
    key: 'max_backlog_bytes_per_queue',
    label: 'Backlog per queue',
    field: 'Backlog per queue (bytes)',
    min: 1,
    max: 1_000_000_000_000_000,
    about: 'bytes of messages waiting in each queue',
    words: (v) => `up to ${byteWords(v)} of messages waiting`,
  },
  {
    key: 'max_waiting_pulls',
    label: 'Waiting pulls',
    field: 'Waiting pulls per node',
    min: 0,
    max: 1_000_000,
    zero: 'no long polls',
    about: 'long-polling pulls at once per account, on each node',
    words: (v) => (v === 0
      ? 'none: a pull may not wait (wait_time_ms 0)'
      : `up to ${num(v)} long ${v === 1 ? 'poll' : 'polls'} at once on each node`),
  },
  {
    key: 'max_message_bytes',
    label: 'Message size',
    field: 'Largest message (bytes)',
    min: 1_000,
    max: 1_048_576,
    about: `bytes of one message body; a batch may total ${num(BATCH_BYTES)} or this, the larger`,
    words: (v) => `up to ${messageByteWords(v)} a message and ${messageByteWords(Math.max(BATCH_BYTES, v))} a batch`,
  },
  {
    key: 'max_retention_seconds',
    label: 'Message retention',
    field: 'Longest retention (seconds)',
    min: 60,
    max: 1_209_600,
    about: 'the longest retention a queue may be given; a new queue keeps 4 days or this, the shorter',
    words: (v) => `queues keep messages up to ${secondsWords(v)}`,
  },
  {
    key: 'max_operations_per_day',
    label: 'Operations per day',
    field: 'Operations per UTC day',
    min: 0,
    max: 1_000_000_000_000_000,
    zero: 'no quota',
    about: 'operations (64 KB written, read or deleted) per UTC day',
    words: (v) => (v === 0 ? 'no quota' : `up to ${num(v)} operations a day (UTC)`),
  },
  {
    key: 'max_operations_per_month',
    label: 'Operations per month',
    field: 'Operations per UTC month',
    min: 0,
    max: 1_000_000_000_000_000,
    zero: 'no quota',
    about: 'operations per UTC month',
    words: (v) => (v === 0 ? 'no quota' : `up to ${num(v)} operations a month (UTC)`),
  },
  {
    key: 'max_stored_bytes',
    label: 'Stored bytes',
    field: 'Stored bytes (all queues)',
    min: 0,
    max: 1_000_000_000_000_000,
    zero: 'no quota',
    about: 'bytes all the account\'s queues store at once; past it, publishes wait for consumers',
    words: (v) => (v === 0 ? 'no quota' : `up to ${byteWords(v)} stored in all`),
  },
];

/** The limit called `key` (undefined for one this dashboard does not know). */
export function limitOf(key) {
  return LIMITS.find((l) => l.key === key);
}

/**
 * A limit's value in words. `all` (optional) is every limit in force: with requests unlimited, the
 * burst is said to be unused.
 */
export function limitWords(key, value, all = null) {
  const limit = limitOf(key);
  if (!limit) return num(value);
  if (key === 'rate_burst' && all && all.rate_per_second === 0) return 'not used: requests are unlimited';
  return limit.words(value);
}

/**
 * The limits in `limits` (an object of some or all of them), one line each: "Label: words", in the
 * API's order, those this dashboard does not know after them by their API name. `empty` is shown when
 * there are none. `full` says `limits` is every limit in force (see limitWords).
 */
export function limitList(limits, { empty = 'None', full = false } = {}) {
  const set = limits || {};
  const known = LIMITS.filter((l) => set[l.key] !== undefined && set[l.key] !== null);
  const others = Object.keys(set).filter((k) => !limitOf(k) && set[k] !== null);
  if (!known.length && !others.length) return h('span', { class: 'muted' }, empty);
  return h('ul', { class: 'limit-list' },
    known.map((l) => h('li', { dataset: { limit: l.key } },
      h('span', { class: 'limit-label' }, `${l.label}: `), limitWords(l.key, set[l.key], full ? set : null))),
    others.map((k) => h('li', { dataset: { limit: k } }, h('span', { class: 'limit-label' }, `${k}: `), String(set[k]))));
}
