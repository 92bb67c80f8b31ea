-- Topics (docs/topics.md): an account's topic binds queues of the account by routing-key pattern, and a
-- publish to the topic with a routing key stores one copy in every queue it matches, in one commit.
create table topics (
    id           uuid primary key,
    account_id   uuid not null references accounts (id) on delete cascade,
    name         text not null,
    created_at   timestamptz not null default now(),
    modified_at  timestamptz not null default now(),
    constraint topics_name_key unique (account_id, name)
);

create table topic_bindings (
    id          uuid primary key,
    account_id  uuid not null,
    topic_id    uuid not null references topics (id) on delete cascade,
    -- Deleting a queue removes its bindings.
    queue_id    uuid not null references queues (id) on delete cascade,
    pattern     text not null,
    -- Attribute name -> the values it may take (an array of strings); null matches any attributes.
    filter      jsonb,
    created_at  timestamptz not null default now(),
    constraint topic_bindings_pattern_key unique (topic_id, queue_id, pattern)
);

-- A queue's bindings, for the cascade when the queue goes.
create index topic_bindings_by_queue on topic_bindings (queue_id);
