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

/// The names on one page of `stats/queues`, and its `result_info`.
async fn stats_page(app: &crate::helpers::TestApp, query: &str) -> (Vec<String>, Value) {
    let resp = app.get(&format!("stats/queues{query}")).await;
    let names = resp.expect_ok().as_array().unwrap().iter().map(|s| s["queue_name"].as_str().unwrap().to_owned());
    (names.collect(), resp.body["result_info"].clone())
}

#[sqlx::test]
async fn queue_stats_come_a_page_at_a_time_by_name(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    // A source on the first page whose dead-letter queue is on the last, and the other way round.
    // (A consumer's dead-letter queue is created with it.)
    let zulu = app.pull_queue("zulu", json!({"dead_letter_queue": "bravo"})).await;
    let alpha = app.pull_queue("alpha", json!({"dead_letter_queue": "zulu"})).await;
    for name in ["delta", "charlie"] {
        app.create_queue(name).await;
    }
    app.publish_texts(&zulu, &["a", "b"]).await;
    app.publish_texts(&alpha, &["c"]).await;

    let (names, info) = stats_page(&app, "?per_page=2").await;
    assert_eq!(names, ["alpha", "bravo"]);
    assert_eq!(info, json!({"page": 1, "per_page": 2, "count": 2, "total_count": 5, "total_pages": 3}));
    let (names, info) = stats_page(&app, "?per_page=2&page=2").await;
    assert_eq!(names, ["charlie", "delta"]);
    assert_eq!(info["page"], 2);
    let (names, info) = stats_page(&app, "?page=3&per_page=2").await;
    assert_eq!(names, ["zulu"]);
    assert_eq!(info, json!({"page": 3, "per_page": 2, "count": 1, "total_count": 5, "total_pages": 3}));
    let (names, info) = stats_page(&app, "?page=4&per_page=2").await;
    assert!(names.is_empty(), "past the last page: {names:?}");
    assert_eq!(info, json!({"page": 4, "per_page": 2, "count": 0, "total_count": 5, "total_pages": 3}));
    let (names, info) = stats_page(&app, "").await;
    assert_eq!(names, ["alpha", "bravo", "charlie", "delta", "zulu"]);
    assert_eq!(info, json!({"page": 1, "per_page": 20, "count": 5, "total_count": 5, "total_pages": 1}));

    // Figures that involve a queue on another page are still whole.
    let first = app.get("stats/queues?per_page=1").await;
    let alpha_stats = &first.expect_ok()[0];
    assert_eq!(
        (alpha_stats["backlog_count"].as_i64(), alpha_stats["dead_letter_queue"].as_str()),
        (Some(1), Some("zulu"))
    );
    assert_eq!(alpha_stats["dead_letter_backlog_count"], 2, "zulu, on the last page, holds 2");
    let last = app.get("stats/queues?per_page=1&page=5").await;
    assert_eq!(
        last.expect_ok()[0]["dead_letter_sources"],
        json!([{"queue_id": alpha, "queue_name": "alpha", "message_count": 0}]),
        "alpha, on the first page, dead-letters into zulu"
    );
    let second = app.get("stats/queues?per_page=1&page=2").await;
    assert_eq!(second.expect_ok()[0]["dead_letter_sources"][0]["queue_name"], "zulu");
    let charlie = &app.get("stats/queues?per_page=1&page=3").await.body["result"][0];
    assert_eq!(charlie["dead_letter_backlog_count"], Value::Null, "no dead-letter queue");

    // Out of range: 400, naming the parameter.
    for (query, name) in [
        ("page=0", "page"),
        ("page=-1", "page"),
        ("page=x", "page"),
        ("page=2147483648", "page"),
        ("per_page=0", "per_page"),
        ("per_page=1001", "per_page"),
        ("per_page=1.5", "per_page"),
    ] {
        let resp = app.get(&format!("stats/queues?{query}")).await;
        let message = resp.expect_error(400);
        assert!(message.starts_with(&format!("{name} must be an integer from 1 to")), "{query}: {message}");
    }
    let resp = app.get("stats/queues?page=2147483647&per_page=1000").await;
    assert_eq!(resp.expect_ok(), &json!([]), "the last page number allowed is answered, empty");
}
