-- A publish whose keys are all new inserts them without `on conflict` (see `publish` in
-- src/store/messages.rs), so nothing reads a key's message id any more; and keys compare as bytes, since
-- the database's default collation compares every b-tree key through the C library's collation.
alter table idempotency_keys drop column message_id;
alter table idempotency_keys alter column key type text collate "C";
