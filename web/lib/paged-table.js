// A list shown a page at a time: the count, the table (hidden until a page is in), the empty list,
// the loading line and the pager; and, for a page of its own, the list kept live with its page in the address.

import { h, num, busy, confirmDialog } from './dom.js';
import { describe } from './api.js';

/**
 * The pager: `prev` and `next` buttons (disabled until a page says otherwise), `pageOf` (the "page n
 * of m" text) and `pager`, the <nav> named `label` that holds them (hidden until wanted).
 * `holdPage()` disables the buttons while a page is read; `showPage(info)` then sets them for the page
 * the server's paged list `info` describes.
 */
export function createPager({ label, prevLabel = '← Previous', nextLabel = 'Next →' }) {
  const prev = h('button', { type: 'button', class: 'btn btn-sm', disabled: true }, prevLabel);
  const next = h('button', { type: 'button', class: 'btn btn-sm', disabled: true }, nextLabel);
  const pageOf = h('span', { class: 'muted pager-text', 'aria-live': 'polite' });
  const pager = h('nav', { class: 'pager', 'aria-label': label, hidden: true }, prev, pageOf, next);
  function holdPage() {
    prev.disabled = true;
    next.disabled = true;
  }
  function showPage(info) {
    pager.hidden = info.total_pages <= 1;
    pageOf.textContent = `Page ${num(info.page)} of ${num(info.total_pages)}`;
    prev.disabled = info.page <= 1;
    next.disabled = info.page >= info.total_pages;
  }
  return { prev, next, pageOf, pager, holdPage, showPage };
}

/** "51–100 of 230": the rows a page of the paged list `info` shows (`shown` of them). */
export function pageRange(info, shown) {
  const first = (info.page - 1) * info.per_page + 1;
  return `${num(first)}–${num(first + shown - 1)} of ${num(info.total_count)}`;
}

/**
 * A paged table. `label` names the table (`tableClass` its classes), `columns` are its column headers,
 * the last one the actions column (its header visually hidden), `loadingText` the loading line's
 * words, `empty` what the empty list holds (its words, or nothing when the view fills it in later);
 * `prevLabel`, `nextLabel` and `pagerLabel` are the pager's (see createPager).
 *
 * Returns {count, table, tbody, empty, loading, prev, next, pageOf, pager, holdPage, showPage}.
 */
export function createPagedTable({
  label, columns, loadingText, empty = null, prevLabel, nextLabel, pagerLabel, tableClass = 'table table-cards',
}) {
  const count = h('span', { class: 'muted count', 'aria-live': 'polite' });
  const tbody = h('tbody');
  const headers = columns.slice(0, -1).map((name) => h('th', { scope: 'col' }, name));
  const actions = h('th', { scope: 'col', class: 'actions-col' }, h('span', { class: 'visually-hidden' }, columns[columns.length - 1]));
  const table = h('table', { class: tableClass, 'aria-label': label, hidden: true },
    h('thead', null, h('tr', null, headers, actions)),
    tbody);
  const emptyEl = h('div', { class: 'empty', hidden: true }, empty);
  const loading = h('p', { class: 'muted loading' }, loadingText);
  return { count, table, tbody, empty: emptyEl, loading, ...createPager({ label: pagerLabel, prevLabel, nextLabel }) };
}

/**
 * Keeps a paged list live on a page of its own: reads page `page` now and every `refreshMs`, and the
 * page the pager asks for (the address, `#/<route>?page=N`, follows, so Back returns to the page before).
 * `list` is createPagedTable's elements (or the same, made by the view); `msg` shows a failure and
 * `updated` when the list was last read. `read(page, perPage)` resolves the server's paged list
 * {items, info}, with whatever else `rows(got)` needs to make the table's rows; `noun` is
 * [one, many] for the count.
 *
 * Returns {now, act}: `now()` reads the page again at once; `act` runs a row's action (see rowAction).
 */
export function livePages({ ctx, route, page, perPage, refreshMs, list, msg, updated, read, rows, noun }) {
  const { count, table, tbody, empty, loading, prev, next, holdPage, showPage } = list;

  /** Shows page `to` (the address follows, so Back returns to the page before). */
  function go(to, { replace = false } = {}) {
    page = to;
    const hash = page > 1 ? `#/${route}?page=${page}` : `#/${route}`;
    if (replace) history.replaceState(null, '', hash);
    else history.pushState(null, '', hash);
    holdPage();
    poller.now();
  }
  prev.addEventListener('click', () => go(page - 1));
  next.addEventListener('click', () => go(page + 1));

  const poller = ctx.poll(refreshMs, async () => {
    const asked = page;
    let got;
    try {
      got = await read(asked, perPage);
    } catch (err) {
      if (ctx.signal.aborted) return;
      loading.hidden = true;
      updated.textContent = 'Not updating';
      updated.classList.add('live-stale');
      if (err.kind === 'network' || err.kind === 'timeout') throw err;
      msg.show(describe(err));
      return;
    }
    if (ctx.signal.aborted || asked !== page) return; // another page was asked for meanwhile
    const { items, info } = got;
    if (items.length === 0 && info.total_pages > 0 && page > info.total_pages) {
      // Past the end (rows deleted, or an old address): the last page instead.
      go(info.total_pages, { replace: true });
      return;
    }
    msg.clear();
    loading.hidden = true;
    tbody.replaceChildren(...rows(got));
    table.hidden = items.length === 0;
    empty.hidden = info.total_count !== 0;
    count.textContent = info.total_count ? `${pageRange(info, items.length)} ${info.total_count === 1 ? noun[0] : noun[1]}` : '';
    showPage(info);
    updated.textContent = `Live · updated ${new Date().toLocaleTimeString()}`;
    updated.classList.remove('live-stale');
  });

  return { now: () => poller.now(), act: rowAction({ ctx, msg, refresh: () => poller.now() }) };
}

/**
 * A row's action, as `act(button, {label, work, done, confirm})`: `work()` while `button` says `label`,
 * then `done` as a toast and `refresh()`; a failure shows in `msg`. With `confirm` (confirmDialog's
 * options), asked first.
 */
export function rowAction({ ctx, msg, refresh }) {
  return async (button, { label, work, done, confirm = null }) => {
    msg.clear();
    if (confirm && !(await confirmDialog(confirm))) return;
    try {
      await busy(button, label, work);
      if (ctx.signal.aborted) return;
      ctx.toast(done);
      refresh();
    } catch (err) {
      if (!ctx.signal.aborted) msg.show(describe(err));
    }
  };
}
