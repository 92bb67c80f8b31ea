// The operator's inputs for a set of limits, as a plan or an account's own overrides set them: one
// number field for each limit, empty for a limit not set (it then falls back to what is under it: the
// node's setting under a plan, the plan's under an account).

import { h, field, num } from '../../lib/dom.js';
import { LIMITS } from '../limits/words.js';

/** What a fallback value reads as in a hint: "5,000", or "0 (unlimited)". */
export function valueText(limit, value) {
  return value === 0 && limit.zero ? `0 (${limit.zero})` : num(value);
}

/**
 * The fields, in a grid. `fallback(limit)` says what an empty field means ("the node's setting, 5,000"),
 * in its hint; setFallback() changes it. set(values) fills them from an object of limits (one not in
 * it is emptied). read() is every limit, a number or null for an empty field (the API's merge patch:
 * null removes a limit); it throws an Error saying what to fix, with the field focused. readSet() is
 * the limits set only.
 */
export function createLimitFields({ fallback = () => null } = {}) {
  const rows = LIMITS.map((limit) => {
    const input = h('input', {
      type: 'number', min: String(limit.min), max: String(limit.max), step: '1', inputmode: 'numeric', autocomplete: 'off',
    });
    const hint = h('span');
    return { limit, input, hint, el: field(limit.field, input, { hint }) };
  });
  let fallbackOf = fallback;

  function showHints() {
    for (const { limit, hint } of rows) {
      const range = `${num(limit.min)} to ${num(limit.max)}${limit.zero ? ` (0: ${limit.zero})` : ''}`;
      const empty = fallbackOf(limit);
      hint.textContent = `${range}; ${limit.about}.${empty ? ` Empty: ${empty}.` : ''}`;
    }
  }
  showHints();

  function read() {
    const values = {};
    for (const { limit, input } of rows) {
      input.removeAttribute('aria-invalid');
      const raw = input.value.trim();
      // A number input holding text the browser cannot read reports an empty value and badInput.
      if (raw === '' && !(input.validity && input.validity.badInput)) {
        values[limit.key] = null;
        continue;
      }
      const v = Number(raw);
      if (raw === '' || !Number.isInteger(v) || v < limit.min || v > limit.max) {
        input.setAttribute('aria-invalid', 'true');
        input.focus();
        throw new Error(`${limit.field} must be a whole number from ${num(limit.min)} to ${num(limit.max)}, or empty.`);
      }
      values[limit.key] = v;
    }
    return values;
  }

  return {
    el: h('div', { class: 'form-grid limit-fields' }, rows.map((r) => r.el)),
    set(values) {
      const set = values || {};
      for (const { limit, input } of rows) {
        input.removeAttribute('aria-invalid');
        const v = set[limit.key];
        input.value = v === undefined || v === null ? '' : String(v);
      }
    },
    setFallback(next) {
      fallbackOf = next;
      showHints();
    },
    read,
    readSet() {
      return Object.fromEntries(Object.entries(read()).filter(([, v]) => v !== null));
    },
    focus() {
      rows[0].input.focus();
    },
  };
}
