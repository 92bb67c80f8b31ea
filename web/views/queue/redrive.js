// The queue page's redrive card, on a dead-letter queue: its sources with counts, "Redrive all" (to
// each message's source or to a chosen queue) and the latest task's progress, followed live.

import { h, field, notice, num, badge, busy, confirmDialog } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';

const FOLLOW_MS = 1000;

/**
 * The redrive card (hidden until the queue has dead-letter sources); update() with each stats answer.
 * `onMoved()` runs when a task this page followed ends, since what was peeked may have moved.
 */
export function createRedrive({ api, ctx, queueId, refresh, onMoved }) {
  const sourcesList = h('ul', { class: 'plain-list', 'aria-label': 'Dead-letter sources' });
  const destination = h('select', null, h('option', { value: '' }, "Each message's source queue"));
  const allBtn = h('button', { type: 'button', class: 'btn btn-primary' }, 'Redrive all');
  const cancelBtn = h('button', { type: 'button', class: 'btn btn-danger-outline btn-sm', hidden: true }, 'Cancel redrive');
  const bar = h('progress', { max: '1', value: '0', 'aria-label': 'Redrive progress' });
  const progressText = h('p', { class: 'small' });
  const progress = h('div', { class: 'stack', role: 'status', 'aria-label': 'Redrive task', hidden: true }, progressText, bar, cancelBtn);
  const msg = notice();
  const el = h('section', { class: 'card', 'aria-labelledby': 'redrive-title', hidden: true },
    h('div', { class: 'card-head' }, h('h2', { id: 'redrive-title' }, 'Redrive')),
    h('p', { class: 'muted small' }, 'Move dead-lettered messages back, keeping their ids, bodies and timestamps; their delivery attempts start again.'),
    sourcesList,
    h('div', { class: 'form-grid' }, field('Destination', destination, { hint: 'Or select peeked messages below and redrive only those.' })),
    h('div', { class: 'form-actions' }, allBtn),
    msg.el, progress);

  let task = null;
  let following = null;
  let isDeadLetter = false;
  let names = [];

  function showTask(t) {
    task = t;
    progress.hidden = !t;
    if (!t) return;
    const where = t.destination_queue ? `to ${t.destination_queue}` : 'to their source queues';
    const label = { running: 'Redriving', completed: 'Redrive completed', cancelled: 'Redrive cancelled', failed: 'Redrive failed' }[t.status] || t.status;
    progressText.replaceChildren(badge(t.status, t.status === 'completed' ? 'success' : t.status === 'running' ? 'neutral' : 'warning'), ' ',
      `${label}: moved ${num(t.moved)} of ${num(t.total)} ${t.total === 1 ? 'message' : 'messages'} ${where}.`,
      t.error ? h('span', { class: 'hint' }, ` ${t.error}`) : '');
    bar.max = Math.max(1, t.total);
    bar.value = t.moved;
    cancelBtn.hidden = t.status !== 'running';
    allBtn.disabled = t.status === 'running';
  }

  async function follow(t) {
    showTask(t);
    if (following || t.status !== 'running') return;
    following = true;
    try {
      while (!ctx.signal.aborted && task && task.status === 'running') {
        await new Promise((resolve) => setTimeout(resolve, FOLLOW_MS));
        if (ctx.signal.aborted) return;
        showTask(await api.getRedrive(queueId, task.redrive_id));
      }
      refresh();
      if (onMoved) onMoved();
    } catch (err) {
      if (!ctx.signal.aborted) msg.show(describe(err));
    } finally {
      following = null;
    }
  }

  async function start(body, button) {
    msg.clear();
    try {
      const t = await busy(button, 'Starting…', () => api.startRedrive(queueId, body));
      await follow(t);
    } catch (err) {
      if (!ctx.signal.aborted) msg.show(err.name === 'ApiError' ? describe(err) : err.message);
    }
  }

  allBtn.addEventListener('click', async () => {
    const to = destination.value;
    const ok = await confirmDialog({
      title: 'Redrive every message?',
      message: to ? `Every message of this queue moves to ${to}.` : 'Every message of this queue returns to the queue it was dead-lettered from.',
      confirmLabel: 'Redrive',
      danger: false,
    });
    if (ok) await start(to ? { destination_queue: to } : {}, allBtn);
  });
  cancelBtn.addEventListener('click', async () => {
    if (!task) return;
    try {
      showTask(await busy(cancelBtn, 'Cancelling…', () => api.cancelRedrive(queueId, task.redrive_id)));
      refresh();
    } catch (err) {
      if (!ctx.signal.aborted) msg.show(describe(err));
    }
  });

  let loaded = false;
  function setNames(s, allNames) {
    const others = allNames.filter((n) => n !== s.queue_name);
    if (others.join('\n') === names.join('\n')) return;
    names = others;
    const chosen = destination.value;
    destination.replaceChildren(h('option', { value: '' }, "Each message's source queue"),
      ...others.map((n) => h('option', { value: n }, n)));
    destination.value = others.includes(chosen) ? chosen : '';
  }

  function update(s) {
    const sources = s.dead_letter_sources || [];
    isDeadLetter = sources.length > 0;
    el.hidden = !isDeadLetter;
    if (!isDeadLetter) return;
    sourcesList.replaceChildren(...sources.map((src) => h('li', null,
      src.queue_name ? h('a', { href: `#/queues/${src.queue_id}` }, src.queue_name) : h('span', { class: 'muted' }, 'a deleted queue'),
      ` · ${num(src.message_count)} ${src.message_count === 1 ? 'message' : 'messages'} here`)));
    if (!loaded) {
      loaded = true;
      // The destinations to choose from and the latest task; both are conveniences, so a failure is quiet.
      api.listQueues().then((all) => setNames(s, all.map((q) => q.queue_name).sort()), () => {});
      api.listRedrives(queueId).then((tasks) => tasks.length && follow(tasks[0]), () => {});
    }
  }

  return {
    el,
    update,
    isDeadLetter: () => isDeadLetter,
    /** Redrives the peeked messages with these refs, to the destination chosen above. */
    redriveRefs: (refs, button) => start({ ...(destination.value ? { destination_queue: destination.value } : {}), refs: refs.map((ref) => ({ ref })) }, button),
  };
}
