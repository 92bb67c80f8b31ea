//! Prometheus metrics: one registry, the collectors every part of the service updates, the HTTP
//! request middleware, and the `/metrics` endpoint served on its own address.
//!
//! Labels stay bounded: method, route pattern, status class, consumer type, outcome. Per-queue gauges
//! carry the account id and queue name, but only for the `max_queue_series` queues with the largest backlog;
//! the rest are summed into one series labelled `account="_other", queue="_other"`.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::{web, App, HttpResponse, HttpServer};
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
    pub redrive_tasks: IntGaugeVec,
    pub dropped: IntCounter,
    pub expired: IntCounter,
    pub leases_extended: IntCounter,
    pub waiting_pulls: IntGauge,
    pub long_poll_wakeups: IntCounterVec,
    pub publish_wakeups: IntCounterVec,
    pub long_poll_looks_skipped: IntCounter,
    pub publishes_held_back: IntCounterVec,
    pub deliveries: IntCounterVec,
    pub delivery_duration: HistogramVec,
    pub batches_in_flight: IntGauge,
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
            long_poll_looks_skipped: counter(
                &r,
                "skiplock_long_poll_looks_skipped_total",
                "Long-polling pulls that began waiting without looking: a look since the queue was last woken found it empty.",
            ),
            publishes_held_back: counter_vec(
                &r,
                "skiplock_publishes_held_back_total",
                "Publishes over their account's publish rate on this node, by outcome: delayed (waited for their share) or refused (429).",
                &["outcome"],
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

/// Counts and times every request under its route pattern (never the raw path, whose ids would
/// explode the label set).
pub fn observe_request<S, B>(
    req: ServiceRequest,
    srv: &S,
) -> impl Future<Output = Result<ServiceResponse<B>, actix_web::Error>> + 'static
where
    S: actix_web::dev::Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
    S::Future: 'static,
    B: MessageBody,
{
    let metrics = req.app_data::<web::Data<Arc<Metrics>>>().cloned();
    let method = req.method().to_string();
    let started = Instant::now();
    let response = srv.call(req);
    async move {
        let response = response.await?;
        if let Some(metrics) = metrics {
            // After routing, the pattern comes from the resource that matched, without matching the
            // path against every pattern again.
            let route = response.request().match_pattern().unwrap_or_else(|| "unmatched".into());
            let status = format!("{}xx", response.status().as_u16() / 100);
            metrics.http_requests.with_label_values(&[&method, &route, &status]).inc();
            metrics.http_duration.with_label_values(&[&method, &route]).observe(started.elapsed().as_secs_f64());
        }
        Ok(response)
    }
}

/// The metrics server and the address it listens on.
pub struct MetricsServer {
    pub server: actix_web::dev::Server,
    pub addr: std::net::SocketAddr,
}

/// Serves `/metrics` on its own address, so it can be firewalled apart from the API.
pub fn serve(metrics: Arc<Metrics>, pool: PgPool, bind: std::net::SocketAddr) -> std::io::Result<MetricsServer> {
    let data = web::Data::new((metrics, pool));
    let listener = std::net::TcpListener::bind(bind)?;
    let addr = listener.local_addr()?;
    let server = HttpServer::new(move || {
        App::new().app_data(data.clone()).route(
            "/metrics",
            web::get().to(|data: web::Data<(Arc<Metrics>, PgPool)>| async move {
                HttpResponse::Ok()
                    .content_type("text/plain; version=0.0.4; charset=utf-8")
                    .body(data.0.render(Some(&data.1)))
            }),
        )
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(2)
    .listen(listener)?
    .run();
    Ok(MetricsServer { server, addr })
}

/// Sets the per-queue gauges from one query. The `max_series` queues with the largest backlog get their
/// own series; the others are summed into `account="_other", queue="_other"` so that a large number of
/// tenants cannot explode the number of series.
pub async fn refresh_queue_gauges(metrics: &Metrics, pool: &PgPool, max_series: usize) -> Result<(), sqlx::Error> {
    let rows = crate::store::gauges::queue_gauges(pool, max_series as i64).await?;
    let tasks = crate::store::redrive::count_by_status(pool).await?;
    for status in ["running", "completed", "cancelled", "failed"] {
        let n = tasks.iter().find(|(s, _)| s == status).map_or(0, |(_, n)| *n);
        metrics.redrive_tasks.with_label_values(&[status]).set(n);
    }
    let now = chrono::Utc::now();
    let gauges = [
        &metrics.queue_backlog,
        &metrics.queue_in_flight,
        &metrics.queue_delayed,
        &metrics.queue_oldest_age,
        &metrics.queue_dead_letter,
    ];
    for g in gauges {
        g.reset();
    }
    let mut series = 0;
    for row in &rows {
        // Ages do not add up: the others' oldest message is the oldest of them all.
        let age = row.oldest.map_or(0, |t| (now - t).num_seconds().max(0));
        let values = [row.backlog_count, row.in_flight_count, row.delayed_count, age];
        let (account, queue) = match (&row.account_id, &row.queue_name) {
            (Some(account), Some(name)) => {
                series += 1;
                (account.to_string(), name.clone())
            }
            _ if row.queues == 0 => continue,
            _ => ("_other".to_owned(), "_other".to_owned()),
        };
        for (g, value) in gauges.iter().zip(values) {
            g.with_label_values(&[&account, &queue]).set(value);
        }
        if let Some(dead_letter) = row.dead_letter_backlog_count {
            metrics.queue_dead_letter.with_label_values(&[&account, &queue]).set(dead_letter);
        }
    }
    metrics.queue_series.set(series);
    Ok(())
}

/// Refreshes the per-queue gauges every `every` until `stop`.
pub async fn run_queue_gauges(
    metrics: Arc<Metrics>,
    pool: PgPool,
    max_series: usize,
    every: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    loop {
        let started = std::time::Instant::now();
        if let Err(err) = refresh_queue_gauges(&metrics, &pool, max_series).await {
            tracing::warn!(error = %err, "refreshing queue gauges failed; will retry");
        }
        // The gauges walk the in-flight and delayed messages of every queue holding messages: when
        // those are many, count less often.
        let wait = crate::backlog::spacing(started.elapsed(), every);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}
