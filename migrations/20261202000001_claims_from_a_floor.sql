-- Claims that survive a held snapshot (docs/design-notes.md, "Delivery beside a held snapshot").
--
-- A lease that runs is apart from the messages waiting to be claimed: `running` is true from a claim until
-- the lease runs out (the sweep then makes the message claimable again, its lease still current for an ack,
-- an extension or a retry), and false for messages that wait (ready, delayed, retried, parked). Claims walk
-- `messages_ready`, which has no entry for a message in a running lease, from a floor each node keeps per
-- queue; the sweep walks `messages_running` from a floor of its own. Every write of `available_at` uses the
-- clock at the write (`clock_timestamp()`), never the transaction's start, so that no row can commit with a
-- time before the start of a transaction still running, which is what a floor relies on.
alter table messages add column running boolean not null default false;
update messages set running = true where leased and available_at > now();

create index messages_ready on messages (queue_id, available_at, id) where not running;
create index messages_running on messages (available_at) where running;
drop index messages_claim;

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
            update messages m set available_at = greatest(n.due_at, clock_timestamp()), due_at = null
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
        select h.queue_id, h.ordering_key, h.published_at, h.id, n.row, n.due_at
        from heads h
        left join lateral (
            select m.ctid as row, m.due_at from messages m
            where m.queue_id = h.queue_id and m.ordering_key = h.ordering_key
              and m.available_at = 'infinity'
              and (m.published_at, m.id) > (h.published_at, h.id)
            order by m.published_at, m.id
            limit 1) n on true),
    promoted as (
        update messages m set available_at = greatest(n.due_at, clock_timestamp()), due_at = null
        from next n where m.ctid = n.row and m.available_at = 'infinity'
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
