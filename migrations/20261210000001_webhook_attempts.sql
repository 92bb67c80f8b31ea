-- The webhook attempt log (docs/webhooks.md, "Attempt log"): one row per POST to a consumer's endpoint, its
-- answer and how long it took. Written in batches by each node's attempt log, kept for a few days and at
-- most a bounded number of rows per consumer (the retention upkeep prunes both).
create table webhook_attempts (
    id            bigint generated always as identity,
    account_id    uuid not null,
    queue_id      uuid not null,
    consumer_id   uuid not null references consumers (id) on delete cascade,
    attempted_at  timestamptz not null,
    node          uuid not null,
    -- A test send (`POST .../consumers/{id}/test`) rather than a delivery.
    test          boolean not null default false,
    batch_size    integer not null,
    -- The first 100 of the batch's messages.
    message_ids   uuid[] not null,
    outcome       text not null,
    status        integer,
    latency_ms    integer not null,
    -- The first KiB of the answer's body, as text.
    response      text,
    -- Why no usable answer came, when none did.
    error         text,
    primary key (consumer_id, id)
);

-- The retention upkeep's age cut.
create index webhook_attempts_age on webhook_attempts (attempted_at);

-- A webhook consumer's endpoint health: the breaker reads and every node's log writes it.
create table webhook_health (
    consumer_id           uuid primary key references consumers (id) on delete cascade,
    account_id            uuid not null,
    consecutive_failures  integer not null default 0,
    failing_since         timestamptz,
    last_success_at       timestamptz,
    last_failure_at       timestamptz,
    last_failure_outcome  text,
    last_failure_status   integer,
    last_failure_error    text
);
