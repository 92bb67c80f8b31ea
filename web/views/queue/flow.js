// The queue page's flow control card: the queue's flow keys (those with messages or limits of their own),
// those holding the most back first, a page at a time, or only those holding messages back; each with
// what it let go and holds back, why, and the limits that apply (its own marked), to pause or resume, give
// limits of its own or have them removed; and the form for any key by name (flow-editor.js).

import { h, notice, num, badge, busy } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { createPagedTable, pageRange } from '../../lib/paged-table.js';
import { createFlowEditor, confirmRemove } from './flow-editor.js';
import { consumerFlowText, heldWords, rateWords } from './flow-words.js';

/** Keys on a page of the list. */
export const PER_PAGE = 20;
/** The list is read again when the queue's counts change, and at least this often while they do not. */
const STALE_MS = 15000;

/** The limits that apply to a key, each marked when it is the key's own. */
function limitsCell(k) {
  const own = (name) => Boolean(k.overrides) && k.overrides[name] != null;
  const mark = (yes) => (yes ? [' ', h('span', { class: 'badge badge-info', title: 'The key\'s own limit, over the consumer\'s' }, 'own')] : null);
  const parts = [];
  if (k.parallelism != null) parts.push(h('span', { class: 'flow-limit' }, `${num(k.parallelism)} at once`, mark(own('parallelism'))));
  if (k.rate != null) parts.push(h('span', { class: 'flow-limit' }, rateWords(k.rate, k.period), mark(own('rate') || own('period'))));
  if (!parts.length) return h('span', { class: 'muted' }, 'No limits');
  return parts.flatMap((p, i) => (i ? [' · ', p] : [p]));
}

/**
 * The card; update(stats) with each stats answer (the list follows the queue's counts), setConsumer(consumer
 * or null, the number of consumers) when the consumers are shown or changed, with the queue's first;
 * `refresh()` asks the page for fresh stats after a change.
 */
export function createFlow({ api, ctx, queueId, refresh }) {
  let page = 1;
  let waitingOnly = false;
  let shown = ''; // the page of the list drawn, as JSON: a poll that brings nothing new redraws nothing

  const msg = notice();
  const waiting = h('input', { type: 'checkbox' });
  const consumerLine = h('p', { class: 'muted small' });
  const othersLine = h('p', { class: 'muted small', hidden: true });
  const {
    count, table, tbody, empty, loading, prev, next, pager, holdPage, showPage,
  } = createPagedTable({
    label: 'Flow keys',
    columns: ['Key', 'Released', 'Waiting', 'Held by', 'Limits', 'Actions'],
    loadingText: 'Loading the flow keys…',
    pagerLabel: 'Flow key pages',
  });
  const editor = createFlowEditor({ api, ctx, queueId, onChanged: changed });

  const el = h('section', { class: 'card card-flush flow-card', 'aria-labelledby': 'flow-title' },
    h('div', { class: 'card-head' },
      h('div', { class: 'card-head-side' }, h('h2', { id: 'flow-title' }, 'Flow control'), count),
      h('label', { class: 'check' }, waiting, h('span', null, 'Only keys holding messages back'))),
    h('div', { class: 'card-intro' },
      h('p', { class: 'muted small' }, 'Messages published with a ', h('code', null, 'flow_control_key'),
        ' are let go within the limits for their key, the consumer\'s or the key\'s own: so many at once, so many per '
        + 'period. The rest wait, in publish order, without counting as delivery attempts. Released: ready, leased or '
        + 'waiting for a retry. Waiting: held back.'),
      consumerLine, othersLine),
    msg.el, loading, h('div', { class: 'table-wrap' }, table), empty, pager,
    h('div', { class: 'flow-editor-wrap' }, editor.el));

  function showEmpty() {
    empty.replaceChildren(
      h('p', { class: 'empty-title' }, waitingOnly ? 'No key is holding messages back' : 'No flow keys yet'),
      h('p', { class: 'muted' }, waitingOnly
        ? 'Every key\'s messages are let go as they come.'
        : 'A key shows here while the queue has messages published with it, or once it has limits of its own (below).'));
  }

  /** After a change made in the form below: the list and the page's counts follow. */
  function changed() {
    load();
    refresh();
  }

  /** After a change to key `k` made from its row: the form too, when it shows that key. */
  function rowChanged(k) {
    editor.follow(k);
    changed();
  }

  function row(k) {
    const key = k.flow_control_key;
    const toggle = h('button', { type: 'button', class: 'btn btn-sm', 'aria-label': `${k.paused ? 'Resume' : 'Pause'} the flow key ${key}` },
      k.paused ? 'Resume' : 'Pause');
    toggle.addEventListener('click', async () => {
      msg.clear();
      try {
        const got = await busy(toggle, k.paused ? 'Resuming…' : 'Pausing…',
          () => (k.paused ? api.resumeFlowKey(queueId, key) : api.pauseFlowKey(queueId, key)));
        if (ctx.signal.aborted) return;
        ctx.toast(k.paused ? `Flow key ${key} resumed.` : `Flow key ${key} paused.`);
        rowChanged(got);
      } catch (err) {
        if (!ctx.signal.aborted) msg.show(describe(err));
      }
    });
    const limits = h('button', { type: 'button', class: 'btn btn-sm', 'aria-label': `Set the limits of the flow key ${key}` }, 'Limits…');
    limits.addEventListener('click', () => editor.edit(k));
    let remove = null;
    if (k.overrides) {
      remove = h('button', { type: 'button', class: 'btn btn-danger-outline btn-sm', 'aria-label': `Remove the own limits of the flow key ${key}` }, 'Remove limits…');
      remove.addEventListener('click', async () => {
        msg.clear();
        if (!(await confirmRemove(key))) return;
        try {
          const got = await busy(remove, 'Removing…', () => api.clearFlowKey(queueId, key));
          if (ctx.signal.aborted) return;
          ctx.toast(`Own limits of ${key} removed.`);
          rowChanged(got);
        } catch (err) {
          if (!ctx.signal.aborted) msg.show(describe(err));
        }
      });
    }
    const held = heldWords(k);
    return h('tr', { dataset: { flowKey: key } },
      h('td', { 'data-label': 'Key', class: 'cell-name' }, h('code', { class: 'break' }, key)),
      h('td', { class: 'num', 'data-label': 'Released' }, num(k.released)),
      h('td', { class: 'num', 'data-label': 'Waiting' }, num(k.waiting)),
      h('td', { 'data-label': 'Held by' }, k.held_by === 'paused' ? badge('Paused', 'warning') : held.node),
      h('td', { 'data-label': 'Limits' }, limitsCell(k)),
      h('td', { class: 'actions-col' }, h('div', { class: 'row-actions' }, toggle, limits, remove)));
  }

  let asked = 0; // the latest read: an older answer arriving late is dropped
  let readAt = 0;
  let stopped = false; // while the queue is being deleted: nothing more is asked
  const reading = new Set(); // the reads in flight

  /** Reads the page of the list shown, and draws it; resolves once it is (or was not) drawn. */
  function load() {
    if (stopped || ctx.signal.aborted) return Promise.resolve();
    const p = read();
    reading.add(p);
    p.finally(() => reading.delete(p));
    return p;
  }

  async function read() {
    asked += 1;
    const mine = asked;
    readAt = Date.now();
    let items;
    let info;
    try {
      ({ items, info } = await api.listFlowKeys(queueId, { waiting: waitingOnly, page, perPage: PER_PAGE }));
    } catch (err) {
      if (ctx.signal.aborted || mine !== asked) return;
      loading.hidden = true;
      if (err.kind === 'not_found') return; // the queue went: the page says so
      msg.show(describe(err));
      showPage({ page, total_pages: 0 });
      return;
    }
    if (ctx.signal.aborted || mine !== asked) return;
    if (items.length === 0 && info.total_pages > 0 && page > info.total_pages) {
      // Past the end (keys gone since): the last page instead.
      page = info.total_pages;
      load();
      return;
    }
    msg.clear();
    loading.hidden = true;
    showPage(info);
    count.textContent = info.total_count ? `${pageRange(info, items.length)} ${info.total_count === 1 ? 'key' : 'keys'}` : '';
    editor.seen(items);
    const drawn = JSON.stringify([waitingOnly, items]);
    if (drawn === shown) return;
    shown = drawn;
    tbody.replaceChildren(...items.map(row));
    table.hidden = items.length === 0;
    empty.hidden = items.length !== 0;
    if (!items.length) showEmpty();
  }

  function go(to) {
    page = to;
    holdPage();
    load();
  }
  prev.addEventListener('click', () => go(page - 1));
  next.addEventListener('click', () => go(page + 1));
  waiting.addEventListener('change', () => {
    waitingOnly = waiting.checked;
    go(1);
  });

  // The counts that move when a key lets a message go or holds one back. Resolves once the list is read
  // (at once when it need not be).
  let counts = null;
  function update(s) {
    const now = JSON.stringify([s.flow_keys_waiting, s.flow_waiting_count, s.backlog_count, s.in_flight_count, s.delayed_count]);
    if (now === counts && Date.now() - readAt < STALE_MS) return Promise.resolve();
    counts = now;
    return load();
  }

  /**
   * `c` is the consumer whose keys and limits the card shows, the queue's first; `total` the queue's
   * consumers, each of which applies its own limits to the messages it receives.
   */
  function setConsumer(c, total = c ? 1 : 0) {
    const flow = (c && c.settings && c.settings.flow_control) || null;
    editor.setConsumerFlow(flow);
    const text = consumerFlowText(flow);
    const whose = total > 1 ? 'first consumer' : 'consumer';
    if (!c) consumerLine.replaceChildren('No consumer yet: a key is held back only by limits of its own, or a pause.');
    else if (text) consumerLine.replaceChildren(`The ${whose}'s limits: `, h('strong', null, text), '. Change them in the consumer\'s settings.');
    else consumerLine.replaceChildren(`The ${whose} sets no limits: a key is held back only by limits of its own, or a pause. Set them in the consumer's settings.`);
    othersLine.hidden = total < 2;
    othersLine.textContent = `The queue has ${num(total)} consumers, each letting go the messages it receives within limits of `
      + 'its own; the keys here are its first consumer\'s.';
  }
  setConsumer(null);

  /** Asks nothing more until resume(); resolves once no read is in flight. */
  async function stop() {
    stopped = true;
    while (reading.size) await Promise.allSettled([...reading]);
  }

  function resume() {
    stopped = false;
  }

  return { el, update, setConsumer, stop, resume };
}
