-- Each queue's message count and bytes, kept by the statements that store and delete messages, so a
-- backlog figure costs a row read instead of a count over the queue (counting a queue of millions took
-- a fifth of the database's time under a publish load). Statements append deltas rather than update a
-- counter row, so concurrent publishes to one queue never wait on each other; `fold_queue_counts` in
-- the service adds the deltas into `queue_counts` every second, and readers add the deltas not yet
-- folded, so every figure is exact as of the reader's snapshot.
create table queue_counts (
    queue_id  uuid primary key,
    messages  bigint not null,
    bytes     bigint not null,
    -- No later than the publish time of the queue's oldest message: publishes lower it, the retention
    -- sweep sets it from the messages, and it is null while the queue is empty.
    oldest    timestamptz
);

create table queue_count_deltas (
    queue_id  uuid not null,
    messages  bigint not null,
    bytes     bigint not null,
    oldest    timestamptz
);
-- Every fold empties it: vacuum it whenever it has a few thousand dead rows, not by scale, and never
-- cut its file short (that takes a lock which every publish and ack would wait behind).
alter table queue_count_deltas set (
    autovacuum_vacuum_threshold = 2000, autovacuum_vacuum_scale_factor = 0, vacuum_truncate = false);

-- What every reader of the counts uses: the folded row plus the deltas not yet folded. The oldest time
-- is null while the queue is empty.
create view queue_backlogs as
select queue_id, sum(messages)::int8 as messages, sum(bytes)::int8 as bytes,
       case when sum(messages) > 0 then min(oldest) end as oldest
from (select queue_id, messages, bytes, oldest from queue_counts
      union all
      select queue_id, messages, bytes, oldest from queue_count_deltas) as counted
group by queue_id;

create function count_stored_messages() returns trigger language plpgsql as $$
begin
    insert into queue_count_deltas (queue_id, messages, bytes, oldest)
    select queue_id, count(*), sum(size), min(published_at) from stored group by queue_id;
    return null;
end $$;

create function count_deleted_messages() returns trigger language plpgsql as $$
begin
    insert into queue_count_deltas (queue_id, messages, bytes)
    select queue_id, -count(*), -sum(size) from deleted group by queue_id;
    return null;
end $$;

create function forget_message_counts() returns trigger language plpgsql as $$
begin
    delete from queue_count_deltas;
    delete from queue_counts;
    return null;
end $$;

-- Moving messages between queues (dead-lettering) updates `queue_id`; that statement writes its own
-- deltas, since a trigger on every update would also run for every claim and retry.
create trigger messages_count_stored after insert on messages
    referencing new table as stored for each statement execute function count_stored_messages();
create trigger messages_count_deleted after delete on messages
    referencing old table as deleted for each statement execute function count_deleted_messages();
create trigger messages_count_truncated after truncate on messages
    for each statement execute function forget_message_counts();

insert into queue_counts (queue_id, messages, bytes, oldest)
select queue_id, count(*), sum(size), min(published_at) from messages group by queue_id;
