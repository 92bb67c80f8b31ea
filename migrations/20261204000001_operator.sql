-- The operator's half of a hosted deployment (docs/operations.md, "Running a hosted deployment"):
-- accounts that can be suspended, tokens that expire, and the operator's own tokens.

-- A suspended account's requests are refused and its deliveries stop; nothing of it is deleted.
alter table accounts
    add column status            text not null default 'active' check (status in ('active', 'suspended')),
    add column status_changed_at timestamptz,
    -- Why the operator suspended it, for the operator's own reading.
    add column status_reason     text;
-- Every node reads the suspended accounts each second: this keeps that read to the few.
create index accounts_not_active on accounts (id) where status <> 'active';
create index accounts_name on accounts (name, id);

-- A token is refused before `not_before` and from `expires_on` (Cloudflare's token fields).
alter table api_tokens
    add column not_before  timestamptz,
    add column expires_on  timestamptz,
    add constraint api_tokens_valid_window check (not_before is null or expires_on is null or not_before < expires_on);

-- Operator tokens (`sko_<id>_<secret>`): they reach the operator API and nothing else.
create table operator_tokens (
    id           uuid primary key,
    name         text not null,
    scopes       text[] not null check (scopes <@ array['read', 'write']::text[] and cardinality(scopes) > 0),
    secret_hash  text not null,          -- argon2id PHC string of the token's secret part
    created_at   timestamptz not null default now(),
    revoked_at   timestamptz
);
