// A queue's consumers in words, as the queue page names them: consumers have no names of their own, so
// one is told by its type and the end of its id ("HTTP pull …4ca4c13a"), the same in its card, in the
// delivery attempts' picker and in the question before it is deleted; a dead-lettered message names the
// consumer that gave up on it by the end of its id alone.

/** The most consumers a queue may have (the server's). */
export const MAX_CONSUMERS = 8;

/** "Webhook" or "HTTP pull". */
export function typeWords(c) {
  return c.type === 'webhook' ? 'Webhook' : 'HTTP pull';
}

/**
 * "…4ca4c13a": the end of a consumer's id (ids begin with the time they were made, so consumers made the
 * same minute share their start).
 */
export function shortConsumerId(consumerId) {
  const id = String(consumerId ?? '');
  return id.length > 12 ? `…${id.slice(-8)}` : id;
}

/** "HTTP pull …4ca4c13a": the consumer's type and the end of its id. */
export function consumerLabel(c) {
  return `${typeWords(c)} ${shortConsumerId(c.consumer_id)}`;
}

/** How many of the consumers are HTTP pull ones (with more than one, each pull names its consumer). */
export function pullCount(consumers) {
  return consumers.filter((c) => c.type === 'http_pull').length;
}
