//! Running skiplock as an operator does: /metrics checked by promtool and scraped by a real
//! Prometheus, PostgreSQL going away and coming back, and SIGTERM under load.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skiplock::auth::Scope;
use sqlx::PgPool;

use crate::helpers::{new_account, wait_until};
use crate::process::{database_url, free_port, Server};
use skiplock::testkit::TempCluster;

/// A small client for a skiplock process.
#[derive(Clone)]
struct Api {
    base: String,
    token: String,
    client: reqwest::Client,
}

impl Api {
    fn new(address: &str, account: &str, token: &str) -> Api {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
        Api { base: format!("{address}/client/v4/accounts/{account}"), token: token.to_owned(), client }
    }

    async fn post(&self, path: &str, body: Value) -> Result<(u16, Value), reqwest::Error> {
        let resp =
            self.client.post(format!("{}/{path}", self.base)).bearer_auth(&self.token).json(&body).send().await?;
        let status = resp.status().as_u16();
        Ok((status, resp.json().await.unwrap_or(Value::Null)))
    }
}

#[sqlx::test]
async fn a_real_prometheus_scrapes_the_backlog_and_promtool_accepts_the_metrics(pool: PgPool) {
    let (account, token) = new_account(&pool, "observed", &Scope::ALL).await;
    let metrics_port = free_port();
    let env = [
        ("SKIPLOCK_METRICS_BIND", format!("127.0.0.1:{metrics_port}")),
        ("SKIPLOCK_ADMIN_BIND", "127.0.0.1:0".into()),
        ("SKIPLOCK_QUEUE_GAUGES_EVERY_MS", "300".into()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::start_with(&database_url(&pool), free_port(), &[], &env).await;
    let api = Api::new(&server.address, &account.to_string(), &token);
    let (_, queue) = api.post("queues", json!({"queue_name": "observed"})).await.unwrap();
    let q = queue["result"]["queue_id"].as_str().unwrap().to_owned();
    let messages: Vec<Value> = (0..7).map(|i| json!({"body": i})).collect();
    assert_eq!(api.post(&format!("queues/{q}/messages/batch"), json!({"messages": messages})).await.unwrap().0, 200);

    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let scrape = || async { reqwest::get(&metrics_url).await.unwrap().text().await.unwrap() };
    wait_until("the backlog gauge shows 7", Duration::from_secs(15), || async {
        scrape()
            .await
            .lines()
            .any(|l| l.starts_with("skiplock_queue_backlog_messages{") && l.contains("observed") && l.ends_with(" 7"))
    })
    .await;

    let text = scrape().await;
    let mut promtool = tokio::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool is installed (make test installs the Debian package prometheus)");
    use tokio::io::AsyncWriteExt;
    promtool.stdin.take().unwrap().write_all(text.as_bytes()).await.unwrap();
    let checked = promtool.wait_with_output().await.unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    let dir = std::env::temp_dir().join(format!("skiplock-prom-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: skiplock\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let prometheus_port = free_port();
    let mut prometheus = tokio::process::Command::new("prometheus")
        .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("prometheus is installed (make test installs the Debian package prometheus)");
    let query = format!(
        "http://127.0.0.1:{prometheus_port}/api/v1/query?query=skiplock_queue_backlog_messages%7Bqueue%3D%22observed%22%7D"
    );
    wait_until("Prometheus answers the backlog query with 7", Duration::from_secs(60), || async {
        let Ok(resp) = reqwest::get(&query).await else { return false };
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        body["data"]["result"][0]["value"][1] == "7"
    })
    .await;
    prometheus.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    server.kill().await;
}

#[tokio::test]
async fn losing_postgresql_answers_503_and_everything_recovers_when_it_is_back() {
    let cluster = TempCluster::create();
    let url = cluster.url("postgres");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_skiplock"))
        .args(["account", "create", "--name", "ops"])
        .env("DATABASE_URL", &url)
        .output()
        .await
        .unwrap();
    let created: Value = serde_json::from_slice(&out.stdout).expect("account create prints JSON");
    let server = Server::start(&url, free_port()).await;
    let api = Api::new(&server.address, created["account_id"].as_str().unwrap(), created["token"].as_str().unwrap());
    let (_, queue) = api.post("queues", json!({"queue_name": "resilient"})).await.unwrap();
    let q = queue["result"]["queue_id"].as_str().unwrap().to_owned();
    api.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull"})).await.unwrap();
    assert_eq!(api.post(&format!("queues/{q}/messages"), json!({"body": "before"})).await.unwrap().0, 200);

    cluster.stop_immediately();
    let ready = format!("{}/readyz", server.address);
    wait_until("/readyz fails", Duration::from_secs(15), || async {
        reqwest::get(&ready).await.map(|r| r.status().as_u16() == 503).unwrap_or(false)
    })
    .await;
    let (status, body) = api.post(&format!("queues/{q}/messages"), json!({"body": "during"})).await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["success"], false);
    assert!(body["errors"][0]["message"].as_str().unwrap().contains("database"), "{body}");
    assert!(
        reqwest::get(format!("{}/healthz", server.address)).await.unwrap().status().is_success(),
        "the process lives on"
    );

    cluster.start();
    wait_until("/readyz recovers", Duration::from_secs(30), || async {
        reqwest::get(&ready).await.map(|r| r.status().is_success()).unwrap_or(false)
    })
    .await;
    wait_until("publishing works again", Duration::from_secs(30), || async {
        api.post(&format!("queues/{q}/messages"), json!({"body": "after"}))
            .await
            .map(|(s, _)| s == 200)
            .unwrap_or(false)
    })
    .await;
    let (_, pulled) = api.post(&format!("queues/{q}/messages/pull"), json!({"batch_size": 10})).await.unwrap();
    let bodies: Vec<&str> =
        pulled["result"]["messages"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert!(bodies.len() >= 2, "the message from before the outage and the one after: {bodies:?}");
    server.kill().await;
}

#[sqlx::test]
async fn sigterm_under_load_exits_0_and_loses_no_acknowledged_message(pool: PgPool) {
    let (account, token) = new_account(&pool, "graceful", &Scope::ALL).await;
    let server = Server::start(&database_url(&pool), free_port()).await;
    let api = Api::new(&server.address, &account.to_string(), &token);
    let (_, queue) = api.post("queues", json!({"queue_name": "busy"})).await.unwrap();
    let q = queue["result"]["queue_id"].as_str().unwrap().to_owned();
    api.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull"})).await.unwrap();

    let stored: Arc<Mutex<HashSet<String>>> = Arc::default();
    let acked: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut load = tokio::task::JoinSet::new();
    for producer in 0..3 {
        let (api, q, stored) = (api.clone(), q.clone(), stored.clone());
        load.spawn(async move {
            for batch in 0.. {
                let bodies: Vec<String> = (0..10).map(|i| format!("p{producer}-{batch}-{i}")).collect();
                let messages: Vec<Value> = bodies.iter().map(|b| json!({"body": b, "content_type": "text"})).collect();
                match api.post(&format!("queues/{q}/messages/batch"), json!({"messages": messages})).await {
                    Ok((200, _)) => stored.lock().unwrap().extend(bodies),
                    Ok(_) | Err(_) => return,
                }
            }
        });
    }
    {
        let (api, q, acked) = (api.clone(), q.clone(), acked.clone());
        load.spawn(async move {
            loop {
                let Ok((200, pulled)) = api.post(&format!("queues/{q}/messages/pull"), json!({"batch_size": 50})).await
                else {
                    return;
                };
                let messages = pulled["result"]["messages"].as_array().cloned().unwrap_or_default();
                let leases: Vec<Value> = messages.iter().map(|m| json!({"lease_id": m["lease_id"]})).collect();
                match api.post(&format!("queues/{q}/messages/ack"), json!({"acks": leases})).await {
                    Ok((200, _)) => {
                        acked.lock().unwrap().extend(messages.iter().map(|m| m["body"].as_str().unwrap().to_owned()))
                    }
                    _ => return,
                }
            }
        });
    }
    wait_until("some load has gone through", Duration::from_secs(15), || async { acked.lock().unwrap().len() >= 200 })
        .await;

    let pid = server.child.id().expect("the server runs");
    let mut child = server.child;
    let stopping = Instant::now();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let status =
        tokio::time::timeout(Duration::from_secs(30), child.wait()).await.expect("exits in bounded time").unwrap();
    assert!(status.success(), "exit status {status}");
    assert!(stopping.elapsed() < Duration::from_secs(30));
    while load.join_next().await.is_some() {}

    // Every publish that got a 2xx is acked or still stored, to be delivered again.
    let in_database: HashSet<String> = sqlx::query_scalar("select convert_from(body, 'UTF8') from message_bodies")
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let stored = stored.lock().unwrap().clone();
    let acked = acked.lock().unwrap().clone();
    assert!(stored.len() >= 200);
    let lost: Vec<&String> = stored.iter().filter(|b| !acked.contains(*b) && !in_database.contains(*b)).collect();
    assert!(lost.is_empty(), "lost {} acknowledged publishes, such as {:?}", lost.len(), &lost[..lost.len().min(5)]);
}

/// A rolling upgrade migrates the schema before every node runs the new release; a node of the older
/// release restarted meanwhile must still start (migrating, by default) and serve, rather than refuse the
/// newer migration it does not know (docs/deploy.md, "Upgrading").
#[sqlx::test]
async fn a_node_starts_and_serves_on_a_schema_a_later_release_migrated_further(pool: PgPool) {
    let (account, token) = new_account(&pool, "rolling", &Scope::ALL).await;
    let later = skiplock::store::pool::MIGRATOR.iter().map(|m| m.version).max().unwrap() + 1;
    sqlx::query(
        "insert into _sqlx_migrations (version, description, success, checksum, execution_time)
         values ($1, 'a later release''s expansion', true, '\\x00', 0)",
    )
    .bind(later)
    .execute(&pool)
    .await
    .unwrap();
    let server = Server::start(&database_url(&pool), free_port()).await;
    let resp = reqwest::Client::new()
        .post(format!("{}/client/v4/accounts/{account}/queues", server.address))
        .bearer_auth(&token)
        .json(&json!({"queue_name": "after-the-upgrade"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap_or_default());
    server.kill().await;
}
