// A topic page's routing boxes (views/topic.js): "Try a routing key" asks the server where a publish with
// a routing key (and attributes) would go, storing nothing; "Publish" publishes a message with them and
// says which queues it reached.

import { h, field, notice } from '../../lib/dom.js';
import { invalid, onCreate } from '../../lib/create-form.js';
import { contentTypeSelect, readBody } from '../../lib/message-body.js';
import { MAX_KEY, reachedEl, readObject, readRoutingKey } from './words.js';

/** The routing key and attributes fields both boxes ask for, and the request body they make. */
function routingFields() {
  const routingKey = h('input', { type: 'text', class: 'mono', required: true, maxlength: String(MAX_KEY), spellcheck: 'false', autocomplete: 'off', placeholder: 'orders.eu.created' });
  const attributes = h('textarea', { rows: '2', class: 'mono', spellcheck: 'false', placeholder: '{"region": "eu"}' });
  return {
    /** The inputs a 400 names, by the field its message starts with. */
    inputs: [['routing_key', routingKey], ['attributes', attributes]],
    els: [
      field('Routing key', routingKey, { hint: 'Dot-separated words of letters, digits, _ and -.' }),
      field('Attributes (optional)', attributes, { hint: 'A JSON object of strings, matched against the bindings\' filters. Not stored with the messages.' }),
    ],
    /** {routing_key, attributes?}; throws an Error saying what to fix. */
    read() {
      const body = { routing_key: readRoutingKey(routingKey) };
      const given = readObject(attributes, 'The attributes');
      if (given !== undefined) body.attributes = given;
      return body;
    },
  };
}

/** "Try a routing key": where a publish would go (the server's dry run). Returns its element. */
export function createTryRoute({ ctx, topicId }) {
  const fields = routingFields();
  const button = h('button', { type: 'submit', class: 'btn' }, 'Try');
  const msg = notice();
  const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'try-route-title' },
    h('h2', { id: 'try-route-title' }, 'Try a routing key'),
    h('p', { class: 'muted small' }, 'Which queues a publish with this routing key and these attributes would reach. Nothing is stored.'),
    fields.els,
    h('div', { class: 'form-actions' }, button),
    msg.el);
  onCreate(form, {
    ctx, msg, button,
    busyLabel: 'Trying…',
    fields: fields.inputs,
    check: fields.read,
    send: (body) => ctx.api.routeTopic(topicId, body),
    created: (answer) => msg.show(reachedEl(answer, { dryRun: true }), 'info'),
  });
  return h('section', { class: 'card' }, form);
}

/** "Publish": one message, stored in every queue the routing key reaches. Returns its element. */
export function createPublish({ ctx, topicId }) {
  const fields = routingFields();
  const body = h('textarea', { rows: '3', spellcheck: 'false', class: 'mono' });
  const contentType = contentTypeSelect(body);
  const button = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Publish');
  const msg = notice();
  const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'publish-title' },
    h('h2', { id: 'publish-title' }, 'Publish'),
    h('p', { class: 'muted small' }, 'A message stored in every queue the routing key reaches, in one commit: all of them or none.'),
    fields.els,
    field('Content type', contentType),
    field('Message body', body),
    h('div', { class: 'form-actions' }, button),
    msg.el);
  onCreate(form, {
    ctx, msg, button,
    busyLabel: 'Publishing…',
    fields: [...fields.inputs, ['messages', body]],
    check: () => {
      const routed = fields.read();
      body.removeAttribute('aria-invalid');
      let payload;
      try {
        payload = readBody(contentType.value, body.value);
      } catch (err) {
        throw invalid(body, err.message);
      }
      return { ...routed, messages: [{ body: payload, content_type: contentType.value }] };
    },
    send: (published) => ctx.api.publishToTopic(topicId, published),
    // Nothing stored is no failure, but no success either.
    created: (answer) => msg.show(reachedEl(answer, { dryRun: false }), answer.queues ? 'success' : 'info'),
  });
  return h('section', { class: 'card' }, form);
}
