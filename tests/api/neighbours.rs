//! Accounts on one node do not hold each other up: a publish of an account with nothing in flight is
//! stored while another account's publish statement is still running.

use std::time::Duration;

use serde_json::json;
use skiplock::auth::Scope;
use sqlx::PgPool;

use crate::helpers::{new_account, spawn_app, wait_until_some, TestApp};

#[sqlx::test]
async fn a_quiet_accounts_publish_does_not_wait_for_a_busy_accounts_statement(pool: PgPool) {
    let busy = spawn_app(pool.clone()).await;
    let busy_queue = busy.pull_queue("busy", json!({})).await;
    let (account, token) = new_account(&pool, "quiet", &Scope::ALL).await;
    let quiet = TestApp::remote(pool.clone(), busy.address.clone(), account, token);
    let quiet_queue = quiet.pull_queue("quiet", json!({})).await;

    // A transaction holding the busy publish's idempotency key, uncommitted, keeps its statement running.
    let mut holder = pool.begin().await.unwrap();
    sqlx::query(
        "insert into idempotency_keys (queue_id, key, expires_at) values ($1::uuid, 'k', now() + interval '1 hour')",
    )
    .bind(&busy_queue)
    .execute(&mut *holder)
    .await
    .unwrap();
    let publisher = TestApp::remote(pool.clone(), busy.address.clone(), busy.account, busy.token.clone());
    let (queue, message) =
        (busy_queue.clone(), json!({"body": "busy", "content_type": "text", "idempotency_key": "k"}));
    let held = tokio::spawn(async move { publisher.post(&format!("queues/{queue}/messages"), message).await });
    let waiting = "select count(*) from pg_stat_activity
                   where datname = current_database() and wait_event_type = 'Lock' and query like '%idempotency_keys%'";
    wait_until_some(&pool, waiting, "the busy account's publish never reached its lock wait").await;

    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        quiet.post(&format!("queues/{quiet_queue}/messages"), json!({"body": "quiet", "content_type": "text"})),
    )
    .await
    .expect("the quiet account's publish was answered while the busy account's statement ran");
    answer.expect_ok();
    assert_eq!(quiet.backlog(&quiet_queue).await, 1);
    assert!(!held.is_finished(), "the busy publish was still waiting on the held key");

    // The held key's transaction ends without committing: the busy publish stores its message.
    holder.rollback().await.unwrap();
    let answer = held.await.unwrap();
    assert_eq!(answer.expect_ok()["metadata"]["duplicates"], 0);
    assert_eq!(busy.backlog(&busy_queue).await, 1);
}
