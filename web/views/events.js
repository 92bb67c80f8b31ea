// The account's event subscriptions (#/events, Cloudflare's event subscriptions with skiplock's queues as
// sources): what happens to a queue (or to every queue of the account) published as JSON messages into a
// destination queue. A form to create one (views/events/form.js), and the list, oldest first, a page at a
// time (the page in the address), refreshed every few seconds: each one's name, source, events,
// destination, state and creation, with enable or disable, and delete.

import { h, notice, num, badge } from '../lib/dom.js';
import { createPagedTable, livePages } from '../lib/paged-table.js';
import { createQueueNames, queueLink } from '../lib/queue-names.js';
import { whenEl } from '../lib/times.js';
import { createSubscriptionForm } from './events/form.js';
import { BACKLOG_EVENT, sourceQueueId, sourceWords, eventsWords } from './events/words.js';

/** Subscriptions on a page of the list. */
export const PER_PAGE = 50;
const REFRESH_MS = 5000;

/** `page` is the page of the list to show first, from 1 (the address's `?page=`). */
export function renderEvents(root, ctx, page = 1) {
  ctx.setTitle('Events');
  const { api } = ctx;

  // The account's queues, id → name: the form's choices and the list's source and destination names.
  let queues = new Map();

  // ---- create form ----
  const form = createSubscriptionForm({
    ctx,
    onCreated: () => {
      ctx.toast('Subscription created.');
      live.now();
    },
    refreshQueues: () => queueNames.ready(true),
  });

  const queueNames = createQueueNames({
    ctx,
    onRead: (names) => {
      queues = names;
      form.setQueues(names);
    },
    onError: (text) => form.showError(text),
  });

  // ---- list ----
  const listMsg = notice();
  const updated = h('span', { class: 'live', 'aria-hidden': 'true' });
  const list = createPagedTable({
    label: 'Event subscriptions',
    columns: ['Name', 'Source', 'Events', 'Destination', 'State', 'Created', 'Actions'],
    loadingText: 'Loading subscriptions…',
    empty: [h('p', { class: 'empty-title' }, 'No subscriptions yet'),
      h('p', { class: 'muted' }, 'Create one above: its events are published into the destination queue.')],
    pagerLabel: 'Subscription pages',
  });

  /** A queue's name (or the name the answer carries) linked to its page. */
  function queueLabel(queueId, fallbackName = null) {
    return queueLink(queueId, queues.get(queueId) || fallbackName);
  }

  function sourceCell(s) {
    const queueId = sourceQueueId(s.source);
    return h('td', { 'data-label': 'Source' },
      queueId ? queueLabel(queueId, s.source.queue_name) : h('span', { class: 'muted' }, 'Every queue'));
  }

  function eventsCell(s) {
    return h('td', { 'data-label': 'Events' }, h('ul', { class: 'event-types' }, s.events.map((type) => h('li', null,
      h('code', null, type),
      type === BACKLOG_EVENT && s.source.backlog_threshold
        ? h('span', { class: 'muted' }, ` over ${num(s.source.backlog_threshold)}`)
        : null))));
  }

  function row(s) {
    const what = `${s.name} (${eventsWords(s)} of ${sourceWords(s.source, queues)})`;
    const toggle = h('button', { type: 'button', class: 'btn btn-sm', 'aria-label': `${s.enabled ? 'Disable' : 'Enable'} the subscription ${what}` },
      s.enabled ? 'Disable' : 'Enable');
    toggle.addEventListener('click', () => live.act(toggle, {
      label: s.enabled ? 'Disabling…' : 'Enabling…',
      work: () => api.updateEventSubscription(s.id, { enabled: !s.enabled }),
      done: s.enabled ? 'Subscription disabled.' : 'Subscription enabled.',
    }));
    const remove = h('button', { type: 'button', class: 'btn btn-danger-outline btn-sm', 'aria-label': `Delete the subscription ${what}` }, 'Delete…');
    remove.addEventListener('click', () => live.act(remove, {
      label: 'Deleting…',
      work: () => api.deleteEventSubscription(s.id),
      done: 'Subscription deleted.',
      confirm: {
        title: 'Delete this subscription?',
        message: `No more events of ${sourceWords(s.source, queues)} are published into ${queues.get(s.destination.queue_id) || 'its destination queue'}. `
          + 'The events already published stay in the queue.',
        confirmLabel: 'Delete subscription',
      },
    }));
    return h('tr', { dataset: { subscription: s.id } },
      h('td', { 'data-label': 'Name', class: 'cell-name' }, h('span', { class: 'subscription-name' }, s.name)),
      sourceCell(s),
      eventsCell(s),
      h('td', { 'data-label': 'Destination' }, queueLabel(s.destination.queue_id)),
      h('td', { 'data-label': 'State' }, s.enabled ? badge('Enabled', 'success') : badge('Disabled', 'warning')),
      h('td', { 'data-label': 'Created' }, whenEl(s.created_at)),
      h('td', { class: 'actions-col' }, h('div', { class: 'row-actions' }, toggle, remove)));
  }

  const live = livePages({
    ctx,
    route: 'events',
    page,
    perPage: PER_PAGE,
    refreshMs: REFRESH_MS,
    list,
    msg: listMsg,
    updated,
    read: queueNames.naming((asked, perPage) => api.listEventSubscriptions(asked, perPage),
      (s) => [sourceQueueId(s.source), s.destination && s.destination.queue_id]),
    rows: ({ items }) => items.map(row),
    noun: ['subscription', 'subscriptions'],
  });

  root.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('div', null, h('h1', null, 'Events'),
        h('p', { class: 'muted' }, 'What happens to your queues, published as events into a queue of yours. '
          + `Oldest first, ${PER_PAGE} to a page, refreshed every few seconds.`),
        h('p', { class: 'muted' }, 'Each event arrives in the destination queue as a JSON message in Cloudflare\'s event envelope '
          + '(type, source, payload, metadata), so any consumer of that queue, pull or webhook, reads it.')),
      h('div', { class: 'page-head-side' }, updated)),
    h('div', { class: 'card' }, form.el),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-head' }, h('h2', null, 'All subscriptions'), list.count),
      listMsg.el, list.loading, h('div', { class: 'table-wrap' }, list.table), list.empty, list.pager)));

  return null;
}
