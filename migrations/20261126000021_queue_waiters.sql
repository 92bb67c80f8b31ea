-- Queues a long-polling pull waits on, on some node, until `until`: a publish or a retry sends its wake-up
-- for a queue read by pulls only while the queue has a row here, so queues nobody waits on cost no
-- notification. Each node refreshes its queues' rows at most every half minute. Unlogged: a wait does
-- not outlive a crash, and the rows are rewritten by the next waits.
create unlogged table queue_waiters (
    queue_id uuid primary key,
    until timestamptz not null
);
