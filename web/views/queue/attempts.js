// The queue page's delivery attempts card, for a webhook consumer: its attempts to POST batches to its
// endpoint, test sends among them, newest first, a page at a time: when, the outcome, the HTTP status, the
// latency, the batch's size, the node that made it and the error or the answer in short, each with its
// details (the error, the answer's first KiB, the batch's message ids). Filtered by outcome, time range and
// message id. The first page follows new attempts as the page refreshes, and the endpoint health of the
// queue's consumers is read with it for the consumers card. With several webhook consumers, the card shows
// the log of the one picked (consumer-picker.js), the first by default.

import { h, id, field, notice, num, busy } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { createPagedTable, pageRange } from '../../lib/paged-table.js';
import { rfc3339, whenEl } from '../../lib/times.js';
import { answerBody, outcomeBadge, outcomeSelect, shortId } from './attempt-words.js';
import { createConsumerPicker } from './consumer-picker.js';

/** Attempts on a page of the log. */
export const PER_PAGE = 20;
const COLUMNS = ['When', 'Outcome', 'Status', 'Latency', 'Batch', 'Node', 'Error or answer', 'Details'];
/** A message id as the API writes it. */
const MESSAGE_ID_RE = /^[0-9a-f]{32}$/;
/** A read this recent is not made again for new stats (the page's first stats come just after the first read). */
const FRESH_MS = 1500;
/** How much of an error or an answer a row shows (its details show the whole). */
const EXCERPT = 80;

/** A text on one line, cut to EXCERPT characters. */
function excerpt(text) {
  const line = String(text).replace(/\s+/g, ' ').trim();
  return line.length > EXCERPT ? `${line.slice(0, EXCERPT - 1)}…` : line;
}

/** The server's paged list `info`, with its number of pages (from total_count when it gives none). */
function withPages(info) {
  if (info.total_pages != null) return info;
  return { ...info, total_pages: Math.ceil(info.total_count / Math.max(1, info.per_page)) };
}

/** An attempt's details: the error, the answer, the batch's message ids, the attempt's and the node's ids. */
function details(a) {
  const ids = a.message_ids || [];
  const some = a.batch_size > ids.length ? ` (the first ${num(ids.length)} of ${num(a.batch_size)})` : '';
  const row = (term, value) => [h('dt', null, term), h('dd', null, value)];
  return h('dl', { class: 'props attempt-props' },
    row('Error', a.error ? h('span', { class: 'break' }, a.error) : h('span', { class: 'muted' }, 'None')),
    row('Answer', answerBody(a)),
    row(`Messages${some}`, ids.length
      ? h('ul', { class: 'attempt-ids', 'aria-label': 'Message IDs' }, ids.map((m) => h('li', null, h('code', null, m))))
      : h('span', { class: 'muted' }, a.test ? 'A test send\'s sample, no message of the queue' : '—')),
    row('Attempt ID', h('code', null, String(a.attempt_id))),
    row('Node', h('code', { class: 'break' }, String(a.node))));
}

/**
 * The table rows of one attempt: the attempt, and its details row (hidden until asked for). `expanded`
 * holds the ids of the attempts whose details are open, so that a redraw keeps them open.
 */
function attemptRows(a, expanded) {
  const key = String(a.attempt_id);
  const open = expanded.has(key);
  const detailId = id('attempt');
  const cell = h('td', { colspan: String(COLUMNS.length), class: 'attempt-detail-cell' }, open ? details(a) : null);
  const detail = h('tr', { id: detailId, class: 'attempt-detail', hidden: !open }, cell);
  const toggle = h('button', {
    type: 'button',
    class: 'btn btn-sm attempt-toggle',
    'aria-expanded': String(open),
    'aria-controls': detailId,
    'aria-label': `Details of attempt ${key}`,
  }, 'Details');
  toggle.addEventListener('click', () => {
    const opening = toggle.getAttribute('aria-expanded') !== 'true';
    if (opening && !cell.hasChildNodes()) cell.append(details(a)); // drawn once, when first asked for
    if (opening) expanded.add(key);
    else expanded.delete(key);
    toggle.setAttribute('aria-expanded', String(opening));
    detail.hidden = !opening;
  });
  const said = a.error || a.response;
  const data = { attempt: key, outcome: String(a.outcome) };
  if (a.test) data.test = 'true';
  const row = h('tr', { dataset: data },
    h('td', { 'data-label': 'When', class: 'attempt-when' }, whenEl(a.attempted_at)),
    h('td', { 'data-label': 'Outcome' }, outcomeBadge(a.outcome),
      a.test ? [' ', h('span', { class: 'badge badge-info', title: 'A test send: a sample batch, not a delivery' }, 'Test')] : null),
    h('td', { class: 'num', 'data-label': 'Status' }, a.status == null ? h('span', { class: 'muted', title: 'No HTTP answer came' }, '—') : String(a.status)),
    h('td', { class: 'num', 'data-label': 'Latency' }, `${num(a.latency_ms)} ms`),
    h('td', { class: 'num', 'data-label': 'Batch' }, num(a.batch_size)),
    h('td', { 'data-label': 'Node' }, h('code', { title: `Node ${a.node}` }, shortId(a.node))),
    h('td', { 'data-label': 'Error or answer', class: 'attempt-said' }, said ? excerpt(said) : h('span', { class: 'muted' }, '—')),
    h('td', { class: 'actions-col' }, toggle));
  return [row, detail];
}

/**
 * The card; setConsumers(consumers) when the queue's consumers are shown or changed (the card shows while
 * one is a webhook), setConsumer(consumer or null) to show that consumer's log, choose(consumer id) to
 * show that webhook consumer's, update() with each stats answer (the first page and the health follow),
 * refresh() after a test send. `onHealth(consumer id, health)` is told of each endpoint health read.
 * stop() asks nothing more until resume(), and resolves once no read is in flight.
 */
export function createAttempts({ api, ctx, queueId, onHealth = () => {} }) {
  let consumer = null; // the webhook consumer shown, or null
  let hooks = []; // the queue's webhook consumers, any of which can be shown
  let page = 1;
  let filters = { outcome: '', since: '', until: '', messageId: '' };
  let shown = ''; // the page drawn, as JSON: a read that brings nothing new redraws nothing
  const expanded = new Set();
  const isFiltered = () => Boolean(filters.outcome || filters.since || filters.until || filters.messageId);

  // ---- filter ----
  const outcome = outcomeSelect('Any outcome');
  const fromInput = h('input', { type: 'datetime-local', step: '60' });
  const toInput = h('input', { type: 'datetime-local', step: '60' });
  const messageInput = h('input', {
    type: 'text', class: 'mono', spellcheck: 'false', autocomplete: 'off', maxlength: '36', placeholder: '32 hex characters',
  });
  const filterBtn = h('button', { type: 'submit', class: 'btn' }, 'Filter');
  const clearBtn = h('button', { type: 'button', class: 'btn btn-ghost', hidden: true }, 'Clear filters');
  const filterMsg = notice();
  const filter = h('form', { class: 'filter-form', novalidate: true, role: 'search', 'aria-label': 'Filter the delivery attempts' },
    field('Outcome', outcome),
    field('From', fromInput, { hint: 'At or after, in this browser\'s time zone.' }),
    field('To', toInput, { hint: 'Before this time.' }),
    field('Message ID', messageInput, { hint: 'Attempts whose batch held it.' }),
    h('div', { class: 'inline-submit form-actions' }, filterBtn, clearBtn));

  // ---- list ----
  const msg = notice();
  const {
    count, table, tbody, empty, loading, prev, next, pager, holdPage, showPage,
  } = createPagedTable({
    label: 'Delivery attempts',
    tableClass: 'table table-cards attempt-table',
    columns: COLUMNS,
    loadingText: 'Loading the attempts…',
    prevLabel: '← Newer',
    nextLabel: 'Older →',
    pagerLabel: 'Delivery attempt pages',
  });
  const refreshBtn = h('button', { type: 'button', class: 'btn btn-sm' }, 'Refresh');
  const picker = createConsumerPicker({ onPick: (consumerId) => choose(consumerId) });

  const el = h('section', { class: 'card card-flush attempts-card', 'aria-labelledby': 'attempts-title', hidden: true },
    h('div', { class: 'card-head' },
      h('h2', { id: 'attempts-title' }, 'Delivery attempts'),
      h('div', { class: 'card-head-side' }, count, refreshBtn)),
    h('div', { class: 'card-intro' },
      h('p', { class: 'muted small' }, 'Each POST of a batch to the webhook URL, and each test send, newest first; Details show the '
        + 'error, the first KiB of the answer and the batch\'s message IDs (never the signature or a secret). Attempts are kept '
        + 'for 72 hours, at most 10,000 per consumer, unless the operator set otherwise. The first page follows new attempts '
        + 'as the page refreshes.')),
    picker.el,
    h('div', { class: 'card-filter' }, filter, filterMsg.el),
    msg.el, loading, h('div', { class: 'table-wrap' }, table), empty, pager);

  function showEmpty() {
    const filtered = isFiltered();
    empty.replaceChildren(
      h('p', { class: 'empty-title' }, filtered ? 'No attempt matches' : 'No attempts yet'),
      h('p', { class: 'muted' }, filtered
        ? 'Change the filters, or clear them to see every attempt.'
        : 'An attempt shows here each time a batch is POSTed to the endpoint, or a test is sent.'));
  }

  // ---- reads ----
  let asked = 0; // the latest read of a page: an older answer arriving late is dropped
  let stopped = false; // while the consumer or the queue is being deleted: nothing more is asked
  const reading = new Set(); // the reads in flight
  let pageAt = 0; // when the page and the health were last asked for
  let healthAt = 0;

  /** Runs `read` (which never throws) unless stopped; resolves once it is done. */
  function track(read) {
    if (stopped || ctx.signal.aborted || !consumer) return Promise.resolve();
    const p = read();
    reading.add(p);
    p.finally(() => reading.delete(p));
    return p;
  }
  const load = () => track(readPage);
  const loadHealth = () => track(readHealth);

  async function readPage() {
    asked += 1;
    const mine = asked;
    pageAt = Date.now();
    const c = consumer;
    let items;
    let info;
    try {
      ({ items, info } = await api.consumerAttempts(queueId, c.consumer_id, { ...filters, page, perPage: PER_PAGE }));
    } catch (err) {
      if (ctx.signal.aborted || mine !== asked) return;
      loading.hidden = true;
      if (err.kind === 'not_found') return; // the queue or the consumer went: the page or the consumers card says so
      msg.show(describe(err));
      showPage({ page, total_pages: 0 });
      return;
    }
    if (ctx.signal.aborted || mine !== asked) return;
    info = withPages(info);
    if (items.length === 0 && info.total_pages > 0 && page > info.total_pages) {
      // Past the end (attempts pruned since): the last page instead.
      page = info.total_pages;
      load();
      return;
    }
    msg.clear();
    loading.hidden = true;
    showPage(info);
    count.textContent = items.length
      ? `${pageRange(info, items.length)} ${info.total_count === 1 ? 'attempt' : 'attempts'}${isFiltered() ? ' matching' : ''}`
      : '';
    const drawn = JSON.stringify([c.consumer_id, filters, page, items]);
    if (drawn === shown) return;
    shown = drawn;
    tbody.replaceChildren(...items.flatMap((a) => attemptRows(a, expanded)));
    table.hidden = items.length === 0;
    empty.hidden = items.length !== 0;
    if (items.length) empty.replaceChildren();
    else showEmpty();
  }

  /** The endpoint health of every webhook consumer, for the consumers card; quiet when it fails (the page's reads say why). */
  async function readHealth() {
    healthAt = Date.now();
    let consumers;
    try {
      consumers = await api.listConsumers(queueId);
    } catch {
      return;
    }
    if (ctx.signal.aborted) return;
    for (const fresh of consumers) {
      if (fresh.health) onHealth(fresh.consumer_id, fresh.health);
    }
  }

  function go(to) {
    page = to;
    holdPage();
    load();
  }
  prev.addEventListener('click', () => go(page - 1));
  next.addEventListener('click', () => go(page + 1));
  refreshBtn.addEventListener('click', () => busy(refreshBtn, 'Refreshing…', () => Promise.all([load(), loadHealth()])));

  // ---- filtering ----
  /** The message id typed, as the API writes it ('' when none); throws an Error when it is none. */
  function messageIdOf(input) {
    const value = input.value.trim().replace(/-/g, '').toLowerCase();
    if (value && !MESSAGE_ID_RE.test(value)) {
      input.setAttribute('aria-invalid', 'true');
      throw new Error('A message ID is 32 hexadecimal characters.');
    }
    return value;
  }

  /** The filters the form holds; throws an Error saying what to fix. */
  function chosen() {
    for (const input of [fromInput, toInput, messageInput]) input.removeAttribute('aria-invalid');
    const got = {
      outcome: outcome.value,
      since: rfc3339(fromInput, 'From'),
      until: rfc3339(toInput, 'To'),
      messageId: messageIdOf(messageInput),
    };
    if (got.since && got.until && Date.parse(got.since) >= Date.parse(got.until)) {
      toInput.setAttribute('aria-invalid', 'true');
      throw new Error('The end of the range (To) must be after its start (From).');
    }
    return got;
  }

  /** Shows the first page with the form's filters. */
  function apply() {
    filterMsg.clear();
    try {
      filters = chosen();
    } catch (err) {
      filterMsg.show(err.message);
      return;
    }
    clearBtn.hidden = !isFiltered();
    go(1);
  }
  filter.addEventListener('submit', (e) => {
    e.preventDefault();
    apply();
  });
  outcome.addEventListener('change', apply);
  clearBtn.addEventListener('click', () => {
    outcome.value = '';
    fromInput.value = '';
    toInput.value = '';
    messageInput.value = '';
    apply();
    outcome.focus();
  });

  // ---- the page's calls ----
  function setConsumer(c) {
    const hook = c && c.type === 'webhook' ? c : null;
    const same = Boolean(hook && consumer && hook.consumer_id === consumer.consumer_id);
    consumer = hook;
    el.hidden = !hook;
    if (same) {
      load();
      return;
    }
    asked += 1; // an answer about the consumer before is dropped
    page = 1;
    shown = '';
    expanded.clear();
    msg.clear();
    tbody.replaceChildren();
    table.hidden = true;
    empty.hidden = true;
    pager.hidden = true;
    count.textContent = '';
    loading.hidden = !hook;
    if (!hook) return;
    load();
    if (hook.health) healthAt = Date.now();
    else loadHealth(); // create answers carry none
  }

  /** The queue's consumers: the log shown stays that of the consumer shown while it is a webhook one, else the first's. */
  function setConsumers(consumers) {
    hooks = consumers.filter((c) => c.type === 'webhook');
    const kept = consumer && hooks.find((c) => c.consumer_id === consumer.consumer_id);
    const next = kept || hooks[0] || null;
    picker.set(hooks, next && next.consumer_id);
    setConsumer(next);
  }

  /** Shows the log of webhook consumer `consumerId` (after a test send from its card, or when picked). */
  function choose(consumerId) {
    const c = hooks.find((x) => x.consumer_id === consumerId);
    if (!c) return;
    picker.set(hooks, c.consumer_id);
    setConsumer(c);
  }

  /** With each stats answer: the health, and the first page (an older one stays as read). */
  function update() {
    const stale = (at) => Date.now() - at >= FRESH_MS;
    return Promise.all([stale(healthAt) ? loadHealth() : null, page === 1 && stale(pageAt) ? load() : null]);
  }

  /** After a test send: the first page, where its attempt shows, and the health it may have changed. */
  function refresh() {
    if (page !== 1) go(1);
    else load();
    return loadHealth();
  }

  async function stop() {
    stopped = true;
    while (reading.size) await Promise.allSettled([...reading]);
  }

  function resume() {
    stopped = false;
    if (page !== 1) load(); // the page's polls read the first page only
  }

  return { el, setConsumer, setConsumers, choose, update, refresh, stop, resume };
}
