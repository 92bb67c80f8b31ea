use std::time::Duration;

use serde_json::json;
use sqlx::PgPool;

use crate::helpers::spawn_app;

#[sqlx::test]
async fn a_created_queue_has_cloudflare_defaults(pool: PgPool) {
    let app = spawn_app(pool).await;
    let resp = app.post("queues", json!({"queue_name": "orders"})).await;
    let queue = resp.expect_ok();
    assert_eq!(queue["queue_name"], "orders");
    assert_eq!(queue["queue_id"].as_str().unwrap().len(), 32);
    assert_eq!(
        queue["settings"],
        json!({"delivery_delay": 0, "delivery_paused": false, "message_retention_period": 345600, "idempotency_window": 300})
    );
    assert_eq!(queue["consumers"], json!([]));
    assert_eq!(queue["producers_total_count"], 0);
    assert!(queue["created_on"].as_str().unwrap().ends_with('Z'));
    assert_eq!(resp.body["errors"], json!([]));
    assert_eq!(resp.body["messages"], json!([]));
}

#[sqlx::test]
async fn a_duplicate_name_is_a_409_that_retrying_cannot_fix(pool: PgPool) {
    let app = spawn_app(pool).await;
    app.create_queue("orders").await;
    let resp = app.post("queues", json!({"queue_name": "orders"})).await;
    assert!(resp.expect_error(409).contains("orders"));
    assert_eq!(resp.headers["x-should-retry"], "false");
}

#[sqlx::test]
async fn bad_queue_names_and_settings_are_400s_naming_the_field(pool: PgPool) {
    let app = spawn_app(pool).await;
    for (body, needle) in [
        (json!({}), "queue_name"),
        (json!({"queue_name": ""}), "queue_name"),
        (json!({"queue_name": "Upper"}), "queue_name"),
        (json!({"queue_name": "a".repeat(64)}), "queue_name"),
        (json!({"queue_name": 7}), "queue_name"),
        (json!({"queue_name": "q", "settings": {"delivery_delay": 86401}}), "delivery_delay"),
        (json!({"queue_name": "q", "settings": {"delivery_delay": -1}}), "delivery_delay"),
        (json!({"queue_name": "q", "settings": {"message_retention_period": 59}}), "message_retention_period"),
        (json!({"queue_name": "q", "settings": {"message_retention_period": 1209601}}), "message_retention_period"),
        (json!({"queue_name": "q", "settings": {"delivery_paused": "yes"}}), "delivery_paused"),
        (json!({"queue_name": "q", "settings": {"idempotency_window": -1}}), "idempotency_window"),
        (json!({"queue_name": "q", "settings": {"idempotency_window": 604801}}), "idempotency_window"),
        (json!({"queue_name": "q", "settings": {"colour": "red"}}), "colour"),
    ] {
        let resp = app.post("queues", body.clone()).await;
        let message = resp.expect_error(400);
        assert!(message.contains(needle), "{body}: {message}");
        assert_eq!(resp.headers["x-should-retry"], "false");
    }
    assert_eq!(app.get("queues").await.body["result_info"]["total_count"], 0, "nothing was created");
}

#[sqlx::test]
async fn queues_list_by_page_and_by_repeated_name(pool: PgPool) {
    let app = spawn_app(pool).await;
    for name in ["a", "b", "c"] {
        app.create_queue(name).await;
    }
    let resp = app.get("queues?per_page=2&page=2").await;
    let result = resp.expect_ok();
    assert_eq!(result.as_array().unwrap().len(), 1);
    assert_eq!(result[0]["queue_name"], "c");
    assert_eq!(
        resp.body["result_info"],
        json!({"page": 2, "per_page": 2, "count": 1, "total_count": 3, "total_pages": 2})
    );
    let resp = app.get("queues?name=a&name=c").await;
    let names: Vec<&str> =
        resp.expect_ok().as_array().unwrap().iter().map(|q| q["queue_name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "c"]);
    app.get("queues?per_page=0").await.expect_error(400);
    app.get("queues?name=%00").await.expect_error(400);
    app.get("queues?page=x").await.expect_error(400);
}

#[sqlx::test]
async fn unknown_and_malformed_queue_ids_are_404_and_400(pool: PgPool) {
    let app = spawn_app(pool).await;
    let resp = app.get(&format!("queues/{}", "0".repeat(32))).await;
    resp.expect_error(404);
    assert_eq!(resp.error_code(), 10104);
    let resp = app.get("queues/not-an-id").await;
    resp.expect_error(400);
    assert_eq!(resp.error_code(), 10107);
}

#[sqlx::test]
async fn put_replaces_settings_and_patch_changes_only_what_it_names(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let resp = app.patch(&format!("queues/{q}"), json!({"settings": {"delivery_delay": 30}})).await;
    assert_eq!(resp.expect_ok()["settings"]["delivery_delay"], 30);
    let resp = app.patch(&format!("queues/{q}"), json!({"settings": {"delivery_paused": true}})).await;
    let settings = &resp.expect_ok()["settings"];
    assert_eq!(settings["delivery_delay"], 30, "PATCH keeps what it does not name");
    assert_eq!(settings["delivery_paused"], true);
    let resp = app
        .put(&format!("queues/{q}"), json!({"queue_name": "orders", "settings": {"message_retention_period": 600}}))
        .await;
    assert_eq!(
        resp.expect_ok()["settings"],
        json!({"delivery_delay": 0, "delivery_paused": false, "message_retention_period": 600, "idempotency_window": 300}),
        "PUT returns omitted settings to their defaults"
    );
    let resp = app.put(&format!("queues/{q}"), json!({"queue_name": "renamed"})).await;
    assert_eq!(resp.expect_ok()["queue_name"], "renamed");
    app.create_queue("other").await;
    app.put(&format!("queues/{q}"), json!({"queue_name": "other"})).await.expect_error(409);
    app.patch(&format!("queues/{q}"), json!({"settings": {"delivery_delay": 99999}})).await.expect_error(400);
    assert_eq!(app.get(&format!("queues/{q}")).await.expect_ok()["settings"]["delivery_delay"], 0);
}

#[sqlx::test]
async fn deleting_a_queue_deletes_its_consumer_and_messages(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b"]).await;
    app.delete(&format!("queues/{q}")).await.expect_ok();
    app.get(&format!("queues/{q}")).await.expect_error(404);
    app.delete(&format!("queues/{q}")).await.expect_error(404);
    let left: i64 = sqlx::query_scalar("select (select count(*) from messages) + (select count(*) from message_bodies) + (select count(*) from consumers)")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
    app.create_queue("orders").await; // the name is free again
}

#[sqlx::test]
async fn a_queue_is_deleted_at_once_while_an_ack_holds_a_message_and_the_rest_goes_after(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("busy", json!({})).await;
    app.publish_texts(&q, &["a", "b", "c"]).await;
    let queue = uuid::Uuid::parse_str(&q).unwrap();
    // A statement in flight (an ack, a claim) holds one of the queue's rows until it commits.
    let mut held = pool.begin().await.unwrap();
    sqlx::query("select id from messages where queue_id = $1 limit 1 for update")
        .bind(queue)
        .fetch_one(&mut *held)
        .await
        .unwrap();
    let deleted = tokio::time::timeout(Duration::from_secs(20), app.delete(&format!("queues/{q}"))).await;
    deleted.expect("the deletion does not wait for the held row").expect_ok();
    app.get(&format!("queues/{q}")).await.expect_error(404);
    let left = || async {
        sqlx::query_scalar::<_, i64>(
            "select (select count(*) from messages where queue_id = $1) + (select count(*) from deleted_queues)",
        )
        .bind(queue)
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    assert_eq!(left().await, 2, "the held message, and the deletion waiting for it");
    held.rollback().await.unwrap();
    let finished = skiplock::engine::maintenance::clear_deleted_queues(&pool).await.unwrap();
    assert_eq!((finished, left().await), (1, 0), "the upkeep deletes what was held, then forgets the queue");
}

#[sqlx::test]
async fn metrics_count_every_unacked_message_leased_and_delayed_included(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let empty = app.get(&format!("queues/{q}/metrics")).await;
    assert_eq!(empty.expect_ok(), &json!({"backlog_count": 0, "backlog_bytes": 0, "oldest_message_timestamp_ms": 0}));
    app.publish_texts(&q, &["ab", "cde"]).await;
    app.publish(&q, json!({"body": "later", "content_type": "text", "delay_seconds": 600})).await;
    let pulled = app.pull(&q, json!({"batch_size": 1})).await;
    assert_eq!(pulled.len(), 1);
    let metrics = app.get(&format!("queues/{q}/metrics")).await;
    let m = metrics.expect_ok();
    assert_eq!(m["backlog_count"], 3);
    assert_eq!(m["backlog_bytes"], 10);
    assert_eq!(m["oldest_message_timestamp_ms"], pulled[0]["timestamp_ms"]);
}

#[sqlx::test]
async fn a_purge_needs_confirmation_and_removes_every_message(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let before = app.get(&format!("queues/{q}/purge")).await;
    assert_eq!(before.expect_ok(), &json!({"completed": "true"}));
    app.publish_texts(&q, &["a", "b", "c"]).await;
    app.pull(&q, json!({"batch_size": 1})).await;
    for body in
        [json!({}), json!({"delete_messages_permanently": false}), json!({"delete_messages_permanently": "true"})]
    {
        app.post(&format!("queues/{q}/purge"), body).await.expect_error(400);
    }
    assert_eq!(app.backlog(&q).await, 3, "a refused purge deletes nothing");
    let resp = app.post(&format!("queues/{q}/purge"), json!({"delete_messages_permanently": true})).await;
    assert_eq!(resp.expect_ok()["queue_id"], q.as_str());
    assert_eq!(app.backlog(&q).await, 0);
    let status = app.get(&format!("queues/{q}/purge")).await;
    assert_eq!(status.expect_ok()["completed"], "true");
    assert!(status.result()["started_at"].is_string());
}
