-- Plans: named sets of limits an account is held to (docs/operations.md, "Plans and limits"). A plan sets
-- some limits; those it leaves out come from the node's configuration (the SKIPLOCK_* variables), and an
-- account's own overrides go over its plan's.
create table plans (
    name         text primary key check (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    limits       jsonb not null default '{}' check (jsonb_typeof(limits) = 'object'),
    created_at   timestamptz not null default now(),
    modified_at  timestamptz not null default now()
);
-- Accounts that name no other plan are on `default`, which is never deleted.
insert into plans (name) values ('default');

alter table accounts
    add column plan            text not null default 'default' references plans (name) on update cascade,
    add column limit_overrides jsonb not null default '{}' check (jsonb_typeof(limit_overrides) = 'object');
-- Each node reads the accounts whose limits differ from the default plan's whenever the limits change.
create index accounts_own_limits on accounts (id) where plan <> 'default' or limit_overrides <> '{}';
create index accounts_plan on accounts (plan, created_at, id);

-- One number that every change to the limits moves, so that each node reads it every second and reads
-- the plans and the accounts' overrides again only when it moved.
create table limits_version (
    only_row  boolean primary key default true check (only_row),
    version   bigint not null
);
insert into limits_version values (true, 0);

create function limits_changed() returns trigger language plpgsql as $$
begin
    update limits_version set version = version + 1;
    return null;
end
$$;
create trigger plans_changed after insert or update or delete on plans
    for each statement execute function limits_changed();
-- Only an account whose limits differ from the default plan's, or change, moves the version.
create trigger account_limits_added after insert on accounts
    for each row when (new.plan <> 'default' or new.limit_overrides <> '{}')
    execute function limits_changed();
create trigger account_limits_changed after update of plan, limit_overrides on accounts
    for each row when (old.plan is distinct from new.plan or old.limit_overrides is distinct from new.limit_overrides)
    execute function limits_changed();

-- How fast each node is asked to go for each account's limited rates, reported every second by the
-- nodes that serve the account, so that each takes its share of the account's rate in proportion
-- (src/engine/shares.rs). Rows a minute old are forgotten.
create table rate_demands (
    account_id   uuid not null,
    kind         smallint not null,
    node         uuid not null,
    per_second   real not null,
    reported_at  timestamptz not null,
    primary key (account_id, kind, node)
);
