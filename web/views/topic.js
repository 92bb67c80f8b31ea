// One topic (#/topics/{id}): its name, id and creation, delete; its bindings and the form that binds a
// queue (views/topic/bindings.js); "Try a routing key" and "Publish" (views/topic/routing.js). The topic
// is read again every few seconds, so bindings made or removed elsewhere (a queue deleted) show.

import { h, notice, busy, date, confirmDialog } from '../lib/dom.js';
import { describe } from '../lib/api.js';
import { createBindings } from './topic/bindings.js';
import { createTryRoute, createPublish } from './topic/routing.js';
import { deleteTopicQuestion } from './topic/words.js';

const REFRESH_MS = 5000;

export function renderTopic(root, ctx, topicId) {
  ctx.setTitle('Topic');
  const { api } = ctx;
  let topic = null;
  // Until the first read, there is nothing to poll; the parts may still ask.
  let poller = { now() {}, async stop() {}, resume() {} };

  const title = h('h1', { class: 'queue-title' }, 'Topic');
  const meta = h('p', { class: 'muted meta' });
  const crumb = h('span', { 'aria-current': 'page' }, '…');
  const deleteBtn = h('button', { type: 'button', class: 'btn btn-danger-outline' }, 'Delete…');
  const message = notice();
  const bindings = createBindings({ ctx, topicId, refresh: () => poller.now() });

  function show(next) {
    topic = next;
    title.textContent = topic.name;
    crumb.textContent = topic.name;
    ctx.setTitle(topic.name);
    meta.replaceChildren('ID ', h('code', null, topic.id), ` · created ${date(topic.created_at)}`);
    bindings.show(topic);
  }

  deleteBtn.addEventListener('click', async () => {
    message.clear();
    if (!(await confirmDialog(deleteTopicQuestion(topic)))) return;
    await poller.stop(); // no poll may ask for the topic while (or after) it goes
    try {
      await busy(deleteBtn, 'Deleting…', () => api.deleteTopic(topicId));
      if (ctx.signal.aborted) return;
      ctx.toast(`Topic ${topic.name} deleted.`);
      ctx.navigate('#/topics');
    } catch (err) {
      if (ctx.signal.aborted) return;
      message.show(describe(err));
      poller.resume();
    }
  });

  const body = h('div', { class: 'queue-body', hidden: true },
    h('div', { class: 'page-head' },
      h('div', { class: 'page-head-main' }, h('div', { class: 'title-row' }, title), meta),
      h('div', { class: 'actions' }, deleteBtn)),
    message.el,
    bindings.els,
    h('div', { class: 'columns' },
      h('div', { class: 'column' }, createTryRoute({ ctx, topicId })),
      h('div', { class: 'column' }, createPublish({ ctx, topicId }))));
  const loading = h('p', { class: 'muted loading' }, 'Loading the topic…');
  const page = h('section', { class: 'page' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/topics' }, 'Topics'), h('span', { 'aria-hidden': 'true' }, '/'), crumb),
    loading, body);
  root.append(page);

  // ---- load, then poll ----
  (async () => {
    try {
      const first = await api.getTopic(topicId);
      if (ctx.signal.aborted) return;
      loading.remove();
      body.hidden = false;
      show(first);
      let fresh = true;
      poller = ctx.poll(REFRESH_MS, async () => {
        if (fresh) {
          fresh = false; // just read
          return;
        }
        try {
          const next = await api.getTopic(topicId);
          if (!ctx.signal.aborted) show(next);
        } catch (err) {
          if (err.kind !== 'not_found') throw err;
          // Not awaited: stop() waits for the poll in flight, which is this one.
          poller.stop();
          message.show('This topic no longer exists. It was deleted, perhaps from another window.');
        }
      });
    } catch (err) {
      if (ctx.signal.aborted) return;
      loading.remove();
      const text = err.kind === 'not_found' ? 'There is no topic with this ID in your account. It may have been deleted.' : describe(err);
      page.append(h('div', { class: 'card' },
        h('h1', null, err.kind === 'not_found' ? 'Topic not found' : 'Cannot show this topic'),
        h('p', { role: 'alert' }, text),
        h('p', null, h('a', { href: '#/topics' }, 'Back to all topics'))));
    }
  })();

  return null;
}
