-- Deleting an account (docs/operations.md, "Deleting an account"): its tokens go at once, its requests
-- are refused, and a background task on any node removes its queues and their messages in batches
-- (src/engine/deletion.rs), then keeps the row, status `deleted`, as the record that it was.
alter table accounts drop constraint accounts_status_check;
alter table accounts add constraint accounts_status_check
    check (status in ('active', 'suspended', 'deleting', 'deleted'));
alter table accounts
    add column deletion_started_at   timestamptz,
    add column deletion_finished_at  timestamptz,
    -- The node working on the deletion holds it until then; another node takes it over after.
    add column deletion_held_until   timestamptz,
    add column deletion_holder       uuid,
    add column deleted_queues        bigint not null default 0,
    add column deleted_messages      bigint not null default 0;
-- Every node reads the accounts it must refuse each second: those suspended or being deleted, and those
-- deleted within the last minute (a token a node verified before may still be in its cache). Older
-- deleted accounts have no tokens left, so the read leaves them out and stays small however many there are.
drop index accounts_not_active;
create index accounts_refused on accounts (id) where status in ('suspended', 'deleting');
create index accounts_deleted on accounts (deletion_finished_at) where status = 'deleted';
create index accounts_deleting on accounts (deletion_started_at) where status = 'deleting';
