-- A queue's deletion commits the queue's row gone first and deletes its messages after it, in batches that
-- skip the rows other statements hold (docs/design-notes.md, "Deleting a queue"). Deleting them in the
-- same transaction locked all of them in id order while the queue's consumers still acked theirs in their
-- own order: under a busy webhook consumer the two deadlocked again and again. Once the queue's row is
-- gone, no ack or claim finds the queue; a deleted queue is kept here until none of its messages is left,
-- so that the background upkeep on any node finishes what a deletion could not (a row held at the time,
-- a node killed halfway).
create table deleted_queues (
    queue_id    uuid primary key,
    deleted_at  timestamptz not null default now()
);
