// The queue page's consumers card: each of the queue's consumers (HTTP pull or webhook, up to 8, oldest
// first) in a part of its own (consumer.js), with its own figures from the queue's stats, and "Add a
// consumer" while the queue has room for another, which opens the consumer form (consumer-form.js). A
// consumer added beside others receives the messages published from then on, not the backlog: the card
// says so where one is added.

import { h, notice, num } from '../../lib/dom.js';
import { createConsumer } from './consumer.js';
import { consumerForm } from './consumer-form.js';
import { MAX_CONSUMERS, pullCount } from './consumer-words.js';

/**
 * The card; show(consumers) with the queue's, update(stats) with each stats answer (each consumer's
 * figures, matched by consumer_id), setHealth(consumer id, health) with a webhook's endpoint health read
 * since. `refresh()` asks the page for fresh stats; `onChange(consumers)` is told of the consumers shown,
 * at first and after each change, `onTested(consumer id)` of a test send; `polling` is the page's, stopped
 * while a consumer is being deleted.
 */
export function createConsumers({ api, ctx, queueId, refresh, polling, onChange = () => {}, onTested = () => {} }) {
  let parts = []; // one per consumer shown, oldest first
  let creating = false; // the create form is open
  let figures = new Map(); // each consumer's entry of the last stats, by consumer_id
  const count = h('span', { class: 'count muted' });
  const msg = notice(); // the create form's
  const list = h('div', { class: 'consumer-list stack' });
  const none = h('p', { class: 'muted' }, `No consumer. Messages wait in the queue until one is attached; the first receives them `
    + `all. A queue may have up to ${num(MAX_CONSUMERS)} consumers, each receiving every message.`);
  const beside = h('p', { class: 'muted small' }, 'A consumer added beside others receives the messages published from then on, '
    + 'not the backlog; each consumer receives every message, with its own retries and dead-letter queue.');
  const adding = h('div', { class: 'stack consumer-add' });
  const el = h('section', { class: 'card', 'aria-labelledby': 'consumer-title' },
    h('div', { class: 'card-head' }, h('h2', { id: 'consumer-title' }, 'Consumers'), count),
    list, msg.el, adding);

  const consumers = () => parts.map((p) => p.consumer);

  /** Tells every part, the part under them and the page of the consumers as they are now. */
  function changed() {
    const all = consumers();
    const counts = { total: all.length, pulls: pullCount(all) };
    for (const p of parts) p.setCounts(counts);
    count.textContent = all.length ? `${num(all.length)} of ${num(MAX_CONSUMERS)}` : '';
    list.hidden = all.length === 0;
    none.hidden = all.length > 0;
    beside.hidden = all.length === 0;
    if (!creating) renderAdding(); // an open form stays as typed
    onChange(all);
  }

  function part(consumer, secret = null) {
    const p = createConsumer({
      api, ctx, queueId, polling, consumer, secret,
      onSaved: () => {
        changed();
        refresh();
      },
      onDeleted: () => {
        parts = parts.filter((x) => x !== p);
        p.el.remove();
        changed();
        // Its buttons are gone with it: the focus goes on to adding one, unless a form is being filled.
        const add = creating ? null : adding.querySelector('button');
        if (add) add.focus();
        refresh();
      },
      onTested: () => onTested(p.consumer.consumer_id),
    });
    p.setFigures(figures.get(consumer.consumer_id) || null);
    return p;
  }

  /** The form to add a consumer, under what a consumer added receives. */
  function openForm() {
    creating = true;
    msg.clear();
    adding.replaceChildren(beside, consumerForm({
      api, ctx, queueId, msg,
      onSaved: (saved) => {
        const p = part(saved, saved.signing_secret ? { title: 'Webhook signing secret', value: saved.signing_secret } : null);
        parts.push(p);
        list.append(p.el);
        creating = false;
        ctx.toast('Consumer created.');
        changed();
        p.focus(); // the form is gone: on to what was made (a webhook's secret shows there)
        refresh();
      },
      onCancel: () => {
        creating = false;
        renderAdding();
      },
    }));
    const input = adding.querySelector('input, select');
    if (input) input.focus();
  }

  /** Under the consumers: why there is none, or what one added beside them receives; the add button while there is room. */
  function renderAdding() {
    if (parts.length >= MAX_CONSUMERS) {
      adding.replaceChildren(h('p', { class: 'muted small' }, `This queue has ${num(MAX_CONSUMERS)} consumers, the most a queue `
        + 'may have; delete one before adding another.'));
      return;
    }
    const add = h('button', { type: 'button', class: parts.length ? 'btn' : 'btn btn-primary' }, 'Add a consumer');
    add.addEventListener('click', openForm);
    adding.replaceChildren(none, beside, h('div', null, add));
  }

  function show(next) {
    for (const p of parts) p.el.remove();
    parts = next.map((c) => part(c));
    list.append(...parts.map((p) => p.el));
    changed();
  }

  /** Each consumer's figures from a stats answer (one added since has none until the next). */
  function update(stats) {
    figures = new Map((stats.consumers || []).map((f) => [f.consumer_id, f]));
    for (const p of parts) p.setFigures(figures.get(p.consumer.consumer_id) || null);
  }

  /** The endpoint health of consumer `id`, read since it was shown. */
  function setHealth(id, health) {
    const p = parts.find((x) => x.consumer.consumer_id === id);
    if (p) p.setHealth(health);
  }

  return { el, show, update, setHealth };
}
