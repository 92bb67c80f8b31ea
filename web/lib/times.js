// Times in forms and lists: a datetime-local field shows and takes this browser's time zone, the server
// RFC 3339; a list shows a time to the second, the server's text on hover.

import { h } from './dom.js';

const pad = (n) => String(n).padStart(2, '0');

/** An RFC 3339 time as a datetime-local field shows it: this browser's time zone, to the minute. */
export function localValue(value) {
  const d = new Date(value);
  if (!value || Number.isNaN(d.getTime())) return '';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/**
 * A datetime-local field's value (this browser's time zone) as the server takes it: RFC 3339 in UTC,
 * whole seconds; '' when empty. A value that is no time throws an Error saying so (`name` names the field).
 */
export function rfc3339(input, name) {
  if (!input.value) return '';
  const ms = new Date(input.value).getTime();
  if (Number.isNaN(ms)) {
    input.setAttribute('aria-invalid', 'true');
    throw new Error(`${name} is not a date and time.`);
  }
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const whenFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** A time for a list: local, to the second, in a <time> whose title is the server's RFC 3339 text. */
export function whenEl(value) {
  const d = new Date(value);
  const text = Number.isNaN(d.getTime()) ? String(value) : whenFmt.format(d);
  return h('time', { datetime: String(value), title: String(value) }, text);
}
