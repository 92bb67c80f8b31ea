-- Idempotent publishing: each queue remembers the keys it accepted for `idempotency_window` seconds.
alter table queues add column idempotency_window integer not null default 300
    check (idempotency_window between 0 and 604800);

-- One row per remembered key; a publish inserts it in the statement that stores the message, so a key
-- is remembered exactly when its message is committed. Rows past `expires_at` no longer count and are
-- removed by the maintenance task in bounded batches. As with `messages`, no foreign key: its check is
-- a trigger call per row on the publish path; deleting a queue deletes its keys itself.
create table idempotency_keys (
    queue_id    uuid not null,
    key         text not null,
    message_id  uuid not null,
    expires_at  timestamptz not null,
    primary key (queue_id, key)
);
-- Keys arrive in about the order they expire, so a block-range index finds the expired ones at a
-- fraction of a b-tree's cost per insert.
create index idempotency_keys_expiry on idempotency_keys using brin (expires_at);
