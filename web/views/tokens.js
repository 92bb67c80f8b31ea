// API tokens: list, create (the secret is shown once, with a copy button), revoke.

import { h, field, notice, badge, busy, date, confirmDialog, secretBox } from '../lib/dom.js';
import { describe } from '../lib/api.js';

const SCOPES = [
  { name: 'queues_read', label: 'Read queues', hint: 'list queues and consumers, peek, metrics' },
  { name: 'queues_write', label: 'Write queues', hint: 'create, change and delete queues; send, purge' },
  { name: 'tokens_write', label: 'Manage tokens', hint: 'create and revoke tokens' },
];

export function renderTokens(root, ctx) {
  ctx.setTitle('API tokens');
  const { api, session } = ctx;

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
  const createBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create token');
  const createMsg = notice();
  const created = h('div');
  const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'create-token-title' },
    h('h2', { id: 'create-token-title' }, 'Create a token'),
    h('div', { class: 'narrow' }, field('Token name', name, { hint: 'What uses it, so you know what breaks if you revoke it.' })),
    scopeSet,
    h('p', { class: 'muted small' }, 'Pulling and acking messages needs both queue scopes. A token can only grant scopes it holds itself.'),
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
    try {
      const token = await busy(createBtn, 'Creating…', () => api.createToken(tokenName, scopes));
      if (ctx.signal.aborted) return;
      const done = h('button', { type: 'button', class: 'btn' }, 'I have copied it');
      done.addEventListener('click', () => {
        created.replaceChildren();
        name.focus();
      });
      created.replaceChildren(h('div', { class: 'stack' },
        secretBox({
          title: `Token “${token.name}” created`,
          label: 'New API token',
          secret: token.token,
          note: 'Copy it now and keep it somewhere safe: it is shown only once and cannot be recovered.',
        }),
        h('div', null, done)));
      name.value = '';
      created.querySelector('.secret-input').focus();
      await load();
    } catch (err) {
      if (!ctx.signal.aborted) createMsg.show(describe(err));
    }
  });

  // ---- list ----
  const listMsg = notice();
  const tbody = h('tbody');
  const table = h('table', { class: 'table table-cards', 'aria-label': 'API tokens' },
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, 'Name'),
      h('th', { scope: 'col' }, 'Scopes'),
      h('th', { scope: 'col' }, 'Created'),
      h('th', { scope: 'col' }, 'Token ID'),
      h('th', { scope: 'col', class: 'actions-col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
    tbody);
  const count = h('span', { class: 'muted count' });

  root.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' }, h('div', null, h('h1', null, 'API tokens'),
      h('p', { class: 'muted' }, 'Tokens let services and people use this account. Only a hash is stored: a token is shown once, when it is created.'))),
    h('div', { class: 'card' }, form, created),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-head' }, h('h2', null, 'Active tokens'), count),
      listMsg.el, h('div', { class: 'table-wrap' }, table))));

  function row(t) {
    const mine = session && t.id === session.tokenId;
    const revoke = h('button', { type: 'button', class: 'btn btn-danger-outline btn-sm', 'aria-label': `Revoke ${t.name}` }, 'Revoke…');
    revoke.addEventListener('click', async () => {
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
        await busy(revoke, 'Revoking…', () => api.revokeToken(t.id));
        if (mine) {
          ctx.signOut({ kind: 'success', text: 'You revoked the token of this session and are signed out.' });
          return;
        }
        ctx.toast(`Token ${t.name} revoked.`);
        await load();
      } catch (err) {
        if (!ctx.signal.aborted) listMsg.show(describe(err));
      }
    });
    return h('tr', { dataset: { token: t.name } },
      h('td', { 'data-label': 'Name', class: 'cell-name' }, h('span', { class: 'strong' }, t.name), mine ? badge('This session', 'info') : null),
      h('td', { 'data-label': 'Scopes' }, h('span', { class: 'chips' }, (t.scopes || []).map((s) => h('code', { class: 'chip' }, s)))),
      h('td', { 'data-label': 'Created' }, date(t.created_on)),
      h('td', { 'data-label': 'Token ID' }, h('code', { class: 'muted' }, t.id)),
      h('td', { class: 'actions-col' }, revoke));
  }

  async function load() {
    try {
      const tokens = await api.listTokens();
      if (ctx.signal.aborted) return;
      listMsg.clear();
      tokens.sort((a, b) => String(b.created_on).localeCompare(String(a.created_on)));
      tbody.replaceChildren(...tokens.map(row));
      table.hidden = tokens.length === 0;
      count.textContent = `${tokens.length} ${tokens.length === 1 ? 'token' : 'tokens'}`;
      if (!tokens.length) listMsg.show('No active tokens.', 'info');
    } catch (err) {
      if (ctx.signal.aborted) return;
      table.hidden = true;
      listMsg.show(describe(err));
    }
  }

  load();
  name.focus();
  return null;
}
