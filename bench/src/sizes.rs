//! W13 message sizes: W1 and W2 with 1 MiB bodies beside 1 KiB ones, for an account on a plan that allows
//! 1 MiB messages. Publishing: 4 clients, batches of 100 at 1 KiB and of one at 1 MiB (a batch may total
//! at most one largest message); draining: 4 clients pulling 100 (1 KiB) or 10 (1 MiB) and acking each
//! batch. Bodies are random letters and digits, which PostgreSQL's compression cannot shrink. Each row reports
//! messages/s and MB/s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::Rng;
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection};

use crate::setup::{self, Env};

#[derive(clap::Args, Debug, Clone)]
pub struct SizesArgs {
    /// Seconds measured in each phase, after a warm-up of 2 s.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
}

const CLIENTS: usize = 4;
const MIB: usize = 1_048_576;

/// One size's shape: the body's bytes, messages per publish and per pull.
struct Shape {
    name: &'static str,
    bytes: usize,
    publish_batch: usize,
    pull_batch: usize,
}

const SHAPES: [Shape; 2] = [
    Shape { name: "1 KiB", bytes: 1024, publish_batch: 100, pull_batch: 100 },
    Shape { name: "1 MiB", bytes: MIB, publish_batch: 1, pull_batch: 10 },
];

pub async fn run(args: SizesArgs) -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    let mut db = PgConnection::connect(&env.database_url).await?;
    sqlx::query("insert into plans (name, limits) values ('large', $1::text::jsonb)")
        .bind(json!({ "max_message_bytes": MIB }).to_string())
        .execute(&mut db)
        .await?;
    sqlx::query("update accounts set plan = 'large' where id = $1::uuid").bind(&env.account).execute(&mut db).await?;
    // The node reads the plan within a second of the change.
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("W13 message sizes: {CLIENTS} clients, {} s a phase", args.seconds);
    let mut rows = Vec::new();
    for shape in &SHAPES {
        let queue = env
            .queue_with_consumer(
                (&env.account, &env.token),
                &shape.name.replace(' ', "-").to_lowercase(),
                json!({"type": "http_pull"}),
            )
            .await?;
        env.settle().await?;
        let published = publish(&env, &queue, shape, args.seconds).await?;
        env.settle().await?;
        let drained = drain(&env, &queue, shape, args.seconds).await?;
        let mb = |rate: f64| rate * shape.bytes as f64 / 1e6;
        println!(
            "  {}: W1 {published:.0} msg/s ({:.1} MB/s); W2 {drained:.0} msg/s ({:.1} MB/s)",
            shape.name,
            mb(published),
            mb(drained)
        );
        rows.push(json!({
            "body_bytes": shape.bytes, "publish_batch": shape.publish_batch, "pull_batch": shape.pull_batch,
            "w1_per_second": published, "w1_mb_per_second": mb(published),
            "w2_per_second": drained, "w2_mb_per_second": mb(drained),
        }));
    }
    setup::write_result("sizes", &json!({ "seconds": args.seconds, "clients": CLIENTS, "rows": rows }))?;
    env.finish().await
}

/// A random body of `bytes` letters and digits.
fn body(bytes: usize) -> String {
    rand::thread_rng().sample_iter(&rand::distributions::Alphanumeric).take(bytes).map(char::from).collect()
}

/// Messages stored per second by `CLIENTS` clients publishing `shape`'s batches, after a warm-up.
async fn publish(env: &Env, queue: &str, shape: &Shape, seconds: u64) -> anyhow::Result<f64> {
    let warm_until = Instant::now() + Duration::from_secs(2);
    let end = warm_until + Duration::from_secs(seconds);
    let stored = Arc::new(AtomicU64::new(0));
    let url = env.url(&format!("queues/{queue}/messages/batch"));
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let messages: Vec<Value> =
            (0..shape.publish_batch).map(|_| json!({"body": body(shape.bytes), "content_type": "text"})).collect();
        let request = json!({ "messages": messages }).to_string();
        let (client, token, url, stored, batch) =
            (env.client.clone(), env.token.clone(), url.clone(), stored.clone(), shape.publish_batch as u64);
        clients.push(tokio::spawn(async move {
            while Instant::now() < end {
                let resp = client
                    .post(&url)
                    .bearer_auth(&token)
                    .header("content-type", "application/json")
                    .body(request.clone())
                    .send()
                    .await?;
                anyhow::ensure!(
                    resp.status().is_success(),
                    "publish answered {}: {}",
                    resp.status(),
                    resp.text().await?
                );
                if Instant::now() > warm_until {
                    stored.fetch_add(batch, Ordering::Relaxed);
                }
            }
            anyhow::Ok(())
        }));
    }
    for client in clients {
        client.await??;
    }
    Ok(stored.load(Ordering::Relaxed) as f64 / seconds as f64)
}

/// Messages pulled and acked per second by `CLIENTS` clients, after a warm-up, from the backlog the
/// publishing left; stops early when the queue runs dry.
async fn drain(env: &Env, queue: &str, shape: &Shape, seconds: u64) -> anyhow::Result<f64> {
    let start = Instant::now();
    let warm_until = start + Duration::from_secs(2);
    let end = warm_until + Duration::from_secs(seconds);
    let acked = Arc::new(AtomicU64::new(0));
    let dry = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let (client, token, acked, dry) = (env.client.clone(), env.token.clone(), acked.clone(), dry.clone());
        let (pull, ack) =
            (env.url(&format!("queues/{queue}/messages/pull")), env.url(&format!("queues/{queue}/messages/ack")));
        let request = json!({ "batch_size": shape.pull_batch, "visibility_timeout_ms": 60_000 });
        clients.push(tokio::spawn(async move {
            while Instant::now() < end {
                let pulled: Value = client.post(&pull).bearer_auth(&token).json(&request).send().await?.json().await?;
                let messages = pulled["result"]["messages"].as_array().context("a pull's messages")?;
                if messages.is_empty() {
                    dry.lock().expect("dry lock").get_or_insert_with(Instant::now);
                    break;
                }
                let acks: Vec<Value> = messages.iter().map(|m| json!({"lease_id": m["lease_id"]})).collect();
                let resp = client.post(&ack).bearer_auth(&token).json(&json!({ "acks": acks })).send().await?;
                anyhow::ensure!(resp.status().is_success(), "ack answered {}", resp.status());
                if Instant::now() > warm_until {
                    acked.fetch_add(messages.len() as u64, Ordering::Relaxed);
                }
            }
            anyhow::Ok(())
        }));
    }
    for client in clients {
        client.await??;
    }
    let stopped = dry.lock().expect("dry lock").unwrap_or(end).min(end);
    let measured = stopped.saturating_duration_since(warm_until).as_secs_f64();
    anyhow::ensure!(measured > 1.0, "the queue ran dry during the warm-up: publish for longer");
    Ok(acked.load(Ordering::Relaxed) as f64 / measured)
}
