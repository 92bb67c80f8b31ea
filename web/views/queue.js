// One queue: live counts and activity chart, settings (edit, pause/resume), its consumer, test
// messages, peek, purge, delete; a dead-letter queue shows where its messages came from.

import { h, append, field, notice, num, bytes, age, badge, busy, duration, date, confirmDialog, secretBox } from '../lib/dom.js';
import { describe } from '../lib/api.js';
import { lineChart } from '../lib/chart.js';

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

/** A peeked message's body as text: JSON pretty-printed, text as is, bytes as a size and base64. */
function decodeBody(message) {
  const type = (message.metadata && message.metadata['CF-Content-Type']) || 'json';
  if (type === 'text') return { type, text: String(message.body) };
  let raw;
  try {
    raw = Uint8Array.from(atob(String(message.body)), (c) => c.charCodeAt(0));
  } catch {
    return { type, text: String(message.body) };
  }
  if (type === 'json') {
    try {
      const text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
      return { type, text: JSON.stringify(JSON.parse(text), null, 2) };
    } catch {
      // fall through: show it as bytes
    }
  }
  return { type, text: String(message.body), note: `${num(raw.length)} bytes, shown as base64` };
}

function shorten(text, max = 4000) {
  return text.length > max ? `${text.slice(0, max)}\n… (${num(text.length - max)} more characters)` : text;
}

function numberInput(attrs) {
  return h('input', { type: 'number', step: '1', inputmode: 'numeric', ...attrs });
}

function readNumber(input, label, min, max, { optional = true } = {}) {
  const raw = input.value.trim();
  if (raw === '') {
    if (optional) return undefined;
    throw new Error(`${label} is required.`);
  }
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    input.setAttribute('aria-invalid', 'true');
    input.focus();
    throw new Error(`${label} must be a whole number from ${num(min)} to ${num(max)}.`);
  }
  input.removeAttribute('aria-invalid');
  return v;
}

export function renderQueue(root, ctx, queueId) {
  const { api } = ctx;
  let queue = null;
  let consumer = null;
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
  const messagesCard = h('section', { class: 'card', 'aria-labelledby': 'messages-title' });
  const consumerCard = h('section', { class: 'card', 'aria-labelledby': 'consumer-title' });
  const settingsCard = h('section', { class: 'card', 'aria-labelledby': 'settings-title' });

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
      h('div', { class: 'column' }, messagesCard),
      h('div', { class: 'column' }, consumerCard, settingsCard)));

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
      renderSettings();
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
      clearPeek();
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

  // ---- messages: send, peek, delete ----
  const contentType = h('select', null,
    h('option', { value: 'text' }, 'Text'),
    h('option', { value: 'json' }, 'JSON'),
    h('option', { value: 'bytes' }, 'Bytes (base64)'));
  const messageBody = h('textarea', { rows: '4', spellcheck: 'false', class: 'mono', placeholder: 'Hello from the dashboard' });
  const sendDelay = numberInput({ min: '0', max: '43200', placeholder: 'queue default' });
  const sendBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Send message');
  const sendMsg = notice();
  const sendForm = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'send-title' },
    h('h3', { id: 'send-title' }, 'Send a test message'),
    h('div', { class: 'form-grid' },
      field('Content type', contentType),
      field('Delay (seconds)', sendDelay, { hint: 'Optional, 0 to 43,200.' })),
    field('Message body', messageBody, { wide: true }),
    h('div', { class: 'form-actions' }, sendBtn),
    sendMsg.el);

  contentType.addEventListener('change', () => {
    messageBody.placeholder = { text: 'Hello from the dashboard', json: '{"hello": "world"}', bytes: 'aGVsbG8=' }[contentType.value];
  });

  sendForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    sendMsg.clear();
    const type = contentType.value;
    let payload = messageBody.value;
    try {
      if (type === 'json') {
        try {
          payload = JSON.parse(messageBody.value);
        } catch (err) {
          throw new Error(`The body is not valid JSON: ${err.message}`);
        }
      } else if (type === 'bytes') {
        const clean = messageBody.value.replace(/\s+/g, '');
        if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 !== 0) throw new Error('For bytes, the body must be base64 (A-Z, a-z, 0-9, +, /, = padding).');
        payload = clean;
      }
      const message = { body: payload, content_type: type };
      const delay = readNumber(sendDelay, 'Delay', 0, 43200);
      if (delay !== undefined) message.delay_seconds = delay;
      const result = await busy(sendBtn, 'Sending…', () => api.sendMessage(queueId, message));
      const metrics = result && result.metadata && result.metadata.metrics;
      sendMsg.show(metrics ? `Message sent. The queue now holds ${num(metrics.backlog_count)} ${metrics.backlog_count === 1 ? 'message' : 'messages'}.` : 'Message sent.', 'success');
      poller.now();
    } catch (err) {
      if (!ctx.signal.aborted) sendMsg.show(err.name === 'ApiError' ? describe(err) : err.message);
    }
  });

  const peekSize = numberInput({ min: '1', max: '100', value: '10' });
  const peekBtn = h('button', { type: 'submit', class: 'btn' }, 'Peek');
  const peekMsg = notice();
  const peekList = h('ul', { class: 'messages', 'aria-label': 'Peeked messages' });
  const selectAll = h('input', { type: 'checkbox', id: 'peek-select-all' });
  const deleteSelected = h('button', { type: 'button', class: 'btn btn-danger-outline btn-sm', disabled: true }, 'Delete selected');
  const peekTools = h('div', { class: 'peek-tools', hidden: true },
    h('label', { class: 'check' }, selectAll, ' Select all'), deleteSelected);
  const peekForm = h('form', { class: 'inline-form', novalidate: true, 'aria-labelledby': 'peek-title' },
    field('Messages to show', peekSize),
    h('div', { class: 'inline-submit' }, peekBtn));
  let peeked = [];

  function selectedRefs() {
    return [...peekList.querySelectorAll('input[type=checkbox]:checked')].map((c) => c.dataset.ref);
  }
  function updateSelection() {
    const n = selectedRefs().length;
    deleteSelected.disabled = n === 0;
    deleteSelected.textContent = n ? `Delete ${n} selected` : 'Delete selected';
    selectAll.checked = n > 0 && n === peeked.length;
    selectAll.indeterminate = n > 0 && n < peeked.length;
  }
  function clearPeek() {
    peeked = [];
    peekList.replaceChildren();
    peekTools.hidden = true;
    peekMsg.clear();
  }

  function renderPeek(messages) {
    peeked = messages;
    peekTools.hidden = messages.length === 0;
    peekList.replaceChildren(...messages.map((m) => {
      const decoded = decodeBody(m);
      const box = h('input', { type: 'checkbox', 'aria-label': `Select message ${m.id}`, dataset: { ref: m.ref } });
      box.addEventListener('change', updateSelection);
      return h('li', { class: 'message', dataset: { id: m.id } },
        h('div', { class: 'message-select' }, box),
        h('div', { class: 'message-main' },
          h('div', { class: 'message-meta' },
            h('code', { title: m.id }, m.id),
            badge(decoded.type, 'neutral'),
            h('span', null, m.attempts ? `${m.attempts} delivery ${m.attempts === 1 ? 'attempt' : 'attempts'}` : 'not delivered yet'),
            h('span', { title: new Date(m.timestamp_ms).toLocaleString() }, `${age(m.timestamp_ms)} old`)),
          decoded.note ? h('p', { class: 'hint' }, decoded.note) : null,
          h('pre', { class: 'message-body' }, shorten(decoded.text))));
    }));
    updateSelection();
  }

  async function doPeek() {
    peekMsg.clear();
    const size = readNumber(peekSize, 'Messages to show', 1, 100, { optional: false });
    const result = await busy(peekBtn, 'Peeking…', () => api.peek(queueId, size));
    if (ctx.signal.aborted) return;
    const messages = (result && result.messages) || [];
    renderPeek(messages);
    if (!messages.length) peekMsg.show('No messages are waiting in this queue right now.', 'info');
    else peekMsg.show(`Showing ${num(messages.length)} ${messages.length === 1 ? 'message' : 'messages'}, oldest first. Peeking does not lease or change them.`, 'info');
  }

  peekForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      await doPeek();
    } catch (err) {
      if (!ctx.signal.aborted) peekMsg.show(err.name === 'ApiError' ? describe(err) : err.message);
    }
  });
  selectAll.addEventListener('change', () => {
    for (const c of peekList.querySelectorAll('input[type=checkbox]')) c.checked = selectAll.checked;
    updateSelection();
  });
  deleteSelected.addEventListener('click', async () => {
    const refs = selectedRefs();
    if (!refs.length) return;
    const ok = await confirmDialog({
      title: `Delete ${refs.length} ${refs.length === 1 ? 'message' : 'messages'}?`,
      message: 'The selected messages are deleted permanently, without being delivered.',
      confirmLabel: 'Delete messages',
    });
    if (!ok) return;
    try {
      const result = await busy(deleteSelected, 'Deleting…', () => api.purgeMessages(queueId, refs));
      const gone = Object.keys((result && result.warnings) || {}).length;
      ctx.toast(gone ? `Deleted ${refs.length - gone}; ${gone} had already left the queue.` : `Deleted ${refs.length} ${refs.length === 1 ? 'message' : 'messages'}.`);
      poller.now();
      await doPeek();
    } catch (err) {
      if (!ctx.signal.aborted) peekMsg.show(err.name === 'ApiError' ? describe(err) : err.message);
    }
  });

  messagesCard.append(
    h('div', { class: 'card-head' }, h('h2', { id: 'messages-title' }, 'Messages')),
    sendForm,
    h('hr', { class: 'divider' }),
    h('div', { class: 'stack' }, h('h3', { id: 'peek-title' }, 'Peek'),
      h('p', { class: 'muted small' }, 'Look at the oldest waiting messages without leasing them.'),
      peekForm, peekMsg.el, peekTools, peekList));

  // ---- consumer ----
  const consumerBody = h('div', { class: 'stack' });
  const consumerMsg = notice();
  let secret = null; // {title, value} shown once after create / rotate
  consumerCard.append(h('div', { class: 'card-head' }, h('h2', { id: 'consumer-title' }, 'Consumer')), consumerMsg.el, consumerBody);

  function consumerForm(existing) {
    const isNew = !existing;
    const settings = (existing && existing.settings) || {};
    const typePull = h('input', { type: 'radio', name: `ctype-${queueId}`, value: 'http_pull', checked: !existing || existing.type === 'http_pull' });
    const typeHook = h('input', { type: 'radio', name: `ctype-${queueId}`, value: 'webhook', checked: existing && existing.type === 'webhook' });
    const typeSet = h('fieldset', { class: 'radios' }, h('legend', null, 'Type'),
      h('label', { class: 'radio' }, typePull, h('span', null, h('strong', null, 'HTTP pull'), h('span', { class: 'muted' }, ' — your service pulls and acks over the API'))),
      h('label', { class: 'radio' }, typeHook, h('span', null, h('strong', null, 'Webhook'), h('span', { class: 'muted' }, ' — skiplock POSTs batches to your URL'))));
    const url = h('input', { type: 'url', placeholder: 'https://example.com/queue-hook', spellcheck: 'false', value: existing && existing.url ? existing.url : '' });
    const dlq = h('input', { type: 'text', maxlength: '63', spellcheck: 'false', placeholder: 'none', value: existing ? existing.dead_letter_queue : '' });
    const batch = numberInput({ min: '1', max: '100', value: settings.batch_size ?? '' });
    const retries = numberInput({ min: '0', max: '100', placeholder: '3', value: settings.max_retries ?? '' });
    const retryDelay = numberInput({ min: '0', max: '43200', placeholder: '0', value: settings.retry_delay ?? '' });
    const visibility = numberInput({ min: '1', max: '43200000', placeholder: '30000', value: settings.visibility_timeout_ms ?? '' });
    const maxWait = numberInput({ min: '0', max: '30000', placeholder: '5000', value: settings.max_wait_time_ms ?? '' });
    const concurrency = numberInput({ min: '1', max: '1000', placeholder: 'server maximum', value: settings.max_concurrency ?? '' });
    const fUrl = field('Webhook URL', url, { hint: 'http or https. skiplock signs each delivery (Standard Webhooks).', wide: true });
    const fVisibility = field('Visibility timeout (ms)', visibility, { hint: 'Default lease for pulls. Default 30,000.' });
    const fMaxWait = field('Max wait time (ms)', maxWait, { hint: '0 to 30,000. Default 5,000.' });
    const fConcurrency = field('Max concurrency', concurrency, { hint: 'Batches in flight at once. Empty: the server maximum.' });
    const batchHint = h('span');
    const fBatch = field('Batch size', batch, { hint: batchHint });
    const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, isNew ? 'Create consumer' : 'Save consumer');
    const cancel = h('button', { type: 'button', class: 'btn' }, 'Cancel');
    const kind = () => (existing ? existing.type : typeHook.checked ? 'webhook' : 'http_pull');
    const sync = () => {
      const hook = kind() === 'webhook';
      fUrl.hidden = !hook;
      fMaxWait.hidden = !hook;
      fConcurrency.hidden = !hook;
      fVisibility.hidden = hook;
      batch.placeholder = hook ? '10' : '5';
      batchHint.textContent = hook ? '1 to 100 messages per delivery. Default 10.' : '1 to 100; the default pull size. Default 5.';
    };
    typePull.addEventListener('change', sync);
    typeHook.addEventListener('change', sync);
    sync();
    const form = h('form', { class: 'stack', novalidate: true, 'aria-label': isNew ? 'Create a consumer' : 'Edit the consumer' },
      isNew ? typeSet : h('p', { class: 'muted' }, `Type: ${existing.type === 'webhook' ? 'Webhook' : 'HTTP pull'} (cannot change; delete the consumer and create another).`),
      fUrl,
      field('Dead-letter queue', dlq, { hint: 'A queue name; created if it does not exist. Empty: failed messages are deleted.', wide: true }),
      h('div', { class: 'form-grid' },
        fBatch,
        field('Max retries', retries, { hint: '0 to 100. Default 3.' }),
        field('Retry delay (seconds)', retryDelay, { hint: '0 to 43,200. Default 0.' }),
        fVisibility, fMaxWait, fConcurrency),
      h('div', { class: 'form-actions' }, submit, cancel));
    cancel.addEventListener('click', () => renderConsumer());
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      consumerMsg.clear();
      try {
        const type = kind();
        const body = { type, dead_letter_queue: dlq.value.trim(), settings: {} };
        const put = (key, input, label, min, max) => {
          const v = readNumber(input, label, min, max);
          if (v !== undefined) body.settings[key] = v;
        };
        if (type === 'webhook') {
          const u = url.value.trim();
          if (!/^https?:\/\/\S+$/i.test(u)) {
            url.setAttribute('aria-invalid', 'true');
            url.focus();
            throw new Error('Enter the webhook URL, starting with http:// or https://.');
          }
          url.removeAttribute('aria-invalid');
          body.url = u;
        }
        if (body.dead_letter_queue && !/^[a-z0-9-]{1,63}$/.test(body.dead_letter_queue)) {
          dlq.focus();
          throw new Error('The dead-letter queue is a queue name: lowercase letters, digits and hyphens.');
        }
        put('batch_size', batch, 'Batch size', 1, 100);
        put('max_retries', retries, 'Max retries', 0, 100);
        put('retry_delay', retryDelay, 'Retry delay', 0, 43200);
        if (type === 'webhook') {
          put('max_wait_time_ms', maxWait, 'Max wait time', 0, 30000);
          put('max_concurrency', concurrency, 'Max concurrency', 1, 1000000);
        } else {
          put('visibility_timeout_ms', visibility, 'Visibility timeout', 1, 43200000);
        }
        const saved = await busy(submit, isNew ? 'Creating…' : 'Saving…', () =>
          (isNew ? api.createConsumer(queueId, body) : api.updateConsumer(queueId, existing.consumer_id, body)));
        if (ctx.signal.aborted) return;
        consumer = saved;
        if (saved.signing_secret) secret = { title: 'Webhook signing secret', value: saved.signing_secret };
        ctx.toast(isNew ? 'Consumer created.' : 'Consumer saved.');
        renderConsumer();
        poller.now();
      } catch (err) {
        if (!ctx.signal.aborted) consumerMsg.show(err.name === 'ApiError' ? describe(err) : err.message);
      }
    });
    return form;
  }

  function renderConsumer(mode = 'view') {
    consumerBody.replaceChildren();
    if (mode === 'edit' || (mode === 'create' && !consumer)) {
      consumerBody.append(consumerForm(mode === 'edit' ? consumer : null));
      const first = consumerBody.querySelector('input, select');
      if (first) first.focus();
      return;
    }
    if (!consumer) {
      const add = h('button', { type: 'button', class: 'btn btn-primary' }, 'Add a consumer');
      add.addEventListener('click', () => {
        consumerMsg.clear();
        renderConsumer('create');
      });
      consumerBody.append(
        h('p', { class: 'muted' }, 'No consumer. Messages wait in the queue until one is attached (one consumer per queue).'),
        h('div', null, add));
      return;
    }
    const c = consumer;
    const s = c.settings || {};
    const rows = [
      ['Type', c.type === 'webhook' ? 'Webhook (push)' : 'HTTP pull'],
      c.type === 'webhook' ? ['URL', h('span', { class: 'break mono' }, c.url || '—')] : null,
      ['Dead-letter queue', c.dead_letter_queue || h('span', { class: 'muted' }, 'none (messages are deleted after the last retry)')],
      ['Batch size', num(s.batch_size)],
      ['Max retries', num(s.max_retries)],
      ['Retry delay', duration(s.retry_delay || 0)],
      c.type === 'http_pull' ? ['Visibility timeout', `${num(s.visibility_timeout_ms)} ms`] : null,
      c.type === 'webhook' ? ['Max wait time', `${num(s.max_wait_time_ms)} ms`] : null,
      c.type === 'webhook' ? ['Max concurrency', s.max_concurrency == null ? 'server maximum' : num(s.max_concurrency)] : null,
      ['Consumer ID', h('code', null, c.consumer_id)],
    ].filter(Boolean);
    const edit = h('button', { type: 'button', class: 'btn' }, 'Edit');
    const rotate = c.type === 'webhook' ? h('button', { type: 'button', class: 'btn' }, 'Rotate secret…') : null;
    const remove = h('button', { type: 'button', class: 'btn btn-danger-outline' }, 'Delete…');
    edit.addEventListener('click', () => {
      consumerMsg.clear();
      secret = null;
      renderConsumer('edit');
    });
    if (rotate) {
      rotate.addEventListener('click', async () => {
        consumerMsg.clear();
        const ok = await confirmDialog({
          title: 'Rotate the signing secret?',
          message: 'A new secret is created and shown once. The old one stays valid for 24 hours, and deliveries carry both signatures meanwhile.',
          confirmLabel: 'Rotate secret',
          danger: false,
        });
        if (!ok) return;
        try {
          const result = await busy(rotate, 'Rotating…', () => api.rotateSecret(queueId, c.consumer_id));
          secret = { title: 'New webhook signing secret', value: result.signing_secret };
          renderConsumer();
        } catch (err) {
          if (!ctx.signal.aborted) consumerMsg.show(describe(err));
        }
      });
    }
    remove.addEventListener('click', async () => {
      consumerMsg.clear();
      const ok = await confirmDialog({
        title: 'Delete the consumer?',
        message: 'Messages stay in the queue; nothing is delivered until another consumer is attached.',
        confirmLabel: 'Delete consumer',
      });
      if (!ok) return;
      try {
        await busy(remove, 'Deleting…', () => api.deleteConsumer(queueId, c.consumer_id));
        consumer = null;
        secret = null;
        ctx.toast('Consumer deleted.');
        renderConsumer();
      } catch (err) {
        if (!ctx.signal.aborted) consumerMsg.show(describe(err));
      }
    });
    append(consumerBody, [
      secret ? secretBox({
        title: secret.title,
        label: 'Signing secret',
        secret: secret.value,
        note: 'Copy it now: it is shown only once. Your webhook receiver verifies signatures with it.',
      }) : null,
      h('dl', { class: 'props' }, rows.map(([k, v]) => [h('dt', null, k), h('dd', null, v)])),
      h('div', { class: 'form-actions' }, edit, rotate, remove)]);
  }

  // ---- settings ----
  function renderSettings() {
    const s = queue.settings;
    const delay = numberInput({ min: '0', max: '43200', value: s.delivery_delay });
    const retention = numberInput({ min: '60', max: '1209600', value: s.message_retention_period });
    const window_ = numberInput({ min: '0', max: '604800', value: s.idempotency_window ?? 300 });
    const delayHint = h('span');
    const retentionHint = h('span');
    const showHints = () => {
      const d = Number(delay.value);
      const r = Number(retention.value);
      delayHint.textContent = `0 to 43,200 s${delay.value !== '' && Number.isFinite(d) ? ` · now ${duration(d)}` : ''}`;
      retentionHint.textContent = `60 s to 14 days${retention.value !== '' && Number.isFinite(r) ? ` · now ${duration(r)}` : ''}`;
    };
    delay.addEventListener('input', showHints);
    retention.addEventListener('input', showHints);
    showHints();
    const msg = notice();
    const save = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Save settings');
    const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'settings-title' },
      h('div', { class: 'form-grid' },
        field('Delivery delay (seconds)', delay, { hint: delayHint }),
        field('Message retention (seconds)', retention, { hint: retentionHint }),
        field('Idempotency window (seconds)', window_, {
          hint: h('span', null, '0 to 7 days · a publish whose idempotency_key the queue saw this recently stores nothing; 0 turns it off'),
        })),
      h('p', { class: 'muted small' }, 'Delivery is ', h('strong', null, s.delivery_paused ? 'paused' : 'running'),
        '; use the button at the top of the page to ', s.delivery_paused ? 'resume' : 'pause', ' it.'),
      h('div', { class: 'form-actions' }, save),
      msg.el);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      msg.clear();
      try {
        const next = {
          delivery_delay: readNumber(delay, 'Delivery delay', 0, 43200, { optional: false }),
          message_retention_period: readNumber(retention, 'Message retention', 60, 1209600, { optional: false }),
          idempotency_window: readNumber(window_, 'Idempotency window', 0, 604800, { optional: false }),
        };
        queue = await busy(save, 'Saving…', () => api.updateQueue(queueId, next));
        if (ctx.signal.aborted) return;
        renderHeader();
        renderSettings();
        ctx.toast('Settings saved.');
      } catch (err) {
        if (!ctx.signal.aborted) msg.show(err.name === 'ApiError' ? describe(err) : err.message);
      }
    });
    settingsCard.replaceChildren(h('div', { class: 'card-head' }, h('h2', { id: 'settings-title' }, 'Settings')), form);
  }

  // ---- load, then poll ----
  let poller = { now() {}, async stop() {}, resume() {} };
  (async () => {
    try {
      const [q, s] = await Promise.all([api.getQueue(queueId), api.queueStats(queueId)]);
      if (ctx.signal.aborted) return;
      queue = q;
      consumer = (q.consumers && q.consumers[0]) || null;
      loading.remove();
      body.hidden = false;
      renderHeader();
      renderSettings();
      renderConsumer();
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
