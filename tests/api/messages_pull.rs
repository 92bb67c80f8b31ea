use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app};

#[sqlx::test]
async fn pulling_needs_an_http_pull_consumer_and_an_unpaused_queue(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let resp = app.post(&format!("queues/{q}/messages/pull"), json!({})).await;
    assert!(resp.expect_error(409).contains("http_pull"));
    app.post(&format!("queues/{q}/consumers"), json!({"type": "webhook", "url": "https://example.com"}))
        .await
        .expect_ok();
    app.post(&format!("queues/{q}/messages/pull"), json!({})).await.expect_error(409);

    let p = app.pull_queue("pulled", json!({})).await;
    app.patch(&format!("queues/{p}"), json!({"settings": {"delivery_paused": true}})).await.expect_ok();
    let resp = app.post(&format!("queues/{p}/messages/pull"), json!({})).await;
    assert!(resp.expect_error(409).contains("queue_delivery_paused"));
    assert!(resp.headers.get("x-should-retry").is_none(), "a paused queue may resume: retrying can help");
    app.patch(&format!("queues/{p}"), json!({"settings": {"delivery_paused": false}})).await.expect_ok();
    app.post(&format!("queues/{p}/messages/pull"), json!({})).await.expect_ok();
}

#[sqlx::test]
async fn an_empty_queue_answers_at_once_with_no_messages(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let resp = app.post(&format!("queues/{q}/messages/pull"), json!({})).await;
    let result = resp.expect_ok();
    assert_eq!(result["messages"], json!([]));
    assert_eq!(result["message_backlog_count"], 0);
    // A bare POST with no body is accepted too, as the SDKs send one.
    let url = app.url(&format!("queues/{q}/messages/pull"));
    app.raw(reqwest::Method::POST, &url, Some(&app.token), None).await.expect_ok();
}

#[sqlx::test]
async fn a_pull_leases_up_to_the_consumers_batch_size(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({"settings": {"batch_size": 3}})).await;
    app.publish_texts(&q, &["1", "2", "3", "4", "5"]).await;
    let resp = app.post(&format!("queues/{q}/messages/pull"), json!({})).await;
    let result = resp.expect_ok();
    let messages = result["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(result["message_backlog_count"], 5);
    for m in messages {
        assert_eq!(m["attempts"], 1);
        assert_eq!(m["id"].as_str().unwrap().len(), 32);
        assert!(!lease(m).is_empty());
        assert!(m["timestamp_ms"].as_i64().unwrap() > 1_700_000_000_000);
    }
    let bodies: Vec<&Value> = messages.iter().map(|m| &m["body"]).collect();
    assert_eq!(bodies, [&json!("1"), &json!("2"), &json!("3")], "first published, first delivered");
    assert_eq!(app.pull(&q, json!({"batch_size": 10})).await.len(), 2);
    assert!(app.pull(&q, json!({"batch_size": 10})).await.is_empty(), "leased messages are invisible");
}

#[sqlx::test]
async fn bad_pull_requests_are_400s(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    for (body, needle) in [
        (json!({"batch_size": 0}), "batch_size"),
        (json!({"batch_size": 101}), "batch_size"),
        (json!({"batch_size": "5"}), "batch_size"),
        (json!({"visibility_timeout_ms": 0}), "visibility_timeout_ms"),
        (json!({"visibility_timeout": 43200001}), "visibility_timeout"),
        (json!({"visibility_timeout_ms": 1000, "visibility_timeout": -5}), "visibility_timeout"),
        (json!({"wait": 1}), "wait"),
    ] {
        let message = app.post(&format!("queues/{q}/messages/pull"), body.clone()).await.expect_error(400);
        assert!(message.contains(needle), "{body}: {message}");
    }
}

#[sqlx::test]
async fn a_message_whose_lease_expires_is_delivered_again(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["once"]).await;
    // `visibility_timeout` is the alias the Cloudflare docs use, in milliseconds.
    let first = app.pull(&q, json!({"visibility_timeout": 300})).await;
    assert_eq!(first[0]["attempts"], 1);
    assert!(app.pull(&q, json!({})).await.is_empty());
    let again = app.pull_until_some(&q, json!({}), Duration::from_secs(10)).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0]["id"], first[0]["id"]);
    assert_eq!(again[0]["attempts"], 2);
    assert_ne!(lease(&again[0]), lease(&first[0]));
}

/// Pulls with short leases until the message is gone from `queue`; returns the attempts seen.
async fn deliver_until_exhausted(app: &crate::helpers::TestApp, queue: &str) -> Vec<i64> {
    let mut attempts = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while app.backlog(queue).await > 0 {
        assert!(std::time::Instant::now() < deadline, "the message never left the queue");
        for m in app.pull(queue, json!({"visibility_timeout_ms": 50})).await {
            attempts.push(m["attempts"].as_i64().unwrap());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    attempts
}

#[sqlx::test]
async fn a_message_out_of_deliveries_moves_to_the_dead_letter_queue_with_its_id(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({"dead_letter_queue": "orders-dlq", "settings": {"max_retries": 2}})).await;
    app.publish_texts(&q, &["doomed"]).await;
    let original = app.post(&format!("queues/{q}/messages/peek"), json!({})).await.expect_ok()["messages"][0].clone();
    assert_eq!(deliver_until_exhausted(&app, &q).await, [1, 2, 3], "max_retries + 1 deliveries");

    let dlq = app.get("queues?name=orders-dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    app.post(&format!("queues/{dlq}/consumers"), json!({"type": "http_pull"})).await.expect_ok();
    let dead = app.pull(&dlq, json!({})).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["id"], original["id"]);
    assert_eq!(dead[0]["timestamp_ms"], original["timestamp_ms"]);
    assert_eq!(dead[0]["body"], "doomed");
    assert_eq!(dead[0]["attempts"], 1, "attempts start again in the dead-letter queue");
}

#[sqlx::test]
async fn without_a_dead_letter_queue_an_exhausted_message_is_deleted(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({"settings": {"max_retries": 0}})).await;
    app.publish_texts(&q, &["doomed"]).await;
    assert_eq!(deliver_until_exhausted(&app, &q).await, [1]);
    let bodies: i64 = sqlx::query_scalar("select count(*) from message_bodies").fetch_one(&pool).await.unwrap();
    assert_eq!(bodies, 0);
}

#[sqlx::test]
async fn a_deleted_dead_letter_queue_is_made_again_rather_than_losing_messages(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({"dead_letter_queue": "dlq", "settings": {"max_retries": 0}})).await;
    let dlq = app.get("queues?name=dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    app.delete(&format!("queues/{dlq}")).await.expect_ok();
    app.publish_texts(&q, &["kept"]).await;
    deliver_until_exhausted(&app, &q).await;
    let dlq = app.get("queues?name=dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    assert_eq!(app.backlog(&dlq).await, 1);
}

#[sqlx::test]
async fn a_pull_with_nothing_to_dead_letter_goes_on_while_its_dead_letter_queue_is_being_deleted(pool: PgPool) {
    // Deleting a large dead-letter queue holds its row until every message in it is gone; the queues
    // feeding it must still deliver meanwhile, since none of their messages is moving there.
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({"dead_letter_queue": "dlq", "settings": {"max_retries": 2}})).await;
    let dlq = app.get("queues?name=dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    app.publish_texts(&q, &["fresh"]).await;
    let mut deleting = pool.begin().await.unwrap();
    sqlx::query("delete from queues where id = $1::uuid").bind(&dlq).execute(&mut *deleting).await.unwrap();

    let pulled = tokio::time::timeout(Duration::from_secs(10), app.pull(&q, json!({})))
        .await
        .expect("the pull waited for the dead-letter queue's delete");
    assert_eq!(pulled.len(), 1);
    assert_eq!(pulled[0]["body"], "fresh");
    deleting.rollback().await.unwrap();
}

#[sqlx::test]
async fn eight_concurrent_pullers_never_share_a_message(pool: PgPool) {
    let app = std::sync::Arc::new(spawn_app(pool.clone()).await);
    let q = app.pull_queue("orders", json!({})).await;
    for chunk in 0..20 {
        let messages: Vec<Value> =
            (0..100).map(|i| json!({"body": format!("m{}", chunk * 100 + i), "content_type": "text"})).collect();
        app.post(&format!("queues/{q}/messages/batch"), json!({ "messages": messages })).await.expect_ok();
    }
    let mut pullers = Vec::new();
    for _ in 0..8 {
        let (app, q) = (app.clone(), q.clone());
        pullers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                // Leases far longer than the test: any second delivery would be a second live lease.
                let got = app.pull(&q, json!({"batch_size": 25, "visibility_timeout_ms": 600_000})).await;
                if got.is_empty() {
                    return seen;
                }
                let leases: Vec<&str> = got.iter().map(lease).collect();
                let answer = app.ack(&q, &leases, json!([])).await;
                assert_eq!(answer["ackCount"], got.len());
                seen.extend(got.iter().map(|m| m["body"].as_str().unwrap().to_owned()));
            }
        }));
    }
    let mut deliveries: HashMap<String, usize> = HashMap::new();
    for puller in pullers {
        for body in puller.await.unwrap() {
            *deliveries.entry(body).or_default() += 1;
        }
    }
    let twice: Vec<_> = deliveries.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered under two live leases: {twice:?}");
    let expected: HashSet<String> = (0..2000).map(|i| format!("m{i}")).collect();
    assert_eq!(deliveries.keys().cloned().collect::<HashSet<_>>(), expected, "every message delivered");
    assert_eq!(app.backlog(&q).await, 0, "every message acked");
}

#[sqlx::test]
async fn a_queue_renamed_to_its_dead_letter_queues_name_does_not_loop_its_messages(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({"dead_letter_queue": "dlq", "settings": {"max_retries": 0}})).await;
    let dlq = app.get("queues?name=dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    app.delete(&format!("queues/{dlq}")).await.expect_ok();
    app.patch(&format!("queues/{q}"), json!({"queue_name": "dlq"})).await.expect_ok();
    app.publish_texts(&q, &["m"]).await;
    assert_eq!(deliver_until_exhausted(&app, &q).await, [1], "delivered once, then dropped, not looped");
}
