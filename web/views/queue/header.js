// The queue page's header: name, delivery state and id, the breadcrumb's last part, and the
// queue-wide actions (pause or resume delivery, purge, delete) with their error notice.

import { h, notice, num, badge, busy, date, confirmDialog } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';

/**
 * `backlog()` is the latest backlog count (or null) for the purge question; `onChange(queue)` gets the
 * queue after a pause or resume; `onPurged()` follows a purge and `onDeleted()` a delete; `polling` is the
 * page's poller, stopped while the queue is being deleted.
 */
export function createHeader({ api, ctx, queueId, backlog, onChange, onPurged, onDeleted, polling }) {
  let queue = null;
  const title = h('h1', { class: 'queue-title' }, 'Queue');
  const stateBadge = h('span');
  const meta = h('p', { class: 'muted meta' });
  const pauseBtn = h('button', { type: 'button', class: 'btn' }, 'Pause delivery');
  const purgeBtn = h('button', { type: 'button', class: 'btn' }, 'Purge…');
  const deleteBtn = h('button', { type: 'button', class: 'btn btn-danger-outline' }, 'Delete…');
  const message = notice();
  const crumb = h('span', { 'aria-current': 'page' }, '…');

  const els = [
    h('div', { class: 'page-head' },
      h('div', { class: 'page-head-main' }, h('div', { class: 'title-row' }, title, stateBadge), meta),
      h('div', { class: 'actions' }, pauseBtn, purgeBtn, deleteBtn)),
    message.el,
  ];

  function show(next) {
    queue = next;
    title.textContent = queue.queue_name;
    crumb.textContent = queue.queue_name;
    ctx.setTitle(queue.queue_name);
    const paused = queue.settings.delivery_paused;
    stateBadge.replaceChildren(paused ? badge('Delivery paused', 'warning') : badge('Delivering', 'success'));
    pauseBtn.textContent = paused ? 'Resume delivery' : 'Pause delivery';
    meta.replaceChildren('ID ', h('code', null, queue.queue_id), ` · created ${date(queue.created_on)}`);
  }

  pauseBtn.addEventListener('click', async () => {
    message.clear();
    const pause = !queue.settings.delivery_paused;
    try {
      const updated = await busy(pauseBtn, pause ? 'Pausing…' : 'Resuming…', () => api.updateQueue(queueId, { delivery_paused: pause }));
      onChange(updated);
      ctx.toast(pause ? 'Delivery paused. Messages can still be sent; consumers get nothing until you resume.' : 'Delivery resumed.');
    } catch (err) {
      if (!ctx.signal.aborted) message.show(describe(err));
    }
  });

  purgeBtn.addEventListener('click', async () => {
    message.clear();
    const n = backlog();
    const ok = await confirmDialog({
      title: `Purge ${queue.queue_name}?`,
      message: `Every message in the queue${n !== null ? ` (${num(n)} now)` : ''} is deleted permanently, including delayed and in-flight ones. This cannot be undone.`,
      confirmLabel: 'Purge messages',
    });
    if (!ok) return;
    try {
      await busy(purgeBtn, 'Purging…', () => api.purgeQueue(queueId));
      ctx.toast(`All messages in ${queue.queue_name} were deleted.`);
      onPurged();
    } catch (err) {
      if (!ctx.signal.aborted) message.show(describe(err));
    }
  });

  deleteBtn.addEventListener('click', async () => {
    message.clear();
    const ok = await confirmDialog({
      title: `Delete ${queue.queue_name}?`,
      message: 'The queue, its consumers and all its messages are deleted. This cannot be undone.',
      confirmLabel: 'Delete queue',
    });
    if (!ok) return;
    await polling.stop(); // no poll may ask for the queue while (or after) it goes
    try {
      await busy(deleteBtn, 'Deleting…', () => api.deleteQueue(queueId));
      onDeleted();
      ctx.toast(`Queue ${queue.queue_name} deleted.`);
      ctx.navigate('#/queues');
    } catch (err) {
      if (ctx.signal.aborted) return;
      message.show(describe(err));
      polling.resume();
    }
  });

  return { els, crumb, message, show };
}
