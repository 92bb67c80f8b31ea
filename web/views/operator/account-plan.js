// The operator's account page's "Plan and limits" card: the plan the account is on (chosen among the
// plans), the limits set for this account alone over its plan's (an emptied field removes one), and
// every limit it is held to now, in words.

import { h, field, notice, busy } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { limitList } from '../limits/words.js';
import { createLimitFields, valueText } from './limit-fields.js';
import { createPlanSelect } from './plan-select.js';
import { planHref } from './plans.js';

/**
 * The card. show(account) draws it from the account; load() reads the plans for the select (and the
 * empty fields' hints); `onSaved(account)` gets the account once changed.
 */
export function createAccountPlan({ api, ctx, accountId, onSaved }) {
  let plans = [];
  const select = createPlanSelect();
  const fields = createLimitFields({ fallback: () => 'the plan\'s' });
  const saveBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Save plan and limits');
  const msg = notice();
  const inForce = h('div');
  const planLink = h('p', { class: 'small' });

  /** Empty fields fall back to the chosen plan's limits (known once the plans are read). */
  function showFallback() {
    const plan = plans.find((p) => p.name === select.value);
    fields.setFallback((limit) => {
      const value = plan && plan.effective_limits ? plan.effective_limits[limit.key] : undefined;
      return value === undefined ? 'the plan\'s' : `the plan's, ${valueText(limit, value)}`;
    });
  }
  select.el.addEventListener('change', showFallback);

  const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'account-plan-title' },
    h('div', { class: 'narrow' }, field('Plan', select.el, { hint: 'The named set of limits it is held to (see Plans).' })),
    h('fieldset', { class: 'limit-set' },
      h('legend', null, 'Limits for this account alone'),
      h('p', { class: 'muted small' }, 'These go over its plan\'s. Leave a limit empty to hold the account to its plan\'s.'),
      fields.el),
    h('div', { class: 'form-actions' }, saveBtn),
    msg.el);

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.clear();
    let overrides;
    try {
      overrides = fields.read();
    } catch (err) {
      msg.show(err.message);
      return;
    }
    try {
      const saved = await busy(saveBtn, 'Saving…', () => api.changeLimits(accountId, select.value, overrides));
      if (ctx.signal.aborted) return;
      onSaved(saved);
      msg.show(`Saved: ${saved.name} is on ${saved.plan}. Every node holds it to these limits within about a second.`, 'success');
    } catch (err) {
      if (!ctx.signal.aborted) msg.show(describe(err));
    }
  });

  const el = h('section', { class: 'card', 'aria-labelledby': 'account-plan-title' },
    h('h2', { id: 'account-plan-title' }, 'Plan and limits'),
    form,
    h('div', { class: 'stack' },
      h('h3', null, 'In force now'),
      inForce,
      planLink));

  return {
    el,
    show(account) {
      select.value = account.plan;
      fields.set(account.limit_overrides);
      showFallback();
      inForce.replaceChildren(limitList(account.limits, { full: true }));
      planLink.replaceChildren(h('a', { href: planHref(account.plan) }, `The plan ${account.plan}`));
    },
    async load() {
      try {
        plans = await api.listPlans();
        if (ctx.signal.aborted) return;
        select.fill(plans);
        showFallback();
      } catch (err) {
        if (!ctx.signal.aborted) msg.show(describe(err));
      }
    },
  };
}
