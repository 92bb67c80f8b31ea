// The account's audit log (#/audit): who changed what in its configuration (queues, consumers, tokens,
// redrives, schedules, and the operator's changes to the account), newest first, a page at a time, filtered by
// action and by a time range. The filters and the page are kept in the address
// (#/audit?action=..&since=..&before=..&page=.., each optional; the times in RFC 3339, UTC), so a
// filtered list can be shared and Back returns to the one before. The entries are drawn by
// views/audit/entries.js, which the operator's account page uses too.

import { h, field, notice } from '../lib/dom.js';
import { localValue, rfc3339 } from '../lib/times.js';
import { ACTION_TYPES, actionSelect, actorIs, createAuditList } from './audit/entries.js';

/** An RFC 3339 time as the server takes it (seconds required; a fraction and any offset allowed). */
const RFC3339_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i;

const validTime = (value) => RFC3339_RE.test(value) && !Number.isNaN(Date.parse(value));

/** The page's query from the address's text after `?`: {action, since, before, page}; what is not valid is left out. */
export function auditQuery(text) {
  const params = new URLSearchParams(text || '');
  const action = params.get('action') || '';
  const since = params.get('since') || '';
  const before = params.get('before') || '';
  const page = Number(params.get('page'));
  return {
    action: ACTION_TYPES.includes(action) ? action : '',
    since: validTime(since) ? since : '',
    before: validTime(before) ? before : '',
    page: Number.isInteger(page) && page >= 1 && page < 1e9 ? page : 1,
  };
}

/** The page's address with these filters (the defaults left out). */
function auditHash({ action, since, before, page }) {
  const params = new URLSearchParams();
  if (action) params.set('action', action);
  if (since) params.set('since', since);
  if (before) params.set('before', before);
  if (page > 1) params.set('page', String(page));
  const text = params.toString();
  return text ? `#/audit?${text}` : '#/audit';
}

/** `query` is {action, since, before, page} from the address. */
export function renderAudit(root, ctx, query) {
  ctx.setTitle('Audit log');
  const { api, session } = ctx;
  let { action, since, before } = query;
  const filters = () => ({ action, since, before });
  const isFiltered = () => Boolean(action || since || before);

  // The account's queues (id → name, the first 1000): an entry's queue is linked to its page while it
  // exists. A token that may not list them gets no links (and is not asked again).
  let queues = new Map();
  let mayListQueues = true;

  // ---- filter ----
  const select = actionSelect('Any action', action);
  const fromInput = h('input', { type: 'datetime-local', step: '60', value: localValue(since) });
  const toInput = h('input', { type: 'datetime-local', step: '60', value: localValue(before) });
  const filterBtn = h('button', { type: 'submit', class: 'btn' }, 'Filter');
  const clearBtn = h('button', { type: 'button', class: 'btn btn-ghost', hidden: !isFiltered() }, 'Clear filters');
  const filterMsg = notice();
  const filter = h('form', { class: 'filter-form', novalidate: true, role: 'search', 'aria-label': 'Filter the audit log' },
    field('Action', select),
    field('From', fromInput, { hint: 'At or after, in this browser\'s time zone.' }),
    field('To', toInput, { hint: 'Before this time.' }),
    h('div', { class: 'inline-submit form-actions' }, filterBtn, clearBtn));

  /** The filters the form holds; throws an Error saying what to fix. */
  function chosen() {
    fromInput.removeAttribute('aria-invalid');
    toInput.removeAttribute('aria-invalid');
    const next = { action: select.value, since: rfc3339(fromInput, 'From'), before: rfc3339(toInput, 'To') };
    if (next.since && next.before && Date.parse(next.since) >= Date.parse(next.before)) {
      toInput.setAttribute('aria-invalid', 'true');
      throw new Error('The end of the range (To) must be after its start (From).');
    }
    return next;
  }

  /** Shows the first page with the form's filters. */
  function apply() {
    filterMsg.clear();
    let next;
    try {
      next = chosen();
    } catch (err) {
      filterMsg.show(err.message);
      return;
    }
    ({ action, since, before } = next);
    clearBtn.hidden = !isFiltered();
    list.go(1);
  }

  filter.addEventListener('submit', (e) => {
    e.preventDefault();
    apply();
  });
  select.addEventListener('change', apply);
  clearBtn.addEventListener('click', () => {
    select.value = '';
    fromInput.value = '';
    toInput.value = '';
    apply();
    select.focus();
  });

  // ---- list ----
  const list = createAuditList({
    ctx,
    label: 'Audit log entries',
    pagerLabel: 'Audit log pages',
    page: query.page,
    filtered: isFiltered,
    empty: {
      title: 'No entries yet',
      text: 'Changes to this account\'s queues, consumers, tokens and schedules show here as they are made.',
      filtered: 'Change the filter, or clear it to see every entry.',
    },
    read: async (page, perPage) => {
      const got = await api.listAuditLogs({ ...filters(), page, perPage });
      // The queues, for the links, when the page has entries of queues or their consumers.
      if (mayListQueues && got.items.some((e) => e.resource && ['queue', 'consumer', 'schedule'].includes(e.resource.type))) {
        try {
          queues = new Map((await api.listQueues()).map((q) => [q.queue_id, q.queue_name]));
        } catch (err) {
          queues = new Map();
          if (err.kind === 'forbidden') mayListQueues = false;
        }
      }
      return got;
    },
    onPage: (page, { replace }) => {
      const hash = auditHash({ ...filters(), page });
      if (replace) history.replaceState(null, '', hash);
      else if (hash !== location.hash) history.pushState(null, '', hash);
    },
    entry: {
      isMine: actorIs(session && session.tokenId),
      linkFor: (queueId) => (queues.has(queueId) ? `#/queues/${queueId}` : null),
      nameFor: (queueId) => queues.get(queueId),
    },
  });

  root.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('div', null, h('h1', null, 'Audit log'),
        h('p', { class: 'muted' }, 'Who changed what in this account, newest first: its queues, consumers, tokens, redrives and schedules, and '
          + 'the operator\'s changes to the account. Messages sent, pulled or acknowledged are not recorded. Entries are kept 90 days.'))),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-head' }, h('h2', null, 'Entries'), h('div', { class: 'card-head-side' }, list.count, list.refreshBtn)),
      h('div', { class: 'card-filter' }, filter, filterMsg.el),
      list.els)));

  list.load();
  return null;
}
