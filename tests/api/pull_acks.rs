//! A pull that carries the acks and retries of the batch before it (skiplock extension): one request
//! per batch.

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app, TestApp};

async fn pull_answer(app: &TestApp, queue: &str, request: Value) -> Value {
    app.post(&format!("queues/{queue}/messages/pull"), request).await.expect_ok().clone()
}

fn bodies(answer: &Value) -> Vec<&str> {
    answer["messages"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect()
}

#[sqlx::test]
async fn the_acks_and_retries_apply_first_then_the_pull_leases(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b", "c"]).await;
    let first = app.pull(&q, json!({"batch_size": 2, "visibility_timeout_ms": 600_000})).await;
    let answer = pull_answer(
        &app,
        &q,
        json!({
            "batch_size": 10,
            "acks": [{"lease_id": lease(&first[0])}],
            "retries": [{"lease_id": lease(&first[1]), "delay_seconds": 0}],
        }),
    )
    .await;
    assert_eq!((answer["ackCount"].clone(), answer["retryCount"].clone()), (json!(1), json!(1)), "{answer}");
    assert_eq!(answer["warnings"], json!({}));
    let mut got = bodies(&answer);
    got.sort();
    assert_eq!(got, ["b", "c"], "the retried message is in this very batch: {answer}");
    let b = answer["messages"].as_array().unwrap().iter().find(|m| m["body"] == "b").unwrap();
    assert_eq!(b["attempts"], 2);
    assert_eq!(answer["message_backlog_count"], 2, "the acked message is gone");
    assert_eq!(app.backlog(&q).await, 2);
}

#[sqlx::test]
async fn a_pull_without_answers_keeps_cloudflares_shape_and_empty_lists_add_the_counts(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a"]).await;
    let plain = pull_answer(&app, &q, json!({"visibility_timeout_ms": 600_000})).await;
    let keys: Vec<&String> = plain.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["message_backlog_count", "messages", "metadata"]);
    let empty = pull_answer(&app, &q, json!({"acks": []})).await;
    assert_eq!((empty["ackCount"].clone(), empty["retryCount"].clone()), (json!(0), json!(0)));
    assert_eq!(empty["warnings"], json!({}));
}

#[sqlx::test]
async fn stale_and_unknown_leases_warn_as_an_ack_would(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b"]).await;
    let first = app.pull(&q, json!({"batch_size": 1, "visibility_timeout_ms": 600_000})).await;
    app.ack(&q, &[lease(&first[0])], json!([])).await;
    let answer = pull_answer(
        &app,
        &q,
        json!({"acks": [{"lease_id": lease(&first[0])}, {"lease_id": "garbage"}], "retries": [{"lease_id": lease(&first[0])}]}),
    )
    .await;
    assert_eq!(answer["ackCount"], 0, "{answer}");
    assert_eq!(answer["retryCount"], 0, "{answer}");
    assert!(answer["warnings"][lease(&first[0])].as_str().unwrap().contains("already gone"), "{answer}");
    assert!(answer["warnings"]["garbage"].as_str().unwrap().contains("unknown lease id"), "{answer}");
    assert_eq!(bodies(&answer), ["b"], "the pull still leases");
}

#[sqlx::test]
async fn an_invalid_entry_or_field_is_a_400_that_applies_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b"]).await;
    let first = app.pull(&q, json!({"batch_size": 1, "visibility_timeout_ms": 600_000})).await;
    let ack = json!([{"lease_id": lease(&first[0])}]);
    let too_many: Vec<Value> = (0..1001).map(|_| json!({"lease_id": "x"})).collect();
    for (body, needle) in [
        (json!({"acks": ack, "retries": [{"lease_id": "x", "delay_seconds": 86_401}]}), "retries[0].delay_seconds"),
        (json!({"acks": ack, "batch_size": 0}), "batch_size"),
        (json!({"acks": ack, "visibility_timeout_ms": 0}), "visibility_timeout_ms"),
        (json!({"acks": too_many}), "at most 1000"),
        (json!({"acks": [{"lease": "x"}]}), "lease_id"),
        (json!({"acks": "all"}), "acks"),
    ] {
        let resp = app.post(&format!("queues/{q}/messages/pull"), body.clone()).await;
        let message = resp.expect_error(400);
        assert!(message.contains(needle), "{body}: {message}");
    }
    assert_eq!(app.backlog(&q).await, 2, "no ack was applied");
    assert_eq!(bodies(&pull_answer(&app, &q, json!({})).await), ["b"], "no failed pull leased anything");
    assert_eq!(app.ack(&q, &[lease(&first[0])], json!([])).await["ackCount"], 1, "the lease is still good");
}

#[sqlx::test]
async fn a_pull_refused_for_its_queue_applies_none_of_its_answers(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a"]).await;
    let first = app.pull(&q, json!({"visibility_timeout_ms": 600_000})).await;
    app.patch(&format!("queues/{q}"), json!({"settings": {"delivery_paused": true}})).await.expect_ok();
    let body = json!({"acks": [{"lease_id": lease(&first[0])}]});
    app.post(&format!("queues/{q}/messages/pull"), body).await.expect_error(409);
    assert_eq!(app.backlog(&q).await, 1, "the ack of a refused pull was not applied");
}

/// An acked message whose lease ran out meanwhile is deleted by the pull carrying the ack, not leased
/// again by it.
#[sqlx::test]
async fn an_ack_of_a_lease_that_ran_out_deletes_the_message_rather_than_leasing_it_again(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["late"]).await;
    let first = app.pull(&q, json!({"visibility_timeout_ms": 600_000})).await;
    sqlx::query("update messages set available_at = now() - interval '1 second'").execute(&pool).await.unwrap();
    let answer = pull_answer(&app, &q, json!({"acks": [{"lease_id": lease(&first[0])}]})).await;
    assert_eq!(answer["ackCount"], 1, "{answer}");
    assert_eq!(answer["warnings"], json!({}));
    assert!(bodies(&answer).is_empty(), "the acked message is not delivered again: {answer}");
    assert_eq!(app.backlog(&q).await, 0);
}

/// The ack of an ordering key's message, carried by a pull, lets the key's next message go in time for
/// that pull.
#[sqlx::test]
async fn a_pull_carrying_the_ack_of_a_keys_message_gets_the_keys_next_one(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let messages: Vec<Value> =
        ["first", "second"].iter().map(|b| json!({"body": b, "content_type": "text", "ordering_key": "k"})).collect();
    app.post(&format!("queues/{q}/messages/batch"), json!({ "messages": messages })).await.expect_ok();
    let first = app.pull(&q, json!({"visibility_timeout_ms": 600_000})).await;
    assert_eq!(bodies(&json!({ "messages": first })), ["first"]);
    let answer = pull_answer(&app, &q, json!({"acks": [{"lease_id": lease(&first[0])}]})).await;
    assert_eq!(answer["ackCount"], 1, "{answer}");
    assert_eq!(bodies(&answer), ["second"], "{answer}");
}
