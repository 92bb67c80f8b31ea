-- The audit log (docs/api.md, "Audit logs"): every change to an account's configuration, who made it,
-- from where, and what it changed; messages published, pulled or acked are not in it (the message path
-- writes nothing here). Entries are kept 90 days (src/engine/audit.rs).
create table audit_logs (
    id             uuid primary key,
    account_id     uuid not null,
    at             timestamptz not null default now(),
    actor_type     text not null check (actor_type in ('token', 'operator')),
    actor_id       uuid not null,
    actor_ip       text,
    request_id     text,
    resource_type  text not null,
    resource_id    text,
    action         text not null,
    old_value      jsonb,
    new_value      jsonb
);
create index audit_logs_by_account on audit_logs (account_id, at, id);
create index audit_logs_by_time on audit_logs (at);
