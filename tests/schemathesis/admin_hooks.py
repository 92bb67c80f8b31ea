"""Schemathesis hooks for skiplock's operator API (loaded through admin.toml).

They keep the run meaningful without changing what the server is asked to accept:
- A generated token's validity window is kept valid (token_window.py says how).
- A plan named by an account's create or update must exist, a rule between the body and stored state
  that the schema cannot state: a well-formed generated `plan` that names no plan the run has seen is
  changed to `default`, which always exists (malformed ones are left for the server to refuse).
- `GET` and `PATCH /plans/{plan_name}` with a well-formed name the run has never seen go to `default`
  instead, so that they read and change a real plan rather than answering 404 every time. A plan the run
  deleted keeps its name, so that the 404 that follows a delete is still checked. `DELETE` is never
  steered: a generated name answers 404, a plan created by the run can go, and `default` is a 409.
- `DELETE /accounts/{account_id}` never deletes the account under test (SKIPLOCK_ACCOUNT_ID, which
  admin.toml pins as every `account_id`) nor any account the run did not create: a deleted account can
  never be suspended, resumed or given a token again, so every later check of those would only meet its
  409. Such a delete goes instead to the account the run created last, or, every other time outside the
  stateful phase, to an id no account has (the nil id), so that both the deletion (200) and the 404 are
  checked. In the stateful phase it always goes to the account the run created last: a delete linked from
  `POST /accounts` must find the account that was just created, or Schemathesis reports the 404 as a
  resource that vanished.
- `GET /accounts/{account_id}/deletion` of the account under test answers 404 (it is not being deleted).
  Outside the stateful phase every other such read goes to an account the run deleted, so that the
  answer's schema is checked too. In the stateful phase every such read goes to an account the run
  deleted before it last created one: the read may follow `POST /accounts`, after which a 404 is reported
  as above, while an account deleted since then may have been deleted earlier in the same sequence, after
  which a 200 is reported as a use after free (a deleted account stays readable, as its record). Only
  when the run has deleted no such account yet is the read left on the account under test.
- `GET /audit_logs?account_id=...` answers any well-formed id (an id no account has answers no entries), so
  a generated one is valid as it is; but a random id would only ever read an empty log. Outside the stateful
  phase every other well-formed `account_id` goes to the account under test, whose log fills as the run
  renames, suspends and resumes it and issues and revokes its tokens, so that entries are checked against
  the AuditLog schema on the filtered read too (the unfiltered read answers every account's). Malformed ones
  are left for the server to refuse.
- `GET /usage` takes `since` before `until` (by default the start of this month and now), a rule between
  two values and the clock that the schema cannot state: a well-formed generated period that breaks it is
  moved by whole days to a recent one (usage_period.py says how); malformed values are left for the server
  to refuse. Its CSV answer (`format=csv`, text/csv) is read as text, so that the document's pattern for
  it is checked: Schemathesis has no reader of its own for text/csv and would skip it.
Nothing else needs steering: suspending, renaming or resuming the account under test, and changing its
limits or the default plan's, only affect the tenant API, and the run's own operator token cannot be
revoked through this API.
"""

import json
import os
import re
import sys

import schemathesis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from token_window import keep_token_condition_valid, keep_token_window_valid  # noqa: E402
from usage_period import keep_usage_period_valid  # noqa: E402

# A plan's name, as the server checks it (src/queue/plan.rs).
PLAN_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
DEFAULT_PLAN = "default"
# Plans the server has answered with (the default plan always exists), and those the run deleted.
PLANS = {DEFAULT_PLAN}
DELETED_PLANS: set[str] = set()
# An account's id, as the server checks it (src/ids.rs).
ACCOUNT_ID = re.compile(r"[0-9a-f]{32}")
# The account under test: its tokens and standing are what the other operations work on.
PROTECTED_ACCOUNT = os.environ.get("SKIPLOCK_ACCOUNT_ID", "")
# The nil id, which no account has (ids are random).
UNKNOWN_ACCOUNT = "0" * 32
# Accounts the run created, oldest first: the only ones it may delete.
CREATED_ACCOUNTS: list[str] = []
# Accounts the run deleted before it last created one, and those it deleted since.
DELETED_BEFORE_LAST_CREATE: list[str] = []
DELETED_SINCE_LAST_CREATE: list[str] = []
# Counts the steered calls outside the stateful phase, to alternate between their two targets.
_TURNS = {"delete": 0, "deletion": 0, "audit": 0}


def _well_formed_plan(name) -> bool:
    return isinstance(name, str) and PLAN_NAME.fullmatch(name) is not None


def _well_formed_account(account_id) -> bool:
    return isinstance(account_id, str) and ACCOUNT_ID.fullmatch(account_id) is not None


def _stateful(case) -> bool:
    """Whether the case belongs to the stateful phase, where checks look at the calls before it. A case
    whose phase cannot be told counts as stateful, the cautious choice."""
    phase = getattr(getattr(case.meta, "phase", None), "name", None)
    return phase is None or str(getattr(phase, "value", phase)) == "stateful"


def _alternate(case, what: str) -> bool:
    """True every other time outside the stateful phase, False in it."""
    if _stateful(case):
        return False
    _TURNS[what] += 1
    return _TURNS[what] % 2 == 0


def _steer_account_deletion(case, method: str, path: str):
    params = case.path_parameters or {}
    account = params.get("account_id")
    if not _well_formed_account(account):
        # A malformed id is the server's to refuse.
        return
    if method == "delete" and path == "/admin/v1/accounts/{account_id}":
        if account != PROTECTED_ACCOUNT and account in CREATED_ACCOUNTS:
            return
        if CREATED_ACCOUNTS and not _alternate(case, "delete"):
            params["account_id"] = CREATED_ACCOUNTS[-1]
        else:
            params["account_id"] = UNKNOWN_ACCOUNT
    elif method == "get" and path == "/admin/v1/accounts/{account_id}/deletion":
        if account != PROTECTED_ACCOUNT:
            return
        if _stateful(case):
            if DELETED_BEFORE_LAST_CREATE:
                params["account_id"] = DELETED_BEFORE_LAST_CREATE[-1]
        elif _alternate(case, "deletion"):
            deleted = DELETED_BEFORE_LAST_CREATE + DELETED_SINCE_LAST_CREATE
            if deleted:
                params["account_id"] = deleted[-1]


def _steer_audit_account(case, method: str, path: str):
    if method != "get" or path != "/admin/v1/audit_logs" or not _well_formed_account(PROTECTED_ACCOUNT):
        return
    query = case.query
    if not isinstance(query, dict) or not _well_formed_account(query.get("account_id")):
        # No account_id reads every account's entries; a malformed one is the server's to refuse.
        return
    if _alternate(case, "audit"):
        query["account_id"] = PROTECTED_ACCOUNT


def _result(response):
    try:
        return json.loads(response.content).get("result")
    except (ValueError, AttributeError):
        return None


def _remember_accounts(response, method: str, path: str):
    """Notes the accounts the run created and deleted."""
    if response.status_code != 200:
        return
    result = _result(response)
    if not isinstance(result, dict):
        return
    if method == "post" and path == "/admin/v1/accounts":
        account = result.get("account")
        account_id = account.get("id") if isinstance(account, dict) else None
        if _well_formed_account(account_id):
            CREATED_ACCOUNTS.append(account_id)
            DELETED_BEFORE_LAST_CREATE.extend(DELETED_SINCE_LAST_CREATE)
            DELETED_SINCE_LAST_CREATE.clear()
    elif method == "delete" and path == "/admin/v1/accounts/{account_id}":
        account_id = result.get("account_id")
        if _well_formed_account(account_id):
            if account_id in DELETED_BEFORE_LAST_CREATE:
                DELETED_BEFORE_LAST_CREATE.remove(account_id)
            if account_id not in DELETED_SINCE_LAST_CREATE:
                DELETED_SINCE_LAST_CREATE.append(account_id)


@schemathesis.deserializer("text/csv")
def csv_as_text(ctx, response):
    """The usage export's CSV as its text, so that the document's pattern for it is checked (Schemathesis
    skips the schema of a media type it has no deserializer for)."""
    return response.content.decode("utf-8")


@schemathesis.hook
def before_call(context, case, kwargs):
    method = case.operation.method.lower()
    path = case.operation.path
    if method == "post" and path.endswith("/tokens"):
        keep_token_window_valid(case.body)
        keep_token_condition_valid(case.body)
    is_account_change = (method == "post" and path == "/admin/v1/accounts") or (
        method == "patch" and path == "/admin/v1/accounts/{account_id}"
    )
    if is_account_change and isinstance(case.body, dict):
        plan = case.body.get("plan")
        if _well_formed_plan(plan) and plan not in PLANS:
            case.body["plan"] = DEFAULT_PLAN
    if path == "/admin/v1/plans/{plan_name}" and method in ("get", "patch"):
        params = case.path_parameters or {}
        name = params.get("plan_name")
        if _well_formed_plan(name) and name not in PLANS and name not in DELETED_PLANS:
            params["plan_name"] = DEFAULT_PLAN
    _steer_account_deletion(case, method, path)
    _steer_audit_account(case, method, path)
    if method == "get" and path == "/admin/v1/usage":
        keep_usage_period_valid(case.query)


@schemathesis.hook
def after_call(context, case, response):
    path = case.operation.path
    method = case.operation.method.lower()
    _remember_accounts(response, method, path)
    if not path.startswith("/admin/v1/plans"):
        return
    if method == "delete":
        name = (case.path_parameters or {}).get("plan_name")
        if response.status_code == 200 and isinstance(name, str):
            PLANS.discard(name)
            DELETED_PLANS.add(name)
        return
    if method == "post" and response.status_code == 409 and isinstance(case.body, dict):
        # A plan of that name exists already.
        name = case.body.get("name")
        if _well_formed_plan(name):
            PLANS.add(name)
            DELETED_PLANS.discard(name)
        return
    if response.status_code != 200:
        return
    result = _result(response)
    for plan in result if isinstance(result, list) else [result]:
        if isinstance(plan, dict) and _well_formed_plan(plan.get("name")):
            PLANS.add(plan["name"])
            DELETED_PLANS.discard(plan["name"])
