use serde_json::json;
use sqlx::PgPool;

use skiplock::engine::maintenance::{MessageTable, TableVacuum};

use crate::helpers::{age_messages_two_minutes, spawn_app};

#[sqlx::test]
async fn messages_past_their_queues_retention_are_deleted_delivered_or_not(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let short = app.pull_queue("short", json!({})).await;
    app.patch(&format!("queues/{short}"), json!({"settings": {"message_retention_period": 60}})).await.expect_ok();
    let long = app.create_queue("long").await;
    app.publish_texts(&short, &["old-waiting", "old-leased", "fresh"]).await;
    app.publish_texts(&long, &["old-but-kept"]).await;
    app.pull(&short, json!({"batch_size": 1})).await;
    // Age every message but "fresh" by two minutes rather than waiting for it.
    age_messages_two_minutes(
        &pool,
        "id in (select id from message_bodies where convert_from(body, 'UTF8') <> 'fresh')",
    )
    .await;
    let before_sweep = app.pull(&short, json!({"batch_size": 10})).await;
    let bodies: Vec<&str> = before_sweep.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["fresh"], "messages past retention are never delivered, swept or not");
    let deleted = skiplock::engine::maintenance::sweep_expired(&pool).await.unwrap();
    assert_eq!(deleted, 2);
    assert_eq!(app.backlog(&short).await, 1);
    assert_eq!(app.backlog(&long).await, 1, "the other queue keeps its 4-day retention");
    let left = app.post(&format!("queues/{short}/messages/peek"), json!({})).await;
    assert_eq!(left.expect_ok()["messages"][0]["body"], "fresh");
    assert_eq!(left.result()["messages"].as_array().unwrap().len(), 1);
}

/// The partitions of a message table, one per generation, as a SQL list.
fn partitions(table: &str) -> String {
    format!("'{table}_0', '{table}_1', '{table}_old'")
}

/// A message table's statistics, summed over its generations, as a subquery with the columns of
/// `pg_stat_user_tables` that the tests read.
fn family(table: &str) -> String {
    format!(
        "(select sum(n_dead_tup)::int8 as n_dead_tup, sum(n_tup_ins)::int8 as n_tup_ins,
                 sum(n_ins_since_vacuum)::int8 as n_ins_since_vacuum, sum(vacuum_count)::int8 as vacuum_count
          from pg_stat_user_tables where relname in ({}))",
        partitions(table)
    )
}

/// The number of message tables (of two) whose statistics, summed over their generations, satisfy
/// `condition`.
async fn tables_matching(pool: &PgPool, condition: &str) -> i64 {
    let query = format!(
        "select (select count(*) from {} t where {condition}) + (select count(*) from {} t where {condition})",
        family("messages"),
        family("message_bodies")
    );
    sqlx::query_scalar(&query).fetch_one(pool).await.unwrap()
}

async fn vacuum_message_tables(pool: &PgPool) {
    for table in MessageTable::ALL {
        TableVacuum::new(table).run_if_due(pool, 1).await.unwrap();
    }
}

/// One of a message table's statistics, e.g. `n_dead_tup`, summed over its generations.
async fn table_stat(pool: &PgPool, table: &str, column: &str) -> i64 {
    let query = format!("select coalesce({column}, 0) from {} t", family(table));
    sqlx::query_scalar(&query).fetch_one(pool).await.unwrap()
}

/// Waits until a table's statistic reaches `at_least`: backends report theirs up to ~10 s after
/// their commits.
async fn wait_for_stat(pool: &PgPool, table: &str, column: &str, at_least: i64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while table_stat(pool, table, column).await < at_least {
        assert!(std::time::Instant::now() < deadline, "{table}.{column} never reached {at_least}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[sqlx::test]
async fn the_message_tables_are_vacuumed_from_the_service_when_they_hold_dead_rows(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b", "c"]).await;
    // Only published to: nothing is dead, so nothing is vacuumed. A VACUUM reports its own
    // statistics before it returns, so a vacuum would show here at once.
    vacuum_message_tables(&pool).await;
    assert_eq!(tables_matching(&pool, "vacuum_count > 0").await, 0, "a table without dead rows was vacuumed");
    let pulled = app.pull(&q, json!({"batch_size": 3})).await;
    let leases: Vec<&str> = pulled.iter().map(crate::helpers::lease).collect();
    app.ack(&q, &leases, json!([])).await;
    // Backends report their dead rows to the statistics up to ~10 s after their commits, and a
    // report may land after a vacuum (counting its rows as dead again), so vacuum until the
    // statistics show both tables vacuumed and clean.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        vacuum_message_tables(&pool).await;
        if tables_matching(&pool, "vacuum_count > 0 and n_dead_tup = 0").await == 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the acks' dead rows were never vacuumed away");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[sqlx::test]
async fn a_drain_with_nothing_published_leaves_the_dead_bodies_until_new_ones_need_the_room(pool: PgPool) {
    // The rule is one generation's: new bodies in another one make no room in this one.
    let _rotation = crate::helpers::hold_the_rotation(&pool).await;
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b"]).await;
    let pulled = app.pull(&q, json!({"batch_size": 2})).await;
    let leases: Vec<&str> = pulled.iter().map(crate::helpers::lease).collect();
    app.ack(&q, &leases[..1], json!([])).await;
    let bodies = TableVacuum::new(MessageTable::Bodies);
    let messages = TableVacuum::new(MessageTable::Messages);
    wait_for_stat(&pool, "message_bodies", "n_tup_ins", 2).await;
    wait_for_stat(&pool, "message_bodies", "n_dead_tup", 1).await;
    assert!(bodies.run_if_due(&pool, 1).await.unwrap(), "bodies stored and deleted are vacuumed");
    wait_for_stat(&pool, "messages", "n_dead_tup", 1).await;
    assert!(messages.run_if_due(&pool, 1).await.unwrap());

    // Only acks since: dead rows, but no new body to make room for.
    app.ack(&q, &leases[1..], json!([])).await;
    wait_for_stat(&pool, "message_bodies", "n_dead_tup", 1).await;
    assert!(!bodies.run_if_due(&pool, 1).await.unwrap(), "a drain alone vacuumed the bodies");
    wait_for_stat(&pool, "messages", "n_dead_tup", 1).await;
    assert!(messages.run_if_due(&pool, 1).await.unwrap(), "the claims' dead rows are vacuumed in a drain too");

    app.publish_texts(&q, &["c"]).await;
    wait_for_stat(&pool, "message_bodies", "n_ins_since_vacuum", 1).await;
    assert!(bodies.run_if_due(&pool, 1).await.unwrap(), "a new body's arrival brings the vacuum back");
    assert_eq!(table_stat(&pool, "message_bodies", "vacuum_count").await, 2);

    // A vacuum by anyone else (another node, autovacuum, an operator) counts as the table's last one.
    app.publish_texts(&q, &["d"]).await;
    wait_for_stat(&pool, "message_bodies", "n_ins_since_vacuum", 1).await;
    sqlx::raw_sql("vacuum message_bodies").execute(&pool).await.unwrap();
    let pulled = app.pull(&q, json!({"batch_size": 2})).await;
    let leases: Vec<&str> = pulled.iter().map(crate::helpers::lease).collect();
    assert_eq!(leases.len(), 2);
    app.ack(&q, &leases, json!([])).await;
    wait_for_stat(&pool, "message_bodies", "n_dead_tup", 2).await;
    assert!(!bodies.run_if_due(&pool, 1).await.unwrap(), "the room was made by the other vacuum");
}
