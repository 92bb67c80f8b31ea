-- Idempotent publishing: each queue remembers the keys it accepted for `idempotency_window` seconds.
alter table queues add column idempotency_window integer not null default 300
    check (idempotency_window between 0 and 604800);

-- One row per remembered key; a publish inserts it in the statement that stores the message, so a key
-- is remembered exactly when its message is committed. Rows past `expires_at` no longer count and are
-- removed by the maintenance task in bounded batches.
create table idempotency_keys (
    queue_id    uuid not null references queues (id) on delete cascade,
    key         text not null,
    message_id  uuid not null,
    expires_at  timestamptz not null,
    primary key (queue_id, key)
);
create index idempotency_keys_expiry on idempotency_keys (expires_at);
