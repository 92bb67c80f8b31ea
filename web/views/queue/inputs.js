// Number inputs shared by the queue page's forms, and reading them back with a clear message.

import { h, num } from '../../lib/dom.js';

export function numberInput(attrs) {
  return h('input', { type: 'number', step: '1', inputmode: 'numeric', ...attrs });
}

/** The input's whole number in [min, max]; undefined when empty and optional; throws a message otherwise. */
export function readNumber(input, label, min, max, { optional = true } = {}) {
  const raw = input.value.trim();
  if (raw === '') {
    if (optional) return undefined;
    throw new Error(`${label} is required.`);
  }
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    input.setAttribute('aria-invalid', 'true');
    input.focus();
    throw new Error(`${label} must be a whole number from ${num(min)} to ${num(max)}.`);
  }
  input.removeAttribute('aria-invalid');
  return v;
}
