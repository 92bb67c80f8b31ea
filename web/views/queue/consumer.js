// The queue page's consumer card: the queue's one consumer (HTTP pull or webhook) shown, created,
// edited or deleted, with its limits of flow control per key; a webhook's signing secret shown once
// after create or rotate, its endpoint's health (health.js) and its test send (test-send.js), and how long
// its endpoint may fail before it is disabled (disable_after_hours).

import { h, append, field, notice, num, busy, duration, confirmDialog, secretBox } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { numberInput, readNumber } from './inputs.js';
import { FLOW_MAX, consumerFlowText } from './flow-words.js';
import { createHealth } from './health.js';
import { createTestSend } from './test-send.js';

/** The longest disable_after_hours the server takes: 30 days. */
const DISABLE_AFTER_MAX = 720;

/** The flow control limits a server's 400 names ("settings.flow_control.rate must be …"), or null. */
function flowFieldOf(message) {
  const m = /settings\.flow_control\.(parallelism|rate|period)/.exec(message || '');
  return m ? m[1] : null;
}

/**
 * The consumer card; show(consumer or null) with the queue's, setHealth(consumer id, health) with a
 * webhook's endpoint health read since; `refresh()` asks the page for fresh stats; `onChange(consumer or
 * null)` is told of the consumer shown, at first and after each change, `onTested(attempt)` of a test
 * send's attempt; `polling` is the page's, stopped while the consumer is being deleted.
 */
export function createConsumer({ api, ctx, queueId, refresh, polling, onChange = () => {}, onTested = () => {} }) {
  let consumer = null;
  let secret = null; // {title, value} shown once after create / rotate
  const health = createHealth();
  const testSend = createTestSend({ api, ctx, queueId, onSent: onTested });
  const consumerBody = h('div', { class: 'stack' });
  const consumerMsg = notice();
  const el = h('section', { class: 'card', 'aria-labelledby': 'consumer-title' },
    h('div', { class: 'card-head' }, h('h2', { id: 'consumer-title' }, 'Consumer')), consumerMsg.el, consumerBody);

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
    const retryDelay = numberInput({ min: '0', max: '86400', placeholder: '0', value: settings.retry_delay ?? '' });
    const backoff = h('select', null,
      h('option', { value: 'constant' }, 'Constant: the retry delay each time'),
      h('option', { value: 'exponential' }, 'Exponential: the retry delay doubled each time, with jitter'));
    backoff.value = settings.retry_backoff === 'exponential' ? 'exponential' : 'constant';
    const retryDelayMax = numberInput({ min: '1', max: '86400', placeholder: '86400', value: settings.retry_delay_max ?? '' });
    const visibility = numberInput({ min: '1', max: '43200000', placeholder: '30000', value: settings.visibility_timeout_ms ?? '' });
    const maxWait = numberInput({ min: '0', max: '30000', placeholder: '5000', value: settings.max_wait_time_ms ?? '' });
    const concurrency = numberInput({ min: '1', max: '1000', placeholder: 'server maximum', value: settings.max_concurrency ?? '' });
    const disableAfter = numberInput({ min: '1', max: String(DISABLE_AFTER_MAX), placeholder: 'never', value: settings.disable_after_hours ?? '' });
    const flow = settings.flow_control || {};
    const flowInputs = {
      parallelism: numberInput({ min: '1', max: String(FLOW_MAX.parallelism), placeholder: 'no limit', value: flow.parallelism ?? '' }),
      rate: numberInput({ min: '1', max: String(FLOW_MAX.rate), placeholder: 'no limit', value: flow.rate ?? '' }),
      period: numberInput({ min: '1', max: String(FLOW_MAX.period), placeholder: '1', value: flow.period ?? '' }),
    };
    const flowSet = h('fieldset', { class: 'stack flow-set' },
      h('legend', null, 'Flow control per key'),
      h('p', { class: 'muted small' }, 'For messages published with a ', h('code', null, 'flow_control_key'),
        ': at most so many of one key let go at once, and so many per period. The rest wait, in publish order, '
        + 'without counting as delivery attempts; other keys are not held up. A key can have limits of its own '
        + '(Flow control, on this page). Empty: no limit.'),
      h('div', { class: 'form-grid' },
        field('Parallelism', flowInputs.parallelism, { hint: `1 to ${num(FLOW_MAX.parallelism)} messages of one key at once.` }),
        field('Rate', flowInputs.rate, { hint: `1 to ${num(FLOW_MAX.rate)} messages of one key per period.` }),
        field('Period (seconds)', flowInputs.period, { hint: `The rate's period, 1 to ${num(FLOW_MAX.period)}. Default 1.` })));
    const fUrl = field('Webhook URL', url, { hint: 'http or https. skiplock signs each delivery (Standard Webhooks).', wide: true });
    const fVisibility = field('Visibility timeout (ms)', visibility, { hint: 'Default lease for pulls. Default 30,000.' });
    const fMaxWait = field('Max wait time (ms)', maxWait, { hint: '0 to 30,000. Default 5,000.' });
    const fConcurrency = field('Max concurrency', concurrency, { hint: 'Batches in flight at once. Empty: the server maximum.' });
    const fDisableAfter = field('Disable after (hours)', disableAfter, {
      hint: `1 to ${num(DISABLE_AFTER_MAX)}: an endpoint failing this long is disabled until a test send succeeds. Empty: never.`,
    });
    const fRetryDelayMax = field('Max retry delay (seconds)', retryDelayMax, { hint: '1 to 86,400: where the doubling stops. Default 86,400.' });
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
      fDisableAfter.hidden = !hook;
      fVisibility.hidden = hook;
      fRetryDelayMax.hidden = backoff.value !== 'exponential';
      batch.placeholder = hook ? '10' : '5';
      batchHint.textContent = hook ? '1 to 100 messages per delivery. Default 10.' : '1 to 100; the default pull size. Default 5.';
    };
    typePull.addEventListener('change', sync);
    typeHook.addEventListener('change', sync);
    backoff.addEventListener('change', sync);
    sync();
    const form = h('form', { class: 'stack', novalidate: true, 'aria-label': isNew ? 'Create a consumer' : 'Edit the consumer' },
      isNew ? typeSet : h('p', { class: 'muted' }, `Type: ${existing.type === 'webhook' ? 'Webhook' : 'HTTP pull'} (cannot change; delete the consumer and create another).`),
      fUrl,
      field('Dead-letter queue', dlq, { hint: 'A queue name; created if it does not exist. Empty: failed messages are deleted.', wide: true }),
      h('div', { class: 'form-grid' },
        fBatch,
        field('Max retries', retries, { hint: '0 to 100. Default 3.' }),
        field('Retry delay (seconds)', retryDelay, { hint: '0 to 86,400. Default 0.' }),
        field('Retry backoff', backoff, { hint: 'How the delay grows from one retry to the next. Exponential needs a retry delay of 1 s or more.' }),
        fRetryDelayMax,
        fVisibility, fMaxWait, fConcurrency, fDisableAfter),
      flowSet,
      h('div', { class: 'form-actions' }, submit, cancel));
    cancel.addEventListener('click', () => render());
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      consumerMsg.clear();
      for (const input of Object.values(flowInputs)) input.removeAttribute('aria-invalid');
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
        put('retry_delay', retryDelay, 'Retry delay', 0, 86400);
        // Sent only when exponential, as the server shows it: a save keeps the backoff the consumer has.
        if (backoff.value === 'exponential') {
          body.settings.retry_backoff = 'exponential';
          put('retry_delay_max', retryDelayMax, 'Max retry delay', 1, 86400);
        }
        if (type === 'webhook') {
          put('max_wait_time_ms', maxWait, 'Max wait time', 0, 30000);
          put('max_concurrency', concurrency, 'Max concurrency', 1, 1000000);
          put('disable_after_hours', disableAfter, 'Disable after', 1, DISABLE_AFTER_MAX);
        } else {
          put('visibility_timeout_ms', visibility, 'Visibility timeout', 1, 43200000);
        }
        // Flow control: only the limits given, and none of it when none is (no limits). A period without
        // a rate is sent as typed: the server says what is wrong.
        const flowControl = {};
        const flowRead = [['parallelism', 'Parallelism'], ['rate', 'Rate'], ['period', 'Period']];
        for (const [key, label] of flowRead) {
          const v = readNumber(flowInputs[key], label, 1, FLOW_MAX[key]);
          if (v !== undefined) flowControl[key] = v;
        }
        if (Object.keys(flowControl).length) body.settings.flow_control = flowControl;
        const saved = await busy(submit, isNew ? 'Creating…' : 'Saving…', () =>
          (isNew ? api.createConsumer(queueId, body) : api.updateConsumer(queueId, existing.consumer_id, body)));
        if (ctx.signal.aborted) return;
        // Create and update answers carry no health: an edit keeps the endpoint's as last read.
        consumer = isNew || saved.health ? saved : { ...saved, health: existing.health };
        if (saved.signing_secret) secret = { title: 'Webhook signing secret', value: saved.signing_secret };
        ctx.toast(isNew ? 'Consumer created.' : 'Consumer saved.');
        render();
        onChange(consumer);
        refresh();
      } catch (err) {
        if (ctx.signal.aborted) return;
        consumerMsg.show(err.name === 'ApiError' ? describe(err) : err.message);
        const named = err.name === 'ApiError' ? flowFieldOf(err.message) : null;
        if (named) flowInputs[named].setAttribute('aria-invalid', 'true');
      }
    });
    return form;
  }

  function render(mode = 'view') {
    consumerBody.replaceChildren();
    testSend.setConsumer(consumer && consumer.type === 'webhook' ? consumer.consumer_id : null);
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
        render('create');
      });
      consumerBody.append(
        h('p', { class: 'muted' }, 'No consumer. Messages wait in the queue until one is attached (one consumer per queue).'),
        h('div', null, add));
      return;
    }
    const c = consumer;
    const s = c.settings || {};
    const hook = c.type === 'webhook';
    if (hook) health.show(c.health);
    const rows = [
      ['Type', hook ? 'Webhook (push)' : 'HTTP pull'],
      hook ? ['URL', h('span', { class: 'break mono' }, c.url || '—')] : null,
      hook ? ['Endpoint', health.el] : null,
      ['Dead-letter queue', c.dead_letter_queue || h('span', { class: 'muted' }, 'none (messages are deleted after the last retry)')],
      ['Batch size', num(s.batch_size)],
      ['Max retries', num(s.max_retries)],
      ['Retry delay', s.retry_backoff === 'exponential'
        ? `${duration(s.retry_delay || 0)}, doubled at each retry up to ${duration(s.retry_delay_max ?? 86400)}`
        : duration(s.retry_delay || 0)],
      c.type === 'http_pull' ? ['Visibility timeout', `${num(s.visibility_timeout_ms)} ms`] : null,
      c.type === 'webhook' ? ['Max wait time', `${num(s.max_wait_time_ms)} ms`] : null,
      c.type === 'webhook' ? ['Max concurrency', s.max_concurrency == null ? 'server maximum' : num(s.max_concurrency)] : null,
      c.type === 'webhook' && s.disable_after_hours != null
        ? ['Disable after', `${num(s.disable_after_hours)} ${s.disable_after_hours === 1 ? 'hour' : 'hours'} of failing`]
        : null,
      ['Flow control', consumerFlowText(s.flow_control) || h('span', { class: 'muted' }, 'no limits per key')],
      ['Consumer ID', h('code', null, c.consumer_id)],
    ].filter(Boolean);
    const edit = h('button', { type: 'button', class: 'btn' }, 'Edit');
    const rotate = c.type === 'webhook' ? h('button', { type: 'button', class: 'btn' }, 'Rotate secret…') : null;
    const remove = h('button', { type: 'button', class: 'btn btn-danger-outline' }, 'Delete…');
    edit.addEventListener('click', () => {
      consumerMsg.clear();
      secret = null;
      testSend.clear();
      render('edit');
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
          render();
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
      await polling.stop(); // no read may ask for the consumer's attempts while (or after) it goes
      try {
        await busy(remove, 'Deleting…', () => api.deleteConsumer(queueId, c.consumer_id));
        consumer = null;
        secret = null;
        ctx.toast('Consumer deleted.');
        render();
        onChange(null);
      } catch (err) {
        if (!ctx.signal.aborted) consumerMsg.show(describe(err));
      } finally {
        polling.resume();
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
      hook ? null : h('p', { class: 'muted small' }, 'An HTTP pull consumer has no log of delivery attempts: what comes of each '
        + 'pull is your client\'s own acks and retries, seen in the queue\'s counts and activity.'),
      hook ? testSend.els : null,
      h('div', { class: 'form-actions' }, edit, hook ? testSend.button : null, rotate, remove)]);
  }

  function show(next) {
    consumer = next;
    render();
    onChange(consumer);
  }

  /** The endpoint health of consumer `id`, read since it was shown (kept by the card while it shows that consumer). */
  function setHealth(id, next) {
    if (!consumer || consumer.consumer_id !== id || !next) return;
    consumer = { ...consumer, health: next };
    health.show(next);
  }

  return { el, show, setHealth };
}
