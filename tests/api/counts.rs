use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{age_messages_two_minutes, lease, spawn_app, TestApp};

/// What the queue's metrics say against what its messages are: count, bytes, oldest publish time.
async fn assert_figures_match_messages(app: &TestApp, pool: &PgPool, queue: &str, when: &str) {
    let metrics: Value = app.get(&format!("queues/{queue}/metrics")).await.expect_ok().clone();
    let (count, bytes, oldest_ms): (i64, i64, Option<i64>) = sqlx::query_as(
        "select count(*), coalesce(sum(size), 0)::int8,
                floor(extract(epoch from min(published_at)) * 1000)::int8
         from messages where queue_id = $1::uuid",
    )
    .bind(queue)
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(metrics["backlog_count"], count, "count {when}");
    assert_eq!(metrics["backlog_bytes"], bytes, "bytes {when}");
    assert_eq!(metrics["oldest_message_timestamp_ms"], oldest_ms.unwrap_or(0), "oldest {when}");
}

async fn queue_id(app: &TestApp, name: &str) -> String {
    app.get(&format!("queues?name={name}")).await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned()
}

#[sqlx::test]
async fn backlog_figures_follow_every_way_messages_come_and_go_folded_or_not(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let orders =
        app.pull_queue("orders", json!({"dead_letter_queue": "orders-dlq", "settings": {"max_retries": 1}})).await;
    let audit = app.create_queue("audit").await;
    app.publish_texts(&orders, &["a", "bb", "ccc", "dddd", "eeeee"]).await;
    app.publish(&orders, json!({"body": {"k": "json"}, "content_type": "json", "delay_seconds": 600})).await;
    app.publish_texts(&audit, &["x", "yy"]).await;
    for q in [&orders, &audit] {
        assert_figures_match_messages(&app, &pool, q, "after publishing").await;
    }

    // Acked, retried into the dead-letter queue (a move between queues), and retried in place.
    let pulled = app.pull(&orders, json!({"batch_size": 3})).await;
    let retries = json!([{"lease_id": lease(&pulled[1])}, {"lease_id": lease(&pulled[2])}]);
    app.ack(&orders, &[lease(&pulled[0])], retries).await;
    let again = app.pull(&orders, json!({"batch_size": 10})).await;
    let exhausted: Vec<Value> =
        again.iter().filter(|m| m["attempts"] == 2).map(|m| json!({"lease_id": lease(m)})).collect();
    assert_eq!(exhausted.len(), 2, "the two retried messages came back for their last delivery");
    app.ack(&orders, &[], Value::Array(exhausted)).await;
    let dlq = queue_id(&app, "orders-dlq").await;
    assert_eq!(app.backlog(&dlq).await, 2);
    // A whole-queue purge and a retention sweep.
    app.post(&format!("queues/{audit}/purge"), json!({"delete_messages_permanently": true})).await.expect_ok();
    app.patch(&format!("queues/{dlq}"), json!({"settings": {"message_retention_period": 60}})).await.expect_ok();
    age_messages_two_minutes(&pool, &format!("queue_id = '{dlq}'")).await;
    assert_eq!(skiplock::engine::maintenance::sweep_expired(&pool).await.unwrap(), 2);
    for q in [&orders, &audit, &dlq] {
        assert_figures_match_messages(&app, &pool, q, "before folding").await;
    }

    skiplock::store::counts::fold(&pool).await.unwrap();
    let pending: i64 = sqlx::query_scalar("select count(*) from queue_count_deltas").fetch_one(&pool).await.unwrap();
    assert_eq!(pending, 0, "a fold takes every delta");
    for q in [&orders, &audit, &dlq] {
        assert_figures_match_messages(&app, &pool, q, "after folding").await;
    }
    let folded: Vec<(i64,)> = sqlx::query_as("select messages from queue_counts where queue_id = $1::uuid")
        .bind(&orders)
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(folded, [(3,)], "the fold wrote the queue's count into its row");
}

#[sqlx::test]
async fn a_queue_emptied_by_truncation_counts_nothing(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.create_queue("orders").await;
    app.publish_texts(&q, &["a", "b"]).await;
    skiplock::store::counts::fold(&pool).await.unwrap();
    sqlx::query("truncate messages, message_bodies").execute(&pool).await.unwrap();
    assert_figures_match_messages(&app, &pool, &q, "after a truncate").await;
    app.publish_texts(&q, &["c"]).await;
    assert_figures_match_messages(&app, &pool, &q, "after publishing again").await;
}

#[sqlx::test]
async fn the_oldest_time_moves_on_when_the_oldest_message_is_acked_and_the_sweep_runs(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["first"]).await;
    app.publish_texts(&q, &["second"]).await;
    let pulled = app.pull(&q, json!({"batch_size": 1})).await;
    assert_eq!(pulled[0]["body"], "first");
    app.ack(&q, &[lease(&pulled[0])], json!([])).await;

    skiplock::engine::maintenance::sweep_expired(&pool).await.unwrap();
    assert_figures_match_messages(&app, &pool, &q, "after the oldest was acked and the sweep ran").await;
}
