-- skiplock's schema. Every tenant-owned row carries account_id; every query filters on it.

create table accounts (
    id          uuid primary key,
    name        text not null,
    created_at  timestamptz not null default now()
);

create table api_tokens (
    id           uuid primary key,
    account_id   uuid not null references accounts (id) on delete cascade,
    name         text not null,
    scopes       text[] not null,
    secret_hash  text not null,          -- argon2id PHC string of the token's secret part
    created_at   timestamptz not null default now(),
    revoked_at   timestamptz
);
create index api_tokens_account on api_tokens (account_id);

-- One row: the key that signs lease ids and peek refs, shared by every node.
create table server_keys (
    name    text primary key,
    secret  bytea not null
);

create table queues (
    id                         uuid primary key,
    account_id                 uuid not null references accounts (id) on delete cascade,
    name                       text not null,
    delivery_delay             integer not null default 0,
    delivery_paused            boolean not null default false,
    message_retention_period   integer not null default 345600,
    created_at                 timestamptz not null default now(),
    modified_at                timestamptz not null default now(),
    purge_started_at           timestamptz,
    purge_completed            boolean not null default true,
    constraint queues_account_name_key unique (account_id, name)
);

create table consumers (
    id                     uuid primary key,
    account_id             uuid not null references accounts (id) on delete cascade,
    queue_id               uuid not null references queues (id) on delete cascade,
    kind                   text not null check (kind in ('http_pull', 'webhook')),
    dead_letter_queue      text not null default '',
    batch_size             integer not null,
    max_retries            integer not null,
    retry_delay            integer not null,
    max_wait_time_ms       integer,
    max_concurrency        integer,
    visibility_timeout_ms  integer,
    url                    text,
    signing_secret         text,
    created_at             timestamptz not null default now(),
    constraint consumers_queue_key unique (queue_id)
);

-- Message payloads: written once, read on delivery, deleted on ack. Never updated, so the
-- wide rows are not rewritten by every claim.
create table message_bodies (
    id            uuid primary key,
    content_type  smallint not null,      -- 0 json, 1 text, 2 bytes
    body          bytea not null
);

-- The narrow, hot row that claims rewrite: where a message is and when it may be delivered.
-- available_at is in the future while a message is delayed or leased.
create table messages (
    id            uuid primary key,
    queue_id      uuid not null,
    available_at  timestamptz not null,
    attempts      integer not null default 0,
    size          integer not null,
    published_at  timestamptz not null,
    leased        boolean not null default false
) with (fillfactor = 70, vacuum_truncate = false);

-- The claim walks this index from the left: only rows ready now are visited.
create index messages_claim on messages (queue_id, available_at, id);

-- Webhook secret rotation: the previous secret keeps signing until it expires.
alter table consumers
    add column previous_signing_secret text,
    add column previous_secret_expires_at timestamptz;
