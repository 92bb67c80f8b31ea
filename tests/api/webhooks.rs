//! Webhook delivery, one deterministic step at a time (`dispatch_once`), to real local receivers.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde_json::json;
use sqlx::PgPool;

use crate::helpers::{db_now_ms, dispatcher, guarded_dispatcher, spawn_app, webhook_consumer};
use crate::receiver::{Answer, Receiver};

const TIMEOUT: Duration = Duration::from_secs(5);

/// Seconds until each message of the queue is deliverable again, by body, rounded.
async fn waits(pool: &PgPool) -> Vec<(String, i64, i32)> {
    sqlx::query_as(
        "select convert_from(b.body, 'UTF8'), round(extract(epoch from m.available_at - now()))::int8, m.attempts
         from messages m join message_bodies b on b.id = m.id order by 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn a_delivery_carries_the_batch_signed_and_a_bare_2xx_acks_it(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(204)).await;
    let hook = app.webhook_queue("orders", &receiver.url, json!({})).await;
    let ordered = r#"{"content_type": "json", "body": {"z": 1, "n": 1.50}}"#;
    let url = app.url(&format!("queues/{}/messages", hook.queue));
    app.raw(reqwest::Method::POST, &url, Some(&app.token), Some(ordered.as_bytes().to_vec())).await.expect_ok();
    app.publish(&hook.queue, json!({"body": "hi", "content_type": "text"})).await;
    app.publish(&hook.queue, json!({"body": BASE64.encode([1u8, 2]), "content_type": "bytes"})).await;
    let d = dispatcher(&pool, TIMEOUT).await;
    let consumer = webhook_consumer(&d, &hook).await;
    let outcome = d.dispatch_once(&consumer).await.unwrap().expect("a batch");
    assert_eq!((outcome.delivered, outcome.acked, outcome.retried), (3, 3, 0));
    assert!(outcome.failure.is_none());
    assert_eq!(app.backlog(&hook.queue).await, 0);

    let got = receiver.received();
    assert_eq!(got.len(), 1);
    let delivery = &got[0];
    assert_eq!(delivery.header("content-type"), "application/json");
    assert!(delivery.header("webhook-id").starts_with("msg_"));
    assert!(delivery.header("webhook-signature").starts_with("v1,"));
    let ts: i64 = delivery.header("webhook-timestamp").parse().unwrap();
    assert!((ts * 1000 - db_now_ms(&pool).await).abs() < 60_000);
    let body = &delivery.body;
    assert_eq!(body["queue"], "orders");
    assert!(
        delivery.raw.contains(r#""body":{"z": 1, "n": 1.50}"#),
        "a json body is embedded byte for byte: {}",
        delivery.raw
    );
    assert_eq!(body["queue_id"], hook.queue.as_str());
    assert_eq!(body["consumer_id"], hook.consumer.as_str());
    let messages = body["messages"].as_array().unwrap();
    let bodies: Vec<_> = messages.iter().map(|m| (m["content_type"].clone(), m["body"].clone())).collect();
    assert_eq!(
        bodies,
        [
            (json!("json"), json!({"z": 1, "n": 1.5})),
            (json!("text"), json!("hi")),
            (json!("bytes"), json!(BASE64.encode([1u8, 2]))),
        ]
    );
    for m in messages {
        assert_eq!(m["attempts"], 1);
        assert_eq!(m["id"].as_str().unwrap().len(), 32);
        assert!(m["timestamp_ms"].as_i64().unwrap() > 0);
        assert!(m["lease_id"].is_string());
    }
    assert!(d.dispatch_once(&consumer).await.unwrap().is_none(), "never an empty batch");
    assert_eq!(receiver.received().len(), 1);
}

#[sqlx::test]
async fn actions_apply_in_call_order_with_cloudflares_precedence(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|r| {
        let ids = r.ids();
        Answer::json(json!({"actions": [
            {"type": "retry", "id": ids[0], "delay_seconds": 100},
            {"type": "ack", "id": ids[0]},
            {"type": "ack", "id": ids[1]},
            {"type": "retry_all", "delay_seconds": 200},
            {"type": "ack", "id": ids[2]},
            {"type": "ack_all"},
        ]}))
    })
    .await;
    let hook = app.webhook_queue("orders", &receiver.url, json!({})).await;
    app.publish_texts(&hook.queue, &["a", "b", "c", "d"]).await;
    let d = dispatcher(&pool, TIMEOUT).await;
    let outcome = d.dispatch_once(&webhook_consumer(&d, &hook).await).await.unwrap().unwrap();
    assert_eq!((outcome.acked, outcome.retried), (1, 3));
    assert_eq!(
        waits(&pool).await,
        [("a".into(), 100, 1), ("c".into(), 200, 1), ("d".into(), 200, 1)],
        "a: its first call (retry 100); b: acked before retry_all; c, d: settled by retry_all"
    );
}

#[sqlx::test]
async fn a_retry_without_delay_waits_the_consumers_retry_delay(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|r| Answer::json(json!({"actions": [{"type": "retry", "id": r.ids()[0]}]}))).await;
    let hook = app.webhook_queue("orders", &receiver.url, json!({"settings": {"retry_delay": 42}})).await;
    app.publish_texts(&hook.queue, &["a", "b"]).await;
    let d = dispatcher(&pool, TIMEOUT).await;
    d.dispatch_once(&webhook_consumer(&d, &hook).await).await.unwrap().unwrap();
    assert_eq!(waits(&pool).await, [("a".into(), 42, 1)], "b had no call and was acked");
}

#[sqlx::test]
async fn malformed_actions_fail_the_delivery(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::json(json!({"actions": [{"type": "nack"}]}))).await;
    let hook = app.webhook_queue("orders", &receiver.url, json!({})).await;
    app.publish_texts(&hook.queue, &["a"]).await;
    let d = dispatcher(&pool, TIMEOUT).await;
    let outcome = d.dispatch_once(&webhook_consumer(&d, &hook).await).await.unwrap().unwrap();
    assert!(outcome.failure.unwrap().contains("invalid actions"));
    assert_eq!(outcome.retried, 1);
}

/// Every kind of failed delivery retries the whole batch, and the next delivery has attempts + 1.
#[sqlx::test]
async fn failed_deliveries_retry_the_batch(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let target = Receiver::start(|_| Answer::status(200)).await;
    let location = target.url.clone();
    let receiver = Receiver::start(move |r| match r.body["queue"].as_str().unwrap() {
        "five-hundred" => Answer::status(500),
        "redirect" => Answer { headers: vec![("location", location.clone())], ..Answer::status(307) },
        "not-found" => Answer::status(404),
        "slow" => Answer { delay: Duration::from_secs(3), ..Answer::status(200) },
        _ => Answer::status(200),
    })
    .await;
    let refused_port = crate::process::free_port();
    let d = dispatcher(&pool, Duration::from_millis(500)).await;
    for (name, url, reason) in [
        ("five-hundred", receiver.url.clone(), "HTTP 500"),
        ("redirect", receiver.url.clone(), "HTTP 307"),
        ("not-found", receiver.url.clone(), "HTTP 404"),
        ("slow", receiver.url.clone(), "time"),
        ("refused", format!("http://127.0.0.1:{refused_port}/hook"), "connect"),
    ] {
        let hook = app.webhook_queue(name, &url, json!({"settings": {"max_retries": 5}})).await;
        app.publish_texts(&hook.queue, &["x", "y"]).await;
        let consumer = webhook_consumer(&d, &hook).await;
        let outcome = d.dispatch_once(&consumer).await.unwrap().unwrap();
        let failure = outcome.failure.unwrap_or_default();
        assert!(failure.to_lowercase().contains(&reason.to_lowercase()), "{name}: {failure}");
        assert_eq!((outcome.acked, outcome.retried), (0, 2), "{name}");
        assert_eq!(app.backlog(&hook.queue).await, 2, "{name}: nothing lost");
        let pulled = app.post(&format!("queues/{}/messages/peek", hook.queue), json!({})).await;
        let attempts: Vec<_> =
            pulled.expect_ok()["messages"].as_array().unwrap().iter().map(|m| m["attempts"].clone()).collect();
        assert_eq!(attempts, [json!(1), json!(1)], "{name}: one attempt used");
        let again = d.dispatch_once(&consumer).await.unwrap().unwrap();
        assert_eq!(again.delivered, 2, "{name}: the batch comes back at once (retry_delay 0)");
    }
    assert!(target.received().is_empty(), "redirects are never followed");
}

#[sqlx::test]
async fn a_rest_ack_made_during_a_delivery_survives_its_failure(pool: PgPool) {
    let app = std::sync::Arc::new(spawn_app(pool.clone()).await);
    let (url, token) = (app.url(""), app.token.clone());
    let queue_cell: std::sync::Arc<std::sync::Mutex<String>> = Default::default();
    let cell = queue_cell.clone();
    let receiver = Receiver::start(move |r| {
        // Ack the first message through the REST API with its lease id, then fail the delivery.
        let lease = r.body["messages"][0]["lease_id"].as_str().unwrap().to_owned();
        let ack_url = format!("{url}queues/{}/messages/ack", cell.lock().unwrap());
        let token = token.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let resp = reqwest::Client::new()
                    .post(ack_url)
                    .bearer_auth(token)
                    .json(&json!({"acks": [{"lease_id": lease}]}))
                    .send()
                    .await
                    .unwrap();
                assert!(resp.status().is_success());
            })
        })
        .join()
        .unwrap();
        Answer::status(500)
    })
    .await;
    let hook = app.webhook_queue("orders", &receiver.url, json!({})).await;
    *queue_cell.lock().unwrap() = hook.queue.clone();
    app.publish_texts(&hook.queue, &["a", "b", "c"]).await;
    let d = dispatcher(&pool, TIMEOUT).await;
    let outcome = d.dispatch_once(&webhook_consumer(&d, &hook).await).await.unwrap().unwrap();
    assert_eq!(outcome.retried, 2);
    let left: Vec<String> = waits(&pool).await.into_iter().map(|(b, _, _)| b).collect();
    assert_eq!(left, ["b", "c"], "the acked message stays acked");
}

#[sqlx::test]
async fn a_429_waits_at_least_its_retry_after(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver =
        Receiver::start(|_| Answer { headers: vec![("retry-after", "90".into())], ..Answer::status(429) }).await;
    let hook = app.webhook_queue("orders", &receiver.url, json!({"settings": {"retry_delay": 10}})).await;
    app.publish_texts(&hook.queue, &["a"]).await;
    let d = dispatcher(&pool, TIMEOUT).await;
    d.dispatch_once(&webhook_consumer(&d, &hook).await).await.unwrap().unwrap();
    assert_eq!(waits(&pool).await, [("a".into(), 90, 1)]);
}

#[sqlx::test]
async fn exhausted_messages_land_in_the_dead_letter_queue_with_their_id(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(500)).await;
    let hook = app
        .webhook_queue(
            "orders",
            &receiver.url,
            json!({"dead_letter_queue": "orders-dlq", "settings": {"max_retries": 2}}),
        )
        .await;
    app.publish_texts(&hook.queue, &["doomed"]).await;
    let d = dispatcher(&pool, TIMEOUT).await;
    let consumer = webhook_consumer(&d, &hook).await;
    for _ in 0..3 {
        d.dispatch_once(&consumer).await.unwrap().unwrap();
    }
    assert!(d.dispatch_once(&consumer).await.unwrap().is_none());
    let deliveries = receiver.received();
    let attempts: Vec<i64> = deliveries.iter().map(|r| r.body["messages"][0]["attempts"].as_i64().unwrap()).collect();
    assert_eq!(attempts, [1, 2, 3]);
    let dlq = app.get("queues?name=orders-dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    let peeked = app.post(&format!("queues/{dlq}/messages/peek"), json!({})).await;
    let dead = &peeked.expect_ok()["messages"][0];
    assert_eq!(dead["id"].as_str().unwrap(), deliveries[0].ids()[0]);
    assert_eq!(dead["timestamp_ms"], deliveries[0].body["messages"][0]["timestamp_ms"]);
}

#[sqlx::test]
async fn exponential_backoff_doubles_the_retry_delay_with_jitter(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(503)).await;
    let settings = json!({"settings": {"retry_delay": 40, "retry_backoff": "exponential", "retry_delay_max": 100, "max_retries": 10}});
    let hook = app.webhook_queue("orders", &receiver.url, settings).await;
    let shown = app.get(&format!("queues/{}/consumers/{}", hook.queue, hook.consumer)).await;
    assert_eq!(shown.expect_ok()["settings"]["retry_backoff"], "exponential");
    assert_eq!(shown.result()["settings"]["retry_delay_max"], 100);
    app.publish_texts(&hook.queue, &["a"]).await;
    let d = dispatcher(&pool, TIMEOUT).await;
    let consumer = webhook_consumer(&d, &hook).await;
    let mut delays = Vec::new();
    for _ in 0..3 {
        sqlx::query("update messages set available_at = now()").execute(&pool).await.unwrap();
        d.dispatch_once(&consumer).await.unwrap().unwrap();
        delays.push(waits(&pool).await[0].1);
    }
    assert!((20..=40).contains(&delays[0]), "{delays:?}");
    assert!((40..=80).contains(&delays[1]), "{delays:?}");
    assert!((50..=100).contains(&delays[2]), "capped at retry_delay_max: {delays:?}");
}

#[sqlx::test]
async fn signatures_verify_with_the_standard_webhooks_library_through_a_rotation(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue("orders", &receiver.url, json!({})).await;
    let d = dispatcher(&pool, TIMEOUT).await;
    app.publish_texts(&hook.queue, &["signed"]).await;
    d.dispatch_once(&webhook_consumer(&d, &hook).await).await.unwrap().unwrap();
    let rotated =
        app.post(&format!("queues/{}/consumers/{}/rotate_secret", hook.queue, hook.consumer), json!({})).await;
    let new_secret = rotated.expect_ok()["signing_secret"].as_str().unwrap().to_owned();
    app.publish_texts(&hook.queue, &["signed twice"]).await;
    d.dispatch_once(&webhook_consumer(&d, &hook).await).await.unwrap().unwrap();
    let deliveries = receiver.received();
    assert_eq!(deliveries[1].header("webhook-signature").split(' ').count(), 2, "both secrets sign");

    for (secret, index, expected) in [
        (hook.secret.clone(), 0, true),
        (new_secret.clone(), 0, false),
        (hook.secret.clone(), 1, true),
        (new_secret.clone(), 1, true),
        ("whsec_".to_owned() + &BASE64.encode([7u8; 32]), 1, false),
    ] {
        let (ok, output) = verifies(&secret, &deliveries[index]).await;
        assert_eq!(ok, expected, "delivery {index}: {output}");
    }
}

/// Checks a delivery's signature with the Standard Webhooks reference library (tests/sdk/).
async fn verifies(secret: &str, delivery: &crate::receiver::Received) -> (bool, String) {
    let headers: serde_json::Map<String, serde_json::Value> =
        delivery.headers.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    let file = std::env::temp_dir().join(format!("skiplock-delivery-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&file, json!({"headers": headers, "body": delivery.raw}).to_string()).unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let output = tokio::process::Command::new(format!("{root}/.venv/bin/python"))
        .arg(format!("{root}/tests/sdk/verify_webhook.py"))
        .arg(secret)
        .arg(&file)
        .output()
        .await
        .expect("make test creates .venv");
    let _ = std::fs::remove_file(&file);
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A dispatcher that read the consumer before a rotation still signs the next batch with the new
/// secret: the claim reads the secrets, so a receiver may switch as soon as the rotation answers.
#[sqlx::test]
async fn a_rotation_takes_effect_for_the_next_batch_even_on_a_dispatcher_that_cached_the_consumer(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue("orders", &receiver.url, json!({})).await;
    let d = dispatcher(&pool, TIMEOUT).await;
    let cached = webhook_consumer(&d, &hook).await;
    let rotated =
        app.post(&format!("queues/{}/consumers/{}/rotate_secret", hook.queue, hook.consumer), json!({})).await;
    let new_secret = rotated.expect_ok()["signing_secret"].as_str().unwrap().to_owned();
    app.publish_texts(&hook.queue, &["after the rotation"]).await;
    d.dispatch_once(&cached).await.unwrap().unwrap();
    let delivery = &receiver.received()[0];
    let (ok, output) = verifies(&new_secret, delivery).await;
    assert!(ok, "the new secret must verify the first batch after the rotation: {output}");
    let (ok, output) = verifies(&hook.secret, delivery).await;
    assert!(ok, "the previous secret keeps signing during its grace period: {output}");
}

#[sqlx::test]
async fn the_address_guard_refuses_inside_addresses_without_connecting(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let d = guarded_dispatcher(&pool, TIMEOUT, Default::default()).await;
    for (name, url) in [
        ("private", "http://10.1.2.3/hook".to_owned()),
        ("metadata", "http://169.254.169.254/latest/meta-data".to_owned()),
        ("loopback-v6", format!("http://[::1]:{}/hook", receiver.port)),
        ("mapped-v6", format!("http://[::ffff:127.0.0.1]:{}/hook", receiver.port)),
        ("named-loopback", format!("http://localhost:{}/hook", receiver.port)),
        ("loopback", receiver.url.clone()),
    ] {
        let hook = app.webhook_queue(name, &url, json!({})).await;
        app.publish_texts(&hook.queue, &["x"]).await;
        let outcome = d.dispatch_once(&webhook_consumer(&d, &hook).await).await.unwrap().unwrap();
        let failure = outcome.failure.unwrap_or_default();
        assert!(failure.contains("may not reach"), "{name}: {failure}");
        assert_eq!(outcome.retried, 1, "{name}: a refused delivery is a failed attempt");
    }
    assert!(receiver.received().is_empty(), "nothing connected to the receiver");
}
