use serde_json::json;
use sqlx::PgPool;

use crate::helpers::spawn_app;

#[sqlx::test]
async fn peek_shows_messages_without_leasing_them(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b", "c"]).await;
    let resp = app.post(&format!("queues/{q}/messages/peek"), json!({"batch_size": 2})).await;
    let peeked = resp.expect_ok()["messages"].as_array().unwrap().clone();
    assert_eq!(peeked.len(), 2);
    assert_eq!(peeked[0]["body"], "a");
    assert_eq!(peeked[0]["attempts"], 0);
    assert!(peeked[0]["ref"].is_string());
    assert!(peeked[0].get("lease_id").is_none());
    assert_eq!(app.pull(&q, json!({"batch_size": 10})).await.len(), 3, "peeked messages stay deliverable");
}

#[sqlx::test]
async fn purging_by_ref_deletes_exactly_those_messages(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let other = app.create_queue("other").await;
    app.publish_texts(&q, &["a", "b", "c"]).await;
    app.publish_texts(&other, &["x"]).await;
    let peeked = app.post(&format!("queues/{q}/messages/peek"), json!({})).await.expect_ok()["messages"].clone();
    let theirs = app.post(&format!("queues/{other}/messages/peek"), json!({})).await.expect_ok()["messages"].clone();
    let body = json!({"refs": [{"ref": peeked[0]["ref"]}, {"ref": peeked[2]["ref"]}, {"ref": theirs[0]["ref"]}, {"ref": "bogus"}]});
    let resp = app.post(&format!("queues/{q}/messages/purge"), body).await;
    let result = resp.expect_ok();
    assert_eq!(result["errors"], json!([]));
    let warnings = result["warnings"].as_object().unwrap();
    assert_eq!(warnings.len(), 2, "the other queue's ref and the bogus one: {warnings:?}");
    assert!(warnings.contains_key("bogus"));
    let left = app.pull(&q, json!({"batch_size": 10})).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["body"], "b");
    assert_eq!(app.backlog(&other).await, 1);
    let again = app.post(&format!("queues/{q}/messages/purge"), json!({"refs": [{"ref": peeked[0]["ref"]}]})).await;
    let warning = &again.expect_ok()["warnings"][peeked[0]["ref"].as_str().unwrap()];
    assert_eq!(warning, "the message is no longer in the queue");
}

#[sqlx::test]
async fn bad_peek_and_purge_requests_are_400s(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    for body in [json!({"batch_size": 0}), json!({"batch_size": 101}), json!({"batch_size": "all"})] {
        app.post(&format!("queues/{q}/messages/peek"), body).await.expect_error(400);
    }
    for body in [json!({}), json!({"refs": "all"}), json!({"refs": [{"id": "x"}]})] {
        app.post(&format!("queues/{q}/messages/purge"), body).await.expect_error(400);
    }
}
