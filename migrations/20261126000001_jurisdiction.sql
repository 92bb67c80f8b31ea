-- The jurisdiction a queue was created with (Cloudflare's `eu`, `us`, `fedramp`), kept and shown as given.
alter table queues add column jurisdiction text check (jurisdiction in ('eu', 'us', 'fedramp'));
