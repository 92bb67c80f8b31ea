//! Publish -> webhook latency: single-message publishes at a fixed rate to a queue whose webhook
//! consumer has max_wait_time_ms = 0; a local receiver notes when each message arrives. With
//! `Beside::idle_accounts`, W6 latency: the same beside many idle tenants' consumers; with
//! `Beside::backlog`, W6 busy database: beside that many messages waiting in another queue and the dead
//! rows of a drain. PostgreSQL's CPU over the publishing gives its cost per pushed message.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use crate::setup::{percentile_ms, Env};

/// When each message (by sequence number) was sent, stored (its publish answered 2xx) and arrived.
pub struct Timeline {
    sent: Vec<Option<Instant>>,
    stored: Vec<Option<Instant>>,
    arrived: Vec<Option<Instant>>,
    pub duplicates: usize,
    pub publish_errors: usize,
    /// The warm-up message arrived: the dispatcher knows the consumer and its connections are open.
    warmed: bool,
}

impl Timeline {
    pub fn new(total: usize) -> Self {
        Self {
            sent: vec![None; total],
            stored: vec![None; total],
            arrived: vec![None; total],
            duplicates: 0,
            publish_errors: 0,
            warmed: false,
        }
    }

    /// Notes that message `seq` arrived `at`; a second arrival is a duplicate.
    pub fn arrive(&mut self, seq: usize, at: Instant) {
        match self.arrived.get_mut(seq) {
            Some(slot @ None) => *slot = Some(at),
            Some(Some(_)) => self.duplicates += 1,
            None => {}
        }
    }

    pub fn all_arrived(&self) -> bool {
        self.arrived.iter().all(Option::is_some)
    }

    /// How many messages the timeline follows.
    pub fn total(&self) -> usize {
        self.sent.len()
    }

    /// When message `seq` was sent and when it arrived, as far as either is known.
    pub fn trip(&self, seq: usize) -> (Option<Instant>, Option<Instant>) {
        (self.sent[seq], self.arrived[seq])
    }

    /// Sorted send-to-arrival and send-to-2xx durations of the messages from `first` on.
    pub fn spans_from(&self, first: usize) -> (Vec<Duration>, Vec<Duration>) {
        let from = first.min(self.sent.len());
        let sent = &self.sent[from..];
        (Self::spans(sent, &self.arrived[from..]), Self::spans(sent, &self.stored[from..]))
    }

    /// The slowest publish (send to 2xx) of each second's messages, in milliseconds, at `rate` a second: a
    /// p99 made by a few stalls shows as a few high seconds, and when in the run they came.
    pub fn slowest_publish_per_second(&self, rate: usize) -> Vec<f64> {
        self.sent
            .chunks(rate.max(1))
            .zip(self.stored.chunks(rate.max(1)))
            .map(|(sent, stored)| Self::spans(sent, stored).last().map_or(0.0, |d| d.as_secs_f64() * 1000.0))
            .collect()
    }

    /// Sorted durations from `from` to `to`, for the messages that have both.
    fn spans(from: &[Option<Instant>], to: &[Option<Instant>]) -> Vec<Duration> {
        let mut spans: Vec<Duration> = from
            .iter()
            .zip(to)
            .filter_map(|(a, b)| Some(b.as_ref()?.saturating_duration_since(*a.as_ref()?)))
            .collect();
        spans.sort();
        spans
    }
}

/// The webhook receiver's handler: notes the arrival of each message in the delivery (its body is its
/// sequence number) and of the warm-up message.
pub async fn receive(body: web::Bytes, timeline: web::Data<Mutex<Timeline>>) -> HttpResponse {
    let now = Instant::now();
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut t = timeline.lock().unwrap();
    for m in parsed["messages"].as_array().into_iter().flatten() {
        if m["body"] == WARM_UP {
            t.warmed = true;
        }
        if let Some(seq) = m["body"].as_str().and_then(|s| s.parse::<usize>().ok()) {
            t.arrive(seq, now);
        }
    }
    HttpResponse::Ok().finish()
}

const WARM_UP: &str = "warm-up";
/// Messages published and drained before a busy-database run, for the dead rows a drain leaves.
const DRAINED: u64 = 100_000;

/// What runs beside the measured queue.
#[derive(Debug, Clone, Copy, Default)]
pub struct Beside {
    /// Idle accounts, each with 10 webhook consumers and 10 pull queues.
    pub idle_accounts: usize,
    /// Messages waiting in another queue (and the dead rows of a drain of 100,000).
    pub backlog: u64,
}

/// `make latency`: measures, prints the table and writes the figures under `bench/results/`.
pub async fn run(rate: u32, seconds: u32, beside: Beside) -> anyhow::Result<()> {
    let result = measure(rate, seconds, beside).await?;
    let ms = |key: &str| result[key].as_f64().unwrap_or_default();
    println!("| publish -> webhook, max_wait_time_ms = 0 | messages | rate | p50 | p90 | p99 | max | publish 2xx p50 / p99 | not arrived | duplicates | publish errors |");
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    println!(
        "| skiplock | {} | {:.0}/s | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} / {:.1} ms | {} | {} | {} |",
        result["messages"],
        ms("achieved_rate"),
        ms("p50_ms"),
        ms("p90_ms"),
        ms("p99_ms"),
        ms("max_ms"),
        ms("publish_p50_ms"),
        ms("publish_p99_ms"),
        result["not_arrived"],
        result["duplicates"],
        result["publish_errors"],
    );
    println!(
        "PostgreSQL CPU per pushed message: {:.3} ms; idle webhook consumers present: {}",
        ms("postgres_cpu_ms_per_message"),
        result["idle_webhook_consumers"]
    );
    crate::setup::write_result("latency", &result)
}

/// Publishes `rate` single messages a second for `seconds` to a webhook consumer on a server of its own
/// (a fresh database on DATABASE_URL's server), beside what `beside` asks for; returns the figures as JSON.
pub async fn measure(rate: u32, seconds: u32, beside: Beside) -> anyhow::Result<Value> {
    let Beside { idle_accounts, backlog } = beside;
    let total = (rate * seconds) as usize;
    let timeline = web::Data::new(Mutex::new(Timeline::new(total)));
    let (receiver_port, receiver_handle) = crate::setup::start_receiver(timeline.clone(), receive)?;

    let env = Env::start(&[
        ("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8".into()),
        // The busy database is filled at full speed.
        ("SKIPLOCK_PUBLISH_RATE_LIMIT", "0".into()),
    ])
    .await?;
    let queue = env.post("queues", &json!({"queue_name": "latency"})).await?;
    let queue_id = queue["queue_id"].as_str().unwrap_or_default().to_owned();
    let consumer = json!({
        "type": "webhook",
        "url": format!("http://127.0.0.1:{receiver_port}/hook"),
        "settings": {"max_wait_time_ms": 0, "batch_size": 100},
    });
    env.post(&format!("queues/{queue_id}/consumers"), &consumer).await?;
    if idle_accounts > 0 {
        eprintln!("making {idle_accounts} idle accounts with 10 webhook consumers and 10 pull queues each");
        let idle = crate::idle::IdleArgs {
            accounts: idle_accounts,
            webhooks: 10,
            pulls: 10,
            extra_dispatchers: 0,
            seconds: 0,
        };
        crate::idle::populate(&env, &idle, &format!("http://127.0.0.1:{receiver_port}/idle")).await?;
    }
    if backlog > 0 {
        eprintln!("preloading {backlog} waiting messages, and draining {DRAINED} for their dead rows");
        let api = crate::api_load::Api {
            host: env.base.trim_start_matches("http://").to_owned(),
            account: env.account.clone(),
            token: env.token.clone(),
        };
        let pull = json!({"type": "http_pull"});
        let waiting = env.queue_with_consumer((&env.account, &env.token), "waiting", pull.clone()).await?;
        let drained = env.queue_with_consumer((&env.account, &env.token), "drained", pull).await?;
        let body = "x".repeat(1024);
        api.preload(&waiting, backlog, &body).await?;
        api.preload(&drained, DRAINED, &body).await?;
        api.drain(&drained, 4, 300.0).await?;
    }
    warm_up(&env, &queue_id, &timeline).await?;
    let postmaster = env.postmaster_pid().await?;

    eprintln!(
        "publishing {total} messages at {rate}/s, one per request, to a webhook consumer with max_wait_time_ms = 0"
    );
    let env = Arc::new(env);
    let cpu_before = crate::cpu::sample(&[], postmaster);
    let publish_secs = publish_at_rate(&env, &queue_id, rate, &timeline).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !timeline.lock().unwrap().all_arrived() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let postgres_cpu = (crate::cpu::sample(&[], postmaster) - cpu_before).postgres;

    let ((arrival, publish), slowest, duplicates, publish_errors) = {
        let t = timeline.lock().unwrap();
        (t.spans_from(0), t.slowest_publish_per_second(rate as usize), t.duplicates, t.publish_errors)
    };
    let achieved = total as f64 / publish_secs;
    let result = json!({
        "workload": "W4 publish->webhook latency, max_wait_time_ms = 0",
        "rate": rate, "seconds": seconds, "messages": total, "achieved_rate": achieved,
        "p50_ms": percentile_ms(&arrival, 50.0), "p90_ms": percentile_ms(&arrival, 90.0),
        "p99_ms": percentile_ms(&arrival, 99.0), "max_ms": percentile_ms(&arrival, 100.0),
        "publish_p50_ms": percentile_ms(&publish, 50.0), "publish_p99_ms": percentile_ms(&publish, 99.0),
        "publish_slowest_ms_per_second": slowest,
        "not_arrived": total - arrival.len(), "duplicates": duplicates, "publish_errors": publish_errors,
        "postgres_cpu_ms_per_message": postgres_cpu * 1000.0 / total.max(1) as f64,
        "idle_webhook_consumers": idle_accounts * 10, "waiting_messages": backlog,
        "at": chrono::Utc::now().to_rfc3339(),
    });
    receiver_handle.stop(false).await;
    Arc::try_unwrap(env).map_err(|_| anyhow::anyhow!("publishes still running"))?.finish().await?;
    Ok(result)
}

/// Warms up: publishes one message to `queue_id` and waits (up to 30 s) for the receiver to get it, so
/// that timed messages start once the dispatcher knows the consumer and its connections are open.
pub async fn warm_up(env: &Env, queue_id: &str, timeline: &web::Data<Mutex<Timeline>>) -> anyhow::Result<()> {
    env.post(&format!("queues/{queue_id}/messages"), &json!({"body": WARM_UP, "content_type": "text"})).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !timeline.lock().unwrap().warmed {
        anyhow::ensure!(Instant::now() < deadline, "the warm-up message did not arrive");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Publishes the timeline's messages, one per request with its sequence number as its text body, `rate` a
/// second to `queue_id`, noting when each was sent and stored; returns how long publishing took, in seconds.
pub async fn publish_at_rate(env: &Arc<Env>, queue_id: &str, rate: u32, timeline: &web::Data<Mutex<Timeline>>) -> f64 {
    let total = timeline.lock().unwrap().sent.len();
    let start = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let mut publishes = tokio::task::JoinSet::new();
    for seq in 0..total {
        tokio::time::sleep_until((start + interval * seq as u32).into()).await;
        let (env, timeline, queue_id) = (env.clone(), timeline.clone(), queue_id.to_owned());
        publishes.spawn(async move {
            timeline.lock().unwrap().sent[seq] = Some(Instant::now());
            let body = json!({"body": seq.to_string(), "content_type": "text"});
            let published = env.post(&format!("queues/{queue_id}/messages"), &body).await;
            let mut t = timeline.lock().unwrap();
            match published {
                Ok(_) => t.stored[seq] = Some(Instant::now()),
                Err(err) => {
                    if t.publish_errors < 3 {
                        eprintln!("publish failed: {err:#}");
                    }
                    t.publish_errors += 1;
                }
            }
        });
        while publishes.try_join_next().is_some() {}
    }
    while publishes.join_next().await.is_some() {}
    start.elapsed().as_secs_f64()
}
