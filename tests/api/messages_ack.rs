use std::time::Duration;

use serde_json::json;
use sqlx::PgPool;

use crate::helpers::{db_now_ms, lease, spawn_app};

#[sqlx::test]
async fn acked_messages_are_gone_for_good(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b", "c"]).await;
    let got = app.pull(&q, json!({"visibility_timeout_ms": 200})).await;
    let answer = app.ack(&q, &[lease(&got[0]), lease(&got[1])], json!([])).await;
    assert_eq!(answer, json!({"ackCount": 2, "retryCount": 0, "warnings": {}}));
    assert_eq!(app.backlog(&q).await, 1);
    let again = app.pull_until_some(&q, json!({"batch_size": 10}), Duration::from_secs(10)).await;
    assert_eq!(again.len(), 1, "only the unacked message comes back");
    assert_eq!(again[0]["body"], "c");
}

#[sqlx::test]
async fn an_ack_of_a_message_already_gone_is_not_counted_and_gets_a_warning(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b"]).await;
    let got = app.pull(&q, json!({})).await;
    assert_eq!(app.ack(&q, &[lease(&got[0])], json!([])).await["ackCount"], 1);
    let again = app.ack(&q, &[lease(&got[0]), lease(&got[1])], json!([])).await;
    assert_eq!(again["ackCount"], 1, "only the second message was still there: {again}");
    let warning = again["warnings"][lease(&got[0])].as_str().unwrap_or_default();
    assert!(warning.contains("already gone"), "{again}");
}

#[sqlx::test]
async fn a_retry_returns_the_message_after_its_delay_with_one_more_attempt(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["again"]).await;
    let got = app.pull(&q, json!({"visibility_timeout_ms": 600_000})).await;
    let retried_at = db_now_ms(&pool).await;
    let answer = app.ack(&q, &[], json!([{"lease_id": lease(&got[0]), "delay_seconds": 1}])).await;
    assert_eq!(answer, json!({"ackCount": 0, "retryCount": 1, "warnings": {}}));
    assert!(app.pull(&q, json!({})).await.is_empty(), "not before its delay");
    let again = app.pull_until_some(&q, json!({}), Duration::from_secs(10)).await;
    assert!(db_now_ms(&pool).await - retried_at >= 1000);
    assert_eq!(again[0]["id"], got[0]["id"]);
    assert_eq!(again[0]["attempts"], 2);
}

#[sqlx::test]
async fn a_retry_without_delay_uses_the_consumers_retry_delay(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({"settings": {"retry_delay": 120}})).await;
    app.publish_texts(&q, &["a", "b"]).await;
    let got = app.pull(&q, json!({})).await;
    let retries = json!([{"lease_id": lease(&got[0])}, {"lease_id": lease(&got[1]), "delay_seconds": 0}]);
    assert_eq!(app.ack(&q, &[], retries).await["retryCount"], 2);
    let waits: Vec<i64> = sqlx::query_scalar(
        "select round(extract(epoch from available_at - now()))::int8 from messages order by available_at",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(waits, [0, 120]);
    assert_eq!(app.pull(&q, json!({})).await.len(), 1, "delay 0 makes it available at once");
}

#[sqlx::test]
async fn a_retry_of_the_last_delivery_dead_letters_at_once(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({"dead_letter_queue": "dlq", "settings": {"max_retries": 1}})).await;
    app.publish_texts(&q, &["m"]).await;
    let first = app.pull(&q, json!({})).await;
    app.ack(&q, &[], json!([{"lease_id": lease(&first[0])}])).await;
    let second = app.pull(&q, json!({})).await;
    assert_eq!(second[0]["attempts"], 2);
    assert_eq!(app.ack(&q, &[], json!([{"lease_id": lease(&second[0]), "delay_seconds": 600}])).await["retryCount"], 1);
    assert_eq!(app.backlog(&q).await, 0);
    let dlq = app.get("queues?name=dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    assert_eq!(app.backlog(&dlq).await, 1);
}

#[sqlx::test]
async fn acks_are_permissive_even_with_an_expired_lease(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["m"]).await;
    let first = app.pull(&q, json!({"visibility_timeout_ms": 100})).await;
    let second = app.pull_until_some(&q, json!({}), Duration::from_secs(10)).await;
    assert_eq!(second[0]["attempts"], 2, "delivered again to another consumer");
    let answer = app.ack(&q, &[lease(&first[0])], json!([])).await;
    assert_eq!(answer["ackCount"], 1);
    assert_eq!(answer["warnings"], json!({}));
    assert_eq!(app.backlog(&q).await, 0, "the old lease still acks the message");
    // Acking again (a lost answer, retried) is harmless: a 2xx that counts nothing and says why.
    let again = app.ack(&q, &[lease(&second[0])], json!([])).await;
    assert_eq!(again["ackCount"], 0, "{again}");
    assert!(again["warnings"][lease(&second[0])].as_str().unwrap_or_default().contains("already gone"), "{again}");
}

#[sqlx::test]
async fn a_retry_with_a_stale_lease_changes_nothing_and_warns(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["m"]).await;
    let first = app.pull(&q, json!({"visibility_timeout_ms": 100})).await;
    let second = app.pull_until_some(&q, json!({"visibility_timeout_ms": 600_000}), Duration::from_secs(10)).await;
    let answer = app.ack(&q, &[], json!([{"lease_id": lease(&first[0])}])).await;
    assert_eq!(answer["retryCount"], 0);
    assert!(answer["warnings"][lease(&first[0])].as_str().unwrap().contains("no longer"));
    assert!(app.pull(&q, json!({})).await.is_empty(), "the current lease still holds the message");
    assert_eq!(app.ack(&q, &[lease(&second[0])], json!([])).await["ackCount"], 1);
}

#[sqlx::test]
async fn forged_and_other_queues_lease_ids_change_nothing_and_warn(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let other = app.pull_queue("other", json!({})).await;
    app.publish_texts(&other, &["theirs"]).await;
    let theirs = app.pull(&other, json!({})).await;
    let forged = format!("{}A", &lease(&theirs[0])[..lease(&theirs[0]).len() - 1]);
    let answer = app.ack(&q, &[lease(&theirs[0]), "garbage", &forged], json!([{"lease_id": lease(&theirs[0])}])).await;
    assert_eq!(answer["ackCount"], 0);
    assert_eq!(answer["retryCount"], 0);
    let warnings = answer["warnings"].as_object().unwrap();
    for key in [lease(&theirs[0]), "garbage", forged.as_str()] {
        assert!(warnings.contains_key(key), "{key} should be warned about: {warnings:?}");
    }
    assert_eq!(app.backlog(&other).await, 1, "the other queue's message is untouched");
}

#[sqlx::test]
async fn an_invalid_value_in_an_ack_request_applies_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b"]).await;
    let got = app.pull(&q, json!({})).await;
    let body = json!({
        "acks": [{"lease_id": lease(&got[0])}],
        "retries": [{"lease_id": lease(&got[1]), "delay_seconds": 86401}],
    });
    let resp = app.post(&format!("queues/{q}/messages/ack"), body).await;
    assert!(resp.expect_error(400).contains("retries[0].delay_seconds"));
    assert_eq!(resp.error_code(), 10202);
    assert_eq!(app.backlog(&q).await, 2, "the ack in the same request was not applied");
    for (body, needle) in [
        (json!({"acks": "all"}), "acks"),
        (json!({"acks": [{"lease": "x"}]}), "lease_id"),
        (json!({"retries": [{"lease_id": 5}]}), "lease_id"),
        (json!({"nacks": []}), "nacks"),
    ] {
        let message = app.post(&format!("queues/{q}/messages/ack"), body.clone()).await.expect_error(400);
        assert!(message.contains(needle), "{body}: {message}");
    }
}

#[sqlx::test]
async fn acking_on_a_queue_without_a_consumer_still_works(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let resp = app.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull"})).await;
    let consumer = resp.expect_ok()["consumer_id"].as_str().unwrap().to_owned();
    app.publish_texts(&q, &["m"]).await;
    let got = app.pull(&q, json!({})).await;
    app.delete(&format!("queues/{q}/consumers/{consumer}")).await.expect_ok();
    assert_eq!(app.ack(&q, &[lease(&got[0])], json!([])).await["ackCount"], 1);
    assert_eq!(app.backlog(&q).await, 0);
}

#[sqlx::test]
async fn acking_on_a_deleted_queue_is_a_404_whatever_the_request_holds(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["m"]).await;
    let got = app.pull(&q, json!({})).await;
    app.delete(&format!("queues/{q}")).await.expect_ok();
    let lease_id = lease(&got[0]);
    for body in [
        json!({"acks": [{"lease_id": lease_id}]}),
        json!({"retries": [{"lease_id": lease_id}]}),
        json!({"acks": [{"lease_id": "not-a-lease"}]}),
        json!({}),
    ] {
        app.post(&format!("queues/{q}/messages/ack"), body).await.expect_error(404);
    }
}
