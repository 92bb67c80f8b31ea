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
