"""Schemathesis hooks for skiplock (loaded through schemathesis.toml).

They keep the run meaningful without changing what the server is asked to accept:
- The token under test is never revoked. Stateful testing links `GET /user/tokens/verify` (and the token
  list) to `DELETE /tokens/{token_id}`, which would revoke the run's own token and turn every later request
  into a 401. A revoke aimed at that token is redirected to an id that does not exist (a 404).
- A consumer's `dead_letter_queue` must name another queue than the consumer's own, a rule between the
  path and the body that the schema cannot state. When a generated name equals the queue's own name
  (known from earlier responses), it is changed to another valid name.
"""

import json
import os

import schemathesis

_TOKEN = os.environ.get("SKIPLOCK_TOKEN", "")
# skl_<32 hex token id>_<secret>
PROTECTED_TOKEN_ID = _TOKEN[4:36] if _TOKEN.startswith("skl_") else None
ABSENT_ID = "0" * 32

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


def _other_name(name: str) -> str:
    return f"{name}-d" if len(name) <= 61 else name[:-1] + ("a" if name[-1] != "a" else "b")


@schemathesis.hook
def before_call(context, case, kwargs):
    params = case.path_parameters or {}
    path = case.operation.path
    if path.endswith("/tokens/{token_id}") and PROTECTED_TOKEN_ID and params.get("token_id") == PROTECTED_TOKEN_ID:
        params["token_id"] = ABSENT_ID
    if "/consumers" in path and case.operation.method.lower() in ("post", "put") and isinstance(case.body, dict):
        dlq = case.body.get("dead_letter_queue")
        own = QUEUE_NAMES.get(params.get("queue_id"))
        if isinstance(dlq, str) and dlq and dlq == own:
            case.body["dead_letter_queue"] = _other_name(dlq)


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
