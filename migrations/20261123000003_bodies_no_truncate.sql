-- Vacuum never cuts `message_bodies` short: cutting takes an ACCESS EXCLUSIVE lock, and every publish,
-- pull and ack waits behind it. In the steady publish/pull/ack cycle the bodies' last pages are often
-- empty, so each vacuum of the table truncated it: the cycle's rate dropped to between a tenth and a
-- half of the usual for 5 s at each of those moments (the worst minute of a 10-minute run: 0.54 of the
-- first). `messages` and `queue_count_deltas` are set the same way; their free pages are reused.
alter table message_bodies set (vacuum_truncate = false);
