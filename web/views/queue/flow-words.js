// Flow control per key, in words, as the queue page says it: the limits (a consumer's, a key's), and why
// a key holds its messages back ("At its rate (next at 12:03:04)").

import { h, num, duration, clock } from '../../lib/dom.js';

/** The most a limit may be, and the longest period (the server's ranges). */
export const FLOW_MAX = { parallelism: 10000, rate: 10000, period: 86400 };

const PERIOD_WORDS = { 1: 'second', 60: 'minute', 3600: 'hour', 86400: 'day' };

/** "10 per second", "1 per minute", "5 per 1 min 30 s": a rate over its period (1 s when none). */
export function rateWords(rate, period) {
  const p = period || 1;
  return `${num(rate)} per ${PERIOD_WORDS[p] || duration(p)}`;
}

/** Whether a set of limits {parallelism, rate, period} sets any. */
export function hasLimits(limits) {
  return Boolean(limits) && [limits.parallelism, limits.rate, limits.period].some((v) => v !== null && v !== undefined);
}

/**
 * Limits as short phrases: ["2 at once", "10 per second"] (a period without a rate, as a key may have
 * over its consumer's rate: "over 1 minute"). Empty when none is set.
 */
export function limitPhrases(limits) {
  if (!limits) return [];
  const out = [];
  if (limits.parallelism != null) out.push(`${num(limits.parallelism)} at once`);
  if (limits.rate != null) out.push(rateWords(limits.rate, limits.period));
  else if (limits.period != null) out.push(`rate over ${PERIOD_WORDS[limits.period] ? `1 ${PERIOD_WORDS[limits.period]}` : duration(limits.period)}`);
  return out;
}

/** A consumer's limits in one line: "2 at once per key · 10 per second per key", or null when none. */
export function consumerFlowText(flow) {
  const parts = limitPhrases(flow);
  return parts.length ? parts.map((p) => `${p} per key`).join(' · ') : null;
}

/**
 * Why a key holds messages back, as text and a node: "Paused", "At its parallelism", "At its rate (next
 * at 12:03:04)"; "Not held" when it holds nothing back, "Waiting" when it does for no reason given (a
 * moment's state between two changes).
 */
export function heldWords(key) {
  switch (key.held_by) {
    case 'paused':
      return { text: 'Paused', node: 'Paused' };
    case 'parallelism':
      return {
        text: 'At its parallelism',
        node: ['At its parallelism', h('span', { class: 'sub' }, `${num(key.parallelism)} at once`)],
      };
    case 'rate': {
      const at = key.next_release_at ? new Date(key.next_release_at) : null;
      if (!at || Number.isNaN(at.getTime())) return { text: 'At its rate', node: 'At its rate' };
      const when = clock(at.getTime());
      return {
        text: `At its rate (next at ${when})`,
        node: ['At its rate (next at ', h('time', { datetime: key.next_release_at, title: at.toLocaleString() }, when), ')'],
      };
    }
    default:
      return key.waiting > 0 ? { text: 'Waiting', node: 'Waiting' } : { text: 'Not held', node: h('span', { class: 'muted' }, 'Not held') };
  }
}
