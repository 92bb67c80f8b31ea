// skiplock dashboard: session, routing and the page shell. Views live in views/*.js.
// The API token is kept in sessionStorage only (this tab, until it closes or the user signs out);
// it never goes into a URL, a cookie or the console.

import { createClient, describe, ApiError } from './lib/api.js';
import { toast } from './lib/dom.js';
import { renderSignIn } from './views/signin.js';
import { renderQueues } from './views/queues.js';
import { renderQueue, forgetHistory } from './views/queue.js';
import { renderTokens } from './views/tokens.js';
import { renderNotFound } from './views/notfound.js';

const SESSION_KEY = 'skiplock.session';

const main = document.getElementById('main');
const topbar = document.getElementById('topbar');
const banner = document.getElementById('banner');
const accountLabel = document.getElementById('account-id');

let session = loadSession();
let api = session ? createClient(session, expired) : null;
let current = null; // {controller, cleanup}
let signInMessage = null;

function loadSession() {
  try {
    const raw = sessionStorage.getItem(SESSION_KEY);
    if (!raw) return null;
    const s = JSON.parse(raw);
    return s && typeof s.accountId === 'string' && typeof s.token === 'string' ? s : null;
  } catch {
    return null;
  }
}

function signIn(next) {
  session = next;
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(next));
  api = createClient(session, expired);
  signInMessage = null;
  if (!location.hash || location.hash === '#/' || location.hash === '#') location.hash = '#/queues';
  else route();
}

function signOut(message) {
  sessionStorage.removeItem(SESSION_KEY);
  session = null;
  api = null;
  forgetHistory();
  signInMessage = message || null;
  setBanner(null);
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
          } else if (!(err instanceof ApiError && err.kind === 'unauthorized')) {
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
  } else {
    topbar.hidden = false;
    const shortId = `${session.accountId.slice(0, 8)}…`;
    accountLabel.textContent = session.accountName ? `${session.accountName} · ${shortId}` : `Account ${shortId}`;
    accountLabel.title = `Account ID ${session.accountId}`;
    const hash = location.hash || '#/queues';
    let m;
    if ((m = /^#\/queues(?:\?page=([1-9][0-9]{0,8}))?$/.exec(hash)) || hash === '#/' || hash === '#') {
      setNav('queues');
      cleanup = renderQueues(main, ctx, m && m[1] ? Number(m[1]) : 1);
    } else if ((m = /^#\/queues\/([0-9a-f]{32})$/.exec(hash))) {
      setNav('queues');
      cleanup = renderQueue(main, ctx, m[1]);
    } else if (hash === '#/tokens') {
      setNav('tokens');
      cleanup = renderTokens(main, ctx);
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
