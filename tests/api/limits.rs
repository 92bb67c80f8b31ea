use std::time::{Duration, Instant};

use serde_json::json;
use skiplock::auth::Scope;
use skiplock::engine::limits::Limits;
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{new_account, spawn_app, spawn_app_with};

#[sqlx::test]
async fn an_account_over_its_rate_gets_429_with_retry_after(pool: PgPool) {
    let limits = Limits { rate_per_second: 2, rate_burst: 5, ..Limits::default() };
    let app = spawn_app_with(pool.clone(), limits).await;
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(app.get("queues").await);
    }
    let limited = statuses.iter().find(|r| r.status == 429).expect("the burst runs out");
    assert!(limited.expect_error(429).contains("rate"));
    let retry_after: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=1).contains(&retry_after), "{retry_after}");
    assert!(limited.headers.get("x-should-retry").is_none(), "a 429 may be retried");
    assert_eq!(statuses.iter().filter(|r| r.status == 200).count(), 5, "the burst passes");

    let (other, token) = new_account(&pool, "neighbour", &Scope::ALL).await;
    let url = format!("{}/client/v4/accounts/{other}/queues", app.address);
    app.raw(reqwest::Method::GET, &url, Some(&token), None).await.expect_ok();
}

/// A second's worth of messages passes at once, the next second's waits for its share, and a publish
/// that would wait longer is refused with nothing stored; another account on the node is not held back.
#[sqlx::test]
async fn an_account_over_its_publish_rate_is_held_back_then_refused_and_others_are_not(pool: PgPool) {
    let limits = Limits { publish_rate_per_second: 100, ..Limits::default() };
    let app = spawn_app_with(pool.clone(), limits).await;
    let q = app.create_queue("busy").await;
    let batch = json!({"messages": vec![json!({"body": "m", "content_type": "text"}); 100]});
    let path = format!("queues/{q}/messages/batch");
    let answers =
        tokio::join!(app.post(&path, batch.clone()), app.post(&path, batch.clone()), app.post(&path, batch.clone()));
    let answers = [answers.0, answers.1, answers.2];
    assert_eq!(answers.iter().filter(|r| r.status == 200).count(), 2, "{:?}", answers.map(|r| r.status));
    // The publish that waited for its share says so, and for how long; the one that did not says nothing.
    let held: Vec<u64> = answers
        .iter()
        .filter(|r| r.status == 200)
        .filter_map(|r| r.headers.get("x-skiplock-held-back-ms"))
        .map(|v| v.to_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(held.len(), 1, "one publish was held back");
    assert!((500..=1000).contains(&held[0]), "held about a second's worth: {held:?}");
    let refused = answers.iter().find(|r| r.status == 429).expect("two seconds' worth owed is refused");
    assert!(refused.expect_error(429).contains("publish rate of 100 messages per second"));
    let retry_after: u64 = refused.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert_eq!(retry_after, 2, "the account owes two seconds of messages");
    assert_eq!(app.backlog(&q).await, 200, "the refused batch stored nothing");
    let held_back = |outcome: &str| app.metrics.publishes_held_back.with_label_values(&[outcome]).get();
    assert_eq!((held_back("delayed"), held_back("refused")), (1, 1));

    let (other, token) = new_account(&pool, "quiet", &Scope::ALL).await;
    let queues = format!("{}/client/v4/accounts/{other}/queues", app.address);
    let created =
        app.raw(reqwest::Method::POST, &queues, Some(&token), Some(br#"{"queue_name":"quiet"}"#.to_vec())).await;
    let quiet = created.expect_ok()["queue_id"].as_str().unwrap().to_owned();
    let publish = format!("{queues}/{quiet}/messages/batch");
    let sent = app.raw(reqwest::Method::POST, &publish, Some(&token), Some(batch.to_string().into_bytes())).await;
    sent.expect_ok();
    assert_eq!(held_back("delayed"), 1, "the other account's publish was not held back");
}

#[sqlx::test]
async fn quotas_cap_queues_per_account_and_backlog_bytes_per_queue(pool: PgPool) {
    let limits = Limits { max_queues_per_account: 2, max_backlog_bytes_per_queue: 10, ..Limits::default() };
    let app = spawn_app_with(pool, limits).await;
    let q = app.create_queue("one").await;
    app.create_queue("two").await;
    let resp = app.post("queues", json!({"queue_name": "three"})).await;
    assert!(resp.expect_error(403).contains("quota of 2 queues"));
    assert_eq!(resp.error_code(), 11014);
    let resp =
        app.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull", "dead_letter_queue": "dlq"})).await;
    assert!(resp.expect_error(403).contains("quota"), "a dead-letter queue counts against the quota too");

    app.publish(&q, json!({"body": "12345678", "content_type": "text"})).await;
    let resp = app.post(&format!("queues/{q}/messages"), json!({"body": "12345", "content_type": "text"})).await;
    assert!(resp.expect_error(429).contains("full"));
    assert!(resp.headers.contains_key("retry-after"));
    assert_eq!(app.backlog(&q).await, 1, "the refused publish stored nothing");
}

#[sqlx::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off(pool: PgPool) {
    let app = spawn_app(pool).await;
    let address = app.address.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the server kept a half-sent request open");
    assert!(started.elapsed() >= Duration::from_secs(4), "not before the header timeout");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.is_empty() || text.starts_with("HTTP/1.1 408"), "{text}");
}
