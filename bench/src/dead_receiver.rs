//! A dead receiver (docs/benchmarks.md, "A dead receiver"): `messages` due for a webhook consumer whose
//! endpoint refuses connections. Over the measured window: the batches attempted per minute (from the
//! messages' attempts) and the CPU of skiplock and PostgreSQL; then a receiver comes up on the endpoint's
//! port, and the time until its first delivery and until the backlog is gone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{web, HttpResponse};
use anyhow::{bail, Context};
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection};

use crate::setup::{self, Env};

#[derive(clap::Args, Debug, Clone)]
pub struct DeadReceiverArgs {
    /// Messages due for the consumer.
    #[arg(long, default_value_t = 100_000)]
    pub messages: u64,
    /// Seconds measured while the endpoint is down, after a warm-up of 10 s.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Keep the queue's delivery paused through the window: the node's own upkeep beside the messages, the
    /// floor under any breaker's cost.
    #[arg(long)]
    pub paused: bool,
}

const WARM_UP: Duration = Duration::from_secs(10);
const BATCH: u64 = 100;
/// How long the backlog may take to flow once the endpoint is back.
const RECOVERY_DEADLINE: Duration = Duration::from_secs(600);

pub async fn run(args: DeadReceiverArgs) -> anyhow::Result<()> {
    let env = Env::start(&[("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8".into())]).await?;
    let port = setup::free_port();
    // A retry delay of 5 s and 100 retries: without a breaker each batch is tried every 5 s, and no message
    // runs out of attempts within the window.
    let consumer = json!({"type": "webhook", "url": format!("http://127.0.0.1:{port}/hook"),
                          "settings": {"batch_size": BATCH, "max_retries": 100, "retry_delay": 5,
                                       "max_wait_time_ms": 0}});
    let queue = env.queue_with_consumer((&env.account, &env.token), "dead", consumer).await?;
    env.set_paused(&queue, true).await?;
    preload(&env, &queue, args.messages).await?;
    env.settle().await?;
    println!(
        "A dead receiver: {} messages due for a webhook consumer whose endpoint refuses connections",
        args.messages
    );
    env.set_paused(&queue, args.paused).await?;
    tokio::time::sleep(WARM_UP).await;

    let mut db = PgConnection::connect(&env.database_url).await?;
    let server = env.server.id().context("the server's pid")?;
    let postmaster = env.postmaster_pid().await?;
    let (attempts_before, cpu_before, started) =
        (attempts(&mut db).await?, crate::cpu::sample(&[server], postmaster), Instant::now());
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let (attempts_after, cpu_after) = (attempts(&mut db).await?, crate::cpu::sample(&[server], postmaster));
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    let batches_per_minute = (attempts_after - attempts_before) as f64 / BATCH as f64 / minutes;
    let cpu = cpu_after - cpu_before;
    let core = |seconds: f64| seconds / (minutes * 60.0) * 100.0;
    let (server_cpu, postgres_cpu) = (core(cpu.server), core(cpu.postgres));
    println!(
        "  down for {:.0} s: {batches_per_minute:.1} batches attempted a minute; CPU skiplock {server_cpu:.2}% and PostgreSQL {postgres_cpu:.2}% of a core",
        minutes * 60.0
    );

    if args.paused {
        env.set_paused(&queue, false).await?;
    }
    let consumers = env.client.get(env.url(&format!("queues/{queue}/consumers"))).bearer_auth(&env.token).send();
    let consumers: Value = consumers.await?.json().await?;
    let health = consumers["result"][0]["health"].clone();
    let probe_in = health["next_probe_at"]
        .as_str()
        .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
        .map(|at| (at.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_milliseconds() as f64 / 1000.0);
    if let Some(probe_in) = probe_in {
        println!(
            "  the circuit is open after {} failures in a row; the next probe is due in {probe_in:.1} s",
            health["consecutive_failures"]
        );
    }
    let delivered = web::Data::new(AtomicU64::new(0));
    let first = Arc::new(std::sync::OnceLock::<Instant>::new());
    let (seen, first_seen) = (delivered.clone(), first.clone());
    let back = Instant::now();
    let receiver = actix_web::HttpServer::new(move || {
        let (seen, first_seen) = (seen.clone(), first_seen.clone());
        actix_web::App::new().app_data(web::PayloadConfig::new(16 << 20)).default_service(web::to(
            move |body: web::Bytes| {
                let (seen, first_seen) = (seen.clone(), first_seen.clone());
                async move {
                    first_seen.get_or_init(Instant::now);
                    let batch: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let count = batch["messages"].as_array().map_or(0, Vec::len) as u64;
                    seen.fetch_add(count, Ordering::SeqCst);
                    HttpResponse::Ok().finish()
                }
            },
        ))
    })
    .workers(2)
    .disable_signals()
    .bind(("127.0.0.1", port))?
    .run();
    let handle = receiver.handle();
    tokio::spawn(receiver);
    while env_backlog(&mut db).await? > 0 {
        if back.elapsed() > RECOVERY_DEADLINE {
            bail!("the backlog did not flow within {RECOVERY_DEADLINE:?} of the endpoint coming back");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drained = back.elapsed().as_secs_f64();
    let first_delivery = first.get().map(|at| at.duration_since(back).as_secs_f64()).unwrap_or(f64::NAN);
    println!("  back: first delivery after {first_delivery:.2} s, the backlog gone after {drained:.1} s");
    handle.stop(true).await;
    setup::write_result(
        "dead-receiver",
        &json!({"messages": args.messages, "seconds": minutes * 60.0, "batch_size": BATCH,
                "batches_attempted_per_minute": batches_per_minute, "skiplock_cpu_percent_of_core": server_cpu,
                "postgres_cpu_percent_of_core": postgres_cpu, "first_delivery_after_back_s": first_delivery,
                "drained_after_back_s": drained, "delivered": delivered.load(Ordering::SeqCst),
                "paused": args.paused, "health_when_back": health, "next_probe_in_s": probe_in}),
    )?;
    env.finish().await
}

/// Deliveries of every message so far, summed (each attempt of a batch counts each of its messages).
async fn attempts(db: &mut PgConnection) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar("select coalesce(sum(attempts), 0)::int8 from messages").fetch_one(db).await?)
}

async fn env_backlog(db: &mut PgConnection) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar("select count(*) from messages").fetch_one(db).await?)
}

/// `count` messages in batches of 100 from 4 clients.
async fn preload(env: &Env, queue: &str, count: u64) -> anyhow::Result<()> {
    let url = env.url(&format!("queues/{queue}/messages/batch"));
    let batches = count.div_ceil(BATCH);
    let mut tasks = tokio::task::JoinSet::new();
    for client in 0..4 {
        let (http, url, token) = (env.client.clone(), url.clone(), env.token.clone());
        tasks.spawn(async move {
            for _ in (client..batches).step_by(4) {
                let messages: Vec<Value> = (0..BATCH).map(|i| json!({"body": format!("m{i}")})).collect();
                let resp = http.post(&url).bearer_auth(&token).json(&json!({ "messages": messages })).send().await?;
                if !resp.status().is_success() {
                    bail!("preload: {} {}", resp.status(), resp.text().await.unwrap_or_default());
                }
            }
            anyhow::Ok(())
        });
    }
    while let Some(task) = tasks.join_next().await {
        task??;
    }
    Ok(())
}
