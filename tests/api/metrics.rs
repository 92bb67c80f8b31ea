use serde_json::json;
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app};

/// The value of one series in a text exposition, by name and labels (`a="b"` pairs, in order).
fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let key = if labels.is_empty() { name.to_owned() } else { format!("{name}{{{labels}}}") };
    text.lines().find_map(|line| line.strip_prefix(&key).and_then(|rest| rest.trim().parse().ok()))
}

#[sqlx::test]
async fn counters_and_gauges_follow_the_workload(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({"dead_letter_queue": "orders-dlq"})).await;
    app.publish_texts(&q, &["a", "b", "c", "d", "e"]).await;
    let pulled = app.pull(&q, json!({"batch_size": 3})).await;
    app.ack(&q, &[lease(&pulled[0]), lease(&pulled[1])], json!([{"lease_id": lease(&pulled[2]), "delay_seconds": 60}]))
        .await;
    skiplock::engine::gauges::refresh(&app.metrics, &pool, 100).await.unwrap();

    let text = app.metrics.render(Some(&pool));
    assert_eq!(sample(&text, "skiplock_messages_published_total", ""), Some(5.0));
    assert_eq!(sample(&text, "skiplock_messages_delivered_total", r#"consumer_type="http_pull""#), Some(3.0));
    assert_eq!(sample(&text, "skiplock_messages_acked_total", r#"consumer_type="http_pull""#), Some(2.0));
    assert_eq!(sample(&text, "skiplock_messages_retried_total", r#"consumer_type="http_pull""#), Some(1.0));
    let queue = format!(r#"account="{}",queue="orders""#, app.account);
    assert_eq!(sample(&text, "skiplock_queue_backlog_messages", &queue), Some(3.0));
    assert_eq!(sample(&text, "skiplock_queue_in_flight_messages", &queue), Some(0.0));
    assert_eq!(sample(&text, "skiplock_queue_delayed_messages", &queue), Some(1.0));
    assert_eq!(sample(&text, "skiplock_queue_dead_letter_messages", &queue), Some(0.0));
    assert!(sample(&text, "skiplock_queue_oldest_message_age_seconds", &queue).is_some());
    let dlq = format!(r#"account="{}",queue="orders-dlq""#, app.account);
    assert_eq!(sample(&text, "skiplock_queue_dead_letter_messages", &dlq), None, "a queue without one has no series");
    let route =
        r#"method="POST",route="/client/v4/accounts/{account_id}/queues/{queue_id}/messages/batch",status="2xx""#;
    assert_eq!(sample(&text, "skiplock_http_requests_total", route), Some(1.0));
    let pull = r#"method="POST",route="/client/v4/accounts/{account_id}/queues/{queue_id}/messages/pull""#;
    assert_eq!(sample(&text, "skiplock_http_request_duration_seconds_count", pull), Some(1.0));
    assert!(sample(&text, "skiplock_db_pool_connections", r#"state="idle""#).is_some());
    assert!(text.contains("skiplock_build_info{version="));
}

#[sqlx::test]
async fn queues_past_the_series_cap_are_summed_as_other(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    for (name, n) in [("big", 3), ("mid", 2), ("small", 1)] {
        let q = app.create_queue(name).await;
        let texts: Vec<&str> = (0..n).map(|_| "x").collect();
        app.publish_texts(&q, &texts).await;
    }
    skiplock::engine::gauges::refresh(&app.metrics, &pool, 1).await.unwrap();
    let text = app.metrics.render(None);
    let big = format!(r#"account="{}",queue="big""#, app.account);
    assert_eq!(sample(&text, "skiplock_queue_backlog_messages", &big), Some(3.0));
    assert_eq!(sample(&text, "skiplock_queue_backlog_messages", r#"account="_other",queue="_other""#), Some(3.0));
    assert!(!text.contains(r#"queue="mid""#) && !text.contains(r#"queue="small""#));
    assert_eq!(sample(&text, "skiplock_queue_series", ""), Some(1.0));
}

#[sqlx::test]
async fn every_answer_carries_a_request_id(pool: PgPool) {
    let app = spawn_app(pool).await;
    let resp = app.get("queues").await;
    let id = resp.headers["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(id.len(), 32);
    let client = reqwest::Client::new();
    let echoed =
        client.get(app.url("queues")).bearer_auth(&app.token).header("x-request-id", "trace-123").send().await.unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "trace-123");
}

#[sqlx::test]
async fn webhook_deliveries_are_counted_by_outcome(pool: PgPool) {
    use std::time::Duration;

    use crate::helpers::{observed_dispatcher, webhook_consumer};
    use crate::receiver::{Answer, Receiver};

    let app = spawn_app(pool.clone()).await;
    let ok = Receiver::start(|_| Answer::status(200)).await;
    let failing = Receiver::start(|_| Answer::status(500)).await;
    let good = app.webhook_queue("good", &ok.url, json!({})).await;
    let bad = app.webhook_queue("bad", &failing.url, json!({})).await;
    app.publish_texts(&good.queue, &["a", "b", "c"]).await;
    app.publish_texts(&bad.queue, &["d"]).await;
    let guard = skiplock::dispatch::guard::AddressGuard::new(vec!["127.0.0.0/8".parse().unwrap()]);
    let d = observed_dispatcher(&pool, Duration::from_secs(5), guard, app.metrics.clone()).await;
    d.dispatch_once(&webhook_consumer(&d, &good).await).await.unwrap().unwrap();
    d.dispatch_once(&webhook_consumer(&d, &bad).await).await.unwrap().unwrap();

    let text = app.metrics.render(None);
    assert_eq!(sample(&text, "skiplock_webhook_deliveries_total", r#"outcome="ok""#), Some(1.0));
    assert_eq!(sample(&text, "skiplock_webhook_deliveries_total", r#"outcome="http_error""#), Some(1.0));
    assert_eq!(sample(&text, "skiplock_webhook_delivery_duration_seconds_count", r#"outcome="ok""#), Some(1.0));
    assert_eq!(sample(&text, "skiplock_messages_delivered_total", r#"consumer_type="webhook""#), Some(4.0));
    assert_eq!(sample(&text, "skiplock_messages_acked_total", r#"consumer_type="webhook""#), Some(3.0));
    assert_eq!(sample(&text, "skiplock_messages_retried_total", r#"consumer_type="webhook""#), Some(1.0));
    assert_eq!(sample(&text, "skiplock_webhook_batches_in_flight", ""), Some(0.0));
}

/// Past the cap, the others' backlog, in-flight, delayed and dead-letter figures add up over every
/// account and their oldest message is the oldest of them; under the cap, empty queues have series too.
#[sqlx::test]
async fn the_other_series_sums_every_figure_of_the_queues_past_the_cap(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let big = app.pull_queue("big", json!({"dead_letter_queue": "big-dlq"})).await;
    app.publish_texts(&big, &["a", "b", "c", "d"]).await;
    app.pull(&big, json!({"batch_size": 1, "visibility_timeout_ms": 600_000})).await;
    // A consumer's dead-letter queue is created with it.
    let big_dlq = app.get("queues?name=big-dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    app.publish_texts(&big_dlq, &["e"]).await;
    app.create_queue("empty").await;
    let (other, token) = crate::helpers::new_account(&pool, "other", &skiplock::auth::Scope::ALL).await;
    let theirs = crate::helpers::TestApp::remote(pool.clone(), app.address.clone(), other, token);
    let mid = theirs.pull_queue("mid", json!({"dead_letter_queue": "mid-dlq"})).await;
    theirs.publish_texts(&mid, &["f", "g"]).await;
    theirs.publish(&mid, json!({"body": "later", "content_type": "text", "delay_seconds": 600})).await;
    let mid_dlq = theirs.get("queues?name=mid-dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    theirs.publish_texts(&mid_dlq, &["h", "i"]).await;

    let other_series = r#"account="_other",queue="_other""#;
    let own = |account: &dyn std::fmt::Display, name: &str| format!(r#"account="{account}",queue="{name}""#);
    skiplock::engine::gauges::refresh(&app.metrics, &pool, 1).await.unwrap();
    let text = app.metrics.render(None);
    let big_series = own(&app.account, "big");
    assert_eq!(sample(&text, "skiplock_queue_backlog_messages", &big_series), Some(4.0));
    assert_eq!(sample(&text, "skiplock_queue_in_flight_messages", &big_series), Some(1.0));
    assert_eq!(sample(&text, "skiplock_queue_dead_letter_messages", &big_series), Some(1.0));
    // mid (3, one delayed), mid-dlq (2), big-dlq (1), empty (0); only mid has a dead-letter queue.
    assert_eq!(sample(&text, "skiplock_queue_backlog_messages", other_series), Some(6.0));
    assert_eq!(sample(&text, "skiplock_queue_in_flight_messages", other_series), Some(0.0));
    assert_eq!(sample(&text, "skiplock_queue_delayed_messages", other_series), Some(1.0));
    assert_eq!(sample(&text, "skiplock_queue_dead_letter_messages", other_series), Some(2.0));
    assert!(sample(&text, "skiplock_queue_oldest_message_age_seconds", other_series).is_some());
    assert_eq!(sample(&text, "skiplock_queue_series", ""), Some(1.0));

    // Four with messages, by backlog; the empty one is the other.
    skiplock::engine::gauges::refresh(&app.metrics, &pool, 4).await.unwrap();
    let text = app.metrics.render(None);
    assert_eq!(sample(&text, "skiplock_queue_delayed_messages", &own(&other, "mid")), Some(1.0));
    assert_eq!(sample(&text, "skiplock_queue_dead_letter_messages", &own(&other, "mid")), Some(2.0));
    assert_eq!(sample(&text, "skiplock_queue_backlog_messages", &own(&app.account, "big-dlq")), Some(1.0));
    assert_eq!(sample(&text, "skiplock_queue_backlog_messages", other_series), Some(0.0));
    assert_eq!(sample(&text, "skiplock_queue_series", ""), Some(4.0));

    // Under the cap every queue has its series, the empty one too, and there is no other.
    skiplock::engine::gauges::refresh(&app.metrics, &pool, 10).await.unwrap();
    let text = app.metrics.render(None);
    assert_eq!(sample(&text, "skiplock_queue_backlog_messages", &own(&app.account, "empty")), Some(0.0));
    assert_eq!(sample(&text, "skiplock_queue_in_flight_messages", &own(&app.account, "empty")), Some(0.0));
    assert_eq!(sample(&text, "skiplock_queue_dead_letter_messages", &own(&app.account, "empty")), None);
    assert_eq!(sample(&text, "skiplock_queue_backlog_messages", other_series), None);
    assert_eq!(sample(&text, "skiplock_queue_series", ""), Some(5.0));
}
