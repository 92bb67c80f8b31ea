#!/usr/bin/env python3
"""Validates recorded skiplock answers against Cloudflare's published Queues OpenAPI document.

    validate.py EXCHANGES.json [--allow ALLOW.json] [--schema OPENAPI.json] [--report REPORT.json]

EXCHANGES.json is a list of recorded exchanges:
    {"method": "GET", "path": "/accounts/{account_id}/queues/{queue_id}" (the schema's path template),
     "url": "/client/v4/accounts/.../queues/..." (shown in failures), "status": 200,
     "content_type": "application/json", "body": {...}}
Each body is validated by openapi-core against the schema's response for that operation and status
(an exact status, else its range such as 4XX), with OpenAPI 3.0 semantics and format checks.

ALLOW.json lists answers of skiplock's that Cloudflare's schema rejects, each with its reason, and
says what to validate them as instead, so the rest of the answer is still checked. Either a value:
    {"id": "...", "at": ["/result/type", "/result/*/type"], "value": "webhook", "as": "worker", "why": "..."}
(`at` holds JSON pointers into the answer; `*` stands for any one segment), or a status that the
operation does not document, validated as that status of another operation:
    {"id": "...", "operation": "subscriptions-delete", "status": 404, "as_operation": "subscriptions-get",
     "why": "..."}

Prints every failure with its operation and path, then a count; exits 1 if anything failed.
--report writes {validated, failed, failures, operations, allowances_used} as JSON.
"""

import argparse
import copy
import json
import sys
from pathlib import Path

from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse

# The schema's server is https://api.cloudflare.com/client/v4; requests are matched against it.
HOST = "https://api.cloudflare.com"
BASE = "/client/v4"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


def substitute(node, segments, allowance, hits):
    """Replaces allowance["value"] by allowance["as"] at the pointer `segments` under `node`."""
    if not segments:
        return
    head, rest = segments[0], segments[1:]
    if isinstance(node, dict):
        keys = list(node) if head == "*" else [head] if head in node else []
    elif isinstance(node, list):
        keys = range(len(node)) if head == "*" else [int(head)] if head.isdigit() and int(head) < len(node) else []
    else:
        return
    for key in keys:
        if rest:
            substitute(node[key], rest, allowance, hits)
        elif node[key] == allowance["value"]:
            node[key] = allowance["as"]
            hits.append(allowance["id"])


def pointer(path):
    return "/" + "/".join(str(p) for p in path)


def describe(error, body):
    """The lines that say why a body failed: each schema error with the place in the answer."""
    cause = error.__cause__
    schema_errors = list(getattr(cause, "schema_errors", None) or [])
    if not schema_errors:
        return [f"{type(error).__name__}: {cause or error}"]
    lines = []
    for e in schema_errors:
        lines.append(f"at {pointer(e.absolute_path)}: {e.message} (schema {pointer(e.absolute_schema_path)})")
        # A oneOf/anyOf names no reason by itself: show why each alternative refused the value.
        for sub in sorted(e.context or [], key=lambda s: list(s.schema_path)):
            lines.append(f"    alternative {sub.schema_path[0]}: at {pointer(sub.absolute_path)}: {sub.message}")
    return lines


def main():
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exchanges")
    parser.add_argument("--schema", default=str(here / "cloudflare-queues-openapi.json"))
    parser.add_argument("--allow", help="JSON list of allowed extensions")
    parser.add_argument("--report", help="write a JSON summary here")
    args = parser.parse_args()

    spec_dict = json.loads(Path(args.schema).read_text())
    openapi = OpenAPI.from_dict(spec_dict)
    exchanges = json.loads(Path(args.exchanges).read_text())
    allowances = json.loads(Path(args.allow).read_text()) if args.allow else []
    by_id = {op["operationId"]: (method, template) for template, ops in spec_dict["paths"].items()
             for method, op in ops.items() if method in METHODS and "operationId" in op}
    for a in allowances:
        keys = {"at", "value", "as"} if "at" in a else {"operation", "status", "as_operation"}
        missing = ({"id", "why"} | keys) - set(a)
        if missing or not a["why"].strip():
            sys.exit(f"allow-list entry {a.get('id')!r} lacks {sorted(missing) or ['a reason']}")
        if "as_operation" in a and a["as_operation"] not in by_id:
            sys.exit(f"allow-list entry {a['id']!r}: no operation {a['as_operation']!r} in the schema")

    failures, operations, used = [], {}, {a["id"]: 0 for a in allowances}
    validated = 0
    for number, x in enumerate(exchanges, 1):
        method, template, status = x["method"].lower(), x["path"], int(x["status"])
        where = f"#{number} {method.upper()} {x.get('url', template)} -> {status}"
        operation = spec_dict["paths"].get(template, {}).get(method) if method in METHODS else None
        if operation is None:
            failures.append({"exchange": where, "operation": None, "errors": [
                f"{method.upper()} {template} is not an operation of Cloudflare's schema"]})
            continue
        operation_id = operation.get("operationId", f"{method} {template}")
        operations.setdefault(operation_id, set()).add(status)

        body = copy.deepcopy(x["body"])
        hits = []
        for a in allowances:
            for at in a.get("at", []):
                substitute({"": body}, [""] + at.split("/")[1:], a, hits)
            if a.get("operation") == operation_id and int(a["status"]) == status:
                method, template = by_id[a["as_operation"]]
                hits.append(a["id"])
        for h in hits:
            used[h] += 1

        request = MockRequest(HOST, method, BASE + template, path_pattern=BASE + template)
        data = json.dumps(body).encode() if "body" in x else b""
        content_type = x.get("content_type") or "application/json"
        response = MockResponse(data, status_code=status, content_type=content_type)
        errors = list(openapi.iter_response_errors(request, response))
        if errors:
            lines = [line for e in errors for line in describe(e, body)]
            if hits:
                lines.append(f"(allowed: {', '.join(sorted(set(hits)))})")
            failures.append({"exchange": where, "operation": operation_id, "errors": lines,
                             "body": x.get("body")})
        else:
            validated += 1

    for f in failures:
        print(f"FAIL {f['exchange']} [{f['operation']}]")
        for line in f["errors"]:
            print(f"    {line}")
        if "body" in f:
            print(f"    answer: {json.dumps(f['body'])[:2000]}")
    for op in sorted(operations):
        print(f"  {op}: {', '.join(str(s) for s in sorted(operations[op]))}")
    for a in allowances:
        print(f"  allowed {a['id']}: {used[a['id']]} time(s)")
    print(f"{validated} answers validated against Cloudflare's schema, {len(failures)} failed")

    if args.report:
        Path(args.report).write_text(json.dumps({
            "validated": validated,
            "failed": len(failures),
            "failures": failures,
            "operations": {op: sorted(s) for op, s in operations.items()},
            "allowances_used": used,
        }, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
