//! Long-polling pulls (`wait_time_ms`), two measurements on a server of their own (a fresh database on
//! DATABASE_URL's server each):
//!   W7: publish -> long-poll receive latency: single publishes at a fixed rate while pullers wait on the
//!       queue, each looping on a pull that waits and carries the acks of what it got;
//!   idle: what 1,000 waiting pulls on 1,000 empty queues cost the server and PostgreSQL in CPU, beside
//!       the same server and queues with no pulls at all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::web;
use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::cpu::{self, CpuTimes};
use crate::http::{Connection, Request};
use crate::latency::{publish_at_rate, Timeline};
use crate::setup::{percentile_ms, Env};

/// How long each pull waits, the most the API allows.
const WAIT_MS: u64 = 20_000;
/// Queues per account in the idle measurement.
const QUEUES_PER_ACCOUNT: usize = 100;

#[derive(Debug, Clone, clap::Args)]
pub struct LongPollArgs {
    /// W7: single-message publishes per second.
    #[arg(long, default_value_t = 1000)]
    pub rate: u32,
    /// W7: measured seconds of publishing, after the warm-up.
    #[arg(long, default_value_t = 20)]
    pub seconds: u32,
    /// W7: seconds of publishing before the measured ones, not counted.
    #[arg(long, default_value_t = 5)]
    pub warmup: u32,
    /// W7: pullers waiting on the queue.
    #[arg(long, default_value_t = 16)]
    pub pullers: usize,
    /// Idle: waiting pulls, one per queue, 100 queues per account.
    #[arg(long, default_value_t = 1000)]
    pub idle_pulls: usize,
    /// Idle: measured seconds. 60 covers one period of the looks that stand for the long polls after
    /// them (a minute); the queues' waiter marks, rewritten every 270 s at 20 s waits, fall outside it.
    #[arg(long, default_value_t = 60)]
    pub idle_seconds: u32,
    /// Run only these parts (w7, idle), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

/// `skiplock-bench long-poll`: measures, prints the tables and writes `bench/results/long-poll-<time>.json`.
pub async fn run(args: LongPollArgs) -> anyhow::Result<()> {
    let wanted = |w: &str| args.only.is_empty() || args.only.iter().any(|o| o.eq_ignore_ascii_case(w));
    let w7 = if wanted("w7") { Some(w7(args.rate, args.warmup, args.seconds, args.pullers).await?) } else { None };
    let idle = if wanted("idle") { Some(idle(args.idle_pulls, args.idle_seconds).await?) } else { None };
    let ms = |v: &Value, key: &str| v[key].as_f64().unwrap_or_default();
    if let Some(r) = &w7 {
        println!("\n| W7 publish -> long-poll receive | pullers | rate | measured messages | p50 | p90 | p99 | max | not arrived | duplicates | publish errors | CPU skiplock / PostgreSQL |");
        println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
        println!(
            "| skiplock | {} | {:.0}/s | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {} | {} | {} | {:.0}% / {:.0}% |",
            r["pullers"],
            ms(r, "achieved_rate"),
            r["measured_messages"],
            ms(r, "p50_ms"),
            ms(r, "p90_ms"),
            ms(r, "p99_ms"),
            ms(r, "max_ms"),
            r["not_arrived"],
            r["duplicates"],
            r["publish_errors"],
            ms(&r["cpu_percent"], "server"),
            ms(&r["cpu_percent"], "postgres"),
        );
    }
    if let Some(r) = &idle {
        println!("\n| idle, {} s | waiting pulls | pulls answered | CPU % of a core: skiplock | PostgreSQL | load generator |", r["seconds"]);
        println!("|---|--:|--:|--:|--:|--:|");
        for (label, part) in
            [("1,000 queues, no pulls", &r["baseline"]), ("the same with the waiting pulls", &r["waiting"])]
        {
            println!(
                "| {label} | {} | {} | {:.2} | {:.2} | {:.2} |",
                part["waiting_pulls"],
                part["pulls_answered"],
                ms(&part["cpu_percent"], "server"),
                ms(&part["cpu_percent"], "postgres"),
                ms(&part["cpu_percent"], "client"),
            );
        }
    }
    let result = json!({"w7": w7, "idle": idle, "at": chrono::Utc::now().to_rfc3339()});
    crate::setup::write_result("long-poll", &result)
}

/// A server of its own whose `/metrics` this bench can read, with no request-rate limit.
async fn start_env() -> anyhow::Result<(Env, String)> {
    let metrics = format!("127.0.0.1:{}", crate::setup::free_port());
    let env = Env::start(&[
        ("SKIPLOCK_RATE_LIMIT", "0".into()),
        ("SKIPLOCK_PUBLISH_RATE_LIMIT", "0".into()),
        ("SKIPLOCK_METRICS_BIND", metrics.clone()),
        ("SKIPLOCK_ADMIN_BIND", "127.0.0.1:0".into()),
    ])
    .await?;
    Ok((env, format!("http://{metrics}/metrics")))
}

/// The sum of a metric's samples whose line starts with `name` (a name, or a name with its labels).
async fn metric(client: &reqwest::Client, url: &str, name: &str) -> anyhow::Result<f64> {
    let text = client.get(url).send().await?.text().await?;
    Ok(text
        .lines()
        .filter(|line| line.starts_with(name))
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum())
}

/// The postmaster of DATABASE_URL's server, found as the parent of a backend (the server is local).
fn percent(cpu: CpuTimes, seconds: f64) -> Value {
    let of = |s: f64| s / seconds * 100.0;
    json!({"server": of(cpu.server), "postgres": of(cpu.postgres), "client": of(cpu.client)})
}

/// Where a puller pulls: the server (host:port), the pull's path, a token.
#[derive(Clone)]
struct PullTarget {
    host: String,
    path: String,
    token: String,
}

impl PullTarget {
    fn new(env: &Env, account: &str, token: &str, queue: &str) -> PullTarget {
        PullTarget {
            host: env.base.trim_start_matches("http://").to_owned(),
            path: format!("/client/v4/accounts/{account}/queues/{queue}/messages/pull"),
            token: token.to_owned(),
        }
    }

    /// A pull of up to `batch` messages that waits up to WAIT_MS, carrying `acks`.
    fn request(&self, batch: u32, acks: &[String]) -> Request {
        let mut body = json!({"batch_size": batch, "wait_time_ms": WAIT_MS});
        if !acks.is_empty() {
            body["acks"] = acks.iter().map(|lease| json!({"lease_id": lease})).collect();
        }
        Request::post(&self.host, &self.path, &self.token, body.to_string().as_bytes())
    }
}

/// W7 alone (the suite runs it beside W4): `rate` single publishes a second for `warmup` + `seconds` to a
/// queue that `pullers` long-polling pulls wait on; the latency of each message published after the
/// warm-up runs from its publish's send to its arrival in a pull's answer.
pub async fn w7(rate: u32, warmup: u32, seconds: u32, pullers: usize) -> anyhow::Result<Value> {
    let (env, metrics_url) = start_env().await?;
    let queue = env.queue_with_consumer((&env.account, &env.token), "w7", json!({"type": "http_pull"})).await?;
    let postmaster = env.postmaster_pid().await?;
    let server_pid = env.server.id().context("server pid")?;
    let total = (rate * (warmup + seconds)) as usize;
    let timeline = web::Data::new(Mutex::new(Timeline::new(total)));
    let errors = Arc::new(AtomicU64::new(0));
    let target = PullTarget::new(&env, &env.account, &env.token, &queue);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..pullers {
        let (target, timeline, errors) = (target.clone(), timeline.clone(), errors.clone());
        tasks.spawn(async move { receive(target, timeline, errors).await });
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&env.client, &metrics_url, "skiplock_waiting_pulls").await? < pullers as f64 {
        if Instant::now() > deadline {
            bail!("the {pullers} pullers are not all waiting after 10 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("W7: publishing {total} messages at {rate}/s to a queue {pullers} long-polling pulls wait on; the first {warmup} s are a warm-up");

    // CPU and wake-ups are counted from the warm-up's end to the last publish.
    let wakeup = |cause: &'static str| format!("skiplock_long_poll_wakeups_total{{cause=\"{cause}\"}}");
    let measured_from = Instant::now() + Duration::from_secs(warmup.into());
    let before = {
        let (client, url, wakeup) = (env.client.clone(), metrics_url.clone(), wakeup("notify"));
        tokio::spawn(async move {
            tokio::time::sleep_until(measured_from.into()).await;
            let notified = metric(&client, &url, &wakeup).await.unwrap_or_default();
            (Instant::now(), cpu::sample(&[server_pid], postmaster), notified)
        })
    };
    let env = Arc::new(env);
    let publish_secs = publish_at_rate(&env, &queue, rate, &timeline).await;
    let (cpu_at, cpu_before, notified_before) = before.await?;
    let cpu_used = cpu::sample(&[server_pid], postmaster) - cpu_before;
    let cpu_secs = cpu_at.elapsed().as_secs_f64();
    let notified = metric(&env.client, &metrics_url, &wakeup("notify")).await? - notified_before;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !timeline.lock().unwrap().all_arrived() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tasks.abort_all();

    let first = (rate * warmup) as usize;
    let ((arrival, publish), duplicates, publish_errors) = {
        let t = timeline.lock().unwrap();
        (t.spans_from(first), t.duplicates, t.publish_errors)
    };
    let measured = total - first;
    let result = json!({
        "workload": "W7 publish -> long-poll receive latency",
        "rate": rate, "warmup_seconds": warmup, "seconds": seconds, "pullers": pullers, "wait_time_ms": WAIT_MS,
        "achieved_rate": total as f64 / publish_secs, "measured_messages": measured,
        "p50_ms": percentile_ms(&arrival, 50.0), "p90_ms": percentile_ms(&arrival, 90.0),
        "p99_ms": percentile_ms(&arrival, 99.0), "max_ms": percentile_ms(&arrival, 100.0),
        "publish_p50_ms": percentile_ms(&publish, 50.0), "publish_p99_ms": percentile_ms(&publish, 99.0),
        "not_arrived": measured - arrival.len(), "duplicates": duplicates, "publish_errors": publish_errors,
        "pull_errors": errors.load(Ordering::Relaxed),
        "notify_wakeups_per_message": notified / (rate as f64 * cpu_secs).max(1.0),
        "cpu_percent": percent(cpu_used, cpu_secs),
        "at": chrono::Utc::now().to_rfc3339(),
    });
    Arc::try_unwrap(env).map_err(|_| anyhow::anyhow!("publishes still running"))?.finish().await?;
    Ok(result)
}

/// A W7 puller: pulls that wait, each carrying the acks of the messages the one before it got.
async fn receive(target: PullTarget, timeline: web::Data<Mutex<Timeline>>, errors: Arc<AtomicU64>) {
    let mut conn = None;
    let mut acks: Vec<String> = Vec::new();
    loop {
        let answer = async {
            if conn.is_none() {
                conn = Some(Connection::open(&target.host).await?);
            }
            let resp = conn.as_mut().expect("connected").send(&target.request(10, &acks)).await?;
            let now = Instant::now();
            if resp.status != 200 {
                bail!("pull answered {}: {}", resp.status, String::from_utf8_lossy(&resp.body));
            }
            let parsed: Value = serde_json::from_slice(&resp.body)?;
            Ok((now, parsed))
        }
        .await;
        acks.clear();
        match answer {
            Ok((now, parsed)) => {
                let mut t = timeline.lock().unwrap();
                for m in parsed["result"]["messages"].as_array().into_iter().flatten() {
                    if let Some(seq) = m["body"].as_str().and_then(|s| s.parse::<usize>().ok()) {
                        t.arrive(seq, now);
                    }
                    acks.extend(m["lease_id"].as_str().map(str::to_owned));
                }
            }
            Err(err) => {
                if errors.fetch_add(1, Ordering::Relaxed) < 3 {
                    eprintln!("pull failed: {err:#}");
                }
                conn = None;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The idle measurement: `pulls` queues with an http_pull consumer over accounts of 100 queues, CPU over
/// `seconds` with nothing else running, then again with a pull waiting on every queue (the pulls started
/// spread over one wait, as a fleet of consumers would be, and all waiting before the count starts).
pub async fn idle(pulls: usize, seconds: u32) -> anyhow::Result<Value> {
    let (env, metrics_url) = start_env().await?;
    let accounts = pulls.div_ceil(QUEUES_PER_ACCOUNT);
    eprintln!("idle: {pulls} queues over {accounts} accounts");
    let mut creating = tokio::task::JoinSet::new();
    let env = Arc::new(env);
    for a in 0..accounts {
        let env = env.clone();
        let count = QUEUES_PER_ACCOUNT.min(pulls - a * QUEUES_PER_ACCOUNT);
        creating.spawn(async move {
            let (account, token) = if a == 0 {
                (env.account.clone(), env.token.clone())
            } else {
                crate::setup::create_account(&env.database_url, &format!("idle-{a}")).await?
            };
            let mut targets = Vec::with_capacity(count);
            for q in 0..count {
                let queue = env
                    .queue_with_consumer((&account, &token), &format!("idle-{q}"), json!({"type": "http_pull"}))
                    .await?;
                targets.push(PullTarget::new(&env, &account, &token, &queue));
            }
            anyhow::Ok(targets)
        });
    }
    let mut targets = Vec::with_capacity(pulls);
    while let Some(made) = creating.join_next().await {
        targets.extend(made??);
    }
    let postmaster = env.postmaster_pid().await?;
    let server_pid = env.server.id().context("server pid")?;
    let window = Duration::from_secs(seconds.into());
    let answered = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let messages = Arc::new(AtomicU64::new(0));

    // What the same server and queues cost with nobody waiting, once the queues' creation has settled.
    tokio::time::sleep(Duration::from_secs(5)).await;
    eprintln!("idle: {seconds} s with no pulls");
    let baseline = measure_window(&env, &metrics_url, server_pid, postmaster, window, &answered).await?;

    eprintln!("idle: starting {pulls} waiting pulls over {} s", WAIT_MS / 1000);
    let spread = Duration::from_millis(WAIT_MS) / pulls.max(1) as u32;
    let mut waiting = tokio::task::JoinSet::new();
    for (i, target) in targets.into_iter().enumerate() {
        let (answered, errors, messages) = (answered.clone(), errors.clone(), messages.clone());
        let start = Instant::now() + spread * i as u32;
        waiting.spawn(async move {
            tokio::time::sleep_until(start.into()).await;
            wait_again_and_again(target, answered, errors, messages).await
        });
    }
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS) + Duration::from_secs(30);
    while metric(&env.client, &metrics_url, "skiplock_waiting_pulls").await? < pulls as f64 {
        if Instant::now() > deadline {
            bail!("the {pulls} pulls are not all waiting");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("idle: {seconds} s with {pulls} pulls waiting");
    let with_pulls = measure_window(&env, &metrics_url, server_pid, postmaster, window, &answered).await?;
    waiting.abort_all();
    let result = json!({
        "workload": "idle long polls: CPU with pulls waiting on empty queues",
        "queues": pulls, "accounts": accounts, "wait_time_ms": WAIT_MS, "seconds": seconds,
        "baseline": baseline, "waiting": with_pulls,
        "pull_errors": errors.load(Ordering::Relaxed), "messages_received": messages.load(Ordering::Relaxed),
        "at": chrono::Utc::now().to_rfc3339(),
    });
    Arc::try_unwrap(env).map_err(|_| anyhow::anyhow!("queue creation still running"))?.finish().await?;
    Ok(result)
}

/// CPU by party over `window`, with the waiting pulls (the gauge, at the start and the end), the pulls
/// answered and the wake-ups by cause meanwhile.
async fn measure_window(
    env: &Env,
    metrics_url: &str,
    server_pid: u32,
    postmaster: u32,
    window: Duration,
    answered: &AtomicU64,
) -> anyhow::Result<Value> {
    let causes = ["notify", "timer", "deadline", "recheck"];
    let mut wakeups_before = Vec::new();
    for cause in causes {
        wakeups_before.push(
            metric(&env.client, metrics_url, &format!("skiplock_long_poll_wakeups_total{{cause=\"{cause}\"}}")).await?,
        );
    }
    let waiting_before = metric(&env.client, metrics_url, "skiplock_waiting_pulls").await?;
    let (answered_before, started) = (answered.load(Ordering::Relaxed), Instant::now());
    let cpu_before = cpu::sample(&[server_pid], postmaster);
    tokio::time::sleep(window).await;
    let cpu_used = cpu::sample(&[server_pid], postmaster) - cpu_before;
    let secs = started.elapsed().as_secs_f64();
    let answered = answered.load(Ordering::Relaxed) - answered_before;
    let waiting_after = metric(&env.client, metrics_url, "skiplock_waiting_pulls").await?;
    let mut wakeups = serde_json::Map::new();
    for (cause, before) in causes.iter().zip(wakeups_before) {
        let now =
            metric(&env.client, metrics_url, &format!("skiplock_long_poll_wakeups_total{{cause=\"{cause}\"}}")).await?;
        wakeups.insert(cause.to_string(), json!(now - before));
    }
    Ok(json!({
        "seconds": secs, "waiting_pulls": waiting_before, "waiting_pulls_at_end": waiting_after,
        "pulls_answered": answered, "wakeups": wakeups, "cpu_percent": percent(cpu_used, secs),
    }))
}

/// An idle queue's consumer: a pull that waits, again as soon as it is answered.
async fn wait_again_and_again(
    target: PullTarget,
    answered: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
    messages: Arc<AtomicU64>,
) {
    let request = target.request(10, &[]);
    let mut conn = None;
    loop {
        let answer = async {
            if conn.is_none() {
                conn = Some(Connection::open(&target.host).await?);
            }
            let resp = conn.as_mut().expect("connected").send(&request).await?;
            if resp.status != 200 {
                bail!("pull answered {}: {}", resp.status, String::from_utf8_lossy(&resp.body));
            }
            let parsed: Value = serde_json::from_slice(&resp.body)?;
            Ok(parsed["result"]["messages"].as_array().map_or(0, Vec::len))
        }
        .await;
        match answer {
            Ok(got) => {
                answered.fetch_add(1, Ordering::Relaxed);
                messages.fetch_add(got as u64, Ordering::Relaxed);
            }
            Err(err) => {
                if errors.fetch_add(1, Ordering::Relaxed) < 3 {
                    eprintln!("pull failed: {err:#}");
                }
                conn = None;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
