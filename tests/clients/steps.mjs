// What both client flows (sdk.mjs, wrangler.mjs) share: a failed step, an expectation, and the
// server's own view of the account over plain HTTP, not through the client under test.

export class StepFailed extends Error {}

export function expect(cond, what, got) {
  if (!cond) throw new StepFailed(`expected ${what}; got ${typeof got === 'string' ? got : JSON.stringify(got)}`);
}

/** A caller of the account's API at `baseUrl` with `token`: `api(method, path, body)`. */
export function accountApi(baseUrl, account, token) {
  return async function api(method, path, body) {
    const res = await fetch(`${baseUrl}/accounts/${account}/${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    try {
      return { status: res.status, body: JSON.parse(text) };
    } catch {
      throw new StepFailed(`${method} ${path}: answer is not JSON (HTTP ${res.status}): ${text}`);
    }
  };
}

/**
 * Runs `steps` in order until one fails, printing each; then `cleanUp(failed)` (best effort), the tally
 * under `label`, and exits 1 if a step failed. `describe` turns an error into its message.
 */
export async function runSteps(label, steps, describe, cleanUp) {
  const passed = [];
  let failed = null;
  try {
    for (const step of steps) {
      try {
        await step();
      } catch (e) {
        failed = `${step.name}: ${describe(e)}`;
        break;
      }
      passed.push(step.name);
      console.log(`ok   ${step.name}`);
    }
  } finally {
    await cleanUp(failed);
  }
  if (failed) {
    console.error(`FAIL ${failed}`);
    console.log(`${label}: ${passed.length} passed, 1 failed`);
    process.exit(1);
  }
  console.log(`${label}: ${passed.length} passed, 0 failed`);
}
