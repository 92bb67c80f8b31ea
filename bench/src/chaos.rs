//! The crash suite: producers and consumers work a queue while the server is killed with SIGKILL at
//! random moments and PostgreSQL is restarted in immediate mode. Every client keeps a history; after a
//! final drain, `check` asserts over it: nothing acknowledged is lost, nothing unexpected appears, no
//! message is under two live leases, nothing is redelivered after a successful ack, attempts never
//! decrease and delays never end early.
//!
//! Four modes: `pull` (HTTP pull consumers acking through the API), `webhook` (a push consumer whose
//! receiver fails in every way: 500s, hangs, connection resets, redirects, and being down), `ordered`
//! (pull consumers on messages with ordering keys, each numbered within its key; the checker also asserts
//! that a key's messages are first delivered in order and that no two of a key are ever leased at once)
//! and `fan-out` (two pull consumers and a webhook one on one queue, each checked on its own history,
//! `chaos_fan_out`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use rand::Rng;
use serde_json::{json, Value};
use skiplock::testkit::TempCluster;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use crate::setup::free_port;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Pull,
    Webhook,
    Ordered,
    /// Schedules firing into a queue (`chaos_schedules`): every tick stored once.
    Schedules,
    /// Two pull consumers and a webhook one on one queue (`chaos_fan_out`): each gets every message.
    FanOut,
}

impl Mode {
    /// Whether the consumers pull (and so hold leases of a known length).
    fn pulls(self) -> bool {
        matches!(self, Mode::Pull | Mode::Ordered)
    }

    /// Messages published per second unless `--publish-rate` says otherwise (0: as fast as they can).
    pub(crate) fn default_publish_rate(self) -> u64 {
        match self {
            Mode::Pull => 0,
            Mode::Webhook => 1_000,
            Mode::Ordered | Mode::Schedules | Mode::FanOut => 500,
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct ChaosArgs {
    #[arg(long, value_enum, default_value = "pull")]
    pub mode: Mode,
    /// How long the load and the kills go on.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    #[arg(long, default_value_t = 3)]
    pub producers: usize,
    #[arg(long, default_value_t = 3)]
    pub consumers: usize,
    /// Kill the server every 1..=this many milliseconds, at random.
    #[arg(long, default_value_t = 2500)]
    pub kill_every_ms: u64,
    /// Restart PostgreSQL (immediate mode) at every Nth kill.
    #[arg(long, default_value_t = 4)]
    pub pg_restart_every: u64,
    /// Messages published per second by all producers together (0: as fast as they can). A webhook
    /// consumer drains more slowly than pullers, so the webhook mode publishes at 1,000/s by default, the
    /// ordered mode, whose keys go one message at a time, at 500/s, and the fan-out mode, which delivers
    /// each message three times, at 500/s.
    #[arg(long)]
    pub publish_rate: Option<u64>,
    /// Ordering keys the ordered mode's messages go round.
    #[arg(long, default_value_t = 50)]
    pub keys: u64,
}

pub(crate) const VISIBILITY_MS: u64 = 2_000;
const WEBHOOK_TIMEOUT_MS: u64 = 1_000;
pub(crate) const MAX_RETRIES: i64 = 20;

pub(crate) fn wall_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Everything the clients saw.
#[derive(Default)]
pub(crate) struct History {
    /// Body -> did its publish get a 2xx (Some(true)), fail or lose its answer (Some(false)).
    pub(crate) published: HashMap<String, bool>,
    pub(crate) delays_ms: HashMap<String, i64>,
    pub(crate) deliveries: Vec<Delivery>,
    /// Body -> when an ack of it was answered 2xx, and any ack attempts at all.
    pub(crate) acked_at: HashMap<String, Instant>,
    pub(crate) ack_attempted: HashSet<String>,
    pub(crate) dead_lettered: HashSet<String>,
    /// The ordered mode: body -> its key and its number within the key (the order it was published in).
    pub(crate) ordered: HashMap<String, (u64, u64)>,
    /// The ordered mode: body -> each ack of it sent, and its 2xx answer: the message may have gone at any
    /// moment in between, or at any moment after the send of an ack that failed (a request given up by
    /// the client may still be carried out).
    pub(crate) acks_sent: HashMap<String, Vec<(Instant, Option<Instant>)>>,
}

#[derive(Clone)]
pub(crate) struct Delivery {
    pub(crate) body: String,
    pub(crate) attempts: i64,
    pub(crate) timestamp_ms: i64,
    /// When the pull that returned it was sent, and when its answer arrived (wall clock, ms).
    pub(crate) asked: Instant,
    pub(crate) received: Instant,
    pub(crate) received_wall_ms: i64,
    /// Which pull (or webhook request) brought it: the same number for one answer's messages.
    pub(crate) pull: u64,
    /// The `metadata.ordering_key` it came with.
    pub(crate) ordering_key: Option<String>,
}

/// Numbers the pulls and webhook requests, so that one answer's deliveries can be told apart.
pub(crate) static PULLS: AtomicU64 = AtomicU64::new(1);

pub(crate) fn ordering_key(message: &Value) -> Option<String> {
    message["metadata"]["ordering_key"].as_str().map(str::to_owned)
}

pub(crate) struct Cluster {
    pg: TempCluster,
    pub(crate) url: String,
    server: Option<Child>,
    port: u16,
    roles: &'static str,
}

impl Cluster {
    async fn start_server(&mut self) -> anyhow::Result<()> {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let child = Command::new(crate::setup::skiplock_binary())
                .args(["serve", "--roles", self.roles])
                .env("DATABASE_URL", &self.url)
                .env("SKIPLOCK_BIND", format!("127.0.0.1:{}", self.port))
                .env("SKIPLOCK_METRICS_BIND", format!("127.0.0.1:{}", free_port()))
                .env("SKIPLOCK_ADMIN_BIND", "127.0.0.1:0")
                .env("SKIPLOCK_LOG", "error")
                .env("SKIPLOCK_RATE_LIMIT", "0")
                .env("SKIPLOCK_PUBLISH_RATE_LIMIT", "0")
                .env("SKIPLOCK_WEBHOOK_TIMEOUT_MS", WEBHOOK_TIMEOUT_MS.to_string())
                .env("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()?;
            self.server = Some(child);
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(10) {
                if let Ok(r) = client.get(format!("http://127.0.0.1:{}/readyz", self.port)).send().await {
                    if r.status().is_success() {
                        return Ok(());
                    }
                }
                if let Some(Ok(Some(_))) = self.server.as_mut().map(|c| c.try_wait()) {
                    break; // it exited (the database may still be starting): start it again
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            self.kill().await;
            if Instant::now() > deadline {
                bail!("the server did not come back within a minute");
            }
        }
    }

    pub(crate) async fn kill(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = child.kill().await; // SIGKILL
        }
    }

    /// Kills the server at random moments for `args.seconds` (and restarts PostgreSQL at every Nth kill,
    /// and takes `receiver` down for a moment), starting it again each time; answers the kills and
    /// restarts.
    pub(crate) async fn kill_repeatedly(
        &mut self,
        args: &ChaosArgs,
        receiver: Option<&FaultyReceiver>,
    ) -> anyhow::Result<(u64, u64)> {
        let started = Instant::now();
        let (mut kills, mut pg_restarts) = (0u64, 0u64);
        while started.elapsed() < Duration::from_secs(args.seconds) {
            let wait = rand::thread_rng().gen_range(1..=args.kill_every_ms.max(1));
            tokio::time::sleep(Duration::from_millis(wait)).await;
            self.kill().await;
            kills += 1;
            if args.pg_restart_every > 0 && kills % args.pg_restart_every == 0 {
                self.pg.stop_immediately();
                self.pg.start();
                pg_restarts += 1;
            }
            if let Some(r) = receiver {
                r.kill_for(Duration::from_millis(rand::thread_rng().gen_range(0..500)));
            }
            self.start_server().await?;
        }
        Ok((kills, pg_restarts))
    }
}

#[derive(Clone)]
pub(crate) struct Client {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
    pub(crate) token: String,
    /// The 5xx answers its requests got, shared by its clones.
    pub(crate) server_errors: ServerErrors,
}

/// 5xx answers by status: the API documents only 503 (retry after a second) as a server error a client
/// should expect, so the upgrade test counts the others.
#[derive(Clone, Default)]
pub(crate) struct ServerErrors(Arc<Mutex<BTreeMap<u16, u64>>>);

impl ServerErrors {
    fn record(&self, status: reqwest::StatusCode) {
        if status.is_server_error() {
            *self.0.lock().unwrap().entry(status.as_u16()).or_default() += 1;
        }
    }

    pub(crate) fn counts(&self) -> BTreeMap<u16, u64> {
        self.0.lock().unwrap().clone()
    }
}

impl Client {
    pub(crate) fn new(http: reqwest::Client, base: String, token: String) -> Client {
        Client { http, base, token, server_errors: ServerErrors::default() }
    }

    pub(crate) async fn post(&self, path: &str, body: &Value) -> Result<Value, ()> {
        let resp = self.http.post(format!("{}/{path}", self.base)).bearer_auth(&self.token).json(body).send().await;
        match resp {
            Ok(r) if r.status().is_success() => r.json::<Value>().await.map(|v| v["result"].clone()).map_err(|_| ()),
            Ok(r) => {
                self.server_errors.record(r.status());
                Err(())
            }
            Err(_) => Err(()),
        }
    }
}

/// A PostgreSQL cluster of its own with an account, and the server on it with the roles `mode` needs; a
/// client of the account.
pub(crate) async fn start(mode: Mode) -> anyhow::Result<(Cluster, Client)> {
    let pg = tokio::task::spawn_blocking(TempCluster::create).await?;
    let url = pg.url("postgres");
    let out = Command::new(crate::setup::skiplock_binary())
        .args(["account", "create", "--name", "chaos"])
        .env("DATABASE_URL", &url)
        .output()
        .await?;
    let created: Value = serde_json::from_slice(&out.stdout).context("account create")?;
    let roles = match mode {
        Mode::Pull | Mode::Ordered | Mode::Schedules => "api",
        Mode::Webhook | Mode::FanOut => "api,dispatcher",
    };
    let mut cluster = Cluster { pg, url, server: None, port: free_port(), roles };
    cluster.start_server().await?;
    let client = Client::new(
        reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?,
        format!(
            "http://127.0.0.1:{}/client/v4/accounts/{}",
            cluster.port,
            created["account_id"].as_str().unwrap_or_default()
        ),
        created["token"].as_str().unwrap_or_default().to_owned(),
    );
    Ok((cluster, client))
}

/// The pull, webhook and ordered modes (the schedules mode is `chaos_schedules::run`, the fan-out mode
/// `chaos_fan_out::run`).
pub async fn run(args: ChaosArgs) -> anyhow::Result<()> {
    let (mut cluster, client) = start(args.mode).await?;
    let queue =
        client.post("queues", &json!({"queue_name": "chaos"})).await.map_err(|_| anyhow::anyhow!("create queue"))?;
    let queue = queue["queue_id"].as_str().unwrap_or_default().to_owned();
    let dlq_consumer = json!({"type": "http_pull"});
    let receiver = match args.mode {
        Mode::Pull | Mode::Ordered | Mode::Schedules => {
            let consumer = json!({"type": "http_pull", "dead_letter_queue": "chaos-dlq", "settings": {"max_retries": MAX_RETRIES}});
            client
                .post(&format!("queues/{queue}/consumers"), &consumer)
                .await
                .map_err(|_| anyhow::anyhow!("consumer"))?;
            None
        }
        Mode::Webhook => {
            let receiver = FaultyReceiver::start().await?;
            let consumer = json!({
                "type": "webhook", "url": format!("http://127.0.0.1:{}/hook", receiver.port),
                "dead_letter_queue": "chaos-dlq",
                "settings": {"max_retries": MAX_RETRIES, "max_wait_time_ms": 100, "batch_size": 50, "max_concurrency": 8},
            });
            client
                .post(&format!("queues/{queue}/consumers"), &consumer)
                .await
                .map_err(|_| anyhow::anyhow!("consumer"))?;
            Some(receiver)
        }
        Mode::FanOut => unreachable!("the fan-out mode runs in chaos_fan_out"),
    };
    let history: Arc<Mutex<History>> = Arc::default();
    let stop = CancellationToken::new();
    let mut load = tokio::task::JoinSet::new();
    let pause = producer_pause(&args);
    for p in 0..args.producers {
        let (client, queue, history, stop) = (client.clone(), queue.clone(), history.clone(), stop.clone());
        if args.mode == Mode::Ordered {
            let keys = Keys { producer: p as u64, producers: args.producers as u64, keys: args.keys };
            load.spawn(produce_ordered(client, queue, keys, history, stop, pause));
        } else {
            load.spawn(produce(client, queue, p, history, stop, pause));
        }
    }
    let how = if args.mode == Mode::Ordered { Consumer::ORDERED } else { Consumer::PLAIN };
    if args.mode.pulls() {
        for _ in 0..args.consumers {
            load.spawn(consume_as(
                client.clone(),
                queue.clone(),
                None,
                history.clone(),
                stop.clone(),
                VISIBILITY_MS,
                how,
            ));
        }
    }

    let (kills, pg_restarts) = cluster.kill_repeatedly(&args, receiver.as_ref()).await?;
    stop.cancel();
    while load.join_next().await.is_some() {}

    // Drain: everything still stored is delivered once more and acked (the DLQ too).
    let drain_deadline = Instant::now() + Duration::from_secs(600);
    let dlq_id = {
        let resp =
            client.http.get(format!("{}/queues?name=chaos-dlq", client.base)).bearer_auth(&client.token).send().await?;
        let body: Value = resp.json().await?;
        body["result"][0]["queue_id"].as_str().unwrap_or_default().to_owned()
    };
    let _ = client.post(&format!("queues/{dlq_id}/consumers"), &dlq_consumer).await;
    if let Some(r) = &receiver {
        r.behave_from_now_on();
    }
    loop {
        let left = backlog(&client, &queue).await + backlog(&client, &dlq_id).await;
        if left == 0 {
            break;
        }
        if Instant::now() > drain_deadline {
            bail!("{left} messages could not be drained");
        }
        if args.mode.pulls() {
            drain_once(&client, &queue, &history, false).await;
        }
        drain_once(&client, &dlq_id, &history, true).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let metered = metered(&cluster.url, &queue, &[dlq_id.as_str()]).await?;
    cluster.kill().await;
    if let Some(r) = &receiver {
        r.record_into(&mut history.lock().unwrap());
    }
    let h = history.lock().unwrap();
    let mut report = check(&h, args.mode, kills, pg_restarts);
    report.metering = Some(metering(&[&h], &metered));
    println!("{report}");
    if !report.passed() {
        bail!("the chaos checker found violations");
    }
    Ok(())
}

/// What the usage records say of the queue and its dead-letter queues once everything is drained, every
/// count delta folded first (`store::usage`).
pub(crate) struct Metered {
    published: i64,
    delivered: i64,
    acked: i64,
    dead_lettered: i64,
    dlq_acked: i64,
}

pub(crate) async fn metered(url: &str, queue: &str, dlqs: &[&str]) -> anyhow::Result<Metered> {
    let pool = sqlx::PgPool::connect(url).await?;
    skiplock::store::counts::fold(&pool).await?;
    let sums = "select coalesce(sum(published), 0)::int8, coalesce(sum(delivered), 0)::int8,
                       coalesce(sum(acked), 0)::int8, coalesce(sum(dead_lettered), 0)::int8
                from usage_hours where queue_id = $1::uuid";
    let (published, delivered, acked, dead_lettered): (i64, i64, i64, i64) =
        sqlx::query_as(sums).bind(queue).fetch_one(&pool).await?;
    let mut dlq_acked = 0;
    for dlq in dlqs {
        let (_, _, acked, _): (i64, i64, i64, i64) = sqlx::query_as(sums).bind(dlq).fetch_one(&pool).await?;
        dlq_acked += acked;
    }
    pool.close().await;
    Ok(Metered { published, delivered, acked, dead_lettered, dlq_acked })
}

/// The metering's verdict: each message stored is metered as published once, whatever the kills (the
/// messages the clients saw, every one drained at the end); each consumer's copy left the queue once,
/// acked or dead-lettered; the dead-letter queues' acks are the moves into them; deliveries are at least
/// those the clients saw (a delivery whose answer a kill cut off is still one the database made).
pub(crate) struct Metering {
    /// The queue's consumers, each of which reads and deletes a copy of every message.
    consumers: usize,
    published: i64,
    seen: usize,
    delivered: i64,
    seen_deliveries: usize,
    acked: i64,
    dead_lettered: i64,
    dlq_acked: i64,
}

impl Metering {
    pub(crate) fn violations(&self) -> Vec<String> {
        let mut found = Vec::new();
        if self.published != self.seen as i64 {
            found.push(format!("metered {} publishes, the clients saw {} messages", self.published, self.seen));
        }
        if self.acked + self.dead_lettered != self.published * self.consumers as i64 {
            found.push(format!(
                "metered {} acked and {} dead-lettered of {} published to {} consumers, with nothing left",
                self.acked, self.dead_lettered, self.published, self.consumers
            ));
        }
        if self.dlq_acked != self.dead_lettered {
            found.push(format!(
                "metered {} dead-lettered, {} acked from the dead-letter queue",
                self.dead_lettered, self.dlq_acked
            ));
        }
        if self.delivered < self.seen_deliveries as i64 {
            found.push(format!("metered {} deliveries, the clients saw {}", self.delivered, self.seen_deliveries));
        }
        found
    }
}

/// The metering against the histories of the queue's consumers, one each.
pub(crate) fn metering(consumers: &[&History], metered: &Metered) -> Metering {
    let seen: HashSet<&String> =
        consumers.iter().flat_map(|h| h.deliveries.iter().map(|d| &d.body).chain(h.dead_lettered.iter())).collect();
    Metering {
        consumers: consumers.len(),
        published: metered.published,
        seen: seen.len(),
        delivered: metered.delivered,
        seen_deliveries: consumers.iter().map(|h| h.deliveries.len()).sum(),
        acked: metered.acked,
        dead_lettered: metered.dead_lettered,
        dlq_acked: metered.dlq_acked,
    }
}

/// How long each producer waits before a batch of 10, so that together they keep the mode's rate.
pub(crate) fn producer_pause(args: &ChaosArgs) -> Option<Duration> {
    let rate = args.publish_rate.unwrap_or(args.mode.default_publish_rate());
    (rate > 0).then(|| Duration::from_secs_f64(10.0 * args.producers as f64 / rate as f64))
}

pub(crate) async fn backlog(client: &Client, queue: &str) -> i64 {
    let resp =
        client.http.get(format!("{}/queues/{queue}/metrics", client.base)).bearer_auth(&client.token).send().await;
    match resp {
        Ok(r) => r.json::<Value>().await.ok().and_then(|v| v["result"]["backlog_count"].as_i64()).unwrap_or(i64::MAX),
        Err(_) => i64::MAX,
    }
}

pub(crate) async fn produce(
    client: Client,
    queue: String,
    producer: usize,
    history: Arc<Mutex<History>>,
    stop: CancellationToken,
    pause: Option<Duration>,
) {
    for batch in 0.. {
        if stop.is_cancelled() {
            return;
        }
        if let Some(pause) = pause {
            tokio::time::sleep(pause).await;
        }
        let bodies: Vec<String> = (0..10).map(|i| format!("p{producer}-{batch}-{i}")).collect();
        let delay = (batch % 7 == 0).then_some(1);
        let messages: Vec<Value> = bodies.iter().map(|b| json!({"body": b, "content_type": "text"})).collect();
        let mut request = json!({ "messages": messages });
        if let Some(d) = delay {
            request["delay_seconds"] = json!(d);
        }
        {
            let mut h = history.lock().unwrap();
            for b in &bodies {
                h.published.insert(b.clone(), false);
                if let Some(d) = delay {
                    h.delays_ms.insert(b.clone(), d * 1000);
                }
            }
        }
        let ok = client.post(&format!("queues/{queue}/messages/batch"), &request).await.is_ok();
        if ok {
            let mut h = history.lock().unwrap();
            for b in bodies {
                h.published.insert(b, true);
            }
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The ordered mode's keys of one producer: key k is producer (k % producers)'s, so each key's
/// publishes go out one after another.
pub(crate) struct Keys {
    producer: u64,
    producers: u64,
    keys: u64,
}

/// The ordered mode's producer: batches of 10 messages over its keys, each with the ordering key `k{key}`
/// and the body `k{key}-{n}`, n counting that key's messages from 0. A publish that fails is sent again,
/// with the same idempotency keys, until it gets a 2xx, and only then does the next go: so a key's
/// messages are stored in the order of their numbers. (Were a failed publish given up, its request could
/// still be committed after the next one's, and the checker would take that order for the server's fault.)
pub(crate) async fn produce_ordered(
    client: Client,
    queue: String,
    keys: Keys,
    history: Arc<Mutex<History>>,
    stop: CancellationToken,
    pause: Option<Duration>,
) {
    let mine: Vec<u64> = (0..keys.keys).filter(|k| k % keys.producers == keys.producer).collect();
    if mine.is_empty() {
        return;
    }
    let mut next: HashMap<u64, u64> = HashMap::new();
    for batch in 0u64.. {
        if stop.is_cancelled() {
            return;
        }
        if let Some(pause) = pause {
            tokio::time::sleep(pause).await;
        }
        let numbered: Vec<(u64, u64)> = (0..10)
            .map(|_| {
                let key = mine[rand::thread_rng().gen_range(0..mine.len())];
                let n = next.entry(key).or_insert(0);
                *n += 1;
                (key, *n - 1)
            })
            .collect();
        let bodies: Vec<String> = numbered.iter().map(|(key, n)| format!("k{key}-{n}")).collect();
        let delay = (batch % 7 == 0).then_some(1);
        let messages: Vec<Value> = numbered
            .iter()
            .zip(&bodies)
            .map(|((key, _), body)| {
                json!({"body": body, "content_type": "text", "ordering_key": format!("k{key}"), "idempotency_key": body})
            })
            .collect();
        let mut request = json!({ "messages": messages });
        if let Some(d) = delay {
            request["delay_seconds"] = json!(d);
        }
        {
            let mut h = history.lock().unwrap();
            for (body, numbered) in bodies.iter().zip(&numbered) {
                h.published.insert(body.clone(), false);
                h.ordered.insert(body.clone(), *numbered);
                if let Some(d) = delay {
                    h.delays_ms.insert(body.clone(), d * 1000);
                }
            }
        }
        while client.post(&format!("queues/{queue}/messages/batch"), &request).await.is_err() {
            if stop.is_cancelled() {
                return; // the last batch of its keys: whether it was stored is not known
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut h = history.lock().unwrap();
        for b in bodies {
            h.published.insert(b, true);
        }
    }
}

/// How a pulling consumer behaves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Consumer {
    batch_size: u64,
    /// It works on each batch for up to this long (at random) before it acks.
    hold_ms: u64,
    /// Each message is left unacked, its lease to run out, with this chance (in %).
    unacked_percent: u32,
}

impl Consumer {
    /// Pulls 20 and acks them all at once.
    pub(crate) const PLAIN: Consumer = Consumer { batch_size: 20, hold_ms: 0, unacked_percent: 0 };
    /// Holds its leases a while, so that other consumers pull meanwhile, and lets some run out, so that a
    /// key's head is delivered again while the key's later messages wait.
    const ORDERED: Consumer = Consumer { batch_size: 10, hold_ms: 100, unacked_percent: 5 };
}

/// One pull and its acks, recorded; `consumer_id` names the consumer pulling when the queue has several.
/// Returns whether anything came.
async fn pull_and_ack(
    client: &Client,
    queue: &str,
    consumer_id: Option<&str>,
    history: &Mutex<History>,
    visibility: u64,
    dead: bool,
    how: Consumer,
) -> bool {
    let asked = Instant::now();
    let mut request = json!({"batch_size": how.batch_size, "visibility_timeout_ms": visibility});
    if let Some(id) = consumer_id {
        request["consumer_id"] = json!(id);
    }
    let Ok(result) = client.post(&format!("queues/{queue}/messages/pull"), &request).await else {
        tokio::time::sleep(Duration::from_millis(50)).await;
        return false;
    };
    let (received, received_wall_ms) = (Instant::now(), wall_ms());
    let pull = PULLS.fetch_add(1, Ordering::Relaxed);
    let messages = result["messages"].as_array().cloned().unwrap_or_default();
    if messages.is_empty() {
        return false;
    }
    {
        let mut h = history.lock().unwrap();
        for m in &messages {
            let body = m["body"].as_str().unwrap_or_default().to_owned();
            h.ack_attempted.insert(body.clone());
            if dead {
                h.dead_lettered.insert(body);
                continue;
            }
            h.deliveries.push(Delivery {
                body,
                attempts: m["attempts"].as_i64().unwrap_or_default(),
                timestamp_ms: m["timestamp_ms"].as_i64().unwrap_or_default(),
                asked,
                received,
                received_wall_ms,
                pull,
                ordering_key: ordering_key(m),
            });
        }
    }
    if how.hold_ms > 0 {
        let hold = rand::thread_rng().gen_range(0..=how.hold_ms);
        tokio::time::sleep(Duration::from_millis(hold)).await;
    }
    let acked: Vec<&Value> =
        messages.iter().filter(|_| rand::thread_rng().gen_range(0..100) >= how.unacked_percent).collect();
    if acked.is_empty() {
        return true;
    }
    let leases: Vec<Value> = acked.iter().map(|m| json!({"lease_id": m["lease_id"]})).collect();
    let sent = Instant::now();
    let ok = client.post(&format!("queues/{queue}/messages/ack"), &json!({"acks": leases})).await.is_ok();
    let answered = Instant::now();
    let mut h = history.lock().unwrap();
    for m in acked {
        let body = m["body"].as_str().unwrap_or_default().to_owned();
        if h.ordered.contains_key(&body) {
            h.acks_sent.entry(body.clone()).or_default().push((sent, ok.then_some(answered)));
        }
        if ok {
            h.acked_at.entry(body).or_insert(answered);
        }
    }
    true
}

pub(crate) async fn consume(
    client: Client,
    queue: String,
    history: Arc<Mutex<History>>,
    stop: CancellationToken,
    visibility: u64,
) {
    consume_as(client, queue, None, history, stop, visibility, Consumer::PLAIN).await
}

/// Pulls and acks until `stop`, as the consumer `consumer_id` when the queue has several.
pub(crate) async fn consume_as(
    client: Client,
    queue: String,
    consumer_id: Option<String>,
    history: Arc<Mutex<History>>,
    stop: CancellationToken,
    visibility: u64,
    how: Consumer,
) {
    while !stop.is_cancelled() {
        if !pull_and_ack(&client, &queue, consumer_id.as_deref(), &history, visibility, false, how).await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub(crate) async fn drain_once(client: &Client, queue: &str, history: &Mutex<History>, dead: bool) {
    drain_once_as(client, queue, None, history, dead).await
}

/// Pulls and acks until a pull comes back empty, as the consumer `consumer_id` when the queue has several.
pub(crate) async fn drain_once_as(
    client: &Client,
    queue: &str,
    consumer_id: Option<&str>,
    history: &Mutex<History>,
    dead: bool,
) {
    while pull_and_ack(client, queue, consumer_id, history, 60_000, dead, Consumer::PLAIN).await {}
}

pub struct Report {
    pub(crate) mode: Mode,
    pub(crate) published_ok: usize,
    pub(crate) published_unknown: usize,
    pub(crate) acked: usize,
    pub(crate) dead_lettered: usize,
    pub(crate) deliveries: usize,
    pub(crate) duplicates: usize,
    pub(crate) kills: u64,
    pub(crate) pg_restarts: u64,
    pub(crate) lost: Vec<String>,
    pub(crate) unexpected: Vec<String>,
    pub(crate) violations: Vec<String>,
    /// The ordered mode: its keys, and what broke a key's order or its one lease at a time.
    pub(crate) order: Option<(usize, OrderViolations)>,
    /// The usage records against what the clients saw (the runs that drain a queue).
    pub(crate) metering: Option<Metering>,
}

/// What broke the ordered mode's rules, by rule.
#[derive(Default)]
pub(crate) struct OrderViolations {
    wrong_key: Vec<String>,
    out_of_order: Vec<String>,
    one_pull: Vec<String>,
    overlapping: Vec<String>,
}

impl OrderViolations {
    pub(crate) fn count(&self) -> usize {
        self.wrong_key.len() + self.out_of_order.len() + self.one_pull.len() + self.overlapping.len()
    }
}

impl Report {
    pub(crate) fn passed(&self) -> bool {
        self.lost.is_empty()
            && self.unexpected.is_empty()
            && self.violations.is_empty()
            && self.order.as_ref().is_none_or(|(_, violations)| violations.count() == 0)
            && self.metering.as_ref().is_none_or(|m| m.violations().is_empty())
    }
}

/// The report table's columns after its first, and their alignment.
pub(crate) const COLUMNS: &str = "published (2xx) | publish answer lost | acked | dead-lettered | deliveries | duplicates after lease expiry | server kills | PostgreSQL restarts | lost | unexpected | violations |";
pub(crate) const ALIGNMENT: &str = "--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|";

impl Report {
    /// Its figures under `COLUMNS`, closing the row.
    pub(crate) fn cells(&self) -> String {
        format!(
            "{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            self.published_ok,
            self.published_unknown,
            self.acked,
            self.dead_lettered,
            self.deliveries,
            self.duplicates,
            self.kills,
            self.pg_restarts,
            self.lost.len(),
            self.unexpected.len(),
            self.violations.len()
        )
    }

    /// The lines under the table: the order and metering figures, and the first few of each kind of
    /// violation, each line led by `prefix` (which names the consumer when there are several).
    pub(crate) fn write_details(&self, f: &mut std::fmt::Formatter<'_>, prefix: &str) -> std::fmt::Result {
        let empty = OrderViolations::default();
        let order = self.order.as_ref().map_or(&empty, |(_, v)| v);
        if let Some((keys, _)) = &self.order {
            writeln!(
                f,
                "{prefix}ordered: {keys} ordering keys; order violations {}: first delivered before an earlier message of its key {}, two of a key in one pull {}, delivered while another of its key was leased {}, a wrong ordering_key {}",
                order.count(),
                order.out_of_order.len(),
                order.one_pull.len(),
                order.overlapping.len(),
                order.wrong_key.len()
            )?;
        }
        if let Some(m) = &self.metering {
            for line in m.to_string().lines() {
                writeln!(f, "{prefix}{line}")?;
            }
        }
        for (what, list) in [
            ("lost", &self.lost),
            ("unexpected", &self.unexpected),
            ("violation", &self.violations),
            ("out of order", &order.out_of_order),
            ("two of a key in one pull", &order.one_pull),
            ("two of a key leased at once", &order.overlapping),
            ("wrong ordering_key", &order.wrong_key),
        ] {
            for item in list.iter().take(10) {
                writeln!(f, "{prefix}{what}: {item}")?;
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "| chaos ({:?}) | {COLUMNS}", self.mode)?;
        writeln!(f, "|---|{ALIGNMENT}")?;
        writeln!(f, "| result | {}", self.cells())?;
        self.write_details(f, "")
    }
}

/// The metering line, and a line for each violation.
impl std::fmt::Display for Metering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (copies, dlqs) = match self.consumers {
            1 => (String::new(), "queue"),
            n => (format!(" of {n} consumers' copies"), "queues"),
        };
        writeln!(
            f,
            "metering: {} published metered against {} messages seen (difference {}), {} acked and {} dead-lettered \
             metered{copies}, {} acked from the dead-letter {dlqs}, {} deliveries metered against {} the clients saw",
            self.published,
            self.seen,
            self.published - self.seen as i64,
            self.acked,
            self.dead_lettered,
            self.dlq_acked,
            self.delivered,
            self.seen_deliveries
        )?;
        for violation in self.violations() {
            writeln!(f, "metering violation: {violation}")?;
        }
        Ok(())
    }
}

/// Judges one consumer's history; `mode` is the consumer's kind (a fan-out run's pull consumers are judged
/// as `Pull`, its webhook consumer as `Webhook`).
pub(crate) fn check(h: &History, mode: Mode, kills: u64, pg_restarts: u64) -> Report {
    let published_ok: HashSet<&String> = h.published.iter().filter(|(_, ok)| **ok).map(|(b, _)| b).collect();
    let lost: Vec<String> = published_ok
        .iter()
        .filter(|b| !h.ack_attempted.contains(**b) && !h.dead_lettered.contains(**b))
        .map(|b| b.to_string())
        .collect();
    let unexpected: Vec<String> = h
        .deliveries
        .iter()
        .map(|d| &d.body)
        .chain(h.dead_lettered.iter())
        .filter(|b| !h.published.contains_key(*b))
        .map(|b| b.to_string())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let mut by_body: HashMap<&str, Vec<&Delivery>> = HashMap::new();
    for d in &h.deliveries {
        by_body.entry(&d.body).or_default().push(d);
    }
    let mut violations = Vec::new();
    let mut duplicates = 0;
    // Leases are checked for pulling consumers only, whose visibility timeout the checker knows.
    let lease = Duration::from_millis(VISIBILITY_MS);
    for (body, deliveries) in &mut by_body {
        deliveries.sort_by_key(|d| d.received);
        duplicates += deliveries.len() - 1;
        if let Some(delay) = h.delays_ms.get(*body) {
            let first = deliveries[0];
            if first.received_wall_ms < first.timestamp_ms + delay {
                violations.push(format!(
                    "{body}: delivered {} ms before its delay ended",
                    first.timestamp_ms + delay - first.received_wall_ms
                ));
            }
        }
        for pair in deliveries.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b.attempts < a.attempts {
                violations.push(format!("{body}: attempts went from {} to {}", a.attempts, b.attempts));
            }
            if mode.pulls() {
                if b.attempts == a.attempts {
                    violations.push(format!("{body}: delivered twice as attempt {}", a.attempts));
                }
                if b.received < a.asked + lease {
                    violations
                        .push(format!("{body}: delivered again while its lease (attempt {}) was live", a.attempts));
                }
            }
        }
        if let Some(acked) = h.acked_at.get(*body) {
            if mode.pulls() && deliveries.iter().any(|d| d.asked > *acked) {
                violations.push(format!("{body}: delivered again after a successful ack"));
            }
        }
    }
    Report {
        mode,
        published_ok: published_ok.len(),
        published_unknown: h.published.len() - published_ok.len(),
        acked: h.acked_at.len(),
        dead_lettered: h.dead_lettered.len(),
        deliveries: h.deliveries.len(),
        duplicates,
        kills,
        pg_restarts,
        lost,
        unexpected,
        violations,
        order: (mode == Mode::Ordered).then(|| {
            let keys: HashSet<u64> = h.ordered.values().map(|(key, _)| *key).collect();
            (keys.len(), order_violations(h))
        }),
        metering: None,
    }
}

/// The ordered mode's checks, each stated so that it holds whenever the clients' clocks allow any doubt
/// (a lease is taken somewhere between a pull's send and its answer, an ack lands somewhere between its
/// send and its answer):
/// - a message's `metadata.ordering_key` is the key it was published with;
/// - no message is first delivered before an earlier message of its key: its first answer came before
///   the earlier one's first pull was sent;
/// - one pull never brings two messages of a key;
/// - no message of a key is delivered while another of the key is certainly leased: from the answer
///   that brought that one until its lease could end (its visibility timeout from its pull's send) or an
///   ack of it may have landed (acks are permissive, so a late ack from another consumer ends a lease too).
pub(crate) fn order_violations(h: &History) -> OrderViolations {
    let lease = Duration::from_millis(VISIBILITY_MS);
    let mut violations = OrderViolations::default();
    let mut by_key: HashMap<u64, Vec<&Delivery>> = HashMap::new();
    for d in &h.deliveries {
        let Some(&(key, _)) = h.ordered.get(&d.body) else { continue };
        let expected = format!("k{key}");
        if d.ordering_key.as_deref() != Some(expected.as_str()) {
            violations.wrong_key.push(format!("{}: delivered with ordering_key {:?}", d.body, d.ordering_key));
        }
        by_key.entry(key).or_default().push(d);
    }
    for deliveries in by_key.values_mut() {
        deliveries.sort_by_key(|d| d.received);
        // First deliveries in the order of their numbers.
        let mut first: HashMap<&str, &Delivery> = HashMap::new();
        for d in deliveries.iter() {
            first.entry(d.body.as_str()).or_insert(d);
        }
        let mut numbered: Vec<(u64, &Delivery)> = first.values().map(|d| (h.ordered[&d.body].1, *d)).collect();
        numbered.sort_by_key(|(n, _)| *n);
        let mut latest_ask: Option<&Delivery> = None;
        for (_, d) in numbered {
            if let Some(earlier) = latest_ask {
                if d.received < earlier.asked {
                    violations.out_of_order.push(format!(
                        "{} was first delivered before {}, an earlier message of its key, was first pulled",
                        d.body, earlier.body
                    ));
                }
            }
            if latest_ask.is_none_or(|e| d.asked > e.asked) {
                latest_ask = Some(d);
            }
        }
        // One pull, one message per key.
        let mut in_pull: HashMap<u64, &str> = HashMap::new();
        for d in deliveries.iter() {
            if let Some(other) = in_pull.insert(d.pull, &d.body) {
                if other != d.body {
                    violations.one_pull.push(format!("{other} and {} came in one pull", d.body));
                }
            }
        }
        // Never delivered while another of its key is certainly leased.
        for (i, d) in deliveries.iter().enumerate() {
            for e in deliveries[..i].iter().rev() {
                if e.received + lease <= d.received {
                    break; // this one's lease, and every earlier one's, had surely ended
                }
                if e.body == d.body || e.received > d.asked {
                    continue;
                }
                let acked = h.acks_sent.get(&e.body).into_iter().flatten();
                let released =
                    acked.filter(|(_, answered)| answered.is_none_or(|a| a > e.asked)).map(|(sent, _)| *sent).min();
                let ends = released.map_or(e.asked + lease, |r| r.min(e.asked + lease));
                if d.received < ends {
                    violations.overlapping.push(format!(
                        "{} was delivered while {}, of its key, was leased ({} ms before that lease could end)",
                        d.body,
                        e.body,
                        (ends - d.received).as_millis()
                    ));
                }
            }
        }
    }
    violations
}

/// A webhook receiver that fails in every way a real one can: 500s, hanging past the dispatcher's
/// timeout, resetting the connection, redirecting, and not listening at all for a while. Deliveries it
/// answers 2xx are acked.
pub(crate) struct FaultyReceiver {
    pub(crate) port: u16,
    state: Arc<Mutex<ReceiverState>>,
}

#[derive(Default)]
struct ReceiverState {
    down_until: Option<Instant>,
    well_behaved: bool,
    acked: Vec<(String, Instant)>,
    deliveries: Vec<Delivery>,
    /// How long each request is held before its answer, and how many were held at once (at most).
    hold: Duration,
    in_flight: usize,
    max_in_flight: usize,
}

/// Counts a request as in flight until it is answered, however its handling ends.
struct InFlight(Arc<Mutex<ReceiverState>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().unwrap().in_flight -= 1;
    }
}

impl FaultyReceiver {
    pub(crate) async fn start() -> anyhow::Result<FaultyReceiver> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let state: Arc<Mutex<ReceiverState>> = Arc::default();
        let shared = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else { continue };
                let down = shared.lock().unwrap().down_until.is_some_and(|t| Instant::now() < t);
                if down {
                    drop(socket); // as good as a refused connection
                    continue;
                }
                tokio::spawn(serve(socket, shared.clone()));
            }
        });
        Ok(FaultyReceiver { port, state })
    }

    fn kill_for(&self, how_long: Duration) {
        self.state.lock().unwrap().down_until = Some(Instant::now() + how_long);
    }

    pub(crate) fn behave_from_now_on(&self) {
        let mut s = self.state.lock().unwrap();
        s.well_behaved = true;
        s.down_until = None;
    }

    /// Holds every request this long before answering, so that concurrent deliveries overlap.
    pub(crate) fn hold_each_for(&self, how_long: Duration) {
        self.state.lock().unwrap().hold = how_long;
    }

    /// The most requests the receiver was handling at one time.
    pub(crate) fn max_in_flight(&self) -> usize {
        self.state.lock().unwrap().max_in_flight
    }

    pub(crate) fn acked(&self) -> Vec<(String, Instant)> {
        self.state.lock().unwrap().acked.clone()
    }

    pub(crate) fn deliveries(&self) -> Vec<Delivery> {
        self.state.lock().unwrap().deliveries.clone()
    }

    /// Adds what it received and acked to the webhook consumer's history.
    pub(crate) fn record_into(&self, h: &mut History) {
        for (body, received) in self.acked() {
            h.acked_at.entry(body.clone()).or_insert(received);
            h.ack_attempted.insert(body);
        }
        h.deliveries.extend(self.deliveries());
    }
}

async fn serve(mut socket: tokio::net::TcpStream, state: Arc<Mutex<ReceiverState>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let body = loop {
        let Ok(n) = socket.read(&mut chunk).await else { return };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
            .unwrap_or(0);
        if buf.len() >= end + 4 + length {
            break buf[end + 4..end + 4 + length].to_vec();
        }
    };
    let (received, received_wall_ms) = (Instant::now(), wall_ms());
    let payload: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let pull = PULLS.fetch_add(1, Ordering::Relaxed);
    let messages = payload["messages"].as_array().cloned().unwrap_or_default();
    let (well_behaved, hold) = {
        let mut s = state.lock().unwrap();
        s.in_flight += 1;
        s.max_in_flight = s.max_in_flight.max(s.in_flight);
        for m in &messages {
            s.deliveries.push(Delivery {
                body: m["body"].as_str().unwrap_or_default().to_owned(),
                attempts: m["attempts"].as_i64().unwrap_or_default(),
                timestamp_ms: m["timestamp_ms"].as_i64().unwrap_or_default(),
                asked: received,
                received,
                received_wall_ms,
                pull,
                ordering_key: ordering_key(m),
            });
        }
        (s.well_behaved, s.hold)
    };
    let _in_flight = InFlight(state.clone());
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
    let roll: u32 = if well_behaved { 99 } else { rand::thread_rng().gen_range(0..100) };
    let answer: &[u8] = match roll {
        0..=9 => b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        10..=14 => {
            tokio::time::sleep(Duration::from_millis(WEBHOOK_TIMEOUT_MS + 500)).await;
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        }
        15..=19 => {
            // Close with a reset (RST) rather than an orderly shutdown.
            if let Ok(std_socket) = socket.into_std() {
                let _ = socket2::SockRef::from(&std_socket).set_linger(Some(Duration::ZERO));
            }
            return;
        }
        20..=24 => b"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:1/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        _ => b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    };
    if socket.write_all(answer).await.is_ok() && answer.starts_with(b"HTTP/1.1 200") && roll > 14 {
        let answered = Instant::now();
        let mut s = state.lock().unwrap();
        for m in &messages {
            s.acked.push((m["body"].as_str().unwrap_or_default().to_owned(), answered));
        }
    }
}
