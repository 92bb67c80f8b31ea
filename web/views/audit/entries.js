// The audit log's entries, as the tenant's audit page (views/audit.js) and the operator's account page
// (views/operator/account-audit.js) both show them: a page of entries, newest first, in a table (when,
// action, resource, actor), each with a "What changed" disclosure (the fields changed, and the values
// before and after as JSON), a pager and the count. The page hands in how to read a page of them.

import { h, id, notice, num, badge, busy } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { createPagedTable, pageRange } from '../../lib/paged-table.js';
import { whenEl } from '../../lib/times.js';

/** Entries on a page of the log. */
export const PER_PAGE = 20;

/** Every action the log records, in words: [type, words]. */
export const ACTIONS = [
  ['queue.create', 'Queue created'],
  ['queue.update', 'Queue settings changed'],
  ['queue.purge', 'Queue purged'],
  ['queue.delete', 'Queue deleted'],
  ['consumer.create', 'Consumer added'],
  ['consumer.update', 'Consumer changed'],
  ['consumer.delete', 'Consumer removed'],
  ['consumer.rotate_secret', 'Consumer signing secret rotated'],
  ['token.create', 'Token created'],
  ['token.revoke', 'Token revoked'],
  ['redrive.start', 'Redrive started'],
  ['redrive.cancel', 'Redrive cancelled'],
  ['schedule.create', 'Schedule created'],
  ['schedule.update', 'Schedule changed'],
  ['schedule.pause', 'Schedule paused'],
  ['schedule.resume', 'Schedule resumed'],
  ['schedule.delete', 'Schedule deleted'],
  ['event_subscription.create', 'Event subscription created'],
  ['event_subscription.update', 'Event subscription changed'],
  ['event_subscription.delete', 'Event subscription deleted'],
  ['topic.create', 'Topic created'],
  ['topic.delete', 'Topic deleted'],
  ['topic_binding.create', 'Topic binding added'],
  ['topic_binding.delete', 'Topic binding deleted'],
  ['flow_key.update', 'Flow key limits set'],
  ['flow_key.pause', 'Flow key paused'],
  ['flow_key.resume', 'Flow key resumed'],
  ['flow_key.delete', 'Flow key limits removed'],
  ['account.create', 'Account created'],
  ['account.update', 'Account changed'],
  ['account.suspend', 'Account suspended'],
  ['account.resume', 'Account resumed'],
  ['account.delete', 'Account deleted'],
];
export const ACTION_TYPES = ACTIONS.map(([type]) => type);

/** The kinds of resource, in words (the select's groups, and the table's resource column). */
const RESOURCES = {
  queue: ['Queue', 'Queues'],
  consumer: ['Consumer', 'Consumers'],
  token: ['Token', 'Tokens'],
  redrive: ['Redrive', 'Redrives'],
  schedule: ['Schedule', 'Schedules'],
  event_subscription: ['Event subscription', 'Event subscriptions'],
  topic: ['Topic', 'Topics'],
  topic_binding: ['Topic binding', 'Topic bindings'],
  flow_key: ['Flow key', 'Flow keys'],
  account: ['Account', 'Account'],
};

/** The words for an action ('' for one this dashboard does not know). */
function actionWords(type) {
  const known = ACTIONS.find(([t]) => t === type);
  return known ? known[1] : '';
}

/** A <select> of the actions, grouped by resource, with a first option '' labelled `any`. */
export function actionSelect(any, value = '') {
  const groups = new Map();
  for (const [type, words] of ACTIONS) {
    const kind = type.split('.')[0];
    if (!groups.has(kind)) groups.set(kind, []);
    groups.get(kind).push(h('option', { value: type }, `${type} · ${words}`));
  }
  const select = h('select', null,
    h('option', { value: '' }, any),
    [...groups].map(([kind, options]) => h('optgroup', { label: RESOURCES[kind] ? RESOURCES[kind][1] : kind }, options)));
  select.value = value;
  return select;
}

/** An id shortened for a table (the full id is its title). */
function shortId(value) {
  const text = String(value ?? '');
  return text.length > 12 ? `${text.slice(0, 8)}…` : text;
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const text = (v) => (typeof v === 'string' && v ? v : null);
/** Ids compared as the server may write them (with or without hyphens, any case). */
const sameId = (a, b) => Boolean(a && b) && String(a).replace(/-/g, '').toLowerCase() === String(b).replace(/-/g, '').toLowerCase();

/** The values the entry records (after, else before), for the names they hold. */
function valuesOf(entry) {
  if (isObject(entry.newValueJson)) return entry.newValueJson;
  if (isObject(entry.oldValueJson)) return entry.oldValueJson;
  return {};
}

/**
 * The queue an entry is about, when it is about one: a queue's own entry, or a consumer's, a schedule's
 * or a topic binding's (its queue), or a flow key's (its id is the queue's, a slash, and the key). {id, name}; the
 * name from the values, else from `nameFor(id)`.
 */
function queueOf(entry, nameFor) {
  const resource = entry.resource || {};
  const values = valuesOf(entry);
  let queueId = null;
  if (resource.type === 'queue') queueId = text(resource.id) || text(values.queue_id);
  else if (['consumer', 'schedule', 'topic_binding'].includes(resource.type)) queueId = text(values.queue_id);
  else if (resource.type === 'flow_key' && text(resource.id) && resource.id.includes('/')) {
    queueId = resource.id.slice(0, resource.id.indexOf('/')).replace(/-/g, '').toLowerCase();
  }
  if (!queueId) return null;
  return { id: queueId, name: text(values.queue_name) || (nameFor ? text(nameFor(queueId)) : null) };
}

/** The resource's name as the entry records it (a queue's, a token's, an account's, a subscription's, a topic's, a binding's pattern), or null. */
function resourceName(entry, nameFor) {
  const resource = entry.resource || {};
  const values = valuesOf(entry);
  switch (resource.type) {
    case 'queue':
      return (queueOf(entry, nameFor) || {}).name || null;
    case 'token':
    case 'account':
    case 'event_subscription':
    case 'topic':
      return text(values.name);
    case 'topic_binding':
      return text(values.pattern);
    case 'flow_key':
      return text(values.flow_control_key);
    default:
      return null;
  }
}

/** The fields of a value, one level into its objects ("settings.delivery_delay"): [[path, value]]. */
function fieldsOf(value) {
  if (value === null || value === undefined) return [];
  if (!isObject(value)) return [['(value)', value]];
  const out = [];
  for (const [key, v] of Object.entries(value)) {
    if (isObject(v)) {
      for (const [inner, w] of Object.entries(v)) out.push([`${key}.${inner}`, w]);
    } else {
      out.push([key, v]);
    }
  }
  return out;
}

/** A value on one line, as JSON; long ones cut (the whole is in the JSON below). */
function compact(value) {
  const json = JSON.stringify(value);
  const line = json === undefined ? String(value) : json;
  return line.length > 160 ? `${line.slice(0, 157)}…` : line;
}

const absent = () => h('span', { class: 'muted' }, '—');

/** What the entry says changed, in short: the new values, the old ones, or the fields that differ. */
function summary(before, after) {
  const list = h('dl', { class: 'audit-diff' });
  const row = (key, value) => [h('dt', null, h('code', null, key)), h('dd', null, value)];
  if (before === null || before === undefined) {
    const fields = fieldsOf(after);
    list.append(...fields.flatMap(([key, v]) => row(key, h('ins', null, compact(v)))));
    return [h('p', { class: 'audit-summary-title' }, 'Values set'), fields.length ? list : h('p', { class: 'muted small' }, 'None.')];
  }
  if (after === null || after === undefined) {
    const fields = fieldsOf(before);
    list.append(...fields.flatMap(([key, v]) => row(key, h('del', null, compact(v)))));
    return [h('p', { class: 'audit-summary-title' }, 'Values before'), fields.length ? list : h('p', { class: 'muted small' }, 'None.')];
  }
  const was = new Map(fieldsOf(before));
  const now = new Map(fieldsOf(after));
  const keys = [...new Set([...was.keys(), ...now.keys()])]
    .filter((key) => JSON.stringify(was.get(key)) !== JSON.stringify(now.get(key)));
  list.append(...keys.flatMap((key) => row(key, [
    was.has(key) ? h('del', null, compact(was.get(key))) : absent(),
    h('span', { class: 'audit-arrow', 'aria-hidden': 'true' }, ' → '),
    h('span', { class: 'visually-hidden' }, ' changed to '),
    now.has(key) ? h('ins', null, compact(now.get(key))) : absent(),
  ])));
  return [h('p', { class: 'audit-summary-title' }, keys.length === 1 ? '1 field changed' : `${num(keys.length)} fields changed`),
    keys.length ? list : h('p', { class: 'muted small' }, 'No field differs.')];
}

/** One side of the change, pretty-printed JSON (as text: nothing of it is markup). */
function valueFigure(caption, value, none) {
  const body = value === null || value === undefined
    ? h('p', { class: 'muted small' }, none)
    : h('pre', { class: 'audit-json', tabindex: '0' }, JSON.stringify(value, null, 2));
  return h('figure', { class: 'audit-value' }, h('figcaption', null, caption), body);
}

/** The entry's "What changed": the changed fields, both values in full, and the request it came from. */
function whatChanged(entry) {
  const before = entry.oldValueJson ?? null;
  const after = entry.newValueJson ?? null;
  const resource = entry.resource || {};
  const meta = entry.metadata || {};
  const parts = [];
  if (before === null && after === null) {
    parts.push(h('p', { class: 'muted small' }, 'No values are recorded for this action: only who did it, when, and to what.'));
  } else {
    parts.push(h('div', { class: 'audit-summary' }, summary(before, after)),
      h('div', { class: 'audit-values' },
        valueFigure('Before', before, 'Nothing recorded before the change.'),
        valueFigure('After', after, 'Nothing recorded after the change.')));
  }
  parts.push(h('p', { class: 'muted small audit-meta' },
    'Resource ID ', h('code', null, String(resource.id ?? '—')),
    ' · request ID ', h('code', null, String(meta.request_id ?? '—')),
    ' · entry ', h('code', null, String(entry.id)),
    entry.interface ? ` · through the ${entry.interface}` : null));
  return h('div', { class: 'audit-changes' }, parts);
}

/**
 * The table rows of one entry: the entry, and its "What changed" row (hidden until asked for).
 * `isMine(actor)` marks this session's own token; `linkFor(queueId)` is a queue's page (or null);
 * `nameFor(queueId)` a queue's name when the entry does not record it.
 */
function entryRows(entry, { isMine, linkFor, nameFor }) {
  const action = entry.action || {};
  const actor = entry.actor || {};
  const resource = entry.resource || {};
  const type = String(action.type ?? '');
  const words = actionWords(type);

  // ---- resource ----
  const kind = RESOURCES[resource.type] ? RESOURCES[resource.type][0] : String(resource.type ?? 'Resource');
  const queue = queueOf(entry, nameFor);
  const name = resourceName(entry, nameFor);
  const queueRef = (q) => {
    const label = q.name || shortId(q.id);
    const href = linkFor ? linkFor(q.id) : null;
    return href ? h('a', { href, class: 'queue-link' }, label) : h('span', { class: 'strong' }, label);
  };
  let what = null;
  if (resource.type === 'queue' && queue) what = queueRef(queue);
  else if (resource.type === 'consumer' && queue) what = ['of ', queueRef(queue)];
  else if (resource.type === 'schedule' && queue) what = ['to ', queueRef(queue)];
  else if (resource.type === 'topic_binding' && queue) what = [name ? [h('code', null, name), ' '] : null, 'to ', queueRef(queue)];
  else if (resource.type === 'flow_key' && queue) what = [name ? [h('code', null, name), ' '] : null, 'of ', queueRef(queue)];
  else if (resource.type === 'redrive' && text(valuesOf(entry).destination_queue)) what = `to ${valuesOf(entry).destination_queue}`;
  else if (name) what = h('span', { class: 'strong' }, name);
  const resourceId = resource.id === null || resource.id === undefined ? null : String(resource.id);

  // ---- actor ----
  const operator = actor.type === 'operator';
  const actorWord = operator ? 'Operator' : (actor.type === 'token' ? 'Token' : String(actor.type ?? 'Unknown'));
  const mine = Boolean(isMine && isMine(actor));

  // ---- what changed ----
  const detailId = id('audit');
  const cell = h('td', { colspan: '5', class: 'audit-detail-cell' });
  const detail = h('tr', { id: detailId, class: 'audit-detail', hidden: true, dataset: { auditDetail: String(entry.id) } }, cell);
  const toggle = h('button', {
    type: 'button',
    class: 'btn btn-sm audit-toggle',
    'aria-expanded': 'false',
    'aria-controls': detailId,
    'aria-label': `What changed: ${type}${name ? ` ${name}` : ''}`,
  }, 'What changed');
  toggle.addEventListener('click', () => {
    const open = toggle.getAttribute('aria-expanded') !== 'true';
    if (open && !cell.hasChildNodes()) cell.append(whatChanged(entry)); // drawn once, when first asked for
    toggle.setAttribute('aria-expanded', String(open));
    detail.hidden = !open;
  });

  const row = h('tr', { dataset: { audit: String(entry.id), action: type } },
    h('td', { 'data-label': 'When', class: 'audit-when' }, whenEl(entry.when)),
    h('td', { 'data-label': 'Action' }, h('code', null, type), words ? h('span', { class: 'sub' }, words) : null),
    h('td', { 'data-label': 'Resource' },
      h('span', { class: 'audit-kind' }, kind), what ? [' ', what] : null,
      resourceId ? h('span', { class: 'sub' }, h('code', { title: `${kind} ID ${resourceId}` }, shortId(resourceId))) : null),
    h('td', { 'data-label': 'Actor' },
      badge(actorWord, operator ? 'warning' : 'neutral'), ' ',
      h('code', { class: 'muted', title: `${actorWord} ID ${actor.id ?? '—'}` }, shortId(actor.id ?? '—')),
      mine ? [' ', badge('This session', 'info')] : null,
      actor.ip ? h('span', { class: 'sub' }, `from ${actor.ip}`) : null),
    h('td', { class: 'actions-col' }, toggle));
  return [row, detail];
}

/**
 * A page of the log at a time. `read(page, perPage)` resolves {items, info} (the server's paged list).
 * `label` names the table, `pagerLabel` its pager. `page` is the page to show first; `onPage(page,
 * {replace})` is told when another is shown (the page keeps it in its address). `filtered()` says
 * whether a filter is set (for the count and the empty list's words); `empty` is {title, text, filtered}
 * for an empty log. `entry` is {isMine, linkFor, nameFor} (see entryRows), each optional.
 *
 * Returns the count and refresh button (for the card's head), the rest of the card (`els`), `load()`
 * (the page shown, again) and `go(page)`.
 */
export function createAuditList({ ctx, read, label, pagerLabel, page = 1, onPage = null, filtered = () => false, empty, entry = {} }) {
  const msg = notice();
  const {
    count, table, tbody, empty: emptyEl, loading, prev, next, pager, holdPage, showPage,
  } = createPagedTable({
    label,
    tableClass: 'table table-cards audit-table',
    columns: ['When', 'Action', 'Resource', 'Actor', 'Details'],
    loadingText: 'Loading the audit log…',
    prevLabel: '← Newer',
    nextLabel: 'Older →',
    pagerLabel,
  });
  const refreshBtn = h('button', { type: 'button', class: 'btn btn-sm' }, 'Refresh');

  /** Shows page `to` (the page's address follows, unless it keeps none). */
  function go(to, { replace = false } = {}) {
    page = to;
    if (onPage) onPage(page, { replace });
    return load();
  }
  prev.addEventListener('click', () => go(page - 1));
  next.addEventListener('click', () => go(page + 1));
  refreshBtn.addEventListener('click', () => busy(refreshBtn, 'Refreshing…', load));

  let asked = 0; // the latest load: an older answer arriving late is dropped
  async function load() {
    asked += 1;
    const mine = asked;
    holdPage();
    table.setAttribute('aria-busy', 'true');
    let items;
    let info;
    try {
      ({ items, info } = await read(page, PER_PAGE));
    } catch (err) {
      if (ctx.signal.aborted || mine !== asked) return;
      loading.hidden = true;
      table.hidden = true;
      emptyEl.hidden = true;
      pager.hidden = true;
      count.textContent = '';
      msg.show(describe(err));
      return;
    } finally {
      if (mine === asked) table.removeAttribute('aria-busy');
    }
    if (ctx.signal.aborted || mine !== asked) return;
    if (items.length === 0 && info.total_pages > 0 && page > info.total_pages) {
      // Past the end (an old address, or entries gone after 90 days): the last page instead.
      await go(info.total_pages, { replace: true });
      return;
    }
    msg.clear();
    loading.hidden = true;
    tbody.replaceChildren(...items.flatMap((e) => entryRows(e, entry)));
    table.hidden = items.length === 0;
    const isFiltered = filtered();
    emptyEl.hidden = items.length !== 0;
    if (items.length) emptyEl.replaceChildren();
    else {
      emptyEl.replaceChildren(
        h('p', { class: 'empty-title' }, isFiltered ? 'No entry matches' : empty.title),
        h('p', { class: 'muted' }, isFiltered ? empty.filtered : empty.text));
    }
    count.textContent = items.length ? `${pageRange(info, items.length)} ${info.total_count === 1 ? 'entry' : 'entries'}${isFiltered ? ' matching' : ''}` : '';
    showPage(info);
  }

  return {
    count,
    refreshBtn,
    els: [msg.el, loading, h('div', { class: 'table-wrap' }, table), emptyEl, pager],
    load,
    go,
  };
}

/** Whether an entry's actor is the token `tokenId` (this session's). */
export function actorIs(tokenId) {
  return (actor) => actor.type === 'token' && sameId(actor.id, tokenId);
}
