-- Cloudflare's `condition.request_ip` of a token: the networks it may be used from (none listed: any)
-- and those it may not. Kept as the text the API checked and normalized (`10.0.0.0/8`, `2001:db8::/32`).
alter table api_tokens
    add column request_ip_in     text[] not null default '{}',
    add column request_ip_not_in text[] not null default '{}';
