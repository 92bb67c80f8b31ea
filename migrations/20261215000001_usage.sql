-- Usage a business can bill on (docs/api.md, "Usage"), per account, queue and hour (UTC), counted by the
-- statements that do the work, in their own transactions: the count deltas they already write (the
-- `queue_counts` migration) carry the usage too, and the fold that adds the deltas into `queue_counts`
-- adds their usage into `usage_hours` in the same statement. A publish answered 2xx is then counted once
-- and a rolled-back one never, through crashes of nodes or of PostgreSQL, at the price of a few columns
-- in rows that are written anyway (a claim and a retry write one delta row each).
--
-- Operations follow Cloudflare's model: each 64 KB chunk of a message written, read or deleted is one.
alter table queue_count_deltas
    add column epoch_hour       integer not null default floor(extract(epoch from statement_timestamp()) / 3600)::integer,
    add column published        bigint not null default 0,
    add column published_bytes  bigint not null default 0,
    add column delivered        bigint not null default 0,
    add column delivered_bytes  bigint not null default 0,
    add column acked            bigint not null default 0,
    add column retried          bigint not null default 0,
    add column dead_lettered    bigint not null default 0,
    add column expired          bigint not null default 0,
    add column write_ops        bigint not null default 0,
    add column read_ops         bigint not null default 0,
    add column delete_ops       bigint not null default 0;

-- The 64 KB chunks of a message of `size` bytes (an empty message is one).
create function usage_chunks(size integer) returns integer language sql immutable parallel safe as $$
    select (greatest(size, 1) + 65535) / 65536
$$;

-- Every queue ever metered, kept after the queue is deleted so that its last usage still finds its
-- account and its name (usage outlives queues and accounts: it is what the final invoice is made of).
create table metered_queues (
    queue_id    uuid primary key,
    account_id  uuid not null,
    name        text not null,
    deleted_at  timestamptz
);
insert into metered_queues (queue_id, account_id, name) select id, account_id, name from queues;

create function meter_queue() returns trigger language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        update metered_queues set deleted_at = now() where queue_id = old.id;
    else
        insert into metered_queues (queue_id, account_id, name) values (new.id, new.account_id, new.name)
        on conflict (queue_id) do update set name = excluded.name;
    end if;
    return null;
end $$;
create trigger queues_metered after insert or delete on queues
    for each row execute function meter_queue();
create trigger queues_metered_renamed after update of name on queues
    for each row when (old.name is distinct from new.name) execute function meter_queue();

create table usage_hours (
    account_id        uuid not null,
    hour              timestamptz not null,
    queue_id          uuid not null,
    published         bigint not null default 0,
    published_bytes   bigint not null default 0,
    delivered         bigint not null default 0,
    delivered_bytes   bigint not null default 0,
    acked             bigint not null default 0,
    retried           bigint not null default 0,
    dead_lettered     bigint not null default 0,
    expired           bigint not null default 0,
    write_ops         bigint not null default 0,
    read_ops          bigint not null default 0,
    delete_ops        bigint not null default 0,
    -- The queue's stored bytes, sampled every few minutes by one node, times the seconds between samples.
    storage_byte_seconds bigint not null default 0,
    primary key (account_id, hour, queue_id)
);
-- The storage samples taken, one row per sampling period, so that of all the nodes one samples each period.
create table usage_samples (
    period      bigint primary key,
    sampled_at  timestamptz not null default now()
);

-- The operator's export of every account for a period walks the hours.
create index usage_hours_by_hour on usage_hours (hour);

-- A publish's write operations, and the deliveries of the webhook fast path, which leases at the insert.
create or replace function count_stored_messages() returns trigger language plpgsql as $$
begin
    insert into queue_count_deltas (queue_id, messages, bytes, oldest, published, published_bytes, write_ops,
                                    delivered, delivered_bytes, read_ops)
    select queue_id, count(*), sum(size), min(published_at), count(*), sum(size), sum(usage_chunks(size)),
           count(*) filter (where leased), coalesce(sum(size) filter (where leased), 0),
           coalesce(sum(usage_chunks(size)) filter (where leased), 0)
    from stored group by queue_id;
    return null;
end $$;

-- A delete is an ack unless the statement said otherwise by setting `skiplock.deleting` for its
-- transaction: `expired` (the retention sweep), `dead_lettered` (out of deliveries, no dead-letter queue),
-- or `removed` (a purge, a queue's or an account's deletion), which is not an operation of the tenant's.
-- The setting is cleared here, so that a later delete in the same transaction is an ack again.
create or replace function count_deleted_messages() returns trigger language plpgsql as $$
declare
    reason text := coalesce(nullif(current_setting('skiplock.deleting', true), ''), 'acked');
begin
    if reason <> 'acked' then
        perform set_config('skiplock.deleting', '', true);
    end if;
    insert into queue_count_deltas (queue_id, messages, bytes, acked, expired, dead_lettered, delete_ops)
    select queue_id, -count(*), -sum(size),
           case when reason = 'acked' then count(*) else 0 end,
           case when reason = 'expired' then count(*) else 0 end,
           case when reason = 'dead_lettered' then count(*) else 0 end,
           case when reason = 'removed' then 0 else sum(usage_chunks(size)) end
    from deleted group by queue_id;
    return null;
end $$;
