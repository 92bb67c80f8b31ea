-- Ordered delivery per key (docs/design-notes.md, "Ordered delivery"). Of a queue's messages with one
-- `ordering_key`, exactly one is visible to claims: the key's head. The others are parked at
-- available_at 'infinity', beyond the range every claim walks, with the time they would have been
-- visible kept in `due_at`. The claim therefore stays the one statement it is, takes at most one message
-- per key, and never looks at a parked message. When the head leaves its queue (acked, dead-lettered,
-- purged, expired, redriven) the triggers below make the key's next message the head.
alter table messages add column ordering_key text collate "C", add column due_at timestamptz;

-- The key's messages in publish order (a batch in array order: message ids are time-ordered by the node
-- that made them). Only keyed messages are in it.
create index messages_ordered on messages (queue_id, ordering_key, published_at, id)
    where ordering_key is not null;

-- One row per key that has messages in a queue. A publish inserts it, or locks it when the key has
-- messages already; `opened_by` is the message whose publish or arrival made the row, so a publish
-- tells from it whether its message is the key's head. The row goes with the key's last message.
create table ordering_keys (
    queue_id      uuid not null,
    ordering_key  text collate "C" not null,
    opened_by     uuid not null,
    primary key (queue_id, ordering_key)
) with (fillfactor = 70);

-- Makes the next message of each key whose head left the head, or forgets the key when none is left.
-- `after_at` and `after_ids` are the departed heads' publish times and ids: the next message comes after
-- its head, so the look starts there, past the index entries of the key's messages that went before
-- (dead until vacuumed, they would otherwise be walked by every hand-over of a draining key).
-- Usually the next message is there and one statement lets it go: a publish meanwhile only adds messages
-- behind it. Keys that seem to have none left are locked (in key order, as publishes lock keys) and
-- read again from their start by statements of their own, whose snapshots see the messages of every
-- publish that held such a key until then; only a key still without messages is forgotten.
create function hand_over_keys(queues uuid[], keys text[], after_at timestamptz[], after_ids uuid[])
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
            delete from ordering_keys h
            where (h.queue_id, h.ordering_key) in (select * from unnest(queues, keys))
              and not exists (select 1 from messages m where m.queue_id = h.queue_id and m.ordering_key = h.ordering_key);
            after_at := array_fill('-infinity'::timestamptz, array[cardinality(queues)]);
            after_ids := array_fill('00000000-0000-0000-0000-000000000000'::uuid, array[cardinality(queues)]);
        end if;
        -- Each key's first message in publish order goes, if it is parked. The update finds it by the
        -- row version the look found (a row changed meanwhile is not that version: its key is looked at
        -- again), which spares a walk down the primary key per key.
        with next as (
            select n.row, n.due_at
            from unnest(queues, keys, after_at, after_ids) as k(queue_id, ordering_key, after_at, after_id)
            cross join lateral (
                select m.ctid as row, m.due_at from messages m
                where m.queue_id = k.queue_id and m.ordering_key = k.ordering_key
                  and (m.published_at, m.id) > (k.after_at, k.after_id)
                order by m.published_at, m.id
                limit 1) n),
        promoted as (
            update messages m set available_at = greatest(n.due_at, now()), due_at = null
            from next n where m.ctid = n.row and m.available_at = 'infinity'
            returning m.queue_id, m.ordering_key)
        select array_agg(queue_id), array_agg(ordering_key) into let_go_queues, let_go_keys from promoted;
        select array_agg(k.queue_id), array_agg(k.ordering_key) into queues, keys
        from unnest(queues, keys) as k(queue_id, ordering_key)
        where (k.queue_id, k.ordering_key) not in (
            select * from unnest(coalesce(let_go_queues, '{}'), coalesce(let_go_keys, '{}')));
        exit when queues is null;
    end loop;
end $$;

-- Deletes (acks, purges, the retention sweep, queue deletion): one call per statement, and only when a
-- head left; a parked message leaving changes no head.
create function hand_over_deleted_keys() returns trigger language plpgsql as $$
declare
    queues uuid[];
    keys text[];
    after_at timestamptz[];
    after_ids uuid[];
begin
    select array_agg(queue_id), array_agg(ordering_key), array_agg(published_at), array_agg(id)
    into queues, keys, after_at, after_ids
    from (select distinct on (queue_id, ordering_key) queue_id, ordering_key, published_at, id from gone
          where ordering_key is not null and available_at <> 'infinity'
          order by queue_id, ordering_key, published_at, id) g;
    if queues is not null then
        perform hand_over_keys(queues, keys, after_at, after_ids);
    end if;
    return null;
end $$;

create trigger messages_hand_over_deleted after delete on messages
    referencing old table as gone for each statement execute function hand_over_deleted_keys();

-- Moves between queues (dead-lettering, redrive) are rare, so a row trigger, named for `queue_id` so
-- that claims and retries never fire it. The source hands over its head; in the destination the message
-- is its key's head if the key had no messages there, else it is parked (a redrive moves messages in id
-- order, which is publish order, so a key's messages arrive in order).
create function move_ordered_message() returns trigger language plpgsql as $$
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
        update messages set due_at = available_at, available_at = 'infinity' where id = new.id;
    end if;
    return null;
end $$;

create trigger messages_move_ordered after update of queue_id on messages
    for each row when (old.ordering_key is not null and old.queue_id is distinct from new.queue_id)
    execute function move_ordered_message();

create function forget_ordering_keys() returns trigger language plpgsql as $$
begin
    delete from ordering_keys;
    return null;
end $$;

create trigger messages_forget_heads after truncate on messages
    for each statement execute function forget_ordering_keys();
