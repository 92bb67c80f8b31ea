// Event subscriptions in words, for the Events page's form and list (views/events.js): the event types
// with what each means, and a subscription's source and events as a person reads them.

import { num } from '../../lib/dom.js';

/** Every event type a subscription may ask for (the server's), in the form's order: [type, what it means]. */
export const EVENT_TYPES = [
  ['consumer.failing', 'A webhook consumer\'s endpoint failed 5 times in a row: its circuit opened.'],
  ['consumer.recovered', 'A failing endpoint answered again: its circuit closed.'],
  ['consumer.disabled', 'A webhook consumer failed for its disable_after_hours and was disabled: no deliveries until a test send succeeds.'],
  ['messages.dead_lettered', 'Messages ran out of deliveries and moved to the dead-letter queue (or were deleted, with none): one event per batch moved.'],
  ['backlog.over_threshold', 'The queue\'s backlog rose over the threshold below: once per crossing, again after it falls back under. Of one queue only.'],
  ['redrive.finished', 'A redrive out of a dead-letter queue finished.'],
  ['quota.warning', 'The account used 80% of a quota of its plan: once per quota and day or month. Of every queue only.'],
  ['quota.exceeded', 'The account used up a quota: its publishes (and pulls and acks) are refused until it resets. Of every queue only.'],
];

/** The events of the account rather than of a queue: a subscription to every queue asks for them. */
export const ACCOUNT_EVENTS = ['quota.warning', 'quota.exceeded'];

/** The event type whose subscription needs a backlog threshold. */
export const BACKLOG_EVENT = 'backlog.over_threshold';

/** The source's queue id, or null for every queue of the account (`{type: "queues"}`). */
export function sourceQueueId(source) {
  return source && source.type === 'queues.queue' ? source.queue_id : null;
}

/**
 * The source in words: "orders" (its name from `queues`, id → name, else the name the answer carries),
 * "every queue", or "its queue" when the name is not known yet.
 */
export function sourceWords(source, queues) {
  const queueId = sourceQueueId(source);
  if (!queueId) return 'every queue';
  return queues.get(queueId) || source.queue_name || 'its queue';
}

/** The subscription's events as a line: the types, the backlog one with its threshold. */
export function eventsWords(s) {
  return s.events.map((type) => (type === BACKLOG_EVENT && s.source && s.source.backlog_threshold
    ? `${type} (over ${num(s.source.backlog_threshold)})`
    : type)).join(', ');
}
