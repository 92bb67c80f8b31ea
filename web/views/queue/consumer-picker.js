// The delivery attempts card's choice of consumer: each webhook consumer has a log of its own, so while
// the queue has several, the card asks which one it shows (the first by default). Hidden with one or none.

import { h, field } from '../../lib/dom.js';
import { consumerLabel } from './consumer-words.js';

/**
 * The field; set(webhook consumers, the id shown) redraws its choices, `onPick(consumer id)` is told of
 * the one the user picks.
 */
export function createConsumerPicker({ onPick }) {
  const select = h('select', { class: 'consumer-picker' });
  const el = h('div', { class: 'card-filter consumer-pick', hidden: true },
    field('Consumer', select, { hint: 'The queue has several webhook consumers; each has a log of its own.' }));
  select.addEventListener('change', () => onPick(select.value));

  function set(hooks, chosen) {
    select.replaceChildren(...hooks.map((c) => h('option', { value: c.consumer_id }, `${consumerLabel(c)} · ${c.url || ''}`)));
    if (chosen) select.value = chosen;
    el.hidden = hooks.length < 2;
  }

  return { el, set };
}
