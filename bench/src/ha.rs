//! The load and the checker of the high-availability test (scripts/ha/run.sh, `make ha-test`). The script
//! runs etcd, two Patroni-managed PostgreSQL instances behind HAProxy and several skiplock nodes, and
//! does the faults (node kills, a switchover, a failover); this side works two queues through the API
//! nodes meanwhile: one pulled and acked, one pushed to a local webhook receiver. When the script writes
//! the stop file, everything left is drained and the crash suite's checker (chaos.rs) judges each
//! queue's history. It also measures, per API node, the longest stretch of 503s from /readyz.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::chaos::{self, Client, FaultyReceiver, History, Mode};

#[derive(Debug, Clone, clap::Args)]
pub struct HaArgs {
    /// Base URLs of the API nodes (http://host:port), comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    #[arg(long)]
    pub account: String,
    #[arg(long)]
    pub token: String,
    /// Created once the queues exist and the load has begun.
    #[arg(long)]
    pub ready_file: PathBuf,
    /// The load stops once this file exists; its text (`kills=N failovers=M`) goes into the report.
    #[arg(long)]
    pub stop_file: PathBuf,
    /// Messages per second published to each queue, by all producers together.
    #[arg(long, default_value_t = 100)]
    pub rate: u64,
    /// The webhook consumer's max_concurrency, which the receiver checks is never exceeded.
    #[arg(long, default_value_t = 2)]
    pub max_concurrency: usize,
    /// The longest the whole run may take, stop file or not.
    #[arg(long, default_value_t = 600)]
    pub deadline_seconds: u64,
    /// The only 5xx statuses the clients may get (the upgrade test allows 503); any 5xx when not given.
    #[arg(long, value_delimiter = ',')]
    pub allowed_server_errors: Option<Vec<u16>>,
}

const HOLD: Duration = Duration::from_millis(100);

pub async fn run(args: HaArgs) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(args.deadline_seconds);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?;
    let errors = chaos::ServerErrors::default();
    let clients: Vec<Client> = args
        .nodes
        .iter()
        .map(|n| {
            let base = format!("{}/client/v4/accounts/{}", n.trim_end_matches('/'), args.account);
            Client { server_errors: errors.clone(), ..Client::new(http.clone(), base, args.token.clone()) }
        })
        .collect();
    let first = &clients[0];
    let create = |name: &'static str| async move {
        let q =
            first.post("queues", &json!({"queue_name": name})).await.map_err(|_| anyhow::anyhow!("create {name}"))?;
        anyhow::Ok(q["queue_id"].as_str().unwrap_or_default().to_owned())
    };
    let (pull_queue, hook_queue) = (create("ha-pull").await?, create("ha-hook").await?);
    let (pull_dlq, hook_dlq) = (create("ha-pull-dlq").await?, create("ha-hook-dlq").await?);
    let retries = json!({"max_retries": chaos::MAX_RETRIES});
    first
        .post(
            &format!("queues/{pull_queue}/consumers"),
            &json!({"type": "http_pull", "dead_letter_queue": "ha-pull-dlq", "settings": retries}),
        )
        .await
        .map_err(|_| anyhow::anyhow!("pull consumer"))?;
    let receiver = FaultyReceiver::start().await?;
    receiver.behave_from_now_on();
    receiver.hold_each_for(HOLD);
    let hook = json!({
        "type": "webhook", "url": format!("http://127.0.0.1:{}/hook", receiver.port),
        "dead_letter_queue": "ha-hook-dlq",
        "settings": {"max_retries": chaos::MAX_RETRIES, "max_wait_time_ms": 100, "batch_size": 10,
                     "max_concurrency": args.max_concurrency},
    });
    first.post(&format!("queues/{hook_queue}/consumers"), &hook).await.map_err(|_| anyhow::anyhow!("webhook"))?;
    for dlq in [&pull_dlq, &hook_dlq] {
        first
            .post(&format!("queues/{dlq}/consumers"), &json!({"type": "http_pull"}))
            .await
            .map_err(|_| anyhow::anyhow!("dlq consumer"))?;
    }

    let (pull_history, hook_history): (Arc<Mutex<History>>, Arc<Mutex<History>>) = Default::default();
    let stop = CancellationToken::new();
    let mut load = tokio::task::JoinSet::new();
    // Each queue gets a batch producer and a single-message producer on every node, sharing `rate`.
    let producers = clients.len() as f64 * 2.0;
    let batch_pause = Duration::from_secs_f64(10.0 * producers / args.rate.max(1) as f64);
    let single_pause = Duration::from_secs_f64(producers / args.rate.max(1) as f64);
    for (i, client) in clients.iter().enumerate() {
        for (queue, history) in [(&pull_queue, &pull_history), (&hook_queue, &hook_history)] {
            let c = client.clone();
            load.spawn(chaos::produce(c, queue.clone(), i, history.clone(), stop.clone(), Some(batch_pause)));
            load.spawn(produce_single(client.clone(), queue.clone(), i, history.clone(), stop.clone(), single_pause));
        }
        let c = client.clone();
        load.spawn(chaos::consume(c, pull_queue.clone(), pull_history.clone(), stop.clone(), chaos::VISIBILITY_MS));
    }
    let readiness: Vec<_> = args.nodes.iter().map(|n| tokio::spawn(watch_readiness(n.clone(), stop.clone()))).collect();
    std::fs::write(&args.ready_file, b"ready\n").context("writing the ready file")?;
    eprintln!("ha: load running on {} API nodes", clients.len());

    while !args.stop_file.exists() {
        if Instant::now() > deadline {
            stop.cancel();
            bail!("the stop file did not appear before the deadline");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let faults = std::fs::read_to_string(&args.stop_file).unwrap_or_default().trim().to_owned();
    stop.cancel();
    while load.join_next().await.is_some() {}
    let mut stretches = Vec::new();
    for (node, task) in args.nodes.iter().zip(readiness) {
        stretches.push((node.clone(), task.await.unwrap_or_default()));
    }

    eprintln!("ha: draining");
    loop {
        let mut left = 0;
        for q in [&pull_queue, &hook_queue, &pull_dlq, &hook_dlq] {
            left = left.max(chaos::backlog(first, q).await);
        }
        if left == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("the queues could not be drained before the deadline");
        }
        chaos::drain_once(first, &pull_queue, &pull_history, false).await;
        chaos::drain_once(first, &pull_dlq, &pull_history, true).await;
        chaos::drain_once(first, &hook_dlq, &hook_history, true).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    {
        let mut h = hook_history.lock().unwrap();
        for (body, received) in receiver.acked() {
            h.acked_at.entry(body.clone()).or_insert(received);
            h.ack_attempted.insert(body);
        }
        h.deliveries.extend(receiver.deliveries());
    }

    println!("faults: {faults}");
    // The script's counts (`node kills=4 switchovers=1 failovers=1 ...`) fill the checker's fault columns.
    let count = |key: &str| -> u64 {
        faults.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok()).unwrap_or(0)
    };
    let (kills, pg_changes) = (count("kills"), count("switchovers") + count("failovers"));
    let pull = chaos::check(&pull_history.lock().unwrap(), Mode::Pull, kills, pg_changes);
    let hook = chaos::check(&hook_history.lock().unwrap(), Mode::Webhook, kills, pg_changes);
    println!("{pull}\n{hook}");
    let server_errors = errors.counts();
    println!("5xx answers to the load (status: count): {server_errors:?}");
    let max_in_flight = receiver.max_in_flight();
    println!("webhook max_concurrency {}: at most {max_in_flight} deliveries in flight at once", args.max_concurrency);
    println!("| API node | longest stretch of /readyz 503s |\n|---|--:|");
    for (node, stretch) in &stretches {
        println!("| {node} | {:.1} s |", stretch.as_secs_f64());
    }
    let mut failed = Vec::new();
    if !pull.passed() {
        failed.push("the pull queue's history has violations");
    }
    if !hook.passed() {
        failed.push("the webhook queue's history has violations");
    }
    if max_in_flight > args.max_concurrency {
        failed.push("max_concurrency was exceeded");
    }
    if let Some(allowed) = &args.allowed_server_errors {
        if server_errors.keys().any(|status| !allowed.contains(status)) {
            failed.push("a 5xx other than the allowed ones was answered");
        }
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    Ok(())
}

/// Publishes one message per request (the batch producer is chaos::produce).
async fn produce_single(
    client: Client,
    queue: String,
    producer: usize,
    history: Arc<Mutex<History>>,
    stop: CancellationToken,
    pause: Duration,
) {
    for n in 0.. {
        if stop.is_cancelled() {
            return;
        }
        tokio::time::sleep(pause).await;
        let body = format!("s{producer}-{n}");
        history.lock().unwrap().published.insert(body.clone(), false);
        let request = json!({"body": body, "content_type": "text"});
        if client.post(&format!("queues/{queue}/messages"), &request).await.is_ok() {
            history.lock().unwrap().published.insert(body, true);
        }
    }
}

/// Asks a node's /readyz every 100 ms until stopped; returns the longest run of 503 answers. A node
/// that does not answer at all (killed by the test) ends a run.
async fn watch_readiness(node: String, stop: CancellationToken) -> Duration {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().expect("a client");
    let (mut longest, mut since): (Duration, Option<Instant>) = (Duration::ZERO, None);
    let mut seen: HashMap<u16, usize> = HashMap::new();
    while !stop.is_cancelled() {
        let status = http.get(format!("{node}/readyz")).send().await.map(|r| r.status().as_u16()).unwrap_or(0);
        *seen.entry(status).or_default() += 1;
        if status == 503 {
            let start = *since.get_or_insert_with(Instant::now);
            longest = longest.max(start.elapsed());
        } else {
            since = None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("ha: {node} /readyz answers (status: count, 0 = no answer): {seen:?}");
    longest
}
