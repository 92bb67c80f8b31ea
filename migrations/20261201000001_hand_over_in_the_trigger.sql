-- An ack of keyed heads lets each key's next message go in the trigger's own statement (docs/design-notes.md,
-- "Ordered delivery per key"): finding the heads that left, the look for each one's next parked message
-- and the update are one statement, and `hand_over_keys` is called only for keys it did not let go (none
-- left, or a next message changed meanwhile). That spares a function call and two statements per ack.
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
        update messages m set available_at = greatest(n.due_at, now()), due_at = null
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
