-- Quota events (docs/api.md, "Usage and quotas"): an account crossing 80% and 100% of a quota is an event
-- of the account, not of one of its queues, so an event may name no queue. Each crossing is recorded once
-- per quota and period (`quota_notices`), whichever node sees it first.
alter table event_outbox alter column queue_id drop not null, alter column queue_name drop not null;

create table quota_notices (
    account_id    uuid not null,
    quota         text not null,
    period_start  timestamptz not null,
    percent       smallint not null,
    noticed_at    timestamptz not null default now(),
    primary key (account_id, quota, period_start, percent)
);
