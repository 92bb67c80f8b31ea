// Small DOM helpers: build elements without innerHTML (every value is text), format numbers and
// durations, show toasts, ask for confirmation in a <dialog>, copy to the clipboard.

const SVG_NS = 'http://www.w3.org/2000/svg';

/** h('div', {class: 'x', onClick: fn}, child, ...) — children may be strings, nodes, arrays, null. */
export function h(tag, props, ...children) {
  const svg = tag.startsWith('svg:');
  const el = svg ? document.createElementNS(SVG_NS, tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (key === 'value' && !svg) {
      el.value = value;
    } else if (key === 'checked' && !svg) {
      el.checked = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

let uid = 0;
/** A unique id for label/aria wiring. */
export function id(prefix = 'f') {
  uid += 1;
  return `${prefix}-${uid}`;
}

/** A labelled form field. `input` is an element; hint and error are wired with aria-describedby. */
export function field(label, input, { hint, wide } = {}) {
  const inputId = input.id || id('in');
  input.id = inputId;
  const parts = [h('label', { for: inputId }, label), input];
  if (hint) {
    const hintId = `${inputId}-hint`;
    input.setAttribute('aria-describedby', hintId);
    parts.push(h('p', { class: 'hint', id: hintId }, hint));
  }
  return h('div', { class: wide ? 'field field-wide' : 'field' }, parts);
}

export const nf = new Intl.NumberFormat();
export function num(n) {
  return n === null || n === undefined ? '—' : nf.format(n);
}

export function bytes(n) {
  if (n === null || n === undefined) return '—';
  if (n < 1024) return `${nf.format(n)} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** A duration in seconds as "45 s", "3 min", "2 h 5 min", "4 d". */
export function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) {
    const m = Math.floor(s / 60);
    const r = s % 60;
    return r && m < 10 ? `${m} min ${r} s` : `${m} min`;
  }
  if (s < 86400) {
    const hrs = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    return m ? `${hrs} h ${m} min` : `${hrs} h`;
  }
  const d = Math.floor(s / 86400);
  const hrs = Math.floor((s % 86400) / 3600);
  return hrs ? `${d} d ${hrs} h` : `${d} d`;
}

export function age(timestampMs, now = Date.now()) {
  if (!timestampMs) return '—';
  return duration((now - timestampMs) / 1000);
}

const dateFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const timeFmt = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
export function date(value) {
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? String(value) : dateFmt.format(d);
}
export function clock(ms) {
  return timeFmt.format(new Date(ms));
}

// ---- toasts -------------------------------------------------------------------------------------

export function toast(message, kind = 'success') {
  const region = document.getElementById('toasts');
  if (!region) return;
  const close = h('button', { type: 'button', class: 'toast-close', 'aria-label': 'Dismiss' }, '×');
  const el = h('div', { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' },
    h('span', { class: 'toast-text' }, message), close);
  const remove = () => el.remove();
  close.addEventListener('click', remove);
  region.append(el);
  // Keep the corner calm: a few toasts at most (one on a phone), newest last.
  const max = window.matchMedia('(max-width: 720px)').matches ? 1 : 3;
  while (region.children.length > max) region.firstElementChild.remove();
  setTimeout(remove, kind === 'error' ? 10000 : 4000);
}

// ---- inline messages ----------------------------------------------------------------------------

/** A message area for a form or a card: .show(text, kind) / .clear(). */
export function notice() {
  const el = h('div', { class: 'notice', hidden: true });
  return {
    el,
    show(text, kind = 'error') {
      el.className = `notice notice-${kind}`;
      el.setAttribute('role', kind === 'error' ? 'alert' : 'status');
      el.replaceChildren(text instanceof Node ? text : document.createTextNode(text));
      el.hidden = false;
    },
    clear() {
      el.hidden = true;
      el.replaceChildren();
    },
  };
}

// ---- confirmation dialog ------------------------------------------------------------------------

/**
 * Asks in a modal <dialog>; resolves true when confirmed. `content` (optional) goes under the message:
 * say a field the caller reads once it resolves. `typeToConfirm` (optional), {text, label}, is for what
 * cannot be undone: the confirm button stays disabled until `text` is typed into a field labelled `label`.
 */
export function confirmDialog({ title, message, confirmLabel = 'Confirm', danger = true, content = null, typeToConfirm = null }) {
  return new Promise((resolve) => {
    const titleId = id('dlg');
    const cancel = h('button', { type: 'button', class: 'btn' }, 'Cancel');
    const ok = h('button', { type: 'button', class: danger ? 'btn btn-danger' : 'btn btn-primary' }, confirmLabel);
    let typed = null;
    let typedPart = null;
    if (typeToConfirm) {
      const askId = id('dlg-ask');
      typed = h('input', {
        type: 'text', autocomplete: 'off', spellcheck: 'false', autocapitalize: 'off', 'aria-describedby': askId,
      });
      typedPart = h('div', { class: 'dialog-content stack' },
        h('p', { id: askId, class: 'small' }, 'To confirm, type ', h('strong', { class: 'break' }, typeToConfirm.text), ' below.'),
        field(typeToConfirm.label, typed));
      ok.disabled = true;
    }
    // Spaces around the text are not seen on screen, so they are not asked for.
    const typedRight = () => typed.value.trim() === String(typeToConfirm.text).trim();
    const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': titleId },
      h('h2', { id: titleId, class: 'dialog-title' }, title),
      h('p', { class: 'dialog-text' }, message),
      content ? h('div', { class: 'dialog-content' }, content) : null,
      typedPart,
      h('div', { class: 'dialog-actions' }, cancel, ok));
    let answered = false;
    const finish = (value) => {
      if (answered) return;
      answered = true;
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    cancel.addEventListener('click', () => finish(false));
    ok.addEventListener('click', () => {
      if (typed && !typedRight()) return;
      finish(true);
    });
    if (typed) {
      typed.addEventListener('input', () => {
        ok.disabled = !typedRight();
      });
      typed.addEventListener('keydown', (e) => {
        if (e.key !== 'Enter') return;
        e.preventDefault();
        if (typedRight()) finish(true);
      });
    }
    dialog.addEventListener('cancel', (e) => {
      e.preventDefault();
      finish(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    (typed || cancel).focus();
  });
}

// ---- clipboard ----------------------------------------------------------------------------------

export async function copyText(text, input) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Older browsers or a denied permission: select the text so the user can copy it by hand.
    if (input) {
      input.focus();
      input.select();
    }
    return false;
  }
}

/** A one-time secret: read-only field, copy button, "shown once" note. */
export function secretBox({ title, secret, note, label = 'Secret' }) {
  const input = h('input', { type: 'text', readonly: true, class: 'mono secret-input', value: secret, spellcheck: 'false', 'aria-label': label });
  const status = h('span', { class: 'copy-status', role: 'status' });
  const copy = h('button', { type: 'button', class: 'btn btn-primary' }, 'Copy');
  copy.addEventListener('click', async () => {
    const done = await copyText(secret, input);
    status.textContent = done ? 'Copied to the clipboard' : 'Copy blocked by the browser: the text is selected, press Ctrl+C';
  });
  input.addEventListener('focus', () => input.select());
  return h('div', { class: 'secret-box', role: 'region', 'aria-label': title },
    h('p', { class: 'secret-title' }, title),
    h('p', { class: 'secret-note' }, note),
    h('div', { class: 'secret-row' }, input, copy),
    status);
}

export function badge(text, kind = 'neutral') {
  return h('span', { class: `badge badge-${kind}` }, text);
}

/** Disable a button (and show a busy label) while `work` runs. */
export async function busy(button, label, work) {
  const old = button.textContent;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  if (label) button.textContent = label;
  try {
    return await work();
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
    button.textContent = old;
  }
}
