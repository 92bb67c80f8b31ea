use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{db_now_ms, spawn_app};

#[sqlx::test]
async fn each_content_type_round_trips_as_cloudflare_encodes_it(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish(&q, json!({"body": "plain text", "content_type": "text"})).await;
    app.publish(&q, json!({"body": {"n": 1}, "content_type": "json"})).await;
    app.publish(&q, json!({"body": BASE64.encode([0u8, 159, 255]), "content_type": "bytes"})).await;
    app.publish(&q, json!({"body": [1, 2]})).await; // json is the default
    let got = app.pull(&q, json!({"batch_size": 10})).await;
    let bodies: Vec<(&str, &Value)> =
        got.iter().map(|m| (m["metadata"]["CF-Content-Type"].as_str().unwrap(), &m["body"])).collect();
    assert_eq!(
        bodies,
        [
            ("text", &json!("plain text")),
            ("json", &json!(BASE64.encode(br#"{"n":1}"#))),
            ("bytes", &json!(BASE64.encode([0u8, 159, 255]))),
            ("json", &json!(BASE64.encode(b"[1,2]"))),
        ]
    );
    assert!(got.iter().all(|m| m["metadata"]["CF-sourceMessageSource"] == "api"));
}

#[sqlx::test]
async fn a_publish_answers_with_backlog_metrics(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let resp = app
        .post(
            &format!("queues/{q}/messages/batch"),
            json!({"messages": [{"body": "a", "content_type": "text"}, {"body": "bc", "content_type": "text"}]}),
        )
        .await;
    let metrics = &resp.expect_ok()["metadata"]["metrics"];
    assert_eq!(metrics["backlog_count"], 2);
    assert_eq!(metrics["backlog_bytes"], 3);
    assert!(metrics["oldest_message_timestamp_ms"].as_i64().unwrap() > 0);
}

/// A node keeps its own publishes in its figure at once and reads the others' within seconds, by its
/// once-a-second count of the queues it served.
#[sqlx::test]
async fn a_publish_answers_backlog_follows_other_nodes_publishes_within_seconds(pool: PgPool) {
    let a = spawn_app(pool).await;
    let b = a.another_node().await;
    let q = a.create_queue("orders").await;
    let backlog = |resp: &crate::helpers::Resp| resp.expect_ok()["metadata"]["metrics"]["backlog_count"].clone();
    let single = json!({"body": "a", "content_type": "text"});
    let first = a.post(&format!("queues/{q}/messages"), single.clone()).await;
    assert_eq!(backlog(&first), 1);
    let batch = json!({"messages": [single.clone(), single.clone(), single.clone()]});
    b.post(&format!("queues/{q}/messages/batch"), batch).await.expect_ok();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    for published_here in 2.. {
        let resp = a.post(&format!("queues/{q}/messages"), single.clone()).await;
        if backlog(&resp) == published_here + 3 {
            break;
        }
        assert_eq!(backlog(&resp), published_here, "until counted again, the node adds its own publishes");
        assert!(std::time::Instant::now() < deadline, "the other node's publishes never showed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Seconds between publication and availability, per message body, by the database's record.
async fn delays(pool: &PgPool) -> Vec<(String, i64)> {
    sqlx::query_as(
        "select convert_from(b.body, 'UTF8'), extract(epoch from m.available_at - m.published_at)::int8
         from messages m join message_bodies b on b.id = m.id order by 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn delay_precedence_is_message_then_batch_then_queue(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.create_queue("orders").await;
    app.patch(&format!("queues/{q}"), json!({"settings": {"delivery_delay": 300}})).await.expect_ok();
    let text = |body: &str| json!({"body": body, "content_type": "text"});
    app.publish(&q, text("a-queue-default")).await;
    app.publish(&q, json!({"body": "b-message", "content_type": "text", "delay_seconds": 20})).await;
    app.publish(&q, json!({"body": "c-explicit-zero", "content_type": "text", "delay_seconds": 0})).await;
    app.post(
        &format!("queues/{q}/messages/batch"),
        json!({"delay_seconds": 60, "messages": [text("d-batch"), {"body": "e-message-in-batch", "content_type": "text", "delay_seconds": 5}]}),
    )
    .await
    .expect_ok();
    app.post(&format!("queues/{q}/messages/batch"), json!({"delay_seconds": 0, "messages": [text("f-batch-zero")]}))
        .await
        .expect_ok();
    let expected = [
        ("a-queue-default", 300),
        ("b-message", 20),
        ("c-explicit-zero", 0),
        ("d-batch", 60),
        ("e-message-in-batch", 5),
        ("f-batch-zero", 0),
    ];
    let got = delays(&pool).await;
    let got: Vec<(&str, i64)> = got.iter().map(|(b, d)| (b.as_str(), *d)).collect();
    assert_eq!(got, expected);
}

#[sqlx::test]
async fn a_delayed_message_is_not_delivered_before_its_delay_ends(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish(&q, json!({"body": "later", "content_type": "text", "delay_seconds": 1})).await;
    assert!(app.pull(&q, json!({})).await.is_empty());
    let got = app.pull_until_some(&q, json!({}), Duration::from_secs(10)).await;
    assert_eq!(got.len(), 1, "the message arrives once its delay ends");
    let published = got[0]["timestamp_ms"].as_i64().unwrap();
    assert!(db_now_ms(&pool).await - published >= 1000, "delivered no earlier than its delay");
}

#[sqlx::test]
async fn invalid_delays_are_400s_that_store_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    for (path, body) in [
        ("messages", json!({"body": 1, "delay_seconds": 86401})),
        ("messages", json!({"body": 1, "delay_seconds": -1})),
        ("messages/batch", json!({"delay_seconds": 86401, "messages": [{"body": 1}]})),
        ("messages/batch", json!({"messages": [{"body": 1}, {"body": 2, "delay_seconds": 86401}]})),
    ] {
        let resp = app.post(&format!("queues/{q}/{path}"), body).await;
        let message = resp.expect_error(400);
        assert_eq!(resp.error_code(), 10202, "{message}");
        assert!(message.contains("delay_seconds"), "{message}");
    }
    assert_eq!(app.backlog(&q).await, 0);
}

#[sqlx::test]
async fn bad_message_bodies_are_400s_that_store_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    for (body, needle) in [
        (json!({}), "body"),
        (json!({"body": 1, "content_type": "v8"}), "v8"),
        (json!({"body": 1, "content_type": "xml"}), "content_type"),
        (json!({"body": {"a": 1}, "content_type": "text"}), "string"),
        (json!({"body": "%%%", "content_type": "bytes"}), "base64"),
        (json!({"body": 1, "delay_seconds": "soon"}), "delay_seconds"),
        (json!({"body": 1, "delay_seconds": 1.5}), "delay_seconds"),
    ] {
        let message = app.post(&format!("queues/{q}/messages"), body.clone()).await.expect_error(400);
        assert!(message.contains(needle), "{body}: {message}");
    }
    for (body, needle) in [
        (json!({}), "messages"),
        (json!({"messages": []}), "messages"),
        (json!({"messages": {"body": 1}}), "messages"),
        (json!({"messages": [{"body": 1}, {"content_type": "text"}]}), "messages[1].body"),
    ] {
        let message = app.post(&format!("queues/{q}/messages/batch"), body.clone()).await.expect_error(400);
        assert!(message.contains(needle), "{body}: {message}");
    }
    assert_eq!(app.backlog(&q).await, 0, "a batch with one bad message stores none of it");
}

/// A misspelt field is never dropped: a message stored without its `delay_secnds` would be delivered at
/// once. Every field Cloudflare's schema defines for publishes is accepted, with skiplock's two keys.
#[sqlx::test]
async fn unknown_fields_on_publishes_are_400s_naming_them_that_store_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    for (path, body, field) in [
        ("messages", json!({"body": 1, "delay_secnds": 5}), "delay_secnds"),
        ("messages", json!({"body": "x", "content_type": "text", "metadata": {}}), "metadata"),
        ("messages/batch", json!({"messages": [{"body": 1}], "delay_secnds": 5}), "delay_secnds"),
        (
            "messages/batch",
            json!({"messages": [{"body": 1}, {"body": 2, "delay_secnds": 5}]}),
            "messages[1].delay_secnds",
        ),
        ("messages/batch", json!({"messages": [{"body": 1, "contenttype": "text"}]}), "messages[0].contenttype"),
    ] {
        let resp = app.post(&format!("queues/{q}/{path}"), body.clone()).await;
        let message = resp.expect_error(400);
        assert!(message.contains(field) && message.contains("unknown field"), "{body}: {message}");
        assert_eq!(resp.headers["x-should-retry"], "false");
    }
    assert_eq!(app.backlog(&q).await, 0, "nothing stored");

    let every_field = json!({"body": "a", "content_type": "text", "delay_seconds": 0,
                             "idempotency_key": "k-1", "ordering_key": "o-1"});
    app.publish(&q, every_field.clone()).await;
    let batch = json!({"delay_seconds": 0, "messages": [{"body": "b", "content_type": "text", "delay_seconds": 0,
                                                         "idempotency_key": "k-2", "ordering_key": "o-2"}]});
    app.post(&format!("queues/{q}/messages/batch"), batch).await.expect_ok();
    let got = app.pull(&q, json!({"batch_size": 10})).await;
    let bodies: Vec<&str> = got.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["a", "b"]);
}

#[sqlx::test]
async fn size_and_count_limits_are_413s(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let exactly = "x".repeat(128_000);
    app.publish(&q, json!({"body": exactly, "content_type": "text"})).await;
    let resp =
        app.post(&format!("queues/{q}/messages"), json!({"body": "x".repeat(128_001), "content_type": "text"})).await;
    resp.expect_error(413);
    assert_eq!(resp.error_code(), 10204);

    let hundred: Vec<Value> = (0..100).map(|i| json!({"body": i})).collect();
    app.post(&format!("queues/{q}/messages/batch"), json!({"messages": hundred})).await.expect_ok();
    let too_many: Vec<Value> = (0..101).map(|i| json!({"body": i})).collect();
    let resp = app.post(&format!("queues/{q}/messages/batch"), json!({"messages": too_many})).await;
    resp.expect_error(413);
    assert_eq!(resp.error_code(), 10206);

    let big: Vec<Value> = (0..3).map(|_| json!({"body": "y".repeat(100_000), "content_type": "text"})).collect();
    let resp = app.post(&format!("queues/{q}/messages/batch"), json!({"messages": big})).await;
    resp.expect_error(413);
    assert_eq!(resp.error_code(), 10205);

    let huge = vec![b'"'; 3 * 1024 * 1024];
    let resp =
        app.raw(reqwest::Method::POST, &app.url(&format!("queues/{q}/messages")), Some(&app.token), Some(huge)).await;
    resp.expect_error(413);
    assert_eq!(app.backlog(&q).await, 101);
}

#[sqlx::test]
async fn publishing_to_a_paused_queue_is_allowed(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.patch(&format!("queues/{q}"), json!({"settings": {"delivery_paused": true}})).await.expect_ok();
    app.publish(&q, json!({"body": 1})).await;
    assert_eq!(app.backlog(&q).await, 1);
}

#[sqlx::test]
async fn a_json_body_keeps_its_exact_bytes(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let sent = r#"{"zebra": 1, "apple": [2.50, 1e3], "big": 12345678901234567890123}"#;
    let request = format!(r#"{{"content_type": "json", "body": {sent}}}"#);
    let url = app.url(&format!("queues/{q}/messages"));
    app.raw(reqwest::Method::POST, &url, Some(&app.token), Some(request.into_bytes())).await.expect_ok();
    let got = app.pull(&q, json!({})).await;
    let bytes = BASE64.decode(got[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(String::from_utf8(bytes).unwrap(), sent, "key order, spacing and number spelling kept");
}
