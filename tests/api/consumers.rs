use serde_json::json;
use sqlx::PgPool;

use crate::helpers::spawn_app;

#[sqlx::test]
async fn an_http_pull_consumer_gets_pull_defaults(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let resp = app.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull"})).await;
    let c = resp.expect_ok();
    assert_eq!(c["type"], "http_pull");
    assert_eq!(c["queue_id"], q.as_str());
    assert_eq!(c["dead_letter_queue"], "");
    assert_eq!(
        c["settings"],
        json!({"batch_size": 5, "max_retries": 3, "retry_delay": 0, "visibility_timeout_ms": 30000})
    );
    let queue = app.get(&format!("queues/{q}")).await;
    assert_eq!(queue.expect_ok()["consumers"][0]["consumer_id"], c["consumer_id"]);
    assert_eq!(queue.result()["consumers_total_count"], 1);
}

#[sqlx::test]
async fn a_queue_has_at_most_eight_consumers(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    for _ in 1..8 {
        app.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull"})).await.expect_ok();
    }
    let resp =
        app.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull", "dead_letter_queue": "dlq"})).await;
    assert!(resp.expect_error(409).contains("8 consumers"));
    assert_eq!(resp.headers["x-should-retry"], "false");
    assert_eq!(app.get("queues?name=dlq").await.expect_ok(), &json!([]), "a refused consumer makes no queue");
}

#[sqlx::test]
async fn a_webhook_consumer_shows_its_signing_secret_on_create_only(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let body = json!({"type": "webhook", "url": "https://example.com/hook", "settings": {"batch_size": 20, "max_wait_time_ms": 0}});
    let resp = app.post(&format!("queues/{q}/consumers"), body).await;
    let c = resp.expect_ok().clone();
    assert!(c["signing_secret"].as_str().unwrap().starts_with("whsec_"));
    assert_eq!(c["url"], "https://example.com/hook");
    assert_eq!(
        c["settings"],
        json!({"batch_size": 20, "max_retries": 3, "retry_delay": 0, "max_wait_time_ms": 0, "max_concurrency": null})
    );
    let id = c["consumer_id"].as_str().unwrap();
    let got = app.get(&format!("queues/{q}/consumers/{id}")).await;
    assert!(got.expect_ok().get("signing_secret").is_none());
    let rotated = app.post(&format!("queues/{q}/consumers/{id}/rotate_secret"), json!({})).await;
    let secret = rotated.expect_ok()["signing_secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"));
    assert_ne!(secret, c["signing_secret"].as_str().unwrap());
}

#[sqlx::test]
async fn only_webhook_consumers_rotate_secrets(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let c = app.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull"})).await;
    let id = c.expect_ok()["consumer_id"].as_str().unwrap().to_owned();
    app.post(&format!("queues/{q}/consumers/{id}/rotate_secret"), json!({})).await.expect_error(400);
}

#[sqlx::test]
async fn a_dead_letter_queue_is_created_when_missing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let resp = app
        .post(&format!("queues/{q}/consumers"), json!({"type": "http_pull", "dead_letter_queue": "orders-dlq"}))
        .await;
    assert_eq!(resp.expect_ok()["dead_letter_queue"], "orders-dlq");
    let list = app.get("queues?name=orders-dlq").await;
    assert_eq!(list.expect_ok().as_array().unwrap().len(), 1);
}

#[sqlx::test]
async fn bad_consumer_bodies_are_400s_that_create_nothing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    for (body, needle) in [
        (json!({}), "type"),
        (json!({"type": "worker"}), "worker"),
        (json!({"type": "queue"}), "type"),
        (json!({"type": "http_pull", "settings": {"batch_size": 0}}), "batch_size"),
        (json!({"type": "http_pull", "settings": {"batch_size": 101}}), "batch_size"),
        (json!({"type": "http_pull", "settings": {"max_retries": 101}}), "max_retries"),
        (json!({"type": "http_pull", "settings": {"retry_delay": 86401}}), "retry_delay"),
        (json!({"type": "http_pull", "settings": {"visibility_timeout_ms": 0}}), "visibility_timeout_ms"),
        (json!({"type": "http_pull", "settings": {"visibility_timeout_ms": 43200001}}), "visibility_timeout_ms"),
        (json!({"type": "http_pull", "settings": {"max_wait_time_ms": 10}}), "max_wait_time_ms"),
        (json!({"type": "http_pull", "url": "https://example.com"}), "url"),
        (json!({"type": "http_pull", "dead_letter_queue": "orders"}), "dead_letter_queue"),
        (json!({"type": "http_pull", "dead_letter_queue": "Bad Name"}), "dead_letter_queue"),
        (json!({"type": "webhook"}), "url"),
        (json!({"type": "webhook", "url": "ftp://example.com"}), "url"),
        (json!({"type": "webhook", "url": "https://x", "settings": {"max_wait_time_ms": 30001}}), "max_wait_time_ms"),
        (json!({"type": "webhook", "url": "https://x", "settings": {"max_concurrency": 0}}), "max_concurrency"),
        (
            json!({"type": "webhook", "url": "https://x", "settings": {"visibility_timeout_ms": 5}}),
            "visibility_timeout_ms",
        ),
        (json!({"type": "http_pull", "settings": {"batch_size": "ten"}}), "batch_size"),
    ] {
        let resp = app.post(&format!("queues/{q}/consumers"), body.clone()).await;
        let message = resp.expect_error(400);
        assert!(message.contains(needle), "{body}: {message}");
    }
    let list = app.get(&format!("queues/{q}/consumers")).await;
    assert_eq!(list.expect_ok(), &json!([]));
    assert_eq!(app.get("queues").await.body["result_info"]["total_count"], 1, "no dead-letter queue was made");
}

#[sqlx::test]
async fn updating_a_consumer_replaces_its_settings_but_not_its_type(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let body = json!({"type": "http_pull", "settings": {"batch_size": 50, "max_retries": 7}});
    let id =
        app.post(&format!("queues/{q}/consumers"), body).await.expect_ok()["consumer_id"].as_str().unwrap().to_owned();
    let path = format!("queues/{q}/consumers/{id}");
    let resp = app.put(&path, json!({"settings": {"max_retries": 1}, "dead_letter_queue": "dlq"})).await;
    let c = resp.expect_ok();
    assert_eq!(c["settings"]["batch_size"], 5, "omitted settings return to their defaults");
    assert_eq!(c["settings"]["max_retries"], 1);
    assert_eq!(c["dead_letter_queue"], "dlq");
    app.put(&path, json!({"type": "webhook", "url": "https://x"})).await.expect_error(400);
    app.put(&path, json!({"settings": {"batch_size": 1000}})).await.expect_error(400);
    assert_eq!(app.get(&path).await.expect_ok()["settings"]["max_retries"], 1);
}

#[sqlx::test]
async fn a_deleted_consumer_is_gone(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let id = app.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull"})).await.expect_ok()["consumer_id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.delete(&format!("queues/{q}/consumers/{id}")).await.expect_ok();
    app.get(&format!("queues/{q}/consumers/{id}")).await.expect_error(404);
    app.delete(&format!("queues/{q}/consumers/{id}")).await.expect_error(404);
    app.get(&format!("queues/{q}/consumers/not-an-id")).await.expect_error(400);
    app.post(&format!("queues/{q}/messages/pull"), json!({})).await.expect_error(409);
    app.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull"})).await.expect_ok();
}
