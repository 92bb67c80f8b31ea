-- A webhook consumer failing for `disable_after_hours` in a row is disabled (docs/webhooks.md, "Endpoint
-- health and the circuit breaker"): it gets no deliveries, not even probes, until a test send succeeds.
alter table consumers add column disable_after_hours integer;
alter table webhook_health add column disabled_at timestamptz;
