// One consumer of the queue, in the consumers card (consumers.js): its own figures (consumer-figures.js);
// its settings shown, edited (consumer-form.js) or it deleted; a webhook's signing secret shown once after
// create or rotate, its endpoint's health (health.js) and its test send (test-send.js); a pull consumer's
// id, which a pull names once the queue has several HTTP pull consumers.

import { h, id, append, notice, num, busy, duration, confirmDialog, secretBox } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { consumerFlowText } from './flow-words.js';
import { createHealth } from './health.js';
import { createTestSend } from './test-send.js';
import { consumerForm } from './consumer-form.js';
import { consumerLabel } from './consumer-words.js';
import { createConsumerFigures } from './consumer-figures.js';

/** The note under a pull consumer's settings: how a pull names it, given the queue's HTTP pull consumers. */
function pullNote(pulls) {
  const field = h('code', null, 'consumer_id');
  return pulls > 1
    ? [`This queue has ${num(pulls)} HTTP pull consumers: a pull gives this one's consumer ID as `, field, ' in its body.']
    : ['A pull gives its consumer\'s ID as ', field, ' in its body when the queue has several HTTP pull consumers; '
      + 'while this is the only one, it need not.'];
}

/**
 * One consumer's part of the card. `consumer` as the server shows it (read back as `consumer`, as edited
 * since); `secret` ({title, value}) shown once, just after it was created. setCounts({total, pulls}) with
 * the queue's consumers and HTTP pull consumers; setHealth(health) with its endpoint health read since;
 * setFigures(figures) with its entry of the queue's stats (consumer-figures.js); focus() moves the focus
 * to its title. `onSaved(consumer)` follows an edit, `onDeleted()` its delete, `onTested()` a test send;
 * `polling` is the page's, stopped while it is being deleted.
 */
export function createConsumer({ api, ctx, queueId, polling, consumer: first, secret: firstSecret = null, onSaved, onDeleted, onTested }) {
  let consumer = first;
  let secret = firstSecret;
  let counts = { total: 1, pulls: first.type === 'http_pull' ? 1 : 0 };
  const health = createHealth();
  const figures = createConsumerFigures(); // outside `body`, so an edit keeps them live
  const testSend = createTestSend({ api, ctx, queueId, onSent: () => onTested() });
  const titleId = id('consumer');
  const title = h('h3', { id: titleId, tabindex: '-1' }, consumerLabel(first));
  const msg = notice();
  const body = h('div', { class: 'stack' });
  const note = h('p', { class: 'muted small' });
  const el = h('article', { class: 'consumer stack', 'aria-labelledby': titleId, dataset: { consumerId: first.consumer_id } },
    title, figures.el, msg.el, body);

  function render(mode = 'view') {
    body.replaceChildren();
    testSend.setConsumer(consumer.type === 'webhook' ? consumer.consumer_id : null);
    if (mode === 'edit') {
      body.append(consumerForm({
        api, ctx, queueId, existing: consumer, msg,
        onSaved: (saved) => {
          consumer = saved;
          if (saved.signing_secret) secret = { title: 'Webhook signing secret', value: saved.signing_secret };
          ctx.toast('Consumer saved.');
          render();
          onSaved(saved);
        },
        onCancel: () => render(),
      }));
      const input = body.querySelector('input, select');
      if (input) input.focus();
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
      hook ? null : ['Visibility timeout', `${num(s.visibility_timeout_ms)} ms`],
      hook ? ['Max wait time', `${num(s.max_wait_time_ms)} ms`] : null,
      hook ? ['Max concurrency', s.max_concurrency == null ? 'server maximum' : num(s.max_concurrency)] : null,
      hook && s.disable_after_hours != null
        ? ['Disable after', `${num(s.disable_after_hours)} ${s.disable_after_hours === 1 ? 'hour' : 'hours'} of failing`]
        : null,
      ['Flow control', consumerFlowText(s.flow_control) || h('span', { class: 'muted' }, 'no limits per key')],
      ['Consumer ID', h('code', { class: 'break' }, c.consumer_id)],
    ].filter(Boolean);
    const edit = h('button', { type: 'button', class: 'btn', 'aria-describedby': titleId }, 'Edit');
    const rotate = hook ? h('button', { type: 'button', class: 'btn', 'aria-describedby': titleId }, 'Rotate secret…') : null;
    const remove = h('button', { type: 'button', class: 'btn btn-danger-outline', 'aria-describedby': titleId }, 'Delete…');
    edit.addEventListener('click', () => {
      msg.clear();
      secret = null;
      testSend.clear();
      render('edit');
    });
    if (rotate) rotate.addEventListener('click', () => rotateSecret(rotate));
    remove.addEventListener('click', () => deleteIt(remove));
    if (!hook) showNote();
    append(body, [
      secret ? secretBox({
        title: secret.title,
        label: 'Signing secret',
        secret: secret.value,
        note: 'Copy it now: it is shown only once. Your webhook receiver verifies signatures with it.',
      }) : null,
      h('dl', { class: 'props' }, rows.map(([k, v]) => [h('dt', null, k), h('dd', null, v)])),
      hook ? null : note,
      hook ? null : h('p', { class: 'muted small' }, 'An HTTP pull consumer has no log of delivery attempts: what comes of each '
        + 'pull is your client\'s own acks and retries, seen in the queue\'s counts and activity.'),
      hook ? testSend.els : null,
      h('div', { class: 'form-actions' }, edit, hook ? testSend.button : null, rotate, remove)]);
  }

  async function rotateSecret(button) {
    msg.clear();
    const ok = await confirmDialog({
      title: 'Rotate the signing secret?',
      message: 'A new secret is created and shown once. The old one stays valid for 24 hours, and deliveries carry both signatures meanwhile.',
      confirmLabel: 'Rotate secret',
      danger: false,
    });
    if (!ok) return;
    try {
      const result = await busy(button, 'Rotating…', () => api.rotateSecret(queueId, consumer.consumer_id));
      secret = { title: 'New webhook signing secret', value: result.signing_secret };
      render();
    } catch (err) {
      if (!ctx.signal.aborted) msg.show(describe(err));
    }
  }

  async function deleteIt(button) {
    msg.clear();
    // The others read on: only the copies that waited for this one alone go.
    const others = counts.total - 1;
    const ok = await confirmDialog({
      title: `Delete the consumer ${consumerLabel(consumer)}?`,
      message: others > 0
        ? `The queue's ${others === 1 ? 'other consumer keeps' : `${num(others)} other consumers keep`} receiving every message; `
          + 'the messages that waited for this consumer alone are deleted.'
        : 'Messages stay in the queue; nothing is delivered until another consumer is attached.',
      confirmLabel: 'Delete consumer',
    });
    if (!ok) return;
    await polling.stop(); // no read may ask for the consumer's attempts while (or after) it goes
    try {
      await busy(button, 'Deleting…', () => api.deleteConsumer(queueId, consumer.consumer_id));
      ctx.toast('Consumer deleted.');
      onDeleted();
    } catch (err) {
      if (!ctx.signal.aborted) msg.show(describe(err));
    } finally {
      polling.resume();
    }
  }

  function showNote() {
    note.replaceChildren();
    append(note, pullNote(counts.pulls));
  }

  function setCounts(next) {
    counts = next;
    if (consumer.type === 'http_pull') showNote();
  }

  /** The endpoint health read since it was shown. */
  function setHealth(next) {
    if (!next) return;
    consumer = { ...consumer, health: next };
    health.show(next);
  }

  render();

  return {
    el,
    get consumer() {
      return consumer;
    },
    setCounts, setHealth,
    setFigures: figures.show,
    focus: () => title.focus(),
  };
}
