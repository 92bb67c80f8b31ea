#!/usr/bin/env python3
"""Long polling and lease extension through the official Cloudflare Python SDK's escape hatch.

The SDK (cloudflare==5.9.0) has no methods for skiplock's extensions; a user reaches them with the
SDK's raw request, `client.post(path, cast_to=object, body=...)` (its README: "Making
custom/undocumented requests"), which keeps the SDK's auth, base URL, timeouts and errors. This
drives the two patterns a consumer relies on (docs/api.md): a long-polling pull that answers when a
message is published, and the heartbeat that keeps a message leased while it is worked on.

Inputs (environment):
  SKIPLOCK_BASE_URL     e.g. http://127.0.0.1:8787/client/v4
  SKIPLOCK_TOKEN        a token of SKIPLOCK_ACCOUNT with queues_read + queues_write
  SKIPLOCK_ACCOUNT      the 32-hex account id
  SKIPLOCK_METRICS_URL  the node's metrics address, e.g. http://127.0.0.1:9787 (its waiting-pulls gauge
                        tells when the pull waits)

Exit status 0 and a last line `long poll and extend: N passed, 0 failed` on success.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
import threading
import time

import httpx
from cloudflare import Cloudflare

from steps import expect, run_steps

# The lease of the heartbeat step, and how long the pull after it waits: past the lease's first end.
LEASE_MS = 2400
SECOND_PULL_WAIT_MS = 3600
LONG_POLL_WAIT_MS = 20000


def heartbeat(client: Cloudflare, messages: str, lease_id: str, timeout_ms: int, done: threading.Event,
              answers: list) -> None:
    """docs/api.md's heartbeat: every third of the timeout, extend the lease to the timeout again."""
    while not done.wait(timeout_ms / 3000):
        r = client.post(f"{messages}/extend", cast_to=object,
                        body={"leases": [{"lease_id": lease_id, "visibility_timeout_ms": timeout_ms}]})
        answers.append(r["result"])
        if r["result"]["extendCount"] == 0:
            break


def main() -> int:
    env = {v: os.environ.get(v, "") for v in
           ("SKIPLOCK_BASE_URL", "SKIPLOCK_TOKEN", "SKIPLOCK_ACCOUNT", "SKIPLOCK_METRICS_URL")}
    missing = [k for k, v in env.items() if not v]
    if missing:
        print(f"long poll and extend: missing environment: {', '.join(missing)}", file=sys.stderr)
        return 2
    account = env["SKIPLOCK_ACCOUNT"]
    # max_retries=0: a failed request fails the step rather than being sent again. The timeout is above
    # the longest wait.
    client = Cloudflare(api_token=env["SKIPLOCK_TOKEN"], base_url=env["SKIPLOCK_BASE_URL"].rstrip("/"),
                        max_retries=0, timeout=30)
    state: dict[str, object] = {}

    def messages() -> str:
        return f"/accounts/{account}/queues/{state['queue_id']}/messages"

    def pull(**body: object) -> dict:
        r = client.post(f"{messages()}/pull", cast_to=object, body=body)
        expect(r.get("success") is True, "a successful pull", r)
        return r["result"]

    def waiting_pulls() -> int:
        text = httpx.get(f"{env['SKIPLOCK_METRICS_URL'].rstrip('/')}/metrics", timeout=5).text
        found = re.search(r"^skiplock_waiting_pulls (\d+)", text, re.MULTILINE)
        return int(found.group(1)) if found else 0

    def create_queue() -> None:
        name = f"sdk-long-poll-{secrets.token_hex(4)}"
        state["queue_id"] = client.queues.create(account_id=account, queue_name=name).queue_id
        client.queues.consumers.create(str(state["queue_id"]), account_id=account, type="http_pull")

    def a_long_poll_answers_with_the_message_published_while_it_waits() -> None:
        answer: dict[str, object] = {}

        def waiting_pull() -> None:
            started = time.monotonic()
            try:
                answer["result"] = pull(batch_size=10, visibility_timeout_ms=LEASE_MS,
                                        wait_time_ms=LONG_POLL_WAIT_MS)
            except Exception as e:  # noqa: BLE001 - reported by the main thread
                answer["error"] = e
            answer["took_ms"] = (time.monotonic() - started) * 1000

        puller = threading.Thread(target=waiting_pull)
        puller.start()
        # The queue is empty, so the pull waits; publish only once the node counts it as waiting.
        deadline = time.monotonic() + 10
        while waiting_pulls() < 1:
            expect(puller.is_alive(), "the pull to wait on the empty queue", answer)
            expect(time.monotonic() < deadline, "the pull to be waiting within 10 s", waiting_pulls())
            time.sleep(0.01)
        body = f"published while a pull waits {secrets.token_hex(4)}"
        client.queues.messages.push(str(state["queue_id"]), account_id=account, body=body, content_type="text")
        puller.join(LONG_POLL_WAIT_MS / 1000 + 5)
        expect("error" not in answer, "the waiting pull to succeed", answer.get("error"))
        got = answer["result"]["messages"]
        expect(len(got) == 1 and got[0]["body"] == body, f"the pull to return {body!r}", got)
        expect(answer["took_ms"] < LONG_POLL_WAIT_MS,
               f"the pull to answer before its {LONG_POLL_WAIT_MS} ms wait ended", answer["took_ms"])
        state["message"] = got[0]

    def a_heartbeat_keeps_the_message_from_a_second_pull_and_the_lease_id_still_acks() -> None:
        lease_id = state["message"]["lease_id"]
        done, answers = threading.Event(), []
        beating = threading.Thread(target=heartbeat,
                                   args=(client, messages(), lease_id, LEASE_MS, done, answers))
        beating.start()
        try:
            # This pull waits past the end of the lease the first pull took: a lease that ran out would
            # end its wait with the message delivered again.
            second = pull(batch_size=10, wait_time_ms=SECOND_PULL_WAIT_MS)
        finally:
            done.set()
            beating.join()
        expect(second["messages"] == [], "no message for the second pull while the heartbeat extends",
               second["messages"])
        expect(len(answers) >= 2, "at least two heartbeats during the second pull's wait", answers)
        expect(all(a["extendCount"] == 1 and not a["warnings"] for a in answers),
               "each heartbeat to extend the lease (extendCount 1, no warnings)", answers)
        # The ack rides on the next pull, as in docs/api.md's consumer loop.
        after = pull(batch_size=10, acks=[{"lease_id": lease_id}])
        expect(after["ackCount"] == 1 and not after["warnings"],
               "the first pull's lease id to ack the message after the heartbeats", after)
        expect(after["messages"] == [] and after["message_backlog_count"] == 0, "an empty queue after the ack",
               after)

    def without_an_extension_the_lease_runs_out_and_the_message_comes_back() -> None:
        # The control: the same wait that found nothing above returns the message when no heartbeat runs.
        body = f"not extended {secrets.token_hex(4)}"
        client.queues.messages.push(str(state["queue_id"]), account_id=account, body=body, content_type="text")
        first = pull(batch_size=10, visibility_timeout_ms=500)
        expect([m["body"] for m in first["messages"]] == [body], f"the first pull to lease {body!r}", first)
        again = pull(batch_size=10, wait_time_ms=SECOND_PULL_WAIT_MS)
        expect([m["body"] for m in again["messages"]] == [body] and again["messages"][0]["attempts"] == 2,
               "the message delivered again once its lease ran out", again)
        client.post(f"{messages()}/ack", cast_to=object,
                    body={"acks": [{"lease_id": again["messages"][0]["lease_id"]}]})

    steps = [
        create_queue,
        a_long_poll_answers_with_the_message_published_while_it_waits,
        a_heartbeat_keeps_the_message_from_a_second_pull_and_the_lease_id_still_acks,
        without_an_extension_the_lease_runs_out_and_the_message_comes_back,
    ]
    def clean_up(_failed: bool) -> None:
        if "queue_id" in state:
            client.queues.delete(str(state["queue_id"]), account_id=account)

    return run_steps("long poll and extend", steps, env["SKIPLOCK_BASE_URL"], clean_up)


if __name__ == "__main__":
    sys.exit(main())
