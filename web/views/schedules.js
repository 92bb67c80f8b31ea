// The account's schedules (#/schedules, a skiplock extension): a message published to one of its queues
// on a cron expression in a time zone, or every so many seconds. A form to create one (the queue picked
// from the account's queues), and the list, oldest first, a page at a time (the page in the address),
// refreshed every few seconds: each schedule's queue, cadence, next and last run, runs, state and last
// error, with pause or resume, and delete.

import { h, field, id, notice, num, badge, duration } from '../lib/dom.js';
import { createPagedTable, livePages } from '../lib/paged-table.js';
import { createQueueNames, createQueueSelect, fillQueueSelect, queueLink } from '../lib/queue-names.js';
import { invalid, onCreate } from '../lib/create-form.js';
import { contentTypeSelect, readBody } from '../lib/message-body.js';
import { numberInput, readNumber } from './queue/inputs.js';

/** Schedules on a page of the list. */
export const PER_PAGE = 50;
/** The longest interval the server takes: 366 days. */
const MAX_INTERVAL = 31622400;
const REFRESH_MS = 5000;

const whenFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** A time as this browser shows it; the server's RFC 3339 text as is when it is not one. */
function when(value) {
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? String(value) : whenFmt.format(d);
}

/** "in 5 min" or "5 min ago", from now. */
function relative(value, now) {
  const ms = new Date(value).getTime() - now;
  if (Number.isNaN(ms)) return '';
  if (Math.abs(ms) < 1000) return 'now';
  return ms > 0 ? `in ${duration(ms / 1000)}` : `${duration(-ms / 1000)} ago`;
}

/** The browser's own time zone (the form's default), or UTC. */
function browserZone() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  } catch {
    return 'UTC';
  }
}

/** The time zones the browser knows, for the time zone field's suggestions (UTC first). */
function knownZones() {
  try {
    const zones = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
    return ['UTC', ...zones.filter((z) => z !== 'UTC')];
  } catch {
    return ['UTC'];
  }
}

/** A schedule's cadence in words: the cron expression and its zone, or "Every 1 h". */
export function cadenceText(s) {
  return s.cron ? `${s.cron} (${s.time_zone})` : `Every ${duration(s.interval_seconds)}`;
}

/** `page` is the page of the list to show first, from 1 (the address's `?page=`). */
export function renderSchedules(root, ctx, page = 1) {
  ctx.setTitle('Schedules');
  const { api } = ctx;

  // The account's queues, id → name: the form's choices and the list's queue names.
  let queues = new Map();

  // ---- create form ----
  const queueSelect = createQueueSelect();
  const radioName = id('cadence');
  const byCron = h('input', { type: 'radio', name: radioName, value: 'cron', checked: true });
  const byInterval = h('input', { type: 'radio', name: radioName, value: 'interval' });
  const cadenceSet = h('fieldset', { class: 'radios' }, h('legend', null, 'Runs'),
    h('label', { class: 'radio' }, byCron,
      h('span', null, h('strong', null, 'On a cron expression'), h('span', { class: 'muted' }, ' — at set times, in a time zone'))),
    h('label', { class: 'radio' }, byInterval,
      h('span', null, h('strong', null, 'Every so many seconds'), h('span', { class: 'muted' }, ' — counted from when it is created'))));
  const cron = h('input', { type: 'text', class: 'mono', spellcheck: 'false', autocomplete: 'off', placeholder: '0 3 * * *' });
  const zoneListId = id('zones');
  const zone = h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off', list: zoneListId, value: browserZone() });
  const zoneList = h('datalist', { id: zoneListId }, knownZones().map((z) => h('option', { value: z })));
  const cronFields = h('div', { class: 'form-grid' },
    field('Cron expression', cron, { hint: 'Minute, hour, day of month, month, day of week (0 3 * * 1-5: 03:00 on weekdays), or @hourly, @daily, @weekly, @monthly, @yearly.' }),
    field('Time zone', zone, { hint: 'An IANA name such as Europe/Berlin or UTC. Daylight saving is followed.' }),
    zoneList);
  const interval = numberInput({ min: '1', max: String(MAX_INTERVAL), placeholder: '3600' });
  const intervalFields = h('div', { class: 'form-grid', hidden: true },
    field('Interval (seconds)', interval, { hint: `1 to ${num(MAX_INTERVAL)} (366 days).` }));
  const body = h('textarea', { rows: '3', spellcheck: 'false', class: 'mono' });
  const contentType = contentTypeSelect(body, {
    order: ['json', 'text', 'bytes'],
    placeholders: { json: '{"report": "daily"}', text: 'Time to send the daily report', bytes: 'aGVsbG8=' },
  });
  const delay = numberInput({ min: '0', max: '86400', placeholder: 'queue default' });
  const keyTemplate = h('input', { type: 'text', class: 'mono', spellcheck: 'false', autocomplete: 'off', placeholder: 'schedule:{schedule_id}:{tick}' });
  const startPaused = h('input', { type: 'checkbox' });
  const createBtn = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create schedule');
  const createMsg = notice();
  const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': 'create-schedule-title' },
    h('h2', { id: 'create-schedule-title' }, 'Create a schedule'),
    h('div', { class: 'narrow' }, field('Queue', queueSelect, { hint: 'Each run publishes the message to this queue.' })),
    cadenceSet,
    cronFields,
    intervalFields,
    h('div', { class: 'form-grid' }, field('Content type', contentType)),
    field('Message body', body, { wide: true, hint: 'Published as it is at each run, as a message sent to the queue would be.' }),
    h('details', { class: 'more-settings' },
      h('summary', null, 'More options'),
      h('div', { class: 'form-grid' },
        field('Delay (seconds)', delay, { hint: 'Optional, 0 to 86,400: each message waits this long before delivery.' }),
        field('Idempotency key', keyTemplate, { hint: 'Optional; must contain {tick} (the run\'s time in Unix seconds); {schedule_id} is filled in too. A run fired twice is stored once.' })),
      h('label', { class: 'check schedule-paused' }, startPaused, h('span', null, 'Create it paused'))),
    h('div', { class: 'form-actions' }, createBtn),
    createMsg.el);

  const showCadence = () => {
    cronFields.hidden = !byCron.checked;
    intervalFields.hidden = !byInterval.checked;
  };
  byCron.addEventListener('change', showCadence);
  byInterval.addEventListener('change', showCadence);

  /** The inputs the server's 400 names, by the field its message starts with. */
  const FIELD_INPUTS = [
    ['queue_id', queueSelect], ['cron', cron], ['time_zone', zone], ['interval_seconds', interval],
    ['message.delay_seconds', delay], ['message.body', body], ['message', body], ['idempotency_key', keyTemplate],
  ];
  const allInputs = FIELD_INPUTS.map(([, input]) => input);

  /** The form's schedule, as the API takes it; throws an Error saying what to fix. */
  function chosen() {
    for (const input of allInputs) input.removeAttribute('aria-invalid');
    if (!queueSelect.value) throw invalid(queueSelect, queues.size ? 'Choose the queue the schedule publishes to.' : 'Create a queue first: a schedule publishes to one of your queues.');
    const schedule = { queue_id: queueSelect.value };
    if (byCron.checked) {
      const expression = cron.value.trim();
      if (!expression) throw invalid(cron, 'Give a cron expression, such as 0 3 * * * (every day at 03:00).');
      schedule.cron = expression;
      const tz = zone.value.trim();
      if (tz) schedule.time_zone = tz;
    } else {
      schedule.interval_seconds = readNumber(interval, 'The interval', 1, MAX_INTERVAL, { optional: false });
    }
    const type = contentType.value;
    let payload;
    try {
      payload = readBody(type, body.value);
    } catch (err) {
      throw invalid(body, err.message);
    }
    schedule.message = { body: payload, content_type: type };
    const seconds = readNumber(delay, 'The delay', 0, 86400);
    if (seconds !== undefined) schedule.message.delay_seconds = seconds;
    // Sent as typed: the server checks the keys it makes and says what is wrong.
    if (keyTemplate.value !== '') schedule.idempotency_key = keyTemplate.value;
    if (startPaused.checked) schedule.paused = true;
    return schedule;
  }

  onCreate(form, {
    ctx,
    msg: createMsg,
    button: createBtn,
    fields: FIELD_INPUTS,
    check: chosen,
    send: (schedule) => api.createSchedule(schedule),
    created: (made) => {
      const next = made.next_run_at ? ` Its first run is ${when(made.next_run_at)}.` : ' It is paused.';
      createMsg.show(`Schedule created on ${queues.get(made.queue_id) || 'the queue'}.${next}`, 'success');
      ctx.toast('Schedule created.');
      live.now();
    },
  });

  const queueNames = createQueueNames({
    ctx,
    onRead: (names) => {
      queues = names;
      fillQueueSelect(queueSelect, queues);
    },
    onError: (text) => createMsg.show(text),
  });

  // ---- list ----
  const listMsg = notice();
  const updated = h('span', { class: 'live', 'aria-hidden': 'true' });
  const list = createPagedTable({
    label: 'Schedules',
    columns: ['Queue', 'Cadence', 'Next run', 'Last run', 'Runs', 'State', 'Last error', 'Actions'],
    loadingText: 'Loading schedules…',
    empty: [h('p', { class: 'empty-title' }, 'No schedules yet'),
      h('p', { class: 'muted' }, 'Create one above: it publishes its message to the queue at each run.')],
    pagerLabel: 'Schedule pages',
  });

  function queueCell(s) {
    return h('td', { 'data-label': 'Queue', class: 'cell-name' }, queueLink(s.queue_id, queues.get(s.queue_id)));
  }

  function cadenceCell(s) {
    if (s.cron) {
      return h('td', { 'data-label': 'Cadence' }, h('code', null, s.cron), h('span', { class: 'sub' }, s.time_zone));
    }
    return h('td', { 'data-label': 'Cadence', title: `Every ${num(s.interval_seconds)} seconds` },
      `Every ${duration(s.interval_seconds)}`);
  }

  function timeCell(label, value, none, now, title = null) {
    if (!value) return h('td', { 'data-label': label }, h('span', { class: 'muted' }, none));
    return h('td', { 'data-label': label },
      h('time', { datetime: value, title: title || value }, when(value)),
      h('span', { class: 'sub' }, relative(value, now)));
  }

  function row(s, now) {
    const queueName = queues.get(s.queue_id) || 'its queue';
    const what = `${cadenceText(s)} on ${queueName}`;
    const toggle = h('button', { type: 'button', class: 'btn btn-sm', 'aria-label': `${s.paused ? 'Resume' : 'Pause'} the schedule ${what}` },
      s.paused ? 'Resume' : 'Pause');
    toggle.addEventListener('click', () => live.act(toggle, {
      label: s.paused ? 'Resuming…' : 'Pausing…',
      work: () => (s.paused ? api.resumeSchedule(s.schedule_id) : api.pauseSchedule(s.schedule_id)),
      done: s.paused ? 'Schedule resumed.' : 'Schedule paused.',
    }));
    const remove = h('button', { type: 'button', class: 'btn btn-danger-outline btn-sm', 'aria-label': `Delete the schedule ${what}` }, 'Delete…');
    remove.addEventListener('click', () => live.act(remove, {
      label: 'Deleting…',
      work: () => api.deleteSchedule(s.schedule_id),
      done: 'Schedule deleted.',
      confirm: {
        title: 'Delete this schedule?',
        message: `Nothing more is published ${s.cron ? `on ${s.cron} (${s.time_zone})` : `every ${duration(s.interval_seconds)}`} to ${queueName}. The messages it published stay in the queue.`,
        confirmLabel: 'Delete schedule',
      },
    }));
    const upcoming = (s.next_runs || []).map(when).join('\n');
    return h('tr', { dataset: { schedule: s.schedule_id } },
      queueCell(s),
      cadenceCell(s),
      timeCell('Next run', s.next_run_at, s.paused ? 'Paused' : '—', now, upcoming ? `Next runs:\n${upcoming}` : null),
      timeCell('Last run', s.last_run_at, 'Never', now),
      h('td', { class: 'num', 'data-label': 'Runs' }, num(s.runs)),
      h('td', { 'data-label': 'State' }, s.paused ? badge('Paused', 'warning') : badge('Active', 'success')),
      h('td', { 'data-label': 'Last error' }, s.last_error ? h('span', { class: 'schedule-error' }, s.last_error) : h('span', { class: 'muted' }, '—')),
      h('td', { class: 'actions-col' }, h('div', { class: 'row-actions' }, toggle, remove)));
  }

  const live = livePages({
    ctx,
    route: 'schedules',
    page,
    perPage: PER_PAGE,
    refreshMs: REFRESH_MS,
    list,
    msg: listMsg,
    updated,
    read: queueNames.naming((asked, perPage) => api.listSchedules(asked, perPage), (s) => [s.queue_id]),
    rows: ({ items }) => {
      const now = Date.now();
      return items.map((s) => row(s, now));
    },
    noun: ['schedule', 'schedules'],
  });

  root.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('div', null, h('h1', null, 'Schedules'),
        h('p', { class: 'muted' }, 'Messages published to your queues on a cron expression or every so many seconds. '
          + `Oldest first, ${PER_PAGE} to a page, refreshed every few seconds.`)),
      h('div', { class: 'page-head-side' }, updated)),
    h('div', { class: 'card' }, form),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-head' }, h('h2', null, 'All schedules'), list.count),
      listMsg.el, list.loading, h('div', { class: 'table-wrap' }, list.table), list.empty, list.pager)));

  return null;
}
