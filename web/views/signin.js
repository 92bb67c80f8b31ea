// Sign-in: an API token, checked against the server before anything else is shown. The token names
// its account; an operator may still type the account id (under "Account ID (optional)") to be told
// when a token is not that account's. An operator token (`sko_…`) signs in to the operator view
// instead, on the operator address (SKIPLOCK_ADMIN_BIND), where the operator API is.

import { h, field, notice } from '../lib/dom.js';
import { verifyToken, verifyOperatorToken, ownAccount, describe, ApiError, CODES, OPERATOR_PREFIX } from '../lib/api.js';

/** The account id typed is not the token's account. */
class WrongAccount extends Error {}

/** What an operator token typed on the public address is told (there is no operator API there). */
const NOT_OPERATOR_ADDRESS = 'Operator tokens (sko_…) are used on the operator address (SKIPLOCK_ADMIN_BIND, '
  + '127.0.0.1:9788 unless configured otherwise), not on this one. Open the dashboard at that address to sign in '
  + 'as the operator, or sign in here with an account\'s token (skl_…).';

/** What an account token typed on the operator address is told (there is no tenant API there). */
const NOT_ACCOUNT_ADDRESS = 'This is the operator address: sign in here with an operator token (sko_…). An account\'s '
  + 'token (skl_…) is used on the public API address, where the dashboard shows that account\'s queues.';

export function renderSignIn(root, ctx) {
  const account = h('input', {
    type: 'text', required: true, autocomplete: 'username', spellcheck: 'false', inputmode: 'text',
    pattern: '[0-9a-fA-F]{32}', maxlength: '32', class: 'mono', placeholder: '32 hexadecimal characters',
  });
  const token = h('input', {
    type: 'password', required: true, autocomplete: 'current-password', spellcheck: 'false', class: 'mono',
    placeholder: 'skl_… or sko_…',
  });
  const reveal = h('button', { type: 'button', class: 'btn btn-ghost btn-sm reveal', 'aria-pressed': 'false' }, 'Show');
  reveal.addEventListener('click', () => {
    const shown = token.type === 'text';
    token.type = shown ? 'password' : 'text';
    reveal.textContent = shown ? 'Show' : 'Hide';
    reveal.setAttribute('aria-pressed', String(!shown));
  });
  const message = notice();
  const submit = h('button', { type: 'submit', class: 'btn btn-primary btn-block' }, 'Sign in');

  const tokenField = field('API token', token, {
    hint: 'An account\'s token (skl_…), or an operator token (sko_…) on the operator address. Kept in this browser tab only, until you sign out or close it.',
  });
  tokenField.querySelector('label').after(reveal);
  tokenField.classList.add('field-with-action');

  const advanced = h('details', { class: 'more-settings signin-advanced' },
    h('summary', null, 'Account ID (optional)'),
    field('Account ID', account, {
      hint: 'Only to check that the token is this account\'s. Leave it empty to use the token\'s own account.',
    }));

  // No `name` attributes and no action: the form never submits anywhere by itself, so the token
  // cannot end up in a URL.
  const form = h('form', { class: 'signin-form', novalidate: true, 'aria-labelledby': 'signin-title' },
    tokenField,
    advanced,
    message.el,
    submit);

  const refuseAccount = (text) => {
    message.show(text);
    advanced.open = true;
    account.setAttribute('aria-invalid', 'true');
    account.focus();
  };
  const refuseToken = (text) => {
    message.show(text);
    token.setAttribute('aria-invalid', 'true');
    token.focus();
    token.select();
  };
  const ready = () => {
    submit.disabled = false;
    submit.textContent = 'Sign in';
  };

  /** An operator token: checked against the operator API, then the operator view. */
  async function signInOperator(tokenText) {
    submit.disabled = true;
    submit.textContent = 'Checking…';
    try {
      await verifyOperatorToken(tokenText);
      if (ctx.signal.aborted) return;
      ctx.onSignedIn({ mode: 'operator', token: tokenText });
    } catch (err) {
      if (ctx.signal.aborted) return;
      ready();
      if (err instanceof ApiError && err.kind === 'not_found') {
        refuseToken(NOT_OPERATOR_ADDRESS);
      } else if (err instanceof ApiError && err.kind === 'unauthorized') {
        refuseToken(`This operator token is not valid: ${err.message}. Check that you copied all of it, and that it has not been revoked.`);
      } else {
        message.show(describe(err));
      }
    }
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    message.clear();
    const typed = account.value.trim().toLowerCase();
    const tokenText = token.value.trim();
    if (!tokenText) {
      message.show('Enter an API token.');
      token.setAttribute('aria-invalid', 'true');
      token.focus();
      return;
    }
    token.removeAttribute('aria-invalid');
    if (tokenText.startsWith(OPERATOR_PREFIX)) {
      if (typed) {
        refuseAccount('An operator token belongs to no account: leave the account ID empty to sign in as the operator.');
        return;
      }
      account.removeAttribute('aria-invalid');
      await signInOperator(tokenText);
      return;
    }
    if (typed && !/^[0-9a-f]{32}$/.test(typed)) {
      refuseAccount('The account ID is 32 hexadecimal characters (0-9, a-f), as printed by `skiplock account create`. Or leave it empty.');
      return;
    }
    account.removeAttribute('aria-invalid');
    submit.disabled = true;
    submit.textContent = 'Checking…';
    try {
      const verified = await verifyToken(tokenText);
      const accountId = verified && verified.account_id;
      if (!accountId) throw new ApiError('server', 200, 'the token check did not name the token\'s account');
      if (typed && typed !== accountId) throw new WrongAccount();
      const named = await ownAccount(tokenText, accountId);
      if (ctx.signal.aborted) return;
      ctx.onSignedIn({ accountId, accountName: named ? named.name : null, token: tokenText, tokenId: verified.id });
    } catch (err) {
      if (ctx.signal.aborted) return;
      ready();
      if (err instanceof ApiError && err.kind === 'unauthorized' && err.code === CODES.tokenOutsideWindow) {
        // Expired (or not valid yet): the server says since (or from) when.
        refuseToken(`This API token cannot be used now: ${err.message}. Sign in with another token, or ask for a new one.`);
      } else if (err instanceof ApiError && err.kind === 'unauthorized') {
        refuseToken(`This API token is not valid: ${err.message}. Check that you copied all of it, and that it has not been revoked.`);
      } else if (err instanceof ApiError && err.kind === 'not_found') {
        refuseToken(NOT_ACCOUNT_ADDRESS);
      } else if (err instanceof WrongAccount) {
        refuseAccount('This token does not belong to that account. Check the account ID, or leave it empty to use the token\'s own account.');
      } else {
        message.show(describe(err));
      }
    }
  });

  const intro = ctx.message ? notice() : null;
  if (intro) intro.show(ctx.message.text, ctx.message.kind);

  root.append(h('section', { class: 'signin' },
    h('div', { class: 'signin-card' },
      h('div', { class: 'signin-brand' }, h('img', { src: '/logo.svg', alt: '', width: '32', height: '32' }), h('span', null, 'skiplock')),
      h('h1', { id: 'signin-title', class: 'signin-title' }, 'Sign in to the dashboard'),
      h('p', { class: 'muted' }, 'Use an API token. An operator creates an account and its first token in the operator view, or with ',
        h('code', null, 'skiplock account create --name NAME'), '.'),
      intro && intro.el,
      form)));
  token.focus();
  return null;
}
