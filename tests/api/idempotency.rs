//! Idempotent publishing: a key the queue holds within its window stores nothing, on every node.

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app, TestApp};

fn text(body: &str, key: &str) -> Value {
    json!({"body": body, "content_type": "text", "idempotency_key": key})
}

async fn publish(app: &TestApp, queue: &str, message: Value) -> Value {
    app.post(&format!("queues/{queue}/messages"), message).await.expect_ok().clone()
}

async fn bodies(app: &TestApp, queue: &str) -> Vec<String> {
    let peeked = app.post(&format!("queues/{queue}/messages/peek"), json!({"batch_size": 100})).await;
    let mut texts: Vec<String> = peeked.expect_ok()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap().to_owned())
        .collect();
    texts.sort();
    texts
}

#[sqlx::test]
async fn a_resent_key_stores_nothing_and_is_reported_as_a_duplicate(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let first = publish(&app, &q, text("first", "order-1")).await;
    assert_eq!(first["metadata"]["duplicates"], 0);
    let again = publish(&app, &q, text("second", "order-1")).await;
    assert_eq!(again["metadata"]["duplicates"], 1);
    assert_eq!(bodies(&app, &q).await, ["first"]);
    // A publisher that sends no keys sees exactly Cloudflare's answer.
    let plain = publish(&app, &q, json!({"body": "plain", "content_type": "text"})).await;
    assert!(plain["metadata"].get("duplicates").is_none(), "{plain}");
}

#[sqlx::test]
async fn duplicates_inside_one_batch_store_the_first_only(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let batch =
        json!({"messages": [text("a", "k1"), text("b", "k2"), text("c", "k1"), {"body": "d", "content_type": "text"}]});
    let answer = app.post(&format!("queues/{q}/messages/batch"), batch).await;
    assert_eq!(answer.expect_ok()["metadata"]["duplicates"], 1);
    assert_eq!(bodies(&app, &q).await, ["a", "b", "d"]);
}

#[sqlx::test]
async fn twenty_concurrent_publishes_of_one_key_store_exactly_one(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    // A second node on the same database: its publishes go through its own group-commit writer.
    let other = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let sends = (0..20).map(|i| {
        let node = if i % 2 == 0 { &app } else { &other };
        let url = format!("{}/client/v4/accounts/{}/queues/{q}/messages", node.address, app.account);
        let body = text(&format!("copy {i}"), "the-one").to_string().into_bytes();
        let token = app.token.clone();
        async move { node.raw(reqwest::Method::POST, &url, Some(&token), Some(body)).await }
    });
    let answers = futures_util::future::join_all(sends).await;
    let duplicates: i64 = answers.iter().map(|a| a.expect_ok()["metadata"]["duplicates"].as_i64().unwrap()).sum();
    assert_eq!(duplicates, 19);
    assert_eq!(bodies(&app, &q).await.len(), 1);
}

#[sqlx::test]
async fn a_key_is_remembered_after_delivery_ack_and_a_restart_but_not_past_its_window(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    publish(&app, &q, text("first", "k")).await;
    let pulled = app.pull(&q, json!({})).await;
    app.ack(&q, &[lease(&pulled[0])], json!([])).await;
    // A node started afterwards (a restart) still knows the key.
    let restarted = spawn_app(pool.clone()).await;
    let url = format!("{}/client/v4/accounts/{}/queues/{q}/messages", restarted.address, app.account);
    let body = text("resent", "k").to_string().into_bytes();
    let resent = restarted.raw(reqwest::Method::POST, &url, Some(&app.token), Some(body)).await;
    assert_eq!(resent.expect_ok()["metadata"]["duplicates"], 1);
    assert!(bodies(&app, &q).await.is_empty());

    // Past the window the key no longer counts, and the maintenance task removes it.
    sqlx::query("update idempotency_keys set expires_at = now() - interval '1 second'").execute(&pool).await.unwrap();
    assert_eq!(skiplock::engine::maintenance::forget_expired_keys(&pool).await.unwrap(), 1);
    assert_eq!(publish(&app, &q, text("later", "k")).await["metadata"]["duplicates"], 0);
    // An expired key that the sweep has not reached yet is replaced as well.
    sqlx::query("update idempotency_keys set expires_at = now() - interval '1 second'").execute(&pool).await.unwrap();
    assert_eq!(publish(&app, &q, text("later still", "k")).await["metadata"]["duplicates"], 0);
    assert_eq!(bodies(&app, &q).await, ["later", "later still"]);
}

#[sqlx::test]
async fn keys_are_per_queue_a_zero_window_turns_them_off_and_a_purge_forgets_them(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.pull_queue("a", json!({})).await;
    let b = app.pull_queue("b", json!({})).await;
    publish(&app, &a, text("in a", "k")).await;
    assert_eq!(publish(&app, &b, text("in b", "k")).await["metadata"]["duplicates"], 0);

    let settings = app.patch(&format!("queues/{b}"), json!({"settings": {"idempotency_window": 0}})).await;
    assert_eq!(settings.expect_ok()["settings"]["idempotency_window"], 0);
    assert_eq!(publish(&app, &b, text("again in b", "k")).await["metadata"]["duplicates"], 0);
    assert_eq!(bodies(&app, &b).await.len(), 2);

    app.post(&format!("queues/{a}/purge"), json!({"delete_messages_permanently": true})).await.expect_ok();
    assert_eq!(publish(&app, &a, text("after the purge", "k")).await["metadata"]["duplicates"], 0);
    assert_eq!(app.get(&format!("queues/{a}")).await.expect_ok()["settings"]["idempotency_window"], 300);
}

#[sqlx::test]
async fn a_bad_key_is_a_400_naming_the_message_and_nothing_of_the_request_is_stored(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    for (key, why) in [("", "empty"), ("has space", "space"), ("é", "not ASCII"), (&*"k".repeat(129), "too long")] {
        let batch = json!({"messages": [text("ok", "fine"), text("bad", key)]});
        let message = app.post(&format!("queues/{q}/messages/batch"), batch).await.expect_error(400);
        assert!(message.contains("messages[1].idempotency_key"), "{why}: {message}");
    }
    let message =
        app.post(&format!("queues/{q}/messages"), json!({"body": 1, "idempotency_key": 7})).await.expect_error(400);
    assert!(message.contains("idempotency_key"), "{message}");
    assert!(bodies(&app, &q).await.is_empty());
    // The key "fine" was never remembered either.
    assert_eq!(publish(&app, &q, text("now", "fine")).await["metadata"]["duplicates"], 0);
}

#[sqlx::test]
async fn a_dead_lettered_message_keeps_its_key_in_its_source_queue(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({"dead_letter_queue": "dlq", "settings": {"max_retries": 0}})).await;
    publish(&app, &q, text("poison", "k")).await;
    let pulled = app.pull(&q, json!({})).await;
    app.ack(&q, &[], json!([{"lease_id": lease(&pulled[0])}])).await;
    let dlq = app.get("queues?name=dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    assert_eq!(bodies(&app, &dlq).await, ["poison"]);
    assert_eq!(publish(&app, &q, text("resent", "k")).await["metadata"]["duplicates"], 1);
    assert!(bodies(&app, &q).await.is_empty());
}

#[sqlx::test]
async fn a_batch_of_new_keys_and_a_held_one_stores_each_new_one_once(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    publish(&app, &q, text("held", "k2")).await;
    // The held key sorts between the new ones, so a first try that stopped at it had inserted one.
    let batch = json!({"messages": [text("new 1", "k1"), text("again", "k2"), text("new 3", "k3")]});
    let answer = app.post(&format!("queues/{q}/messages/batch"), batch).await;
    assert_eq!(answer.expect_ok()["metadata"]["duplicates"], 1);
    assert_eq!(bodies(&app, &q).await, ["held", "new 1", "new 3"]);
    let resent = json!({"messages": [text("new 1 again", "k1"), text("new 3 again", "k3")]});
    let answer = app.post(&format!("queues/{q}/messages/batch"), resent).await;
    assert_eq!(answer.expect_ok()["metadata"]["duplicates"], 2);
}
