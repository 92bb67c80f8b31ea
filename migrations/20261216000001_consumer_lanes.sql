-- Several consumers per queue (docs/design-notes.md, "Several consumers per queue: lanes").
--
-- A queue's first consumer reads the queue itself; each further consumer reads a lane of its own: a
-- hidden queue row of the same account whose `parent_queue_id` is the queue. A publish to the queue stores
-- the message's body once and one narrow `messages` row in the queue and in each lane (the lane's copy
-- gets an id of its own, `fan_out_id`), so every consumer leases, retries, dead-letters and acks its copy
-- through the machinery a queue already has. Lanes never appear where a tenant lists or names queues.
alter table queues add column parent_queue_id uuid references queues (id) on delete cascade;
create index queues_lanes on queues (parent_queue_id) where parent_queue_id is not null;

-- The copies of a fanned-out message name its body (`body_id`, the id it was published under, on every
-- copy the queue's own included): a delete leaves such a body alone, and the young generation it lives in
-- takes it when truncated (`src/store/generations.rs`). Null, the usual case: the body is the row's own.
alter table messages add column body_id uuid;

-- A lane copy's id: the message's first six bytes (its time, so copies go to the end of the primary key's
-- index as the message did) and ten bytes of a hash of the message and the lane, the same in every part of
-- the statement that stores it.
create function fan_out_id(message uuid, lane uuid) returns uuid language sql immutable parallel safe as $$
    select encode(overlay(uuid_send(message) placing substring(decode(md5(message::text || lane::text), 'hex')
                                                               from 7 for 10) from 7 for 10), 'hex')::uuid
$$;

-- A lane keeps its queue's delivery settings, which its consumer's claims read from the lane's own row.
create function sync_lanes() returns trigger language plpgsql as $$
begin
    update queues set delivery_delay = new.delivery_delay, delivery_paused = new.delivery_paused,
                      message_retention_period = new.message_retention_period, modified_at = new.modified_at
    where parent_queue_id = new.id;
    return null;
end $$;
create trigger queues_sync_lanes after update of delivery_delay, delivery_paused, message_retention_period
    on queues for each row
    when (new.parent_queue_id is null
          and (old.delivery_delay, old.delivery_paused, old.message_retention_period)
              is distinct from (new.delivery_delay, new.delivery_paused, new.message_retention_period))
    execute function sync_lanes();

-- A lane's usage is its queue's: the fold adds it under the queue's id.
alter table metered_queues add column parent_queue_id uuid;
create or replace function meter_queue() returns trigger language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        update metered_queues set deleted_at = now() where queue_id = old.id;
    else
        insert into metered_queues (queue_id, account_id, name, parent_queue_id)
        values (new.id, new.account_id, new.name, new.parent_queue_id)
        on conflict (queue_id) do update set name = excluded.name;
    end if;
    return null;
end $$;

-- A lane's copy is not a publish: the message was written once, by the copy in the queue itself.
create or replace function count_stored_messages() returns trigger language plpgsql as $$
begin
    insert into queue_count_deltas (queue_id, messages, bytes, oldest, published, published_bytes, write_ops,
                                    delivered, delivered_bytes, read_ops)
    select queue_id, count(*), sum(size), min(published_at),
           count(*) filter (where body_id is null or body_id = id),
           coalesce(sum(size) filter (where body_id is null or body_id = id), 0),
           coalesce(sum(usage_chunks(size)) filter (where body_id is null or body_id = id), 0),
           count(*) filter (where leased), coalesce(sum(size) filter (where leased), 0),
           coalesce(sum(usage_chunks(size)) filter (where leased), 0)
    from stored group by queue_id;
    return null;
end $$;
