//! Prometheus metrics: one registry and the collectors every part of the service updates. The request
//! middleware and the `/metrics` listener are the API's (`api::observe`); the per-queue gauges are
//! refreshed by the engine (`engine::gauges`).
//!
//! Labels stay bounded: method, route pattern, status class, consumer type, outcome. Per-queue gauges
//! carry the account id and queue name, but only for the `max_queue_series` queues with the largest backlog;
//! the rest are summed into one series labelled `account="_other", queue="_other"`.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use sqlx::PgPool;

pub struct Metrics {
    registry: Registry,
    pub http_requests: IntCounterVec,
    pub http_duration: HistogramVec,
    pub published: IntCounter,
    pub delivered: IntCounterVec,
    pub acked: IntCounterVec,
    pub retried: IntCounterVec,
    pub dead_lettered: IntCounter,
    pub redriven: IntCounter,
    pub schedule_ticks: IntCounterVec,
    pub schedule_lag: HistogramVec,
    pub redrive_tasks: IntGaugeVec,
    pub dropped: IntCounter,
    pub expired: IntCounter,
    pub leases_extended: IntCounter,
    pub leases_ran_out: IntCounter,
    pub horizon_age: IntGauge,
    pub horizon_xid_age: IntGauge,
    pub waiting_pulls: IntGauge,
    pub long_poll_wakeups: IntCounterVec,
    pub publish_wakeups: IntCounterVec,
    pub long_poll_looks_skipped: IntCounter,
    pub long_poll_looks: IntCounter,
    pub publishes_held_back: IntCounterVec,
    /// Usage folded by this node (summed over the nodes: every account's), by kind; no label per account.
    pub usage_operations: IntCounterVec,
    pub usage_messages: IntCounterVec,
    pub quota_refusals: IntCounterVec,
    pub auth_refusals: IntCounterVec,
    pub deliveries: IntCounterVec,
    pub delivery_duration: HistogramVec,
    pub batches_in_flight: IntGauge,
    pub webhook_attempts_written: IntCounter,
    pub events_published: IntCounter,
    pub webhook_consumers: IntGaugeVec,
    pub queue_backlog: IntGaugeVec,
    pub queue_in_flight: IntGaugeVec,
    pub queue_delayed: IntGaugeVec,
    pub queue_oldest_age: IntGaugeVec,
    pub queue_dead_letter: IntGaugeVec,
    pub queue_series: IntGauge,
    pool_connections: IntGaugeVec,
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("a valid metric");
    registry.register(Box::new(c.clone())).expect("registered once");
    c
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric");
    registry.register(Box::new(c.clone())).expect("registered once");
    c
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("a valid metric");
    registry.register(Box::new(g.clone())).expect("registered once");
    g
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid metric");
    registry.register(Box::new(g.clone())).expect("registered once");
    g
}

fn histogram_vec(registry: &Registry, name: &str, help: &str, labels: &[&str], buckets: Vec<f64>) -> HistogramVec {
    let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels).expect("a valid metric");
    registry.register(Box::new(h.clone())).expect("registered once");
    h
}

impl Default for Metrics {
    fn default() -> Self {
        let r = Registry::new();
        let latency = vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
        let build = gauge_vec(&r, "skiplock_build_info", "The running build; always 1.", &["version"]);
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        let queue = ["account", "queue"];
        Self {
            http_requests: counter_vec(
                &r,
                "skiplock_http_requests_total",
                "HTTP requests answered, by method, route pattern and status class.",
                &["method", "route", "status"],
            ),
            http_duration: histogram_vec(
                &r,
                "skiplock_http_request_duration_seconds",
                "Time to answer an HTTP request, by method and route pattern.",
                &["method", "route"],
                latency.clone(),
            ),
            published: counter(&r, "skiplock_messages_published_total", "Messages stored by publishes."),
            delivered: counter_vec(
                &r,
                "skiplock_messages_delivered_total",
                "Messages handed to consumers (pulled or pushed), by consumer type.",
                &["consumer_type"],
            ),
            acked: counter_vec(
                &r,
                "skiplock_messages_acked_total",
                "Messages acked, by consumer type.",
                &["consumer_type"],
            ),
            retried: counter_vec(
                &r,
                "skiplock_messages_retried_total",
                "Messages returned to their queue for another delivery, by consumer type.",
                &["consumer_type"],
            ),
            dead_lettered: counter(
                &r,
                "skiplock_messages_dead_lettered_total",
                "Messages moved to a dead-letter queue after their last delivery.",
            ),
            redriven: counter(
                &r,
                "skiplock_messages_redriven_total",
                "Messages moved back out of a queue by redrive tasks.",
            ),
            schedule_ticks: counter_vec(
                &r,
                "skiplock_schedule_ticks_total",
                "Schedule ticks fired on this node, by outcome: published, deferred (the account's publish rate or the database; tried again), failed (the queue full or gone; the tick is skipped).",
                &["outcome"],
            ),
            schedule_lag: histogram_vec(
                &r,
                "skiplock_schedule_lag_seconds",
                "From a schedule's tick to its message's commit.",
                &[],
                latency.clone(),
            ),
            redrive_tasks: gauge_vec(
                &r,
                "skiplock_redrive_tasks",
                "Redrive tasks of every account, by status (running, completed, cancelled, failed).",
                &["status"],
            ),
            dropped: counter(
                &r,
                "skiplock_messages_dropped_total",
                "Messages deleted after their last delivery, their consumer having no dead-letter queue.",
            ),
            expired: counter(
                &r,
                "skiplock_messages_expired_total",
                "Messages deleted past their queue's retention period.",
            ),
            leases_extended: counter(
                &r,
                "skiplock_leases_extended_total",
                "Leases extended by POST .../messages/extend (pull and webhook leases).",
            ),
            leases_ran_out: counter(
                &r,
                "skiplock_leases_ran_out_total",
                "Leases that ran out without an answer, their messages made claimable again by a sweep.",
            ),
            horizon_age: gauge(
                &r,
                "skiplock_cleanup_horizon_age_seconds",
                "How long the session holding the database's cleanup horizon back the longest has held its \
                 snapshot or transaction open (0: nothing holds it back for long; see docs/operations.md).",
            ),
            horizon_xid_age: gauge(
                &r,
                "skiplock_cleanup_horizon_xid_age",
                "How many transaction ids the oldest snapshot, transaction or replication slot of the database \
                 is behind the newest.",
            ),
            waiting_pulls: {
                let g = IntGauge::new("skiplock_waiting_pulls", "Long-polling pulls waiting on this node now.")
                    .expect("a valid metric");
                r.register(Box::new(g.clone())).expect("registered once");
                g
            },
            long_poll_wakeups: counter_vec(
                &r,
                "skiplock_long_poll_wakeups_total",
                "Long-polling waits woken, by cause: notify, timer, recheck, deadline, shutdown.",
                &["cause"],
            ),
            publish_wakeups: counter_vec(
                &r,
                "skiplock_publish_wakeups_total",
                "Publishes to queues webhook consumers read, by whom they woke: this_node (its own worker, in-process) or all_nodes (NOTIFY: the node's worker was busy, stopping or absent).",
                &["to"],
            ),
            long_poll_looks: counter(
                &r,
                "skiplock_long_poll_looks_total",
                "Looks of long-polling pulls at their queue that leased nothing (each a claim and a look for the \
                 next delayed message).",
            ),
            long_poll_looks_skipped: counter(
                &r,
                "skiplock_long_poll_looks_skipped_total",
                "Long-polling pulls that began waiting without looking: a look since the queue was last woken found it empty.",
            ),
            publishes_held_back: counter_vec(
                &r,
                "skiplock_publishes_held_back_total",
                "Publishes held back on this node by their account's publish rate, by outcome: delayed (waited for their share) or refused (429).",
                &["outcome"],
            ),
            usage_operations: counter_vec(
                &r,
                "skiplock_usage_operations_total",
                "Operations metered (Cloudflare's model: each 64 KB chunk of a message written, read or deleted), as this node folded them into the usage records, by kind: write, read, delete. Summed over the nodes: every account's.",
                &["kind"],
            ),
            usage_messages: counter_vec(
                &r,
                "skiplock_usage_messages_total",
                "Messages metered, as this node folded them into the usage records, by event: published, delivered, acked, retried, dead_lettered, expired. Summed over the nodes: every account's.",
                &["event"],
            ),
            quota_refusals: counter_vec(
                &r,
                "skiplock_quota_refusals_total",
                "Requests refused on this node because their account used up a quota of its plan, by quota: max_operations_per_day, max_operations_per_month, max_stored_bytes.",
                &["quota"],
            ),
            auth_refusals: counter_vec(
                &r,
                "skiplock_auth_refusals_total",
                "Requests refused while authenticating, by reason: invalid_token (unknown, revoked, wrong or of the other API), address_cooling (a token not verified here, from an address with too many failures), outside_window, address_refused, account_refused (suspended or deleted), missing_scope.",
                &["reason"],
            ),
            deliveries: counter_vec(
                &r,
                "skiplock_webhook_deliveries_total",
                "Webhook deliveries, by outcome: ok, http_error, timeout, connect_error, refused, invalid_answer.",
                &["outcome"],
            ),
            delivery_duration: histogram_vec(
                &r,
                "skiplock_webhook_delivery_duration_seconds",
                "Time from sending a webhook delivery to having its answer.",
                &["outcome"],
                latency,
            ),
            batches_in_flight: {
                let g = IntGauge::new(
                    "skiplock_webhook_batches_in_flight",
                    "Webhook batches being delivered by this node.",
                )
                .expect("a valid metric");
                r.register(Box::new(g.clone())).expect("registered once");
                g
            },
            webhook_attempts_written: counter(
                &r,
                "skiplock_webhook_attempts_logged_total",
                "Webhook attempts this node wrote to the attempt log.",
            ),
            events_published: counter(
                &r,
                "skiplock_events_published_total",
                "Events of event subscriptions this node published into their destination queues.",
            ),
            webhook_consumers: gauge_vec(
                &r,
                "skiplock_webhook_consumers",
                "Webhook consumers of active accounts with unpaused queues, by endpoint health: healthy, failing (its last attempt failed), open (failing past the breaker's threshold: probes only). Every dispatching node reports all of them.",
                &["health"],
            ),
            queue_backlog: gauge_vec(
                &r,
                "skiplock_queue_backlog_messages",
                "Messages not yet acked, per queue.",
                &queue,
            ),
            queue_in_flight: gauge_vec(
                &r,
                "skiplock_queue_in_flight_messages",
                "Messages under a live lease, per queue.",
                &queue,
            ),
            queue_delayed: gauge_vec(
                &r,
                "skiplock_queue_delayed_messages",
                "Messages waiting for a publish or retry delay, per queue.",
                &queue,
            ),
            queue_oldest_age: gauge_vec(
                &r,
                "skiplock_queue_oldest_message_age_seconds",
                "Age of the oldest message not yet acked, per queue.",
                &queue,
            ),
            queue_dead_letter: gauge_vec(
                &r,
                "skiplock_queue_dead_letter_messages",
                "Messages in the queue's dead-letter queue, per queue that has one.",
                &queue,
            ),
            queue_series: {
                let g = IntGauge::new(
                    "skiplock_queue_series",
                    "Queues with their own per-queue series; past the cap the rest are summed as _other.",
                )
                .expect("a valid metric");
                r.register(Box::new(g.clone())).expect("registered once");
                g
            },
            pool_connections: gauge_vec(
                &r,
                "skiplock_db_pool_connections",
                "Database connections of this process, by state: in_use or idle.",
                &["state"],
            ),
            registry: r,
        }
    }
}

impl Metrics {
    /// The text exposition of every metric, the pool's gauges read now.
    pub fn render(&self, pool: Option<&PgPool>) -> String {
        if let Some(pool) = pool {
            let idle = pool.num_idle() as i64;
            self.pool_connections.with_label_values(&["idle"]).set(idle);
            self.pool_connections.with_label_values(&["in_use"]).set(i64::from(pool.size()) - idle);
        }
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out).expect("text encoding cannot fail");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}
