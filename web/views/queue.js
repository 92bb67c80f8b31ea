// One queue: live counts and activity chart, settings (edit, pause/resume), its consumers (up to 8; each
// one's own counts, a webhook's endpoint health, test send and delivery attempts), test messages, peek,
// purge, delete, flow control per key; a dead-letter queue shows where its messages came from.
// The parts live in views/queue/; this page loads the queue, polls its stats and hands each part
// what it needs.

import { h } from '../lib/dom.js';
import { describe } from '../lib/api.js';
import { createHeader } from './queue/header.js';
import { createTiles, deadLetterResolver } from './queue/tiles.js';
import { createActivity } from './queue/activity.js';
import { createMessages } from './queue/messages.js';
import { createRedrive } from './queue/redrive.js';
import { createConsumers } from './queue/consumers.js';
import { createAttempts } from './queue/attempts.js';
import { createSettings } from './queue/settings.js';
import { createFlow } from './queue/flow.js';
import { hasLimits } from './queue/flow-words.js';

export { forgetHistory } from './queue/activity.js';

const POLL_MS = 3000;

export function renderQueue(root, ctx, queueId) {
  const { api } = ctx;
  let stats = null;
  // Until the first load, there is nothing to poll; the parts may still ask.
  let poller = { now() {}, async stop() {}, resume() {} };
  // Stopping it stops the flow keys' and the attempts' reads too, and waits for those in flight (`flow`
  // and `attempts` are made below).
  const polling = {
    now: () => poller.now(),
    stop: async () => {
      const partsIdle = Promise.all([flow.stop(), attempts.stop()]);
      await poller.stop();
      await partsIdle;
    },
    resume: () => {
      flow.resume();
      attempts.resume();
      poller.resume();
    },
  };

  const header = createHeader({
    api, ctx, queueId,
    backlog: () => (stats ? stats.backlog_count : null),
    onChange: showQueue,
    onPurged: () => {
      messages.clear();
      polling.now();
    },
    onDeleted: () => activity.forget(),
    polling,
  });
  const tiles = createTiles();
  const activity = createActivity({ queueId });
  const redrive = createRedrive({ api, ctx, queueId, refresh: polling.now, onMoved: () => messages.clear() });
  const messages = createMessages({ api, ctx, queueId, refresh: polling.now, redrive });
  const flow = createFlow({ api, ctx, queueId, refresh: polling.now });
  const attempts = createAttempts({ api, ctx, queueId, onHealth: (id, health) => consumers.setHealth(id, health) });
  // The parts about "the consumer" follow the queue's first (the flow keys are its) and the attempt log the
  // webhook consumer picked; the flow tile shows while any consumer sets limits.
  const consumers = createConsumers({
    api, ctx, queueId, refresh: polling.now, polling,
    onChange: (all) => {
      tiles.setFlowLimits(all.some((c) => hasLimits(c.settings && c.settings.flow_control)));
      flow.setConsumer(all[0] || null, all.length);
      attempts.setConsumers(all);
    },
    onTested: (id) => {
      attempts.choose(id); // the log shows the attempt just made
      attempts.refresh();
    },
  });
  const settings = createSettings({ api, ctx, queueId, onSaved: showQueue });
  const resolveDeadLetter = deadLetterResolver(api);

  function showQueue(queue) {
    header.show(queue);
    settings.show(queue);
  }

  /** Resolves once the parts that read more on new stats (the flow keys, the attempts) have. */
  function showStats(s) {
    stats = s;
    tiles.update(s);
    activity.update(s);
    redrive.update(s);
    consumers.update(s);
    return Promise.all([flow.update(s), attempts.update()]);
  }

  const body = h('div', { class: 'queue-body', hidden: true },
    header.els,
    tiles.els,
    activity.el,
    h('div', { class: 'columns' },
      h('div', { class: 'column' }, redrive.el, messages.el),
      h('div', { class: 'column' }, consumers.el, settings.el)),
    attempts.el,
    flow.el);
  const loading = h('p', { class: 'muted loading' }, 'Loading the queue…');
  const page = h('section', { class: 'page' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/queues' }, 'Queues'), h('span', { 'aria-hidden': 'true' }, '/'), header.crumb),
    loading, body);
  root.append(page);

  // ---- load, then poll ----
  (async () => {
    try {
      const [q, s] = await Promise.all([api.getQueue(queueId), api.queueStats(queueId)]);
      if (ctx.signal.aborted) return;
      loading.remove();
      body.hidden = false;
      showQueue(q);
      consumers.show(q.consumers || []);
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
          // Awaited: a poll ends with all it asked answered (a queue is deleted only once none is pending).
          await showStats(next);
        } catch (err) {
          activity.stale();
          if (err.kind === 'not_found') {
            // Not awaited: stop() waits for the poll in flight, which is this one.
            poller.stop();
            header.message.show('This queue no longer exists. It was deleted, perhaps from another window.');
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
      page.append(h('div', { class: 'card' },
        h('h1', null, err.kind === 'not_found' ? 'Queue not found' : 'Cannot show this queue'),
        h('p', { role: 'alert' }, text),
        h('p', null, h('a', { href: '#/queues' }, 'Back to all queues'))));
    }
  })();

  return () => activity.destroy();
}
