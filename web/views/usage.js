// The account's usage (#/usage): its operations this month day by day, against its plan's quotas when it
// has them; a chart per queue; and the queues that used the most. It reads GET /accounts/{id}/usage (by
// UTC day, since the first of this month) and the quotas of GET /accounts/{id}/limits. Operations are
// counted as Cloudflare bills Queues: each 64 KB of a message written, read or deleted is one. The server
// adds the work done to the usage every few seconds, so the page reads it again every 10 s.

import { h, num, bytes, date, notice, badge } from '../lib/dom.js';
import { describe } from '../lib/api.js';
import { lineChart, dayLabel } from '../lib/chart.js';

const REFRESH_MS = 10000;
const DAY_MS = 86400000;
/** Queues given a chart of their own: those with the most operations (the table lists every one). */
const CHARTED = 6;
/** The share of a quota from which the page marks it as near. */
const NEAR = 0.8;
/** The most queues listQueues answers: past it, a queue missing from the list may still exist. */
const LISTED = 1000;

const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });
const share = new Intl.NumberFormat(undefined, { style: 'percent', maximumFractionDigits: 1 });
const monthFmt = new Intl.DateTimeFormat(undefined, { month: 'long', year: 'numeric', timeZone: 'UTC' });

/** The figures of a queue's rows that the page adds up over the month. */
const FIGURES = [
  'operations', 'write_operations', 'read_operations', 'delete_operations',
  'messages_published', 'messages_delivered', 'messages_acked', 'bytes_published', 'bytes_delivered',
];

/** The quotas, in the order shown: what each counts, how its figures read, and what happens past it. */
const QUOTAS = [
  {
    key: 'operations_today', label: 'Operations today', what: 'operations today', figure: num,
    past: 'Publishes, pulls and acknowledgements are refused (HTTP 429) until it resets.',
  },
  {
    key: 'operations_this_month', label: 'Operations this month', what: 'operations this month', figure: num,
    past: 'Publishes, pulls and acknowledgements are refused (HTTP 429) until it resets.',
  },
  {
    key: 'stored_bytes', label: 'Stored bytes', what: 'stored', figure: bytes,
    past: 'Publishes are refused (HTTP 429) until the queues hold less.',
  },
];

/** The UTC day of a time in ms, as the API takes it: "2026-11-30". */
const dayOf = (ms) => new Date(ms).toISOString().slice(0, 10);

/** This month in UTC, as the usage is counted: the start of its first day, of its last day, and of today. */
function thisMonth(now = Date.now()) {
  const d = new Date(now);
  const [y, m] = [d.getUTCFullYear(), d.getUTCMonth()];
  return { first: Date.UTC(y, m, 1), last: Date.UTC(y, m + 1, 1) - DAY_MS, today: Date.UTC(y, m, d.getUTCDate()) };
}

/** A limit in force: a positive number (null, 0 or missing is none). */
const limitOf = (value) => (typeof value === 'number' && value > 0 ? value : null);

/** How much of `limit` `used` is, in whole percent, rounded down: 99.6% does not read as reached. */
const percent = (used, limit) => Math.floor((used * 100) / limit);

/** How close `used` is to `limit`: ok, near (from 80%) or over (100% and past). */
function levelOf(used, limit) {
  if (!limit) return 'ok';
  if (used >= limit) return 'over';
  return used >= limit * NEAR ? 'near' : 'ok';
}

/** The mark of a quota near or past its limit (null when it is not). */
function levelBadge(level) {
  if (level === 'over') return badge('Quota reached', 'danger');
  return level === 'near' ? badge('Near the quota', 'warning') : null;
}

/**
 * The rows added up: the account's operations per day (the day's start in ms → operations), and each
 * queue's figures over the month with its own operations per day, the most operations first.
 */
function summarize(rows) {
  const days = new Map();
  const queues = new Map();
  for (const row of rows) {
    const day = Date.parse(`${row.start.slice(0, 10)}T00:00:00Z`);
    days.set(day, (days.get(day) || 0) + row.operations);
    let q = queues.get(row.queue_id);
    if (!q) {
      q = { queue_id: row.queue_id, days: new Map() };
      for (const key of FIGURES) q[key] = 0;
      queues.set(row.queue_id, q);
    }
    q.queue_name = row.queue_name; // the rows are oldest first: the queue's latest name
    for (const key of FIGURES) q[key] += row[key] || 0;
    q.days.set(day, (q.days.get(day) || 0) + row.operations);
  }
  const ranked = [...queues.values()]
    .sort((a, b) => b.operations - a.operations || a.queue_name.localeCompare(b.queue_name));
  return { days, queues: ranked, total: ranked.reduce((n, q) => n + q.operations, 0) };
}

/** A chart's points: every day of the month up to today, 0 on a day with nothing counted. */
function perDay(days, month) {
  const points = [];
  for (let t = month.first; t <= month.today; t += DAY_MS) points.push([t, days.get(t) || 0]);
  return points;
}

/** A stat tile (as the queue page's): its label, a value and a line under it. */
function tile(label, stat) {
  const value = h('span', { class: 'tile-value' }, '—');
  const sub = h('span', { class: 'tile-sub' });
  const el = h('div', { class: 'tile', role: 'group', 'aria-label': label, dataset: { stat } },
    h('span', { class: 'tile-label' }, label), value, sub);
  return { el, value, sub };
}

export function renderUsage(root, ctx) {
  ctx.setTitle('Usage');
  const { api } = ctx;

  // The account's queues by id, to link a queue's name to its page; null until known, or when the list
  // was cut short (then every queue is linked, and none is said to be deleted).
  let existing = null;

  const msg = notice();
  const updated = h('span', { class: 'live', 'aria-hidden': 'true' });
  const loading = h('p', { class: 'muted loading' }, 'Loading the usage…');

  // ---- quotas ----
  const quotaList = h('ul', { class: 'quota-list' });
  const quotasCard = h('section', { class: 'card', 'aria-labelledby': 'quotas-title', hidden: true },
    h('div', { class: 'card-head' }, h('h2', { id: 'quotas-title' }, 'Quotas')),
    h('p', { class: 'muted small' }, 'What your plan allows, and how much of it is used. Past a quota the requests that '
      + 'would use more are refused with HTTP 429 (code 11017), saying which quota and when it resets.'),
    quotaList);

  /** One quota's item: "7,412 of 10,000 operations today (74%)", a meter, and when it resets. */
  function quotaItem(spec, quota) {
    const used = Number(quota.used) || 0;
    const limit = limitOf(quota.limit);
    const level = levelOf(used, limit);
    const text = limit
      ? `${spec.figure(used)} of ${spec.figure(limit)} ${spec.what} (${percent(used, limit)}%)`
      : `${spec.figure(used)} ${spec.what}`;
    const notes = [limit ? null : 'No quota on your plan.', level === 'over' ? spec.past : null,
      limit && quota.resets_at ? `Resets ${date(quota.resets_at)}.` : null].filter(Boolean);
    return h('li', { class: `quota quota-${level}`, dataset: { quota: spec.key, level } },
      h('span', { class: 'tile-label' }, spec.label),
      h('div', { class: 'quota-line' }, h('span', { class: 'quota-text' }, text), levelBadge(level)),
      // A meter (not a progress bar): it measures a share of a limit, amber from 80% and red when used up
      // (`high` just under the limit: a meter is red only above it).
      limit ? h('meter', {
        min: 0, max: limit, low: limit * NEAR, high: limit - 0.5, optimum: 0, value: Math.min(used, limit),
        'aria-label': `${spec.label} used`,
      }) : null,
      notes.length ? h('p', { class: 'muted small' }, notes.join(' ')) : null);
  }

  function showQuotas(quotas) {
    // A server without quotas answers none: the card stays hidden, and the charts have no quota line.
    const known = quotas && typeof quotas === 'object' ? QUOTAS.filter((spec) => quotas[spec.key]) : [];
    quotasCard.hidden = known.length === 0;
    quotaList.replaceChildren(...known.map((spec) => quotaItem(spec, quotas[spec.key])));
  }

  // ---- operations per day ----
  const monthTitle = h('h2', { id: 'days-title' }, 'Operations per day');
  const tToday = tile('Today', 'today');
  const tMonth = tile('This month', 'month');
  const tBusiest = tile('Busiest day', 'busiest');
  const dayNote = h('p', { class: 'muted small', hidden: true });
  const chartSlot = h('div', { class: 'chart-block' });
  const daysCard = h('section', { class: 'card', 'aria-labelledby': 'days-title', hidden: true },
    h('div', { class: 'card-head' }, monthTitle),
    h('div', { class: 'tiles usage-tiles' }, tToday.el, tMonth.el, tBusiest.el),
    chartSlot, dayNote);

  // The chart's series are fixed when it is made: it is made again when a daily quota comes or goes.
  let dayChart = null;
  let dayChartQuota = null;
  function dayChartFor(withQuota) {
    if (dayChart && dayChartQuota === withQuota) return dayChart;
    if (dayChart) dayChart.destroy();
    dayChartQuota = withQuota;
    dayChart = lineChart({
      label: 'Operations per day this month',
      series: [
        { key: 'operations', label: 'Operations', className: 's-operations' },
        withQuota ? { key: 'quota', label: 'Daily quota', className: 's-quota' } : null,
      ].filter(Boolean),
      format: num,
      tickFormat: (v) => compact.format(v),
      minMax: 4,
      area: 'operations',
      axis: 'days',
    });
    chartSlot.replaceChildren(dayChart.el);
    return dayChart;
  }

  /** The per-day card: today, the month against its quota, the busiest day, and the chart. */
  function showDays(sum, month, { daily, monthly }) {
    monthTitle.textContent = `Operations per day, ${monthFmt.format(new Date(month.first))}`;
    const today = sum.days.get(month.today) || 0;
    tToday.value.textContent = num(today);
    tToday.sub.textContent = daily ? `of ${num(daily)} a day (${percent(today, daily)}%)` : `${dayLabel(month.today)}, so far (UTC)`;
    tToday.el.classList.toggle('tile-warning', levelOf(today, daily) !== 'ok');
    tMonth.value.textContent = num(sum.total);
    tMonth.sub.textContent = monthly
      ? `of ${num(monthly)} this month (${percent(sum.total, monthly)}%)`
      : `since ${dayLabel(month.first)}`;
    tMonth.el.classList.toggle('tile-warning', levelOf(sum.total, monthly) !== 'ok');
    let busiest = null;
    for (const [t, v] of sum.days) if (!busiest || v > busiest[1]) busiest = [t, v];
    tBusiest.value.textContent = busiest ? num(busiest[1]) : '—';
    tBusiest.sub.textContent = busiest ? dayLabel(busiest[0]) : '';

    const data = { operations: perDay(sum.days, month) };
    // The quota as a flat line across the month: a day over it stands out above the line.
    if (daily) data.quota = [[month.first, daily], [month.last, daily]];
    dayChartFor(Boolean(daily)).update({ x0: month.first, x1: month.last, data });
    const over = daily ? [...sum.days.values()].filter((v) => v >= daily).length : 0;
    dayNote.hidden = !daily;
    dayNote.textContent = daily
      ? `The dashed line is your plan's daily quota, ${num(daily)} operations a UTC day.${over
        ? ` It was reached on ${num(over)} ${over === 1 ? 'day' : 'days'} this month.` : ''}`
      : '';
  }

  // ---- a chart per queue ----
  const queueCharts = new Map(); // queue id → {block, title, chart}
  const queueGrid = h('div', { class: 'charts' });
  const queueNote = h('p', { class: 'muted small' });
  const queuesCard = h('section', { class: 'card', 'aria-labelledby': 'queue-charts-title', hidden: true },
    h('div', { class: 'card-head' }, h('h2', { id: 'queue-charts-title' }, 'Operations per day by queue')),
    queueNote, queueGrid);

  /** A queue's name, linked to its page while it exists; a deleted queue's name as it was. */
  function queueName(q) {
    if (existing && !existing.has(q.queue_id)) return [h('span', { class: 'queue-name' }, q.queue_name), badge('Deleted')];
    return h('a', { href: `#/queues/${q.queue_id}`, class: 'queue-link' }, q.queue_name);
  }

  function showQueueCharts(sum, month) {
    const top = sum.queues.slice(0, CHARTED);
    queueNote.textContent = sum.queues.length > CHARTED
      ? `The ${CHARTED} queues with the most operations this month; the table below lists all ${num(sum.queues.length)}.`
      : 'Each queue\'s operations per UTC day this month.';
    const shown = new Set(top.map((q) => q.queue_id));
    for (const [id, c] of queueCharts) {
      if (shown.has(id)) continue;
      c.chart.destroy();
      queueCharts.delete(id);
    }
    for (const q of top) {
      let c = queueCharts.get(q.queue_id);
      if (!c) {
        const chart = lineChart({
          label: `Operations per day of ${q.queue_name}`,
          series: [{ key: 'operations', label: 'Operations', className: 's-operations' }],
          format: num,
          tickFormat: (v) => compact.format(v),
          minMax: 4,
          area: 'operations',
          height: 130,
          axis: 'days',
        });
        const title = h('h3', { class: 'usage-queue-title' });
        c = { chart, title, block: h('div', { class: 'chart-block', dataset: { queueId: q.queue_id } }, title, chart.el) };
        queueCharts.set(q.queue_id, c);
      }
      c.title.replaceChildren(...[queueName(q)].flat(), ` · ${num(q.operations)} ${q.operations === 1 ? 'operation' : 'operations'}`);
      c.chart.update({ x0: month.first, x1: month.last, data: { operations: perDay(q.days, month) } });
    }
    // The most used first; moving a block keeps its chart.
    queueGrid.replaceChildren(...top.map((q) => queueCharts.get(q.queue_id).block));
  }

  // ---- the largest consumers ----
  const tbody = h('tbody');
  const count = h('span', { class: 'muted count' });
  const table = h('table', { class: 'table table-cards', 'aria-label': 'Usage by queue' },
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, 'Queue'),
      h('th', { scope: 'col', class: 'num' }, 'Operations'),
      h('th', { scope: 'col', class: 'num' }, 'Share'),
      h('th', { scope: 'col', class: 'num' }, 'Published'),
      h('th', { scope: 'col', class: 'num' }, 'Delivered'),
      h('th', { scope: 'col', class: 'num' }, 'Acked'),
      h('th', { scope: 'col', class: 'num' }, 'Bytes published'),
      h('th', { scope: 'col', class: 'num' }, 'Bytes delivered'))),
    tbody);
  const tableCard = h('section', { class: 'card card-flush', 'aria-labelledby': 'consumers-title', hidden: true },
    h('div', { class: 'card-head' }, h('h2', { id: 'consumers-title' }, 'Largest consumers this month'), count),
    h('div', { class: 'table-wrap' }, table));

  function row(q, total) {
    const cell = (label, value) => h('td', { class: 'num', 'data-label': label }, value);
    return h('tr', { dataset: { queue: q.queue_name, queueId: q.queue_id } },
      h('td', { class: 'cell-name', 'data-label': 'Queue' }, queueName(q)),
      h('td', { class: 'num', 'data-label': 'Operations' }, h('span', { class: 'value' }, num(q.operations)),
        h('span', { class: 'sub' }, `${num(q.write_operations)} write · ${num(q.read_operations)} read · ${num(q.delete_operations)} delete`)),
      cell('Share', total ? share.format(q.operations / total) : '—'),
      cell('Published', num(q.messages_published)),
      cell('Delivered', num(q.messages_delivered)),
      cell('Acked', num(q.messages_acked)),
      cell('Bytes published', bytes(q.bytes_published)),
      cell('Bytes delivered', bytes(q.bytes_delivered)));
  }

  // ---- nothing yet ----
  const emptyCard = h('div', { class: 'card', hidden: true },
    h('div', { class: 'empty' },
      h('p', { class: 'empty-title' }, 'No usage yet this month'),
      h('p', { class: 'muted' }, 'Operations are counted as messages are published, pulled or delivered, and acknowledged; '
        + 'they show here a few seconds later.')));

  root.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('div', null, h('h1', null, 'Usage'),
        h('p', { class: 'muted' }, 'What this account\'s queues did this month, by UTC day, in operations as Cloudflare '
          + 'bills Queues: each 64 KB of a message written, read or deleted is one. Refreshed every few seconds.')),
      h('div', { class: 'page-head-side' }, updated)),
    msg.el, loading, quotasCard, emptyCard, daysCard, queuesCard, tableCard));

  // ---- load, then refresh ----
  ctx.poll(REFRESH_MS, async () => {
    const month = thisMonth();
    let rows;
    let limits;
    let queues;
    try {
      [rows, limits, queues] = await Promise.all([
        api.getUsage({ since: dayOf(month.first) }),
        // The quotas and the queues' links are extras: the usage is shown without them (as last read).
        api.getLimits().catch(() => null),
        api.listQueues().catch(() => null),
      ]);
    } catch (err) {
      if (ctx.signal.aborted) return;
      loading.hidden = true;
      updated.textContent = 'Not updating';
      updated.classList.add('live-stale');
      if (err.kind === 'network' || err.kind === 'timeout') throw err; // the connection banner says it
      msg.show(describe(err));
      return;
    }
    if (ctx.signal.aborted) return;
    msg.clear();
    loading.hidden = true;
    if (queues) existing = queues.length < LISTED ? new Set(queues.map((q) => q.queue_id)) : null;
    if (limits) showQuotas(limits.quotas);
    const quotas = (limits && limits.quotas) || {};
    const planLimits = (limits && limits.limits) || {};
    // The quota in `quotas` (what the server holds the account to now), else the plan's limit.
    const daily = limitOf((quotas.operations_today || {}).limit) || limitOf(planLimits.max_operations_per_day);
    const monthly = limitOf((quotas.operations_this_month || {}).limit) || limitOf(planLimits.max_operations_per_month);

    const sum = summarize(rows || []);
    const none = sum.queues.length === 0;
    emptyCard.hidden = !none;
    daysCard.hidden = none;
    queuesCard.hidden = none;
    tableCard.hidden = none;
    if (!none) {
      showDays(sum, month, { daily, monthly });
      showQueueCharts(sum, month);
      tbody.replaceChildren(...sum.queues.map((q) => row(q, sum.total)));
      count.textContent = `${num(sum.queues.length)} ${sum.queues.length === 1 ? 'queue' : 'queues'}, the most operations first`;
    }
    updated.textContent = `Live · updated ${new Date().toLocaleTimeString()}`;
    updated.classList.remove('live-stale');
  });

  return () => {
    if (dayChart) dayChart.destroy();
    for (const c of queueCharts.values()) c.chart.destroy();
  };
}
