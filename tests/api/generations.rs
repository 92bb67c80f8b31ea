//! The message generations (`engine::rotation`): publishes store into the current generation; a turn
//! makes an empty one current, moves the last long-lived messages of the draining one to the old
//! generation with their bodies and leases intact, and truncates the draining one once empty; the count
//! deltas' half no longer written to is folded and truncated.

use std::time::Duration;

use serde_json::json;
use skiplock::engine::rotation::{Rotation, Turn};
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app};

/// Turns that never wait: a generation gives way at once and its messages move at once.
pub(crate) const AT_ONCE: Rotation = Rotation { every: Duration::ZERO, move_after: Duration::ZERO, most_moved: 10_000 };

async fn generation_of(pool: &PgPool, body: &str) -> i16 {
    sqlx::query_scalar(
        "select m.gen from messages m join message_bodies b on b.gen = m.gen and b.id = m.id
         where convert_from(b.body, 'UTF8') = $1",
    )
    .bind(body)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// An engine of its own, whose turns the test takes (the app's node takes them too, every 10 s).
pub(crate) async fn engine(pool: &PgPool) -> std::sync::Arc<skiplock::engine::Engine> {
    let limits = skiplock::engine::limits::Limits::default();
    skiplock::engine::Engine::new(pool.clone(), std::sync::Arc::default(), limits, Default::default()).await.unwrap()
}

#[sqlx::test]
async fn a_draining_generation_gives_its_long_lived_messages_to_the_old_one_and_is_truncated(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let engine = engine(&pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["acked", "leased"]).await;
    app.publish(&q, json!({"body": "later", "content_type": "text", "delay_seconds": 3600})).await;
    let got = app.pull(&q, json!({"batch_size": 2, "visibility_timeout_ms": 600_000})).await;
    app.ack(&q, &[lease(&got[0])], json!([])).await;
    assert_eq!(generation_of(&pool, "leased").await, 0, "publishes store into the current generation");

    // The node turns it too (every 10 s): a turn it takes at the same moment is skipped here.
    let mut turns = Vec::new();
    for _ in 0..20 {
        let turn = engine.rotate(AT_ONCE).await.unwrap();
        let truncated = turn == Turn::Truncated(0);
        if turn != Turn::Busy {
            turns.push(turn);
        }
        if truncated {
            break;
        }
    }
    assert_eq!(turns.first(), Some(&Turn::Switched { to: 1 }), "{turns:?}");
    assert!(turns.contains(&Turn::Moved { from: 0, count: 2 }), "{turns:?}");
    assert_eq!(turns.last(), Some(&Turn::Truncated(0)), "{turns:?}");
    for body in ["leased", "later"] {
        assert_eq!(generation_of(&pool, body).await, 2, "{body} lives on in the old generation");
    }
    let empty: i64 = sqlx::query_scalar("select count(*) from messages_0").fetch_one(&pool).await.unwrap();
    assert_eq!(empty, 0);

    // A moved message keeps its lease, its body and its place in the counts.
    assert_eq!(app.backlog(&q).await, 2);
    assert_eq!(app.ack(&q, &[lease(&got[1])], json!([])).await["ackCount"], 1);
    let peeked = app.post(&format!("queues/{q}/messages/peek"), json!({})).await;
    assert_eq!(peeked.expect_ok()["messages"][0]["body"], "later");
    assert_eq!(app.backlog(&q).await, 1);
    // Publishes now store into generation 1, and the next turn gives generation 0 back the turn.
    app.publish_texts(&q, &["next"]).await;
    assert_eq!(generation_of(&pool, "next").await, 1);
    assert_eq!(app.pull(&q, json!({})).await[0]["body"], "next");
    let mut turn = Turn::Busy;
    for _ in 0..20 {
        turn = engine.rotate(AT_ONCE).await.unwrap();
        if turn != Turn::Busy {
            break;
        }
    }
    assert_eq!(turn, Turn::Switched { to: 0 });
}

#[sqlx::test]
async fn an_ack_that_meets_its_message_being_moved_waits_for_the_move_and_finds_it_moved(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let engine = engine(&pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["leased"]).await;
    let got = app.pull(&q, json!({"visibility_timeout_ms": 600_000})).await;
    let mut turns = Vec::new();
    while turns.len() < 20 && turns.last() != Some(&Turn::Switched { to: 1 }) {
        turns.push(engine.rotate(AT_ONCE).await.unwrap());
    }
    assert_eq!(turns.last(), Some(&Turn::Switched { to: 1 }), "{turns:?}");

    // A turn that has moved the message and not yet committed, as the ack arrives.
    let mut turn = pool.begin().await.unwrap();
    assert!(skiplock::store::generations::take(&mut turn).await.unwrap().is_some());
    assert_eq!(skiplock::store::generations::move_to_old(&mut turn, 0, 10, 1_000).await.unwrap(), 1);
    let path = format!("queues/{q}/messages/ack");
    let ack = app.post(&path, json!({"acks": [{"lease_id": lease(&got[0])}]}));
    let commit_once_the_ack_waits = async {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "select count(*) from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            if waiting > 0 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the ack never waited for the move");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        turn.commit().await.unwrap();
    };
    let (acked, ()) = tokio::join!(ack, commit_once_the_ack_waits);
    assert_eq!(acked.expect_ok()["ackCount"], 1, "the ack is applied to the moved message, not failed");
    assert_eq!(app.backlog(&q).await, 0);
}

#[sqlx::test]
async fn the_count_deltas_half_no_longer_written_to_is_folded_and_truncated(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b", "c"]).await;
    // The deltas as the other half would hold them, written just before the clock's step.
    sqlx::query("update queue_count_deltas set half = 1 - half").execute(&pool).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let half = loop {
        let mut tx = pool.begin().await.unwrap();
        let truncated = skiplock::store::counts::fold_and_truncate(&mut tx, 20).await.unwrap();
        tx.commit().await.unwrap();
        if let Some((half, _)) = truncated {
            break half;
        }
        assert!(std::time::Instant::now() < deadline, "no half was folded and truncated");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let size: i64 = sqlx::query_scalar(&format!("select pg_relation_size('queue_count_deltas_{half}')"))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(size, 0, "the half's space is given back");
    assert_eq!(app.backlog(&q).await, 3, "every delta was folded before the truncation");
    let folded: i64 =
        sqlx::query_scalar("select coalesce(sum(messages), 0)::int8 from queue_counts").fetch_one(&pool).await.unwrap();
    let pending: i64 = sqlx::query_scalar("select coalesce(sum(messages), 0)::int8 from queue_count_deltas")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(folded + pending, 3);
}

#[sqlx::test]
async fn a_turn_does_not_lock_a_generation_that_still_holds_messages(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["waiting"]).await;
    let gen = generation_of(&pool, "waiting").await;

    // While a backlog drains, every claim and ack of its generation would wait behind a lock the turn
    // took only to find messages there.
    let mut tx = pool.begin().await.unwrap();
    let truncated = skiplock::store::generations::truncate_if_empty(&mut tx, gen, 20).await.unwrap();
    let locked: i64 = sqlx::query_scalar(
        "select count(*) from pg_locks
         where pid = pg_backend_pid() and mode = 'AccessExclusiveLock' and relation = $1::regclass",
    )
    .bind(format!("messages_{gen}"))
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert!(!truncated, "a generation holding a message is not truncated");
    assert_eq!(locked, 0, "the generation's messages were not locked");
    assert_eq!(app.backlog(&q).await, 1);
}
