-- Event subscriptions (docs/events.md): what happens to an account's queues (a consumer failing or
-- recovering, messages dead-lettered, a backlog over a threshold, a redrive finished) published as
-- messages into a queue of the account's choosing, in Cloudflare's event envelope.
create table event_subscriptions (
    id                    uuid primary key,
    account_id            uuid not null references accounts (id) on delete cascade,
    name                  text not null,
    enabled               boolean not null default true,
    -- `queues.queue`: one queue's events (`queue_id`); `queues`: every queue of the account.
    source_type           text not null,
    queue_id              uuid references queues (id) on delete cascade,
    -- Messages past which `backlog.over_threshold` fires (a one-queue source only); `over_threshold` says
    -- it fired and has not re-armed (the backlog has not fallen back under it).
    backlog_threshold     bigint,
    over_threshold        boolean not null default false,
    events                text[] not null,
    destination_queue_id  uuid not null references queues (id) on delete cascade,
    created_at            timestamptz not null default now(),
    modified_at           timestamptz not null default now(),
    check ((source_type = 'queues.queue') = (queue_id is not null))
);

create index event_subscriptions_by_account on event_subscriptions (account_id, created_at);

-- Events recorded in the commit of what caused them, one row per subscription they match, until a node
-- publishes them into the subscription's destination queue and deletes them in one transaction.
create table event_outbox (
    id                    bigint generated always as identity primary key,
    account_id            uuid not null,
    subscription_id       uuid not null references event_subscriptions (id) on delete cascade,
    destination_queue_id  uuid not null,
    event                 text not null,
    -- The queue it happened to, as it was named then.
    queue_id              uuid not null,
    queue_name            text not null,
    payload               jsonb not null,
    occurred_at           timestamptz not null default clock_timestamp()
);
