//! A database that turns read-only under the service (a primary demoted to a standby in a failover):
//! requests fail with a retryable 503 and nothing half-applied, `/readyz` is 503, a connection that
//! reports read-only is discarded, and the service recovers by itself when writes are accepted again.

use std::time::{Duration, Instant};

use serde_json::json;
use skiplock::auth::Scope;
use skiplock::testkit::TempCluster;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::helpers::new_account;

async fn set_read_only(admin: &PgPool, on: bool) {
    let value = if on { "on" } else { "off" };
    // Two statements sent apart: ALTER SYSTEM refuses to share a transaction.
    sqlx::raw_sql(&format!("alter system set default_transaction_read_only = {value}")).execute(admin).await.unwrap();
    sqlx::query("select pg_reload_conf()").execute(admin).await.unwrap();
}

async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(Instant::now() < deadline, "waited 20 s for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_database_turned_read_only_answers_503_and_the_service_recovers_by_itself() {
    let cluster = TempCluster::create();
    let url = cluster.url("postgres");
    let admin = PgPool::connect(&url).await.unwrap();
    skiplock::store::pool::MIGRATOR.run(&admin).await.unwrap();
    let (account, token) = new_account(&admin, "failover", &Scope::ALL).await;
    let pool = skiplock::store::pool::pool_options(4).connect(&url).await.unwrap();
    let settings = skiplock::config::Settings::from_args([
        format!("--database-url={url}"),
        "--bind=127.0.0.1:0".into(),
        "--metrics-bind=127.0.0.1:0".into(),
        "--admin-bind=127.0.0.1:0".into(),
    ])
    .unwrap();
    let stop = CancellationToken::new();
    let node =
        skiplock::startup::Node::start(&settings, &[skiplock::startup::Role::Api], pool, stop.clone()).await.unwrap();
    let base = format!("http://{}", node.api_addr.unwrap());
    tokio::spawn(node.wait());
    let client = reqwest::Client::new();
    let api = |path: &str| format!("{base}/client/v4/accounts/{account}/{path}");
    let created: serde_json::Value = client
        .post(api("queues"))
        .bearer_auth(&token)
        .json(&json!({"queue_name": "orders"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let queue = created["result"]["queue_id"].as_str().unwrap().to_owned();
    let publish =
        || client.post(api(&format!("queues/{queue}/messages"))).bearer_auth(&token).json(&json!({"body": 1}));
    let ready = || client.get(format!("{base}/readyz"));
    assert_eq!(publish().send().await.unwrap().status(), 200);

    set_read_only(&admin, true).await;
    wait_for("/readyz to answer 503", async || ready().send().await.unwrap().status() == 503).await;
    let refused = publish().send().await.unwrap();
    assert_eq!(refused.status(), 503, "a write to a read-only database is a retryable 503");
    assert!(refused.headers().get("x-should-retry").is_none(), "a retry can help");
    assert_eq!(refused.headers()["retry-after"], "1");
    let stored: i64 = sqlx::query_scalar("select count(*) from messages").fetch_one(&admin).await.unwrap();
    assert_eq!(stored, 1, "nothing of the refused publish was applied");

    set_read_only(&admin, false).await;
    wait_for("/readyz to answer 200 again", async || ready().send().await.unwrap().status() == 200).await;
    wait_for("publishes to succeed again", async || publish().send().await.unwrap().status() == 200).await;
    stop.cancel();
}
