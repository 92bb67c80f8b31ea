-- A copy dead-lettered by one of a queue's several consumers says which consumer gave up on it, as
-- Cloudflare's multi-consumer queues do. Recorded when it moves, since a queue's first consumer can be
-- replaced later. Nullable with no default, so adding it rewrites no row.
alter table messages add column dead_letter_consumer uuid;
