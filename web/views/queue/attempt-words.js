// Webhook deliveries in words, as the queue page (the consumers card, the delivery attempts) and the queue
// list say them: an attempt's outcome class, and an endpoint's health ("Failing", "Circuit open", "Disabled").

import { h, num, badge } from '../../lib/dom.js';

/** Every outcome class of an attempt, in words: [outcome, words]. */
export const OUTCOMES = [
  ['success', 'Success: a 2xx read as an answer'],
  ['timeout', 'Timeout: no answer in time'],
  ['refused', 'Connection refused or reset'],
  ['dns', 'The host name did not resolve'],
  ['tls', 'The TLS connection failed'],
  ['address_guard', 'The address guard refused the address'],
  ['redirect', 'A redirect (3xx, never followed)'],
  ['client_error', 'Client error (4xx, 429 too)'],
  ['server_error', 'Server error (5xx)'],
  ['invalid_answer', 'A 2xx whose body is no valid answer'],
  ['connect', 'Another failure to connect'],
];

/** The words for an outcome ('' for one this dashboard does not know). */
export function outcomeWords(outcome) {
  const known = OUTCOMES.find(([o]) => o === outcome);
  return known ? known[1] : '';
}

/** An outcome as a badge: its name (as the API and the filter say it), its words on hover. */
export function outcomeBadge(outcome) {
  const el = badge(String(outcome), outcome === 'success' ? 'success' : 'danger');
  const words = outcomeWords(outcome);
  if (words) el.title = words;
  return el;
}

/** A <select> of the outcomes, with a first option '' labelled `any`. */
export function outcomeSelect(any, value = '') {
  const select = h('select', null,
    h('option', { value: '' }, any),
    OUTCOMES.map(([o, words]) => h('option', { value: o }, `${o} · ${words}`)));
  select.value = value;
  return select;
}

/** An attempt's answer: the first KiB of its body, or why there is none. */
export function answerBody(a) {
  if (a.response !== null && a.response !== undefined && a.response !== '') {
    return h('pre', { class: 'attempt-text', tabindex: '0', 'aria-label': 'The answer\'s body (its first KiB)' }, a.response);
  }
  return h('p', { class: 'muted small' }, a.status == null ? 'No answer came.' : 'The answer had no body.');
}

/** An id shortened for a table (the full id is for its title). */
export function shortId(value) {
  const text = String(value ?? '');
  return text.length > 12 ? `${text.slice(0, 8)}…` : text;
}

/**
 * A webhook consumer's endpoint health in short: {state (healthy, failing, open or disabled), label, kind
 * (the badge's)}; null without health (a pull consumer). Disabled comes first: a disabled endpoint's
 * circuit may be open too, but it gets no probe.
 */
export function healthOf(health) {
  if (!health) return null;
  if (health.state === 'disabled') return { state: 'disabled', label: 'Disabled', kind: 'danger' };
  if (health.circuit === 'open') return { state: 'open', label: 'Circuit open', kind: 'danger' };
  if (health.state === 'failing') return { state: 'failing', label: 'Failing', kind: 'warning' };
  return { state: 'healthy', label: 'Healthy', kind: 'success' };
}

/** "server_error, HTTP 500": a failed attempt's outcome, status and error (the error left out when it only repeats the status). */
export function failureWords(failure) {
  if (!failure) return '';
  const parts = [String(failure.outcome ?? 'failed')];
  if (failure.status != null) parts.push(`HTTP ${failure.status}`);
  if (failure.error && failure.error !== `HTTP ${failure.status}`) parts.push(failure.error);
  return parts.join(', ');
}

/** "3 failed attempts in a row". */
export function failuresWords(n) {
  return `${num(n)} failed ${n === 1 ? 'attempt' : 'attempts'} in a row`;
}

/** The queue list's badge text for each state of an endpoint that is not healthy. */
const LIST_LABELS = { failing: 'Endpoint failing', open: 'Circuit open', disabled: 'Consumer disabled' };

/**
 * The queue list's badge for a consumer whose endpoint is failing ("Endpoint failing"), whose circuit
 * is open ("Circuit open") or which was disabled for failing too long ("Consumer disabled"), with the
 * failures and the last one on hover; null when it is healthy.
 */
export function endpointBadge(health) {
  const state = healthOf(health);
  if (!state || state.state === 'healthy') return null;
  const el = badge(LIST_LABELS[state.state], state.kind);
  el.dataset.health = state.state;
  const disabled = state.state === 'disabled'
    ? ' Disabled: no deliveries until a test send succeeds.'
    : '';
  el.title = `Webhook endpoint: ${failuresWords(health.consecutive_failures)}`
    + `${health.last_failure ? `, the last ${failureWords(health.last_failure)}` : ''}.${disabled}`;
  return el;
}
