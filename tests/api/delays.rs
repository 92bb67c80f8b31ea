//! The longest delay is 24 hours wherever a delay is set (Cloudflare raised it from 12 in 2026): 86,400 s
//! is accepted and 86,401 s is a 400 that names the field. Webhook answers are checked by the unit tests of
//! `queue::answer`, the cap of a 429's `Retry-After` by the same constant.

use serde_json::json;
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app, Resp};

const DAY: i64 = 86_400;

/// Asserts a 400 whose message names `field` and the limit.
#[track_caller]
fn refused(resp: &Resp, field: &str) {
    let message = resp.expect_error(400);
    assert!(message.contains(field) && message.contains("86400"), "expected {field} named: {message}");
}

#[sqlx::test]
async fn a_queue_delivery_delay_may_be_24_hours(pool: PgPool) {
    let app = spawn_app(pool).await;
    let created = app.post("queues", json!({"queue_name": "day", "settings": {"delivery_delay": DAY}})).await;
    assert_eq!(created.expect_ok()["settings"]["delivery_delay"], DAY);
    let q = created.result()["queue_id"].as_str().unwrap().to_owned();
    refused(
        &app.post("queues", json!({"queue_name": "more", "settings": {"delivery_delay": DAY + 1}})).await,
        "settings.delivery_delay",
    );

    let path = format!("queues/{q}");
    assert_eq!(
        app.patch(&path, json!({"settings": {"delivery_delay": 60}})).await.expect_ok()["settings"]["delivery_delay"],
        60
    );
    assert_eq!(
        app.put(&path, json!({"settings": {"delivery_delay": DAY}})).await.expect_ok()["settings"]["delivery_delay"],
        DAY
    );
    refused(&app.patch(&path, json!({"settings": {"delivery_delay": DAY + 1}})).await, "settings.delivery_delay");
    refused(&app.put(&path, json!({"settings": {"delivery_delay": DAY + 1}})).await, "settings.delivery_delay");
    assert_eq!(
        app.get(&path).await.expect_ok()["settings"]["delivery_delay"],
        DAY,
        "the refused updates changed nothing"
    );

    // The queue's delay of a day holds a message published without one back.
    app.post(&format!("{path}/consumers"), json!({"type": "http_pull"})).await.expect_ok();
    app.publish(&q, json!({"body": 1})).await;
    assert!(app.pull(&q, json!({})).await.is_empty(), "delayed by the queue's 24 hours");
    assert_eq!(app.backlog(&q).await, 1);
}

#[sqlx::test]
async fn a_consumer_retry_delay_and_backoff_cap_may_be_24_hours(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let consumers = format!("queues/{q}/consumers");
    refused(
        &app.post(&consumers, json!({"type": "http_pull", "settings": {"retry_delay": DAY + 1}})).await,
        "settings.retry_delay",
    );
    let created = app.post(&consumers, json!({"type": "http_pull", "settings": {"retry_delay": DAY}})).await;
    assert_eq!(created.expect_ok()["settings"]["retry_delay"], DAY);
    let consumer = format!("{consumers}/{}", created.result()["consumer_id"].as_str().unwrap());

    let exponential = |max: i64| json!({"type": "http_pull", "settings": {"retry_delay": 60, "retry_backoff": "exponential", "retry_delay_max": max}});
    let updated = app.put(&consumer, exponential(DAY)).await;
    assert_eq!(updated.expect_ok()["settings"]["retry_delay_max"], DAY);
    refused(&app.put(&consumer, exponential(DAY + 1)).await, "settings.retry_delay_max");
    refused(
        &app.put(&consumer, json!({"type": "http_pull", "settings": {"retry_delay": DAY + 1}})).await,
        "settings.retry_delay",
    );
    let kept = app.get(&consumer).await;
    assert_eq!(kept.expect_ok()["settings"]["retry_delay_max"], DAY, "the refused updates changed nothing");

    // Without `retry_delay_max`, exponential backoff is capped at the longest delay: 24 hours.
    let webhook_queue = app.create_queue("hooked").await;
    let hook = json!({"type": "webhook", "url": "https://example.com/hook",
                      "settings": {"retry_delay": 1, "retry_backoff": "exponential"}});
    let created = app.post(&format!("queues/{webhook_queue}/consumers"), hook).await;
    assert_eq!(created.expect_ok()["settings"]["retry_delay_max"], DAY);
}

#[sqlx::test]
async fn a_publish_may_be_delayed_24_hours(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let single = format!("queues/{q}/messages");
    let batch = format!("queues/{q}/messages/batch");
    app.post(&single, json!({"body": "a day", "delay_seconds": DAY})).await.expect_ok();
    app.post(&batch, json!({"delay_seconds": DAY, "messages": [{"body": "batch's day"}]})).await.expect_ok();
    app.post(&batch, json!({"messages": [{"body": "its own day", "delay_seconds": DAY}]})).await.expect_ok();
    assert_eq!(app.backlog(&q).await, 3);
    assert!(app.pull(&q, json!({})).await.is_empty(), "every message waits its day");

    refused(&app.post(&single, json!({"body": 1, "delay_seconds": DAY + 1})).await, "message.delay_seconds");
    refused(&app.post(&batch, json!({"delay_seconds": DAY + 1, "messages": [{"body": 1}]})).await, "delay_seconds");
    let late_second = json!({"messages": [{"body": 1}, {"body": 2, "delay_seconds": DAY + 1}]});
    refused(&app.post(&batch, late_second).await, "messages[1].delay_seconds");
    assert_eq!(app.backlog(&q).await, 3, "the refused publishes stored nothing");
}

/// A retry may wait 24 hours, asked by an ack request or by a pull that carries it.
#[sqlx::test]
async fn a_retry_may_wait_24_hours(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b", "c"]).await;
    let got = app.pull(&q, json!({"batch_size": 3})).await;
    assert_eq!(got.len(), 3);
    let retry = |m: &serde_json::Value, delay: i64| json!({"lease_id": lease(m), "delay_seconds": delay});
    let ack = format!("queues/{q}/messages/ack");
    let pull = format!("queues/{q}/messages/pull");

    refused(&app.post(&ack, json!({"retries": [retry(&got[0], DAY + 1)]})).await, "retries[0].delay_seconds");
    refused(&app.post(&pull, json!({"retries": [retry(&got[0], DAY + 1)]})).await, "retries[0].delay_seconds");
    let answer = app.post(&ack, json!({"retries": [retry(&got[0], DAY)]})).await;
    assert_eq!(answer.expect_ok()["retryCount"], 1);
    let answer = app.post(&pull, json!({"retries": [retry(&got[1], DAY)]})).await;
    assert_eq!(answer.expect_ok()["retryCount"], 1);
    // The third message is acked; the two retried ones wait their day.
    app.ack(&q, &[lease(&got[2])], json!([])).await;
    assert_eq!(app.backlog(&q).await, 2);
    assert!(app.pull(&q, json!({})).await.is_empty(), "both retries wait 24 hours");
}
