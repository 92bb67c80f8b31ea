// The queue page's messages card: send a test message (with an optional ordering key and flow control
// key); peek at the oldest waiting ones, with their keys (and a dead-lettered one's source queue and
// consumer), and delete a selection of them.

import { h, field, notice, num, age, badge, busy, confirmDialog } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { contentTypeSelect, readBody } from '../../lib/message-body.js';
import { numberInput, readNumber } from './inputs.js';
import { shortConsumerId } from './consumer-words.js';

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

/**
 * A dead-lettered message's source: "from orders", and "· consumer …4ca4c13a" when it names the consumer
 * that gave up on it (a queue with several consumers dead-letters each one's copies apart).
 */
function sourceBadge(metadata) {
  const consumerId = metadata.dead_letter_source_consumer;
  const consumer = consumerId ? ` · consumer ${shortConsumerId(consumerId)}` : '';
  const el = badge(`from ${metadata.dead_letter_source_queue}${consumer}`, 'warning');
  if (consumerId) el.title = `Consumer ID ${consumerId}`;
  return el;
}

function shorten(text, max = 4000) {
  return text.length > max ? `${text.slice(0, max)}\n… (${num(text.length - max)} more characters)` : text;
}

/** The messages card; `refresh()` asks the page for fresh stats after a send or delete; clear() empties the peek. */
export function createMessages({ api, ctx, queueId, refresh, redrive }) {
  // ---- send ----
  const messageBody = h('textarea', { rows: '4', spellcheck: 'false', class: 'mono' });
  const contentType = contentTypeSelect(messageBody);
  const sendDelay = numberInput({ min: '0', max: '86400', placeholder: 'queue default' });
  const sendKey = h('input', { type: 'text', class: 'mono', spellcheck: 'false', autocomplete: 'off', placeholder: 'none' });
  const sendFlowKey = h('input', { type: 'text', class: 'mono', spellcheck: 'false', autocomplete: 'off', placeholder: 'none' });
  const sendBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Send message');
  const sendMsg = notice();
  const sendForm = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'send-title' },
    h('h3', { id: 'send-title' }, 'Send a test message'),
    h('div', { class: 'form-grid' },
      field('Content type', contentType),
      field('Delay (seconds)', sendDelay, { hint: 'Optional, 0 to 86,400.' }),
      field('Ordering key', sendKey, { hint: 'Optional. Messages with the same key are delivered one at a time, in order.' }),
      field('Flow control key', sendFlowKey, { hint: 'Optional. Messages with the same key are let go within the flow control limits for it.' })),
    field('Message body', messageBody, { wide: true }),
    h('div', { class: 'form-actions' }, sendBtn),
    sendMsg.el);

  sendForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    sendMsg.clear();
    const type = contentType.value;
    try {
      const message = { body: readBody(type, messageBody.value), content_type: type };
      const delay = readNumber(sendDelay, 'Delay', 0, 86400);
      if (delay !== undefined) message.delay_seconds = delay;
      // Sent as typed: the server checks the key (1 to 128 printable ASCII characters, no spaces) and says what is wrong.
      if (sendKey.value !== '') message.ordering_key = sendKey.value;
      if (sendFlowKey.value !== '') message.flow_control_key = sendFlowKey.value;
      const result = await busy(sendBtn, 'Sending…', () => api.sendMessage(queueId, message));
      const metrics = result && result.metadata && result.metadata.metrics;
      sendMsg.show(metrics ? `Message sent. The queue now holds ${num(metrics.backlog_count)} ${metrics.backlog_count === 1 ? 'message' : 'messages'}.` : 'Message sent.', 'success');
      refresh();
    } catch (err) {
      if (!ctx.signal.aborted) sendMsg.show(err.name === 'ApiError' ? describe(err) : err.message);
    }
  });

  // ---- peek and delete ----
  const peekSize = numberInput({ min: '1', max: '100', value: '10' });
  const peekBtn = h('button', { type: 'submit', class: 'btn' }, 'Peek');
  const peekMsg = notice();
  const peekList = h('ul', { class: 'messages', 'aria-label': 'Peeked messages' });
  const selectAll = h('input', { type: 'checkbox', id: 'peek-select-all' });
  const deleteSelected = h('button', { type: 'button', class: 'btn btn-danger-outline btn-sm', disabled: true }, 'Delete selected');
  const redriveSelected = h('button', { type: 'button', class: 'btn btn-sm', disabled: true, hidden: true }, 'Redrive selected');
  const peekTools = h('div', { class: 'peek-tools', hidden: true },
    h('label', { class: 'check' }, selectAll, ' Select all'), redriveSelected, deleteSelected);
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
    redriveSelected.hidden = !(redrive && redrive.isDeadLetter());
    redriveSelected.disabled = n === 0;
    redriveSelected.textContent = n ? `Redrive ${n} selected` : 'Redrive selected';
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
            h('span', { title: new Date(m.timestamp_ms).toLocaleString() }, `${age(m.timestamp_ms)} old`),
            m.metadata && m.metadata.ordering_key ? h('span', { class: 'message-key' }, 'Ordering key ', h('code', null, m.metadata.ordering_key)) : null,
            m.metadata && m.metadata.flow_control_key ? h('span', { class: 'message-key' }, 'Flow key ', h('code', null, m.metadata.flow_control_key)) : null,
            m.metadata && m.metadata.dead_letter_source_queue ? sourceBadge(m.metadata) : null),
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
      refresh();
      await doPeek();
    } catch (err) {
      if (!ctx.signal.aborted) peekMsg.show(err.name === 'ApiError' ? describe(err) : err.message);
    }
  });

  redriveSelected.addEventListener('click', async () => {
    const refs = selectedRefs();
    if (!refs.length || !redrive) return;
    await redrive.redriveRefs(refs, redriveSelected);
    refresh();
    await doPeek().catch(() => {});
  });

  const el = h('section', { class: 'card', 'aria-labelledby': 'messages-title' },
    h('div', { class: 'card-head' }, h('h2', { id: 'messages-title' }, 'Messages')),
    sendForm,
    h('hr', { class: 'divider' }),
    h('div', { class: 'stack' }, h('h3', { id: 'peek-title' }, 'Peek'),
      h('p', { class: 'muted small' }, 'Look at the oldest waiting messages without leasing them.'),
      peekForm, peekMsg.el, peekTools, peekList));

  return { el, clear: clearPeek };
}
