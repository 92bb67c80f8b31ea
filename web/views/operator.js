// The operator view (an `sko_` token, on the operator address): the accounts, a page at a time,
// filtered by name, status and plan; create an account (on a plan; its first token shown once),
// suspend and resume one. An account's page: its fields, rename, its plan and own limits, its tokens
// (issue one on its behalf, revoke), its audit log (views/operator/account-audit.js), and delete it,
// its deletion followed live (views/operator/account-deletion.js). The plans have their pages in
// views/operator/plans.js.

import { h, field, notice, badge, busy, date, confirmDialog, secretBox } from '../lib/dom.js';
import { describe } from '../lib/api.js';
import { createPagedTable, pageRange } from '../lib/paged-table.js';
import { createTokenPanel } from './tokens/panel.js';
import { createPlanSelect } from './operator/plan-select.js';
import { createAccountPlan } from './operator/account-plan.js';
import { createAccountDeletion, isDeleted } from './operator/account-deletion.js';
import { createAccountAudit } from './operator/account-audit.js';
import { planHref } from './operator/plans.js';

/** Accounts on a page of the list. */
export const PER_PAGE = 50;
const NAME_MAX = 120;
const REASON_MAX = 500;

/** The address of the accounts list with these filters (the defaults left out). */
function listHash({ name, status, plan, page }) {
  const params = new URLSearchParams();
  if (name) params.set('name', name);
  if (status) params.set('status', status);
  if (plan) params.set('plan', plan);
  if (page > 1) params.set('page', String(page));
  const text = params.toString();
  return text ? `#/operator/accounts?${text}` : '#/operator/accounts';
}

/** An account's statuses, as the list's filter offers them: [status, label, badge kind]. */
const STATUSES = [
  ['active', 'Active', 'success'],
  ['suspended', 'Suspended', 'warning'],
  ['deleting', 'Deleting', 'danger'],
  ['deleted', 'Deleted', 'neutral'],
];
export const ACCOUNT_STATUSES = STATUSES.map(([status]) => status);

/** The word for an account's status. */
function statusLabel(status) {
  const known = STATUSES.find(([s]) => s === status);
  return known ? known[1] : String(status);
}

/** The account's status as a badge. */
function statusBadge(status) {
  const known = STATUSES.find(([s]) => s === status);
  return badge(statusLabel(status), known ? known[2] : 'neutral');
}

/** The account's status: a badge, and for a suspended one the reason given. */
function statusOf(account) {
  if (account.status === 'suspended') {
    return [statusBadge(account.status),
      h('span', { class: 'sub' }, account.status_reason ? `Reason: ${account.status_reason}` : 'No reason given')];
  }
  if (account.status === 'deleting') {
    return [statusBadge(account.status), h('span', { class: 'sub' }, 'Its queues and messages are being deleted')];
  }
  return [statusBadge(account.status)];
}

/** A control character (Unicode Cc), which no name may hold. */
function isControl(c) {
  const n = c.codePointAt(0);
  return n < 0x20 || (n >= 0x7f && n < 0xa0);
}

/** A name the server takes: 1 to 120 characters, none a control character; else a message. */
function nameProblem(name) {
  const chars = [...name];
  if (!chars.length || chars.length > NAME_MAX || chars.some(isControl)) {
    return `An account name is 1 to ${NAME_MAX} characters, without control characters.`;
  }
  return null;
}

/**
 * Suspends (after a confirmation, with an optional reason) or resumes `account`; resolves the
 * account as it now is, or null when the operator cancelled. Errors are thrown.
 */
async function changeStanding(api, account, button) {
  if (account.status === 'suspended') {
    const ok = await confirmDialog({
      title: `Resume “${account.name}”?`,
      message: 'Its tokens work again and its deliveries start again within about a second.',
      confirmLabel: 'Resume account',
      danger: false,
    });
    if (!ok) return null;
    return busy(button, 'Resuming…', () => api.resumeAccount(account.id));
  }
  const reason = h('textarea', { maxlength: String(REASON_MAX), rows: '3' });
  const ok = await confirmDialog({
    title: `Suspend “${account.name}”?`,
    message: 'Every request of this account is refused (403) and its long polls and webhook deliveries stop, '
      + 'within about a second. Nothing of it is deleted: resume it to serve it again.',
    confirmLabel: 'Suspend account',
    content: field('Reason (optional)', reason, { hint: `For the operators' own reading; at most ${REASON_MAX} characters.` }),
  });
  if (!ok) return null;
  const text = reason.value.trim();
  return busy(button, 'Suspending…', () => api.suspendAccount(account.id, text || undefined));
}

/** The account's plan, and a note when it has limits of its own over the plan's. */
function planOf(account) {
  const own = Object.keys(account.limit_overrides || {}).length;
  return [h('a', { href: planHref(account.plan) }, account.plan),
    own ? h('span', { class: 'sub' }, `+ ${own} ${own === 1 ? 'limit' : 'limits'} of its own`) : null];
}

/** The list of accounts; `query` is {name, status, plan, page} from the address. */
export function renderAccounts(root, ctx, query) {
  ctx.setTitle('Accounts');
  const { api } = ctx;
  let { name: nameFilter, status: statusFilter, plan: planFilter, page } = query;
  const filters = () => ({ name: nameFilter, status: statusFilter, plan: planFilter });

  // ---- create ----
  const newName = h('input', { type: 'text', required: true, maxlength: String(NAME_MAX), autocomplete: 'off', placeholder: 'e.g. acme-production' });
  const newPlan = createPlanSelect();
  const createBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create account');
  const createMsg = notice();
  const created = h('div');
  const form = h('form', { novalidate: true, 'aria-label': 'Create an account' },
    h('div', { class: 'inline-form' },
      field('New account name', newName, { hint: 'Up to 120 characters. The account gets a first token with every scope.' }),
      field('Plan', newPlan.el, { hint: 'The limits it is held to; its own can be set on its page.' }),
      h('div', { class: 'inline-submit' }, createBtn)),
    createMsg.el);

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    createMsg.clear();
    const accountName = newName.value.trim();
    const problem = nameProblem(accountName);
    if (problem) {
      createMsg.show(problem);
      newName.setAttribute('aria-invalid', 'true');
      newName.focus();
      return;
    }
    newName.removeAttribute('aria-invalid');
    try {
      const { account, token } = await busy(createBtn, 'Creating…', () => api.createAccount(accountName, newPlan.value || undefined));
      if (ctx.signal.aborted) return;
      const done = h('button', { type: 'button', class: 'btn' }, 'I have copied it');
      done.addEventListener('click', () => {
        created.replaceChildren();
        newName.focus();
      });
      created.replaceChildren(h('div', { class: 'stack' },
        secretBox({
          title: `Account “${account.name}” created`,
          label: 'First API token',
          secret: token.token,
          note: 'Its first token, with every scope. Copy it now and hand it to the account\'s owner: it is shown only once and cannot be recovered.',
        }),
        h('p', { class: 'small' }, 'Account ID ', h('code', null, account.id), ' · plan ', h('strong', null, account.plan), ' · ',
          h('a', { href: `#/operator/accounts/${account.id}` }, `Open ${account.name}`)),
        h('div', null, done)));
      newName.value = '';
      ctx.toast(`Account ${account.name} created.`);
      created.querySelector('.secret-input').focus();
      await load();
    } catch (err) {
      if (!ctx.signal.aborted) createMsg.show(describe(err));
    }
  });

  // ---- filter ----
  const nameInput = h('input', { type: 'search', maxlength: String(NAME_MAX), autocomplete: 'off', spellcheck: 'false', value: nameFilter });
  const statusSelect = h('select', null,
    h('option', { value: '' }, 'Any status'),
    STATUSES.map(([status, label]) => h('option', { value: status }, label)));
  statusSelect.value = statusFilter;
  const planSelect = createPlanSelect({ any: 'Any plan', value: planFilter });
  const filterBtn = h('button', { type: 'submit', class: 'btn' }, 'Filter');
  const filter = h('form', { class: 'filter-form', novalidate: true, role: 'search', 'aria-label': 'Filter the accounts' },
    field('Name contains', nameInput),
    field('Status', statusSelect),
    field('Plan', planSelect.el),
    h('div', { class: 'inline-submit' }, filterBtn));
  const chosen = () => ({ name: nameInput.value.trim(), status: statusSelect.value, plan: planSelect.value, page: 1 });
  filter.addEventListener('submit', (e) => {
    e.preventDefault();
    go(chosen());
  });
  statusSelect.addEventListener('change', () => go(chosen()));
  planSelect.el.addEventListener('change', () => go(chosen()));

  // ---- list ----
  const listMsg = notice();
  const {
    count, table, tbody, empty, loading, prev, next, pager, holdPage, showPage,
  } = createPagedTable({
    label: 'Accounts',
    columns: ['Account', 'Status', 'Plan', 'Account ID', 'Created', 'Actions'],
    loadingText: 'Loading accounts…',
    pagerLabel: 'Account pages',
  });

  root.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('div', null, h('h1', null, 'Accounts'),
        h('p', { class: 'muted' }, 'Every account of this deployment, oldest first. A suspended account\'s requests are refused and its '
          + 'deliveries stop; nothing of it is deleted. An account deleted (from its page) stays listed, marked deleted.'))),
    h('div', { class: 'card' }, form, created),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-head' }, h('h2', null, 'All accounts'), count),
      h('div', { class: 'card-filter' }, filter),
      listMsg.el, loading, h('div', { class: 'table-wrap' }, table), empty, pager)));

  function row(account) {
    // A deleted account (or one being deleted) can no longer be suspended or resumed.
    const action = isDeleted(account) ? null : h('button', {
      type: 'button',
      class: account.status === 'suspended' ? 'btn btn-sm' : 'btn btn-danger-outline btn-sm',
      'aria-label': `${account.status === 'suspended' ? 'Resume' : 'Suspend'} ${account.name}`,
    }, account.status === 'suspended' ? 'Resume…' : 'Suspend…');
    if (action) {
      action.addEventListener('click', async () => {
        listMsg.clear();
        try {
          const changed = await changeStanding(api, account, action);
          if (!changed || ctx.signal.aborted) return;
          ctx.toast(`Account ${changed.name} ${changed.status === 'suspended' ? 'suspended' : 'resumed'}.`);
          await load();
        } catch (err) {
          if (!ctx.signal.aborted) listMsg.show(describe(err));
        }
      });
    }
    return h('tr', { dataset: { account: account.id } },
      h('td', { 'data-label': 'Account', class: 'cell-name' },
        h('a', { href: `#/operator/accounts/${account.id}`, class: 'queue-link' }, account.name)),
      h('td', { 'data-label': 'Status' }, statusOf(account)),
      h('td', { 'data-label': 'Plan' }, planOf(account)),
      h('td', { 'data-label': 'Account ID' }, h('code', { class: 'muted' }, account.id)),
      h('td', { 'data-label': 'Created' }, date(account.created_on)),
      h('td', { class: 'actions-col' }, action));
  }

  /** Shows the list with these filters and page (the address follows, so Back returns to it). */
  function go(next, { replace = false } = {}) {
    ({ name: nameFilter, status: statusFilter, plan: planFilter, page } = next);
    const hash = listHash(next);
    if (replace) history.replaceState(null, '', hash);
    else if (hash !== location.hash) history.pushState(null, '', hash);
    load();
  }
  prev.addEventListener('click', () => go({ ...filters(), page: page - 1 }));
  next.addEventListener('click', () => go({ ...filters(), page: page + 1 }));

  let asked = 0; // the latest load: an older answer arriving late is dropped
  async function load() {
    asked += 1;
    const mine = asked;
    holdPage();
    filterBtn.disabled = true;
    let items;
    let info;
    try {
      ({ items, info } = await api.listAccounts({ ...filters(), page, perPage: PER_PAGE }));
    } catch (err) {
      if (ctx.signal.aborted || mine !== asked) return;
      loading.hidden = true;
      table.hidden = true;
      listMsg.show(describe(err));
      return;
    } finally {
      if (mine === asked) filterBtn.disabled = false;
    }
    if (ctx.signal.aborted || mine !== asked) return;
    if (items.length === 0 && info.total_pages > 0 && page > info.total_pages) {
      // Past the end (accounts filtered away, or an old address): the last page instead.
      go({ ...filters(), page: info.total_pages }, { replace: true });
      return;
    }
    listMsg.clear();
    loading.hidden = true;
    tbody.replaceChildren(...items.map(row));
    table.hidden = items.length === 0;
    const filtered = Boolean(nameFilter || statusFilter || planFilter);
    empty.hidden = info.total_count !== 0;
    empty.replaceChildren(
      h('p', { class: 'empty-title' }, filtered ? 'No account matches' : 'No accounts yet'),
      h('p', { class: 'muted' }, filtered ? 'Change the filter, or clear it to see every account.' : 'Create the first account above.'));
    count.textContent = info.total_count ? `${pageRange(info, items.length)} ${info.total_count === 1 ? 'account' : 'accounts'}${filtered ? ' matching' : ''}` : '';
    showPage(info);
  }

  /** The plans, for the new account's plan and the filter (the list works without them). */
  async function loadPlans() {
    try {
      const plans = await api.listPlans();
      if (ctx.signal.aborted) return;
      newPlan.fill(plans);
      planSelect.fill(plans);
    } catch (err) {
      if (!ctx.signal.aborted) createMsg.show(`The plans could not be read, so only the default plan is offered: ${describe(err)}`);
    }
  }

  load();
  loadPlans();
  newName.focus();
  return null;
}

/**
 * One account: its fields, rename, suspend or resume, its plan and own limits, its tokens, its audit
 * log, and delete it. Once it is deleted or being deleted, it can no longer be suspended or given a
 * token: the page follows the deletion instead.
 */
export function renderAccount(root, ctx, accountId) {
  ctx.setTitle('Account');
  const { api } = ctx;
  let account = null;

  const title = h('h1', { class: 'queue-title' }, 'Account');
  const stateBadge = h('span');
  const meta = h('p', { class: 'muted meta' });
  const standingBtn = h('button', { type: 'button', class: 'btn' }, 'Suspend…');
  const message = notice();
  const crumb = h('span', { 'aria-current': 'page' }, '…');
  const props = h('dl', { class: 'props' });

  // ---- rename ----
  const nameInput = h('input', { type: 'text', required: true, maxlength: String(NAME_MAX), autocomplete: 'off' });
  const renameBtn = h('button', { type: 'submit', class: 'btn' }, 'Rename');
  const renameMsg = notice();
  const rename = h('form', { novalidate: true, 'aria-label': 'Rename the account' },
    h('div', { class: 'inline-form' },
      field('Account name', nameInput, { hint: 'The name its users see in the dashboard\'s top bar.' }),
      h('div', { class: 'inline-submit' }, renameBtn)),
    renameMsg.el);

  const limits = createAccountPlan({ api, ctx, accountId, onSaved: (changed) => show(changed) });
  const deletion = createAccountDeletion({ api, ctx, accountId, onStatus: () => reload() });
  const audit = createAccountAudit({ api, ctx, accountId });

  const tokens = createTokenPanel({
    ctx,
    list: () => api.listTokens(accountId),
    create: (name, scopes, validity) => api.createToken(accountId, name, scopes, validity),
    revoke: (t) => api.revokeToken(accountId, t.id),
    texts: {
      createTitle: 'Issue a token',
      createButton: 'Issue token',
      scopeNote: 'Issued on the account\'s behalf, with the scopes chosen here. Pulling and acking messages needs both queue scopes.',
    },
  });

  function show(next) {
    account = next;
    title.textContent = account.name;
    crumb.textContent = account.name;
    ctx.setTitle(account.name);
    const isSuspended = account.status === 'suspended';
    const gone = isDeleted(account);
    stateBadge.replaceChildren(statusBadge(account.status));
    standingBtn.textContent = isSuspended ? 'Resume…' : 'Suspend…';
    standingBtn.className = isSuspended ? 'btn btn-primary' : 'btn btn-danger-outline';
    standingBtn.hidden = gone;
    // Its tokens went when its deletion started, and it can have no other.
    for (const el of tokens.els) el.hidden = gone;
    meta.replaceChildren('ID ', h('code', null, account.id), ` · created ${date(account.created_on)}`);
    const pair = (term, value) => [h('dt', null, term), h('dd', null, value)];
    props.replaceChildren(
      ...pair('Name', account.name),
      ...pair('Status', statusLabel(account.status)),
      ...(isSuspended ? pair('Reason', account.status_reason || h('span', { class: 'muted' }, 'No reason given')) : []),
      ...pair('Status changed', account.status_changed_on ? date(account.status_changed_on) : h('span', { class: 'muted' }, 'Never')),
      ...pair('Plan', account.plan),
      ...pair('Created', date(account.created_on)),
      ...pair('Account ID', h('code', null, account.id)));
    if (document.activeElement !== nameInput) nameInput.value = account.name;
    limits.show(account);
    deletion.show(account);
    // The account as it now is: read (again) what the log says of it, the change just made included.
    audit.load();
  }

  /** Shows the account as the server has it now (after its deletion moved it to another status). */
  async function reload() {
    try {
      const got = await api.getAccount(accountId);
      if (!ctx.signal.aborted) show(got);
    } catch (err) {
      if (!ctx.signal.aborted) message.show(describe(err));
    }
  }

  standingBtn.addEventListener('click', async () => {
    message.clear();
    try {
      const changed = await changeStanding(api, account, standingBtn);
      if (!changed || ctx.signal.aborted) return;
      show(changed);
      ctx.toast(`Account ${changed.name} ${changed.status === 'suspended' ? 'suspended' : 'resumed'}.`);
    } catch (err) {
      if (!ctx.signal.aborted) message.show(describe(err));
    }
  });

  rename.addEventListener('submit', async (e) => {
    e.preventDefault();
    renameMsg.clear();
    const name = nameInput.value.trim();
    const problem = nameProblem(name);
    if (problem) {
      renameMsg.show(problem);
      nameInput.setAttribute('aria-invalid', 'true');
      nameInput.focus();
      return;
    }
    nameInput.removeAttribute('aria-invalid');
    try {
      const renamed = await busy(renameBtn, 'Renaming…', () => api.renameAccount(accountId, name));
      if (ctx.signal.aborted) return;
      show(renamed);
      renameMsg.show(`Renamed to ${renamed.name}.`, 'success');
    } catch (err) {
      if (!ctx.signal.aborted) renameMsg.show(describe(err));
    }
  });

  const body = h('div', { class: 'queue-body', hidden: true },
    h('div', { class: 'page-head' },
      h('div', { class: 'page-head-main' }, h('div', { class: 'title-row' }, title, stateBadge), meta),
      h('div', { class: 'actions' }, standingBtn)),
    message.el,
    h('section', { class: 'card', 'aria-labelledby': 'account-card-title' },
      h('h2', { id: 'account-card-title' }, 'Account'), props, rename),
    limits.el,
    tokens.els,
    audit.el,
    deletion.el);
  const loading = h('p', { class: 'muted loading' }, 'Loading the account…');
  const page = h('section', { class: 'page' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/operator/accounts' }, 'Accounts'), h('span', { 'aria-hidden': 'true' }, '/'), crumb),
    loading, body);
  root.append(page);

  (async () => {
    try {
      const got = await api.getAccount(accountId);
      if (ctx.signal.aborted) return;
      loading.remove();
      body.hidden = false;
      show(got);
      await Promise.all([limits.load(), isDeleted(got) ? null : tokens.load()]);
    } catch (err) {
      if (ctx.signal.aborted) return;
      loading.remove();
      const text = err.kind === 'not_found' ? 'There is no account with this ID.' : describe(err);
      page.append(h('div', { class: 'card' },
        h('h1', null, err.kind === 'not_found' ? 'Account not found' : 'Cannot show this account'),
        h('p', { role: 'alert' }, text),
        h('p', null, h('a', { href: '#/operator/accounts' }, 'Back to all accounts'))));
    }
  })();

  return null;
}
