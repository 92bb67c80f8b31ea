// The queue page's settings card: delivery delay, message retention and idempotency window.

import { h, field, notice, busy, duration } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { numberInput, readNumber } from './inputs.js';

/** The settings card; show(queue) draws it from the queue; `onSaved(queue)` gets the queue once saved. */
export function createSettings({ api, ctx, queueId, onSaved }) {
  const el = h('section', { class: 'card', 'aria-labelledby': 'settings-title' });

  function show(queue) {
    const s = queue.settings;
    const delay = numberInput({ min: '0', max: '86400', value: s.delivery_delay });
    const retention = numberInput({ min: '60', max: '1209600', value: s.message_retention_period });
    const window_ = numberInput({ min: '0', max: '604800', value: s.idempotency_window ?? 300 });
    const delayHint = h('span');
    const retentionHint = h('span');
    const showHints = () => {
      const d = Number(delay.value);
      const r = Number(retention.value);
      delayHint.textContent = `0 to 86,400 s${delay.value !== '' && Number.isFinite(d) ? ` · now ${duration(d)}` : ''}`;
      retentionHint.textContent = `60 s to 14 days, at most your plan's longest retention${retention.value !== '' && Number.isFinite(r) ? ` · now ${duration(r)}` : ''}`;
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
          delivery_delay: readNumber(delay, 'Delivery delay', 0, 86400, { optional: false }),
          message_retention_period: readNumber(retention, 'Message retention', 60, 1209600, { optional: false }),
          idempotency_window: readNumber(window_, 'Idempotency window', 0, 604800, { optional: false }),
        };
        const saved = await busy(save, 'Saving…', () => api.updateQueue(queueId, next));
        if (ctx.signal.aborted) return;
        onSaved(saved);
        ctx.toast('Settings saved.');
      } catch (err) {
        if (!ctx.signal.aborted) msg.show(err.name === 'ApiError' ? describe(err) : err.message);
      }
    });
    el.replaceChildren(h('div', { class: 'card-head' }, h('h2', { id: 'settings-title' }, 'Settings')), form);
  }

  return { el, show };
}
