// One queue: live counts and activity chart, settings (edit, pause/resume), its consumer, test
// messages, peek, purge, delete; a dead-letter queue shows where its messages came from.

import { h, append, notice, num, bytes, age, badge, busy, date, confirmDialog } from '../lib/dom.js';
import { describe } from '../lib/api.js';
import { lineChart } from '../lib/chart.js';
import { createMessages } from './queue/messages.js';
import { createConsumer } from './queue/consumer.js';
import { createSettings } from './queue/settings.js';

const POLL_MS = 3000;
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

export function renderQueue(root, ctx, queueId) {
  const { api } = ctx;
  let queue = null;
  let stats = null;

  // ---- header ----
  const title = h('h1', { class: 'queue-title' }, 'Queue');
  const stateBadge = h('span');
  const meta = h('p', { class: 'muted meta' });
  const pauseBtn = h('button', { type: 'button', class: 'btn' }, 'Pause delivery');
  const purgeBtn = h('button', { type: 'button', class: 'btn' }, 'Purge…');
  const deleteBtn = h('button', { type: 'button', class: 'btn btn-danger-outline' }, 'Delete…');
  const headMsg = notice();
  const crumbName = h('span', { 'aria-current': 'page' }, '…');

  // ---- tiles ----
  function tile(label, extra) {
    const value = h('span', { class: 'tile-value' }, '—');
    const sub = h('span', { class: 'tile-sub' }, extra || '');
    const el = h('div', { class: 'tile', role: 'group', 'aria-label': label }, h('span', { class: 'tile-label' }, label), value, sub);
    return { el, value, sub };
  }
  const tBacklog = tile('Backlog');
  const tInFlight = tile('In flight', 'leased to a consumer');
  const tDelayed = tile('Delayed', 'not yet deliverable');
  const tOldest = tile('Oldest message');
  const tDlq = tile('Dead-letter queue');
  tBacklog.el.dataset.stat = 'backlog';
  const sources = h('div', { class: 'callout', hidden: true, role: 'note' });

  // ---- activity ----
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

  // ---- layout ----
  const body = h('div', { class: 'queue-body', hidden: true });
  const loading = h('p', { class: 'muted loading' }, 'Loading the queue…');
  const messages = createMessages({ api, ctx, queueId, refresh: () => poller.now() });
  const consumer = createConsumer({ api, ctx, queueId, refresh: () => poller.now() });
  const settings = createSettings({
    api, ctx, queueId,
    onSaved: (q) => {
      queue = q;
      renderHeader();
      settings.show(queue);
    },
  });

  body.append(
    h('div', { class: 'page-head' },
      h('div', { class: 'page-head-main' }, h('div', { class: 'title-row' }, title, stateBadge), meta),
      h('div', { class: 'actions' }, pauseBtn, purgeBtn, deleteBtn)),
    headMsg.el,
    sources,
    h('div', { class: 'tiles' }, tBacklog.el, tInFlight.el, tDelayed.el, tOldest.el, tDlq.el),
    h('section', { class: 'card', 'aria-labelledby': 'activity-title' },
      h('div', { class: 'card-head' }, h('h2', { id: 'activity-title' }, 'Activity'), live),
      totals,
      h('div', { class: 'charts' },
        h('div', { class: 'chart-block' }, h('h3', null, 'Throughput (messages per second)'), throughput.el),
        h('div', { class: 'chart-block' }, h('h3', null, 'Backlog (messages)'), backlogChart.el))),
    h('div', { class: 'columns' },
      h('div', { class: 'column' }, messages.el),
      h('div', { class: 'column' }, consumer.el, settings.el)));

  root.append(h('section', { class: 'page' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/queues' }, 'Queues'), h('span', { 'aria-hidden': 'true' }, '/'), crumbName),
    loading, body));

  // ---- header behaviour ----
  function renderHeader() {
    title.textContent = queue.queue_name;
    crumbName.textContent = queue.queue_name;
    ctx.setTitle(queue.queue_name);
    const paused = queue.settings.delivery_paused;
    stateBadge.replaceChildren(paused ? badge('Delivery paused', 'warning') : badge('Delivering', 'success'));
    pauseBtn.textContent = paused ? 'Resume delivery' : 'Pause delivery';
    meta.replaceChildren('ID ', h('code', null, queue.queue_id), ` · created ${date(queue.created_on)}`);
  }

  pauseBtn.addEventListener('click', async () => {
    headMsg.clear();
    const pause = !queue.settings.delivery_paused;
    try {
      queue = await busy(pauseBtn, pause ? 'Pausing…' : 'Resuming…', () => api.updateQueue(queueId, { delivery_paused: pause }));
      renderHeader();
      settings.show(queue);
      ctx.toast(pause ? 'Delivery paused. Messages can still be sent; consumers get nothing until you resume.' : 'Delivery resumed.');
    } catch (err) {
      if (!ctx.signal.aborted) headMsg.show(describe(err));
    }
  });

  purgeBtn.addEventListener('click', async () => {
    headMsg.clear();
    const n = stats ? stats.backlog_count : null;
    const ok = await confirmDialog({
      title: `Purge ${queue.queue_name}?`,
      message: `Every message in the queue${n !== null ? ` (${num(n)} now)` : ''} is deleted permanently, including delayed and in-flight ones. This cannot be undone.`,
      confirmLabel: 'Purge messages',
    });
    if (!ok) return;
    try {
      await busy(purgeBtn, 'Purging…', () => api.purgeQueue(queueId));
      ctx.toast(`All messages in ${queue.queue_name} were deleted.`);
      messages.clear();
      poller.now();
    } catch (err) {
      if (!ctx.signal.aborted) headMsg.show(describe(err));
    }
  });

  deleteBtn.addEventListener('click', async () => {
    headMsg.clear();
    const ok = await confirmDialog({
      title: `Delete ${queue.queue_name}?`,
      message: 'The queue, its consumer and all its messages are deleted. This cannot be undone.',
      confirmLabel: 'Delete queue',
    });
    if (!ok) return;
    await poller.stop(); // no poll may ask for the queue while (or after) it goes
    try {
      await busy(deleteBtn, 'Deleting…', () => api.deleteQueue(queueId));
      history.delete(queueId);
      ctx.toast(`Queue ${queue.queue_name} deleted.`);
      ctx.navigate('#/queues');
    } catch (err) {
      if (ctx.signal.aborted) return;
      headMsg.show(describe(err));
      poller.resume();
    }
  });

  // ---- stats ----
  function renderStats(s) {
    stats = s;
    tBacklog.value.textContent = num(s.backlog_count);
    tBacklog.sub.textContent = s.backlog_count ? bytes(s.backlog_bytes) : 'empty';
    tInFlight.value.textContent = num(s.in_flight_count);
    tDelayed.value.textContent = num(s.delayed_count);
    tOldest.value.textContent = s.oldest_message_timestamp_ms ? age(s.oldest_message_timestamp_ms) : '—';
    tOldest.sub.textContent = s.oldest_message_timestamp_ms ? `since ${new Date(s.oldest_message_timestamp_ms).toLocaleTimeString()}` : 'no messages';
    if (s.dead_letter_queue) {
      const dlq = stats.dead_letter_queue;
      tDlq.value.textContent = num(s.dead_letter_backlog_count ?? 0);
      const target = s.dead_letter_queue_id;
      tDlq.sub.replaceChildren(target ? h('a', { href: `#/queues/${target}` }, dlq) : dlq);
      tDlq.el.classList.toggle('tile-warning', (s.dead_letter_backlog_count ?? 0) > 0);
    } else {
      tDlq.value.textContent = '—';
      tDlq.sub.textContent = 'none configured';
      tDlq.el.classList.remove('tile-warning');
    }
    if (s.dead_letter_sources && s.dead_letter_sources.length) {
      sources.hidden = false;
      const links = s.dead_letter_sources.map((src, i) => [i ? ', ' : '', h('a', { href: `#/queues/${src.queue_id}` }, src.queue_name)]);
      sources.replaceChildren();
      append(sources, [h('strong', null, 'Dead-letter queue. '),
        'Messages arrive here when a consumer of ', links,
        ' has used up their retries. They keep their original ids and timestamps; peek them below.']);
    } else {
      sources.hidden = true;
    }

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

  // ---- load, then poll ----
  let poller = { now() {}, async stop() {}, resume() {} };
  (async () => {
    try {
      const [q, s] = await Promise.all([api.getQueue(queueId), api.queueStats(queueId)]);
      if (ctx.signal.aborted) return;
      queue = q;
      loading.remove();
      body.hidden = false;
      renderHeader();
      settings.show(queue);
      consumer.show((q.consumers && q.consumers[0]) || null);
      await resolveDeadLetter(s);
      renderStats(s);
      let first = true;
      poller = ctx.poll(POLL_MS, async () => {
        if (first) {
          first = false; // just loaded
          return;
        }
        try {
          const next = await api.queueStats(queueId);
          if (ctx.signal.aborted) return;
          await resolveDeadLetter(next);
          renderStats(next);
        } catch (err) {
          live.textContent = 'Not updating';
          live.classList.add('live-stale');
          if (err.kind === 'not_found') {
            await poller.stop();
            headMsg.show('This queue no longer exists. It was deleted, perhaps from another window.');
            return;
          }
          throw err;
        }
      });
    } catch (err) {
      if (ctx.signal.aborted) return;
      loading.remove();
      ctx.setTitle('Queue');
      const text = err.kind === 'not_found' ? 'There is no queue with this ID in your account. It may have been deleted.' : describe(err);
      root.querySelector('.page').append(h('div', { class: 'card' },
        h('h1', null, err.kind === 'not_found' ? 'Queue not found' : 'Cannot show this queue'),
        h('p', { role: 'alert' }, text),
        h('p', null, h('a', { href: '#/queues' }, 'Back to all queues'))));
    }
  })();

  // The stats name the dead-letter queue; find its id (once) for a link.
  const dlqIds = new Map();
  async function resolveDeadLetter(s) {
    if (!s.dead_letter_queue) return;
    if (!dlqIds.has(s.dead_letter_queue)) {
      try {
        const all = await api.allStats();
        for (const other of all) dlqIds.set(other.queue_name, other.queue_id);
      } catch {
        // a link is a convenience: the name is shown either way
      }
    }
    s.dead_letter_queue_id = dlqIds.get(s.dead_letter_queue);
  }

  return () => {
    throughput.destroy();
    backlogChart.destroy();
  };
}
