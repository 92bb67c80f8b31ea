//! W6 spread: W1 (publish batches of 100, 4 clients) and W2 (drain, pull 100 + ack, 4 consumers) spread
//! over 1,000 queues in 100 accounts, beside the same workloads on one queue, in one run. Many small
//! tenants must cost no more per message than one big one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde_json::json;

use crate::api_load::Api;
use crate::http::{Connection, Request};
use crate::setup::{self, Env};

#[derive(clap::Args, Debug, Clone)]
pub struct SpreadArgs {
    #[arg(long, default_value_t = 100)]
    pub accounts: usize,
    /// Queues per account.
    #[arg(long, default_value_t = 10)]
    pub queues: usize,
    /// Seconds of each W1 run, and the most each W2 drain may take.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Messages each W2 drain starts with.
    #[arg(long, default_value_t = 200_000)]
    pub backlog: u64,
}

const CLIENTS: usize = 4;

/// One queue of one account.
#[derive(Clone)]
struct Target {
    api: Api,
    queue: String,
}

impl Target {
    fn publish_request(&self, body: &str) -> Request {
        let messages = vec![json!({"body": body, "content_type": "text"}); 100];
        let path = format!("/client/v4/accounts/{}/queues/{}/messages/batch", self.api.account, self.queue);
        Request::post(&self.api.host, &path, &self.api.token, json!({ "messages": messages }).to_string().as_bytes())
    }
}

pub async fn run(args: SpreadArgs) -> anyhow::Result<()> {
    // One queue of one account is measured at full speed.
    let env = Env::start(&[("SKIPLOCK_PUBLISH_RATE_LIMIT", "0".into())]).await?;
    let host = env.base.trim_start_matches("http://").to_owned();
    let pull = json!({"type": "http_pull"});
    let mut apis = vec![Api { host: host.clone(), account: env.account.clone(), token: env.token.clone() }];
    let others: Vec<Api> = stream::iter(1..args.accounts)
        .map(|i| {
            let (url, host) = (env.database_url.clone(), host.clone());
            async move {
                let (account, token) = setup::create_account(&url, &format!("spread-{i}")).await?;
                anyhow::Ok(Api { host, account, token })
            }
        })
        .buffer_unordered(16)
        .try_collect()
        .await?;
    apis.extend(others);
    let made = apis.iter().flat_map(|api| (0..args.queues).map(move |q| (api, q)));
    let spread: Vec<Target> = stream::iter(made)
        .map(|(api, q)| {
            let pull = pull.clone();
            let env = &env;
            async move {
                let queue = env.queue_with_consumer((&api.account, &api.token), &format!("spread-{q}"), pull).await?;
                anyhow::Ok(Target { api: api.clone(), queue })
            }
        })
        .buffer_unordered(16)
        .try_collect()
        .await?;
    let single_queue = env.queue_with_consumer((&env.account, &env.token), "single", pull.clone()).await?;
    let single = vec![Target { api: apis[0].clone(), queue: single_queue }];
    let body = "x".repeat(1024);
    let seconds = Duration::from_secs(args.seconds);

    // Warm-up: a short W1 on both, then empty.
    publish(&single, &body, Duration::from_secs(2)).await?;
    publish(&spread, &body, Duration::from_secs(2)).await?;
    drain(&single, Duration::from_secs(60)).await?;
    drain(&spread, Duration::from_secs(60)).await?;

    env.settle().await?;
    let w1_single = publish(&single, &body, seconds).await?;
    drain(&single, Duration::from_secs(120)).await?;
    env.settle().await?;
    let w1_spread = publish(&spread, &body, seconds).await?;
    drain(&spread, Duration::from_secs(120)).await?;
    preload(&single, &body, args.backlog).await?;
    env.settle().await?;
    let w2_single = drain(&single, seconds).await?;
    drain(&single, Duration::from_secs(120)).await?;
    preload(&spread, &body, args.backlog).await?;
    env.settle().await?;
    let w2_spread = drain(&spread, seconds).await?;

    let queues = spread.len();
    println!("| workload | one queue | {queues} queues over {} accounts | spread / one |", args.accounts);
    println!("|---|--:|--:|--:|");
    println!(
        "| W1 publish, batches of 100, 4 clients | {w1_single:.0} | {w1_spread:.0} | {:.2}x |",
        w1_spread / w1_single
    );
    println!(
        "| W2 drain, pull 100 + ack, 4 consumers | {w2_single:.0} | {w2_spread:.0} | {:.2}x |",
        w2_spread / w2_single
    );
    let result = json!({
        "workload": "W6 spread: W1 and W2 over many queues in many accounts, beside one queue",
        "accounts": args.accounts, "queues": queues, "seconds": args.seconds, "backlog": args.backlog,
        "w1_single": w1_single, "w1_spread": w1_spread, "w1_ratio": w1_spread / w1_single,
        "w2_single": w2_single, "w2_spread": w2_spread, "w2_ratio": w2_spread / w2_single,
        "at": chrono::Utc::now().to_rfc3339(),
    });
    env.finish().await?;
    setup::write_result("spread", &result)
}

/// CLIENTS connections publishing batches of 100 round the targets for `seconds`; messages a second.
async fn publish(targets: &[Target], body: &str, seconds: Duration) -> anyhow::Result<f64> {
    let requests: Arc<Vec<Request>> = Arc::new(targets.iter().map(|t| t.publish_request(body)).collect());
    let (done, next) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let started = Instant::now();
    let until = started + seconds;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let (requests, done, next, host) = (requests.clone(), done.clone(), next.clone(), targets[0].api.host.clone());
        tasks.spawn(async move {
            let mut connection = Connection::open(&host).await?;
            while Instant::now() < until {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize % requests.len();
                let answer = connection.send(&requests[i]).await?;
                if answer.status != 200 {
                    bail!("publish: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
                }
                done.fetch_add(100, Ordering::Relaxed);
            }
            anyhow::Ok(())
        });
    }
    while let Some(task) = tasks.join_next().await {
        task??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

/// Publishes about `count` messages spread evenly over the targets.
async fn preload(targets: &[Target], body: &str, count: u64) -> anyhow::Result<()> {
    let per_target = count / targets.len() as u64;
    stream::iter(targets)
        .map(|t| t.api.preload(&t.queue, per_target, body))
        .buffer_unordered(CLIENTS)
        .try_collect::<()>()
        .await
}

/// CLIENTS consumers, each going round its share of the targets pulling 100 and acking them, until every
/// target is empty or `seconds` pass; messages a second.
async fn drain(targets: &[Target], seconds: Duration) -> anyhow::Result<f64> {
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + seconds;
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        // With fewer targets than consumers, consumers share a target, as W2's four share its queue.
        let mut mine: Vec<Target> =
            targets.iter().skip(c % targets.len()).step_by(CLIENTS.min(targets.len())).cloned().collect();
        let done = done.clone();
        tasks.spawn(async move {
            let mut connection = Connection::open(&mine[0].api.host).await?;
            let mut i = 0;
            while !mine.is_empty() && Instant::now() < until {
                i %= mine.len();
                let acked = mine[i].api.pull_and_ack(&mut connection, &mine[i].queue).await?;
                if acked == 0 {
                    mine.swap_remove(i);
                } else {
                    done.fetch_add(acked, Ordering::Relaxed);
                    i += 1;
                }
            }
            anyhow::Ok(())
        });
    }
    while let Some(task) = tasks.join_next().await {
        task??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}
