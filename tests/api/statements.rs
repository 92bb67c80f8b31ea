//! The statements the HTTP tests do not reach, each run here: the operator's token commands (accounts'
//! tokens and operator tokens), the vacuum, the refresh of a queue's oldest message time, and the
//! release of a batch's leases. With the
//! rest of the suite, every statement in `src/store/` is run by some test (docs/testing.md says how
//! that was checked).

use serde_json::{json, Value};
use skiplock::engine::maintenance::{MessageTable, TableVacuum};
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app};

async fn skiplock(pool: &PgPool, args: &[&str]) -> (bool, String) {
    let options = pool.connect_options();
    let url = format!(
        "postgres://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("postgres")
    );
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_skiplock"))
        .args(args)
        .env("DATABASE_URL", url)
        .output()
        .await
        .expect("the skiplock binary runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

#[sqlx::test]
async fn the_operators_token_commands_create_and_revoke_a_token(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let account = app.account.to_string();
    let (ok, out) = skiplock(&pool, &["token", "create", "--account", &account, "--name", "ops"]).await;
    assert!(ok, "{out}");
    let created: Value = serde_json::from_str(out.lines().next().unwrap()).expect("token create prints JSON");
    let token = created["token"].as_str().unwrap();
    let verify = format!("{}/client/v4/user/tokens/verify", app.address);
    app.raw(reqwest::Method::GET, &verify, Some(token), None).await.expect_ok();
    let (ok, out) = skiplock(&pool, &["token", "revoke", created["token_id"].as_str().unwrap()]).await;
    assert!(ok, "{out}");
    let (ok, out) = skiplock(&pool, &["token", "create", "--account", &"0".repeat(32), "--name", "x"]).await;
    assert!(!ok && out.contains("no account"), "{out}");
}

#[sqlx::test]
async fn the_operator_token_commands_make_a_token_for_the_operator_api_and_revoke_it(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (ok, out) = skiplock(&pool, &["operator", "token", "create", "--name", "ops", "--scopes", "read"]).await;
    assert!(ok, "{out}");
    let created: Value = serde_json::from_str(out.lines().next().unwrap()).expect("token create prints JSON");
    let token = created["token"].as_str().unwrap();
    assert!(token.starts_with("sko_"), "{token}");
    let accounts = format!("{}/admin/v1/accounts", app.admin_address);
    app.raw(reqwest::Method::GET, &accounts, Some(token), None).await.expect_ok();
    let (ok, out) = skiplock(&pool, &["operator", "token", "revoke", created["token_id"].as_str().unwrap()]).await;
    assert!(ok, "{out}");
    let fresh = skiplock::auth::Verifier::<skiplock::auth::OperatorTokens>::new(pool.clone());
    assert!(fresh.verify(token).await.unwrap().is_none(), "a revoked operator token is refused");
    let (ok, out) = skiplock(&pool, &["operator", "token", "create", "--name", "x", "--scopes", "root"]).await;
    assert!(!ok && out.contains("read or write"), "{out}");
}

#[sqlx::test]
async fn a_vacuum_runs_when_due_and_the_oldest_time_is_recomputed(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b"]).await;
    let got = app.pull(&q, json!({"batch_size": 1})).await;
    app.ack(&q, &[lease(&got[0])], json!([])).await;
    // The acked message was the oldest: the count's oldest time is no longer exact until refreshed.
    skiplock::store::counts::fold(&pool).await.unwrap();
    let exact: bool =
        sqlx::query_scalar("select bool_and(oldest_exact) from queue_counts").fetch_one(&pool).await.unwrap();
    assert!(!exact, "acking the oldest message leaves the oldest time to be recomputed");
    let stale: Vec<uuid::Uuid> =
        skiplock::store::counts::refresh_oldest(&pool).await.unwrap().into_iter().map(|q| q.0).collect();
    assert!(stale.is_empty(), "nothing is past its retention: {stale:?}");
    let exact: bool =
        sqlx::query_scalar("select bool_and(oldest_exact) from queue_counts").fetch_one(&pool).await.unwrap();
    assert!(exact);
    let vacuum = TableVacuum::new(MessageTable::Messages);
    assert!(vacuum.run_if_due(&pool, 0).await.unwrap(), "a table with no dead-row floor is always due");
}

#[sqlx::test]
async fn released_leases_make_their_messages_deliverable_at_once(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a"]).await;
    let got = app.pull(&q, json!({"visibility_timeout_ms": 600_000})).await;
    let id: skiplock::ids::MessageId = got[0]["id"].as_str().unwrap().parse().unwrap();
    let owners = skiplock::store::owned::Owners::default();
    let queue = owners.resolve(&pool, app.account, q.parse().unwrap()).await.unwrap().expect("the account's queue");
    let attempts = got[0]["attempts"].as_i64().unwrap() as i32;
    assert_eq!(skiplock::store::messages::release(&pool, queue, &[(id, attempts)]).await.unwrap(), 1);
    let again = app.pull(&q, json!({})).await;
    assert_eq!(again.len(), 1, "released, it is delivered again without waiting out its lease");
}

/// A message table that has doubled since its statistics were gathered is analyzed by the node, so
/// that statements planned while it was small (a seq scan of a few pages) are planned again.
#[sqlx::test]
async fn a_message_table_that_grew_is_analyzed_and_its_statements_planned_again(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("bulk", json!({})).await;
    let analyzed = || async {
        let count: i64 = sqlx::query_scalar(
            "select sum(analyze_count)::int8 from pg_stat_user_tables
                 where relname in ('message_bodies_0', 'message_bodies_1', 'message_bodies_old')",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        count
    };
    assert_eq!(analyzed().await, 0);
    let body = "x".repeat(1000);
    for _ in 0..5 {
        let messages: Vec<_> = (0..100).map(|_| json!({"body": body, "content_type": "text"})).collect();
        app.post(&format!("queues/{q}/messages/batch"), json!({ "messages": messages })).await.expect_ok();
    }
    // 500 bodies of 1 KB fill some 70 pages, more than twice the none the statistics knew of.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while analyzed().await == 0 {
        assert!(std::time::Instant::now() < deadline, "the grown table was not analyzed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let pages: i32 = sqlx::query_scalar(
        "select max(relpages) from pg_class where relname in ('message_bodies_0', 'message_bodies_1', 'message_bodies_old')",
    )
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(pages >= 32, "the statistics know the table's size now: {pages} pages");
    // Until it doubles again, it is left alone.
    assert!(skiplock::engine::maintenance::refresh_statistics(&pool).await.unwrap().is_empty());
}
