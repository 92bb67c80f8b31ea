-- A dead-lettered message remembers the queue it came from and when it was moved, for the redrive and
-- the payloads' metadata. Nullable with no default, so adding them rewrites no row; messages
-- dead-lettered before this change have neither.
alter table messages add column dead_letter_source uuid, add column dead_lettered_at timestamptz;

-- A dead-letter queue's sources are counted from this index alone; only dead-lettered messages are in
-- it, so claims of other messages never maintain it.
create index messages_dead_letter_source on messages (queue_id, dead_letter_source)
    where dead_letter_source is not null;
