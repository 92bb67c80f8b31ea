"""Schemathesis hooks for skiplock (loaded through schemathesis.toml).

They keep the run meaningful without changing what the server is asked to accept:
- The token under test is never revoked. Stateful testing feeds token ids seen in responses (the token
  list, `GET /user/tokens/verify`) to `DELETE /tokens/{token_id}`, which would revoke the run's own token
  and turn every later request into a 401. A revoke aimed at that token is redirected to a fresh token,
  created for the purpose with the same scopes, so the revoke still succeeds as it would have.
- An update's `jurisdiction` may only repeat the queue's own (set at creation); a generated one is left out.
- A long-polling pull may wait up to 20 s on an empty queue, longer than the run's request timeout; a
  generated valid `wait_time_ms` is shortened to at most 200 ms (still valid, and still a wait).
- A token's validity window is kept valid (token_window.py says how): `expires_on` in the future,
  `not_before` before it.
- A consumer's `dead_letter_queue` must name another queue than the consumer's own, a rule between the
  path and the body that the schema cannot state. When a generated name equals the queue's own name
  (known from earlier responses), it is changed to another valid name.
"""

import json
import os
import sys

import requests
import schemathesis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from token_window import keep_token_condition_valid, keep_token_window_valid  # noqa: E402

_TOKEN = os.environ.get("SKIPLOCK_TOKEN", "")
# skl_<32 hex token id>_<secret>
PROTECTED_TOKEN_ID = _TOKEN[4:36] if _TOKEN.startswith("skl_") else None
ACCOUNT_ID = os.environ.get("SKIPLOCK_ACCOUNT_ID", "")

QUEUE_NAMES: dict[str, str] = {}


def _remember(value):
    if isinstance(value, dict):
        if isinstance(value.get("queue_id"), str) and isinstance(value.get("queue_name"), str):
            QUEUE_NAMES[value["queue_id"]] = value["queue_name"]
        for item in value.get("consumers") or []:
            _remember(item)
    elif isinstance(value, list):
        for item in value:
            _remember(item)


def _disposable_token(base_url: str) -> str:
    answer = requests.post(
        f"{base_url}/client/v4/accounts/{ACCOUNT_ID}/tokens",
        headers={"Authorization": f"Bearer {_TOKEN}"},
        json={"name": "schemathesis-disposable", "scopes": ["queues_read", "queues_write", "tokens_write"]},
        timeout=10,
    )
    answer.raise_for_status()
    return answer.json()["result"]["id"]


def _other_name(name: str) -> str:
    return f"{name}-d" if len(name) <= 61 else name[:-1] + ("a" if name[-1] != "a" else "b")


@schemathesis.hook
def before_call(context, case, kwargs):
    params = case.path_parameters or {}
    path = case.operation.path
    if path.endswith("/tokens/{token_id}") and PROTECTED_TOKEN_ID and params.get("token_id") == PROTECTED_TOKEN_ID:
        params["token_id"] = _disposable_token(case.operation.schema.get_base_url())
    if "/consumers" in path and case.operation.method.lower() in ("post", "put") and isinstance(case.body, dict):
        dlq = case.body.get("dead_letter_queue")
        own = QUEUE_NAMES.get(params.get("queue_id"))
        if isinstance(dlq, str) and dlq and dlq == own:
            case.body["dead_letter_queue"] = _other_name(dlq)
    if case.operation.method.lower() == "post" and path.endswith("/tokens"):
        keep_token_window_valid(case.body)
        keep_token_condition_valid(case.body)
    wait = case.body.get("wait_time_ms") if isinstance(case.body, dict) else None
    if path.endswith("/messages/pull") and type(wait) is int and 0 < wait <= 20000:
        case.body["wait_time_ms"] = min(wait, 200)
    # A queue's jurisdiction is set at creation; an update may only repeat it, which the schema cannot
    # state, so a generated one is left out (null, which is ignored, is kept).
    if path.endswith("/queues/{queue_id}") and isinstance(case.body, dict) and case.body.get("jurisdiction"):
        del case.body["jurisdiction"]


@schemathesis.hook
def after_call(context, case, response):
    if response.status_code != 200:
        return
    try:
        data = json.loads(response.content)
    except ValueError:
        return
    if isinstance(data, dict):
        _remember(data.get("result"))
