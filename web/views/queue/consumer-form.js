// The consumer form, to create a consumer of the queue or edit one: its type (on create), a webhook's URL,
// its dead-letter queue, batching, retries and backoff, a pull's lease or a webhook's wait, concurrency and
// how long its endpoint may fail before it is disabled (disable_after_hours), and its limits of flow
// control per key. Checked here before anything is sent; the server's 400 shows in the card's notice.

import { h, field, num, busy } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { numberInput, readNumber } from './inputs.js';
import { FLOW_MAX } from './flow-words.js';

/** The longest disable_after_hours the server takes: 30 days. */
const DISABLE_AFTER_MAX = 720;

/** The flow control limits a server's 400 names ("settings.flow_control.rate must be …"), or null. */
function flowFieldOf(message) {
  const m = /settings\.flow_control\.(parallelism|rate|period)/.exec(message || '');
  return m ? m[1] : null;
}

/**
 * The form: a new consumer's (`existing` null) or `existing`'s. `onSaved(consumer)` gets the consumer the
 * server answered (an edit keeps the health last read), `onCancel()` is told of Cancel; `msg` is the
 * card's notice, where what to fix is said.
 */
export function consumerForm({ api, ctx, queueId, existing = null, msg, onSaved, onCancel }) {
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
  cancel.addEventListener('click', () => onCancel());
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.clear();
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
      onSaved(isNew || saved.health ? saved : { ...saved, health: existing.health });
    } catch (err) {
      if (ctx.signal.aborted) return;
      msg.show(err.name === 'ApiError' ? describe(err) : err.message);
      const named = err.name === 'ApiError' ? flowFieldOf(err.message) : null;
      if (named) flowInputs[named].setAttribute('aria-invalid', 'true');
    }
  });
  return form;
}
