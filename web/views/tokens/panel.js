// The tokens of one account, as the tenant's token page and the operator's account page both show
// them: a form to create one (name, scopes, expiry, the addresses it may be used from; the secret is
// shown once, with a copy button) and the list (status, scopes, expiry, addresses, created, id) with
// revoke. The page hands in how to reach the API.

import { h, field, notice, badge, busy, date, duration, confirmDialog, secretBox } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';

export const SCOPES = [
  { name: 'queues_read', label: 'Read queues', hint: 'list queues and consumers, peek, metrics' },
  { name: 'queues_write', label: 'Write queues', hint: 'create, change and delete queues; send, purge' },
  { name: 'tokens_write', label: 'Manage tokens', hint: 'create and revoke tokens' },
];

const DAY_MS = 86400000;
/** The expiry choices: days from now, none, or a date and time the user picks. */
const EXPIRY = [
  { value: '', label: 'Never' },
  { value: '1', label: 'In 1 day' },
  { value: '7', label: 'In 7 days' },
  { value: '30', label: 'In 30 days' },
  { value: '90', label: 'In 90 days' },
  { value: '365', label: 'In 1 year' },
  { value: 'date', label: 'On a date…' },
];

/** A time as the API takes it: RFC 3339 in UTC, whole seconds ("2027-01-01T00:00:00Z"). */
function rfc3339(ms) {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * When a new token expires: a select (never, in N days, on a date) and, for "on a date", a local date
 * and time. `validity()` is {} or {expires_on}; it throws an Error whose message says what to fix.
 */
export function expiryChoice() {
  const select = h('select', null, EXPIRY.map((c) => h('option', { value: c.value }, c.label)));
  const when = h('input', { type: 'datetime-local', step: '60' });
  const whenField = field('Expiry date and time', when, { hint: 'In this browser\'s time zone.' });
  whenField.hidden = true;
  select.addEventListener('change', () => {
    whenField.hidden = select.value !== 'date';
    if (!whenField.hidden) when.focus();
  });
  const el = h('div', { class: 'form-grid expiry' },
    field('Expires', select, { hint: 'The token is refused from then on. It stays listed, marked expired, until revoked.' }),
    whenField);
  return {
    el,
    validity() {
      when.removeAttribute('aria-invalid');
      if (select.value === '') return {};
      if (select.value !== 'date') return { expires_on: rfc3339(Date.now() + Number(select.value) * DAY_MS) };
      const ms = when.value ? new Date(when.value).getTime() : NaN;
      if (Number.isNaN(ms) || ms <= Date.now()) {
        when.setAttribute('aria-invalid', 'true');
        when.focus();
        throw new Error(Number.isNaN(ms) ? 'Choose the date and time the token expires.' : 'The expiry must be in the future.');
      }
      return { expires_on: rfc3339(ms) };
    },
    reset() {
      select.value = '';
      when.value = '';
      whenField.hidden = true;
    },
  };
}

/** A token's expiry: "Never", or the date (a <time>) and how far it is. */
export function expiryCell(t, now = Date.now()) {
  const parts = [];
  if (!t.expires_on) {
    parts.push(h('span', { class: 'muted' }, 'Never'));
  } else {
    const at = new Date(t.expires_on).getTime();
    parts.push(h('time', { datetime: t.expires_on, title: t.expires_on }, date(t.expires_on)));
    if (!Number.isNaN(at)) {
      parts.push(h('span', { class: 'sub' }, at > now ? `in ${duration((at - now) / 1000)}` : `${duration((now - at) / 1000)} ago`));
    }
  }
  if (t.not_before && new Date(t.not_before).getTime() > now) {
    parts.push(h('span', { class: 'sub' }, 'valid from ', h('time', { datetime: t.not_before, title: t.not_before }, date(t.not_before))));
  }
  return parts;
}

/**
 * The addresses "Allowed from" takes: networks (198.51.100.0/24) or addresses, separated by commas or
 * spaces. `{}` when there are none, else Cloudflare's {condition: {request_ip: {in}}}; the server checks each.
 */
export function addressCondition(text) {
  const nets = text.split(/[\s,]+/).filter(Boolean);
  return nets.length ? { condition: { request_ip: { in: nets } } } : {};
}

/** A token's address condition: the networks it may be used from ("Any address") and those it may not. */
export function addressCell(t) {
  const ip = (t.condition && t.condition.request_ip) || {};
  const allowed = ip.in || [];
  const refused = ip.not_in || [];
  const parts = [allowed.length
    ? h('span', { class: 'chips' }, allowed.map((n) => h('code', { class: 'chip' }, n)))
    : h('span', { class: 'muted' }, 'Any address')];
  if (refused.length) parts.push(h('span', { class: 'sub' }, `Not from: ${refused.join(', ')}`));
  return parts;
}

/** A token's status: active or expired (as the server says), or not valid yet. */
export function statusBadge(t, now = Date.now()) {
  if (t.status === 'expired') return badge('Expired', 'warning');
  if (t.not_before && new Date(t.not_before).getTime() > now) return badge('Not valid yet', 'neutral');
  return badge('Active', 'success');
}

/**
 * The create form and the list. `list()` resolves every token; `create(name, scopes, validity)` the
 * new token with its text (`validity`: {expires_on?, condition?}, as the API takes them);
 * `revoke(token)` revokes it. `isMine(token)` marks the session's own token and `onRevokedMine()`
 * follows its revocation (instead of reloading the list). `texts`: {createTitle, createButton,
 * scopeNote}. Returns {els, load}.
 */
export function createTokenPanel({ ctx, list, create, revoke, isMine = () => false, onRevokedMine = null, texts = {} }) {
  const {
    createTitle = 'Create a token',
    createButton = 'Create token',
    scopeNote = 'Pulling and acking messages needs both queue scopes.',
  } = texts;

  // ---- create ----
  const name = h('input', { type: 'text', required: true, maxlength: '120', autocomplete: 'off', placeholder: 'e.g. billing-worker' });
  const boxes = SCOPES.map((s) => ({
    scope: s.name,
    input: h('input', { type: 'checkbox', value: s.name, checked: s.name === 'queues_read' }),
    ...s,
  }));
  const scopeSet = h('fieldset', { class: 'checks' }, h('legend', null, 'Scopes'),
    boxes.map((b) => h('label', { class: 'check' }, b.input,
      h('span', null, h('strong', null, b.label), ' ', h('code', null, b.scope), h('span', { class: 'muted block' }, b.hint)))));
  const expiry = expiryChoice();
  const allowedFrom = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. 198.51.100.0/24, 203.0.113.7' });
  const createBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, createButton);
  const createMsg = notice();
  const created = h('div');
  const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'create-token-title' },
    h('h2', { id: 'create-token-title' }, createTitle),
    h('div', { class: 'narrow' }, field('Token name', name, { hint: 'What uses it, so you know what breaks if you revoke it.' })),
    scopeSet,
    h('p', { class: 'muted small' }, scopeNote),
    expiry.el,
    h('div', { class: 'narrow' }, field('Allowed from', allowedFrom, {
      hint: 'Optional: the networks or addresses it may be used from, separated by commas or spaces. Empty: any address.',
    })),
    h('div', { class: 'form-actions' }, createBtn),
    createMsg.el);

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    createMsg.clear();
    const tokenName = name.value.trim();
    const scopes = boxes.filter((b) => b.input.checked).map((b) => b.scope);
    if (!tokenName) {
      createMsg.show('Give the token a name.');
      name.setAttribute('aria-invalid', 'true');
      name.focus();
      return;
    }
    name.removeAttribute('aria-invalid');
    if (!scopes.length) {
      createMsg.show('Choose at least one scope.');
      boxes[0].input.focus();
      return;
    }
    allowedFrom.removeAttribute('aria-invalid');
    let validity;
    try {
      validity = { ...expiry.validity(), ...addressCondition(allowedFrom.value) };
    } catch (err) {
      createMsg.show(err.message);
      return;
    }
    try {
      const token = await busy(createBtn, 'Creating…', () => create(tokenName, scopes, validity));
      if (ctx.signal.aborted) return;
      const done = h('button', { type: 'button', class: 'btn' }, 'I have copied it');
      done.addEventListener('click', () => {
        created.replaceChildren();
        name.focus();
      });
      const expires = token.expires_on ? ` It expires ${date(token.expires_on)}.` : '';
      const nets = ((token.condition && token.condition.request_ip) || {}).in || [];
      const allowed = nets.length ? ` It may be used only from ${nets.join(', ')}.` : '';
      created.replaceChildren(h('div', { class: 'stack' },
        secretBox({
          title: `Token “${token.name}” created`,
          label: 'New API token',
          secret: token.token,
          note: `Copy it now and keep it somewhere safe: it is shown only once and cannot be recovered.${expires}${allowed}`,
        }),
        h('div', null, done)));
      name.value = '';
      expiry.reset();
      allowedFrom.value = '';
      created.querySelector('.secret-input').focus();
      await load();
    } catch (err) {
      if (ctx.signal.aborted) return;
      createMsg.show(describe(err));
      // The server's 400 names condition.request_ip.in when an entry is not a network or an address.
      if (err.kind === 'invalid' && /condition\.request_ip/.test(err.message)) {
        allowedFrom.setAttribute('aria-invalid', 'true');
        allowedFrom.focus();
      }
    }
  });

  // ---- list ----
  const listMsg = notice();
  const tbody = h('tbody');
  const table = h('table', { class: 'table table-cards', 'aria-label': 'API tokens' },
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, 'Name'),
      h('th', { scope: 'col' }, 'Status'),
      h('th', { scope: 'col' }, 'Scopes'),
      h('th', { scope: 'col' }, 'Expires'),
      h('th', { scope: 'col' }, 'Allowed from'),
      h('th', { scope: 'col' }, 'Created'),
      h('th', { scope: 'col' }, 'Token ID'),
      h('th', { scope: 'col', class: 'actions-col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
    tbody);
  const count = h('span', { class: 'muted count' });

  function row(t) {
    const mine = isMine(t);
    const revokeBtn = h('button', { type: 'button', class: 'btn btn-danger-outline btn-sm', 'aria-label': `Revoke ${t.name}` }, 'Revoke…');
    revokeBtn.addEventListener('click', async () => {
      listMsg.clear();
      const ok = await confirmDialog({
        title: `Revoke “${t.name}”?`,
        message: mine
          ? 'This is the token you signed in with: you will be signed out. Anything else using it stops working within seconds.'
          : 'Anything using this token stops working within seconds. This cannot be undone.',
        confirmLabel: 'Revoke token',
      });
      if (!ok) return;
      try {
        await busy(revokeBtn, 'Revoking…', () => revoke(t));
        if (mine && onRevokedMine) {
          onRevokedMine();
          return;
        }
        ctx.toast(`Token ${t.name} revoked.`);
        await load();
      } catch (err) {
        if (!ctx.signal.aborted) listMsg.show(describe(err));
      }
    });
    const now = Date.now();
    return h('tr', { dataset: { token: t.name } },
      h('td', { 'data-label': 'Name', class: 'cell-name' }, h('span', { class: 'strong' }, t.name), mine ? badge('This session', 'info') : null),
      h('td', { 'data-label': 'Status' }, statusBadge(t, now)),
      h('td', { 'data-label': 'Scopes' }, h('span', { class: 'chips' }, (t.scopes || []).map((s) => h('code', { class: 'chip' }, s)))),
      h('td', { 'data-label': 'Expires' }, expiryCell(t, now)),
      h('td', { 'data-label': 'Allowed from' }, addressCell(t)),
      h('td', { 'data-label': 'Created' }, date(t.created_on)),
      h('td', { 'data-label': 'Token ID' }, h('code', { class: 'muted' }, t.id)),
      h('td', { class: 'actions-col' }, revokeBtn));
  }

  async function load() {
    try {
      const tokens = await list();
      if (ctx.signal.aborted) return;
      listMsg.clear();
      tokens.sort((a, b) => String(b.created_on).localeCompare(String(a.created_on)));
      tbody.replaceChildren(...tokens.map(row));
      table.hidden = tokens.length === 0;
      const expired = tokens.filter((t) => t.status === 'expired').length;
      count.textContent = `${tokens.length} ${tokens.length === 1 ? 'token' : 'tokens'}${expired ? `, ${expired} expired` : ''}`;
      if (!tokens.length) listMsg.show('No tokens. Create one above.', 'info');
    } catch (err) {
      if (ctx.signal.aborted) return;
      table.hidden = true;
      listMsg.show(describe(err));
    }
  }

  const els = [
    h('div', { class: 'card' }, form, created),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-head' }, h('h2', null, 'Tokens'), count),
      listMsg.el, h('div', { class: 'table-wrap' }, table)),
  ];
  return { els, load, focus: () => name.focus() };
}
