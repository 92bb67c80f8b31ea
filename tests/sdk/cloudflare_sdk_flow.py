#!/usr/bin/env python3
"""Drive skiplock with the official Cloudflare Python SDK (cloudflare==5.9.0).

The point is compatibility: every call goes through the SDK's own resource
methods, unchanged, and every answer is checked against what the Cloudflare
Queues API promises (API.md). Nothing here works around the server; if the
server answers in a shape the SDK cannot read, the step fails and says why.

Inputs (environment):
  SKIPLOCK_BASE_URL  e.g. http://127.0.0.1:8787/client/v4
  SKIPLOCK_TOKEN     a token of SKIPLOCK_ACCOUNT with queues_read + queues_write
  SKIPLOCK_ACCOUNT   the 32-hex account id
Optional:
  SKIPLOCK_KEEP_QUEUE=1  leave the queue behind when a step fails (for debugging)

Exit status 0 and a last line `sdk flow: N passed, 0 failed` on success;
non-zero with the failing step named otherwise.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import sys
import time

import cloudflare
from cloudflare import Cloudflare

from steps import StepFailed, expect, run_steps

HEX32 = re.compile(r"^[0-9a-f]{32}$")


def dump(model: object) -> object:
    """A readable form of an SDK model for failure messages."""
    to_dict = getattr(model, "to_dict", None)
    return to_dict() if callable(to_dict) else model


def decode_pulled(body: str | None, content_type: str) -> object:
    """Pull and peek encode bodies as Cloudflare does: `text` plain, `json` base64 of its bytes."""
    if content_type == "text":
        return body
    raw = base64.b64decode(body or "", validate=True)
    return json.loads(raw.decode("utf-8"))


def main() -> int:
    missing = [v for v in ("SKIPLOCK_BASE_URL", "SKIPLOCK_TOKEN", "SKIPLOCK_ACCOUNT") if not os.environ.get(v)]
    if missing:
        print(f"sdk flow: missing environment: {', '.join(missing)}", file=sys.stderr)
        return 2
    base_url = os.environ["SKIPLOCK_BASE_URL"].rstrip("/")
    account = os.environ["SKIPLOCK_ACCOUNT"]

    # max_retries=0: a 5xx or 429 must fail the step, not be retried away.
    # _strict_response_validation=True: the SDK validates every answer against its
    # response models, so a missing or mistyped field is an error rather than None.
    client = Cloudflare(
        api_token=os.environ["SKIPLOCK_TOKEN"],
        base_url=base_url,
        max_retries=0,
        timeout=30,
        _strict_response_validation=True,
    )

    queue_name = f"sdk-flow-{int(time.time())}-{secrets.token_hex(4)}"
    state: dict[str, object] = {}

    # What we publish: (content_type, body). Pull must give each back exactly once.
    single_text = ("text", f"hello from the sdk {secrets.token_hex(4)}")
    single_json = ("json", {"kind": "single", "n": 1, "nested": {"ok": True, "list": [1, 2, 3]}})
    bulk = [
        ("text", "bulk text one"),
        ("json", [1, "two", {"three": 3.5}]),
        ("text", "bulk text two: ünïcødé ✓"),
        ("json", "a json string"),
    ]
    published = [single_text, single_json, *bulk]

    def q() -> str:
        return str(state["queue_id"])

    # ---- steps -------------------------------------------------------------

    def tokens_verify() -> None:
        r = client.user.tokens.verify()
        expect(r is not None, "a verify result", r)
        expect(bool(r.id), "a token id", dump(r))
        expect(r.status == "active", "status 'active'", dump(r))

    def create_queue() -> None:
        r = client.queues.create(account_id=account, queue_name=queue_name)
        expect(r is not None and r.queue_id is not None, "a Queue with queue_id", dump(r))
        expect(bool(HEX32.match(r.queue_id)), "queue_id of 32 lowercase hex", r.queue_id)
        expect(r.queue_name == queue_name, f"queue_name {queue_name!r}", r.queue_name)
        expect(r.settings is not None, "settings", dump(r))
        expect(r.settings.delivery_delay == 0, "default delivery_delay 0", dump(r.settings))
        expect(r.settings.delivery_paused is False, "delivery_paused false", dump(r.settings))
        expect(r.settings.message_retention_period == 345600,
               "default message_retention_period 345600", dump(r.settings))
        state["queue_id"] = r.queue_id

    def create_consumer() -> None:
        r = client.queues.consumers.create(
            q(),
            account_id=account,
            type="http_pull",
            settings={"batch_size": 10, "max_retries": 3, "retry_delay": 0, "visibility_timeout_ms": 30000},
        )
        expect(r is not None, "a Consumer", r)
        expect(r.type == "http_pull", "type http_pull (SDK discriminator)", dump(r))
        expect(bool(r.consumer_id) and bool(HEX32.match(r.consumer_id)), "consumer_id of 32 hex", dump(r))
        expect(r.queue_name == queue_name, f"queue_name {queue_name!r}", dump(r))
        expect(r.dead_letter_queue in ("", None), "no dead_letter_queue", dump(r))
        s = r.settings
        expect(s is not None and s.batch_size == 10 and s.max_retries == 3
               and s.retry_delay == 0 and s.visibility_timeout_ms == 30000,
               "settings echoed (batch_size 10, max_retries 3, retry_delay 0, visibility_timeout_ms 30000)",
               dump(r))
        got = client.queues.get(q(), account_id=account)
        expect(got is not None and got.consumers_total_count == 1, "queue shows 1 consumer", dump(got))
        expect(got.consumers and got.consumers[0].consumer_id == r.consumer_id,
               "queue's consumers list holds the new consumer", dump(got))

    def push_text() -> None:
        ct, body = single_text
        r = client.queues.messages.push(q(), account_id=account, body=body, content_type=ct)
        expect(r is not None, "a push result", r)
        m = r.metadata.metrics if r.metadata else None
        expect(m is not None, "metadata.metrics in the push answer", dump(r))
        expect(m.backlog_count == 1, "backlog_count 1 after the first push", dump(r))

    def push_json() -> None:
        ct, body = single_json
        r = client.queues.messages.push(q(), account_id=account, body=body, content_type=ct)
        expect(r is not None and r.metadata and r.metadata.metrics, "metadata.metrics", dump(r))
        expect(r.metadata.metrics.backlog_count == 2, "backlog_count 2", dump(r))

    def bulk_push() -> None:
        r = client.queues.messages.bulk_push(
            q(), account_id=account, messages=[{"body": b, "content_type": ct} for ct, b in bulk]
        )
        expect(r is not None and r.metadata and r.metadata.metrics, "metadata.metrics", dump(r))
        expect(r.metadata.metrics.backlog_count == len(published),
               f"backlog_count {len(published)}", dump(r))

    def misspelt_publish_refused() -> None:
        # A misspelt delay must not be dropped (the message would be delivered at once): a 400 that
        # names the field, for a single publish, a batch and a message inside a batch; nothing stored.
        attempts = [
            ("delay_secnds", lambda: client.queues.messages.push(
                q(), account_id=account, body="typo", content_type="text", extra_body={"delay_secnds": 5})),
            ("delay_secnds", lambda: client.queues.messages.bulk_push(
                q(), account_id=account, messages=[{"body": "typo", "content_type": "text"}],
                extra_body={"delay_secnds": 5})),
            ("messages[1].delay_secnds", lambda: client.queues.messages.bulk_push(
                q(), account_id=account,
                messages=[{"body": "fine", "content_type": "text"},
                          {"body": "typo", "content_type": "text", "delay_secnds": 5}])),  # type: ignore[list-item]
        ]
        for field, call in attempts:
            try:
                call()
            except cloudflare.BadRequestError as e:
                expect(field in str(e), f"the 400 to name {field}", str(e))
                continue
            raise StepFailed(f"expected a 400 naming {field}; the publish succeeded")
        r = client.queues.get_metrics(q(), account_id=account)
        expect(r is not None and r.backlog_count == len(published),
               f"backlog_count still {len(published)}: the refused publishes stored nothing", dump(r))

    def metrics_before_pull() -> None:
        r = client.queues.get_metrics(q(), account_id=account)
        expect(r is not None, "metrics", r)
        expect(r.backlog_count == len(published), f"backlog_count {len(published)}", dump(r))
        expect(r.backlog_bytes > 0, "backlog_bytes > 0", dump(r))
        now_ms = time.time() * 1000
        expect(now_ms - 600_000 < r.oldest_message_timestamp_ms <= now_ms + 60_000,
               "oldest_message_timestamp_ms within the last minutes", dump(r))

    def pull() -> None:
        # A short lease: the message we leave un-acked must come back for the peek step.
        r = client.queues.messages.pull(q(), account_id=account, batch_size=10, visibility_timeout_ms=3000)
        expect(r is not None and r.messages is not None, "a pull result with messages", dump(r))
        msgs = r.messages
        expect(len(msgs) == len(published), f"{len(published)} messages", dump(r))
        expect(r.message_backlog_count is not None, "message_backlog_count", dump(r))
        ids = [m.id for m in msgs]
        expect(all(ids) and len(set(ids)) == len(ids), "distinct non-empty message ids", ids)
        leases = [m.lease_id for m in msgs]
        expect(all(leases) and len(set(leases)) == len(leases), "distinct non-empty lease ids", leases)
        now_ms = time.time() * 1000
        remaining = list(published)
        by_id: dict[str, tuple[str, object]] = {}
        for m in msgs:
            expect(m.attempts == 1, f"attempts 1 for message {m.id}", dump(m))
            expect(m.timestamp_ms is not None and now_ms - 600_000 < m.timestamp_ms <= now_ms + 60_000,
                   f"a recent timestamp_ms for message {m.id}", dump(m))
            meta = m.metadata if isinstance(m.metadata, dict) else {}
            ct = meta.get("CF-Content-Type")
            expect(ct in ("text", "json"), f"metadata CF-Content-Type text|json for {m.id}", dump(m))
            try:
                value = decode_pulled(m.body, ct)
            except Exception as e:  # noqa: BLE001 - report any decode failure as the step's failure
                raise StepFailed(f"body of {m.id} ({ct}) is not base64 of JSON bytes: {m.body!r} ({e})")
            expect((ct, value) in remaining,
                   f"body of {m.id} to be one of the published {ct} bodies (text plain, json base64)",
                   {"body": m.body, "decoded": value})
            remaining.remove((ct, value))
            by_id[m.id] = (ct, value)
        expect(not remaining, "every published message pulled exactly once", remaining)
        state["pulled"] = msgs
        state["by_id"] = by_id

    def ack() -> None:
        msgs = state["pulled"]
        to_ack, to_retry, to_leave = msgs[:4], msgs[4], msgs[5]
        r = client.queues.messages.ack(
            q(),
            account_id=account,
            acks=[{"lease_id": m.lease_id} for m in to_ack],
            retries=[{"lease_id": to_retry.lease_id, "delay_seconds": 1}],
        )
        expect(r is not None, "an ack result", r)
        expect(r.ack_count == 4, "ackCount 4", dump(r))
        expect(r.retry_count == 1, "retryCount 1", dump(r))
        expect(not r.warnings, "no warnings", dump(r))
        state["remaining_ids"] = {to_retry.id, to_leave.id}

    def metrics_after_ack() -> None:
        r = client.queues.get_metrics(q(), account_id=account)
        expect(r is not None and r.backlog_count == 2,
               "backlog_count 2 (one retried with a delay, one still leased)", dump(r))

    def peek() -> None:
        # The retried message is available after 1 s, the un-acked one once its 3 s lease
        # ends; whether peek also lists leased/delayed messages is not assumed, so poll
        # (bounded) until both remaining messages are visible.
        want = state["remaining_ids"]
        deadline = time.monotonic() + 15
        while True:
            r = client.queues.messages.peek(q(), account_id=account, batch_size=10)
            expect(r is not None and r.messages is not None, "a peek result with messages", dump(r))
            seen = {m.id for m in r.messages}
            expect(seen <= want, f"peek to list only un-acked messages {sorted(want)}", dump(r))
            if seen == want or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        expect(seen == want, f"peek to see both remaining messages {sorted(want)}", dump(r))
        by_id = state["by_id"]
        for m in r.messages:
            ct, value = by_id[m.id]
            expect(bool(m.ref), f"a ref for peeked message {m.id}", dump(m))
            expect(m.attempts is not None and m.attempts >= 1, f"attempts >= 1 for {m.id}", dump(m))
            try:
                decoded = decode_pulled(m.body, ct)
            except Exception as e:  # noqa: BLE001
                raise StepFailed(f"peek body of {m.id} ({ct}) is not base64 of JSON bytes: {m.body!r} ({e})")
            expect(decoded == value, f"peek body of {m.id} encoded as in pull", {"body": m.body, "want": value})
        state["peeked"] = r.messages
        # Peek must not lease: a second peek still sees the same messages.
        again = client.queues.messages.peek(q(), account_id=account, batch_size=10)
        expect(again is not None and {m.id for m in (again.messages or [])} == want,
               "a second peek to see the same messages (peek takes no lease)", dump(again))

    def purge_messages() -> None:
        victim = state["peeked"][0]
        r = client.queues.messages.purge(q(), account_id=account, refs=[{"ref": victim.ref}])
        expect(r is not None, "a message purge result", r)
        expect(not r.errors and not r.warnings, "no errors or warnings", dump(r))
        m = client.queues.get_metrics(q(), account_id=account)
        expect(m is not None and m.backlog_count == 1, "backlog_count 1 after purging one ref", dump(m))

    def purge_queue() -> None:
        # Put a couple more messages in first so the purge has real work to do.
        client.queues.messages.bulk_push(
            q(), account_id=account, messages=[{"body": "to purge", "content_type": "text"}] * 2
        )
        before = client.queues.get_metrics(q(), account_id=account)
        expect(before is not None and before.backlog_count == 3, "backlog_count 3 before purge", dump(before))
        r = client.queues.purge.start(q(), account_id=account, delete_messages_permanently=True)
        expect(r is not None and r.queue_id == q(), "the Queue back from purge", dump(r))
        expect(r.queue_name == queue_name, f"queue_name {queue_name!r}", dump(r))

    def purge_status() -> None:
        r = client.queues.purge.status(q(), account_id=account)
        expect(r is not None, "a purge status", r)
        expect(r.completed == "true", "completed 'true' (the API answers after the purge)", dump(r))
        expect(bool(r.started_at), "started_at set", dump(r))

    def metrics_after_purge() -> None:
        r = client.queues.get_metrics(q(), account_id=account)
        expect(r is not None and r.backlog_count == 0, "backlog_count 0 after purge", dump(r))
        expect(r.backlog_bytes == 0, "backlog_bytes 0 after purge", dump(r))
        p = client.queues.messages.pull(q(), account_id=account, batch_size=10)
        expect(p is not None and not p.messages, "pull finds no messages after purge", dump(p))

    def several_consumers() -> None:
        # A second consumer through the SDK unchanged: listed beside the first, receiving what is published
        # from then on, pulled by naming it (extra_body: the SDK has no field for it), deleted on its own.
        second = client.queues.consumers.create(q(), account_id=account, type="http_pull")
        listed = [c.consumer_id for c in client.queues.consumers.list(q(), account_id=account)]
        expect(len(listed) == 2 and listed[1] == second.consumer_id, "both consumers listed, oldest first", listed)
        client.queues.messages.push(q(), account_id=account, body="for both", content_type="text")
        for consumer in listed:
            p = client.queues.messages.pull(q(), account_id=account, batch_size=10,
                                            extra_body={"consumer_id": consumer})
            expect(p is not None and [m.body for m in p.messages] == ["for both"],
                   f"consumer {consumer} receives the message", dump(p))
        client.queues.consumers.delete(second.consumer_id, account_id=account, queue_id=q())
        left = [c.consumer_id for c in client.queues.consumers.list(q(), account_id=account)]
        expect(left == listed[:1], "the first consumer left", left)

    def delete_queue() -> None:
        r = client.queues.delete(q(), account_id=account)
        expect(r is not None, "a delete result", r)
        state["deleted"] = True
        try:
            client.queues.get(q(), account_id=account)
        except cloudflare.NotFoundError:
            return
        raise StepFailed("expected 404 NotFoundError from get after delete; got a queue")

    steps = [
        tokens_verify, create_queue, create_consumer, push_text, push_json, bulk_push,
        misspelt_publish_refused, metrics_before_pull, pull, ack, metrics_after_ack, peek, purge_messages,
        purge_queue, purge_status, metrics_after_purge, several_consumers, delete_queue,
    ]

    def clean_up(failed: bool) -> None:
        if failed and "queue_id" in state and not state.get("deleted") and not os.environ.get("SKIPLOCK_KEEP_QUEUE"):
            print(f"     (queue {queue_name} id {state['queue_id']})", file=sys.stderr)
            client.queues.delete(q(), account_id=account)

    return run_steps("sdk flow", steps, base_url, clean_up)


if __name__ == "__main__":
    sys.exit(main())
