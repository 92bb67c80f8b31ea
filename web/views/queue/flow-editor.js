// The flow control card's form for one key, by name (it need not have messages): look it up, see what it
// holds back and why, set its own limits over the consumer's, pause or resume it, remove its own limits.

import { h, field, notice, num, badge, busy, date, confirmDialog } from '../../lib/dom.js';
import { describe } from '../../lib/api.js';
import { numberInput, readNumber } from './inputs.js';
import { FLOW_MAX, hasLimits, heldWords, limitPhrases } from './flow-words.js';

const LIMITS = [
  ['parallelism', 'Parallelism', `1 to ${num(FLOW_MAX.parallelism)} of its messages let go at once.`],
  ['rate', 'Rate', `1 to ${num(FLOW_MAX.rate)} of its messages per period.`],
  ['period', 'Period (seconds)', `The rate's period, 1 to ${num(FLOW_MAX.period)}; it may apply to the consumer's rate.`],
];

/** The limit a server's 400 names ("parallelism must be between …"), or 'key' for the key itself. */
function fieldOf(message) {
  if (/flow key/.test(message)) return 'key';
  const m = /^(parallelism|rate|period)\b/.exec(message || '');
  return m ? m[1] : null;
}

/**
 * The form. `onChanged(key)` is told of a key as the server answers it after a change made here.
 * edit(key) shows a listed key (a FlowKey) in it; seen(items) refreshes the state of the one shown from
 * a fresh page of the list; follow(key) shows a key changed elsewhere, its limits too, when it is the one
 * shown; setConsumerFlow(limits) says what an empty limit falls back to.
 */
export function createFlowEditor({ api, ctx, queueId, onChanged }) {
  let current = null; // the FlowKey shown, as last answered
  let consumerFlow = null;

  const keyInput = h('input', { type: 'text', class: 'mono', spellcheck: 'false', autocomplete: 'off', maxlength: '128', placeholder: 'tenant-42' });
  const lookUp = h('button', { type: 'button', class: 'btn' }, 'Look up');
  const inputs = Object.fromEntries(LIMITS.map(([name]) => [name, numberInput({ min: '1', max: String(FLOW_MAX[name]) })]));
  const hints = Object.fromEntries(LIMITS.map(([name]) => [name, h('span')]));
  const save = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Save limits');
  const pause = h('button', { type: 'button', class: 'btn', hidden: true }, 'Pause key');
  const remove = h('button', { type: 'button', class: 'btn btn-danger-outline', hidden: true }, 'Remove own limits…');
  const msg = notice();
  const state = h('dl', { class: 'props', hidden: true, 'aria-label': 'The key now' });
  const stateTitle = h('p', { class: 'small', hidden: true, role: 'status' });

  const form = h('form', { class: 'stack flow-editor', novalidate: true, 'aria-labelledby': 'flow-editor-title' },
    h('h3', { id: 'flow-editor-title' }, 'A key by name'),
    h('p', { class: 'muted small' }, 'Look up any key, with messages or not, or give it limits of its own before its '
      + 'messages come. A limit left empty is the consumer\'s.'),
    h('div', { class: 'inline-form' },
      field('Flow key', keyInput, { hint: 'As published in flow_control_key: 1 to 128 printable ASCII characters, no spaces.' }),
      h('div', { class: 'inline-submit' }, lookUp)),
    stateTitle, state,
    h('div', { class: 'form-grid' }, LIMITS.map(([name, label]) => field(label, inputs[name], { hint: hints[name] }))),
    h('div', { class: 'form-actions' }, save, pause, remove),
    msg.el);

  /** What an empty limit is: the consumer's (a number), or null when it sets none. */
  function fallbackOf(name) {
    if (!consumerFlow) return null;
    if (name === 'period') return consumerFlow.rate != null ? consumerFlow.period || 1 : null;
    return consumerFlow[name] ?? null;
  }

  function showHints() {
    for (const [name, , range] of LIMITS) {
      const v = fallbackOf(name);
      const none = name === 'period' ? '1' : 'no limit';
      hints[name].textContent = `${range} Empty: ${v === null ? none : `the consumer's, ${num(v)}`}.`;
      inputs[name].placeholder = v === null ? none : String(v);
    }
  }
  showHints();

  function clearMarks() {
    keyInput.removeAttribute('aria-invalid');
    for (const input of Object.values(inputs)) input.removeAttribute('aria-invalid');
  }

  /** The key typed; throws an Error saying what to fix. */
  function keyTyped() {
    const key = keyInput.value;
    if (key === '') {
      keyInput.setAttribute('aria-invalid', 'true');
      keyInput.focus();
      throw new Error('Type the flow key: as the messages carry it in flow_control_key.');
    }
    return key;
  }

  /** Shows the key's state (not its inputs: those are the user's until the key changes). */
  function showState(k) {
    current = k;
    const held = heldWords(k);
    const own = k.overrides && hasLimits(k.overrides) ? limitPhrases(k.overrides).join(' · ') : null;
    const applying = limitPhrases(k);
    const why = held.text.charAt(0).toLowerCase() + held.text.slice(1);
    stateTitle.hidden = false;
    stateTitle.replaceChildren('Key ', h('code', null, k.flow_control_key), ': ',
      k.waiting ? `${num(k.waiting)} held back` : 'nothing held back', ` · ${why}.`);
    state.hidden = false;
    state.replaceChildren(
      h('dt', null, 'Released'), h('dd', null, `${num(k.released)} (ready, leased or retrying)`),
      h('dt', null, 'Waiting'), h('dd', null, `${num(k.waiting)} held back`),
      h('dt', null, 'Held by'), h('dd', null, held.node),
      h('dt', null, 'Limits that apply'), h('dd', null, applying.length ? applying.join(' · ') : h('span', { class: 'muted' }, 'none')),
      h('dt', null, 'Its own limits'), h('dd', null, own || h('span', { class: 'muted' }, 'none: the consumer\'s apply'),
        k.paused ? [' ', badge('Paused', 'warning')] : null),
      k.modified_on ? [h('dt', null, 'Changed'), h('dd', null, date(k.modified_on))] : null);
    pause.hidden = false;
    pause.textContent = k.paused ? 'Resume key' : 'Pause key';
    remove.hidden = !k.overrides;
  }

  function hideState() {
    current = null;
    stateTitle.hidden = true;
    state.hidden = true;
    pause.hidden = true;
    remove.hidden = true;
  }

  /** Fills the limit inputs with the key's own limits (empty: the consumer's). */
  function fill(k) {
    for (const [name] of LIMITS) {
      const v = k.overrides ? k.overrides[name] : null;
      inputs[name].value = v == null ? '' : String(v);
    }
  }

  function failed(err) {
    if (ctx.signal.aborted) return;
    msg.show(err.name === 'ApiError' ? describe(err) : err.message);
    if (err.name !== 'ApiError') return;
    const named = fieldOf(err.message);
    if (named === 'key') keyInput.setAttribute('aria-invalid', 'true');
    else if (named) inputs[named].setAttribute('aria-invalid', 'true');
  }

  function changed(k, words) {
    showState(k);
    ctx.toast(words);
    onChanged(k);
  }

  // A key typed anew is not the one shown: its state goes until it is looked up.
  keyInput.addEventListener('input', () => {
    if (current && keyInput.value !== current.flow_control_key) hideState();
  });
  keyInput.addEventListener('keydown', (e) => {
    if (e.key !== 'Enter') return;
    e.preventDefault();
    lookUp.click();
  });

  lookUp.addEventListener('click', async () => {
    msg.clear();
    clearMarks();
    try {
      const key = keyTyped();
      const k = await busy(lookUp, 'Looking up…', () => api.getFlowKey(queueId, key));
      if (ctx.signal.aborted) return;
      showState(k);
      fill(k);
    } catch (err) {
      failed(err);
    }
  });

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.clear();
    clearMarks();
    try {
      const key = keyTyped();
      const body = {};
      for (const [name, label] of LIMITS) {
        const v = readNumber(inputs[name], label.replace(/ \(.*\)$/, ''), 1, FLOW_MAX[name]);
        body[name] = v === undefined ? null : v;
      }
      const k = await busy(save, 'Saving…', () => api.setFlowKey(queueId, key, body));
      if (ctx.signal.aborted) return;
      fill(k);
      changed(k, `Limits of ${key} saved.`);
    } catch (err) {
      failed(err);
    }
  });

  pause.addEventListener('click', async () => {
    if (!current) return;
    msg.clear();
    const { flow_control_key: key, paused } = current;
    try {
      const k = await busy(pause, paused ? 'Resuming…' : 'Pausing…', () => (paused ? api.resumeFlowKey(queueId, key) : api.pauseFlowKey(queueId, key)));
      if (ctx.signal.aborted) return;
      changed(k, paused ? `Flow key ${key} resumed.` : `Flow key ${key} paused.`);
    } catch (err) {
      failed(err);
    }
  });

  remove.addEventListener('click', async () => {
    if (!current) return;
    msg.clear();
    const key = current.flow_control_key;
    if (!(await confirmRemove(key))) return;
    try {
      const k = await busy(remove, 'Removing…', () => api.clearFlowKey(queueId, key));
      if (ctx.signal.aborted) return;
      fill(k);
      changed(k, `Own limits of ${key} removed.`);
    } catch (err) {
      failed(err);
    }
  });

  return {
    el: form,
    /** Shows a listed key, its own limits in the inputs, and brings the form into view. */
    edit(k) {
      msg.clear();
      clearMarks();
      keyInput.value = k.flow_control_key;
      showState(k);
      fill(k);
      form.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
      inputs.parallelism.focus({ preventScroll: true });
    },
    /** A fresh page of the list: the state of the key shown follows it (its inputs stay as typed). */
    seen(items) {
      if (!current) return;
      const same = items.find((k) => k.flow_control_key === current.flow_control_key);
      if (same) showState(same);
    },
    /** A key changed elsewhere (from its row): shown anew, its own limits in the inputs, if it is the one shown. */
    follow(k) {
      if (!current || k.flow_control_key !== current.flow_control_key) return;
      showState(k);
      fill(k);
    },
    setConsumerFlow(limits) {
      consumerFlow = limits || null;
      showHints();
    },
  };
}

/** Asks before a key's own limits (and its pause) go. */
export function confirmRemove(key) {
  return confirmDialog({
    title: `Remove the own limits of ${key}?`,
    message: 'The key\'s own limits and its pause are removed: the consumer\'s limits apply to it again, and what they allow is let go at once.',
    confirmLabel: 'Remove limits',
  });
}
