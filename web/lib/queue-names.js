// The account's queues by name, for the pages whose rows and forms name queues by id (schedules, event
// subscriptions): read once, read again when a row names a queue not known yet, offered in a <select>
// and shown as a link to the queue's page.

import { h } from './dom.js';
import { describe } from './api.js';

/**
 * The account's queues, id → name, by name (the first 1000, as the API lists them). `onRead(names)`
 * gets them after each read; `onError(text)` says why a read failed (it is tried again later).
 *
 * Returns {ready, naming}: `ready(refresh)` resolves once they are read (read again with `refresh`);
 * `naming(readPage, idsOf)` is a paged list's `read` that makes sure its rows' queues are named (see below).
 */
export function createQueueNames({ ctx, onRead, onError }) {
  let names = new Map();
  let reading = null;
  const missing = new Set(); // queues named by rows that the last read did not list

  async function read() {
    const list = await ctx.api.listQueues();
    names = new Map(list.map((q) => [q.queue_id, q.queue_name]).sort((a, b) => a[1].localeCompare(b[1])));
    onRead(names);
  }

  /** The queues, read once (and again after `refresh`); a failure is told and tried again at the next call. */
  function ready(refresh = false) {
    if (!reading || refresh) {
      reading = read().catch((err) => {
        reading = null;
        if (!ctx.signal.aborted) onError(`The queues could not be listed: ${describe(err)}`);
      });
    }
    return reading;
  }

  /** A queue made since the queues were read: read them again for its name (once per such queue: one past the first 1000 stays unnamed). */
  async function learn(ids) {
    const unknown = ids.filter((q) => q && !names.has(q) && !missing.has(q));
    if (unknown.length) {
      unknown.forEach((q) => missing.add(q));
      await ready(true);
    }
  }

  /**
   * `readPage(...)`, resolving the server's paged list {items}, with the queues read first, and read
   * again when a row names one not known yet (`idsOf(row)` are the queues it names, nulls skipped).
   */
  function naming(readPage, idsOf) {
    return async (...args) => {
      await ready();
      const got = await readPage(...args);
      await learn(got.items.flatMap(idsOf));
      return got;
    };
  }

  return { ready, naming };
}

/** A <select> of the account's queues, "Loading queues…" until fillQueueSelect fills it. */
export function createQueueSelect() {
  return h('select', { required: true }, h('option', { value: '' }, 'Loading queues…'));
}

/** Offers `queues` (id → name) in `select`, keeping what was picked when it is still there. */
export function fillQueueSelect(select, queues) {
  const picked = select.value;
  if (queues.size) {
    select.replaceChildren(h('option', { value: '' }, 'Choose a queue…'),
      ...[...queues].map(([queueId, name]) => h('option', { value: queueId }, name)));
  } else {
    select.replaceChildren(h('option', { value: '' }, 'No queues yet'));
  }
  select.value = queues.has(picked) ? picked : '';
}

/** A queue's name linked to its page, or the start of its id when its name is not known. */
export function queueLink(queueId, name) {
  return name
    ? h('a', { href: `#/queues/${queueId}`, class: 'queue-link' }, name)
    : h('code', { title: `Queue ID ${queueId}` }, `${String(queueId).slice(0, 8)}…`);
}
