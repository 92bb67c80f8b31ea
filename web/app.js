// skiplock dashboard: session, routing and the page shell. Views live in views/*.js.
// The API token is kept in sessionStorage only (this tab, until it closes or the user signs out);
// it never goes into a URL, a cookie or the console.
// A session is an account's (an `skl_` token: queues, schedules, events, topics, tokens and usage, on the public address) or the
// operator's (an `sko_` token: the accounts and their plans, on the operator address); each mode has
// its own pages.

import { createClient, createOperatorClient, describe, isSuspended, ApiError, SUSPENDED_TEXT } from './lib/api.js';
import { h, toast } from './lib/dom.js';
import { renderSignIn } from './views/signin.js';
import { renderQueues } from './views/queues.js';
import { renderQueue, forgetHistory } from './views/queue.js';
import { renderTokens } from './views/tokens.js';
import { renderSchedules } from './views/schedules.js';
import { renderEvents } from './views/events.js';
import { renderTopics } from './views/topics.js';
import { renderTopic } from './views/topic.js';
import { renderAudit, auditQuery } from './views/audit.js';
import { renderUsage } from './views/usage.js';
import { renderAccounts, renderAccount, ACCOUNT_STATUSES } from './views/operator.js';
import { renderPlans, renderPlan } from './views/operator/plans.js';
import { PLAN_NAME_RE } from './views/operator/plan-select.js';
import { renderNotFound } from './views/notfound.js';

const SESSION_KEY = 'skiplock.session';

const main = document.getElementById('main');
const topbar = document.getElementById('topbar');
const banner = document.getElementById('banner');
const standing = document.getElementById('standing');
const accountLabel = document.getElementById('account-id');
const brand = topbar.querySelector('.brand');

/** Each mode's first page (the top bar's links for a mode have its name in data-mode). */
const HOME = { account: '#/queues', operator: '#/operator/accounts' };

let session = loadSession();
let api = session ? clientFor(session) : null;
let current = null; // {controller, cleanup}
let signInMessage = null;

function loadSession() {
  try {
    const raw = sessionStorage.getItem(SESSION_KEY);
    if (!raw) return null;
    const s = JSON.parse(raw);
    if (!s || typeof s.token !== 'string') return null;
    if (s.mode === 'operator') return s;
    return typeof s.accountId === 'string' ? s : null;
  } catch {
    return null;
  }
}

function modeOf(s) {
  return s && s.mode === 'operator' ? 'operator' : 'account';
}

function clientFor(s) {
  return modeOf(s) === 'operator' ? createOperatorClient(s, expired) : createClient(s, expired, suspended);
}

/** Whether the address's page belongs to this mode (an operator's page is under #/operator/). */
function belongs(hash, mode) {
  return hash.startsWith('#/operator/') === (mode === 'operator');
}

function signIn(next) {
  session = next;
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(next));
  api = clientFor(session);
  signInMessage = null;
  const mode = modeOf(session);
  const hash = location.hash;
  if (!hash || hash === '#/' || hash === '#' || !belongs(hash, mode)) location.hash = HOME[mode];
  else route();
}

function signOut(message) {
  sessionStorage.removeItem(SESSION_KEY);
  session = null;
  api = null;
  forgetHistory();
  signInMessage = message || null;
  setBanner(null);
  suspended(null);
  if (location.hash && location.hash !== '#/') history.replaceState(null, '', location.pathname);
  route();
}

// The server refused the token mid-session (revoked, or the account is gone): back to sign-in.
let expiring = false;
function expired(err) {
  if (expiring || !session) return;
  expiring = true;
  queueMicrotask(() => {
    expiring = false;
    signOut({ kind: 'error', text: `Your session ended: ${err.message}. Sign in again with a valid token.` });
  });
}

/** A connection banner under the top bar; null hides it. */
function setBanner(text) {
  banner.hidden = !text;
  banner.textContent = text || '';
}

/**
 * The account's standing, from the API client: an error when the server said the operator suspended
 * the account (a banner says so until an answer succeeds again), null when it is served.
 */
function suspended(err) {
  if (!err) {
    if (!standing.hidden) {
      standing.hidden = true;
      standing.replaceChildren();
    }
    return;
  }
  if (!standing.hidden || !session) return;
  standing.replaceChildren(h('strong', null, 'Account suspended. '), SUSPENDED_TEXT);
  standing.hidden = false;
}

/**
 * Runs `task` now and then every `intervalMs` after it finishes, while the view is alive and the tab
 * is visible. Network failures show the connection banner; it goes away on the next success.
 */
function poll(signal, intervalMs, task) {
  let timer = null;
  let running = null; // the tick in progress
  let stopped = false;
  let again = false; // now() was called during a poll: poll again right after it
  const tick = async () => {
    timer = null;
    if (signal.aborted || stopped) return;
    if (!document.hidden) {
      running = (async () => {
        try {
          await task();
          if (!signal.aborted) setBanner(null);
        } catch (err) {
          if (signal.aborted) return;
          if (err instanceof ApiError && (err.kind === 'network' || err.kind === 'timeout')) {
            setBanner(`${describe(err)} Retrying every few seconds…`);
          } else if (!(err instanceof ApiError && err.kind === 'unauthorized') && !isSuspended(err)) {
            setBanner(describe(err));
          }
        }
      })();
      await running;
      running = null;
    }
    if (!signal.aborted && !stopped) timer = setTimeout(tick, again ? 0 : intervalMs);
    again = false;
  };
  const onVisible = () => {
    if (!document.hidden && timer !== null) {
      clearTimeout(timer);
      tick();
    }
  };
  const stop = () => {
    stopped = true;
    if (timer !== null) clearTimeout(timer);
    timer = null;
    document.removeEventListener('visibilitychange', onVisible);
  };
  document.addEventListener('visibilitychange', onVisible);
  signal.addEventListener('abort', stop);
  tick();
  return {
    /** Polls at once (unless a poll is running), then on the usual schedule. */
    now() {
      if (timer !== null) {
        clearTimeout(timer);
        tick();
      } else if (running) {
        again = true;
      }
    },
    /** Stops polling; resolves when no poll is in flight any more. */
    async stop() {
      stop();
      if (running) await running;
    },
    /** Starts again after stop(). */
    resume() {
      if (!stopped || signal.aborted) return;
      stopped = false;
      document.addEventListener('visibilitychange', onVisible);
      tick();
    },
  };
}

function setNav(active) {
  for (const link of topbar.querySelectorAll('[data-nav]')) {
    if (link.dataset.nav === active) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

/** Shows the top bar of a mode: its own navigation only, and who is signed in. */
function setShell(mode) {
  topbar.hidden = false;
  for (const link of topbar.querySelectorAll('[data-mode]')) link.hidden = link.dataset.mode !== mode;
  brand.setAttribute('href', HOME[mode]);
  if (mode === 'operator') {
    accountLabel.textContent = 'Operator';
    accountLabel.title = 'Signed in with an operator token';
    return;
  }
  const shortId = `${session.accountId.slice(0, 8)}…`;
  accountLabel.textContent = session.accountName ? `${session.accountName} · ${shortId}` : `Account ${shortId}`;
  accountLabel.title = `Account ID ${session.accountId}`;
}

/** The accounts list's address: #/operator/accounts?name=..&status=..&plan=..&page=.. (each optional). */
function accountsQuery(text) {
  const params = new URLSearchParams(text || '');
  const page = Number(params.get('page'));
  const status = params.get('status');
  const plan = params.get('plan') || '';
  return {
    name: params.get('name') || '',
    status: ACCOUNT_STATUSES.includes(status) ? status : '',
    plan: PLAN_NAME_RE.test(plan) ? plan : '',
    page: Number.isInteger(page) && page >= 1 && page < 1e9 ? page : 1,
  };
}

function route() {
  if (current) {
    current.controller.abort();
    if (current.cleanup) current.cleanup();
    current = null;
  }
  main.replaceChildren();
  const controller = new AbortController();
  const ctx = {
    api,
    session,
    signal: controller.signal,
    navigate: (hash) => { location.hash = hash; },
    poll: (ms, task) => poll(controller.signal, ms, task),
    setTitle: (title) => { document.title = title ? `${title} · skiplock` : 'skiplock'; },
    toast,
    signOut,
  };
  let cleanup = null;
  if (!session) {
    topbar.hidden = true;
    setBanner(null);
    ctx.setTitle('Sign in');
    cleanup = renderSignIn(main, { ...ctx, message: signInMessage, onSignedIn: signIn });
  } else if (modeOf(session) === 'operator') {
    setShell('operator');
    ctx.home = { href: HOME.operator, label: 'Go to the accounts' };
    const hash = location.hash || HOME.operator;
    let m;
    if ((m = /^#\/operator\/accounts(?:\?(.*))?$/.exec(hash)) || hash === '#/' || hash === '#') {
      setNav('accounts');
      cleanup = renderAccounts(main, ctx, accountsQuery(m && m[1]));
    } else if ((m = /^#\/operator\/accounts\/([0-9a-f]{32})$/.exec(hash))) {
      setNav('accounts');
      cleanup = renderAccount(main, ctx, m[1]);
    } else if (hash === '#/operator/plans') {
      setNav('plans');
      cleanup = renderPlans(main, ctx);
    } else if ((m = /^#\/operator\/plans\/([a-z0-9][a-z0-9_-]{0,62})$/.exec(hash))) {
      setNav('plans');
      cleanup = renderPlan(main, ctx, m[1]);
    } else {
      setNav(null);
      cleanup = renderNotFound(main, ctx);
    }
  } else {
    setShell('account');
    ctx.home = { href: HOME.account, label: 'Go to the queues' };
    const hash = location.hash || '#/queues';
    let m;
    if ((m = /^#\/queues(?:\?page=([1-9][0-9]{0,8}))?$/.exec(hash)) || hash === '#/' || hash === '#') {
      setNav('queues');
      cleanup = renderQueues(main, ctx, m && m[1] ? Number(m[1]) : 1);
    } else if ((m = /^#\/queues\/([0-9a-f]{32})$/.exec(hash))) {
      setNav('queues');
      cleanup = renderQueue(main, ctx, m[1]);
    } else if ((m = /^#\/schedules(?:\?page=([1-9][0-9]{0,8}))?$/.exec(hash))) {
      setNav('schedules');
      cleanup = renderSchedules(main, ctx, m[1] ? Number(m[1]) : 1);
    } else if ((m = /^#\/events(?:\?page=([1-9][0-9]{0,8}))?$/.exec(hash))) {
      setNav('events');
      cleanup = renderEvents(main, ctx, m[1] ? Number(m[1]) : 1);
    } else if ((m = /^#\/topics(?:\?page=([1-9][0-9]{0,8}))?$/.exec(hash))) {
      setNav('topics');
      cleanup = renderTopics(main, ctx, m[1] ? Number(m[1]) : 1);
    } else if ((m = /^#\/topics\/([0-9a-f]{32})$/.exec(hash))) {
      setNav('topics');
      cleanup = renderTopic(main, ctx, m[1]);
    } else if (hash === '#/tokens') {
      setNav('tokens');
      cleanup = renderTokens(main, ctx);
    } else if ((m = /^#\/audit(?:\?(.*))?$/.exec(hash))) {
      setNav('audit');
      cleanup = renderAudit(main, ctx, auditQuery(m[1]));
    } else if (hash === '#/usage') {
      setNav('usage');
      cleanup = renderUsage(main, ctx);
    } else {
      setNav(null);
      cleanup = renderNotFound(main, ctx);
    }
  }
  current = { controller, cleanup };
}

document.getElementById('sign-out').addEventListener('click', () => signOut({ kind: 'success', text: 'You are signed out.' }));
document.getElementById('skip-link').addEventListener('click', (e) => {
  e.preventDefault();
  main.focus();
});
window.addEventListener('hashchange', () => {
  route();
  // Move focus to the new page (its heading when shown at once), as a screen reader user expects.
  if (!main.contains(document.activeElement)) {
    const heading = main.querySelector('h1');
    if (heading && heading.offsetParent !== null) {
      heading.setAttribute('tabindex', '-1');
      heading.focus({ preventScroll: true });
    } else {
      main.focus({ preventScroll: true });
    }
  }
  window.scrollTo(0, 0);
});
window.addEventListener('unhandledrejection', (e) => {
  // Every call site handles its errors; this is a last resort that keeps failures visible, not silent.
  e.preventDefault();
  toast(describe(e.reason), 'error');
});

route();
