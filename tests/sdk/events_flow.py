#!/usr/bin/env python3
"""Event subscriptions through the official Cloudflare Python SDK, unchanged.

A user subscribes with the SDK's own `client.queues.subscriptions` (Cloudflare's shapes; skiplock's
`queues.queue` source), makes messages run out of deliveries, and reads the event with the SDK's pull
from the queue the subscription names: one `skiplock.queues.messages.dead_lettered` event in Cloudflare's
envelope, its body base64 of JSON bytes as any json message a pull returns.

Inputs (environment):
  SKIPLOCK_BASE_URL     e.g. http://127.0.0.1:8787/client/v4
  SKIPLOCK_TOKEN        a token of SKIPLOCK_ACCOUNT with queues_read + queues_write
  SKIPLOCK_ACCOUNT      the 32-hex account id

Exit status 0 and a last line `events flow: N passed, 0 failed` on success.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time

from cloudflare import Cloudflare

from steps import expect, run_steps

# An event reaches its queue within about a second of what caused it.
EVENT_WITHIN_S = 20


def main() -> int:
    env = {v: os.environ.get(v, "") for v in ("SKIPLOCK_BASE_URL", "SKIPLOCK_TOKEN", "SKIPLOCK_ACCOUNT")}
    missing = [k for k, v in env.items() if not v]
    if missing:
        print(f"events flow: missing environment: {', '.join(missing)}", file=sys.stderr)
        return 2
    account, base_url = env["SKIPLOCK_ACCOUNT"], env["SKIPLOCK_BASE_URL"]
    client = Cloudflare(api_token=env["SKIPLOCK_TOKEN"], base_url=base_url, max_retries=0, timeout=30)
    state: dict[str, object] = {}

    def create_queues() -> None:
        for name in ("orders", "orders-dlq", "alerts"):
            state[name] = client.queues.create(account_id=account, queue_name=name).queue_id
        client.queues.consumers.create(state["orders"], account_id=account, type="http_pull",
                                       dead_letter_queue="orders-dlq", settings={"max_retries": 0})
        client.queues.consumers.create(state["alerts"], account_id=account, type="http_pull")

    def subscribe() -> None:
        r = client.queues.subscriptions.create(
            account_id=account,
            name="orders dead letters",
            enabled=True,
            source={"type": "queues.queue", "queue_name": "orders"},
            events=["messages.dead_lettered"],
            destination={"type": "queues.queue", "queue_id": state["alerts"]},
        )
        expect(r is not None and r.id, "a subscription with an id", r)
        expect(r.events == ["messages.dead_lettered"], "its events echoed", r.events)
        state["subscription"] = r.id
        listed = [s.id for s in client.queues.subscriptions.list(account_id=account)]
        expect(listed == [r.id], "the list holds it", listed)

    def dead_letter() -> None:
        client.queues.messages.push(state["orders"], account_id=account, body={"order": 1}, content_type="json")
        client.queues.messages.push(state["orders"], account_id=account, body={"order": 2}, content_type="json")
        pulled = client.queues.messages.pull(state["orders"], account_id=account, batch_size=10).messages
        expect(len(pulled) == 2, "the two messages pulled", pulled)
        state["ids"] = sorted(m.id for m in pulled)
        r = client.queues.messages.ack(state["orders"], account_id=account,
                                       retries=[{"lease_id": m.lease_id} for m in pulled])
        expect(r.retry_count == 2, "both retried (and, out of deliveries, dead-lettered)", r)

    def read_the_event() -> None:
        deadline = time.monotonic() + EVENT_WITHIN_S
        while True:
            got = client.queues.messages.pull(state["alerts"], account_id=account, batch_size=10).messages
            if got or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        expect(len(got) == 1, "one event for the batch", got)
        m = got[0]
        expect(m.metadata.get("CF-Content-Type") == "json", "a json message", m.metadata)
        event = json.loads(base64.b64decode(m.body))
        expect(event["type"] == "skiplock.queues.messages.dead_lettered", "the event's type", event)
        expect(event["source"] == {"type": "queues.queue", "queueId": state["orders"], "queueName": "orders"},
               "the queue it happened to", event["source"])
        payload = event["payload"]
        expect(payload["count"] == 2 and sorted(payload["messageIds"]) == state["ids"]
               and payload["deadLetterQueue"] == "orders-dlq", "the count, ids and dead-letter queue", payload)
        meta = event["metadata"]
        expect(meta["accountId"] == account and meta["eventSubscriptionId"] == state["subscription"]
               and meta["eventSchemaVersion"] == 1 and meta["eventTimestamp"], "Cloudflare's metadata", meta)
        client.queues.messages.ack(state["alerts"], account_id=account, acks=[{"lease_id": m.lease_id}])

    def unsubscribe() -> None:
        client.queues.subscriptions.delete(state["subscription"], account_id=account)
        listed = list(client.queues.subscriptions.list(account_id=account))
        expect(listed == [], "no subscription left", listed)

    def clean_up(_failed: bool) -> None:
        for name in ("orders", "orders-dlq", "alerts"):
            if name in state:
                client.queues.delete(state[name], account_id=account)

    steps = [create_queues, subscribe, dead_letter, read_the_event, unsubscribe]
    return run_steps("events flow", steps, base_url, clean_up)


if __name__ == "__main__":
    sys.exit(main())
