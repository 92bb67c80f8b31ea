// A topic page's bindings (views/topic.js): the list, each binding's queue (linked to its page), pattern,
// filter (one `name=value1|value2` a line) and creation, with delete; and the form that binds a queue,
// picked from the account's queues by name, by a pattern and an optional filter given as JSON.

import { h, field, notice } from '../../lib/dom.js';
import { invalid, onCreate } from '../../lib/create-form.js';
import { createPagedTable, rowAction } from '../../lib/paged-table.js';
import { createQueueNames, createQueueSelect, fillQueueSelect, queueLink } from '../../lib/queue-names.js';
import { whenEl } from '../../lib/times.js';
import { MAX_KEY, PATTERN_RE, filterLines, readObject } from './words.js';

/**
 * The bindings of the topic `topicId`. `refresh()` reads the topic again (after a binding is added or
 * deleted). Returns {els, show}: `show(topic)` lists the bindings of the topic as read.
 */
export function createBindings({ ctx, topicId, refresh }) {
  const { api } = ctx;
  let queues = new Map();

  // ---- list ----
  const listMsg = notice();
  const list = createPagedTable({
    label: 'Bindings',
    columns: ['Queue', 'Pattern', 'Filter', 'Created', 'Actions'],
    loadingText: 'Loading bindings…',
    empty: [h('p', { class: 'empty-title' }, 'No bindings yet'),
      h('p', { class: 'muted' }, 'Bind a queue below: a publish whose routing key matches its pattern is stored in it.')],
  });
  const act = rowAction({ ctx, msg: listMsg, refresh });

  function filterCell(b) {
    const lines = filterLines(b.filter);
    if (!lines.length) return h('td', { 'data-label': 'Filter' }, h('span', { class: 'muted' }, 'Any attributes'));
    return h('td', { 'data-label': 'Filter', title: JSON.stringify(b.filter) },
      h('ul', { class: 'binding-filter' }, lines.map((line) => h('li', null, h('code', null, line)))));
  }

  function row(b) {
    const what = `${b.pattern} to ${b.queue_name}`;
    const remove = h('button', { type: 'button', class: 'btn btn-danger-outline btn-sm', 'aria-label': `Delete the binding ${what}` }, 'Delete…');
    remove.addEventListener('click', () => act(remove, {
      label: 'Deleting…',
      work: () => api.deleteBinding(topicId, b.id),
      done: 'Binding deleted.',
      confirm: {
        title: 'Delete this binding?',
        message: `Messages published with a routing key matching ${b.pattern} no longer reach ${b.queue_name} through this binding. `
          + 'The messages it already stored stay in the queue.',
        confirmLabel: 'Delete binding',
      },
    }));
    return h('tr', { dataset: { binding: b.id } },
      h('td', { 'data-label': 'Queue', class: 'cell-name' }, queueLink(b.queue_id, b.queue_name)),
      h('td', { 'data-label': 'Pattern' }, h('code', { class: 'break' }, b.pattern)),
      filterCell(b),
      h('td', { 'data-label': 'Created' }, whenEl(b.created_at)),
      h('td', { class: 'actions-col' }, h('div', { class: 'row-actions' }, remove)));
  }

  function show(topic) {
    const bindings = topic.bindings || [];
    list.loading.hidden = true;
    list.tbody.replaceChildren(...bindings.map(row));
    list.table.hidden = bindings.length === 0;
    list.empty.hidden = bindings.length !== 0;
    list.count.textContent = bindings.length ? `${bindings.length} ${bindings.length === 1 ? 'binding' : 'bindings'}` : '';
  }

  // ---- form ----
  const queueSelect = createQueueSelect();
  const pattern = h('input', { type: 'text', class: 'mono', required: true, maxlength: String(MAX_KEY), spellcheck: 'false', autocomplete: 'off', placeholder: 'orders.*.created' });
  const filter = h('textarea', { rows: '2', class: 'mono', spellcheck: 'false', placeholder: '{"region": ["eu", "us"]}' });
  const createBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Add binding');
  const createMsg = notice();
  const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'add-binding-title' },
    h('h2', { id: 'add-binding-title' }, 'Bind a queue'),
    h('div', { class: 'form-grid' },
      field('Queue', queueSelect, { hint: 'Each publish this binding matches stores a copy in this queue.' }),
      field('Pattern', pattern, { hint: 'Dot-separated words; * matches exactly one word, # zero or more (orders.*.created, orders.#).' })),
    field('Filter (optional)', filter, {
      wide: true,
      hint: 'A JSON object: each attribute a publish must carry, with the values it may take (a string or a list). Empty: any attributes.',
    }),
    h('div', { class: 'form-actions' }, createBtn),
    createMsg.el);

  const queueNames = createQueueNames({
    ctx,
    onRead: (names) => {
      queues = names;
      fillQueueSelect(queueSelect, queues);
    },
    onError: (text) => createMsg.show(text),
  });
  queueNames.ready();

  /** The form's binding, as the API takes it; throws an Error saying what to fix. */
  function chosen() {
    for (const input of [queueSelect, pattern, filter]) input.removeAttribute('aria-invalid');
    if (!queueSelect.value) {
      throw invalid(queueSelect, queues.size ? 'Choose the queue to bind.' : 'Create a queue first: a topic binds queues of the account.');
    }
    const text = pattern.value.trim();
    if (!text) throw invalid(pattern, 'Give a pattern, such as orders.*.created.');
    if (text.length > MAX_KEY || !PATTERN_RE.test(text)) {
      throw invalid(pattern, `A pattern is 1 to ${MAX_KEY} characters: words of letters, digits, _ and -, or * or #, separated by single dots.`);
    }
    const binding = { queue_id: queueSelect.value, pattern: text };
    const attributes = readObject(filter, 'The filter');
    if (attributes !== undefined) binding.filter = attributes;
    return binding;
  }

  onCreate(form, {
    ctx,
    msg: createMsg,
    button: createBtn,
    busyLabel: 'Adding…',
    fields: [['queue_id', queueSelect], ['pattern', pattern], ['filter', filter]],
    check: chosen,
    send: (binding) => api.createBinding(topicId, binding),
    created: (made) => {
      createMsg.show(`Bound ${made.queue_name || queues.get(made.queue_id) || 'the queue'} by ${made.pattern}.`, 'success');
      ctx.toast('Binding added.');
      refresh();
    },
    // A queue picked here was deleted since the list was read: read it again, so it is no longer offered.
    refused: (err) => {
      if (err.kind === 'not_found') queueNames.ready(true);
    },
  });

  const els = [
    h('section', { class: 'card card-flush', 'aria-labelledby': 'bindings-title' },
      h('div', { class: 'card-head' }, h('h2', { id: 'bindings-title' }, 'Bindings'), list.count),
      listMsg.el, list.loading, h('div', { class: 'table-wrap' }, list.table), list.empty),
    h('section', { class: 'card' }, form),
  ];

  return { els, show };
}
