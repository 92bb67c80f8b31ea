// The queue page's activity card: throughput from the server's buckets, and a backlog line drawn from
// the samples this page has seen.

import { h, num } from '../../lib/dom.js';
import { lineChart } from '../../lib/chart.js';

const WINDOW_MS = 10 * 60 * 1000;

// Backlog samples per queue, kept for this page's lifetime (across visits to other pages), so the
// backlog line does not start over each time the queue is opened.
const history = new Map();

export function forgetHistory() {
  history.clear();
}

function sample(queueId, s) {
  const now = Date.now();
  const list = history.get(queueId) || [];
  list.push({ t: now, backlog: s.backlog_count, inFlight: s.in_flight_count });
  while (list.length && list[0].t < now - WINDOW_MS) list.shift();
  history.set(queueId, list);
  return list;
}

function rate(v) {
  if (Number.isInteger(v)) return String(v);
  if (v < 0.1) return v.toFixed(2);
  if (v < 10) return v.toFixed(1);
  return String(Math.round(v));
}

function count(v) {
  return Number.isInteger(v) ? num(v) : v.toFixed(1);
}

/**
 * The activity card; update() with each stats answer, stale() when they stop coming, forget() when the
 * queue is deleted, destroy() on leaving.
 */
export function createActivity({ queueId }) {
  const throughput = lineChart({
    label: 'Throughput over the last 10 minutes, messages per second',
    series: [
      { key: 'published', label: 'Published', className: 's-published' },
      { key: 'acked', label: 'Acked', className: 's-acked' },
    ],
    format: rate,
    unit: '/s',
    minMax: 0.5,
    area: 'published',
  });
  const backlogChart = lineChart({
    label: 'Backlog over the last 10 minutes, messages',
    series: [
      { key: 'backlog', label: 'Backlog', className: 's-backlog' },
      { key: 'inFlight', label: 'In flight', className: 's-inflight' },
    ],
    format: count,
    minMax: 4,
    area: 'backlog',
  });
  const totals = h('p', { class: 'muted totals', dataset: { role: 'totals' } });
  const live = h('span', { class: 'live' }, 'Connecting…');

  const el = h('section', { class: 'card', 'aria-labelledby': 'activity-title' },
    h('div', { class: 'card-head' }, h('h2', { id: 'activity-title' }, 'Activity'), live),
    totals,
    h('div', { class: 'charts' },
      h('div', { class: 'chart-block' }, h('h3', null, 'Throughput (messages per second)'), throughput.el),
      h('div', { class: 'chart-block' }, h('h3', null, 'Backlog (messages)'), backlogChart.el)));

  function update(s) {
    const bucketMs = (s.bucket_seconds || 10) * 1000;
    const series = s.series || [];
    if (series.length) {
      const x0 = series[0].t;
      const x1 = series[series.length - 1].t + bucketMs;
      const perSecond = (key) => series.map((b) => [b.t + bucketMs / 2, b[key] / (s.bucket_seconds || 10)]);
      throughput.update({ x0, x1, data: { published: perSecond('published'), acked: perSecond('acked') } });
      const published = series.reduce((n, b) => n + b.published, 0);
      const acked = series.reduce((n, b) => n + b.acked, 0);
      totals.textContent = `Last 10 minutes: ${num(published)} published, ${num(acked)} acked.`;
    }
    const samples = sample(queueId, s);
    const now = Date.now();
    backlogChart.update({
      x0: now - WINDOW_MS,
      x1: now,
      data: { backlog: samples.map((p) => [p.t, p.backlog]), inFlight: samples.map((p) => [p.t, p.inFlight]) },
    });
    live.textContent = `Live · updated ${new Date().toLocaleTimeString()}`;
    live.classList.remove('live-stale');
  }

  function stale() {
    live.textContent = 'Not updating';
    live.classList.add('live-stale');
  }

  function forget() {
    history.delete(queueId);
  }

  function destroy() {
    throughput.destroy();
    backlogChart.destroy();
  }

  return { el, update, stale, forget, destroy };
}
