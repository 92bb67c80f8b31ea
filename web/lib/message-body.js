// A message's body as a form takes it (a content type and the text typed) and as the API takes it: the
// pages that publish (a queue's test message, a schedule's, a topic's) read it the same way.

import { h } from './dom.js';

/** What each content type's body field suggests. */
const PLACEHOLDERS = { text: 'Hello from the dashboard', json: '{"hello": "world"}', bytes: 'aGVsbG8=' };

/**
 * A <select> of the content types in `order` (text, json, bytes), the first chosen; the placeholder of
 * `body`, its textarea, follows the choice (`placeholders`, by type).
 */
export function contentTypeSelect(body, { order = ['text', 'json', 'bytes'], placeholders = PLACEHOLDERS } = {}) {
  const labels = { text: 'Text', json: 'JSON', bytes: 'Bytes (base64)' };
  const select = h('select', null, order.map((type) => h('option', { value: type }, labels[type])));
  const follow = () => { body.placeholder = placeholders[select.value]; };
  follow();
  select.addEventListener('change', follow);
  return select;
}

/**
 * The body `text` of content type `type` as the API takes it: JSON parsed, bytes as base64 without
 * white space, text as typed. Throws an Error saying what is wrong with it.
 */
export function readBody(type, text) {
  if (type === 'json') {
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new Error(`The body is not valid JSON: ${err.message}`);
    }
  }
  if (type === 'bytes') {
    const clean = text.replace(/\s+/g, '');
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 !== 0) throw new Error('For bytes, the body must be base64 (A-Z, a-z, 0-9, +, /, = padding).');
    return clean;
  }
  return text;
}
