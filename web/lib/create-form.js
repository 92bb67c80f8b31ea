// A form that creates something: its own check of the fields first (the field to fix marked), then the
// request with the button busy, and a refusal shown as the server words it, with the field it names marked.

import { busy } from './dom.js';
import { describe } from './api.js';

/** Marks `input` as the one to fix and focuses it; returns the Error saying `text`, for a check to throw. */
export function invalid(input, text) {
  input.setAttribute('aria-invalid', 'true');
  input.focus();
  return new Error(text);
}

/**
 * Creates on `form`'s submit. `check()` returns what to send, or throws an Error saying what to fix;
 * `send(value)` sends it while `button` says `busyLabel`; `created(made, value)` runs with the server's answer.
 * A failure shows in `msg`; `fields` are [field name, input] pairs, a 400's message starting with the
 * name marks the input (the longer names first); `refused(err)` runs after a failure.
 */
export function onCreate(form, { ctx, msg, button, fields, check, send, created, refused = () => {}, busyLabel = 'Creating…' }) {
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.clear();
    let value;
    try {
      value = check();
    } catch (err) {
      msg.show(err.message);
      return;
    }
    try {
      const made = await busy(button, busyLabel, () => send(value));
      if (ctx.signal.aborted) return;
      created(made, value);
    } catch (err) {
      if (ctx.signal.aborted) return;
      msg.show(describe(err));
      // The server's 400 starts with the field it refuses: mark it.
      if (err.kind === 'invalid') {
        const named = fields.find(([name]) => err.message.startsWith(name));
        if (named) named[1].setAttribute('aria-invalid', 'true');
      }
      refused(err);
    }
  });
}
