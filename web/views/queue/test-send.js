// The consumers card's test send, for a webhook consumer: "Send test" POSTs a signed sample batch of one
// message to the endpoint now, as a delivery is signed, and the attempt answered shows in the card: its
// outcome, HTTP status and latency, and the first KiB of the receiver's answer (or why none came).

import { h, notice, num, busy } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { whenEl } from '../../lib/times.js';
import { answerBody, outcomeBadge, outcomeWords } from './attempt-words.js';

/** The answered attempt, in words. */
function answerOf(a) {
  const words = outcomeWords(a.outcome);
  return [
    h('p', { class: 'test-answer-head' },
      h('strong', null, 'Test send'), ' ', outcomeBadge(a.outcome), ' ',
      a.status == null ? 'no HTTP answer' : `HTTP ${a.status}`, ` in ${num(a.latency_ms)} ms · `, whenEl(a.attempted_at)),
    words || a.error ? h('p', { class: 'small' }, [words, a.error ? `${words ? ': ' : ''}${a.error}` : null]) : null,
    answerBody(a),
    h('p', { class: 'muted small' }, 'The receiver\'s answer is not applied: the sample, {"skiplock":"test send"}, is no message of '
      + 'the queue. A success closes an open circuit and enables a disabled consumer; a failed test does not count against the endpoint\'s health.'),
  ];
}

/**
 * The test send. `onSent(attempt)` is told of each attempt answered. Returns the button (for the card's
 * actions), `els` (the answer, or why none came; hidden until then), setConsumer(consumer id or null),
 * which forgets the answer shown when the consumer is another, and clear(), which forgets it.
 */
export function createTestSend({ api, ctx, queueId, onSent = () => {} }) {
  let consumerId = null;
  const button = h('button', { type: 'button', class: 'btn', title: 'POST a signed sample batch of one message to the webhook URL now' }, 'Send test');
  const msg = notice();
  const answer = h('div', { class: 'test-answer stack', role: 'status', 'aria-label': 'Test send', hidden: true });

  function clear() {
    msg.clear();
    answer.hidden = true;
    answer.replaceChildren();
  }

  button.addEventListener('click', async () => {
    const id = consumerId;
    clear();
    try {
      const attempt = await busy(button, 'Sending…', () => api.sendTest(queueId, id));
      if (ctx.signal.aborted || id !== consumerId) return;
      answer.replaceChildren(...answerOf(attempt).filter(Boolean));
      answer.dataset.outcome = attempt.outcome;
      answer.hidden = false;
      onSent(attempt);
    } catch (err) {
      if (!ctx.signal.aborted && id === consumerId) msg.show(describe(err));
    }
  });

  function setConsumer(id) {
    if (id !== consumerId) clear();
    consumerId = id;
  }

  return { button, els: [msg.el, answer], setConsumer, clear };
}
