//! Deleting an account: refused at once, its data removed in the background while its neighbours keep
//! theirs, a deletion a stopped node left finished by another, and a second delete harmless.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use skiplock::auth::OperatorScope;
use skiplock::ids::AccountId;
use sqlx::PgPool;

use crate::helpers::{spawn_app, wait_until, TestApp};
use crate::operator::Operator;

/// An account of the operator's with `queues` pull queues of `per_queue` messages each, a second
/// consumer's worth of settings, idempotency keys and activity: as the tenant left it.
async fn busy_account(app: &TestApp, operator: &Operator<'_>, queues: usize, per_queue: usize) -> TestApp {
    let (id, token) = operator.create_account("departing").await;
    let tenant = TestApp::remote(app.pool.clone(), app.address.clone(), id.parse::<AccountId>().unwrap(), token);
    for q in 0..queues {
        let queue = tenant.pull_queue(&format!("q{q}"), json!({})).await;
        for batch in 0..per_queue.div_ceil(100) {
            let n = (per_queue - batch * 100).min(100);
            let messages: Vec<Value> =
                (0..n).map(|i| json!({"body": format!("m{i}"), "idempotency_key": format!("{batch}-{i}")})).collect();
            tenant.post(&format!("queues/{queue}/messages/batch"), json!({ "messages": messages })).await.expect_ok();
        }
    }
    tenant
}

async fn count(pool: &PgPool, sql: &str, account: AccountId) -> i64 {
    sqlx::query_scalar(sql).bind(account).fetch_one(pool).await.unwrap()
}

/// Every row the account had, table by table.
async fn rows_left(pool: &PgPool, account: AccountId) -> Vec<(&'static str, i64)> {
    let of_queues = "(select id from queues where account_id = $1)";
    let mut left = Vec::new();
    for (table, sql) in [
        ("queues", "select count(*) from queues where account_id = $1".to_owned()),
        ("consumers", "select count(*) from consumers where account_id = $1".to_owned()),
        ("api_tokens", "select count(*) from api_tokens where account_id = $1".to_owned()),
        ("redrive_tasks", "select count(*) from redrive_tasks where account_id = $1".to_owned()),
        ("messages", format!("select count(*) from messages where queue_id in {of_queues}")),
        ("queue_activity", format!("select count(*) from queue_activity where queue_id in {of_queues}")),
    ] {
        left.push((table, count(pool, &sql, account).await));
    }
    left
}

/// Messages, bodies and idempotency keys in the whole database.
async fn stored(pool: &PgPool) -> (i64, i64, i64) {
    sqlx::query_as(
        "select (select count(*) from messages), (select count(*) from message_bodies),
                (select count(*) from idempotency_keys)",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn a_deleted_account_is_refused_at_once_and_its_data_removed_while_its_neighbour_keeps_its_own(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let operator = Operator::new(&app, &OperatorScope::ALL).await;
    let tenant = busy_account(&app, &operator, 20, 250).await;
    let (messages, bodies, keys) = stored(&pool).await;
    assert_eq!((messages, bodies, keys), (5_000, 5_000, 5_000));
    let mine = app.pull_queue("neighbour", json!({})).await;
    app.publish_texts(&mine, &["kept"; 100]).await;
    let victim = tenant.account.to_string();

    let started = operator.call(Method::DELETE, &format!("accounts/{victim}"), None).await;
    let status = started.expect_ok()["status"].as_str().unwrap().to_owned();
    assert!(["deleting", "deleted"].contains(&status.as_str()), "{}", started.body);
    let refused = tenant.get("queues").await.expect_error(401);
    assert!(refused.contains("deleted") || refused.contains("invalid"), "{refused}");

    wait_until("the account's data is deleted", Duration::from_secs(60), || async {
        operator.call(Method::GET, &format!("accounts/{victim}/deletion"), None).await.expect_ok()["status"]
            == "deleted"
    })
    .await;
    let done = operator.call(Method::GET, &format!("accounts/{victim}/deletion"), None).await;
    let done = done.expect_ok();
    assert_eq!((done["deleted_queues"].as_i64(), done["deleted_messages"].as_i64()), (Some(20), Some(5_000)));
    assert_eq!((done["remaining_queues"].as_i64(), done["remaining_messages"].as_i64()), (Some(0), Some(0)));
    assert!(done["finished_on"].is_string());
    assert!(
        rows_left(&pool, tenant.account).await.iter().all(|(_, n)| *n == 0),
        "{:?}",
        rows_left(&pool, tenant.account).await
    );
    let (messages, bodies, keys) = stored(&pool).await;
    assert_eq!((messages, bodies, keys), (100, 100, 0), "only the neighbour's messages are left");
    assert_eq!(app.backlog(&mine).await, 100);
    assert_eq!(app.pull(&mine, json!({"batch_size": 100})).await.len(), 100);

    // A second delete is harmless and says where it stands; a deleted account is not suspended, resumed,
    // or given a token again; it stays listed as deleted.
    let again = operator.call(Method::DELETE, &format!("accounts/{victim}"), None).await;
    assert_eq!(again.expect_ok()["deleted_messages"], json!(5_000));
    for path in [format!("accounts/{victim}/suspend"), format!("accounts/{victim}/resume")] {
        let message = operator.call(Method::POST, &path, Some(json!({}))).await.expect_error(409);
        assert!(message.contains("deleted"), "{message}");
    }
    let token = json!({"name": "back", "scopes": ["queues_read"]});
    operator.call(Method::POST, &format!("accounts/{victim}/tokens"), Some(token)).await.expect_error(409);
    let listed = operator.call(Method::GET, "accounts?status=deleted", None).await;
    let ids: Vec<&str> = listed.expect_ok().as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [victim.as_str()]);
    // An account not being deleted has no deletion to show; an unknown one is a 404 either way.
    let message =
        operator.call(Method::GET, &format!("accounts/{}/deletion", app.account), None).await.expect_error(404);
    assert!(message.contains("not being deleted"), "{message}");
    operator.call(Method::DELETE, &format!("accounts/{}", "0".repeat(32)), None).await.expect_error(404);
}

/// A node that held a deletion and stopped leaves it half done; once its hold runs out another node takes
/// it over and finishes it.
#[sqlx::test]
async fn a_deletion_a_stopped_node_left_is_finished_by_another(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let operator = Operator::new(&app, &OperatorScope::ALL).await;
    let tenant = busy_account(&app, &operator, 3, 1_500).await;
    // The stopped node's part: deletion started and held by it, one batch of a queue's messages gone.
    sqlx::query(
        "update accounts set status = 'deleting', deletion_started_at = now(),
                deletion_held_until = now() + interval '1 hour' where id = $1",
    )
    .bind(tenant.account)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("delete from api_tokens where account_id = $1").bind(tenant.account).execute(&pool).await.unwrap();
    let queue = skiplock::store::deletion::next_queue(&pool, tenant.account).await.unwrap().unwrap();
    let owners = skiplock::store::owned::Owners::default();
    let owned = owners.resolve(&pool, tenant.account, queue).await.unwrap().unwrap();
    assert_eq!(skiplock::store::messages::delete_some(&pool, owned, 1_000).await.unwrap(), 1_000);
    let deletion = format!("accounts/{}/deletion", tenant.account);
    let held = operator.call(Method::GET, &deletion, None).await;
    assert_eq!(held.expect_ok()["remaining_messages"], json!(3_500));
    assert_eq!(held.result()["status"], json!("deleting"));

    // The hold runs out: the app's node takes the deletion over.
    sqlx::query("update accounts set deletion_held_until = now() - interval '1 second' where id = $1")
        .bind(tenant.account)
        .execute(&pool)
        .await
        .unwrap();
    wait_until("another node finishes the deletion", Duration::from_secs(30), || async {
        operator.call(Method::GET, &deletion, None).await.expect_ok()["status"] == "deleted"
    })
    .await;
    assert!(rows_left(&pool, tenant.account).await.iter().all(|(_, n)| *n == 0));
    let done = operator.call(Method::GET, &deletion, None).await;
    assert_eq!(done.expect_ok()["deleted_queues"], json!(3));
}
