// One queue: live counts and activity chart, settings (edit, pause/resume), its consumer, test
// messages, peek, purge, delete; a dead-letter queue shows where its messages came from.

import { h, notice, num, badge, busy, date, confirmDialog } from '../lib/dom.js';
import { describe } from '../lib/api.js';
import { createTiles, deadLetterResolver } from './queue/tiles.js';
import { createActivity, forgetQueue } from './queue/activity.js';
import { createMessages } from './queue/messages.js';
import { createConsumer } from './queue/consumer.js';
import { createSettings } from './queue/settings.js';

export { forgetHistory } from './queue/activity.js';

const POLL_MS = 3000;

export function renderQueue(root, ctx, queueId) {
  const { api } = ctx;
  let queue = null;
  let stats = null;

  // ---- header ----
  const title = h('h1', { class: 'queue-title' }, 'Queue');
  const stateBadge = h('span');
  const meta = h('p', { class: 'muted meta' });
  const pauseBtn = h('button', { type: 'button', class: 'btn' }, 'Pause delivery');
  const purgeBtn = h('button', { type: 'button', class: 'btn' }, 'Purge…');
  const deleteBtn = h('button', { type: 'button', class: 'btn btn-danger-outline' }, 'Delete…');
  const headMsg = notice();
  const crumbName = h('span', { 'aria-current': 'page' }, '…');

  // ---- stats ----
  const tiles = createTiles();
  const activity = createActivity({ queueId });
  const resolveDeadLetter = deadLetterResolver(api);

  // ---- layout ----
  const body = h('div', { class: 'queue-body', hidden: true });
  const loading = h('p', { class: 'muted loading' }, 'Loading the queue…');
  const messages = createMessages({ api, ctx, queueId, refresh: () => poller.now() });
  const consumer = createConsumer({ api, ctx, queueId, refresh: () => poller.now() });
  const settings = createSettings({
    api, ctx, queueId,
    onSaved: (q) => {
      queue = q;
      renderHeader();
      settings.show(queue);
    },
  });

  body.append(
    h('div', { class: 'page-head' },
      h('div', { class: 'page-head-main' }, h('div', { class: 'title-row' }, title, stateBadge), meta),
      h('div', { class: 'actions' }, pauseBtn, purgeBtn, deleteBtn)),
    headMsg.el,
    ...tiles.els,
    activity.el,
    h('div', { class: 'columns' },
      h('div', { class: 'column' }, messages.el),
      h('div', { class: 'column' }, consumer.el, settings.el)));

  root.append(h('section', { class: 'page' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/queues' }, 'Queues'), h('span', { 'aria-hidden': 'true' }, '/'), crumbName),
    loading, body));

  // ---- header behaviour ----
  function renderHeader() {
    title.textContent = queue.queue_name;
    crumbName.textContent = queue.queue_name;
    ctx.setTitle(queue.queue_name);
    const paused = queue.settings.delivery_paused;
    stateBadge.replaceChildren(paused ? badge('Delivery paused', 'warning') : badge('Delivering', 'success'));
    pauseBtn.textContent = paused ? 'Resume delivery' : 'Pause delivery';
    meta.replaceChildren('ID ', h('code', null, queue.queue_id), ` · created ${date(queue.created_on)}`);
  }

  pauseBtn.addEventListener('click', async () => {
    headMsg.clear();
    const pause = !queue.settings.delivery_paused;
    try {
      queue = await busy(pauseBtn, pause ? 'Pausing…' : 'Resuming…', () => api.updateQueue(queueId, { delivery_paused: pause }));
      renderHeader();
      settings.show(queue);
      ctx.toast(pause ? 'Delivery paused. Messages can still be sent; consumers get nothing until you resume.' : 'Delivery resumed.');
    } catch (err) {
      if (!ctx.signal.aborted) headMsg.show(describe(err));
    }
  });

  purgeBtn.addEventListener('click', async () => {
    headMsg.clear();
    const n = stats ? stats.backlog_count : null;
    const ok = await confirmDialog({
      title: `Purge ${queue.queue_name}?`,
      message: `Every message in the queue${n !== null ? ` (${num(n)} now)` : ''} is deleted permanently, including delayed and in-flight ones. This cannot be undone.`,
      confirmLabel: 'Purge messages',
    });
    if (!ok) return;
    try {
      await busy(purgeBtn, 'Purging…', () => api.purgeQueue(queueId));
      ctx.toast(`All messages in ${queue.queue_name} were deleted.`);
      messages.clear();
      poller.now();
    } catch (err) {
      if (!ctx.signal.aborted) headMsg.show(describe(err));
    }
  });

  deleteBtn.addEventListener('click', async () => {
    headMsg.clear();
    const ok = await confirmDialog({
      title: `Delete ${queue.queue_name}?`,
      message: 'The queue, its consumer and all its messages are deleted. This cannot be undone.',
      confirmLabel: 'Delete queue',
    });
    if (!ok) return;
    await poller.stop(); // no poll may ask for the queue while (or after) it goes
    try {
      await busy(deleteBtn, 'Deleting…', () => api.deleteQueue(queueId));
      forgetQueue(queueId);
      ctx.toast(`Queue ${queue.queue_name} deleted.`);
      ctx.navigate('#/queues');
    } catch (err) {
      if (ctx.signal.aborted) return;
      headMsg.show(describe(err));
      poller.resume();
    }
  });

  function showStats(s) {
    stats = s;
    tiles.update(s);
    activity.update(s);
  }

  // ---- load, then poll ----
  let poller = { now() {}, async stop() {}, resume() {} };
  (async () => {
    try {
      const [q, s] = await Promise.all([api.getQueue(queueId), api.queueStats(queueId)]);
      if (ctx.signal.aborted) return;
      queue = q;
      loading.remove();
      body.hidden = false;
      renderHeader();
      settings.show(queue);
      consumer.show((q.consumers && q.consumers[0]) || null);
      await resolveDeadLetter(s);
      showStats(s);
      let first = true;
      poller = ctx.poll(POLL_MS, async () => {
        if (first) {
          first = false; // just loaded
          return;
        }
        try {
          const next = await api.queueStats(queueId);
          if (ctx.signal.aborted) return;
          await resolveDeadLetter(next);
          showStats(next);
        } catch (err) {
          activity.stale();
          if (err.kind === 'not_found') {
            await poller.stop();
            headMsg.show('This queue no longer exists. It was deleted, perhaps from another window.');
            return;
          }
          throw err;
        }
      });
    } catch (err) {
      if (ctx.signal.aborted) return;
      loading.remove();
      ctx.setTitle('Queue');
      const text = err.kind === 'not_found' ? 'There is no queue with this ID in your account. It may have been deleted.' : describe(err);
      root.querySelector('.page').append(h('div', { class: 'card' },
        h('h1', null, err.kind === 'not_found' ? 'Queue not found' : 'Cannot show this queue'),
        h('p', { role: 'alert' }, text),
        h('p', null, h('a', { href: '#/queues' }, 'Back to all queues'))));
    }
  })();

  return () => activity.destroy();
}
