-- The count deltas in two halves that take turns, so that the space of folded deltas is reclaimed by
-- truncating a half whole, as a message generation's is: beside a snapshot held open elsewhere, deleted
-- deltas could not be vacuumed, and the fold and the backlog figures read them all each second
-- (docs/benchmarks.md, W10). A delta goes to the half of the clock's 10 s step it is written in (an
-- expression the planner inlines: no table is read per row); each turn of the rotation folds and
-- truncates the other half under a lock (`src/store/counts.rs`).
create function count_delta_half() returns smallint language sql stable as $$
    select ((extract(epoch from statement_timestamp())::bigint / 10) % 2)::smallint
$$;

drop view queue_backlogs;
alter table queue_count_deltas rename to queue_count_deltas_before;
create table queue_count_deltas (
    queue_id  uuid not null,
    messages  bigint not null,
    bytes     bigint not null,
    oldest    timestamptz,
    half      smallint not null default count_delta_half()
) partition by list (half);
create table queue_count_deltas_0 partition of queue_count_deltas for values in (0);
create table queue_count_deltas_1 partition of queue_count_deltas for values in (1);
-- As before: vacuumed whenever a few thousand rows are dead, its file never cut short by vacuum (that
-- lock would stop every publish and ack); the truncation of a half gives the space back instead.
alter table queue_count_deltas_0 set (
    autovacuum_vacuum_threshold = 2000, autovacuum_vacuum_scale_factor = 0, vacuum_truncate = false);
alter table queue_count_deltas_1 set (
    autovacuum_vacuum_threshold = 2000, autovacuum_vacuum_scale_factor = 0, vacuum_truncate = false);
insert into queue_count_deltas (queue_id, messages, bytes, oldest)
select queue_id, messages, bytes, oldest from queue_count_deltas_before;
drop table queue_count_deltas_before;

create view queue_backlogs as
select queue_id, sum(messages)::int8 as messages, sum(bytes)::int8 as bytes,
       case when sum(messages) > 0 then min(oldest) end as oldest
from (select queue_id, messages, bytes, oldest from queue_counts
      union all
      select queue_id, messages, bytes, oldest from queue_count_deltas) as counted
group by queue_id;
