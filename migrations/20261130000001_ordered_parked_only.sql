-- The index along a key's messages holds only parked messages (docs/design-notes.md, "Ordered delivery
-- per key"). The hand-over looks for a key's next parked message, and the check before a key's row is
-- forgotten asks whether any is left: a key's one message that is not parked is its head, which has just
-- left. So a head's updates (made the head, leased, retried) no longer write an entry here each.
drop index messages_ordered;
create index messages_ordered on messages (queue_id, ordering_key, published_at, id)
    where ordering_key is not null and available_at = 'infinity';

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
            select n.row, n.due_at
            from unnest(queues, keys, after_at, after_ids) as k(queue_id, ordering_key, after_at, after_id)
            cross join lateral (
                select m.ctid as row, m.due_at from messages m
                where m.queue_id = k.queue_id and m.ordering_key = k.ordering_key
                  and m.available_at = 'infinity'
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
