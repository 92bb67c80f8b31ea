-- Redrive tasks: moving a queue's (dead-lettered) messages back to their source queues or to a named
-- queue. A task is a row any node may work on; a node holds it by a lease (`lease_until`, renewed with
-- every batch) so that a task whose node died is taken up by another once the lease runs out.
create table redrive_tasks (
    id                    uuid primary key,
    account_id            uuid not null references accounts (id) on delete cascade,
    queue_id              uuid not null references queues (id) on delete cascade,
    -- Null: each message returns to the queue it was dead-lettered from.
    destination_queue_id  uuid,
    destination_queue     text,
    status                text not null default 'running'
                          check (status in ('running', 'completed', 'cancelled', 'failed')),
    moved                 bigint not null default 0,
    total                 bigint not null default 0,
    -- Messages left in the queue because their destination does not exist.
    stayed                bigint not null default 0,
    rate_per_second       integer,
    error                 text,
    started_at            timestamptz not null default now(),
    finished_at           timestamptz,
    lease_until           timestamptz not null default '-infinity',
    lease_token           uuid
);
-- At most one running task per source queue: a second insert is a unique violation (409).
create unique index redrive_tasks_one_running on redrive_tasks (queue_id) where status = 'running';
create index redrive_tasks_by_queue on redrive_tasks (queue_id, started_at desc);

-- The messages a task set out to move and has not settled yet: fixed when the task starts, so a task
-- moves what was there then and not what arrives later; each batch deletes its rows in the transaction
-- that moves their messages, so a crash can neither lose nor repeat a move.
create table redrive_messages (
    task_id     uuid not null references redrive_tasks (id) on delete cascade,
    message_id  uuid not null,
    primary key (task_id, message_id)
);
