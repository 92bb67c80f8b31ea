//! Bench environment: a throwaway database, the skiplock server as a child process, an account.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;
use sqlx::{Connection, PgConnection};
use tokio::process::{Child, Command};

pub struct Env {
    pub admin_url: String,
    pub database: String,
    pub database_url: String,
    pub server: Child,
    pub base: String,
    pub account: String,
    pub token: String,
    pub client: reqwest::Client,
}

pub fn skiplock_binary() -> PathBuf {
    let me = std::env::current_exe().expect("the bench knows where it is");
    me.with_file_name("skiplock")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn with_database(url: &str, name: &str) -> String {
    let (server, query) = url.split_once('?').map_or((url, ""), |(s, q)| (s, q));
    let server = server.rsplit_once('/').map_or(server, |(s, _)| s);
    if query.is_empty() {
        format!("{server}/{name}")
    } else {
        format!("{server}/{name}?{query}")
    }
}

/// Migrates the database and creates an account; returns its id and a token with every scope.
pub async fn prepare(database_url: &str) -> anyhow::Result<(String, String)> {
    let status = Command::new(skiplock_binary()).arg("migrate").env("DATABASE_URL", database_url).status().await?;
    if !status.success() {
        bail!("skiplock migrate failed");
    }
    create_account(database_url, "bench").await
}

/// Creates an account named `name`; returns its id and a token with every scope.
pub async fn create_account(database_url: &str, name: &str) -> anyhow::Result<(String, String)> {
    let out = Command::new(skiplock_binary())
        .args(["account", "create", "--name", name])
        .env("DATABASE_URL", database_url)
        .output()
        .await?;
    let created: Value = serde_json::from_slice(&out.stdout).context("account create output")?;
    let field = |key: &str| created[key].as_str().unwrap_or_default().to_owned();
    Ok((field("account_id"), field("token")))
}

/// Starts `skiplock serve --no-migrate` with `args` and `env` on free ports and waits until it answers;
/// returns the process and its base URL.
pub async fn serve(database_url: &str, args: &[&str], env: &[(&str, String)]) -> anyhow::Result<(Child, String)> {
    let (server, base, _) = spawn_server(database_url, args, env)?;
    answers(&format!("{base}/healthz")).await?;
    Ok((server, base))
}

/// Starts a node with the dispatcher role only and waits until its metrics endpoint answers.
pub async fn serve_dispatcher(database_url: &str, env: &[(&str, String)]) -> anyhow::Result<Child> {
    let (server, _, metrics) = spawn_server(database_url, &["--roles", "dispatcher"], env)?;
    answers(&format!("{metrics}/metrics")).await?;
    Ok(server)
}

/// The server process, its API's base URL and its metrics' base URL.
fn spawn_server(database_url: &str, args: &[&str], env: &[(&str, String)]) -> anyhow::Result<(Child, String, String)> {
    let (port, metrics_port) = (free_port(), free_port());
    let server = Command::new(skiplock_binary())
        .args(["serve", "--no-migrate"])
        .args(args)
        .env("DATABASE_URL", database_url)
        .env("SKIPLOCK_BIND", format!("127.0.0.1:{port}"))
        .env("SKIPLOCK_METRICS_BIND", format!("127.0.0.1:{metrics_port}"))
        .env("SKIPLOCK_ADMIN_BIND", "127.0.0.1:0")
        .env("SKIPLOCK_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    Ok((server, format!("http://127.0.0.1:{port}"), format!("http://127.0.0.1:{metrics_port}")))
}

/// Waits until `url` answers, up to 30 s.
async fn answers(url: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while reqwest::get(url).await.is_err() {
        if Instant::now() > deadline {
            bail!("skiplock did not start ({url} did not answer)");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

impl Env {
    /// Brings the database to the same state before each measured phase: the dead rows of the phase
    /// before vacuumed and its WAL checkpointed, so that a phase does not pay for the one before it.
    pub async fn settle(&self) -> anyhow::Result<()> {
        let mut db = PgConnection::connect(&self.database_url).await?;
        for statement in ["vacuum messages, message_bodies", "checkpoint"] {
            sqlx::query(statement).execute(&mut db).await.with_context(|| format!("running {statement}"))?;
        }
        Ok(())
    }

    /// A fresh database, migrated, with a running server (all roles) and an account.
    pub async fn start(extra_env: &[(&str, String)]) -> anyhow::Result<Env> {
        let admin_url = std::env::var("DATABASE_URL").context("DATABASE_URL must be set (make latency sets it)")?;
        let database = format!("skiplock_bench_{}", std::process::id());
        let mut admin = PgConnection::connect(&admin_url).await.context("connecting to DATABASE_URL")?;
        sqlx::query(&format!("create database {database}")).execute(&mut admin).await?;
        let database_url = with_database(&admin_url, &database);
        let (account, token) = prepare(&database_url).await?;
        let (server, base) = serve(&database_url, &[], extra_env).await?;
        let client = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
        Ok(Env { admin_url, database, database_url, server, base, account, token, client })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}/client/v4/accounts/{}/{}", self.base, self.account, path)
    }

    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let resp = self.client.post(self.url(path)).bearer_auth(&self.token).json(body).send().await?;
        let status = resp.status();
        let body: Value = resp.json().await?;
        if !status.is_success() {
            bail!("POST {path}: {status} {body}");
        }
        Ok(body["result"].clone())
    }

    /// Pauses or resumes delivery from the account's queue `queue`.
    pub async fn set_paused(&self, queue: &str, paused: bool) -> anyhow::Result<()> {
        let settings = serde_json::json!({"settings": {"delivery_paused": paused}});
        let url = self.url(&format!("queues/{queue}"));
        let resp = self.client.patch(url).bearer_auth(&self.token).json(&settings).send().await?;
        if !resp.status().is_success() {
            bail!("pausing queue {queue}: {}", resp.status());
        }
        Ok(())
    }

    /// The PostgreSQL server's postmaster: the parent of a backend of ours.
    pub async fn postmaster_pid(&self) -> anyhow::Result<u32> {
        let mut db = PgConnection::connect(&self.admin_url).await?;
        let backend: i32 = sqlx::query_scalar("select pg_backend_pid()").fetch_one(&mut db).await?;
        crate::cpu::parent_pid(backend as u32).context("PostgreSQL runs on another host: its CPU cannot be read")
    }

    /// Creates queue `name` in `account` (with `token`) and gives it `consumer`; returns the queue's id.
    pub async fn queue_with_consumer(
        &self,
        (account, token): (&str, &str),
        name: &str,
        consumer: Value,
    ) -> anyhow::Result<String> {
        let base = format!("{}/client/v4/accounts/{account}/queues", self.base);
        let post = |url: String, body: Value| async move {
            let resp = self.client.post(url).bearer_auth(token).json(&body).send().await?;
            let (status, body): (_, Value) = (resp.status(), resp.json().await?);
            if !status.is_success() {
                bail!("{status} {body}");
            }
            Ok(body["result"].clone())
        };
        let queue = post(base.clone(), serde_json::json!({"queue_name": name})).await?;
        let id = queue["queue_id"].as_str().context("a queue id")?.to_owned();
        post(format!("{base}/{id}/consumers"), consumer).await?;
        Ok(id)
    }

    /// Stops the server and drops the database.
    pub async fn finish(mut self) -> anyhow::Result<()> {
        self.server.kill().await.ok();
        let mut admin = PgConnection::connect(&self.admin_url).await?;
        sqlx::query(&format!("drop database if exists {} with (force)", self.database)).execute(&mut admin).await?;
        let _ = &self.database_url;
        Ok(())
    }
}

/// Writes a run's figures to `bench/results/<kind>-<UTC time>.json`, with the commit of the checkout the
/// bench was built from (`commit`, "-dirty" when it had changes), so that runs of two builds compared in
/// turn say which was which.
pub fn write_result(kind: &str, result: &Value) -> anyhow::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("{kind}-{}.json", chrono::Utc::now().format("%Y%m%dT%H%M%SZ")));
    let mut result = result.clone();
    if let (Value::Object(fields), Some(commit)) = (&mut result, checkout_commit()) {
        fields.entry("commit").or_insert(Value::String(commit));
    }
    std::fs::write(&file, serde_json::to_string_pretty(&result)?)?;
    eprintln!("wrote {}", file.display());
    Ok(())
}

/// The commit the bench's checkout is at, as `git describe` names it; None away from the checkout.
fn checkout_commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()?;
    let commit = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !commit.is_empty()).then_some(commit)
}

/// The `p`th percentile (0-100) of sorted durations, in milliseconds; 0 when there are none.
pub fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

/// A local webhook receiver on a free loopback port, answering every request with `handler` (which gets
/// `data`); returns its port and the handle that stops it.
pub fn start_receiver<T, F, Args>(
    data: actix_web::web::Data<T>,
    handler: F,
) -> anyhow::Result<(u16, actix_web::dev::ServerHandle)>
where
    T: Send + Sync + 'static,
    F: actix_web::Handler<Args> + Clone + Send + 'static,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    let server = actix_web::HttpServer::new(move || {
        actix_web::App::new().app_data(data.clone()).default_service(actix_web::web::to(handler.clone()))
    })
    .workers(1)
    .disable_signals()
    .bind("127.0.0.1:0")?;
    let port = server.addrs()[0].port();
    let server = server.run();
    let handle = server.handle();
    tokio::spawn(server);
    Ok((port, handle))
}

/// A process's peak resident set so far (`VmHWM`), in MiB; 0 when it cannot be read.
pub fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0.0)))
        .unwrap_or(0.0);
    kib / 1024.0
}
