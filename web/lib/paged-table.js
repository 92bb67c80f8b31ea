// A list shown a page at a time: the count, the table (hidden until a page is in), the empty list,
// the loading line and the pager. Only the elements: the view fills them and wires the buttons.

import { h, num } from './dom.js';

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
