-- Lets go the held messages of many keys in one statement: an ack of a batch whose messages belong to a
-- hundred keys at their limits called `flow_release` once per key (three statements each), which bounded
-- a limited drain to a sixth of an unlimited one (docs/benchmarks.md, "Flow control"). The rule is
-- `flow_release`'s, per key: as many as the key's room allows, in publish order, each at its rate's next
-- time and at most a period past its own due time. The caller holds the keys' rows.
create function flow_release_keys(queues uuid[], keys text[]) returns void language sql as $$
    with room as (
        select f.queue_id, f.flow_key, f.next_at, f.period, f.period / f.rate as spacing,
               case when f.paused then 0 else least(f.held, coalesce(f.parallelism - f.released, f.held)) end as room
        from flow_keys f
        where (f.queue_id, f.flow_key) in (select * from unnest(queues, keys))),
    next as (
        select r.queue_id, r.flow_key, r.next_at, r.period, r.spacing, n.tbl, n.row, n.due_at, n.i
        from room r
        cross join lateral (
            select m.tableoid as tbl, m.ctid as row, m.due_at,
                   row_number() over (order by m.published_at, m.id) as i
            from messages m
            where m.queue_id = r.queue_id and m.flow_key = r.flow_key and m.held
            order by m.published_at, m.id
            limit greatest(r.room, 0)) n
        where r.room > 0),
    slots as (
        select n.*,
               case when n.spacing is null then greatest(n.due_at, clock_timestamp())
                    else greatest(n.next_at, clock_timestamp(), max(n.due_at - (n.i - 1) * n.spacing) over key_order)
                         + (n.i - 1) * n.spacing
               end as at
        from next n
        window key_order as (partition by n.queue_id, n.flow_key order by n.i)),
    within as (
        select s.*, bool_and(s.spacing is null or s.at <= greatest(s.due_at, clock_timestamp()) + s.period)
                        over (partition by s.queue_id, s.flow_key order by s.i) as go
        from slots s),
    let_go as (
        update messages m set available_at = w.at, due_at = null, held = false
        from within w where m.tableoid = w.tbl and m.ctid = w.row and m.held and w.go
        returning w.queue_id, w.flow_key, w.at, w.spacing),
    per_key as (
        select queue_id, flow_key, count(*)::int as moved, max(at) as last, max(spacing) as spacing
        from let_go group by queue_id, flow_key)
    update flow_keys f
    set released = f.released + p.moved, held = f.held - p.moved, next_at = coalesce(p.last + p.spacing, f.next_at)
    from per_key p
    where f.queue_id = p.queue_id and f.flow_key = p.flow_key
$$;

-- As before, with the keys that have room released by one call.
create or replace function release_deleted_flow() returns trigger language plpgsql as $$
declare
    queues uuid[];
    keys text[];
begin
    with gone_keys as (
        select queue_id, flow_key, count(*) filter (where available_at <> 'infinity') as released,
               count(*) filter (where held) as held
        from gone where flow_key is not null
        group by queue_id, flow_key),
    locked as materialized (
        select f.queue_id, f.flow_key from flow_keys f
        where (f.queue_id, f.flow_key) in (select queue_id, flow_key from gone_keys)
        order by f.queue_id, f.flow_key
        for update),
    counted as (
        update flow_keys f
        set released = greatest(f.released - g.released, 0), held = greatest(f.held - g.held, 0)
        from gone_keys g
        where (f.queue_id, f.flow_key) in (select queue_id, flow_key from locked)
          and g.queue_id = f.queue_id and g.flow_key = f.flow_key
        returning f.queue_id, f.flow_key, f.released, f.held, f.parallelism, f.paused)
    select array_agg(queue_id order by queue_id, flow_key), array_agg(flow_key order by queue_id, flow_key)
    into queues, keys
    from counted
    where held > 0 and not paused and released < coalesce(parallelism, released + 1);
    if queues is not null then
        perform flow_release_keys(queues, keys);
    end if;
    return null;
end $$;
