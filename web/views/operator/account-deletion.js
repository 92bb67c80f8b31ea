// The operator's account page's "Danger zone" card: delete the account (the operator types its name to
// confirm), then the deletion followed live: how many of its queues and messages went and how many are
// left, read again every second or so until the background task is done with it.

import { h, notice, num, badge, busy, date, confirmDialog } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';

/** How often a deletion under way is read again (ms). */
const FOLLOW_MS = 1500;

/** The account is deleted or being deleted: it can no longer be suspended, resumed or given a token. */
export function isDeleted(account) {
  return account.status === 'deleting' || account.status === 'deleted';
}

/**
 * The card. show(account) draws it for the account as it now is, and follows a deletion under way
 * (the poll stops with the page, or once the account is deleted). `onStatus(status)` runs when a
 * deletion moved the account to another status than the one last shown (deleting, deleted).
 */
export function createAccountDeletion({ api, ctx, accountId, onStatus }) {
  let account = null;
  let poller = null;
  let shownStatus = null; // the deletion's status the headline says

  const deleteBtn = h('button', { type: 'button', class: 'btn btn-danger' }, 'Delete account…');
  const msg = notice();
  const start = h('div', { class: 'stack' },
    h('p', { class: 'small' }, 'Deleting the account removes its tokens at once, and every node refuses its requests within about a '
      + 'second; a background task then deletes its queues and every message in them. The account stays listed, marked deleted. '
      + 'This cannot be undone.'),
    h('div', null, deleteBtn));
  const headline = h('p', { role: 'status', class: 'deletion-headline' });
  const bar = h('progress', { max: '1', value: '0', 'aria-label': 'Messages deleted', hidden: true });
  const counts = h('dl', { class: 'props' });
  const progress = h('div', { class: 'stack', hidden: true }, headline, bar, counts);
  const el = h('section', { class: 'card card-danger', 'aria-labelledby': 'account-danger-title' },
    h('h2', { id: 'account-danger-title' }, 'Danger zone'),
    start, progress, msg.el);

  function showDeletion(d) {
    start.hidden = true;
    progress.hidden = false;
    const done = d.status === 'deleted';
    if (shownStatus !== d.status) {
      // A live region: it changes with the status only, not with every count.
      shownStatus = d.status;
      headline.replaceChildren(done ? badge('Deleted', 'neutral') : badge('Deleting', 'danger'), ' ',
        done ? 'Every queue and message of the account is deleted.'
          : 'Its tokens are gone and its requests refused; its queues and their messages are being deleted.');
    }
    bar.hidden = false;
    bar.max = Math.max(1, d.deleted_messages + d.remaining_messages);
    bar.value = done ? bar.max : d.deleted_messages;
    const pair = (key, term, value) => [h('dt', null, term), h('dd', { dataset: { deletion: key } }, value)];
    counts.replaceChildren(
      ...pair('deleted_queues', 'Queues deleted', num(d.deleted_queues)),
      ...pair('remaining_queues', 'Queues remaining', num(d.remaining_queues)),
      ...pair('deleted_messages', 'Messages deleted', num(d.deleted_messages)),
      ...pair('remaining_messages', 'Messages remaining', num(d.remaining_messages)),
      ...pair('started_on', 'Started', d.started_on ? date(d.started_on) : h('span', { class: 'muted' }, '—')),
      ...pair('finished_on', 'Finished', d.finished_on ? date(d.finished_on) : h('span', { class: 'muted' }, 'Not yet')));
  }

  /** Reads the deletion now and every FOLLOW_MS (the page's poll: it stops when the page goes) until it is done. */
  function follow() {
    if (poller) return;
    const mine = ctx.poll(FOLLOW_MS, async () => {
      let d;
      try {
        d = await api.getDeletion(accountId);
      } catch (err) {
        if (ctx.signal.aborted) return;
        if (err.kind === 'network' || err.kind === 'timeout') throw err; // the connection banner; tried again
        msg.show(describe(err));
        if (err.kind === 'not_found') stop(mine);
        return;
      }
      if (ctx.signal.aborted || poller !== mine) return;
      msg.clear();
      const was = shownStatus;
      showDeletion(d);
      if (d.status === 'deleted') {
        stop(mine);
        if (was === 'deleting') ctx.toast(`Account ${account.name} deleted: every queue and message of it is gone.`);
      }
      moved(d.status);
    });
    poller = mine;
  }

  /** The account's status as the deletion says it now is; the page is told of a change. */
  function moved(status) {
    if (status === account.status) return;
    account = { ...account, status };
    onStatus(status);
  }

  function stop(which) {
    // Not awaited: this runs inside the poll, and stop() resolves once the poll is over.
    which.stop();
    if (poller === which) poller = null;
  }

  deleteBtn.addEventListener('click', async () => {
    msg.clear();
    const { name } = account;
    const ok = await confirmDialog({
      title: `Delete “${name}”?`,
      message: 'Its tokens are removed at once and its requests refused; then its queues and every message in them are '
        + 'deleted. Nothing of its data can be recovered.',
      confirmLabel: 'Delete account',
      typeToConfirm: { text: name, label: 'Account name to confirm' },
    });
    if (!ok || ctx.signal.aborted) return;
    try {
      const d = await busy(deleteBtn, 'Deleting…', () => api.deleteAccount(accountId));
      if (ctx.signal.aborted) return;
      showDeletion(d);
      ctx.toast(`Deleting account ${name}.`);
      follow();
      moved(d.status);
    } catch (err) {
      if (!ctx.signal.aborted) msg.show(describe(err));
    }
  });

  return {
    el,
    show(next) {
      account = next;
      if (!isDeleted(account)) {
        start.hidden = false;
        progress.hidden = true;
        return;
      }
      start.hidden = true;
      if (shownStatus === null) {
        progress.hidden = false;
        headline.replaceChildren(h('span', { class: 'muted' }, 'Reading how far the deletion went…'));
      }
      // A deletion under way is followed; one done before is read once (the poll stops at "deleted").
      if (shownStatus !== 'deleted') follow();
    },
  };
}
