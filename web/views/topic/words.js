// Topics in words, for the Topics page (views/topics.js) and a topic's page (views/topic.js): the shapes
// of routing keys and patterns, a binding's filter as a person reads it, where a publish went, reading
// the JSON objects the forms take, and the question before a topic is deleted.

import { h } from '../../lib/dom.js';
import { invalid } from '../../lib/create-form.js';
import { queueLink } from '../../lib/queue-names.js';

/** The longest routing key and pattern the server takes. */
export const MAX_KEY = 255;
/** A routing key: words of letters, digits, `_` and `-`, separated by single dots. */
export const ROUTING_KEY_RE = /^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$/;
/** A pattern: as a routing key, but a word may also be `*` (exactly one word) or `#` (zero or more). */
export const PATTERN_RE = /^(?:[A-Za-z0-9_-]+|\*|#)(?:\.(?:[A-Za-z0-9_-]+|\*|#))*$/;

/** A filter's attributes, one `name=value1|value2` each; none for no filter (it matches any attributes). */
export function filterLines(filter) {
  if (!filter) return [];
  return Object.entries(filter).map(([name, values]) => `${name}=${[].concat(values).join('|')}`);
}

/**
 * The text of `input` as a JSON object, or undefined when it is empty; `what` names it in the Error
 * thrown (the input marked) when it is not one.
 */
export function readObject(input, what) {
  input.removeAttribute('aria-invalid');
  const text = input.value.trim();
  if (!text) return undefined;
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw invalid(input, `${what} is not valid JSON: ${err.message}`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw invalid(input, `${what} must be a JSON object, such as {"region": "eu"}.`);
  }
  return value;
}

/** The routing key typed in `input`, checked as the server checks it; throws an Error (the input marked) when it is not one. */
export function readRoutingKey(input) {
  input.removeAttribute('aria-invalid');
  const key = input.value.trim();
  if (!key) throw invalid(input, 'Give a routing key, such as orders.eu.created.');
  if (key.length > MAX_KEY || !ROUTING_KEY_RE.test(key)) {
    throw invalid(input, `A routing key is 1 to ${MAX_KEY} characters: words of letters, digits, _ and -, separated by single dots (orders.eu.created).`);
  }
  return key;
}

/** "2 queues", "1 queue", "no queue". */
function queuesWords(n) {
  if (n === 0) return 'no queue';
  return n === 1 ? '1 queue' : `${n} queues`;
}

/**
 * Where a route (`dryRun`) or a publish went, the server's {routing_key, queues, reached}: "Reached 2
 * queues: a, b." with each queue linked to its page.
 */
export function reachedEl(answer, { dryRun }) {
  const verb = dryRun ? 'Would reach' : 'Reached';
  if (!answer.queues) {
    return h('p', null, `${verb} no queue: no binding matches `, h('code', null, answer.routing_key),
      dryRun ? '.' : '; nothing was stored.');
  }
  const links = answer.reached.flatMap((r, i) => [i ? ', ' : null, queueLink(r.queue_id, r.queue_name)]);
  return h('p', null, `${verb} ${queuesWords(answer.queues)}: `, links, '.');
}

/** The confirmation dialog's options for deleting `topic` ({name, binding_count}). */
export function deleteTopicQuestion(topic) {
  const bindings = topic.binding_count === 1 ? 'Its binding is' : `Its ${topic.binding_count} bindings are`;
  return {
    title: `Delete the topic ${topic.name}?`,
    message: `${topic.binding_count ? `${bindings} deleted with it, and n` : 'N'}othing more is published through it. `
      + 'The messages it already stored stay in their queues.',
    confirmLabel: 'Delete topic',
  };
}
