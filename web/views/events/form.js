// The Events page's form (views/events.js): an event subscription's name, its source (one queue, picked
// from the account's queues, or every queue of the account), the event types it wants, the backlog
// threshold when it wants backlog.over_threshold, and the destination queue the events are published into.
// It checks what it can before sending and shows the server's refusal of the rest as the server words it.

import { h, field, notice } from '../../lib/dom.js';
import { invalid, onCreate } from '../../lib/create-form.js';
import { createQueueSelect, fillQueueSelect } from '../../lib/queue-names.js';
import { numberInput } from '../queue/inputs.js';
import { EVENT_TYPES, BACKLOG_EVENT, ACCOUNT_EVENTS } from './words.js';

/** The longest name the server takes. */
const MAX_NAME = 255;

/**
 * The form. `onCreated(subscription)` runs after the server made one; `refreshQueues()` reads the
 * account's queues again (after a 404: a queue picked here was deleted since). Returns {el, setQueues,
 * showError}: `setQueues(queues)` fills both pickers from the account's queues (id → name, by name),
 * `showError(text)` shows a message in the form.
 */
export function createSubscriptionForm({ ctx, onCreated, refreshQueues }) {
  const { api } = ctx;
  let queues = new Map();

  const name = h('input', { type: 'text', required: true, maxlength: String(MAX_NAME), autocomplete: 'off', placeholder: 'e.g. orders alerts' });
  const sourceKind = h('select', null,
    h('option', { value: 'queue' }, 'One queue'),
    h('option', { value: 'account' }, 'Every queue of the account'));
  const sourceQueue = createQueueSelect();
  const sourceQueueField = field('Source queue', sourceQueue, { hint: 'Its consumer, backlog and dead letters are watched.' });
  const boxes = EVENT_TYPES.map(([type, hint]) => ({ type, hint, input: h('input', { type: 'checkbox', value: type }) }));
  const eventSet = h('fieldset', { class: 'checks' }, h('legend', null, 'Events'),
    boxes.map((b) => h('label', { class: 'check' }, b.input,
      h('span', null, h('code', null, b.type), h('span', { class: 'muted block' }, b.hint)))));
  const backlogBox = boxes.find((b) => b.type === BACKLOG_EVENT).input;
  // A quota's events are the account's (the server refuses them of one queue): offered for every queue only.
  const accountBoxes = boxes.filter((b) => ACCOUNT_EVENTS.includes(b.type)).map((b) => b.input);
  for (const box of accountBoxes) box.disabled = true;
  const threshold = numberInput({ min: '1', placeholder: '1000' });
  const thresholdField = h('div', { class: 'narrow', hidden: true },
    field('Backlog threshold (messages)', threshold, { hint: 'A whole number, 1 or more: an event when the backlog rises over it.' }));
  const destination = createQueueSelect();
  const createBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create subscription');
  const createMsg = notice();
  const el = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'create-subscription-title' },
    h('h2', { id: 'create-subscription-title' }, 'Create a subscription'),
    h('div', { class: 'narrow' }, field('Name', name, { hint: 'What it is for, such as who reads its events.' })),
    h('div', { class: 'form-grid' },
      field('Source', sourceKind, { hint: 'Whose events: one queue, or every queue of the account (those made later too).' }),
      sourceQueueField),
    eventSet,
    thresholdField,
    h('div', { class: 'narrow' }, field('Destination queue', destination, { hint: 'The events are published into this queue, one JSON message each.' })),
    h('div', { class: 'form-actions' }, createBtn),
    createMsg.el);

  const showThreshold = () => {
    thresholdField.hidden = !backlogBox.checked;
    threshold.required = backlogBox.checked;
  };
  sourceKind.addEventListener('change', () => {
    const oneQueue = sourceKind.value === 'queue';
    sourceQueueField.hidden = !oneQueue;
    // A backlog is one queue's (the server refuses backlog.over_threshold of every queue): not offered then.
    backlogBox.disabled = !oneQueue;
    if (!oneQueue) backlogBox.checked = false;
    for (const box of accountBoxes) {
      box.disabled = oneQueue;
      if (oneQueue) box.checked = false;
    }
    showThreshold();
  });
  backlogBox.addEventListener('change', showThreshold);

  /** The inputs the server's 400 names, by the field its message starts with (the longer names first). */
  const FIELD_INPUTS = [
    ['source.backlog_threshold', threshold], ['backlog_threshold', threshold], ['backlog.over_threshold', threshold],
    ['source', sourceQueue],
    ['destination', destination], ['name', name], ['events', boxes[0].input],
  ];
  const allInputs = [name, sourceQueue, threshold, destination, ...boxes.map((b) => b.input)];

  /** The form's subscription, as the API takes it; throws an Error saying what to fix. */
  function chosen() {
    for (const input of allInputs) input.removeAttribute('aria-invalid');
    const subscriptionName = name.value.trim();
    if (!subscriptionName) throw invalid(name, 'Give the subscription a name.');
    if (subscriptionName.length > MAX_NAME) throw invalid(name, `A name is at most ${MAX_NAME} characters.`);
    const noQueues = 'Create a queue first: the events are published into one of your queues.';
    const source = sourceKind.value === 'queue' ? { type: 'queues.queue' } : { type: 'queues' };
    if (source.type === 'queues.queue') {
      if (!sourceQueue.value) throw invalid(sourceQueue, queues.size ? 'Choose the queue whose events you want.' : noQueues);
      source.queue_id = sourceQueue.value;
    }
    const events = boxes.filter((b) => b.input.checked).map((b) => b.type);
    if (events.length === 0) throw invalid(boxes[0].input, 'Choose at least one event.');
    if (backlogBox.checked) {
      const raw = threshold.value.trim();
      const value = Number(raw);
      if (raw === '' || !Number.isSafeInteger(value) || value < 1) {
        throw invalid(threshold, 'The backlog threshold must be a whole number of messages, 1 or more.');
      }
      source.backlog_threshold = value;
    }
    if (!destination.value) throw invalid(destination, queues.size ? 'Choose the queue the events are published into.' : noQueues);
    // The server refuses it too: each event published into the queue would be one of its own events.
    if (destination.value === source.queue_id) {
      throw invalid(destination, 'The destination cannot be the source queue: its own events would feed it without end. Choose another queue.');
    }
    return {
      name: subscriptionName,
      enabled: true,
      source,
      events,
      destination: { type: 'queues.queue', queue_id: destination.value },
    };
  }

  onCreate(el, {
    ctx,
    msg: createMsg,
    button: createBtn,
    fields: FIELD_INPUTS,
    check: chosen,
    send: (subscription) => api.createEventSubscription(subscription),
    created: (made, subscription) => {
      const from = subscription.source.type === 'queues' ? 'every queue' : queues.get(subscription.source.queue_id);
      createMsg.show(`Subscription ${made.name} created: events of ${from} go to ${queues.get(made.destination.queue_id) || 'its queue'}.`, 'success');
      onCreated(made);
    },
    // A queue picked here was deleted since the list was read: read it again, so it is no longer offered.
    refused: (err) => {
      if (err.kind === 'not_found') refreshQueues();
    },
  });

  /** Both pickers' choices, keeping what was picked when it is still there. */
  function setQueues(next) {
    queues = next;
    fillQueueSelect(sourceQueue, queues);
    fillQueueSelect(destination, queues);
  }

  return { el, setQueues, showError: (text) => createMsg.show(text) };
}
