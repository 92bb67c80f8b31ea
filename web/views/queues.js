// The queue list, a page at a time by name: counts by state, oldest message age, dead-letter depth, a
// webhook endpoint failing, its circuit open or its consumer disabled; create a queue.

import { h, field, notice, num, bytes, age, badge, busy } from '../lib/dom.js';
import { describe } from '../lib/api.js';
import { createPager, livePages } from '../lib/paged-table.js';
import { endpointBadge } from './queue/attempt-words.js';

/** A queue's name (a topic's too): 1 to 63 lowercase letters, digits and hyphens. */
export const NAME_RE = /^[a-z0-9-]{1,63}$/;
/** Queues on a page of the list. */
export const PER_PAGE = 50;
const REFRESH_MS = 5000;

/** `page` is the page of the list to show first, from 1 (the address's `?page=`). */
export function renderQueues(root, ctx, page = 1) {
  ctx.setTitle('Queues');
  const { api } = ctx;

  // ---- create form ----
  const name = h('input', { type: 'text', required: true, maxlength: '63', autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. orders' });
  const delay = h('input', { type: 'number', min: '0', max: '86400', step: '1', inputmode: 'numeric', placeholder: '0' });
  const retention = h('input', { type: 'number', min: '60', max: '1209600', step: '1', inputmode: 'numeric', placeholder: '345600' });
  const createMsg = notice();
  const createBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create queue');
  const form = h('form', { class: 'create-queue', novalidate: true, 'aria-label': 'Create a queue' },
    h('div', { class: 'inline-form' },
      field('New queue name', name, { hint: 'Lowercase letters, digits and hyphens; up to 63 characters.' }),
      h('div', { class: 'inline-submit' }, createBtn)),
    h('details', { class: 'more-settings' },
      h('summary', null, 'Settings (optional)'),
      h('div', { class: 'form-grid' },
        field('Delivery delay (seconds)', delay, { hint: '0 to 86,400 (24 h). Default 0.' }),
        field('Message retention (seconds)', retention, { hint: '60 to 1,209,600 (14 days), at most your plan\'s longest retention. Default 345,600 (4 days), or your plan\'s longest if shorter.' }))),
    createMsg.el);

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    createMsg.clear();
    const queueName = name.value.trim();
    if (!NAME_RE.test(queueName)) {
      createMsg.show('A queue name is 1 to 63 characters: lowercase letters a-z, digits and hyphens.');
      name.setAttribute('aria-invalid', 'true');
      name.focus();
      return;
    }
    name.removeAttribute('aria-invalid');
    const settings = {};
    if (delay.value !== '') settings.delivery_delay = Number(delay.value);
    if (retention.value !== '') settings.message_retention_period = Number(retention.value);
    try {
      const queue = await busy(createBtn, 'Creating…', () => api.createQueue(queueName, Object.keys(settings).length ? settings : undefined));
      ctx.toast(`Queue ${queue.queue_name} created.`);
      ctx.navigate(`#/queues/${queue.queue_id}`);
    } catch (err) {
      if (!ctx.signal.aborted) createMsg.show(describe(err));
    }
  });

  // ---- list ----
  const listMsg = notice();
  const count = h('span', { class: 'muted count' });
  const updated = h('span', { class: 'live', 'aria-hidden': 'true' });
  const tbody = h('tbody');
  const table = h('table', { class: 'table table-cards', 'aria-label': 'Queues' },
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, 'Queue'),
      h('th', { scope: 'col', class: 'num' }, 'Backlog'),
      h('th', { scope: 'col', class: 'num' }, 'In flight'),
      h('th', { scope: 'col', class: 'num' }, 'Delayed'),
      h('th', { scope: 'col', class: 'num' }, 'Oldest message'),
      h('th', { scope: 'col' }, 'Consumer'),
      h('th', { scope: 'col' }, 'Dead-letter queue'))),
    tbody);
  const empty = h('div', { class: 'empty', hidden: true },
    h('p', { class: 'empty-title' }, 'No queues yet'),
    h('p', { class: 'muted' }, 'Create a queue above, then send it a test message from its page.'));
  const loading = h('p', { class: 'muted loading' }, 'Loading queues…');
  const list = { count, table, tbody, empty, loading, ...createPager({ label: 'Queue pages' }) };

  root.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('div', null, h('h1', null, 'Queues'), h('p', { class: 'muted' }, `Every queue in this account by name, ${PER_PAGE} to a page, refreshed every few seconds.`)),
      h('div', { class: 'page-head-side' }, updated)),
    h('div', { class: 'card' }, form),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-head' }, h('h2', null, 'All queues'), count),
      listMsg.el, loading, h('div', { class: 'table-wrap' }, table), empty, list.pager)));

  function row(s, q) {
    const paused = q && q.settings && q.settings.delivery_paused;
    const consumer = q && q.consumers && q.consumers[0];
    const isDlq = s.dead_letter_sources && s.dead_letter_sources.length > 0;
    const link = h('a', { href: `#/queues/${s.queue_id}`, class: 'queue-link' }, s.queue_name);
    const nameCell = h('td', { 'data-label': 'Queue', class: 'cell-name' }, link,
      paused ? badge('Paused', 'warning') : null,
      isDlq ? badge('Dead-letter', 'neutral') : null,
      consumer ? endpointBadge(consumer.health) : null);
    let dlq = h('span', { class: 'muted' }, '—');
    if (s.dead_letter_queue) {
      dlq = h('span', null, s.dead_letter_queue, ' ',
        h('span', { class: s.dead_letter_backlog_count ? 'pill pill-warning' : 'pill', title: 'Messages waiting in the dead-letter queue' },
          num(s.dead_letter_backlog_count ?? 0)));
    }
    return h('tr', { dataset: { queue: s.queue_name } },
      nameCell,
      h('td', { class: 'num', 'data-label': 'Backlog' }, h('span', { class: 'value' }, num(s.backlog_count)),
        s.backlog_bytes ? h('span', { class: 'sub' }, bytes(s.backlog_bytes)) : null),
      h('td', { class: 'num', 'data-label': 'In flight' }, num(s.in_flight_count)),
      h('td', { class: 'num', 'data-label': 'Delayed' }, num(s.delayed_count)),
      h('td', { class: 'num', 'data-label': 'Oldest message', title: s.oldest_message_timestamp_ms ? new Date(s.oldest_message_timestamp_ms).toLocaleString() : 'No messages' },
        s.oldest_message_timestamp_ms ? age(s.oldest_message_timestamp_ms) : h('span', { class: 'muted' }, '—')),
      h('td', { 'data-label': 'Consumer' }, consumer ? (consumer.type === 'webhook' ? 'Webhook' : 'HTTP pull') : h('span', { class: 'muted' }, 'None')),
      h('td', { 'data-label': 'Dead-letter queue' }, dlq));
  }

  livePages({
    ctx,
    route: 'queues',
    page,
    perPage: PER_PAGE,
    refreshMs: REFRESH_MS,
    list,
    msg: listMsg,
    updated,
    read: async (asked, perPage) => {
      const { items, info } = await api.statsPage(asked, perPage);
      // The page's settings and consumers, for the badges: the queues of this page only.
      const queues = await api.queuesNamed(items.map((s) => s.queue_name));
      return { items, info, byId: new Map(queues.map((q) => [q.queue_id, q])) };
    },
    rows: ({ items, byId }) => items.map((s) => row(s, byId.get(s.queue_id))),
    noun: ['queue', 'queues'],
  });

  name.focus();
  return null;
}
