// A <select> of the plans, as the accounts list's filter, the new account's form and an account's page
// offer them. Until the plans are read it holds the value it was given; a value that names no plan
// (one deleted since) stays choosable, so the select never shows another plan than the real one.

import { h } from '../../lib/dom.js';

/** A plan's name as the server takes it: 1-63 of a-z, 0-9, - and _, starting with a letter or digit. */
export const PLAN_NAME_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** The plan every account is on unless it names another; it cannot be deleted. */
export const DEFAULT_PLAN = 'default';

/**
 * `any` (optional) is the label of a first option with the value '' (the filter's "Any plan").
 * fill(plans) lists the plans (the server's, by name), keeping the value chosen.
 */
export function createPlanSelect({ any = null, value = any === null ? DEFAULT_PLAN : '' } = {}) {
  const select = h('select');
  let names = [];

  function draw(current) {
    const list = [...names];
    if (current && !list.includes(current)) list.push(current);
    select.replaceChildren(
      any !== null ? h('option', { value: '' }, any) : null,
      ...list.map((name) => h('option', { value: name }, name)));
    select.value = current;
  }
  draw(value);

  return {
    el: select,
    get value() {
      return select.value;
    },
    set value(next) {
      draw(next);
    },
    fill(plans) {
      names = plans.map((p) => p.name);
      draw(select.value);
    },
  };
}
