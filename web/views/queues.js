// The queue list, a page at a time by name: counts by state, oldest message age, dead-letter depth, a
// webhook endpoint failing or its circuit open; create a queue.

import { h, field, notice, num, bytes, age, badge, busy } from '../lib/dom.js';
import { describe } from '../lib/api.js';
import { createPager, pageRange } from '../lib/paged-table.js';
import { endpointBadge } from './queue/attempt-words.js';

const NAME_RE = /^[a-z0-9-]{1,63}$/;
/** Queues on a page of the list. */
export const PER_PAGE = 50;

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
  const { prev, next, pager, holdPage, showPage } = createPager({ label: 'Queue pages' });

  root.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('div', null, h('h1', null, 'Queues'), h('p', { class: 'muted' }, `Every queue in this account by name, ${PER_PAGE} to a page, refreshed every few seconds.`)),
      h('div', { class: 'page-head-side' }, updated)),
    h('div', { class: 'card' }, form),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-head' }, h('h2', null, 'All queues'), count),
      listMsg.el, loading, h('div', { class: 'table-wrap' }, table), empty, pager)));

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

  /** Shows page `to` (the address follows, so Back returns to the page before). */
  function go(to, { replace = false } = {}) {
    page = to;
    const hash = page > 1 ? `#/queues?page=${page}` : '#/queues';
    if (replace) history.replaceState(null, '', hash);
    else history.pushState(null, '', hash);
    holdPage();
    poller.now();
  }
  prev.addEventListener('click', () => go(page - 1));
  next.addEventListener('click', () => go(page + 1));

  const poller = ctx.poll(5000, async () => {
    const asked = page;
    let stats;
    let info;
    let queues = [];
    try {
      ({ items: stats, info } = await api.statsPage(asked, PER_PAGE));
      // The page's settings and consumers, for the badges: the queues of this page only.
      queues = await api.queuesNamed(stats.map((s) => s.queue_name));
    } catch (err) {
      if (ctx.signal.aborted) return;
      loading.hidden = true;
      updated.textContent = 'Not updating';
      updated.classList.add('live-stale');
      if (err.kind === 'network' || err.kind === 'timeout') throw err;
      listMsg.show(describe(err));
      return;
    }
    if (ctx.signal.aborted || asked !== page) return; // another page was asked for meanwhile
    if (stats.length === 0 && info.total_pages > 0 && page > info.total_pages) {
      // Past the end (queues deleted, or an old address): the last page instead.
      go(info.total_pages, { replace: true });
      return;
    }
    listMsg.clear();
    loading.hidden = true;
    const byId = new Map(queues.map((q) => [q.queue_id, q]));
    tbody.replaceChildren(...stats.map((s) => row(s, byId.get(s.queue_id))));
    table.hidden = stats.length === 0;
    empty.hidden = info.total_count !== 0;
    count.textContent = info.total_count ? `${pageRange(info, stats.length)} ${info.total_count === 1 ? 'queue' : 'queues'}` : '';
    showPage(info);
    updated.textContent = `Live · updated ${new Date().toLocaleTimeString()}`;
    updated.classList.remove('live-stale');
  });

  name.focus();
  return null;
}
