use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skiplock::auth::Scope;
use sqlx::PgPool;

use crate::helpers::{lease, new_account, spawn_app};

#[sqlx::test]
async fn queue_stats_count_messages_by_state_and_chart_activity(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({"dead_letter_queue": "orders-dlq"})).await;
    app.publish_texts(&q, &["a", "b", "c", "d", "e"]).await;
    app.publish(&q, json!({"body": "later", "content_type": "text", "delay_seconds": 600})).await;
    let pulled = app.pull(&q, json!({"batch_size": 2})).await;
    app.ack(&q, &[lease(&pulled[0])], json!([])).await;

    let stats = app.get(&format!("queues/{q}/stats")).await;
    let s = stats.expect_ok();
    assert_eq!(s["queue_name"], "orders");
    assert_eq!(s["backlog_count"], 5);
    assert_eq!(s["in_flight_count"], 1);
    assert_eq!(s["delayed_count"], 1);
    assert_eq!(s["dead_letter_queue"], "orders-dlq");
    assert_eq!(s["dead_letter_backlog_count"], 0);
    assert_eq!(s["series"].as_array().unwrap().len(), 60);

    // Activity is flushed every few hundred milliseconds in tests; wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = app.get(&format!("queues/{q}/stats")).await.expect_ok().clone();
        let total = |key: &str| s["series"].as_array().unwrap().iter().map(|b| b[key].as_i64().unwrap()).sum::<i64>();
        if (total("published"), total("acked")) == (6, 1) {
            break;
        }
        assert!(Instant::now() < deadline, "activity never showed 6 published and 1 acked: {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let all = app.get("stats/queues").await;
    let by_name: Vec<(&str, &Value)> = all
        .expect_ok()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["queue_name"].as_str().unwrap(), &s["dead_letter_sources"]))
        .collect();
    assert_eq!(
        by_name,
        [("orders", &json!([])), ("orders-dlq", &json!([{"queue_id": q, "queue_name": "orders", "message_count": 0}]))],
        "a dead-letter queue shows where its messages come from"
    );
}

#[sqlx::test]
async fn stats_are_scoped_to_the_account(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.create_queue("mine").await;
    let (other, token) = new_account(&pool, "other", &Scope::ALL).await;
    let url = format!("{}/client/v4/accounts/{other}/stats/queues", app.address);
    let resp = app.raw(reqwest::Method::GET, &url, Some(&token), None).await;
    assert_eq!(resp.expect_ok(), &json!([]));
    let url = format!("{}/client/v4/accounts/{other}/queues/{q}/stats", app.address);
    app.raw(reqwest::Method::GET, &url, Some(&token), None).await.expect_error(404);
}
