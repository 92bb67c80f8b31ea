// The account's topics (#/topics, a skiplock extension): a topic binds queues of the account by
// routing-key pattern, and a publish to it with a routing key stores a copy in every queue it matches.
// A form to create one (by name; its page opens, to bind queues), and the list, by name, a page at a time
// (the page in the address), refreshed every few seconds: each topic's name (linked to its page), its
// number of bindings and its creation, with delete.

import { h, field, notice, num } from '../lib/dom.js';
import { createPagedTable, livePages } from '../lib/paged-table.js';
import { invalid, onCreate } from '../lib/create-form.js';
import { whenEl } from '../lib/times.js';
import { NAME_RE } from './queues.js';
import { deleteTopicQuestion } from './topic/words.js';

/** Topics on a page of the list. */
export const PER_PAGE = 50;
const REFRESH_MS = 5000;

/** `page` is the page of the list to show first, from 1 (the address's `?page=`). */
export function renderTopics(root, ctx, page = 1) {
  ctx.setTitle('Topics');
  const { api } = ctx;

  // ---- create form ----
  const name = h('input', { type: 'text', required: true, maxlength: '63', autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. orders' });
  const createMsg = notice();
  const createBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create topic');
  const form = h('form', { class: 'stack', novalidate: true, 'aria-label': 'Create a topic' },
    h('div', { class: 'inline-form' },
      field('New topic name', name, { hint: 'Lowercase letters, digits and hyphens; up to 63 characters. Its page opens, to bind queues to it.' }),
      h('div', { class: 'inline-submit' }, createBtn)),
    createMsg.el);

  onCreate(form, {
    ctx,
    msg: createMsg,
    button: createBtn,
    fields: [['name', name]],
    check: () => {
      name.removeAttribute('aria-invalid');
      const topicName = name.value.trim();
      if (!NAME_RE.test(topicName)) throw invalid(name, 'A topic name is 1 to 63 characters: lowercase letters a-z, digits and hyphens.');
      return topicName;
    },
    send: (topicName) => api.createTopic(topicName),
    created: (made) => {
      ctx.toast(`Topic ${made.name} created.`);
      ctx.navigate(`#/topics/${made.id}`);
    },
    // A name taken is a 409, told as the server words it: mark the name.
    refused: (err) => {
      if (err.kind === 'conflict') name.setAttribute('aria-invalid', 'true');
    },
  });

  // ---- list ----
  const listMsg = notice();
  const updated = h('span', { class: 'live', 'aria-hidden': 'true' });
  const list = createPagedTable({
    label: 'Topics',
    columns: ['Topic', 'Bindings', 'Created', 'Actions'],
    loadingText: 'Loading topics…',
    empty: [h('p', { class: 'empty-title' }, 'No topics yet'),
      h('p', { class: 'muted' }, 'Create one above, then bind queues to it by routing-key pattern on its page.')],
    pagerLabel: 'Topic pages',
  });

  function row(t) {
    const remove = h('button', { type: 'button', class: 'btn btn-danger-outline btn-sm', 'aria-label': `Delete the topic ${t.name}` }, 'Delete…');
    remove.addEventListener('click', () => live.act(remove, {
      label: 'Deleting…',
      work: () => api.deleteTopic(t.id),
      done: `Topic ${t.name} deleted.`,
      confirm: deleteTopicQuestion(t),
    }));
    return h('tr', { dataset: { topic: t.id } },
      h('td', { 'data-label': 'Topic', class: 'cell-name' }, h('a', { href: `#/topics/${t.id}`, class: 'topic-link' }, t.name)),
      h('td', { 'data-label': 'Bindings' }, num(t.binding_count)),
      h('td', { 'data-label': 'Created' }, whenEl(t.created_at)),
      h('td', { class: 'actions-col' }, h('div', { class: 'row-actions' }, remove)));
  }

  const live = livePages({
    ctx,
    route: 'topics',
    page,
    perPage: PER_PAGE,
    refreshMs: REFRESH_MS,
    list,
    msg: listMsg,
    updated,
    read: (asked, perPage) => api.listTopics(asked, perPage),
    rows: ({ items }) => items.map(row),
    noun: ['topic', 'topics'],
  });

  root.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('div', null, h('h1', null, 'Topics'),
        h('p', { class: 'muted' }, 'A topic binds your queues by routing-key pattern: a message published to it with a routing key '
          + `is stored in every queue it matches, in one commit. By name, ${PER_PAGE} to a page, refreshed every few seconds.`),
        h('p', { class: 'muted' }, 'A routing key is dot-separated words (orders.eu.created); in a pattern, * matches exactly one word '
          + 'and # zero or more (orders.*.created, orders.#).')),
      h('div', { class: 'page-head-side' }, updated)),
    h('div', { class: 'card' }, form),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-head' }, h('h2', null, 'All topics'), list.count),
      listMsg.el, list.loading, h('div', { class: 'table-wrap' }, list.table), list.empty, list.pager)));

  name.focus();
  return null;
}
