//! The crash suite: producers and consumers work a queue while the server is killed with SIGKILL at
//! random moments and PostgreSQL is restarted in immediate mode. Every client keeps a history; after a
//! final drain, `check` asserts over it: nothing acknowledged is lost, nothing unexpected appears, no
//! message is under two live leases, nothing is redelivered after a successful ack, attempts never
//! decrease and delays never end early.
//!
//! Two modes: `pull` (HTTP pull consumers acking through the API) and `webhook` (a push consumer whose
//! receiver fails in every way: 500s, hangs, connection resets, redirects, and being down).

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
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
    /// consumer drains more slowly than pullers, so the webhook mode publishes at 1,000/s by default.
    #[arg(long)]
    pub publish_rate: Option<u64>,
}

pub(crate) const VISIBILITY_MS: u64 = 2_000;
const WEBHOOK_TIMEOUT_MS: u64 = 1_000;
pub(crate) const MAX_RETRIES: i64 = 20;

fn wall_ms() -> i64 {
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
}

#[derive(Clone)]
pub(crate) struct Delivery {
    body: String,
    attempts: i64,
    timestamp_ms: i64,
    /// When the pull that returned it was sent, and when its answer arrived (wall clock, ms).
    asked: Instant,
    received: Instant,
    received_wall_ms: i64,
}

struct Cluster {
    pg: TempCluster,
    url: String,
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
                .env("SKIPLOCK_LOG", "error")
                .env("SKIPLOCK_RATE_LIMIT", "0")
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

    async fn kill(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = child.kill().await; // SIGKILL
        }
    }
}

#[derive(Clone)]
pub(crate) struct Client {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
    pub(crate) token: String,
}

impl Client {
    pub(crate) async fn post(&self, path: &str, body: &Value) -> Result<Value, ()> {
        let resp = self.http.post(format!("{}/{path}", self.base)).bearer_auth(&self.token).json(body).send().await;
        match resp {
            Ok(r) if r.status().is_success() => r.json::<Value>().await.map(|v| v["result"].clone()).map_err(|_| ()),
            _ => Err(()),
        }
    }
}

pub async fn run(args: ChaosArgs) -> anyhow::Result<()> {
    let pg = tokio::task::spawn_blocking(TempCluster::create).await?;
    let url = pg.url("postgres");
    let out = Command::new(crate::setup::skiplock_binary())
        .args(["account", "create", "--name", "chaos"])
        .env("DATABASE_URL", &url)
        .output()
        .await?;
    let created: Value = serde_json::from_slice(&out.stdout).context("account create")?;
    let roles = match args.mode {
        Mode::Pull => "api",
        Mode::Webhook => "api,dispatcher",
    };
    let mut cluster = Cluster { pg, url, server: None, port: free_port(), roles };
    cluster.start_server().await?;
    let client = Client {
        http: reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?,
        base: format!(
            "http://127.0.0.1:{}/client/v4/accounts/{}",
            cluster.port,
            created["account_id"].as_str().unwrap_or_default()
        ),
        token: created["token"].as_str().unwrap_or_default().to_owned(),
    };
    let queue =
        client.post("queues", &json!({"queue_name": "chaos"})).await.map_err(|_| anyhow::anyhow!("create queue"))?;
    let queue = queue["queue_id"].as_str().unwrap_or_default().to_owned();
    let dlq_consumer = json!({"type": "http_pull"});
    let receiver = match args.mode {
        Mode::Pull => {
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
    };
    let history: Arc<Mutex<History>> = Arc::default();
    let stop = CancellationToken::new();
    let mut load = tokio::task::JoinSet::new();
    let rate = args.publish_rate.unwrap_or(if args.mode == Mode::Webhook { 1_000 } else { 0 });
    // Each producer publishes batches of 10; spaced so that together they keep `rate`.
    let pause = (rate > 0).then(|| Duration::from_secs_f64(10.0 * args.producers as f64 / rate as f64));
    for p in 0..args.producers {
        load.spawn(produce(client.clone(), queue.clone(), p, history.clone(), stop.clone(), pause));
    }
    if args.mode == Mode::Pull {
        for _ in 0..args.consumers {
            load.spawn(consume(client.clone(), queue.clone(), history.clone(), stop.clone(), VISIBILITY_MS));
        }
    }

    let started = Instant::now();
    let (mut kills, mut pg_restarts) = (0u64, 0u64);
    while started.elapsed() < Duration::from_secs(args.seconds) {
        let wait = rand::thread_rng().gen_range(1..=args.kill_every_ms.max(1));
        tokio::time::sleep(Duration::from_millis(wait)).await;
        cluster.kill().await;
        kills += 1;
        if args.pg_restart_every > 0 && kills % args.pg_restart_every == 0 {
            cluster.pg.stop_immediately();
            cluster.pg.start();
            pg_restarts += 1;
        }
        if let Some(r) = &receiver {
            r.kill_for(Duration::from_millis(rand::thread_rng().gen_range(0..500)));
        }
        cluster.start_server().await?;
    }
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
        if args.mode == Mode::Pull {
            drain_once(&client, &queue, &history, false).await;
        }
        drain_once(&client, &dlq_id, &history, true).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cluster.kill().await;
    if let Some(r) = &receiver {
        let mut h = history.lock().unwrap();
        for (body, received) in r.acked() {
            h.acked_at.entry(body.clone()).or_insert(received);
            h.ack_attempted.insert(body);
        }
        for d in r.deliveries() {
            h.deliveries.push(d);
        }
    }
    let h = history.lock().unwrap();
    let report = check(&h, args.mode, kills, pg_restarts);
    println!("{report}");
    if !report.passed() {
        bail!("the chaos checker found violations");
    }
    Ok(())
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

/// One pull and its acks, recorded. Returns whether anything came.
async fn pull_and_ack(client: &Client, queue: &str, history: &Mutex<History>, visibility: u64, dead: bool) -> bool {
    let asked = Instant::now();
    let Ok(result) = client
        .post(&format!("queues/{queue}/messages/pull"), &json!({"batch_size": 20, "visibility_timeout_ms": visibility}))
        .await
    else {
        tokio::time::sleep(Duration::from_millis(50)).await;
        return false;
    };
    let (received, received_wall_ms) = (Instant::now(), wall_ms());
    let messages = result["messages"].as_array().cloned().unwrap_or_default();
    if messages.is_empty() {
        return false;
    }
    let mut leases = Vec::new();
    {
        let mut h = history.lock().unwrap();
        for m in &messages {
            let body = m["body"].as_str().unwrap_or_default().to_owned();
            leases.push(json!({"lease_id": m["lease_id"]}));
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
            });
        }
    }
    if client.post(&format!("queues/{queue}/messages/ack"), &json!({"acks": leases})).await.is_ok() {
        let answered = Instant::now();
        let mut h = history.lock().unwrap();
        for m in &messages {
            let body = m["body"].as_str().unwrap_or_default().to_owned();
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
    while !stop.is_cancelled() {
        if !pull_and_ack(&client, &queue, &history, visibility, false).await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub(crate) async fn drain_once(client: &Client, queue: &str, history: &Mutex<History>, dead: bool) {
    while pull_and_ack(client, queue, history, 60_000, dead).await {}
}

pub struct Report {
    mode: Mode,
    published_ok: usize,
    published_unknown: usize,
    acked: usize,
    dead_lettered: usize,
    deliveries: usize,
    duplicates: usize,
    kills: u64,
    pg_restarts: u64,
    lost: Vec<String>,
    unexpected: Vec<String>,
    violations: Vec<String>,
}

impl Report {
    pub(crate) fn passed(&self) -> bool {
        self.lost.is_empty() && self.unexpected.is_empty() && self.violations.is_empty()
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "| chaos ({:?}) | published (2xx) | publish answer lost | acked | dead-lettered | deliveries | duplicates after lease expiry | server kills | PostgreSQL restarts | lost | unexpected | violations |", self.mode)?;
        writeln!(f, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")?;
        writeln!(
            f,
            "| result | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
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
        )?;
        for (what, list) in [("lost", &self.lost), ("unexpected", &self.unexpected), ("violation", &self.violations)] {
            for item in list.iter().take(10) {
                writeln!(f, "{what}: {item}")?;
            }
        }
        Ok(())
    }
}

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
    let lease = Duration::from_millis(match mode {
        Mode::Pull => VISIBILITY_MS,
        Mode::Webhook => WEBHOOK_TIMEOUT_MS * 2 + 5_000,
    });
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
            if mode == Mode::Pull {
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
            if mode == Mode::Pull && deliveries.iter().any(|d| d.asked > *acked) {
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
    }
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
