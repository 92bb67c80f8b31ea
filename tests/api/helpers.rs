//! Test harness: the real app on a real PostgreSQL database (fresh per test), driven over HTTP.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use skiplock::auth::Scope;
use skiplock::ids::AccountId;
use skiplock::startup::{Node, Role};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

pub struct TestApp {
    pub address: String,
    /// Where the node serves the operator API (empty for a remote node).
    pub admin_address: String,
    pub pool: PgPool,
    pub account: AccountId,
    pub token: String,
    pub metrics: std::sync::Arc<skiplock::metrics::Metrics>,
    /// The node's wake-ups: what it knows of the queues long polls wait on.
    pub wakeups: std::sync::Arc<skiplock::engine::wakeups::Wakeups>,
    /// Where the node serves `/metrics` (empty for a remote node).
    pub metrics_address: String,
    client: reqwest::Client,
    stop: CancellationToken,
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl Resp {
    pub fn result(&self) -> &Value {
        &self.body["result"]
    }

    /// Asserts a failure in the Cloudflare envelope with this status, and returns its message.
    #[track_caller]
    pub fn expect_error(&self, status: u16) -> String {
        assert_eq!(self.status, status, "expected {status}, got {} {}", self.status, self.body);
        assert_eq!(self.body["success"], json!(false), "{}", self.body);
        assert!(self.body["result"].is_null(), "{}", self.body);
        let message = self.body["errors"][0]["message"].as_str().expect("an error message").to_owned();
        assert!(!message.is_empty());
        message
    }

    #[track_caller]
    pub fn expect_ok(&self) -> &Value {
        assert_eq!(self.status, 200, "expected 200, got {} {}", self.status, self.body);
        assert_eq!(self.body["success"], json!(true), "{}", self.body);
        self.result()
    }

    pub fn error_code(&self) -> i64 {
        self.body["errors"][0]["code"].as_i64().unwrap_or_default()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub async fn spawn_app(pool: PgPool) -> TestApp {
    spawn_app_with(pool, skiplock::engine::limits::Limits::default()).await
}

pub async fn spawn_app_with(pool: PgPool, limits: skiplock::engine::limits::Limits) -> TestApp {
    let started = start_node(&pool, limits, &[Role::Api]).await;
    let (account, token) = new_account(&pool, "tenant-a", &Scope::ALL).await;
    started.app(pool, account, token)
}

/// An app whose node's settings add `args` (options as on the command line) to the tests' own.
pub async fn spawn_app_with_args(pool: PgPool, args: &[&str]) -> TestApp {
    let started = start_node_with(&pool, skiplock::engine::limits::Limits::default(), &[Role::Api], args).await;
    let (account, token) = new_account(&pool, "tenant-a", &Scope::ALL).await;
    started.app(pool, account, token)
}

/// An app whose node also runs the webhook dispatcher, as `skiplock` does by default.
pub async fn spawn_app_dispatching(pool: PgPool) -> TestApp {
    let started = start_node(&pool, skiplock::engine::limits::Limits::default(), &[Role::Api, Role::Dispatcher]).await;
    let (account, token) = new_account(&pool, "tenant-a", &Scope::ALL).await;
    started.app(pool, account, token)
}

/// A node started by `start_node`.
struct Started {
    address: String,
    admin_address: String,
    metrics: std::sync::Arc<skiplock::metrics::Metrics>,
    wakeups: std::sync::Arc<skiplock::engine::wakeups::Wakeups>,
    metrics_address: String,
    stop: CancellationToken,
}

impl Started {
    /// The app that drives this node as `account`.
    fn app(self, pool: PgPool, account: AccountId, token: String) -> TestApp {
        let Started { address, admin_address, metrics, wakeups, metrics_address, stop } = self;
        TestApp {
            address,
            admin_address,
            pool,
            account,
            token,
            metrics,
            wakeups,
            metrics_address,
            client: reqwest::Client::new(),
            stop,
        }
    }
}

/// A node with `roles` on the test's database: its addresses, metrics and stop token.
async fn start_node(pool: &PgPool, limits: skiplock::engine::limits::Limits, roles: &[Role]) -> Started {
    start_node_with(pool, limits, roles, &[]).await
}

/// `start_node` with the settings `args` added.
async fn start_node_with(
    pool: &PgPool,
    limits: skiplock::engine::limits::Limits,
    roles: &[Role],
    args: &[&str],
) -> Started {
    // The node gets a pool of its own, built as the service builds it. The test's pool reaps idle
    // connections every second, and sqlx 0.8's reaper can spin forever once threads race on its idle
    // count (launchbadge/sqlx#3645): it hung a test here. The test's own pool stays on the test's thread.
    let node_pool = skiplock::store::pool::pool_options(10)
        .connect_with((*pool.connect_options()).clone())
        .await
        .expect("the app's pool connects");
    let mut settings = skiplock::config::Settings::from_args(
        [
            "--database-url=postgres://unused-the-pool-is-given",
            "--bind=127.0.0.1:0",
            "--metrics-bind=127.0.0.1:0",
            "--admin-bind=127.0.0.1:0",
            // The dispatcher's receivers in tests listen on loopback.
            "--webhook-allow-cidrs=127.0.0.0/8",
        ]
        .iter()
        .chain(args),
    )
    .expect("test settings are valid");
    settings.limits = limits;
    settings.activity_flush_every = Duration::from_millis(200);
    let stop = CancellationToken::new();
    let node = Node::start(&settings, roles, node_pool, stop.clone()).await.expect("the node starts");
    let address = format!("http://{}", node.api_addr.expect("the node serves the API"));
    let admin_address = format!("http://{}", node.admin_addr.expect("the node serves the operator API"));
    let (metrics, wakeups) = (node.engine.metrics.clone(), node.engine.wakeups.clone());
    let metrics_address = format!("http://{}", node.metrics_addr);
    tokio::spawn(node.wait());
    Started { address, admin_address, metrics, wakeups, metrics_address, stop }
}

/// A fresh account and a token with `scopes`.
pub async fn new_account(pool: &PgPool, name: &str, scopes: &[Scope]) -> (AccountId, String) {
    let account = skiplock::store::accounts::create(pool, name, "default").await.unwrap();
    let (_, token) = skiplock::auth::issue(pool, account, "test", scopes).await.unwrap();
    (account, token)
}

/// Waits until `check` holds, or panics naming `what` at the deadline.
pub async fn wait_until<F, Fut>(what: &str, deadline: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An operator token with `scopes` (`read`, `write`).
pub async fn operator_token(pool: &PgPool, scopes: &[skiplock::auth::OperatorScope]) -> String {
    skiplock::auth::operator::issue_operator(pool, "test operator", scopes).await.unwrap().1
}

impl TestApp {
    /// Drives a node that runs elsewhere (a `skiplock` process) at `address`, as `account`.
    pub fn remote(pool: PgPool, address: String, account: AccountId, token: String) -> TestApp {
        let (metrics, client, stop) = (std::sync::Arc::default(), reqwest::Client::new(), CancellationToken::new());
        let wakeups = std::sync::Arc::new(skiplock::engine::wakeups::Wakeups::new(std::sync::Arc::clone(&metrics)));
        let (admin_address, metrics_address) = (String::new(), String::new());
        TestApp { address, admin_address, pool, account, token, metrics, wakeups, metrics_address, client, stop }
    }

    /// Another node on the same database, serving the same account with the same token.
    pub async fn another_node(&self) -> TestApp {
        let started = start_node(&self.pool, skiplock::engine::limits::Limits::default(), &[Role::Api]).await;
        started.app(self.pool.clone(), self.account, self.token.clone())
    }

    /// Another node on the same database that also runs the webhook dispatcher.
    pub async fn another_dispatching_node(&self) -> TestApp {
        let roles = [Role::Api, Role::Dispatcher];
        let started = start_node(&self.pool, skiplock::engine::limits::Limits::default(), &roles).await;
        started.app(self.pool.clone(), self.account, self.token.clone())
    }

    /// Stops this app's node, as a SIGTERM would.
    pub fn stop_node(&self) {
        self.stop.cancel();
    }

    /// A URL under this app's account: `queues/...`.
    pub fn url(&self, path: &str) -> String {
        format!("{}/client/v4/accounts/{}/{}", self.address, self.account, path)
    }

    pub async fn token_with(&self, scopes: &[Scope]) -> String {
        skiplock::auth::issue(&self.pool, self.account, "scoped", scopes).await.unwrap().1
    }

    pub async fn raw(&self, method: Method, url: &str, token: Option<&str>, body: Option<Vec<u8>>) -> Resp {
        let mut req = self.client.request(method, url);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body);
        }
        let resp = req.send().await.expect("the server answers");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
        Resp { status, body, headers }
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Resp {
        let url = self.url(path);
        self.raw(method, &url, Some(&self.token), body.map(|b| b.to_string().into_bytes())).await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call(Method::GET, path, None).await
    }
    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.call(Method::POST, path, Some(body)).await
    }
    pub async fn put(&self, path: &str, body: Value) -> Resp {
        self.call(Method::PUT, path, Some(body)).await
    }
    pub async fn patch(&self, path: &str, body: Value) -> Resp {
        self.call(Method::PATCH, path, Some(body)).await
    }
    pub async fn delete(&self, path: &str) -> Resp {
        self.call(Method::DELETE, path, None).await
    }

    pub async fn create_queue(&self, name: &str) -> String {
        let resp = self.post("queues", json!({ "queue_name": name })).await;
        resp.expect_ok()["queue_id"].as_str().unwrap().to_owned()
    }

    /// A queue with an http_pull consumer with the given settings; returns the queue id.
    pub async fn pull_queue(&self, name: &str, consumer: Value) -> String {
        let queue = self.create_queue(name).await;
        let mut body = json!({ "type": "http_pull" });
        body.as_object_mut().unwrap().extend(consumer.as_object().unwrap().clone());
        self.post(&format!("queues/{queue}/consumers"), body).await.expect_ok();
        queue
    }

    pub async fn publish(&self, queue: &str, message: Value) {
        self.post(&format!("queues/{queue}/messages"), message).await.expect_ok();
    }

    pub async fn publish_texts(&self, queue: &str, texts: &[&str]) {
        let messages: Vec<Value> = texts.iter().map(|t| json!({"body": t, "content_type": "text"})).collect();
        self.post(&format!("queues/{queue}/messages/batch"), json!({ "messages": messages })).await.expect_ok();
    }

    pub async fn pull(&self, queue: &str, request: Value) -> Vec<Value> {
        let resp = self.post(&format!("queues/{queue}/messages/pull"), request).await;
        resp.expect_ok()["messages"].as_array().unwrap().clone()
    }

    pub async fn ack(&self, queue: &str, acks: &[&str], retries: Value) -> Value {
        let acks: Vec<Value> = acks.iter().map(|l| json!({ "lease_id": l })).collect();
        let resp = self.post(&format!("queues/{queue}/messages/ack"), json!({"acks": acks, "retries": retries})).await;
        resp.expect_ok().clone()
    }

    pub async fn backlog(&self, queue: &str) -> i64 {
        self.get(&format!("queues/{queue}/metrics")).await.expect_ok()["backlog_count"].as_i64().unwrap()
    }

    /// Pulls until some message arrives or the deadline passes.
    pub async fn pull_until_some(&self, queue: &str, request: Value, deadline: Duration) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let got = self.pull(queue, request.clone()).await;
            if !got.is_empty() || start.elapsed() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

pub fn lease(message: &Value) -> &str {
    message["lease_id"].as_str().expect("a lease id")
}

/// The database's clock, which is what delays and leases are measured by.
pub async fn db_now_ms(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select (extract(epoch from clock_timestamp()) * 1000)::int8").fetch_one(pool).await.unwrap()
}

/// Makes the messages matching `condition` (SQL over `messages`) two minutes older, rather than waiting
/// for them to age. The queue counts take a message's publish time when it is stored, so they are
/// folded and marked for the retention sweep to read the oldest times again, as a delete would mark them.
pub async fn age_messages_two_minutes(pool: &PgPool, condition: &str) {
    let aging = format!("update messages set published_at = published_at - interval '2 minutes' where {condition}");
    sqlx::query(&aging).execute(pool).await.unwrap();
    skiplock::store::counts::fold(pool).await.unwrap();
    sqlx::query("update queue_counts set oldest_exact = false").execute(pool).await.unwrap();
}

/// A webhook consumer as created over the API.
pub struct Hook {
    pub queue: String,
    pub consumer: String,
    pub secret: String,
}

impl TestApp {
    /// A queue with a webhook consumer posting to `url`.
    pub async fn webhook_queue(&self, name: &str, url: &str, consumer: Value) -> Hook {
        let queue = self.create_queue(name).await;
        let mut body = json!({ "type": "webhook", "url": url });
        body.as_object_mut().unwrap().extend(consumer.as_object().unwrap().clone());
        let created = self.post(&format!("queues/{queue}/consumers"), body).await;
        let c = created.expect_ok();
        Hook {
            queue,
            consumer: c["consumer_id"].as_str().unwrap().to_owned(),
            secret: c["signing_secret"].as_str().unwrap().to_owned(),
        }
    }
}

/// A dispatcher on the test's database that may reach loopback receivers.
pub async fn dispatcher(pool: &PgPool, timeout: Duration) -> skiplock::dispatch::Dispatcher {
    use skiplock::dispatch::guard::AddressGuard;
    let guard = AddressGuard::new(vec!["127.0.0.0/8".parse().unwrap()]);
    guarded_dispatcher(pool, timeout, guard).await
}

pub async fn guarded_dispatcher(
    pool: &PgPool,
    timeout: Duration,
    guard: skiplock::dispatch::guard::AddressGuard,
) -> skiplock::dispatch::Dispatcher {
    observed_dispatcher(pool, timeout, guard, Default::default()).await
}

/// A dispatcher whose events count in `metrics`.
pub async fn observed_dispatcher(
    pool: &PgPool,
    timeout: Duration,
    guard: skiplock::dispatch::guard::AddressGuard,
    metrics: std::sync::Arc<skiplock::metrics::Metrics>,
) -> skiplock::dispatch::Dispatcher {
    let settings = skiplock::dispatch::DispatchSettings {
        timeout,
        shutdown_grace: Duration::from_millis(200),
        ..Default::default()
    };
    let limits = skiplock::engine::limits::Limits::default();
    let engine = skiplock::engine::Engine::new(pool.clone(), metrics, limits, Default::default())
        .await
        .expect("the engine builds");
    skiplock::startup::dispatcher(&engine, settings, guard)
}

/// The dispatcher's view of a consumer created over the API.
pub async fn webhook_consumer(
    dispatcher: &skiplock::dispatch::Dispatcher,
    hook: &Hook,
) -> skiplock::dispatch::WebhookConsumer {
    let all = dispatcher.consumers().await.unwrap();
    all.into_iter().map(|(c, _)| c).find(|c| c.id.to_string() == hook.consumer).expect("the consumer is active")
}

/// A dispatcher node of its own (its own listener) running its loop, whose periodic read of the
/// consumers never comes within a test, so what it does comes from notifications and its own timers.
pub struct RunningDispatcher {
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

/// Starts a `RunningDispatcher`; returns once it listens.
pub async fn listening_dispatcher(pool: &PgPool, timeout: Duration) -> RunningDispatcher {
    let settings = skiplock::dispatch::DispatchSettings { timeout, ..Default::default() };
    listening_dispatcher_with(pool, settings).await
}

/// A `RunningDispatcher` with these settings, but for the periodic read and the shutdown grace.
pub async fn listening_dispatcher_with(
    pool: &PgPool,
    settings: skiplock::dispatch::DispatchSettings,
) -> RunningDispatcher {
    let settings = skiplock::dispatch::DispatchSettings {
        refresh_every: Duration::from_secs(120),
        shutdown_grace: Duration::from_millis(200),
        ..settings
    };
    let guard = skiplock::dispatch::guard::AddressGuard::new(vec!["127.0.0.0/8".parse().unwrap()]);
    let limits = skiplock::engine::limits::Limits::default();
    let engine = skiplock::engine::Engine::new(pool.clone(), std::sync::Arc::default(), limits, Default::default())
        .await
        .unwrap();
    let dispatcher = std::sync::Arc::new(skiplock::startup::dispatcher(&engine, settings, guard));
    let stop = CancellationToken::new();
    let handle = tokio::spawn(skiplock::dispatch::run(dispatcher, stop.clone()));
    let listening = "select count(*) from pg_stat_activity where query like 'LISTEN%skiplock_changes%'";
    wait_until_some(pool, listening, "the dispatcher did not LISTEN").await;
    RunningDispatcher { stop, handle }
}

/// Holds the rotation of the message generations as a node turning it would, until the connection is
/// dropped: a test of one generation's tables sees no other generation become current.
pub async fn hold_the_rotation(pool: &PgPool) -> sqlx::pool::PoolConnection<sqlx::Postgres> {
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("select pg_advisory_lock(hashtext($1))")
        .bind(skiplock::store::generations::ROTATION_LOCK)
        .execute(&mut *conn)
        .await
        .unwrap();
    conn
}

/// Waits, up to 15 s, until `count` (a query of one count) finds some; else fails with `never`.
pub async fn wait_until_some(pool: &PgPool, count: &str, never: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let found: i64 = sqlx::query_scalar(count).fetch_one(pool).await.unwrap();
        if found > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{never}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

impl RunningDispatcher {
    pub async fn stop(self) {
        self.stop.cancel();
        self.handle.await.unwrap();
    }
}
