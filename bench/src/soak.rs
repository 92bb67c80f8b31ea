//! The soak (`make soak`): an hour of mixed load over 100 accounts on two skiplock nodes (`serve --roles
//! api,dispatcher`) sharing a PostgreSQL cluster of its own, through the faults a long-lived deployment
//! meets: a node SIGKILLed every five minutes, PostgreSQL restarted in immediate mode once, and a snapshot
//! held open by another connection (a repeatable-read transaction) for ten minutes.
//!
//! The load, 300 messages/s in all, 80% of them in batches of 10 and the rest one at a time, each account
//! publishing through one node, or the other when that fails. Account 0's queue has a slow webhook
//! consumer (its receiver answers after 1-2 s), account 1's a failing one (a 500, or a 200 that retries
//! every message, so its messages use up 3 retries and go to its dead-letter queue, which is redriven once
//! into a pulled queue, `replay`).
//! The other accounts' queues are pulled with long polls, in three kinds: plain (one consumer, on the node
//! the producer does not use; acks carried by the next pull; some publishes carry an idempotency key and
//! are sent twice, and the second must store nothing), ordered and extending (a consumer on each node).
//! Ordered messages carry ordering keys, each numbered within its key and published with an idempotency
//! key until it is stored; extending consumers work on each batch 1.2-1.8 s, extending its leases
//! meanwhile, then ack it with the ack endpoint.
//!
//! Every client records what it sent and got in the crash suite's histories (chaos.rs); after the run
//! everything left is drained and `chaos::check` judges them. Per minute: messages published, delivered
//! and acked per second, publish round trips and publish -> first receipt latencies (p50, p99), each
//! node's RSS and CPU, and from PostgreSQL the size, live and dead rows and autovacuum runs of every table,
//! the size of every index, and the checkpoints (their count and time) and WAL written. The verdicts
//! (lost 0, RSS growth, p99 stability, flat sizes) are printed, stored with the figures in
//! `bench/results/soak-<time>.json`, and fail the run when one fails; scripts/plot-soak.py draws the
//! figures.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, HttpResponse};
use anyhow::{bail, Context};
use rand::Rng;
use serde_json::{json, Value};
use skiplock::testkit::TempCluster;
use sqlx::{Connection, Executor, PgConnection};
use tokio::process::{Child, Command};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::chaos::{self, Client, Delivery, History, Mode};
use crate::setup::{free_port, percentile_ms};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KillPattern {
    /// Always the second node, so that the first runs the whole soak and its RSS can be judged.
    Second,
    /// The two nodes in turn (no node then lives long enough for the RSS rule, which is not judged).
    Alternate,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// How long the load runs. The faults' default moments are set for 60 and scale with it.
    #[arg(long, default_value_t = 60)]
    pub minutes: u32,
    /// Accounts, each with a queue: two with webhook consumers, the rest pulled.
    #[arg(long, default_value_t = 100)]
    pub accounts: usize,
    /// Messages published per second, by all accounts together. At 300, on the 2-core machine the soak was
    /// written on, PostgreSQL took 0.8-1 core and the nodes and the bench 0.3 more: short of saturation,
    /// so that the p99s measure the service rather than a queue for the cores.
    #[arg(long, default_value_t = 300.0)]
    pub rate: f64,
    /// The share of the messages published in batches of 10 (the rest one at a time).
    #[arg(long, default_value_t = 0.8)]
    pub batched: f64,
    /// Seconds between node kills (default 300 for 60 minutes); the first comes half an interval in, so
    /// that kills fall in the middle of a minute. 0: no kills.
    #[arg(long)]
    pub kill_every_secs: Option<u64>,
    /// Which node is killed.
    #[arg(long, value_enum, default_value = "second")]
    pub kill: KillPattern,
    /// When PostgreSQL is restarted (immediate mode), in minutes from the start (default 35.5 of 60); a
    /// moment outside the run: never.
    #[arg(long)]
    pub pg_restart_minute: Option<f64>,
    /// When the snapshot is taken, in minutes from the start (default 20 of 60).
    #[arg(long)]
    pub snapshot_minute: Option<f64>,
    /// How long the snapshot is held, in minutes (default 10 of 60); 0: no snapshot.
    #[arg(long)]
    pub snapshot_minutes: Option<f64>,
    /// When the failing webhook's dead-letter queue is redriven, in minutes from the start (default 45.5
    /// of 60); a moment outside the run: never.
    #[arg(long)]
    pub redrive_minute: Option<f64>,
    /// The minute (from 1) whose p99s are the reference and at whose end the RSS baseline is taken
    /// (default 10 of 60).
    #[arg(long)]
    pub reference_minute: Option<u32>,
    /// The first minute (from 1) of the load's steady table and index sizes (default 15 of 60).
    #[arg(long)]
    pub steady_minute: Option<u32>,
}

const MINUTE: Duration = Duration::from_secs(60);
/// Pulls lease for this long. It must be at least the checker's `chaos::VISIBILITY_MS`: the checker takes
/// a redelivery sooner than that after a pull's send for a double lease. Extensions likewise ask for
/// LEASE_MS, so an extended lease ends later than the checker assumes, never sooner: a redelivery within an
/// extension the checker would miss, but it never reports one that was not.
const LEASE_MS: u64 = 3_000;
/// The long polls' wait.
const WAIT_MS: u64 = 10_000;
/// An extending consumer works on a batch for this long (at random) and extends its leases this often.
const WORK_MS: std::ops::RangeInclusive<u64> = 1_200..=1_800;
const EXTEND_EVERY: Duration = Duration::from_secs(1);
/// After a failure on its home node, a client uses the other node for this long.
const AWAY: Duration = Duration::from_secs(3);
/// Ordering keys of each ordered account.
const KEYS: u64 = 8;
/// The webhook accounts' rates (messages/s); the pulled accounts share the rest.
const SLOW_HOOK_RATE: f64 = 5.0;
const FAILING_HOOK_RATE: f64 = 1.0;
/// The failing webhook's retries: its messages reach its dead-letter queue after 4 deliveries.
const FAILING_RETRIES: i64 = 3;
/// The dispatcher's request timeout (2 x this + 5 s is a delivery's lease): above the slow receiver's 2 s.
const WEBHOOK_TIMEOUT_MS: u64 = 5_000;
const REPLAY_QUEUE: &str = "replay";

/// The pass rules.
const P99_MAX_RATIO: f64 = 2.0;
const RSS_MAX_GROWTH: f64 = 0.10;
const SIZE_MAX_GROWTH: f64 = 0.20;
const SIZE_SLACK_BYTES: f64 = 4.0 * 1024.0 * 1024.0;

/// What an account does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    SlowHook,
    FailingHook,
    Plain,
    Ordered,
    Extending,
}

impl Kind {
    fn of(account: usize) -> Kind {
        match account {
            0 => Kind::SlowHook,
            1 => Kind::FailingHook,
            a => match a % 4 {
                2 => Kind::Ordered,
                3 => Kind::Extending,
                _ => Kind::Plain,
            },
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::SlowHook => "slow_webhook",
            Kind::FailingHook => "failing_webhook",
            Kind::Plain => "plain",
            Kind::Ordered => "ordered",
            Kind::Extending => "extending",
        }
    }

    fn pulled(self) -> bool {
        !matches!(self, Kind::SlowHook | Kind::FailingHook)
    }
}

/// The account a body belongs to: every body starts with `a{account}-`.
fn account_of(body: &str) -> Option<usize> {
    body.strip_prefix('a')?.split('-').next()?.parse().ok()
}

/// The run's moments, from the flags or scaled from the 60-minute plan.
struct Plan {
    minutes: u32,
    kill_every: Option<Duration>,
    kill: KillPattern,
    pg_restart: Option<Duration>,
    snapshot: Option<(Duration, Duration)>,
    redrive: Option<Duration>,
    reference_minute: u32,
    steady_minute: u32,
}

impl Plan {
    fn new(args: &SoakArgs) -> anyhow::Result<Plan> {
        anyhow::ensure!(args.minutes > 0, "--minutes must be at least 1");
        anyhow::ensure!(args.accounts >= 5, "--accounts must be at least 5 (two webhooks and each kind of puller)");
        anyhow::ensure!(args.rate > SLOW_HOOK_RATE + FAILING_HOOK_RATE, "--rate is below the webhook accounts' own");
        anyhow::ensure!((0.0..1.0).contains(&args.batched), "--batched must be from 0 up to 1 (excluded)");
        let minutes = args.minutes as f64;
        let scaled = |of_60: f64| of_60 * minutes / 60.0;
        let within = |m: f64| (m > 0.0 && m < minutes).then(|| Duration::from_secs_f64(m * 60.0));
        let kill_every = args.kill_every_secs.unwrap_or(5 * args.minutes as u64);
        let (from, length) =
            (args.snapshot_minute.unwrap_or(scaled(20.0)), args.snapshot_minutes.unwrap_or(scaled(10.0)));
        let snapshot = (length > 0.0 && from >= 0.0 && from + length <= minutes)
            .then(|| (Duration::from_secs_f64(from * 60.0), Duration::from_secs_f64((from + length) * 60.0)));
        let minute =
            |given: Option<u32>, of_60: f64| given.unwrap_or(scaled(of_60).round() as u32).clamp(1, args.minutes);
        Ok(Plan {
            minutes: args.minutes,
            kill_every: (kill_every > 0).then(|| Duration::from_secs(kill_every)),
            kill: args.kill,
            pg_restart: within(args.pg_restart_minute.unwrap_or(scaled(35.5))),
            snapshot,
            redrive: within(args.redrive_minute.unwrap_or(scaled(45.5))),
            reference_minute: minute(args.reference_minute, 10.0),
            steady_minute: minute(args.steady_minute, 15.0),
        })
    }

    fn run(&self) -> Duration {
        MINUTE * self.minutes
    }

    /// The kills, half an interval in and then every interval, with the node each kills.
    fn kills(&self) -> Vec<(Duration, usize)> {
        let Some(every) = self.kill_every else { return Vec::new() };
        (0u32..)
            .map(|k| (every * k + every / 2, k as usize))
            .take_while(|(at, _)| *at < self.run())
            .map(|(at, k)| (at, if self.kill == KillPattern::Alternate { (k + 1) % 2 } else { 1 }))
            .collect()
    }

    fn json(&self) -> Value {
        let s = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        json!({
            "minutes": self.minutes,
            "kill_every_s": s(self.kill_every),
            "kill_pattern": format!("{:?}", self.kill).to_lowercase(),
            "kills_s": self.kills().iter().map(|(at, node)| json!({"at_s": at.as_secs_f64(), "node": node})).collect::<Vec<_>>(),
            "pg_restart_s": s(self.pg_restart),
            "snapshot_s": self.snapshot.map(|(from, until)| json!([from.as_secs_f64(), until.as_secs_f64()])),
            "redrive_s": s(self.redrive),
            "reference_minute": self.reference_minute,
            "steady_minute": self.steady_minute,
        })
    }
}

/// Something that happened to the deployment, in seconds from the start.
#[derive(Clone)]
struct Event {
    at: Duration,
    what: &'static str,
    node: Option<usize>,
    detail: String,
}

#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Event>>>);

impl Events {
    fn add(&self, start: Instant, what: &'static str, node: Option<usize>, detail: String) {
        let at = start.elapsed();
        eprintln!(
            "soak: {:.1} min: {what}{}{}",
            at.as_secs_f64() / 60.0,
            node.map_or(String::new(), |n| format!(" (node {n})")),
            if detail.is_empty() { String::new() } else { format!(": {detail}") }
        );
        self.0.lock().unwrap().push(Event { at, what, node, detail });
    }

    fn all(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }
}

/// The figures of one minute that the clients count as they go.
#[derive(Default)]
struct Counts {
    single: Vec<Duration>,
    batch: Vec<Duration>,
    published: u64,
    publish_failed: u64,
    pull_failed: u64,
    extended: u64,
    extend_failed: u64,
    /// Idempotent resends: sent, answered with `duplicates: 1`, answered with `duplicates: 0` (stored twice).
    resent: u64,
    resent_duplicate: u64,
    resent_stored: u64,
}

struct Recorder {
    start: Instant,
    minutes: Mutex<Vec<Counts>>,
}

impl Recorder {
    /// Counts into the minute of `at`; what happens after the run (the drain) is not counted.
    fn count(&self, at: Instant, f: impl FnOnce(&mut Counts)) {
        let minute = (at.saturating_duration_since(self.start).as_secs() / 60) as usize;
        if let Some(counts) = self.minutes.lock().unwrap().get_mut(minute) {
            f(counts);
        }
    }
}

/// One account: its queue, its dead-letter queue and its clients, for each node one with a short timeout
/// (publishes, acks, extensions) and one for long polls.
struct Tenant {
    account: usize,
    kind: Kind,
    quick: [Client; 2],
    polling: [Client; 2],
    queue: String,
    dlq: String,
    /// The failing webhook's account: the queue its dead-letter queue is redriven into.
    replay: Option<String>,
    /// Messages per second it publishes.
    rate: f64,
}

/// Which node a client sends to: its home node, or for a while after a failure there, the other.
struct Via {
    home: usize,
    away_until: Option<Instant>,
}

impl Via {
    fn new(home: usize) -> Via {
        Via { home, away_until: None }
    }

    fn node(&self) -> usize {
        match self.away_until {
            Some(until) if Instant::now() < until => 1 - self.home,
            _ => self.home,
        }
    }

    fn failed(&mut self) {
        // A failure on the other node sends the client home again.
        self.away_until = (self.node() == self.home).then(|| Instant::now() + AWAY);
    }
}

/// The two skiplock nodes, on fixed ports so that clients keep their addresses across restarts.
struct Nodes {
    url: String,
    ports: [u16; 2],
    children: [Option<Child>; 2],
    /// The nodes' pids, for the sampler.
    pids: Arc<Mutex<[Option<u32>; 2]>>,
    logs: [PathBuf; 2],
}

impl Nodes {
    fn new(url: String) -> Nodes {
        let dir = std::env::temp_dir();
        let pid = std::process::id();
        Nodes {
            url,
            ports: [free_port(), free_port()],
            children: [None, None],
            pids: Arc::default(),
            logs: [0, 1].map(|i| dir.join(format!("skiplock-soak-{pid}-node{i}.log"))),
        }
    }

    fn base(&self, node: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[node])
    }

    /// Starts node `i` and waits until it is ready, trying again for up to a minute (as chaos.rs does).
    async fn start(&mut self, i: usize) -> anyhow::Result<()> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build()?;
        let deadline = Instant::now() + MINUTE;
        loop {
            let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.logs[i])?;
            let child = Command::new(crate::setup::skiplock_binary())
                .args(["serve", "--roles", "api,dispatcher"])
                .env("DATABASE_URL", &self.url)
                .env("SKIPLOCK_BIND", format!("127.0.0.1:{}", self.ports[i]))
                .env("SKIPLOCK_METRICS_BIND", format!("127.0.0.1:{}", free_port()))
                .env("SKIPLOCK_ADMIN_BIND", "127.0.0.1:0")
                .env("SKIPLOCK_LOG", "error")
                .env("SKIPLOCK_RATE_LIMIT", "0")
                .env("SKIPLOCK_PUBLISH_RATE_LIMIT", "0")
                .env("SKIPLOCK_WEBHOOK_TIMEOUT_MS", WEBHOOK_TIMEOUT_MS.to_string())
                .env("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8")
                .stdout(Stdio::null())
                .stderr(Stdio::from(log))
                .kill_on_drop(true)
                .spawn()?;
            self.pids.lock().unwrap()[i] = child.id();
            self.children[i] = Some(child);
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(10) {
                if let Ok(r) = http.get(format!("{}/readyz", self.base(i))).send().await {
                    if r.status().is_success() {
                        return Ok(());
                    }
                }
                if let Some(Ok(Some(_))) = self.children[i].as_mut().map(|c| c.try_wait()) {
                    break; // it exited (the database may still be starting): start it again
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            self.kill(i).await;
            if Instant::now() > deadline {
                bail!("node {i} did not come back within a minute (its log: {})", self.logs[i].display());
            }
        }
    }

    async fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.children[i].take() {
            let _ = child.kill().await; // SIGKILL
        }
        self.pids.lock().unwrap()[i] = None;
    }

    /// The nodes that exited on their own since the last look.
    fn exited(&mut self) -> Vec<usize> {
        (0..2).filter(|&i| matches!(self.children[i].as_mut().map(|c| c.try_wait()), Some(Ok(Some(_))))).collect()
    }
}

/// `skiplock-bench soak`: runs the soak, prints the table, the checker's reports and the verdicts, writes
/// `bench/results/soak-<time>.json`, and fails when a verdict does.
pub async fn run(args: SoakArgs) -> anyhow::Result<()> {
    let plan = Plan::new(&args)?;
    let result = soak(&args, &plan).await?;
    print(&result);
    crate::setup::write_result("soak", &result)?;
    let failed: Vec<&str> = result["verdicts"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| v["pass"].as_bool() == Some(false))
        .map(|(k, _)| k.as_str())
        .collect();
    if !failed.is_empty() {
        bail!("the soak failed: {}", failed.join(", "));
    }
    Ok(())
}

async fn soak(args: &SoakArgs, plan: &Plan) -> anyhow::Result<Value> {
    let pg = Arc::new(tokio::task::spawn_blocking(TempCluster::create).await?);
    let url = pg.url("postgres");
    let mut accounts = Vec::with_capacity(args.accounts);
    for i in 0..args.accounts {
        accounts.push(crate::setup::create_account(&url, &format!("soak-{i:03}")).await?);
    }
    let mut nodes = Nodes::new(url.clone());
    // One after the other: the first migrates the database.
    nodes.start(0).await?;
    nodes.start(1).await?;

    let hook_history: Arc<Mutex<History>> = Arc::default();
    let slow_receiver = Hook::start(hook_history.clone(), false)?;
    let failing_receiver = Hook::start(hook_history.clone(), true)?;
    let tenants = tenants(args, &accounts, &nodes, [slow_receiver.port, failing_receiver.port]).await?;
    let pulled = tenants.iter().filter(|t| t.kind.pulled()).count();
    let pull_rate = tenants.iter().find(|t| t.kind.pulled()).map_or(0.0, |t| t.rate);

    let (pull_history, ordered_history): (Arc<Mutex<History>>, Arc<Mutex<History>>) = Default::default();
    let history_of = |kind: Kind| match kind {
        Kind::SlowHook | Kind::FailingHook => hook_history.clone(),
        Kind::Ordered => ordered_history.clone(),
        Kind::Plain | Kind::Extending => pull_history.clone(),
    };
    let start = Instant::now();
    let start_wall_ms = chaos::wall_ms();
    let recorder =
        Arc::new(Recorder { start, minutes: Mutex::new((0..plan.minutes).map(|_| Counts::default()).collect()) });
    let events = Events::default();
    let (stop_producers, stop_consumers, stop_faults) =
        (CancellationToken::new(), CancellationToken::new(), CancellationToken::new());
    let mut producers = JoinSet::new();
    let mut consumers = JoinSet::new();
    for t in &tenants {
        producers.spawn(produce(t.clone(), args.batched, history_of(t.kind), recorder.clone(), stop_producers.clone()));
        // A plain queue has one consumer, on the node its producer does not publish through; ordered and
        // extending queues have one on each node, so that two consumers contend for their keys and leases.
        let homes: &[usize] = match t.kind {
            Kind::Plain => &[1 - t.account % 2],
            Kind::Ordered | Kind::Extending => &[0, 1],
            Kind::SlowHook | Kind::FailingHook => &[],
        };
        for &home in homes {
            consumers.spawn(consume(t.clone(), home, history_of(t.kind), recorder.clone(), stop_consumers.clone()));
        }
    }
    let failing = tenants.iter().find(|t| t.kind == Kind::FailingHook).cloned().context("the failing webhook")?;
    consumers.spawn(drain_replay(failing.clone(), hook_history.clone(), stop_consumers.clone()));
    eprintln!(
        "soak: {} minutes, {:.0} messages/s over {} accounts ({pulled} pulled at {pull_rate:.1}/s each), \
         nodes on {} and {}",
        plan.minutes,
        args.rate,
        tenants.len(),
        nodes.base(0),
        nodes.base(1)
    );

    let pids = nodes.pids.clone();
    let logs = nodes.logs.clone();
    let fault_task = tokio::spawn(faults(
        nodes,
        pg.clone(),
        plan.kills(),
        plan.pg_restart,
        start,
        events.clone(),
        stop_faults.clone(),
    ));
    let hold_task = plan.snapshot.map(|(from, until)| {
        let (url, events) = (url.clone(), events.clone());
        tokio::spawn(async move { hold(&url, start, start + from, start + until, &events).await })
    });
    let redrive_task = plan.redrive.map(|at| tokio::spawn(redrive(failing.clone(), start, start + at, events.clone())));

    // The samples, each just before its minute's end.
    let mut sampler = Sampler { url: url.clone(), db: None, pg: pg.clone(), pids, cpu: None };
    sampler.sample().await; // the first minute's CPU counts from here
    let mut samples = Vec::with_capacity(plan.minutes as usize);
    for minute in 1..=plan.minutes {
        tokio::time::sleep_until((start + MINUTE * minute - Duration::from_millis(500)).into()).await;
        let sample = sampler.sample().await;
        let (published, p99) = {
            let mut all = recorder.minutes.lock().unwrap();
            let c = &mut all[minute as usize - 1];
            let mut spans: Vec<Duration> = c.single.iter().chain(&c.batch).copied().collect();
            spans.sort();
            (c.published, percentile_ms(&spans, 99.0))
        };
        eprintln!(
            "soak: minute {minute}/{}: published {:.0}/s, publish p99 {p99:.1} ms, RSS {} MiB, tables + indexes {:.1} MB, \
             dead rows {}",
            plan.minutes,
            published as f64 / 60.0,
            sample["rss_mib"].as_array().into_iter().flatten().map(|v| v.as_f64().map_or("-".into(), |v| format!("{v:.0}"))).collect::<Vec<_>>().join(" / "),
            sample["db"]["total_bytes"].as_f64().unwrap_or_default() / 1e6,
            sample["db"]["dead_rows"],
        );
        samples.push(sample);
    }

    eprintln!("soak: the load stops; draining");
    stop_producers.cancel();
    while producers.join_next().await.is_some() {}
    // The consumers go on until their queues are empty, so that the last messages are delivered as usual.
    let settle = Instant::now() + Duration::from_secs(30);
    while Instant::now() < settle {
        let mut left = 0;
        for t in tenants.iter().filter(|t| t.kind.pulled()) {
            left += chaos::backlog(&t.quick[0], &t.queue).await.min(1);
        }
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop_consumers.cancel();
    while consumers.join_next().await.is_some() {}
    let hold = match hold_task {
        Some(task) => task
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("{e}")))
            .unwrap_or_else(|e| json!({"error": format!("{e:#}")})),
        None => Value::Null,
    };
    let redrive = match redrive_task {
        Some(task) => task.await.unwrap_or_else(|e| json!({"error": e.to_string()})),
        None => Value::Null,
    };
    let drain = drain(&tenants, &history_of).await;
    stop_faults.cancel();
    let mut nodes = fault_task.await?;
    nodes.kill(0).await;
    nodes.kill(1).await;
    slow_receiver.handle.stop(false).await;
    failing_receiver.handle.stop(false).await;
    // The nodes log errors only: the logs that stayed empty go.
    let node_logs: Vec<String> = logs
        .iter()
        .filter(|log| std::fs::metadata(log).is_ok_and(|m| m.len() > 0) || std::fs::remove_file(log).is_err())
        .map(|log| log.display().to_string())
        .collect();

    let events = events.all();
    let count = |what: &str| events.iter().filter(|e| e.what == what).count() as u64;
    let (kills, pg_restarts) = (count("kill") + count("node_exited"), count("pg_restart"));
    let reports = [
        ("pull", chaos::check(&pull_history.lock().unwrap(), Mode::Pull, kills, pg_restarts)),
        ("ordered", chaos::check(&ordered_history.lock().unwrap(), Mode::Ordered, kills, pg_restarts)),
        ("webhook", chaos::check(&hook_history.lock().unwrap(), Mode::Webhook, kills, pg_restarts)),
    ];
    for (_, report) in &reports {
        println!("{report}");
    }
    let kinds: Vec<Kind> = tenants.iter().map(|t| t.kind).collect();
    let histories = [&pull_history, &ordered_history, &hook_history];
    let minutes = minute_rows(plan, start, start_wall_ms, &recorder, &histories, &kinds, &events, samples);
    let totals = {
        let all = recorder.minutes.lock().unwrap();
        let sum = |f: fn(&Counts) -> u64| all.iter().map(f).sum::<u64>();
        json!({
            "published": sum(|c| c.published), "publish_failed": sum(|c| c.publish_failed),
            "pull_failed": sum(|c| c.pull_failed), "extended": sum(|c| c.extended),
            "extend_failed": sum(|c| c.extend_failed), "idempotent_resends": sum(|c| c.resent),
            "resends_answered_duplicate": sum(|c| c.resent_duplicate),
            "resends_stored_twice": sum(|c| c.resent_stored),
        })
    };
    let mut result = json!({
        "workload": "soak: mixed load over many accounts on two nodes, a node SIGKILLed every interval, \
                     PostgreSQL restarted once, a snapshot held open",
        "at": chrono::Utc::now().to_rfc3339(),
        "accounts": tenants.len(),
        "kinds": kinds.iter().fold(BTreeMap::<&str, usize>::new(), |mut m, k| { *m.entry(k.name()).or_default() += 1; m }),
        "rate": args.rate,
        "batched": args.batched,
        "rates": {"slow_webhook": SLOW_HOOK_RATE, "failing_webhook": FAILING_HOOK_RATE, "each_pulled_account": pull_rate},
        "plan": plan.json(),
        "events": events.iter().map(|e| json!({
            "at_s": e.at.as_secs_f64(), "what": e.what, "node": e.node, "detail": e.detail,
        })).collect::<Vec<_>>(),
        "hold": hold,
        "redrive": redrive,
        "drain": drain,
        "totals": totals,
        "checks": reports.iter().map(|(name, r)| (name.to_string(), report_json(r))).collect::<serde_json::Map<_, _>>(),
        "node_logs": node_logs,
        "rules": {
            "p99_max_ratio": P99_MAX_RATIO, "rss_max_growth": RSS_MAX_GROWTH,
            "size_max_growth": SIZE_MAX_GROWTH, "size_slack_bytes": SIZE_SLACK_BYTES,
        },
        "minutes": minutes,
    });
    judge(&mut result, plan);
    Ok(result)
}

/// Creates each account's queue, dead-letter queue and consumers (through node 0) and answers its tenant,
/// with its clients of both nodes. `hook_ports`: the slow and the failing receiver's.
async fn tenants(
    args: &SoakArgs,
    accounts: &[(String, String)],
    nodes: &Nodes,
    hook_ports: [u16; 2],
) -> anyhow::Result<Vec<Arc<Tenant>>> {
    let quick_http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?;
    let polling_http =
        reqwest::Client::builder().timeout(Duration::from_millis(WAIT_MS) + Duration::from_secs(20)).build()?;
    let pull_rate = (args.rate - SLOW_HOOK_RATE - FAILING_HOOK_RATE) / (accounts.len() - 2) as f64;
    let mut tenants = Vec::with_capacity(accounts.len());
    eprintln!("soak: {} accounts, their queues and consumers", accounts.len());
    for (i, (account, token)) in accounts.iter().enumerate() {
        let client = |http: &reqwest::Client, node: usize| {
            Client::new(http.clone(), format!("{}/client/v4/accounts/{account}", nodes.base(node)), token.clone())
        };
        let kind = Kind::of(i);
        let first = client(&quick_http, 0);
        let create = |name: &'static str| {
            let first = first.clone();
            async move {
                let q = first
                    .post("queues", &json!({"queue_name": name}))
                    .await
                    .map_err(|_| anyhow::anyhow!("account {i}: creating queue {name}"))?;
                anyhow::Ok(q["queue_id"].as_str().unwrap_or_default().to_owned())
            }
        };
        let (queue, dlq) = (create("work").await?, create("work-dlq").await?);
        let replay = if kind == Kind::FailingHook { Some(create(REPLAY_QUEUE).await?) } else { None };
        let consumer = match kind {
            Kind::SlowHook => json!({
                "type": "webhook", "url": format!("http://127.0.0.1:{}/hook", hook_ports[0]),
                "dead_letter_queue": "work-dlq",
                "settings": {"max_retries": chaos::MAX_RETRIES, "max_wait_time_ms": 500, "batch_size": 10, "max_concurrency": 10},
            }),
            Kind::FailingHook => json!({
                "type": "webhook", "url": format!("http://127.0.0.1:{}/hook", hook_ports[1]),
                "dead_letter_queue": "work-dlq",
                "settings": {"max_retries": FAILING_RETRIES, "retry_delay": 1, "max_wait_time_ms": 200, "batch_size": 10, "max_concurrency": 4},
            }),
            _ => json!({
                "type": "http_pull", "dead_letter_queue": "work-dlq",
                "settings": {"max_retries": chaos::MAX_RETRIES, "visibility_timeout_ms": LEASE_MS, "batch_size": 10},
            }),
        };
        first
            .post(&format!("queues/{queue}/consumers"), &consumer)
            .await
            .map_err(|_| anyhow::anyhow!("account {i}: the consumer"))?;
        for q in std::iter::once(&dlq).chain(&replay) {
            first
                .post(&format!("queues/{q}/consumers"), &json!({"type": "http_pull"}))
                .await
                .map_err(|_| anyhow::anyhow!("account {i}: a pull consumer"))?;
        }
        let rate = match kind {
            Kind::SlowHook => SLOW_HOOK_RATE,
            Kind::FailingHook => FAILING_HOOK_RATE,
            _ => pull_rate,
        };
        tenants.push(Arc::new(Tenant {
            account: i,
            kind,
            quick: [client(&quick_http, 0), client(&quick_http, 1)],
            polling: [client(&polling_http, 0), client(&polling_http, 1)],
            queue,
            dlq,
            replay,
            rate,
        }));
    }
    Ok(tenants)
}

/// Publishes the account's share of the load: single messages and batches of 10 in turn, `batched` of its
/// messages in batches, spread evenly over its ticks. Plain publishes are sent once (a failed one may have been stored; its
/// history says so); ordered ones carry an idempotency key and are sent until stored, so that a key's
/// messages are stored in the order of their numbers (chaos::produce_ordered explains why).
async fn produce(
    t: Arc<Tenant>,
    batched: f64,
    history: Arc<Mutex<History>>,
    recorder: Arc<Recorder>,
    stop: CancellationToken,
) {
    // Requests a second: single messages and batches; a tick is a batch when it takes the batches' running
    // share past a whole number.
    let (singles, batches) = (t.rate * (1.0 - batched), t.rate * batched / 10.0);
    let batch_share = batches / (singles + batches);
    let tick = Duration::from_secs_f64(1.0 / (singles + batches));
    let mut via = Via::new(t.account % 2);
    // A start anywhere within the first tick, so that the accounts do not publish in step.
    let offset = rand::thread_rng().gen_range(0.0..1.0);
    let mut ticks = tokio::time::interval_at((Instant::now() + tick.mul_f64(offset)).into(), tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut numbers: HashMap<u64, u64> = HashMap::new();
    let acc = t.account;
    let (mut single_number, mut batch_number) = (0u64, 0u64);
    for tick in 0u64.. {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.cancelled() => return,
        }
        let batch = ((tick + 1) as f64 * batch_share).floor() > (tick as f64 * batch_share).floor();
        let n = if batch { &mut batch_number } else { &mut single_number };
        *n += 1;
        let n = *n - 1;
        let count = if batch { 10 } else { 1 };
        let (bodies, messages, delay) = if t.kind == Kind::Ordered {
            let mut rng = rand::thread_rng();
            let keyed: Vec<(u64, u64)> = (0..count)
                .map(|_| {
                    let key = acc as u64 * KEYS + rng.gen_range(0..KEYS);
                    let number = numbers.entry(key).or_insert(0);
                    *number += 1;
                    (key, *number - 1)
                })
                .collect();
            let bodies: Vec<String> = keyed.iter().map(|(key, n)| format!("a{acc}-k{key}-{n}")).collect();
            let messages: Vec<Value> = keyed
                .iter()
                .zip(&bodies)
                .map(|((key, _), body)| {
                    json!({"body": body, "content_type": "text", "ordering_key": format!("k{key}"), "idempotency_key": body})
                })
                .collect();
            let mut h = history.lock().unwrap();
            for (body, numbered) in bodies.iter().zip(keyed) {
                h.published.insert(body.clone(), false);
                h.ordered.insert(body.clone(), numbered);
            }
            (bodies, messages, None)
        } else {
            let bodies: Vec<String> = if batch {
                (0..10).map(|i| format!("a{acc}-b{n}-{i}")).collect()
            } else {
                vec![format!("a{acc}-s{n}")]
            };
            // Every seventh batch is delayed, so that the checker can see that delays never end early.
            let delay = (batch && n % 7 == 6).then_some(1i64);
            // Every fifth single message of a plain account carries an idempotency key.
            let keyed = t.kind == Kind::Plain && !batch && n % 5 == 0;
            let messages: Vec<Value> = bodies
                .iter()
                .map(|b| {
                    let mut m = json!({"body": b, "content_type": "text"});
                    if keyed {
                        m["idempotency_key"] = json!(b);
                    }
                    m
                })
                .collect();
            let mut h = history.lock().unwrap();
            for b in &bodies {
                h.published.insert(b.clone(), false);
                if let Some(d) = delay {
                    h.delays_ms.insert(b.clone(), d * 1000);
                }
            }
            (bodies, messages, delay)
        };
        let (path, request) = if batch {
            let mut request = json!({"messages": messages});
            if let Some(d) = delay {
                request["delay_seconds"] = json!(d);
            }
            (format!("queues/{}/messages/batch", t.queue), request)
        } else {
            (format!("queues/{}/messages", t.queue), messages.into_iter().next().unwrap_or_default())
        };
        let stored = loop {
            let node = via.node();
            let sent = Instant::now();
            match t.quick[node].post(&path, &request).await {
                Ok(_) => {
                    let took = sent.elapsed();
                    recorder.count(sent, |c| {
                        c.published += count;
                        if batch {
                            c.batch.push(took)
                        } else {
                            c.single.push(took)
                        }
                    });
                    break Some(node);
                }
                Err(()) => {
                    recorder.count(sent, |c| c.publish_failed += 1);
                    via.failed();
                    if t.kind != Kind::Ordered || stop.is_cancelled() {
                        break None;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        let Some(node) = stored else { continue };
        {
            let mut h = history.lock().unwrap();
            for b in &bodies {
                h.published.insert(b.clone(), true);
            }
        }
        // Every tenth single message of a plain account is sent again, through the other node, with the same
        // key: the answer must count it a duplicate, and (the checker sees it) nothing be stored.
        if t.kind == Kind::Plain && !batch && n % 10 == 0 {
            let sent = Instant::now();
            let answer = t.quick[1 - node].post(&path, &request).await;
            let duplicates = answer.as_ref().ok().and_then(|r| r["metadata"]["duplicates"].as_i64());
            recorder.count(sent, |c| {
                c.resent += 1;
                match duplicates {
                    Some(1) => c.resent_duplicate += 1,
                    Some(0) => c.resent_stored += 1,
                    _ => {}
                }
            });
        }
    }
}

/// A pull consumer homed on one node: long polls of 10 messages. Plain and ordered consumers ack a batch
/// with the pull that follows it; extending ones work on it while extending its leases, then ack it.
async fn consume(
    t: Arc<Tenant>,
    home: usize,
    history: Arc<Mutex<History>>,
    recorder: Arc<Recorder>,
    stop: CancellationToken,
) {
    let mut via = Via::new(home);
    let pull = format!("queues/{}/messages/pull", t.queue);
    // (body, lease id) of the messages to ack with the next pull.
    let mut pending: Vec<(String, String)> = Vec::new();
    while !stop.is_cancelled() {
        let node = via.node();
        let mut request = json!({"batch_size": 10, "visibility_timeout_ms": LEASE_MS, "wait_time_ms": WAIT_MS});
        if !pending.is_empty() {
            request["acks"] = json!(pending.iter().map(|(_, lease)| json!({"lease_id": lease})).collect::<Vec<_>>());
        }
        let asked = Instant::now();
        let answer = tokio::select! {
            answer = t.polling[node].post(&pull, &request) => Some(answer),
            _ = stop.cancelled() => None,
        };
        let result = match answer {
            Some(Ok(result)) => result,
            failed => {
                // The acks it carried may or may not have been applied: they go again.
                settle_acks(&history, &pending, asked, None, &Value::Null);
                if failed.is_some() {
                    recorder.count(asked, |c| c.pull_failed += 1);
                    via.failed();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                continue;
            }
        };
        let (received, received_wall_ms) = (Instant::now(), chaos::wall_ms());
        settle_acks(&history, &pending, asked, Some(received), &result["warnings"]);
        pending.clear();
        let messages = result["messages"].as_array().cloned().unwrap_or_default();
        if messages.is_empty() {
            continue;
        }
        let number = chaos::PULLS.fetch_add(1, Ordering::Relaxed);
        let leased: Vec<(String, String)> = {
            let mut h = history.lock().unwrap();
            messages
                .iter()
                .map(|m| {
                    let body = m["body"].as_str().unwrap_or_default().to_owned();
                    h.ack_attempted.insert(body.clone());
                    h.deliveries.push(Delivery {
                        body: body.clone(),
                        attempts: m["attempts"].as_i64().unwrap_or_default(),
                        timestamp_ms: m["timestamp_ms"].as_i64().unwrap_or_default(),
                        asked,
                        received,
                        received_wall_ms,
                        pull: number,
                        ordering_key: chaos::ordering_key(m),
                    });
                    (body, m["lease_id"].as_str().unwrap_or_default().to_owned())
                })
                .collect()
        };
        if t.kind == Kind::Extending {
            work(&t, &mut via, &leased, &recorder).await;
            ack(&t, &mut via, &leased, &history).await;
        } else {
            pending = leased;
        }
    }
    if !pending.is_empty() {
        ack(&t, &mut via, &pending, &history).await;
    }
}

/// Works on a batch for a while, extending its leases every EXTEND_EVERY meanwhile (the heartbeat pattern
/// of docs/api.md, "Lease extension").
async fn work(t: &Tenant, via: &mut Via, leased: &[(String, String)], recorder: &Recorder) {
    let until = Instant::now() + Duration::from_millis(rand::thread_rng().gen_range(WORK_MS));
    let path = format!("queues/{}/messages/extend", t.queue);
    let leases: Vec<Value> =
        leased.iter().map(|(_, lease)| json!({"lease_id": lease, "visibility_timeout_ms": LEASE_MS})).collect();
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left <= EXTEND_EVERY {
            tokio::time::sleep(left).await;
            return;
        }
        tokio::time::sleep(EXTEND_EVERY).await;
        let sent = Instant::now();
        match t.quick[via.node()].post(&path, &json!({"leases": leases})).await {
            Ok(result) => {
                let extended = result["extendCount"].as_u64().unwrap_or_default();
                recorder.count(sent, |c| c.extended += extended);
            }
            Err(()) => {
                recorder.count(sent, |c| c.extend_failed += 1);
                via.failed();
            }
        }
    }
}

/// Acks with the ack endpoint, through the other node too when the first try fails.
async fn ack(t: &Tenant, via: &mut Via, leased: &[(String, String)], history: &Mutex<History>) {
    let path = format!("queues/{}/messages/ack", t.queue);
    let acks: Vec<Value> = leased.iter().map(|(_, lease)| json!({"lease_id": lease})).collect();
    for _ in 0..2 {
        let sent = Instant::now();
        match t.quick[via.node()].post(&path, &json!({"acks": acks})).await {
            Ok(result) => {
                settle_acks(history, leased, sent, Some(Instant::now()), &result["warnings"]);
                return;
            }
            Err(()) => {
                settle_acks(history, leased, sent, None, &Value::Null);
                via.failed();
            }
        }
    }
}

/// Notes acks sent at `sent` and answered at `answered` (None: failed, so perhaps applied): an ack the
/// answer warns about (its lease no longer current) acked nothing, so only the others count as acked.
fn settle_acks(
    history: &Mutex<History>,
    acks: &[(String, String)],
    sent: Instant,
    answered: Option<Instant>,
    warnings: &Value,
) {
    let mut h = history.lock().unwrap();
    for (body, lease) in acks {
        if h.ordered.contains_key(body) {
            h.acks_sent.entry(body.clone()).or_default().push((sent, answered));
        }
        if let Some(at) = answered {
            if warnings.get(lease).is_none() {
                h.acked_at.entry(body.clone()).or_insert(at);
            }
        }
    }
}

/// Pulls the replay queue (the failing webhook's redriven dead letters) every 2 s: those messages count as
/// dead-lettered in the webhook history.
async fn drain_replay(t: Arc<Tenant>, history: Arc<Mutex<History>>, stop: CancellationToken) {
    let Some(replay) = t.replay.clone() else { return };
    for round in 0usize.. {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
            _ = stop.cancelled() => return,
        }
        chaos::drain_once(&t.quick[round % 2], &replay, &history, true).await;
    }
}

/// The webhook receivers: deliveries go into the webhook history; the slow one answers 200 after 1-2 s
/// (an ack of the batch), the failing one at once, with a 500 to two batches of three and a 200 that
/// retries every message to the third. Each answer spends an attempt of every message in the batch; the
/// 200s keep the endpoint's circuit from opening (five failures in a row), which would hold the queue
/// back rather than move its messages to the dead-letter queue.
struct Hook {
    port: u16,
    handle: actix_web::dev::ServerHandle,
}

struct HookState {
    history: Arc<Mutex<History>>,
    fail: bool,
    answers: AtomicU64,
}

impl Hook {
    fn start(history: Arc<Mutex<History>>, fail: bool) -> anyhow::Result<Hook> {
        let (port, handle) = crate::setup::start_receiver(
            web::Data::new(HookState { history, fail, answers: AtomicU64::new(0) }),
            receive,
        )?;
        Ok(Hook { port, handle })
    }
}

async fn receive(state: web::Data<HookState>, body: web::Bytes) -> HttpResponse {
    let (received, received_wall_ms) = (Instant::now(), chaos::wall_ms());
    let payload: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let messages = payload["messages"].as_array().cloned().unwrap_or_default();
    let number = chaos::PULLS.fetch_add(1, Ordering::Relaxed);
    let bodies: Vec<String> = messages.iter().map(|m| m["body"].as_str().unwrap_or_default().to_owned()).collect();
    {
        let mut h = state.history.lock().unwrap();
        for (m, body) in messages.iter().zip(&bodies) {
            h.deliveries.push(Delivery {
                body: body.clone(),
                attempts: m["attempts"].as_i64().unwrap_or_default(),
                timestamp_ms: m["timestamp_ms"].as_i64().unwrap_or_default(),
                asked: received,
                received,
                received_wall_ms,
                pull: number,
                ordering_key: chaos::ordering_key(m),
            });
        }
    }
    if state.fail {
        return match state.answers.fetch_add(1, Ordering::Relaxed) % 3 {
            2 => HttpResponse::Ok().json(json!({"actions": [{"type": "retry_all"}]})),
            _ => HttpResponse::InternalServerError().finish(),
        };
    }
    let hold = rand::thread_rng().gen_range(1_000..=2_000);
    tokio::time::sleep(Duration::from_millis(hold)).await;
    let answered = Instant::now();
    let mut h = state.history.lock().unwrap();
    for body in bodies {
        h.acked_at.entry(body.clone()).or_insert(answered);
        h.ack_attempted.insert(body);
    }
    HttpResponse::Ok().finish()
}

/// Kills nodes and restarts PostgreSQL on schedule, and starts again any node that exits on its own, until
/// stopped; then hands the nodes back.
async fn faults(
    mut nodes: Nodes,
    pg: Arc<TempCluster>,
    kills: Vec<(Duration, usize)>,
    pg_restart: Option<Duration>,
    start: Instant,
    events: Events,
    stop: CancellationToken,
) -> Nodes {
    let mut kills = kills.into_iter().peekable();
    let mut pg_restart = pg_restart;
    while !stop.is_cancelled() {
        let now = start.elapsed();
        if let Some(&(at, node)) = kills.peek() {
            if at <= now {
                kills.next();
                nodes.kill(node).await;
                events.add(start, "kill", Some(node), String::new());
                let began = Instant::now();
                match nodes.start(node).await {
                    Ok(()) => {
                        events.add(start, "node_started", Some(node), format!("{} ms", began.elapsed().as_millis()))
                    }
                    Err(e) => events.add(start, "node_start_failed", Some(node), format!("{e:#}")),
                }
            }
        }
        if pg_restart.is_some_and(|at| at <= now) {
            pg_restart = None;
            events.add(start, "pg_restart", None, String::new());
            let began = Instant::now();
            let pg = pg.clone();
            let restarted = tokio::task::spawn_blocking(move || {
                pg.stop_immediately();
                pg.start();
            })
            .await;
            let detail = match restarted {
                Ok(()) => format!("up again after {} ms", began.elapsed().as_millis()),
                Err(e) => format!("failed: {e}"),
            };
            events.add(start, "pg_started", None, detail);
        }
        for node in nodes.exited() {
            events.add(
                start,
                "node_exited",
                Some(node),
                format!("on its own; its log: {}", nodes.logs[node].display()),
            );
            nodes.kill(node).await;
            if let Err(e) = nodes.start(node).await {
                events.add(start, "node_start_failed", Some(node), format!("{e:#}"));
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            _ = stop.cancelled() => {}
        }
    }
    nodes
}

/// Holds a repeatable-read snapshot on a connection of its own from `from` to `until` (as horizon.rs does).
async fn hold(url: &str, start: Instant, from: Instant, until: Instant, events: &Events) -> anyhow::Result<Value> {
    tokio::time::sleep_until(from.into()).await;
    let mut db = PgConnection::connect(url).await.context("connecting to take the snapshot")?;
    // The holder's session must not be ended by a timeout of the server's configuration.
    db.execute("set idle_in_transaction_session_timeout = 0; set statement_timeout = 0").await?;
    // Simple-query protocol: the transaction stays open after the query string.
    db.execute("begin isolation level repeatable read; select 1 from accounts limit 1")
        .await
        .context("taking the snapshot")?;
    let taken = start.elapsed().as_secs_f64();
    events.add(start, "snapshot_taken", None, String::new());
    tokio::time::sleep_until(until.into()).await;
    db.execute("rollback").await.context("releasing the snapshot (was it ended?)")?;
    let released = start.elapsed().as_secs_f64();
    events.add(start, "snapshot_released", None, String::new());
    Ok(json!({"taken_s": taken, "released_s": released}))
}

/// Redrives the failing webhook's dead-letter queue into the replay queue at `at`, and follows the task
/// until it ends.
async fn redrive(t: Arc<Tenant>, start: Instant, at: Instant, events: Events) -> Value {
    tokio::time::sleep_until(at.into()).await;
    let path = format!("queues/{}/redrive", t.dlq);
    let mut task = None;
    for node in [0, 1] {
        if let Ok(result) = t.quick[node].post(&path, &json!({"destination_queue": REPLAY_QUEUE})).await {
            task = Some((node, result));
            break;
        }
    }
    let Some((node, task)) = task else {
        events.add(start, "redrive_failed", None, "the redrive was refused on both nodes".into());
        return json!({"error": "the redrive was refused on both nodes"});
    };
    let started = start.elapsed().as_secs_f64();
    let id = task["redrive_id"].as_str().unwrap_or_default().to_owned();
    events.add(start, "redrive_started", None, format!("{} messages", task["total"]));
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut last = task;
    while last["status"] == "running" && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let url = format!("{}/{path}/{id}", t.quick[node].base);
        let answer = t.quick[node].http.get(url).bearer_auth(&t.quick[node].token).send().await;
        if let Ok(r) = answer {
            if let Ok(v) = r.json::<Value>().await {
                if v["success"] == true {
                    last = v["result"].clone();
                }
            }
        }
    }
    let finished = start.elapsed().as_secs_f64();
    events.add(
        start,
        "redrive_finished",
        None,
        format!("{} of {} moved ({})", last["moved"], last["total"], last["status"]),
    );
    json!({
        "started_s": started, "finished_s": finished, "redrive_id": id, "status": last["status"],
        "moved": last["moved"], "total": last["total"], "error": last["error"],
    })
}

/// Drains every queue and dead-letter queue into its history (as chaos.rs does) once the webhooks have
/// delivered or dead-lettered what they hold; answers what was left if that took more than 10 minutes.
async fn drain(tenants: &[Arc<Tenant>], history_of: &dyn Fn(Kind) -> Arc<Mutex<History>>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(600);
    let started = Instant::now();
    loop {
        let mut left = Vec::new();
        for t in tenants {
            let history = history_of(t.kind);
            let client = &t.quick[0];
            let backlog = chaos::backlog(client, &t.queue).await;
            if backlog != 0 {
                left.push(format!("account {} queue {}: {backlog}", t.account, t.queue));
                if !t.kind.pulled() {
                    continue; // its dispatcher empties it; its dead-letter queue once it has
                }
                chaos::drain_once(client, &t.queue, &history, false).await;
            }
            for dead in std::iter::once(&t.dlq).chain(&t.replay) {
                let backlog = chaos::backlog(client, dead).await;
                if backlog != 0 {
                    left.push(format!("account {} queue {dead}: {backlog}", t.account));
                    chaos::drain_once(client, dead, &history, true).await;
                }
            }
        }
        if left.is_empty() {
            return json!({"seconds": started.elapsed().as_secs_f64(), "left": []});
        }
        if Instant::now() > deadline {
            eprintln!("soak: could not drain: {}", left.join("; "));
            return json!({"seconds": started.elapsed().as_secs_f64(), "left": left});
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Takes each minute's sample: the nodes' RSS and CPU, PostgreSQL's CPU, and the database's tables.
struct Sampler {
    url: String,
    db: Option<PgConnection>,
    pg: Arc<TempCluster>,
    pids: Arc<Mutex<[Option<u32>; 2]>>,
    /// The last sample's CPU seconds.
    cpu: Option<CpuSample>,
}

/// A process's pid and its CPU seconds so far, when it runs.
type CpuSeconds = Option<(u32, f64)>;

struct CpuSample {
    at: Instant,
    nodes: [CpuSeconds; 2],
    postgres: CpuSeconds,
    bench: f64,
}

impl Sampler {
    async fn sample(&mut self) -> Value {
        let pids = *self.pids.lock().unwrap();
        let rss: Vec<Option<f64>> = pids.iter().map(|p| p.and_then(rss_mib)).collect();
        let now = Instant::now();
        let nodes = pids.map(|p| p.and_then(|pid| Some((pid, cpu_seconds(pid)?))));
        let postmaster = crate::cpu::postmaster_pid(&self.pg.data_dir());
        let times = crate::cpu::sample(&[], postmaster.unwrap_or(0));
        let postgres = postmaster.map(|pm| (pm, times.postgres));
        // A share of one core since the last sample, when the same process was read both times.
        let mut cpu = json!({});
        if let Some(last) = &self.cpu {
            let seconds = now.duration_since(last.at).as_secs_f64().max(0.001);
            let share = |a: CpuSeconds, b: CpuSeconds| match (a, b) {
                (Some((p, x)), Some((q, y))) if p == q => Some((x - y) / seconds * 100.0),
                _ => None,
            };
            cpu = json!({
                "node0": share(nodes[0], last.nodes[0]), "node1": share(nodes[1], last.nodes[1]),
                "postgres": share(postgres, last.postgres), "bench": (times.client - last.bench) / seconds * 100.0,
            });
        }
        self.cpu = Some(CpuSample { at: now, nodes, postgres, bench: times.client });
        // A connection that broke (PostgreSQL restarted) is made again, and the sample taken again, once.
        let mut db = Err(anyhow::anyhow!("not sampled"));
        for _ in 0..2 {
            if self.db.is_none() {
                self.db = PgConnection::connect(&self.url).await.ok();
            }
            db = match self.db.as_mut() {
                Some(conn) => database_sample(conn).await,
                None => Err(anyhow::anyhow!("no connection to the database")),
            };
            if db.is_ok() {
                break;
            }
            self.db = None;
        }
        let db = db.unwrap_or_else(|e| json!({"error": format!("{e:#}")}));
        json!({"rss_mib": rss, "pids": pids, "cpu_percent": cpu, "db": db})
    }
}

/// A process's resident set (`VmRSS`), in MiB.
fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib / 1024.0)
}

/// A process's own CPU seconds so far (user + system).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 2..)?.split(' ').collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// Every table of the schema (its size with and without its indexes, live and dead rows, autovacuum and
/// autoanalyze runs so far) and every index (its size), the database's size and its oldest snapshot.
async fn database_sample(db: &mut PgConnection) -> anyhow::Result<Value> {
    #[allow(clippy::type_complexity)]
    let tables: Vec<(String, i64, i64, i64, i64, i64, i64, i64)> = sqlx::query_as(
        "select relname::text, pg_total_relation_size(relid), pg_table_size(relid), pg_indexes_size(relid),
                n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count
         from pg_stat_user_tables where schemaname = 'public' order by relname",
    )
    .fetch_all(&mut *db)
    .await?;
    let indexes: Vec<(String, String, i64)> = sqlx::query_as(
        "select indexrelname::text, relname::text, pg_relation_size(indexrelid)
         from pg_stat_user_indexes where schemaname = 'public' order by indexrelname",
    )
    .fetch_all(&mut *db)
    .await?;
    let database: i64 = sqlx::query_scalar("select pg_database_size(current_database())").fetch_one(&mut *db).await?;
    let oldest: Option<f64> = sqlx::query_scalar(
        "select max(extract(epoch from now() - xact_start))::float8 from pg_stat_activity
         where datname = current_database() and backend_xmin is not null and pid <> pg_backend_pid()",
    )
    .fetch_one(&mut *db)
    .await?;
    // Checkpoints so far and their write and sync time, and the WAL written: the bursts of a minute's p99
    // are set beside them. PostgreSQL 17 moved the checkpoints' counters to a view of their own.
    let checkpoints: (i64, f64) =
        match sqlx::query_as("select num_timed + num_requested, write_time + sync_time from pg_stat_checkpointer")
            .fetch_one(&mut *db)
            .await
        {
            Ok(found) => found,
            Err(_) => sqlx::query_as(
                "select checkpoints_timed + checkpoints_req, checkpoint_write_time + checkpoint_sync_time
             from pg_stat_bgwriter",
            )
            .fetch_one(&mut *db)
            .await
            .unwrap_or_default(),
        };
    let wal: f64 = sqlx::query_scalar("select (pg_current_wal_lsn() - '0/0')::float8")
        .fetch_one(&mut *db)
        .await
        .unwrap_or_default();
    let mut table_map = serde_json::Map::new();
    for (name, total, table, index, live, dead, autovacuum, autoanalyze) in &tables {
        table_map.insert(
            name.clone(),
            json!({"bytes": total, "table_bytes": table, "index_bytes": index, "live": live, "dead": dead,
                   "autovacuum_count": autovacuum, "autoanalyze_count": autoanalyze}),
        );
    }
    let index_map: serde_json::Map<String, Value> =
        indexes.iter().map(|(name, table, bytes)| (name.clone(), json!({"table": table, "bytes": bytes}))).collect();
    Ok(json!({
        "tables": table_map, "indexes": index_map, "database_bytes": database,
        "total_bytes": tables.iter().map(|t| t.1).sum::<i64>(),
        "table_bytes": tables.iter().map(|t| t.2).sum::<i64>(),
        "index_bytes": tables.iter().map(|t| t.3).sum::<i64>(),
        "dead_rows": tables.iter().map(|t| t.5).sum::<i64>(),
        "oldest_snapshot_age_s": oldest,
        "checkpoints_count": checkpoints.0, "checkpoint_ms_count": checkpoints.1, "wal_position_bytes": wal,
    }))
}

/// p50, p99 and the largest of some durations.
fn spread(spans: &mut [Duration]) -> Value {
    spans.sort();
    json!({"n": spans.len(), "p50_ms": percentile_ms(spans, 50.0), "p99_ms": percentile_ms(spans, 99.0),
           "max_ms": percentile_ms(spans, 100.0)})
}

/// The per-minute rows: the clients' counts, the delivery figures from the histories, the faults and the
/// samples.
#[allow(clippy::too_many_arguments)]
fn minute_rows(
    plan: &Plan,
    start: Instant,
    start_wall_ms: i64,
    recorder: &Recorder,
    histories: &[&Arc<Mutex<History>>],
    kinds: &[Kind],
    events: &[Event],
    samples: Vec<Value>,
) -> Vec<Value> {
    let n = plan.minutes as usize;
    let wall_minute = |ms: i64| {
        let m = (ms - start_wall_ms).div_euclid(60_000);
        (0..n as i64).contains(&m).then_some(m as usize)
    };
    let instant_minute = |at: Instant| {
        let m = (at.saturating_duration_since(start).as_secs() / 60) as usize;
        (at >= start && m < n).then_some(m)
    };
    // Publish -> first receipt, by the minute the message was published in; delayed messages left out.
    // The "pull" figure is the plain and ordered consumers', which ack as soon as they receive: the
    // extending consumers' messages wait for their work (1.2-1.8 s a batch), which would hide the
    // service's own latency in the p99; they have a figure of their own.
    let classes = ["plain", "ordered", "extending", "slow_webhook", "failing_webhook"];
    let mut latency: Vec<BTreeMap<&str, Vec<Duration>>> = vec![BTreeMap::new(); n];
    let (mut delivered, mut redelivered, mut acked) = (vec![0u64; n], vec![0u64; n], vec![0u64; n]);
    for history in histories {
        let h = history.lock().unwrap();
        let mut first: HashMap<&str, (i64, i64)> = HashMap::new();
        for d in &h.deliveries {
            if let Some(m) = wall_minute(d.received_wall_ms) {
                delivered[m] += 1;
                if d.attempts > 1 {
                    redelivered[m] += 1;
                }
            }
            if h.delays_ms.contains_key(&d.body) {
                continue;
            }
            let e = first.entry(&d.body).or_insert((d.timestamp_ms, d.received_wall_ms));
            e.1 = e.1.min(d.received_wall_ms);
        }
        for (body, (published, received)) in first {
            let (Some(m), Some(kind)) = (wall_minute(published), account_of(body).and_then(|a| kinds.get(a))) else {
                continue;
            };
            let span = Duration::from_millis((received - published).max(0) as u64);
            latency[m].entry(kind.name()).or_default().push(span);
        }
        for at in h.acked_at.values() {
            if let Some(m) = instant_minute(*at) {
                acked[m] += 1;
            }
        }
    }
    let mut counts = recorder.minutes.lock().unwrap();
    let mut previous: Option<&Value> = None;
    let mut rows = Vec::with_capacity(n);
    for (i, sample) in samples.iter().enumerate() {
        let (from, until) = (MINUTE * i as u32, MINUTE * (i as u32 + 1));
        let within: Vec<&Event> = events.iter().filter(|e| e.at >= from && e.at < until).collect();
        let faults: Vec<String> = within
            .iter()
            .filter(|e| matches!(e.what, "kill" | "node_exited" | "pg_restart"))
            .map(|e| format!("{}{}", e.what, e.node.map_or(String::new(), |n| format!(" node {n}"))))
            .collect();
        let so_far = |what: &str| events.iter().filter(|e| e.what == what && e.at < until).count();
        let taken = events.iter().find(|e| e.what == "snapshot_taken").map(|e| e.at);
        let released = events.iter().find(|e| e.what == "snapshot_released").map(|e| e.at).unwrap_or(Duration::MAX);
        let held = taken.is_some_and(|t| t < until && released > from);
        let c = &mut counts[i];
        let mut all: Vec<Duration> = c.single.iter().chain(&c.batch).copied().collect();
        let lat = &mut latency[i];
        let join = |names: &[&str]| -> Vec<Duration> {
            names.iter().flat_map(|name| lat.get(*name).cloned().unwrap_or_default()).collect()
        };
        let mut pull = join(&["plain", "ordered"]);
        let mut hook = join(&["slow_webhook", "failing_webhook"]);
        let mut delivery = json!({"pull": spread(&mut pull), "webhook": spread(&mut hook)});
        for class in classes {
            delivery[class] = spread(lat.entry(class).or_default());
        }
        let mut db = sample["db"].clone();
        add_autovacuum_runs(&mut db, previous.map(|p| &p["db"]));
        add_checkpoints_and_wal(&mut db, previous.map(|p| &p["db"]));
        rows.push(json!({
            "minute": i + 1,
            "faults": faults,
            "fault_minute": !faults.is_empty(),
            "kills_so_far": so_far("kill"),
            "pg_restarts_so_far": so_far("pg_restart"),
            "snapshot_held": held,
            "redrive": within.iter().any(|e| e.what == "redrive_started"),
            "published_per_s": c.published as f64 / 60.0,
            "delivered_per_s": delivered[i] as f64 / 60.0,
            "redelivered_per_s": redelivered[i] as f64 / 60.0,
            "acked_per_s": acked[i] as f64 / 60.0,
            "publish": {
                "all": spread(&mut all), "single": spread(&mut c.single), "batch": spread(&mut c.batch),
                "failed": c.publish_failed,
            },
            "pull_failed": c.pull_failed,
            "extended": c.extended,
            "extend_failed": c.extend_failed,
            "idempotent_resends": {"sent": c.resent, "duplicate": c.resent_duplicate, "stored_twice": c.resent_stored},
            "delivery": delivery,
            "rss_mib": sample["rss_mib"],
            "pids": sample["pids"],
            "cpu_percent": sample["cpu_percent"],
            "db": db,
        }));
        previous = Some(sample);
    }
    rows
}

/// Adds to each table of a sample the autovacuum and autoanalyze runs since the previous sample, and their
/// totals. The counters start again from 0 when PostgreSQL restarts after a crash (an immediate stop loses
/// its statistics), so a counter lower than before counts from 0.
fn add_autovacuum_runs(db: &mut Value, previous: Option<&Value>) {
    let (mut vacuums, mut analyzes) = (0, 0);
    let Some(tables) = db["tables"].as_object_mut() else { return };
    for (name, table) in tables.iter_mut() {
        let delta = |key: &str| {
            let now = table[key].as_i64().unwrap_or_default();
            let before = previous.and_then(|p| p["tables"][name][key].as_i64());
            match before {
                Some(b) if b <= now => now - b,
                Some(_) => now,
                None if previous.is_some() => now,
                None => 0,
            }
        };
        let (v, a) = (delta("autovacuum_count"), delta("autoanalyze_count"));
        table["autovacuum_runs"] = json!(v);
        table["autoanalyze_runs"] = json!(a);
        vacuums += v;
        analyzes += a;
    }
    db["autovacuum_runs"] = json!(vacuums);
    db["autoanalyze_runs"] = json!(analyzes);
}

/// Adds to a sample the checkpoints, their time and the WAL written since the previous sample (counters
/// that start again from 0 after an immediate restart count from 0 there, as autovacuum runs do).
fn add_checkpoints_and_wal(db: &mut Value, previous: Option<&Value>) {
    let delta = |key: &str| {
        let now = db[key].as_f64().unwrap_or_default();
        match previous.and_then(|p| p[key].as_f64()) {
            Some(before) if before <= now => now - before,
            Some(_) => now,
            None => 0.0,
        }
    };
    let (checkpoints, ms, wal) =
        (delta("checkpoints_count"), delta("checkpoint_ms_count"), delta("wal_position_bytes"));
    db["checkpoints"] = json!(checkpoints);
    db["checkpoint_ms"] = json!(ms);
    db["wal_bytes"] = json!(wal);
}

fn report_json(r: &chaos::Report) -> Value {
    let order = r.order.as_ref().map(|(keys, v)| json!({"keys": keys, "violations": v.count()}));
    json!({
        "mode": format!("{:?}", r.mode).to_lowercase(),
        "published_ok": r.published_ok, "published_unknown": r.published_unknown, "acked": r.acked,
        "dead_lettered": r.dead_lettered, "deliveries": r.deliveries, "duplicates": r.duplicates,
        "kills": r.kills, "pg_restarts": r.pg_restarts,
        "lost": r.lost.len(), "unexpected": r.unexpected.len(), "violations": r.violations.len(), "order": order,
        "examples": r.lost.iter().chain(&r.unexpected).chain(&r.violations).take(10).collect::<Vec<_>>(),
        "passed": r.passed(),
    })
}

/// The verdicts, with the figures they were judged on.
fn judge(result: &mut Value, plan: &Plan) {
    let rows = result["minutes"].as_array().cloned().unwrap_or_default();
    let mut verdicts = serde_json::Map::new();

    // The crash suite's checker over the three histories, and the drain.
    let checks = &result["checks"];
    let sum = |key: &str| ["pull", "ordered", "webhook"].iter().filter_map(|k| checks[k][key].as_u64()).sum::<u64>();
    let order = checks["ordered"]["order"]["violations"].as_u64().unwrap_or_default();
    let (lost, unexpected, violations) = (sum("lost"), sum("unexpected"), sum("violations"));
    let left = result["drain"]["left"].as_array().map_or(0, Vec::len);
    verdicts.insert(
        "lost".into(),
        verdict(
            lost == 0 && unexpected == 0 && violations == 0 && order == 0 && left == 0,
            format!(
                "lost {lost}, unexpected {unexpected}, violations {violations}, order violations {order}{}",
                if left > 0 { format!(", {left} queues not drained") } else { String::new() }
            ),
        ),
    );
    let totals = &result["totals"];
    let (resent, duplicate, stored) = (
        totals["idempotent_resends"].as_u64().unwrap_or_default(),
        totals["resends_answered_duplicate"].as_u64().unwrap_or_default(),
        totals["resends_stored_twice"].as_u64().unwrap_or_default(),
    );
    verdicts.insert(
        "idempotency".into(),
        verdict(
            stored == 0 && duplicate > 0,
            format!("{resent} publishes sent again with their key: {duplicate} answered as duplicates, {stored} stored twice"),
        ),
    );

    let reference = plan.reference_minute as usize;
    verdicts.insert("rss".into(), judge_rss(&rows, reference));
    let (p99, ratios) = judge_p99(&rows, reference);
    result["p99_ratios"] = ratios;
    verdicts.insert("p99".into(), p99);
    let hold_end = result["hold"]["released_s"].as_f64().map_or(0, |s| (s / 60.0).ceil() as usize);
    for (what, key) in [("tables", "table_sizes"), ("indexes", "index_sizes")] {
        verdicts.insert(key.into(), judge_sizes(&rows, what, plan.steady_minute as usize, hold_end));
    }

    let redrive = &result["redrive"];
    if !redrive.is_null() {
        let (moved, total) = (redrive["moved"].as_u64(), redrive["total"].as_u64());
        verdicts.insert(
            "redrive".into(),
            verdict(
                redrive["status"] == "completed" && moved == total && total.unwrap_or_default() > 0,
                format!("{} of {} moved, {}", redrive["moved"], redrive["total"], redrive["status"]),
            ),
        );
    }
    if !result["hold"].is_null() {
        let hold = &result["hold"];
        verdicts.insert(
            "snapshot".into(),
            verdict(
                hold["error"].is_null(),
                match hold["error"].as_str() {
                    Some(e) => e.to_owned(),
                    None => format!(
                        "held from {:.1} to {:.1} min",
                        hold["taken_s"].as_f64().unwrap_or_default() / 60.0,
                        hold["released_s"].as_f64().unwrap_or_default() / 60.0
                    ),
                },
            ),
        );
    }
    let events = result["events"].as_array().cloned().unwrap_or_default();
    let troubles: Vec<String> = events
        .iter()
        .filter(|e| matches!(e["what"].as_str(), Some("node_exited" | "node_start_failed" | "redrive_failed")))
        .map(|e| format!("{} at {:.1} min: {}", e["what"], e["at_s"].as_f64().unwrap_or_default() / 60.0, e["detail"]))
        .collect();
    verdicts.insert(
        "nodes".into(),
        verdict(
            troubles.is_empty(),
            if troubles.is_empty() {
                "no node exited on its own or failed to start".into()
            } else {
                troubles.join("; ")
            },
        ),
    );
    result["verdicts"] = Value::Object(verdicts);
}

fn verdict(pass: bool, detail: String) -> Value {
    json!({"pass": pass, "detail": detail})
}

/// RSS: each node that ran from the reference minute's end to the last minute's without a restart grew less
/// than RSS_MAX_GROWTH. A node started again in between is not judged (a new process starts small).
fn judge_rss(rows: &[Value], reference: usize) -> Value {
    let (Some(first), Some(last)) = (rows.get(reference - 1), rows.last()) else {
        return verdict(false, format!("no sample at minute {reference}"));
    };
    let mut figures = Vec::new();
    let (mut pass, mut judged) = (true, 0);
    for node in 0..2 {
        let pid = |row: &Value| row["pids"][node].as_u64();
        let rss = |row: &Value| row["rss_mib"][node].as_f64();
        let restarted = rows[reference - 1..].iter().any(|r| pid(r) != pid(first) || pid(r).is_none());
        match (rss(first), rss(last)) {
            (Some(a), Some(b)) if !restarted && a > 0.0 => {
                let growth = b / a - 1.0;
                judged += 1;
                pass &= growth < RSS_MAX_GROWTH;
                figures.push(format!("node {node} {a:.1} -> {b:.1} MiB ({:+.1}%)", growth * 100.0));
            }
            _ => figures.push(format!("node {node} restarted since minute {reference}: not judged")),
        }
    }
    verdict(pass && judged > 0, format!("from the end of minute {reference} to the end: {}", figures.join("; ")))
}

/// p99: every minute from the reference on, but those with a fault (a node killed or exited, PostgreSQL
/// restarted), within P99_MAX_RATIO of the reference minute's, for the publishes and for the pulls' and the
/// webhooks' deliveries. Answers the verdict and each series' ratio per minute.
fn judge_p99(rows: &[Value], reference: usize) -> (Value, Value) {
    type Figure = fn(&Value) -> Option<f64>;
    let series: [(&str, Figure); 3] = [
        ("publish", |r| r["publish"]["all"]["p99_ms"].as_f64()),
        ("pull delivery", |r| r["delivery"]["pull"]["p99_ms"].as_f64()),
        ("webhook delivery", |r| r["delivery"]["webhook"]["p99_ms"].as_f64()),
    ];
    let mut figures = Vec::new();
    let mut pass = true;
    let mut ratios = serde_json::Map::new();
    for (name, get) in series {
        let Some(base) = rows.get(reference - 1).and_then(get).filter(|b| *b > 0.0) else {
            pass = false;
            figures.push(format!("{name}: no reference"));
            continue;
        };
        // The worst judged minute, and the worst of all: (ratio, minute).
        let mut worst: Option<(f64, u64)> = None;
        let mut worst_any = worst;
        let mut per_minute = Vec::new();
        for row in rows {
            let minute = row["minute"].as_u64().unwrap_or_default();
            let ratio = get(row).map(|v| v / base);
            per_minute.push(json!(ratio));
            let Some(ratio) = ratio else { continue };
            if worst_any.is_none_or(|(w, _)| ratio > w) {
                worst_any = Some((ratio, minute));
            }
            if minute as usize >= reference && row["fault_minute"] != true && worst.is_none_or(|(w, _)| ratio > w) {
                worst = Some((ratio, minute));
            }
        }
        ratios.insert(name.into(), json!(per_minute));
        let describe =
            |w: Option<(f64, u64)>| w.map_or("no minute".to_owned(), |(w, m)| format!("{w:.2}x (minute {m})"));
        pass &= worst.is_none_or(|(w, _)| w <= P99_MAX_RATIO);
        figures.push(format!(
            "{name} (reference {base:.1} ms): worst {}; with the fault minutes and the warm-up {}",
            describe(worst),
            describe(worst_any)
        ));
    }
    (verdict(pass, figures.join("; ")), Value::Object(ratios))
}

/// Sizes (`what`: tables or indexes): the most of each over the last sixth of the run against its most over
/// the steady stretch before it, from the steady minute until 5 minutes after the snapshot's release (the
/// tables keep the room a held snapshot made them take, and reuse it). One grown past SIZE_MAX_GROWTH and by
/// more than SIZE_SLACK_BYTES fails.
fn judge_sizes(rows: &[Value], what: &str, steady: usize, hold_end: usize) -> Value {
    let n = rows.len();
    let end_from = n + 1 - (n / 6).max(1);
    // Both within the minutes before the end's, or the end's own when there are none.
    let base_from = steady.min(end_from - 1).max(1);
    let base_until = (hold_end + 5).min(end_from - 1).max(base_from);
    let peak = |name: &str, from: usize, until: usize| {
        rows[from - 1..until]
            .iter()
            .filter_map(|r| r["db"][what][name]["bytes"].as_f64())
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let names: std::collections::BTreeSet<String> =
        rows.iter().filter_map(|r| r["db"][what].as_object()).flat_map(|m| m.keys().cloned()).collect();
    let mut grown = Vec::new();
    let sampled = |from: usize, until: usize| rows[from - 1..until].iter().any(|r| r["db"][what].is_object());
    if !sampled(base_from, base_until) || !sampled(end_from, n) {
        grown.push("no sample of the database in one of the stretches".to_owned());
    }
    let (mut base_total, mut end_total) = (0.0, 0.0);
    for name in &names {
        let base = peak(name, base_from, base_until).unwrap_or(0.0);
        let end = peak(name, end_from, n).unwrap_or(0.0);
        base_total += base;
        end_total += end;
        if end > base * (1.0 + SIZE_MAX_GROWTH) && end - base > SIZE_SLACK_BYTES {
            grown.push(format!("{name} {:.1} -> {:.1} MB", base / 1e6, end / 1e6));
        }
    }
    verdict(
        grown.is_empty() && !names.is_empty(),
        format!(
            "{} {what}, most over minutes {base_from}-{base_until} {:.1} MB, over minutes {end_from}-{n} {:.1} MB; {}",
            names.len(),
            base_total / 1e6,
            end_total / 1e6,
            if grown.is_empty() { "none grew".to_owned() } else { format!("grown: {}", grown.join(", ")) }
        ),
    )
}

/// The table, one row a minute, and the verdicts.
fn print(result: &Value) {
    let f = |v: &Value| v.as_f64();
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
    println!(
        "\n| minute | faults | snapshot | published/s | delivered/s | acked/s | publish p50 / p99 ms | pull delivery p50 / p99 ms \
         | webhook delivery p50 / p99 ms | RSS MiB node 0 / 1 | tables MB | indexes MB | dead rows | autovacuums | checkpoints (s) | WAL MB | CPU % node 0 / 1 / PostgreSQL |"
    );
    println!("|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for row in result["minutes"].as_array().into_iter().flatten() {
        let pair = |v: &Value| format!("{} / {}", opt(f(&v["p50_ms"]), 1), opt(f(&v["p99_ms"]), 1));
        let db = &row["db"];
        let cpu = &row["cpu_percent"];
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} ({}) | {} | {} / {} / {} |",
            row["minute"],
            row["faults"]
                .as_array()
                .map(|f| f.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
                .unwrap_or_default(),
            if row["snapshot_held"] == true { "held" } else { "" },
            f(&row["published_per_s"]).unwrap_or_default(),
            f(&row["delivered_per_s"]).unwrap_or_default(),
            f(&row["acked_per_s"]).unwrap_or_default(),
            pair(&row["publish"]["all"]),
            pair(&row["delivery"]["pull"]),
            pair(&row["delivery"]["webhook"]),
            opt(f(&row["rss_mib"][0]), 0),
            opt(f(&row["rss_mib"][1]), 0),
            opt(f(&db["table_bytes"]).map(|b| b / 1e6), 1),
            opt(f(&db["index_bytes"]).map(|b| b / 1e6), 1),
            db["dead_rows"].as_i64().map_or("-".into(), |d| d.to_string()),
            db["autovacuum_runs"].as_i64().map_or("-".into(), |d| d.to_string()),
            opt(f(&db["checkpoints"]), 0),
            opt(f(&db["checkpoint_ms"]).map(|ms| ms / 1000.0), 1),
            opt(f(&db["wal_bytes"]).map(|b| b / 1e6), 0),
            opt(f(&cpu["node0"]), 0),
            opt(f(&cpu["node1"]), 0),
            opt(f(&cpu["postgres"]), 0),
        );
    }
    println!();
    let rules = [
        ("lost", "the crash suite's checker over every history after the drain: nothing lost, unexpected or violated".to_owned()),
        ("idempotency", "a publish sent again with its idempotency key stores nothing".to_owned()),
        ("rss", format!("RSS grows less than {:.0}% from the reference minute to the end", RSS_MAX_GROWTH * 100.0)),
        ("p99", format!("every minute's p99 from the reference minute on, fault minutes aside, within {P99_MAX_RATIO}x the reference minute's")),
        ("table_sizes", format!("tables flat: most over the last sixth <= {:.0}% above the steady most, or {:.0} MiB", SIZE_MAX_GROWTH * 100.0, SIZE_SLACK_BYTES / 1048576.0)),
        ("index_sizes", "indexes flat: as tables".to_owned()),
        ("redrive", "the redrive of the failing webhook's dead letters completed, every message moved".to_owned()),
        ("snapshot", "the snapshot was held for its whole time".to_owned()),
        ("nodes", "no node exited on its own".to_owned()),
    ];
    for (key, rule) in rules {
        let verdict = &result["verdicts"][key];
        if verdict.is_null() {
            continue;
        }
        let pass = if verdict["pass"].as_bool() == Some(true) { "PASS" } else { "FAIL" };
        println!("{pass}  {rule}: {}", verdict["detail"].as_str().unwrap_or_default());
    }
}
