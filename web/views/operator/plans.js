// The operator's plans (named sets of limits that accounts are on): the list with the limits each sets
// and how many accounts are on it; create a plan; delete one no account is on. A plan's page: change
// its limits (an emptied field removes a limit: the node's own setting applies again), the limits in
// force for its accounts, delete.

import { h, field, notice, num, badge, busy, date, confirmDialog } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { LIMITS, limitList } from '../limits/words.js';
import { createLimitFields, valueText } from './limit-fields.js';
import { PLAN_NAME_RE, DEFAULT_PLAN } from './plan-select.js';

const NAME_PROBLEM = 'A plan name is 1 to 63 characters: lowercase letters a-z, digits, - and _, starting with a letter or digit.';

/** The address of a plan's page, and of the accounts on it. */
export const planHref = (name) => `#/operator/plans/${encodeURIComponent(name)}`;
export const accountsOnHref = (name) => `#/operator/accounts?plan=${encodeURIComponent(name)}`;

/**
 * The node's own limits, as far as the plans show them: a plan that does not set a limit is held to
 * the node's (the answering node's configuration). A limit every plan sets is not known.
 */
function nodeLimits(plans) {
  const node = {};
  for (const limit of LIMITS) {
    const open = plans.find((p) => !p.limits || p.limits[limit.key] === undefined);
    if (open && open.effective_limits) node[limit.key] = open.effective_limits[limit.key];
  }
  return node;
}

/** What an empty field of a plan's means: the node's setting, with its value when known. */
function nodeFallback(node) {
  return (limit) => (node[limit.key] === undefined ? 'the node\'s setting' : `the node's setting, ${valueText(limit, node[limit.key])}`);
}

function accountsText(n) {
  return `${num(n)} ${n === 1 ? 'account' : 'accounts'}`;
}

/**
 * Deletes `plan` after a confirmation; resolves true once deleted, false when the operator cancelled.
 * The server's refusal (accounts are on it: 409) is thrown.
 */
async function deletePlan(api, plan, button) {
  const ok = await confirmDialog({
    title: `Delete plan “${plan.name}”?`,
    message: plan.accounts
      ? `${accountsText(plan.accounts)} ${plan.accounts === 1 ? 'is' : 'are'} on it: the server refuses to delete a plan accounts are on. Move them to another plan first.`
      : 'No account is on it. Accounts can no longer be put on it.',
    confirmLabel: 'Delete plan',
  });
  if (!ok) return false;
  await busy(button, 'Deleting…', () => api.deletePlan(plan.name));
  return true;
}

/** The list of plans, and the form to create one. */
export function renderPlans(root, ctx) {
  ctx.setTitle('Plans');
  const { api } = ctx;

  // ---- create ----
  const nameInput = h('input', { type: 'text', required: true, maxlength: '63', autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. pro' });
  const fields = createLimitFields({ fallback: () => 'the node\'s setting' });
  const createBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create plan');
  const createMsg = notice();
  const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'create-plan-title' },
    h('h2', { id: 'create-plan-title' }, 'Create a plan'),
    h('div', { class: 'narrow' }, field('Plan name', nameInput, { hint: 'Lowercase letters, digits, - and _; up to 63 characters.' })),
    h('fieldset', { class: 'limit-set' },
      h('legend', null, 'Limits it sets'),
      h('p', { class: 'muted small' }, 'Leave a limit empty and its accounts are held to the node\'s own setting (its SKIPLOCK_* variable).'),
      fields.el),
    h('div', { class: 'form-actions' }, createBtn),
    createMsg.el);

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    createMsg.clear();
    const name = nameInput.value.trim();
    if (!PLAN_NAME_RE.test(name)) {
      createMsg.show(NAME_PROBLEM);
      nameInput.setAttribute('aria-invalid', 'true');
      nameInput.focus();
      return;
    }
    nameInput.removeAttribute('aria-invalid');
    let limits;
    try {
      limits = fields.readSet();
    } catch (err) {
      createMsg.show(err.message);
      return;
    }
    try {
      const plan = await busy(createBtn, 'Creating…', () => api.createPlan(name, limits));
      if (ctx.signal.aborted) return;
      nameInput.value = '';
      fields.set({});
      ctx.toast(`Plan ${plan.name} created.`);
      nameInput.focus();
      await load();
    } catch (err) {
      if (!ctx.signal.aborted) createMsg.show(describe(err));
    }
  });

  // ---- list ----
  const listMsg = notice();
  const count = h('span', { class: 'muted count' });
  const tbody = h('tbody');
  const table = h('table', { class: 'table table-cards', 'aria-label': 'Plans', hidden: true },
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, 'Plan'),
      h('th', { scope: 'col' }, 'Limits it sets'),
      h('th', { scope: 'col' }, 'Accounts'),
      h('th', { scope: 'col' }, 'Changed'),
      h('th', { scope: 'col', class: 'actions-col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
    tbody);
  const loading = h('p', { class: 'muted loading' }, 'Loading plans…');

  root.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('div', null, h('h1', null, 'Plans'),
        h('p', { class: 'muted' }, 'A plan is a named set of limits that accounts are on. A limit the plan leaves out is the node\'s own; '
          + 'an account\'s own limits go over its plan\'s. A change is enforced on every node within about a second.'))),
    h('div', { class: 'card' }, form),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-head' }, h('h2', null, 'All plans'), count),
      listMsg.el, loading, h('div', { class: 'table-wrap' }, table))));

  function row(plan) {
    const isDefault = plan.name === DEFAULT_PLAN;
    const edit = h('a', { href: planHref(plan.name), class: 'btn btn-sm', 'aria-label': `Edit ${plan.name}` }, 'Edit');
    let remove = null;
    if (!isDefault) {
      remove = h('button', { type: 'button', class: 'btn btn-danger-outline btn-sm', 'aria-label': `Delete ${plan.name}` }, 'Delete…');
      remove.addEventListener('click', async () => {
        listMsg.clear();
        try {
          if (!(await deletePlan(api, plan, remove)) || ctx.signal.aborted) return;
          ctx.toast(`Plan ${plan.name} deleted.`);
          await load();
        } catch (err) {
          if (!ctx.signal.aborted) listMsg.show(describe(err));
        }
      });
    }
    return h('tr', { dataset: { plan: plan.name } },
      h('td', { 'data-label': 'Plan', class: 'cell-name' },
        h('a', { href: planHref(plan.name), class: 'queue-link' }, plan.name),
        isDefault ? badge('Default', 'info') : null),
      h('td', { 'data-label': 'Limits it sets' }, limitList(plan.limits, { empty: 'None: the node\'s own' })),
      h('td', { 'data-label': 'Accounts' }, plan.accounts
        ? h('a', { href: accountsOnHref(plan.name), 'aria-label': `${accountsText(plan.accounts)} on ${plan.name}` }, accountsText(plan.accounts))
        : h('span', { class: 'muted' }, 'None')),
      h('td', { 'data-label': 'Changed' }, date(plan.modified_on)),
      h('td', { class: 'actions-col' }, h('div', { class: 'row-actions' }, edit, remove)));
  }

  async function load() {
    try {
      const plans = await api.listPlans();
      if (ctx.signal.aborted) return;
      listMsg.clear();
      loading.hidden = true;
      tbody.replaceChildren(...plans.map(row));
      table.hidden = plans.length === 0;
      count.textContent = `${num(plans.length)} ${plans.length === 1 ? 'plan' : 'plans'}`;
      fields.setFallback(nodeFallback(nodeLimits(plans)));
    } catch (err) {
      if (ctx.signal.aborted) return;
      loading.hidden = true;
      table.hidden = true;
      listMsg.show(describe(err));
    }
  }

  load();
  nameInput.focus();
  return null;
}

/** One plan: its limits to change, the limits in force for its accounts, delete. */
export function renderPlan(root, ctx, name) {
  ctx.setTitle(name);
  const { api } = ctx;
  const isDefault = name === DEFAULT_PLAN;
  let plan = null;

  const title = h('h1', { class: 'queue-title' }, name);
  const meta = h('p', { class: 'muted meta' });
  const message = notice();
  const deleteBtn = isDefault ? null : h('button', { type: 'button', class: 'btn btn-danger-outline' }, 'Delete…');

  // ---- limits ----
  const fields = createLimitFields({ fallback: () => 'the node\'s setting' });
  const saveBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Save limits');
  const saveMsg = notice();
  const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'plan-limits-title' },
    h('p', { class: 'muted small' }, 'Empty a field to remove the limit: the accounts on the plan are then held to the node\'s own setting. '
      + 'An account\'s own limits still go over these.'),
    fields.el,
    h('div', { class: 'form-actions' }, saveBtn),
    saveMsg.el);
  const inForce = h('div');
  const onIt = h('p', { class: 'small' });

  function show(next, node) {
    plan = next;
    meta.replaceChildren(`${accountsText(plan.accounts)} on it · created ${date(plan.created_on)} · changed ${date(plan.modified_on)}`);
    fields.set(plan.limits);
    if (node) fields.setFallback(nodeFallback(node));
    inForce.replaceChildren(limitList(plan.effective_limits, { full: true }));
    onIt.replaceChildren(plan.accounts
      ? h('a', { href: accountsOnHref(plan.name) }, `Show the ${accountsText(plan.accounts)} on ${plan.name}`)
      : h('span', { class: 'muted' }, 'No account is on it.'));
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    saveMsg.clear();
    let patch;
    try {
      patch = fields.read();
    } catch (err) {
      saveMsg.show(err.message);
      return;
    }
    try {
      const saved = await busy(saveBtn, 'Saving…', () => api.updatePlan(name, patch));
      if (ctx.signal.aborted) return;
      show(saved);
      saveMsg.show(`Limits of ${saved.name} saved. Every node holds its accounts to them within about a second.`, 'success');
    } catch (err) {
      if (!ctx.signal.aborted) saveMsg.show(describe(err));
    }
  });

  if (deleteBtn) {
    deleteBtn.addEventListener('click', async () => {
      message.clear();
      try {
        if (!(await deletePlan(api, plan, deleteBtn)) || ctx.signal.aborted) return;
        ctx.toast(`Plan ${name} deleted.`);
        ctx.navigate('#/operator/plans');
      } catch (err) {
        if (!ctx.signal.aborted) message.show(describe(err));
      }
    });
  }

  const body = h('div', { class: 'queue-body', hidden: true },
    h('div', { class: 'page-head' },
      h('div', { class: 'page-head-main' }, h('div', { class: 'title-row' }, title, isDefault ? badge('Default', 'info') : null), meta),
      deleteBtn ? h('div', { class: 'actions' }, deleteBtn) : null),
    message.el,
    h('section', { class: 'card', 'aria-labelledby': 'plan-limits-title' },
      h('h2', { id: 'plan-limits-title' }, 'Limits it sets'), form),
    h('section', { class: 'card', 'aria-labelledby': 'plan-in-force-title' },
      h('h2', { id: 'plan-in-force-title' }, 'In force for its accounts'),
      h('p', { class: 'muted small' }, 'Its limits over this node\'s own settings: what an account on it is held to, unless the account has limits of its own.'),
      inForce, onIt));
  const loading = h('p', { class: 'muted loading' }, 'Loading the plan…');
  const page = h('section', { class: 'page' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/operator/plans' }, 'Plans'), h('span', { 'aria-hidden': 'true' }, '/'),
      h('span', { 'aria-current': 'page' }, name)),
    loading, body);
  root.append(page);

  (async () => {
    try {
      // The list (there is no paging) also shows the node's own settings, for the empty fields' hints.
      const plans = await api.listPlans();
      if (ctx.signal.aborted) return;
      loading.remove();
      const found = plans.find((p) => p.name === name);
      if (!found) {
        page.append(h('div', { class: 'card' },
          h('h1', null, 'Plan not found'),
          h('p', { role: 'alert' }, `There is no plan named ${name}.`),
          h('p', null, h('a', { href: '#/operator/plans' }, 'Back to all plans'))));
        return;
      }
      body.hidden = false;
      show(found, nodeLimits(plans));
    } catch (err) {
      if (ctx.signal.aborted) return;
      loading.remove();
      page.append(h('div', { class: 'card' },
        h('h1', null, 'Cannot show this plan'),
        h('p', { role: 'alert' }, describe(err)),
        h('p', null, h('a', { href: '#/operator/plans' }, 'Back to all plans'))));
    }
  })();

  return null;
}
