-- Messages and their bodies in generations, so that the space of messages that are gone is reclaimed
-- by truncating a whole table, which no snapshot held open elsewhere in the database can hold back, where
-- vacuum could reclaim nothing while one lives (docs/design-notes.md, "Delivery beside a held snapshot").
--
-- `messages` and `message_bodies` are partitioned by `gen`. Generations 0 and 1 are young and take turns:
-- publishes store into the current one; the other one drains as its messages are acked, and is truncated
-- once empty (`src/engine/rotation.rs`), with its few long-lived messages (delayed far ahead, waiting in a
-- backlog nobody reads) moved to generation 2, the old one, which is never truncated and is vacuumed as
-- the tables were. The tables as they were become generation 2. Nothing but the rotation changes a row's
-- generation, and it changes the message's and its body's together.
create table message_generations (
    gen    smallint primary key,
    state  text not null check (state in ('current', 'draining', 'empty', 'old')),
    -- When it took its state.
    since  timestamptz not null default now()
);
insert into message_generations (gen, state) values (0, 'current'), (1, 'empty'), (2, 'old');

drop trigger messages_count_stored on messages;
drop trigger messages_count_deleted on messages;
drop trigger messages_count_truncated on messages;
drop trigger messages_hand_over_deleted on messages;
drop trigger messages_move_ordered on messages;
drop trigger messages_forget_heads on messages;

alter table messages rename to messages_old;
alter table message_bodies rename to message_bodies_old;
alter table messages_old drop constraint messages_pkey;
alter table message_bodies_old drop constraint message_bodies_pkey;
alter index messages_ready rename to messages_old_ready;
alter index messages_running rename to messages_old_running;
alter index messages_dead_letter_source rename to messages_old_dead_letter_source;
alter index messages_ordered rename to messages_old_ordered;
alter table messages_old add column gen smallint not null default 2;
alter table message_bodies_old add column gen smallint not null default 2;
alter table messages_old alter column gen drop default;
alter table message_bodies_old alter column gen drop default;
-- So that attaching them reads no row to check the bound.
alter table messages_old add constraint messages_old_gen check (gen = 2);
alter table message_bodies_old add constraint message_bodies_old_gen check (gen = 2);

create table messages (
    id                  uuid not null,
    queue_id            uuid not null,
    available_at        timestamptz not null,
    attempts            integer not null default 0,
    size                integer not null,
    published_at        timestamptz not null,
    leased              boolean not null default false,
    dead_letter_source  uuid,
    dead_lettered_at    timestamptz,
    ordering_key        text collate "C",
    due_at              timestamptz,
    running             boolean not null default false,
    gen                 smallint not null
) partition by list (gen);
alter table messages attach partition messages_old for values in (2);
create table messages_0 partition of messages for values in (0) with (fillfactor = 70, vacuum_truncate = false);
create table messages_1 partition of messages for values in (1) with (fillfactor = 70, vacuum_truncate = false);
alter table messages add primary key (id, gen);
create index messages_ready on messages (queue_id, available_at, id) where not running;
create index messages_running on messages (available_at) where running;
create index messages_dead_letter_source on messages (queue_id, dead_letter_source)
    where dead_letter_source is not null;
create index messages_ordered on messages (queue_id, ordering_key, published_at, id)
    where ordering_key is not null and available_at = 'infinity';

create table message_bodies (
    id            uuid not null,
    content_type  smallint not null,
    body          bytea not null,
    gen           smallint not null
) partition by list (gen);
alter table message_bodies attach partition message_bodies_old for values in (2);
create table message_bodies_0 partition of message_bodies for values in (0) with (vacuum_truncate = false);
create table message_bodies_1 partition of message_bodies for values in (1) with (vacuum_truncate = false);
alter table message_bodies add primary key (id, gen);

create trigger messages_count_stored after insert on messages
    referencing new table as stored for each statement execute function count_stored_messages();
create trigger messages_count_deleted after delete on messages
    referencing old table as deleted for each statement execute function count_deleted_messages();
-- Truncating the parent forgets every count and key; truncating one generation, which the rotation does
-- only to an empty one, fires neither.
create trigger messages_count_truncated after truncate on messages
    for each statement execute function forget_message_counts();
create trigger messages_hand_over_deleted after delete on messages
    referencing old table as gone for each statement execute function hand_over_deleted_keys();
create trigger messages_move_ordered after update of queue_id on messages
    for each row when (old.ordering_key is not null and old.queue_id is distinct from new.queue_id)
    execute function move_ordered_message();
create trigger messages_forget_heads after truncate on messages
    for each statement execute function forget_ordering_keys();

-- A row's place is its generation's table and its ctid there: the hand-over names both.
create or replace function hand_over_keys(queues uuid[], keys text[], after_at timestamptz[], after_ids uuid[])
returns void language plpgsql as $$
declare
    let_go_queues uuid[];
    let_go_keys text[];
begin
    for attempt in 1..2 loop
        if attempt = 2 then
            perform 1 from ordering_keys h
            where (h.queue_id, h.ordering_key) in (select * from unnest(queues, keys))
            order by h.queue_id, h.ordering_key
            for update;
            -- While a key's row is held, its messages other than the head that left are all parked:
            -- only a publish that makes the row makes a head.
            delete from ordering_keys h
            where (h.queue_id, h.ordering_key) in (select * from unnest(queues, keys))
              and not exists (select 1 from messages m
                              where m.queue_id = h.queue_id and m.ordering_key = h.ordering_key
                                and m.available_at = 'infinity');
            after_at := array_fill('-infinity'::timestamptz, array[cardinality(queues)]);
            after_ids := array_fill('00000000-0000-0000-0000-000000000000'::uuid, array[cardinality(queues)]);
        end if;
        -- Each key's first parked message in publish order goes. The update finds it by the row version
        -- the look found (a row changed meanwhile is not that version: its key is looked at again), which
        -- spares a walk down the primary key per key.
        with next as (
            select n.tbl, n.row, n.due_at
            from unnest(queues, keys, after_at, after_ids) as k(queue_id, ordering_key, after_at, after_id)
            cross join lateral (
                select m.tableoid as tbl, m.ctid as row, m.due_at from messages m
                where m.queue_id = k.queue_id and m.ordering_key = k.ordering_key
                  and m.available_at = 'infinity'
                  and (m.published_at, m.id) > (k.after_at, k.after_id)
                order by m.published_at, m.id
                limit 1) n),
        promoted as (
            update messages m set available_at = greatest(n.due_at, clock_timestamp()), due_at = null
            from next n where m.tableoid = n.tbl and m.ctid = n.row and m.available_at = 'infinity'
            returning m.queue_id, m.ordering_key)
        select array_agg(queue_id), array_agg(ordering_key) into let_go_queues, let_go_keys from promoted;
        select array_agg(k.queue_id), array_agg(k.ordering_key) into queues, keys
        from unnest(queues, keys) as k(queue_id, ordering_key)
        where (k.queue_id, k.ordering_key) not in (
            select * from unnest(coalesce(let_go_queues, '{}'), coalesce(let_go_keys, '{}')));
        exit when queues is null;
    end loop;
end $$;

create or replace function hand_over_deleted_keys() returns trigger language plpgsql as $$
declare
    queues uuid[];
    keys text[];
    after_at timestamptz[];
    after_ids uuid[];
begin
    with heads as (
        select distinct on (queue_id, ordering_key) queue_id, ordering_key, published_at, id from gone
        where ordering_key is not null and available_at <> 'infinity'
        order by queue_id, ordering_key, published_at, id),
    next as (
        select h.queue_id, h.ordering_key, h.published_at, h.id, n.tbl, n.row, n.due_at
        from heads h
        left join lateral (
            select m.tableoid as tbl, m.ctid as row, m.due_at from messages m
            where m.queue_id = h.queue_id and m.ordering_key = h.ordering_key
              and m.available_at = 'infinity'
              and (m.published_at, m.id) > (h.published_at, h.id)
            order by m.published_at, m.id
            limit 1) n on true),
    promoted as (
        update messages m set available_at = greatest(n.due_at, clock_timestamp()), due_at = null
        from next n where m.tableoid = n.tbl and m.ctid = n.row and m.available_at = 'infinity'
        returning m.queue_id, m.ordering_key)
    select array_agg(n.queue_id), array_agg(n.ordering_key), array_agg(n.published_at), array_agg(n.id)
    into queues, keys, after_at, after_ids
    from next n
    where not exists (select 1 from promoted p where p.queue_id = n.queue_id and p.ordering_key = n.ordering_key);
    if queues is not null then
        perform hand_over_keys(queues, keys, after_at, after_ids);
    end if;
    return null;
end $$;

-- A message moved into a queue behind its key's head is parked where it is, in its own generation.
create or replace function move_ordered_message() returns trigger language plpgsql as $$
declare
    opened_by uuid;
begin
    if old.available_at <> 'infinity' then
        perform hand_over_keys(array[old.queue_id], array[old.ordering_key], array[old.published_at], array[old.id]);
    end if;
    insert into ordering_keys as h (queue_id, ordering_key, opened_by)
    values (new.queue_id, new.ordering_key, new.id)
    on conflict on constraint ordering_keys_pkey do update set opened_by = h.opened_by
    returning h.opened_by into opened_by;
    if opened_by <> new.id then
        update messages set due_at = available_at, available_at = 'infinity' where gen = new.gen and id = new.id;
    end if;
    return null;
end $$;
