// The queue page's stat tiles (backlog, in flight, delayed, oldest message, ordering keys, dead-letter
// queue, and flow control when it holds messages back or a consumer sets its limits) and, on a
// dead-letter queue, the note naming the queues its messages come from.

import { h, append, num, bytes, age } from '../../lib/dom.js';

function tile(label, extra) {
  const value = h('span', { class: 'tile-value' }, '—');
  const sub = h('span', { class: 'tile-sub' }, extra || '');
  const el = h('div', { class: 'tile', role: 'group', 'aria-label': label }, h('span', { class: 'tile-label' }, label), value, sub);
  return { el, value, sub };
}

/**
 * The tiles and the sources note (both in `els`, in page order); update() with each stats answer, and
 * setFlowLimits(whether a consumer sets limits of flow control) when the consumers are shown or changed.
 */
export function createTiles() {
  const tBacklog = tile('Backlog');
  const tInFlight = tile('In flight', 'leased to a consumer');
  const tDelayed = tile('Delayed', 'not yet deliverable');
  const tOldest = tile('Oldest message');
  const tKeys = tile('Ordering keys', 'keys with messages');
  const tDlq = tile('Dead-letter queue');
  const tFlow = tile('Flow control');
  tBacklog.el.dataset.stat = 'backlog';
  tFlow.el.dataset.stat = 'flow';
  tFlow.el.hidden = true;
  const sources = h('div', { class: 'callout', hidden: true, role: 'note' });
  const grid = h('div', { class: 'tiles' }, tBacklog.el, tInFlight.el, tDelayed.el, tOldest.el, tKeys.el, tDlq.el, tFlow.el);
  const els = [sources, grid];
  let flowLimits = false;
  let last = null;

  // Messages held back by flow control, and by how many keys: shown while some are, or while a
  // consumer sets limits (then 0 says that nothing is held back now).
  function showFlow() {
    const held = (last && last.flow_waiting_count) || 0;
    const keys = (last && last.flow_keys_waiting) || 0;
    const shown = held > 0 || keys > 0 || flowLimits;
    tFlow.el.hidden = !shown;
    grid.classList.toggle('tiles-7', shown);
    if (!shown) return;
    tFlow.value.textContent = num(held);
    tFlow.sub.textContent = held || keys
      ? `${held === 1 ? 'message' : 'messages'} held back by ${num(keys)} ${keys === 1 ? 'key' : 'keys'}`
      : 'nothing held back';
  }

  function setFlowLimits(set) {
    flowLimits = Boolean(set);
    showFlow();
  }

  function update(s) {
    last = s;
    showFlow();
    tBacklog.value.textContent = num(s.backlog_count);
    tBacklog.sub.textContent = s.backlog_count ? bytes(s.backlog_bytes) : 'empty';
    tInFlight.value.textContent = num(s.in_flight_count);
    tDelayed.value.textContent = num(s.delayed_count);
    tOldest.value.textContent = s.oldest_message_timestamp_ms ? age(s.oldest_message_timestamp_ms) : '—';
    tOldest.sub.textContent = s.oldest_message_timestamp_ms ? `since ${new Date(s.oldest_message_timestamp_ms).toLocaleTimeString()}` : 'no messages';
    tKeys.value.textContent = num(s.ordering_key_count);
    if (s.dead_letter_queue) {
      const dlq = s.dead_letter_queue;
      tDlq.value.textContent = num(s.dead_letter_backlog_count ?? 0);
      const target = s.dead_letter_queue_id;
      tDlq.sub.replaceChildren(target ? h('a', { href: `#/queues/${target}` }, dlq) : dlq);
      tDlq.el.classList.toggle('tile-warning', (s.dead_letter_backlog_count ?? 0) > 0);
    } else {
      tDlq.value.textContent = '—';
      tDlq.sub.textContent = 'none configured';
      tDlq.el.classList.remove('tile-warning');
    }
    if (s.dead_letter_sources && s.dead_letter_sources.length) {
      sources.hidden = false;
      // A source deleted since has no name; its messages can still be redriven to a chosen queue.
      const links = s.dead_letter_sources.map((src, i) => [i ? ', ' : '',
        src.queue_name ? h('a', { href: `#/queues/${src.queue_id}` }, src.queue_name) : 'a deleted queue']);
      sources.replaceChildren();
      append(sources, [h('strong', null, 'Dead-letter queue. '),
        'Messages arrive here when a consumer of ', links,
        ' has used up their retries. They keep their original ids and timestamps; peek them below, or redrive them back.']);
    } else {
      sources.hidden = true;
    }
  }

  return { els, update, setFlowLimits };
}

/**
 * The stats name dead-letter queues, the queue's and each consumer's (in `consumers`); this finds their ids
 * (one look-up of the names not known yet, not one per poll) and sets each as `dead_letter_queue_id`, for
 * the links of the tile and of the consumers' figures.
 */
export function deadLetterResolver(api) {
  const dlqIds = new Map();
  return async function resolveDeadLetter(s) {
    const naming = [s, ...(s.consumers || [])].filter((x) => x.dead_letter_queue);
    const unknown = [...new Set(naming.map((x) => x.dead_letter_queue))].filter((name) => !dlqIds.has(name));
    if (unknown.length) {
      try {
        for (const found of await api.queuesNamed(unknown)) dlqIds.set(found.queue_name, found.queue_id);
      } catch {
        // a link is a convenience: the name is shown either way
      }
    }
    for (const x of naming) x.dead_letter_queue_id = dlqIds.get(x.dead_letter_queue);
  };
}
