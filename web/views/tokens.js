// API tokens: list, create (the secret is shown once, with a copy button; an expiry may be set),
// revoke. The form and the list are the token panel (views/tokens/panel.js), which the operator's
// account page shows too. Under them, the account's plan and limits (views/limits/panel.js).

import { h } from '../lib/dom.js';
import { createTokenPanel } from './tokens/panel.js';
import { createLimitsPanel } from './limits/panel.js';

export function renderTokens(root, ctx) {
  ctx.setTitle('API tokens');
  const { api, session } = ctx;

  const panel = createTokenPanel({
    ctx,
    list: () => api.listTokens(),
    create: (name, scopes, validity) => api.createToken(name, scopes, validity),
    revoke: (t) => api.revokeToken(t.id),
    isMine: (t) => Boolean(session && t.id === session.tokenId),
    onRevokedMine: () => ctx.signOut({ kind: 'success', text: 'You revoked the token of this session and are signed out.' }),
    texts: {
      scopeNote: 'Pulling and acking messages needs both queue scopes. A token can only grant scopes it holds itself.',
    },
  });

  const limits = createLimitsPanel({ api, ctx });

  root.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' }, h('div', null, h('h1', null, 'API tokens'),
      h('p', { class: 'muted' }, 'Tokens let services and people use this account. Only a hash is stored: a token is shown once, when it is created.'))),
    panel.els,
    limits.el));

  panel.load();
  limits.load();
  panel.focus();
  return null;
}
