#!/usr/bin/env python3
"""Walk every list with the official Cloudflare Python SDK's own iteration (cloudflare==5.9.0).

Each step iterates a list as a user would (`for queue in client.queues.list(...)`), so the SDK's
auto-pagination decides when to stop: the step passes only if the iteration ends and yields every item
exactly once. The lists hold more items than one page wherever the server lets them grow that long
(tests/api/listings.rs makes them); a queue has at most one consumer and the server has no event sources,
so those two iterations yield what there is (one consumer, no subscription) and must still end.
Redrive tasks are a skiplock extension the SDK has no method for; they are walked with the SDK's own
paginator (`get_api_list` with `SyncV4PagePaginationArray`), as a user of the escape hatch would.

Inputs (environment): SKIPLOCK_BASE_URL, SKIPLOCK_TOKEN (every scope), SKIPLOCK_ACCOUNT; and
`--expect JSON`: {"queues": n, "tokens": n, "queue_id": "...", "redrive_tasks": n}.
Last line: `listings flow: N passed, 0 failed` (exit 0), else the failing step is named.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from typing import Callable, Iterable

from cloudflare import Cloudflare
from cloudflare.pagination import SyncV4PagePaginationArray

from steps import expect, run_steps


def walk(items: Iterable[object], expected: int, key: Callable[[object], str], what: str) -> list[str]:
    """The keys of an SDK iteration, failing if it yields more than `expected` items (it would never
    end) or yields any item twice or not `expected` items."""
    # A bounded walk: an iteration that does not end yields past the bound and fails here.
    got = [key(item) for item in itertools.islice(items, expected * 2 + 5)]
    expect(len(got) <= expected, f"the {what} iteration to end after {expected} items", got)
    expect(len(set(got)) == len(got), f"every one of the {what} once", got)
    expect(len(got) == expected, f"{expected} {what}", got)
    return got


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--expect", required=True)
    want = json.loads(parser.parse_args().expect)
    base_url = os.environ["SKIPLOCK_BASE_URL"].rstrip("/")
    account = os.environ["SKIPLOCK_ACCOUNT"]
    # max_retries=0: a failure must fail the step; strict validation: every item must read as the SDK's model.
    client = Cloudflare(api_token=os.environ["SKIPLOCK_TOKEN"], base_url=base_url, max_retries=0, timeout=30,
                        _strict_response_validation=True)
    queue_id = want["queue_id"]

    def queues() -> None:
        # Cloudflare's schema gives this list no paging parameters: the SDK asks once, with none.
        names = walk(client.queues.list(account_id=account), want["queues"], lambda q: q.queue_name, "queues")
        expect(names == sorted(names), "the queues in creation order (listed-00 ...)", names)

    def consumers() -> None:
        # A queue has at most one consumer, so this list cannot outgrow a page; it must still end.
        walk(client.queues.consumers.list(queue_id, account_id=account), 1, lambda c: c.consumer_id, "consumers")

    def accounts() -> None:
        # A token sees one account. The SDK asks for page 2, 3, ... until a page is empty.
        walk(client.accounts.list(), 1, lambda a: a.id, "accounts")
        ids = walk(client.accounts.list(per_page=1), 1, lambda a: a.id, "accounts (per_page 1)")
        expect(ids == [account], f"the token's account {account}", ids)

    def memberships() -> None:
        walk(client.memberships.list(), 1, lambda m: m.id, "memberships")
        walk(client.memberships.list(per_page=1), 1, lambda m: m.id, "memberships (per_page 1)")

    def tokens() -> None:
        ten = walk(client.accounts.tokens.list(account_id=account, per_page=10), want["tokens"], lambda t: t.id,
                   "tokens (per_page 10)")
        twenty = walk(client.accounts.tokens.list(account_id=account), want["tokens"], lambda t: t.id, "tokens")
        expect(ten == twenty, "the same tokens in the same order whatever the page size", [ten, twenty])

    def event_subscriptions() -> None:
        # No event sources yet: nothing to yield, and the iteration ends.
        walk(client.queues.subscriptions.list(account_id=account), 0, lambda s: s.id, "event subscriptions")
        walk(client.queues.subscriptions.list(account_id=account, per_page=5), 0, lambda s: s.id,
             "event subscriptions (per_page 5)")

    def redrive_tasks() -> None:
        def tasks(params: dict[str, int]) -> SyncV4PagePaginationArray[object]:
            return client.get_api_list(f"/accounts/{account}/queues/{queue_id}/redrive", model=object,
                                       page=SyncV4PagePaginationArray[object], options={"params": params})

        key: Callable[[object], str] = lambda t: t["redrive_id"]  # noqa: E731 - items are plain dicts here
        ten = walk(tasks({"per_page": 10}), want["redrive_tasks"], key, "redrive tasks (per_page 10)")
        twenty = walk(tasks({}), want["redrive_tasks"], key, "redrive tasks")
        expect(ten == twenty, "the same tasks, newest first, whatever the page size", [ten, twenty])

    steps = [queues, consumers, accounts, memberships, tokens, event_subscriptions, redrive_tasks]
    return run_steps("listings flow", steps, base_url, lambda _failed: None)


if __name__ == "__main__":
    sys.exit(main())
