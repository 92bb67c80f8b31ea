-- Published and acked counts per queue in 10-second buckets, flushed by every node every few seconds:
-- the dashboard's throughput chart. Kept for an hour.
create table queue_activity (
    queue_id   uuid not null,
    bucket     timestamptz not null,
    published  bigint not null default 0,
    acked      bigint not null default 0,
    primary key (queue_id, bucket)
);
