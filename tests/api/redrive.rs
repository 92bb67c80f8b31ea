//! Dead-letter sources and redrive: a dead-lettered message shows where it came from, a dead-letter
//! queue's stats count its sources, and redrive tasks move messages back exactly once.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app, TestApp};

/// A queue `name` whose pull consumer dead-letters into `dlq` after one delivery; returns its id.
async fn source_queue(app: &TestApp, name: &str, dlq: &str) -> String {
    app.pull_queue(name, json!({"dead_letter_queue": dlq, "settings": {"max_retries": 0}})).await
}

/// Publishes `n` text messages to `queue` and dead-letters all of them by retrying their one delivery;
/// returns their ids.
async fn dead_letter(app: &TestApp, queue: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let texts: Vec<String> = chunk.iter().map(|i| format!("m{i}")).collect();
        app.publish_texts(queue, &texts.iter().map(String::as_str).collect::<Vec<_>>()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while ids.len() < n {
        assert!(Instant::now() < deadline, "only {} of {n} messages were dead-lettered", ids.len());
        let pulled = app.pull(queue, json!({"batch_size": 100, "visibility_timeout_ms": 60000})).await;
        let retries: Vec<Value> = pulled.iter().map(|m| json!({"lease_id": lease(m)})).collect();
        ids.extend(pulled.iter().map(|m| m["id"].as_str().unwrap().to_owned()));
        if !retries.is_empty() {
            app.ack(queue, &[], json!(retries)).await;
        }
    }
    ids
}

async fn queue_named(app: &TestApp, name: &str) -> String {
    app.get(&format!("queues?name={name}")).await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned()
}

#[sqlx::test]
async fn a_dead_lettered_message_shows_its_source_in_peek_pull_and_stats(pool: PgPool) {
    let app = spawn_app(pool).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    let refunds = source_queue(&app, "refunds", "dlq").await;
    let before = crate::helpers::db_now_ms(&app.pool).await;
    dead_letter(&app, &orders, 3).await;
    dead_letter(&app, &refunds, 2).await;
    let dlq = queue_named(&app, "dlq").await;

    let peeked = app.post(&format!("queues/{dlq}/messages/peek"), json!({"batch_size": 10})).await;
    let peeked = peeked.expect_ok()["messages"].as_array().unwrap().clone();
    assert_eq!(peeked.len(), 5);
    for m in &peeked {
        let source = m["metadata"]["dead_letter_source_queue"].as_str().unwrap();
        assert!(source == "orders" || source == "refunds", "{m}");
        let at = m["metadata"]["dead_lettered_at_ms"].as_i64().unwrap();
        assert!(at >= before - 1000, "dead_lettered_at_ms {at} is before the test began ({before})");
    }
    app.post(&format!("queues/{dlq}/consumers"), json!({"type": "http_pull"})).await.expect_ok();
    let pulled = app.pull(&dlq, json!({"batch_size": 10})).await;
    assert_eq!(pulled.len(), 5);
    assert!(pulled.iter().all(|m| m["metadata"]["dead_letter_source_queue"].is_string()), "{pulled:?}");
    // A message published straight to a queue shows neither field.
    app.publish_texts(&orders, &["fresh"]).await;
    let fresh = app.post(&format!("queues/{orders}/messages/peek"), json!({})).await;
    let metadata = &fresh.expect_ok()["messages"][0]["metadata"];
    assert!(metadata.get("dead_letter_source_queue").is_none() && metadata.get("dead_lettered_at_ms").is_none());

    let stats = app.get(&format!("queues/{dlq}/stats")).await;
    assert_eq!(
        stats.expect_ok()["dead_letter_sources"],
        json!([
            {"queue_id": orders, "queue_name": "orders", "message_count": 3},
            {"queue_id": refunds, "queue_name": "refunds", "message_count": 2},
        ])
    );
    // A deleted source still counts, without a name.
    app.delete(&format!("queues/{refunds}")).await.expect_ok();
    let stats = app.get("stats/queues").await;
    let dlq_stats = stats.expect_ok().as_array().unwrap().iter().find(|s| s["queue_name"] == "dlq").unwrap().clone();
    assert_eq!(
        dlq_stats["dead_letter_sources"],
        json!([
            {"queue_id": orders, "queue_name": "orders", "message_count": 3},
            {"queue_id": refunds, "queue_name": null, "message_count": 2},
        ])
    );
    let peeked = app.post(&format!("queues/{dlq}/messages/peek"), json!({"batch_size": 10})).await;
    let orphans = peeked.expect_ok()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["metadata"].get("dead_letter_source_queue").is_none())
        .count();
    assert_eq!(orphans, 2, "a deleted source's messages keep dead_lettered_at_ms only");
    let _ = BTreeSet::<String>::new();
}

#[sqlx::test]
async fn a_webhook_delivery_of_a_dead_lettered_message_carries_its_source(pool: PgPool) {
    use crate::receiver::{Answer, Receiver};
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue("dlq", &receiver.url, json!({})).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    dead_letter(&app, &orders, 1).await;
    app.publish_texts(&hook.queue, &["direct"]).await;
    let d = crate::helpers::dispatcher(&pool, Duration::from_secs(5)).await;
    let consumer = crate::helpers::webhook_consumer(&d, &hook).await;
    d.dispatch_once(&consumer).await.unwrap().expect("a batch");
    let got = receiver.received();
    let messages = got[0].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    let dead = messages.iter().find(|m| m["body"] != "direct").unwrap();
    assert_eq!(dead["metadata"]["dead_letter_source_queue"], "orders");
    assert!(dead["metadata"]["dead_lettered_at_ms"].as_i64().unwrap() > 0);
    let direct = messages.iter().find(|m| m["body"] == "direct").unwrap();
    assert!(direct.get("metadata").is_none(), "other payloads are unchanged: {direct}");
}
