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

-- One row per key that has messages in a queue, naming the key's head. Publishes insert it or lock it,
-- and a head's departure locks it, so a key's head and its parked messages never go out of step.
create table ordering_heads (
    queue_id      uuid not null,
    ordering_key  text collate "C" not null,
    head          uuid not null,
    primary key (queue_id, ordering_key)
) with (fillfactor = 70);

-- Makes the next message of each key whose head left the head, or forgets the key when none is left.
-- The keys are locked first, in key order as publishes lock them; the messages are then read by a
-- statement of their own, whose snapshot sees every message a publish that held a key's row committed.
create function hand_over_keys(queues uuid[], keys text[]) returns void language plpgsql as $$
begin
    perform 1 from ordering_heads h
    where (h.queue_id, h.ordering_key) in (select * from unnest(queues, keys))
    order by h.queue_id, h.ordering_key
    for update;
    if not found then
        return;
    end if;
    with next as (
        select h.queue_id, h.ordering_key, n.id, n.due_at
        from ordering_heads h
        left join lateral (
            select m.id, m.due_at from messages m
            where m.queue_id = h.queue_id and m.ordering_key = h.ordering_key
            order by m.published_at, m.id
            limit 1) n on true
        where (h.queue_id, h.ordering_key) in (select * from unnest(queues, keys))
          -- A head that is still there (a departure already handed over) keeps its place.
          and not exists (select 1 from messages m where m.id = h.head and m.queue_id = h.queue_id)),
    promoted as (
        update messages m set available_at = greatest(n.due_at, now()), due_at = null
        from next n where m.id = n.id and m.available_at = 'infinity'),
    advanced as (
        update ordering_heads h set head = n.id
        from next n where (h.queue_id, h.ordering_key) = (n.queue_id, n.ordering_key) and n.id is not null)
    delete from ordering_heads h
    using next n where (h.queue_id, h.ordering_key) = (n.queue_id, n.ordering_key) and n.id is null;
end $$;

-- Deletes (acks, purges, the retention sweep, queue deletion): one call per statement, and only when a
-- head left; a parked message leaving changes no head.
create function hand_over_deleted_keys() returns trigger language plpgsql as $$
declare
    queues uuid[];
    keys text[];
begin
    select array_agg(queue_id), array_agg(ordering_key) into queues, keys
    from (select distinct queue_id, ordering_key from gone
          where ordering_key is not null and available_at <> 'infinity') g;
    if queues is not null then
        perform hand_over_keys(queues, keys);
    end if;
    return null;
end $$;

create trigger messages_hand_over_deleted after delete on messages
    referencing old table as gone for each statement execute function hand_over_deleted_keys();

-- Moves between queues (dead-lettering, redrive) are rare, so a row trigger, named for `queue_id` so
-- that claims and retries never fire it. The source hands over its head; in the destination the
-- message becomes its key's head if the key has none there, or if it was published before a head that
-- was never delivered (messages a redrive moves arrive in any order); else it is parked.
create function move_ordered_message() returns trigger language plpgsql as $$
declare
    current uuid;
begin
    if old.available_at <> 'infinity' then
        perform hand_over_keys(array[old.queue_id], array[old.ordering_key]);
    end if;
    insert into ordering_heads as h (queue_id, ordering_key, head) values (new.queue_id, new.ordering_key, new.id)
    on conflict (queue_id, ordering_key) do update set head = h.head
    returning head into current;
    if current = new.id then
        return null;
    end if;
    if exists (select 1 from messages m
               where m.id = current and m.attempts = 0 and not m.leased
                 and (m.published_at, m.id) > (new.published_at, new.id)) then
        update messages set due_at = available_at, available_at = 'infinity' where id = current;
        update ordering_heads set head = new.id where queue_id = new.queue_id and ordering_key = new.ordering_key;
    else
        update messages set due_at = available_at, available_at = 'infinity' where id = new.id;
    end if;
    return null;
end $$;

create trigger messages_move_ordered after update of queue_id on messages
    for each row when (old.ordering_key is not null and old.queue_id is distinct from new.queue_id)
    execute function move_ordered_message();

create function forget_ordering_heads() returns trigger language plpgsql as $$
begin
    delete from ordering_heads;
    return null;
end $$;

create trigger messages_forget_heads after truncate on messages
    for each statement execute function forget_ordering_heads();
