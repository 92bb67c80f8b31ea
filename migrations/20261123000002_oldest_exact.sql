-- Whether a queue's `oldest` is the publish time of its oldest message, or may be earlier: a delete
-- was folded since it was last set from the messages. The retention sweep reads the messages only of
-- queues whose oldest is not exact, so a queue that is only published to is never scanned (the scan
-- of every message each sweep cost a second of database time per million messages).
alter table queue_counts add column oldest_exact boolean not null default true;
