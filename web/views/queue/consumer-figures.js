// One consumer's own figures in its part of the consumers card (backlog, in flight, delayed, oldest message,
// its dead-letter queue's depth), from its entry of the queue's stats (`consumers`): each consumer reads its
// own copy of every message, so each is behind by its own backlog.

import { h, num, bytes, age } from '../../lib/dom.js';

function figure(label, name) {
  const value = h('span', { class: 'figure-value' }, '—');
  const sub = h('span', { class: 'figure-sub' });
  const el = h('li', { class: 'figure', dataset: { figure: name } }, h('span', { class: 'figure-label' }, label), value, sub);
  return { el, value, sub };
}

/**
 * The figures, as a list; show(figures) with the consumer's entry of the stats' `consumers` (its
 * dead-letter queue's id set as `dead_letter_queue_id` when known, for the link), or null while it has none
 * (a consumer added since the last stats).
 */
export function createConsumerFigures() {
  const fBacklog = figure('Backlog', 'backlog');
  const fInFlight = figure('In flight', 'in-flight');
  const fDelayed = figure('Delayed', 'delayed');
  const fOldest = figure('Oldest message', 'oldest');
  const fDlq = figure('Dead-letter queue', 'dead-letter');
  const el = h('ul', { class: 'consumer-figures', 'aria-label': 'This consumer\'s messages' },
    fBacklog.el, fInFlight.el, fDelayed.el, fOldest.el, fDlq.el);

  function show(f) {
    for (const x of [fBacklog, fInFlight, fDelayed, fOldest, fDlq]) {
      x.value.textContent = '—';
      x.sub.replaceChildren();
    }
    fDlq.el.classList.remove('figure-warning');
    if (!f) return;
    fBacklog.value.textContent = num(f.backlog_count);
    fBacklog.sub.textContent = f.backlog_count ? bytes(f.backlog_bytes) : 'empty';
    fInFlight.value.textContent = num(f.in_flight_count);
    fInFlight.sub.textContent = 'leased';
    fDelayed.value.textContent = num(f.delayed_count);
    fDelayed.sub.textContent = 'not yet deliverable';
    // The server says 0 (not null) when there is no message, and "" when there is no dead-letter queue.
    fOldest.value.textContent = f.oldest_message_timestamp_ms ? age(f.oldest_message_timestamp_ms) : '—';
    fOldest.sub.textContent = f.oldest_message_timestamp_ms
      ? `since ${new Date(f.oldest_message_timestamp_ms).toLocaleTimeString()}` : 'no messages';
    if (f.dead_letter_queue) {
      const depth = f.dead_letter_backlog_count ?? 0;
      fDlq.value.textContent = num(depth);
      const target = f.dead_letter_queue_id;
      fDlq.sub.replaceChildren(target ? h('a', { href: `#/queues/${target}` }, f.dead_letter_queue) : f.dead_letter_queue);
      fDlq.el.classList.toggle('figure-warning', depth > 0);
    } else {
      fDlq.sub.textContent = 'none';
    }
  }
  show(null);

  return { el, show };
}
