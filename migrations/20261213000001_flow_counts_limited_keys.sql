-- Flow control counts a key's messages only while limits apply to it (docs/design-notes.md, "Flow control
-- per key"). Counting every key cost a write of its row at each publish and each ack, which held W2f (a
-- drain whose keys have no limits) at 0.65x of W2. A key without limits now has no row and costs a
-- publish and an ack two index probes; when limits come to a key that has messages, the change counts
-- them from the messages, under a lock per queue that every statement counting the queue's keys shares,
-- so that none of them can commit a message the count missed, or miss a row the count made.

-- The queue's lock: shared by whatever counts its keys, taken alone by a change of its limits.
create function flow_share(q uuid) returns void language sql as $$
    select pg_advisory_xact_lock_shared(hashtext('flow_keys'), hashtext(q::text))
$$;

-- Makes (when limits apply to it) or locks the key's row, under the queue's shared lock; false when the
-- key has no limits and so no row. A volatile function, so that the limits it reads are those committed
-- when it runs, after the lock, not when its statement began.
create function flow_track(q uuid, key text) returns boolean language plpgsql as $$
declare
    l record;
begin
    perform flow_share(q);
    perform 1 from flow_keys f where f.queue_id = q and f.flow_key = key for update;
    if found then
        return true;
    end if;
    select * into l from flow_limits_of(q, key);
    if l.parallelism is null and l.rate is null and not l.paused then
        return false;
    end if;
    insert into flow_keys as f (queue_id, flow_key, parallelism, rate, period, paused)
    values (q, key, l.parallelism, l.rate, l.period, l.paused)
    on conflict (queue_id, flow_key) do update set paused = f.paused where false;
    return true;
end $$;

-- As before, but a key without limits lets its message go when due, and nothing is counted. The queue's
-- lock comes before the key's row, as everywhere.
create or replace function flow_admit(q uuid, key text, due timestamptz) returns timestamptz language plpgsql as $$
declare
    k flow_keys;
    at timestamptz;
begin
    perform flow_share(q);
    loop
        select * into k from flow_keys f where f.queue_id = q and f.flow_key = key for update;
        exit when found;
        if not flow_track(q, key) then
            return due;
        end if;
    end loop;
    if k.paused or k.held > 0 or k.released >= coalesce(k.parallelism, k.released + 1)
       or (k.rate is not null and k.next_at > greatest(due, clock_timestamp()) + k.period) then
        update flow_keys f set held = f.held + 1 where f.queue_id = q and f.flow_key = key;
        return 'infinity';
    end if;
    at := case when k.rate is null then due else greatest(due, k.next_at) end;
    update flow_keys f set released = f.released + 1, next_at = coalesce(at + k.period / k.rate, f.next_at)
    where f.queue_id = q and f.flow_key = key;
    return at;
end $$;

-- A move out of the queue (dead-lettering, redrive) counts under the queue's lock too: `flow_release`
-- takes it, then does what it did.
alter function flow_release(uuid, text, integer, integer) rename to flow_release_locked;

create function flow_release(q uuid, key text, gone_released integer, gone_held integer)
returns void language plpgsql as $$
begin
    perform flow_share(q);
    perform flow_release_locked(q, key, gone_released, gone_held);
end $$;

-- Applies the limits that now hold to the queue's keys (one key, or all of them when `only_key` is null),
-- with the queue's lock taken alone, so that no statement counting its keys is halfway through and
-- those after it read the new limits: every key that limits apply to is counted anew from its messages
-- (a key that had none had no row), the held messages that the limits allow are let go, and the rows of
-- keys left without limits are forgotten. Counting reads the queue's keyed messages, so a change of
-- limits costs a scan of the queue's backlog (none where no limit applies), and publishes and acks of its
-- keyed messages wait for it. (A purge of held messages at the same moment can deadlock with it, as it
-- deletes rows before its trigger takes the lock; PostgreSQL ends one of the two, a 503 to retry.)
create or replace function flow_apply_limits(q uuid, only_key text) returns void language plpgsql as $$
declare
    key text;
begin
    perform pg_advisory_xact_lock(hashtext('flow_keys'), hashtext(q::text));
    -- A sweep letting messages go holds its rows without the queue's lock: wait for it first.
    perform 1 from flow_keys f
    where f.queue_id = q and (only_key is null or f.flow_key = only_key)
    order by f.flow_key
    for update;
    if exists (select 1 from consumers c
               where c.queue_id = q and (c.flow_parallelism is not null or c.flow_rate is not null))
       or exists (select 1 from flow_limits o
                  where o.queue_id = q and (only_key is null or o.flow_key = only_key)) then
        with counted as (
            select m.flow_key, count(*) filter (where m.available_at <> 'infinity')::int as released,
                   count(*) filter (where m.held)::int as held
            from messages m
            where m.queue_id = q and m.flow_key is not null and (only_key is null or m.flow_key = only_key)
            group by m.flow_key),
        emptied as (
            update flow_keys f set released = 0, held = 0
            where f.queue_id = q and (only_key is null or f.flow_key = only_key)
              and f.flow_key not in (select c.flow_key from counted c))
        insert into flow_keys as f (queue_id, flow_key, released, held, parallelism, rate, period, paused)
        select q, c.flow_key, c.released, c.held, l.parallelism, l.rate, l.period, l.paused
        from counted c
        cross join lateral flow_limits_of(q, c.flow_key) l
        where l.parallelism is not null or l.rate is not null or l.paused
        order by c.flow_key
        on conflict (queue_id, flow_key) do update set released = excluded.released, held = excluded.held;
    end if;
    for key in
        select f.flow_key from flow_keys f
        where f.queue_id = q and (only_key is null or f.flow_key = only_key)
        order by f.flow_key
    loop
        update flow_keys f set (parallelism, rate, period, paused) = (
            select l.parallelism, l.rate, l.period, l.paused from flow_limits_of(q, key) l)
        where f.queue_id = q and f.flow_key = key;
        perform flow_release_locked(q, key, 0, 0);
    end loop;
    -- Without limits nothing is held (the release above let it all go) and nothing needs counting.
    delete from flow_keys f
    where f.queue_id = q and (only_key is null or f.flow_key = only_key)
      and f.parallelism is null and f.rate is null and not f.paused and f.held = 0;
end $$;

-- A consumer's limits changing (made with some, changed, removed with some) applies them in its statement's
-- transaction, so that no node can publish between the change and the count.
-- A queue's deletion, which removes its consumer, has nothing to apply: its keys go with its messages. It
-- must not take the queue's lock either: an ack takes it shared after deleting its rows (in the delete's
-- trigger), so a deletion holding it alone would wait for those rows while the ack waits for the lock.
create function apply_consumer_flow_limits() returns trigger language plpgsql as $$
declare
    q uuid := case when tg_op = 'DELETE' then old.queue_id else new.queue_id end;
begin
    if exists (select 1 from queues where id = q) then
        perform flow_apply_limits(q, null);
    end if;
    return null;
end $$;

create trigger consumers_flow_limits_made after insert on consumers
    for each row when (new.flow_parallelism is not null or new.flow_rate is not null)
    execute function apply_consumer_flow_limits();

create trigger consumers_flow_limits_changed after update on consumers
    for each row when ((old.flow_parallelism, old.flow_rate, old.flow_period)
                       is distinct from (new.flow_parallelism, new.flow_rate, new.flow_period))
    execute function apply_consumer_flow_limits();

create trigger consumers_flow_limits_removed after delete on consumers
    for each row when (old.flow_parallelism is not null or old.flow_rate is not null)
    execute function apply_consumer_flow_limits();

-- Deletes count under the lock of each queue they delete keyed messages from, taken before any key's row;
-- a delete without keyed messages stops at the first look.
create or replace function release_deleted_flow() returns trigger language plpgsql as $$
declare
    queues uuid[];
    keys text[];
begin
    select array_agg(distinct g.queue_id) into queues from gone g where g.flow_key is not null;
    if queues is null then
        return null;
    end if;
    perform flow_share(q) from unnest(queues) as q;
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

-- The keys counted so far without limits are forgotten (none of them holds a message).
delete from flow_keys where parallelism is null and rate is null and not paused and held = 0;
