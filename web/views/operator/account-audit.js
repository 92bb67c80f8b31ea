// The operator's account page's "Audit log" card: the account's latest entries (who changed what in
// its configuration, its users' tokens and the operators), 20 at a time with older pages, from
// GET /admin/v1/audit_logs?account_id=…. The entries are drawn as on the tenant's own audit page
// (views/audit/entries.js).

import { h } from '../../lib/dom.js';
import { createAuditList } from '../audit/entries.js';

/** The card; `load()` reads the page it shows (again). */
export function createAccountAudit({ api, ctx, accountId }) {
  const list = createAuditList({
    ctx,
    label: 'Audit log entries',
    pagerLabel: 'Audit log pages',
    read: (page, perPage) => api.listAuditLogs(accountId, { page, perPage }),
    empty: {
      title: 'No entries',
      text: 'Nothing in this account\'s configuration has been changed in the last 90 days.',
      filtered: '',
    },
  });

  const el = h('section', { class: 'card card-flush', 'aria-labelledby': 'account-audit-title' },
    h('div', { class: 'card-head' },
      h('h2', { id: 'account-audit-title' }, 'Audit log'),
      h('div', { class: 'card-head-side' }, list.count, list.refreshBtn)),
    h('p', { class: 'card-intro muted small' },
      'Who changed what in this account, newest first: its queues, consumers, tokens, redrives and schedules (by its tokens), and its '
      + 'name, plan, standing and deletion (by operators). Messages are not recorded. Entries are kept 90 days.'),
    list.els);

  return { el, load: () => list.load() };
}
