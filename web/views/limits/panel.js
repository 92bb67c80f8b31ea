// The account's "Plan and limits" card on the tenant's token page: the plan the operator put the
// account on and every limit it is held to, in words, from GET /accounts/{id}/limits (any token of
// the account may read it).

import { h, notice } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { limitList } from './words.js';

/** The card; `load()` reads the limits (again) and shows them. */
export function createLimitsPanel({ api, ctx }) {
  const msg = notice();
  const plan = h('p', { class: 'limits-plan' });
  const list = h('div', { class: 'limits-body' });
  const loading = h('p', { class: 'muted' }, 'Loading the limits…');
  const el = h('section', { class: 'card', 'aria-labelledby': 'limits-title' },
    h('div', { class: 'card-head' }, h('h2', { id: 'limits-title' }, 'Plan and limits')),
    h('p', { class: 'muted small' },
      'What this account is held to, set by the operator of this service. A request over the request rate, '
      + 'or a publish that would wait more than a second for the publish rate, is refused with 429 and '
      + 'says when to try again.'),
    loading, plan, list, msg.el);
  plan.hidden = true;

  async function load() {
    try {
      const got = await api.getLimits();
      if (ctx.signal.aborted) return;
      msg.clear();
      loading.hidden = true;
      plan.hidden = false;
      plan.replaceChildren('Plan: ', h('strong', { class: 'mono' }, got.plan));
      list.replaceChildren(limitList(got.limits, { full: true, empty: 'No limits reported.' }));
    } catch (err) {
      if (ctx.signal.aborted) return;
      loading.hidden = true;
      msg.show(describe(err));
    }
  }

  return { el, load };
}
