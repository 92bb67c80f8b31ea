-- Flow control per key (docs/design-notes.md, "Flow control per key"). A message may carry a `flow_key`.
-- Of a queue's messages with one key, at most `parallelism` are *let go* at once (ready, leased, or
-- waiting for a retry), and they are let go at most `rate` per `period`, evenly spaced. The others are
-- *held*: parked at available_at 'infinity' as ordering keys park them, beyond every claim's range, with
-- `held` set and the time they were due in `due_at`. A held message is let go, in publish order, when one
-- of its key's let-go messages leaves the queue or when the key's limits grow. A message with an
-- ordering key waits for its turn in its order first, and is admitted to its flow key when its turn comes.
alter table messages add column flow_key text collate "C", add column held boolean not null default false;

-- A key's held messages in publish order: the release walks it.
create index messages_held on messages (queue_id, flow_key, published_at, id) where held;

-- The consumer's limits for every key of its queue (null: no limit). `flow_period` in seconds.
alter table consumers add column flow_parallelism integer, add column flow_rate integer, add column flow_period integer;

-- The account's limits for one key, over the consumer's: a null field takes the consumer's.
create table flow_limits (
    queue_id     uuid not null references queues (id) on delete cascade,
    flow_key     text collate "C" not null,
    parallelism  integer,
    rate         integer,
    period       integer,
    paused       boolean not null default false,
    updated_at   timestamptz not null default now(),
    primary key (queue_id, flow_key)
);

-- One row per key while it has messages (maintenance forgets a key with none, once its rate allows a
-- message at once). The limits that apply are copied into it when it is made and whenever they change,
-- so that a publish reads one row. With a rate, the key's messages are let go `period / rate` apart,
-- `next_at` being the earliest time for the next one, and never more than a period's worth ahead of
-- their time: the rest are held, and let go as those ahead are delivered and leave.
create table flow_keys (
    queue_id     uuid not null,
    flow_key     text collate "C" not null,
    released     integer not null default 0,
    held         integer not null default 0,
    next_at      timestamptz not null default '-infinity',
    parallelism  integer,
    rate         integer,
    period       interval,
    paused       boolean not null default false,
    primary key (queue_id, flow_key)
) with (fillfactor = 70);

-- Keys holding messages back, for the sweep that lets go what a key's rate allows in time.
create index flow_keys_waiting on flow_keys (queue_id, flow_key) where held > 0;

-- The limits that apply to a key: the account's for it, else the consumer's.
create function flow_limits_of(q uuid, key text)
returns table (parallelism integer, rate integer, period interval, paused boolean)
language sql stable as $$
    select coalesce(o.parallelism, c.flow_parallelism), coalesce(o.rate, c.flow_rate),
           make_interval(secs => coalesce(o.period, c.flow_period, 1)), coalesce(o.paused, false)
    from (select) one
    left join consumers c on c.queue_id = q
    left join flow_limits o on o.queue_id = q and o.flow_key = key
$$;

-- Admits a message due at `due` to its key: returns the time it may be delivered (its key's rate may put
-- it later, by up to a period), or 'infinity' when it is held. Holds it also when the key holds others,
-- so that a key's messages go in publish order. Makes the key's row when there is none.
create function flow_admit(q uuid, key text, due timestamptz) returns timestamptz language plpgsql as $$
declare
    k flow_keys;
    at timestamptz;
begin
    loop
        select * into k from flow_keys f where f.queue_id = q and f.flow_key = key for update;
        exit when found;
        insert into flow_keys (queue_id, flow_key, parallelism, rate, period, paused)
        select q, key, l.parallelism, l.rate, l.period, l.paused from flow_limits_of(q, key) l
        on conflict do nothing;
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

-- Lets go as many of a key's held messages as its limits allow, in publish order, each at its rate's next
-- time (within a period of its own), after `gone_released` of its let-go and `gone_held` of its held
-- messages left the queue.
create function flow_release(q uuid, key text, gone_released integer, gone_held integer)
returns void language plpgsql as $$
declare
    k flow_keys;
    spacing interval;
    room integer;
    moved integer;
    last timestamptz;
begin
    select * into k from flow_keys f where f.queue_id = q and f.flow_key = key for update;
    if not found then
        return;
    end if;
    k.released := greatest(k.released - gone_released, 0);
    k.held := greatest(k.held - gone_held, 0);
    spacing := k.period / k.rate;
    room := case when k.paused then 0 else least(k.held, coalesce(k.parallelism - k.released, k.held)) end;
    if room > 0 then
        -- Without a rate a message goes when due. With one, the i-th goes `spacing` after the one before
        -- it, and not before its key's next time, its own due time and those of the ones before it; the
        -- first whose time lies more than a period past its due time stays held, with those after it.
        with next as (
            select m.tableoid as tbl, m.ctid as row, m.due_at,
                   row_number() over (order by m.published_at, m.id) as i
            from messages m
            where m.queue_id = q and m.flow_key = key and m.held
            order by m.published_at, m.id
            limit room),
        slots as (
            select n.tbl, n.row, n.i, n.due_at,
                   case when spacing is null then greatest(n.due_at, clock_timestamp())
                        else greatest(k.next_at, clock_timestamp(),
                                      max(n.due_at - (n.i - 1) * spacing) over (order by n.i))
                             + (n.i - 1) * spacing
                   end as at
            from next n),
        within as (
            select s.*, bool_and(spacing is null or s.at <= greatest(s.due_at, clock_timestamp()) + k.period)
                            over (order by s.i) as go
            from slots s),
        let_go as (
            update messages m set available_at = w.at, due_at = null, held = false
            from within w where m.tableoid = w.tbl and m.ctid = w.row and m.held and w.go
            returning w.at)
        select count(*), max(at) into moved, last from let_go;
        k.released := k.released + moved;
        k.held := k.held - moved;
        if moved > 0 and spacing is not null then
            k.next_at := last + spacing;
        end if;
    end if;
    update flow_keys f set released = k.released, held = k.held, next_at = k.next_at
    where f.queue_id = q and f.flow_key = key;
end $$;

-- Copies a queue's limits (of one key, or of all its keys when `only_key` is null) into its keys' rows
-- and lets go what they now allow: after a consumer or a key's limits changed.
create function flow_apply_limits(q uuid, only_key text) returns void language plpgsql as $$
declare
    key text;
begin
    for key in
        select f.flow_key from flow_keys f
        where f.queue_id = q and (only_key is null or f.flow_key = only_key)
        order by f.flow_key
    loop
        update flow_keys f set (parallelism, rate, period, paused) = (
            select l.parallelism, l.rate, l.period, l.paused from flow_limits_of(q, key) l)
        where f.queue_id = q and f.flow_key = key;
        perform flow_release(q, key, 0, 0);
    end loop;
end $$;

-- A publish (not a move between generations, which only the rotation makes, into the old one) admits
-- each keyed message that is not parked behind its ordering key; and an ordering key's hand-over admits
-- the message whose turn it makes, when that message has a flow key (a move between queues is admitted
-- by its own trigger below).
create function admit_flow() returns trigger language plpgsql as $$
declare
    due timestamptz := new.available_at;
begin
    new.available_at := flow_admit(new.queue_id, new.flow_key, due);
    if new.available_at = 'infinity' then
        new.held := true;
        new.due_at := due;
    end if;
    return new;
end $$;

create trigger messages_admit_flow before insert on messages
    for each row when (new.flow_key is not null and new.gen < 2 and new.available_at <> 'infinity')
    execute function admit_flow();

create trigger messages_admit_flow_in_turn before update of available_at on messages
    for each row when (new.flow_key is not null and old.available_at = 'infinity' and not old.held
                       and new.available_at <> 'infinity' and old.queue_id = new.queue_id)
    execute function admit_flow();

-- Deletes (acks, purges, the retention sweep, queue deletion): once per statement, the keys' counts in one
-- update (their rows locked in key order first, as publishes lock them), and a release only for keys that
-- hold messages back and now have room for some.
create function release_deleted_flow() returns trigger language plpgsql as $$
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
        perform flow_release(k.queue_id, k.flow_key, 0, 0) from unnest(queues, keys) as k(queue_id, flow_key);
    end if;
    return null;
end $$;

create trigger messages_release_flow after delete on messages
    referencing old table as gone for each statement execute function release_deleted_flow();

-- Moves between queues (dead-lettering, redrive): the message leaves its key in the source and is
-- admitted in the destination, as the ordering key's trigger left it (it fires first: triggers fire in
-- name order), unless that parked it behind its ordering key.
create function move_flow_message() returns trigger language plpgsql as $$
declare
    m record;
    due timestamptz;
    at timestamptz;
begin
    perform flow_release(old.queue_id, old.flow_key, (old.available_at <> 'infinity')::int, old.held::int);
    select available_at, held, due_at into m from messages where gen = new.gen and id = new.id;
    if m.available_at = 'infinity' and not m.held then
        return null;
    end if;
    due := case when m.held then m.due_at else m.available_at end;
    at := flow_admit(new.queue_id, new.flow_key, due);
    update messages set held = at = 'infinity', available_at = at,
                        due_at = case when at = 'infinity' then due end
    where gen = new.gen and id = new.id;
    return null;
end $$;

create trigger messages_move_throttled after update of queue_id on messages
    for each row when (old.flow_key is not null and old.queue_id is distinct from new.queue_id)
    execute function move_flow_message();

-- A held message is its ordering key's head (only the head is admitted), so a held message leaving its
-- queue hands its ordering key over as a head that is not parked does; and a held message parked in a
-- destination behind its ordering key keeps the time it was due.
create or replace function hand_over_deleted_keys() returns trigger language plpgsql as $$
declare
    queues uuid[];
    keys text[];
    after_at timestamptz[];
    after_ids uuid[];
begin
    with heads as (
        select distinct on (queue_id, ordering_key) queue_id, ordering_key, published_at, id from gone
        where ordering_key is not null and (available_at <> 'infinity' or held)
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

create or replace function move_ordered_message() returns trigger language plpgsql as $$
declare
    opened_by uuid;
begin
    if old.available_at <> 'infinity' or old.held then
        perform hand_over_keys(array[old.queue_id], array[old.ordering_key], array[old.published_at], array[old.id]);
    end if;
    insert into ordering_keys as h (queue_id, ordering_key, opened_by)
    values (new.queue_id, new.ordering_key, new.id)
    on conflict on constraint ordering_keys_pkey do update set opened_by = h.opened_by
    returning h.opened_by into opened_by;
    if opened_by <> new.id then
        update messages set due_at = case when held then due_at else available_at end,
                            available_at = 'infinity', held = false
        where gen = new.gen and id = new.id;
    end if;
    return null;
end $$;

create or replace function forget_ordering_keys() returns trigger language plpgsql as $$
begin
    delete from ordering_keys;
    delete from flow_keys;
    return null;
end $$;
