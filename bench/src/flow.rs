//! Flow control at scale (docs/benchmarks.md, "Flow control"): `keys` keys, each limited to a parallelism
//! and a rate, drained on two nodes by pull consumers and then by a webhook consumer; and each drain again
//! without limits. Per drain: the most messages of one key in flight at once, as the consumers saw them
//! (target: the parallelism), each key's delivered rate over the measured window (target: the rate
//! ± 5%), and the messages delivered per second in all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, HttpResponse};
use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::setup::{self, Env};

#[derive(clap::Args, Debug, Clone)]
pub struct FlowArgs {
    /// Keys, each with messages enough for the whole drain at its rate.
    #[arg(long, default_value_t = 1_000)]
    pub keys: u64,
    /// Messages of one key let go at once.
    #[arg(long, default_value_t = 2)]
    pub parallelism: u64,
    /// Messages a second per key.
    #[arg(long, default_value_t = 20)]
    pub rate: u64,
    /// Seconds measured in each drain, after a warm-up of 5 s.
    #[arg(long, default_value_t = 15)]
    pub seconds: u64,
}

const WARM_UP: Duration = Duration::from_secs(5);
/// How long the webhook receiver works on each batch.
const WORK: Duration = Duration::from_millis(5);
const PULLERS: usize = 4;

/// What the consumers saw of the keys: messages in flight now and at most, and deliveries in the window.
#[derive(Default)]
struct Tally {
    in_flight: HashMap<String, u64>,
    most: u64,
    delivered: HashMap<String, u64>,
    window: Option<(Instant, Instant)>,
}

impl Tally {
    fn taken(&mut self, key: &str) {
        let now = self.in_flight.entry(key.to_owned()).or_default();
        *now += 1;
        self.most = self.most.max(*now);
        let at = Instant::now();
        if self.window.is_some_and(|(from, until)| at >= from && at < until) {
            *self.delivered.entry(key.to_owned()).or_default() += 1;
        }
    }

    fn done(&mut self, key: &str) {
        if let Some(now) = self.in_flight.get_mut(key) {
            *now = now.saturating_sub(1);
        }
    }
}

type Shared = Arc<Mutex<Tally>>;

/// One drain's figures.
struct Drain {
    name: String,
    most_in_flight: u64,
    /// Each key's messages per second over the window, sorted.
    per_key: Vec<f64>,
    per_second: f64,
}

impl Drain {
    fn of(name: String, tally: &Tally, keys: u64, seconds: u64) -> Drain {
        let mut per_key: Vec<f64> = (0..keys)
            .map(|k| tally.delivered.get(&format!("k{k}")).copied().unwrap_or(0) as f64 / seconds as f64)
            .collect();
        per_key.sort_by(f64::total_cmp);
        let total: u64 = tally.delivered.values().sum();
        Drain { name, most_in_flight: tally.most, per_key, per_second: total as f64 / seconds as f64 }
    }

    fn quantile(&self, q: f64) -> f64 {
        let i = ((self.per_key.len() as f64 - 1.0) * q).round() as usize;
        self.per_key.get(i).copied().unwrap_or(0.0)
    }

    fn print(&self) {
        println!(
            "  {}: {:.0} msg/s; most of one key in flight {}; per key min {:.1}, p5 {:.1}, median {:.1}, p95 {:.1}, max {:.1} msg/s",
            self.name,
            self.per_second,
            self.most_in_flight,
            self.quantile(0.0),
            self.quantile(0.05),
            self.quantile(0.5),
            self.quantile(0.95),
            self.quantile(1.0)
        );
    }

    fn json(&self) -> Value {
        json!({
            "drain": self.name, "msg_per_s": self.per_second, "most_in_flight_per_key": self.most_in_flight,
            "per_key_msg_per_s": {"min": self.quantile(0.0), "p5": self.quantile(0.05), "median": self.quantile(0.5),
                                  "p95": self.quantile(0.95), "max": self.quantile(1.0)},
        })
    }
}

pub async fn run(args: FlowArgs) -> anyhow::Result<()> {
    let tally: web::Data<Mutex<Tally>> = web::Data::new(Mutex::default());
    let (port, receiver) = setup::start_receiver(tally.clone(), receive)?;
    let node_env =
        [("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8".into()), ("SKIPLOCK_PUBLISH_RATE_LIMIT", "0".into())];
    let env = Env::start(&node_env).await?;
    let (_other, other) = setup::serve(&env.database_url, &[], &node_env).await?;
    let bases = [env.base.clone(), other];
    let per_key = args.rate * (WARM_UP.as_secs() + args.seconds) * 11 / 10;
    println!(
        "Flow control: {} keys of {per_key} messages, each limited to parallelism {} and {} msg/s, two nodes, {} s measured",
        args.keys, args.parallelism, args.rate, args.seconds
    );
    let mut drains = Vec::new();
    for limited in [true, false] {
        let limits = if limited {
            json!({"parallelism": args.parallelism, "rate": args.rate, "period": 1})
        } else {
            Value::Null
        };
        let how = if limited { "limited" } else { "unlimited" };
        env.settle().await?;
        let consumer = json!({"type": "http_pull", "settings": {"flow_control": limits}});
        let queue = env.queue_with_consumer((&env.account, &env.token), &format!("pull-{how}"), consumer).await?;
        preload(&env, &queue, args.keys, per_key).await?;
        let shared: Shared = Arc::default();
        shared.lock().unwrap().window = Some(window(args.seconds));
        pull_drain(&env, &bases, &queue, &shared, args.seconds).await?;
        let drain = Drain::of(format!("pull, {how}"), &shared.lock().unwrap(), args.keys, args.seconds);
        drain.print();
        drains.push(drain);
        delete_queue(&env, &queue).await?;

        env.settle().await?;
        let consumer = json!({"type": "webhook", "url": format!("http://127.0.0.1:{port}/hook"),
                              "settings": {"batch_size": 10, "max_wait_time_ms": 0, "flow_control": limits}});
        *tally.lock().unwrap() = Tally::default();
        let queue = env.queue_with_consumer((&env.account, &env.token), &format!("hook-{how}"), consumer).await?;
        // Paused while it fills, as the pull drain starts once full: else the receiver drains it as it fills,
        // and the window measures the rest.
        env.set_paused(&queue, true).await?;
        preload(&env, &queue, args.keys, per_key).await?;
        env.set_paused(&queue, false).await?;
        tally.lock().unwrap().window = Some(window(args.seconds));
        tokio::time::sleep_until((Instant::now() + WARM_UP + Duration::from_secs(args.seconds)).into()).await;
        delete_queue(&env, &queue).await?;
        let drain = Drain::of(format!("webhook, {how}"), &tally.lock().unwrap(), args.keys, args.seconds);
        drain.print();
        drains.push(drain);
    }
    receiver.stop(true).await;
    setup::write_result(
        "flow",
        &json!({"keys": args.keys, "parallelism": args.parallelism, "rate": args.rate, "seconds": args.seconds,
                "messages_per_key": per_key, "drains": drains.iter().map(Drain::json).collect::<Vec<_>>()}),
    )?;
    env.finish().await
}

/// The measured window: after the warm-up, `seconds` long.
fn window(seconds: u64) -> (Instant, Instant) {
    let from = Instant::now() + WARM_UP;
    (from, from + Duration::from_secs(seconds))
}

/// `per_key` messages for each of `keys` keys, in batches of 100 going round the keys; a message's body
/// is its key, so that a consumer knows it.
async fn preload(env: &Env, queue: &str, keys: u64, per_key: u64) -> anyhow::Result<()> {
    let total = keys * per_key;
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (client, url, token, next) =
            (env.client.clone(), env.url(&format!("queues/{queue}/messages/batch")), env.token.clone(), next.clone());
        tasks.spawn(async move {
            loop {
                let first = next.fetch_add(100, std::sync::atomic::Ordering::Relaxed);
                if first >= total {
                    return anyhow::Ok(());
                }
                let messages: Vec<Value> = (first..(first + 100).min(total))
                    .map(|i| {
                        let key = format!("k{}", i % keys);
                        json!({"body": key, "content_type": "text", "flow_control_key": key})
                    })
                    .collect();
                let resp = client.post(&url).bearer_auth(&token).json(&json!({ "messages": messages })).send().await?;
                if !resp.status().is_success() {
                    bail!("preload: {} {}", resp.status(), resp.text().await.unwrap_or_default());
                }
            }
        });
    }
    while let Some(task) = tasks.join_next().await {
        task??;
    }
    Ok(())
}

/// `PULLERS` consumers, half on each node, pulling 100 and acking them until the window ends.
async fn pull_drain(env: &Env, bases: &[String; 2], queue: &str, shared: &Shared, seconds: u64) -> anyhow::Result<()> {
    let until = Instant::now() + WARM_UP + Duration::from_secs(seconds);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..PULLERS {
        let path = format!("{}/client/v4/accounts/{}/queues/{queue}/messages", bases[i % 2], env.account);
        let (client, token, shared) = (env.client.clone(), env.token.clone(), shared.clone());
        tasks.spawn(async move {
            while Instant::now() < until {
                let pull = json!({"batch_size": 100, "visibility_timeout_ms": 60_000, "wait_time_ms": 500});
                let pulled: Value =
                    client.post(format!("{path}/pull")).bearer_auth(&token).json(&pull).send().await?.json().await?;
                let messages = pulled["result"]["messages"].as_array().context("a pull's messages")?.clone();
                let keys: Vec<String> =
                    messages.iter().map(|m| m["body"].as_str().unwrap_or_default().to_owned()).collect();
                {
                    let mut tally = shared.lock().unwrap();
                    keys.iter().for_each(|k| tally.taken(k));
                }
                if messages.is_empty() {
                    continue;
                }
                let acks: Vec<Value> = messages.iter().map(|m| json!({"lease_id": m["lease_id"]})).collect();
                let acked =
                    client.post(format!("{path}/ack")).bearer_auth(&token).json(&json!({"acks": acks})).send().await?;
                if !acked.status().is_success() {
                    bail!("ack: {}", acked.status());
                }
                let mut tally = shared.lock().unwrap();
                keys.iter().for_each(|k| tally.done(k));
            }
            anyhow::Ok(())
        });
    }
    while let Some(task) = tasks.join_next().await {
        task??;
    }
    Ok(())
}

/// The webhook receiver: each message's key in flight while it works on the batch.
async fn receive(body: web::Bytes, tally: web::Data<Mutex<Tally>>) -> HttpResponse {
    let batch: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let keys: Vec<String> = batch["messages"]
        .as_array()
        .map(|ms| ms.iter().map(|m| m["body"].as_str().unwrap_or_default().to_owned()).collect())
        .unwrap_or_default();
    keys.iter().for_each(|k| tally.lock().unwrap().taken(k));
    tokio::time::sleep(WORK).await;
    keys.iter().for_each(|k| tally.lock().unwrap().done(k));
    HttpResponse::Ok().finish()
}

/// Deletes the queue, again after a 503 as a client would: the drain's last acks may still be deleting
/// some of its messages, and two deletes of the same rows can deadlock (one of them is answered 503).
async fn delete_queue(env: &Env, queue: &str) -> anyhow::Result<()> {
    for _ in 0..10 {
        let resp = env.client.delete(env.url(&format!("queues/{queue}"))).bearer_auth(&env.token).send().await?;
        match resp.status() {
            status if status.is_success() => return Ok(()),
            reqwest::StatusCode::SERVICE_UNAVAILABLE => tokio::time::sleep(Duration::from_millis(200)).await,
            status => bail!("deleting queue {queue}: {status}"),
        }
    }
    bail!("deleting queue {queue}: 503 ten times")
}
