-- Schedules (docs/api.md, "Schedules"): a message published to a queue on a cron expression in a time
-- zone, or every so many seconds. Every node looks for due schedules; one takes a due schedule by holding
-- its row (held_by, held_until), publishes the tick's message under an idempotency key made from the tick,
-- and moves next_run_at on only if it still holds the row, so that a tick fires once across the nodes and
-- a node that dies mid-fire leaves the tick to another one, which stores it once. Expand only: a new
-- table that earlier releases do not read.
create table schedules (
    id                uuid primary key,
    account_id        uuid not null references accounts (id) on delete cascade,
    queue_id          uuid not null references queues (id) on delete cascade,
    cron              text,
    time_zone         text not null default 'UTC',
    interval_seconds  bigint,
    -- An interval schedule's ticks are counted from here.
    anchor_at         timestamptz not null default now(),
    content_type      smallint not null,
    body              bytea not null,
    delay_seconds     integer,
    idempotency_key   text,
    paused            boolean not null default false,
    next_run_at       timestamptz,
    last_run_at       timestamptz,
    last_error        text,
    runs              bigint not null default 0,
    held_by           uuid,
    held_until        timestamptz,
    created_at        timestamptz not null default now(),
    modified_at       timestamptz not null default now(),
    constraint schedules_one_cadence check ((cron is null) <> (interval_seconds is null))
);
create index schedules_by_account on schedules (account_id, created_at, id);
create index schedules_by_queue on schedules (queue_id);
create index schedules_due on schedules (next_run_at) where not paused;
