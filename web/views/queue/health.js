// The consumers card's endpoint health, for a webhook consumer: a badge (Healthy, Failing, Circuit open or
// Disabled) with its failures in a row, its last success, its last failure (outcome, status, error), while
// its circuit is open when the next probe batch goes, and once it is disabled (for failing its
// disable_after_hours) since when, and that a test send that succeeds enables it again.

import { h, badge } from '../../lib/dom.js';
import { whenEl } from '../../lib/times.js';
import { healthOf, failureWords, failuresWords } from './attempt-words.js';

/** The threshold of failures in a row at which the circuit opens (the server's). */
const OPEN_AFTER = 5;

/** A consumer new here has had no attempt: healthy. */
const NONE = { state: 'healthy', consecutive_failures: 0, circuit: 'closed', last_success_at: null, last_failure: null, disabled_at: null };

/** The facts under the badge, one a line. */
function facts(health, state) {
  const lines = [];
  if (state.state === 'disabled') {
    lines.push([health.disabled_at ? ['Disabled ', whenEl(health.disabled_at), ' for failing too long. '] : 'Disabled for failing too long. ',
      'It gets no deliveries, not even probes; a test send that succeeds enables it again.']);
  }
  lines.push(health.last_success_at
    ? ['Last success ', whenEl(health.last_success_at)]
    : (health.last_failure ? 'No success yet.' : 'No delivery attempted yet.'));
  const failure = health.last_failure;
  if (failure) lines.push(['Last failure ', whenEl(failure.at), `: ${failureWords(failure)}`]);
  if (state.state === 'open') {
    lines.push([health.next_probe_at ? ['Next probe ', whenEl(health.next_probe_at), '. '] : null,
      'Deliveries are held but for one probe batch now and then; the first success, or a test send that succeeds, closes the circuit.']);
  } else if (state.state === 'failing') {
    lines.push(`At ${OPEN_AFTER} failed attempts in a row the circuit opens: deliveries are held but for a probe batch now and then.`);
  }
  return h('ul', { class: 'health-facts' }, lines.map((line) => h('li', null, line)));
}

/** The block; show(health) with the consumer's `health` (none: a consumer just created, with no attempt yet). */
export function createHealth() {
  const el = h('div', { class: 'health', role: 'group', 'aria-label': 'Endpoint health' });

  function show(health) {
    const value = health || NONE;
    const state = healthOf(value);
    el.dataset.health = state.state;
    const failing = state.state !== 'healthy';
    el.replaceChildren(
      h('p', { class: 'health-head' }, badge(state.label, state.kind),
        failing ? [' ', failuresWords(value.consecutive_failures),
          value.failing_since ? [' since ', whenEl(value.failing_since)] : null] : null),
      facts(value, state));
  }
  show(null);

  return { el, show };
}
