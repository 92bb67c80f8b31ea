-- Webhook delivery: server-side backoff settings, and the slots that cap a consumer's batches in
-- flight across every node. A slot is held like a lease: until released, or until held_until passes
-- (a node that died mid-delivery gives its slot back by expiry).

alter table consumers
    add column retry_backoff text not null default 'constant' check (retry_backoff in ('constant', 'exponential')),
    add column retry_delay_max integer;

create table dispatch_slots (
    consumer_id  uuid not null references consumers (id) on delete cascade,
    slot         integer not null,
    held_until   timestamptz not null default '-infinity',
    primary key (consumer_id, slot)
);
