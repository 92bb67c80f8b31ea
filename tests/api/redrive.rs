//! Dead-letter sources and redrive: a dead-lettered message shows where it came from, a dead-letter
//! queue's stats count its sources, and redrive tasks move messages back exactly once.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{lease, new_account, spawn_app, TestApp};
use crate::process::{database_url, free_port, Server};
use skiplock::auth::Scope;

/// A queue `name` whose pull consumer dead-letters into `dlq` after one delivery; returns its id.
pub(crate) async fn source_queue(app: &TestApp, name: &str, dlq: &str) -> String {
    app.pull_queue(name, json!({"dead_letter_queue": dlq, "settings": {"max_retries": 0}})).await
}

/// Publishes `n` text messages to `queue` and dead-letters all of them by retrying their one delivery;
/// returns their ids.
pub(crate) async fn dead_letter(app: &TestApp, queue: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let texts: Vec<String> = chunk.iter().map(|i| format!("m{i}")).collect();
        app.publish_texts(queue, &texts.iter().map(String::as_str).collect::<Vec<_>>()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while ids.len() < n {
        assert!(Instant::now() < deadline, "only {} of {n} messages were dead-lettered", ids.len());
        let pulled = app.pull(queue, json!({"batch_size": 100, "visibility_timeout_ms": 60000})).await;
        let retries: Vec<Value> = pulled.iter().map(|m| json!({"lease_id": lease(m)})).collect();
        ids.extend(pulled.iter().map(|m| m["id"].as_str().unwrap().to_owned()));
        if !retries.is_empty() {
            app.ack(queue, &[], json!(retries)).await;
        }
    }
    ids
}

async fn queue_named(app: &TestApp, name: &str) -> String {
    app.get(&format!("queues?name={name}")).await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned()
}

#[sqlx::test]
async fn a_dead_lettered_message_shows_its_source_in_peek_pull_and_stats(pool: PgPool) {
    let app = spawn_app(pool).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    let refunds = source_queue(&app, "refunds", "dlq").await;
    let before = crate::helpers::db_now_ms(&app.pool).await;
    dead_letter(&app, &orders, 3).await;
    dead_letter(&app, &refunds, 2).await;
    let dlq = queue_named(&app, "dlq").await;

    let peeked = app.post(&format!("queues/{dlq}/messages/peek"), json!({"batch_size": 10})).await;
    let peeked = peeked.expect_ok()["messages"].as_array().unwrap().clone();
    assert_eq!(peeked.len(), 5);
    for m in &peeked {
        let source = m["metadata"]["dead_letter_source_queue"].as_str().unwrap();
        assert!(source == "orders" || source == "refunds", "{m}");
        let at = m["metadata"]["dead_lettered_at_ms"].as_i64().unwrap();
        assert!(at >= before - 1000, "dead_lettered_at_ms {at} is before the test began ({before})");
    }
    app.post(&format!("queues/{dlq}/consumers"), json!({"type": "http_pull"})).await.expect_ok();
    let pulled = app.pull(&dlq, json!({"batch_size": 10})).await;
    assert_eq!(pulled.len(), 5);
    assert!(pulled.iter().all(|m| m["metadata"]["dead_letter_source_queue"].is_string()), "{pulled:?}");
    // A message published straight to a queue shows neither field.
    app.publish_texts(&orders, &["fresh"]).await;
    let fresh = app.post(&format!("queues/{orders}/messages/peek"), json!({})).await;
    let metadata = &fresh.expect_ok()["messages"][0]["metadata"];
    assert!(metadata.get("dead_letter_source_queue").is_none() && metadata.get("dead_lettered_at_ms").is_none());

    let stats = app.get(&format!("queues/{dlq}/stats")).await;
    assert_eq!(
        stats.expect_ok()["dead_letter_sources"],
        json!([
            {"queue_id": orders, "queue_name": "orders", "message_count": 3},
            {"queue_id": refunds, "queue_name": "refunds", "message_count": 2},
        ])
    );
    // A deleted source still counts, without a name.
    app.delete(&format!("queues/{refunds}")).await.expect_ok();
    let stats = app.get("stats/queues").await;
    let dlq_stats = stats.expect_ok().as_array().unwrap().iter().find(|s| s["queue_name"] == "dlq").unwrap().clone();
    assert_eq!(
        dlq_stats["dead_letter_sources"],
        json!([
            {"queue_id": orders, "queue_name": "orders", "message_count": 3},
            {"queue_id": refunds, "queue_name": null, "message_count": 2},
        ])
    );
    let peeked = app.post(&format!("queues/{dlq}/messages/peek"), json!({"batch_size": 10})).await;
    let orphans = peeked.expect_ok()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["metadata"].get("dead_letter_source_queue").is_none())
        .count();
    assert_eq!(orphans, 2, "a deleted source's messages keep dead_lettered_at_ms only");
}

#[sqlx::test]
async fn a_webhook_delivery_of_a_dead_lettered_message_carries_its_source(pool: PgPool) {
    use crate::receiver::{Answer, Receiver};
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue("dlq", &receiver.url, json!({})).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    dead_letter(&app, &orders, 1).await;
    app.publish_texts(&hook.queue, &["direct"]).await;
    let d = crate::helpers::dispatcher(&pool, Duration::from_secs(5)).await;
    let consumer = crate::helpers::webhook_consumer(&d, &hook).await;
    d.dispatch_once(&consumer).await.unwrap().expect("a batch");
    let got = receiver.received();
    let messages = got[0].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    let dead = messages.iter().find(|m| m["body"] != "direct").unwrap();
    assert_eq!(dead["metadata"]["dead_letter_source_queue"], "orders");
    assert!(dead["metadata"]["dead_lettered_at_ms"].as_i64().unwrap() > 0);
    let direct = messages.iter().find(|m| m["body"] == "direct").unwrap();
    assert!(direct.get("metadata").is_none(), "other payloads are unchanged: {direct}");
}

/// Waits until the task is no longer running; returns it.
async fn finished(app: &TestApp, queue: &str, task: &Value, within: Duration) -> Value {
    let id = task["redrive_id"].as_str().unwrap();
    let deadline = Instant::now() + within;
    loop {
        let got = app.get(&format!("queues/{queue}/redrive/{id}")).await.expect_ok().clone();
        if got["status"] != "running" {
            return got;
        }
        assert!(Instant::now() < deadline, "the task is still running: {got}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn start(app: &TestApp, queue: &str, body: Value) -> Value {
    let resp = app.post(&format!("queues/{queue}/redrive"), body).await;
    assert_eq!(resp.status, 201, "{:?}", resp.body);
    resp.body["result"].clone()
}

/// The ids of the messages each queue holds, from the table itself.
async fn ids_in(pool: &PgPool, queue: &str) -> BTreeSet<String> {
    let rows: Vec<(uuid::Uuid,)> = sqlx::query_as("select id from messages where queue_id = $1::uuid")
        .bind(queue.parse::<uuid::Uuid>().unwrap())
        .fetch_all(pool)
        .await
        .unwrap();
    rows.into_iter().map(|(id,)| id.simple().to_string()).collect()
}

/// Every queue's count (folded and unfolded deltas) equals its rows.
async fn assert_counts_exact(pool: &PgPool) {
    let wrong: Vec<(uuid::Uuid, i64, i64)> = sqlx::query_as(
        "select q.id, coalesce(b.messages, 0), (select count(*) from messages m where m.queue_id = q.id)
         from queues q left join queue_backlogs b on b.queue_id = q.id
         where coalesce(b.messages, 0) <> (select count(*) from messages m where m.queue_id = q.id)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(wrong.is_empty(), "counts differ from the rows (queue, counted, rows): {wrong:?}");
}

#[sqlx::test]
async fn a_redrive_returns_each_message_to_its_source_as_it_was_published(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    let refunds = source_queue(&app, "refunds", "dlq").await;
    let order_ids: BTreeSet<String> = dead_letter(&app, &orders, 3).await.into_iter().collect();
    let refund_ids: BTreeSet<String> = dead_letter(&app, &refunds, 2).await.into_iter().collect();
    let dlq = queue_named(&app, "dlq").await;
    let peeked = app.post(&format!("queues/{dlq}/messages/peek"), json!({"batch_size": 10})).await;
    let before = peeked.expect_ok()["messages"].as_array().unwrap().clone();

    let task = start(&app, &dlq, json!({})).await;
    assert_eq!((task["total"].as_i64(), task["destination_queue"].is_null()), (Some(5), true), "{task}");
    assert!(task["redrive_id"].as_str().unwrap().len() == 32 && task["started_at"].is_string());
    let done = finished(&app, &dlq, &task, Duration::from_secs(10)).await;
    assert_eq!(
        (done["status"].as_str(), done["moved"].as_i64(), done["total"].as_i64()),
        (Some("completed"), Some(5), Some(5))
    );
    assert!(done["error"].is_null() && done["finished_at"].is_string(), "{done}");

    assert_eq!(ids_in(&pool, &orders).await, order_ids);
    assert_eq!(ids_in(&pool, &refunds).await, refund_ids);
    assert!(ids_in(&pool, &dlq).await.is_empty());
    assert_counts_exact(&pool).await;
    assert_eq!((app.backlog(&orders).await, app.backlog(&refunds).await, app.backlog(&dlq).await), (3, 2, 0));

    // Deliverable at once, attempts from 1 again, with its id, body and publish time.
    let pulled = app.pull(&orders, json!({"batch_size": 10})).await;
    assert_eq!(pulled.len(), 3);
    for m in &pulled {
        let was = before.iter().find(|b| b["id"] == m["id"]).expect("the same id");
        assert_eq!((&m["body"], &m["timestamp_ms"], &m["attempts"]), (&was["body"], &was["timestamp_ms"], &json!(1)));
        assert_eq!(m["metadata"]["CF-Content-Type"], "text");
        assert!(m["metadata"].get("dead_letter_source_queue").is_none(), "no longer dead-lettered: {m}");
    }
    let stats = app.get(&format!("queues/{dlq}/stats")).await;
    assert_eq!(stats.expect_ok()["dead_letter_sources"][0]["message_count"], 0);
    let listed = app.get(&format!("queues/{dlq}/redrive")).await;
    assert_eq!(listed.expect_ok().as_array().unwrap().len(), 1);
    assert_eq!(app.metrics.redriven.get(), 5, "the node counts what it moved");
    skiplock::engine::gauges::refresh(&app.metrics, &pool, 100).await.unwrap();
    let text = app.metrics.render(None);
    assert!(text.contains("skiplock_redrive_tasks{status=\"completed\"} 1"), "{text}");
    assert!(text.contains("skiplock_redrive_tasks{status=\"running\"} 0"), "{text}");
    assert!(text.contains("skiplock_messages_redriven_total 5"), "{text}");
}

#[sqlx::test]
async fn a_redrive_to_a_named_queue_takes_refs_and_a_count_cap(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    dead_letter(&app, &orders, 6).await;
    let dlq = queue_named(&app, "dlq").await;
    let elsewhere = app.create_queue("elsewhere").await;

    let peeked = app.post(&format!("queues/{dlq}/messages/peek"), json!({"batch_size": 10})).await;
    let peeked = peeked.expect_ok()["messages"].as_array().unwrap().clone();
    let chosen: BTreeSet<String> = peeked[..2].iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect();
    let refs: Vec<Value> = peeked[..2].iter().map(|m| json!({"ref": m["ref"]})).collect();
    let task = start(&app, &dlq, json!({"destination_queue": "elsewhere", "refs": refs})).await;
    assert_eq!((task["total"].as_i64(), task["destination_queue"].as_str()), (Some(2), Some("elsewhere")));
    let done = finished(&app, &dlq, &task, Duration::from_secs(10)).await;
    assert_eq!((done["status"].as_str(), done["moved"].as_i64()), (Some("completed"), Some(2)));
    assert_eq!(ids_in(&pool, &elsewhere).await, chosen, "only the messages named by refs moved");

    let task = start(&app, &dlq, json!({"max_messages": 3})).await;
    assert_eq!(task["total"], 3);
    let done = finished(&app, &dlq, &task, Duration::from_secs(10)).await;
    assert_eq!((done["moved"].as_i64(), ids_in(&pool, &dlq).await.len()), (Some(3), 1));
    assert_eq!(ids_in(&pool, &orders).await.len(), 3);
    // Nothing to move: completed at once.
    let nothing = app.create_queue("nothing").await;
    let empty = start(&app, &nothing, json!({"destination_queue": "orders"})).await;
    assert_eq!((empty["status"].as_str(), empty["total"].as_i64()), (Some("completed"), Some(0)));
    let tasks = app.get(&format!("queues/{dlq}/redrive")).await;
    let totals: Vec<i64> = tasks.expect_ok().as_array().unwrap().iter().map(|t| t["total"].as_i64().unwrap()).collect();
    assert_eq!(totals, [3, 2], "newest first");
    assert_counts_exact(&pool).await;
}

#[sqlx::test]
async fn a_message_whose_source_is_gone_stays_and_the_error_says_so(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    let refunds = source_queue(&app, "refunds", "dlq").await;
    dead_letter(&app, &orders, 3).await;
    let stranded: BTreeSet<String> = dead_letter(&app, &refunds, 2).await.into_iter().collect();
    let dlq = queue_named(&app, "dlq").await;
    app.delete(&format!("queues/{refunds}")).await.expect_ok();

    let task = start(&app, &dlq, json!({})).await;
    let done = finished(&app, &dlq, &task, Duration::from_secs(10)).await;
    assert_eq!(
        (done["status"].as_str(), done["moved"].as_i64(), done["total"].as_i64()),
        (Some("failed"), Some(3), Some(5))
    );
    assert!(done["error"].as_str().unwrap().contains("2 messages stayed"), "{done}");
    assert_eq!(ids_in(&pool, &dlq).await, stranded);

    // Messages dead-lettered before sources were recorded move only to a named queue.
    sqlx::query("update messages set dead_letter_source = null, dead_lettered_at = null").execute(&pool).await.unwrap();
    let task = start(&app, &dlq, json!({})).await;
    let done = finished(&app, &dlq, &task, Duration::from_secs(10)).await;
    assert_eq!((done["status"].as_str(), done["moved"].as_i64()), (Some("failed"), Some(0)));
    let task = start(&app, &dlq, json!({"destination_queue": "orders"})).await;
    let done = finished(&app, &dlq, &task, Duration::from_secs(10)).await;
    assert_eq!((done["status"].as_str(), done["moved"].as_i64()), (Some("completed"), Some(2)));
    assert_eq!(ids_in(&pool, &orders).await.len(), 5);
    assert_counts_exact(&pool).await;
}

#[sqlx::test]
async fn one_running_task_per_queue_a_pace_and_a_cancel(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    dead_letter(&app, &orders, 30).await;
    let dlq = queue_named(&app, "dlq").await;

    let began = Instant::now();
    let task = start(&app, &dlq, json!({"rate_per_second": 10})).await;
    let second = app.post(&format!("queues/{dlq}/redrive"), json!({})).await;
    assert!(second.expect_error(409).contains("already has a running redrive task"));
    // Ten a second: the first ten move at once, the next ten a second later.
    let id = task["redrive_id"].as_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t = app.get(&format!("queues/{dlq}/redrive/{id}")).await.expect_ok().clone();
        let moved = t["moved"].as_i64().unwrap();
        if moved >= 20 {
            assert!(began.elapsed() >= Duration::from_millis(900), "20 moved after {:?} at 10/s", began.elapsed());
            break;
        }
        assert!(Instant::now() < deadline, "the task stalled: {t}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancelled = app.delete(&format!("queues/{dlq}/redrive/{id}")).await.expect_ok().clone();
    assert_eq!(cancelled["status"], "cancelled");
    let moved = cancelled["moved"].as_i64().unwrap();
    assert!((20..30).contains(&moved), "{cancelled}");
    assert!(cancelled["finished_at"].is_string());
    // Messages already moved stay moved, and nothing moves after the cancel.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(ids_in(&pool, &orders).await.len() as i64, moved);
    assert_eq!(ids_in(&pool, &dlq).await.len() as i64, 30 - moved);
    let again = app.delete(&format!("queues/{dlq}/redrive/{id}")).await.expect_ok().clone();
    assert_eq!((again["status"].as_str(), again["moved"].as_i64()), (Some("cancelled"), Some(moved)));
    assert_counts_exact(&pool).await;
    // A new task may start once none runs.
    let task = start(&app, &dlq, json!({})).await;
    assert_eq!(finished(&app, &dlq, &task, Duration::from_secs(10)).await["moved"].as_i64(), Some(30 - moved));
}

#[sqlx::test]
async fn bad_redrive_requests_get_a_clear_4xx(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    dead_letter(&app, &orders, 1).await;
    let dlq = queue_named(&app, "dlq").await;
    let path = format!("queues/{dlq}/redrive");
    for (body, status, says) in [
        (json!({"rate_per_second": 0}), 400, "rate_per_second must be between 1 and 10000"),
        (json!({"rate_per_second": 10001}), 400, "rate_per_second"),
        (json!({"max_messages": 0}), 400, "max_messages must be between 1 and 1000000"),
        (json!({"max_messages": 1000001}), 400, "max_messages"),
        (json!({"refs": []}), 400, "refs must hold 1 to 1000"),
        (json!({"refs": [{"ref": "nonsense"}]}), 404, "refs[0] names no message of this queue"),
        (json!({"destination_queue": "nowhere"}), 404, "destination queue 'nowhere' not found"),
        (json!({"destination_queue": "dlq"}), 409, "the queue itself"),
        (json!({"destination": "orders"}), 400, "unknown field"),
        (json!({"max_messages": "many"}), 400, "max_messages"),
    ] {
        let resp = app.post(&path, body.clone()).await;
        let message = resp.expect_error(status);
        assert!(message.contains(says), "{body}: {message}");
    }
    // Another account: its queue is a 404 as a destination and as the queue redriven.
    let (other, other_token) = new_account(&pool, "other", &Scope::ALL).await;
    let theirs = app
        .raw(
            reqwest::Method::POST,
            &format!("{}/client/v4/accounts/{other}/queues", app.address),
            Some(&other_token),
            Some(json!({"queue_name": "theirs"}).to_string().into_bytes()),
        )
        .await;
    let theirs = theirs.expect_ok()["queue_id"].as_str().unwrap().to_owned();
    app.post(&path, json!({"destination_queue": "theirs"})).await.expect_error(404);
    app.post(&format!("queues/{theirs}/redrive"), json!({})).await.expect_error(404);
    app.get(&format!("queues/{theirs}/redrive")).await.expect_error(404);
    // A read-only token may look but not start or cancel.
    let reader = app.token_with(&[Scope::QueuesRead]).await;
    let url = app.url(&path);
    let body = Some(b"{}".to_vec());
    app.raw(reqwest::Method::POST, &url, Some(&reader), body).await.expect_error(403);
    app.raw(reqwest::Method::GET, &url, Some(&reader), None).await.expect_ok();
    let task = start(&app, &dlq, json!({"destination_queue": "orders"})).await;
    let one = app.url(&format!("{path}/{}", task["redrive_id"].as_str().unwrap()));
    app.raw(reqwest::Method::DELETE, &one, Some(&reader), None).await.expect_error(403);
    app.raw(reqwest::Method::GET, &one, Some(&reader), None).await.expect_ok();
    // Unknown and malformed task ids.
    app.get(&format!("{path}/{}", "0".repeat(32))).await.expect_error(404);
    app.delete(&format!("{path}/{}", "0".repeat(32))).await.expect_error(404);
    app.get(&format!("{path}/not-an-id")).await.expect_error(400);
    // The task of one queue is not found under another.
    let under_orders = format!("queues/{orders}/redrive/{}", task["redrive_id"].as_str().unwrap());
    app.get(&under_orders).await.expect_error(404);
}

#[sqlx::test]
async fn a_leased_message_waits_for_its_lease_and_one_that_leaves_is_taken_off_the_total(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    dead_letter(&app, &orders, 3).await;
    let dlq = queue_named(&app, "dlq").await;
    app.post(&format!("queues/{dlq}/consumers"), json!({"type": "http_pull"})).await.expect_ok();
    let leased = app.pull(&dlq, json!({"batch_size": 1, "visibility_timeout_ms": 600_000})).await;
    let leased_id = leased[0]["id"].as_str().unwrap().to_owned();

    let task = start(&app, &dlq, json!({})).await;
    assert_eq!(task["total"], 3);
    let id = task["redrive_id"].as_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t = app.get(&format!("queues/{dlq}/redrive/{id}")).await.expect_ok().clone();
        if t["moved"] == 2 {
            assert_eq!(t["status"], "running", "the leased message is still to move: {t}");
            break;
        }
        assert!(Instant::now() < deadline, "the two free messages never moved: {t}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        ids_in(&pool, &dlq).await,
        BTreeSet::from([leased_id]),
        "a leased message is not moved under its consumer"
    );
    // Acked by the dead-letter queue's consumer: it left, so the task no longer counts it.
    app.ack(&dlq, &[lease(&leased[0])], json!([])).await;
    let done = finished(&app, &dlq, &task, Duration::from_secs(10)).await;
    assert_eq!(
        (done["status"].as_str(), done["moved"].as_i64(), done["total"].as_i64()),
        (Some("completed"), Some(2), Some(2))
    );
    assert_counts_exact(&pool).await;
}

#[sqlx::test]
async fn a_node_that_stops_gives_its_task_back_at_once(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    dead_letter(&app, &orders, 3).await;
    let dlq = queue_named(&app, "dlq").await;
    let task = start(&app, &dlq, json!({"rate_per_second": 1})).await;
    let id: uuid::Uuid = task["redrive_id"].as_str().unwrap().parse().unwrap();
    let state = || async {
        sqlx::query_as::<_, (String, i64, bool, bool)>(
            "select status, moved, lease_token is not null, lease_until = '-infinity' from redrive_tasks where id = $1",
        )
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while state().await.1 < 1 {
        assert!(Instant::now() < deadline, "the node never began the task");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(state().await.2, "the working node holds the task");
    drop(app); // stops the node
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, moved, held, released) = state().await;
        if !held && released {
            assert_eq!(status, "running");
            assert!(moved < 3, "the task was still under way");
            break;
        }
        assert!(Instant::now() < deadline, "the stopped node kept its lease: {status} {moved} {held} {released}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Any node may take it now, without waiting for a lease to run out.
    let taken = skiplock::store::redrive::take(&pool, 5.0).await.unwrap().expect("the task is free");
    assert_eq!(taken.id.0, id);
}

/// A redrive of thousands with its node killed (SIGKILL) mid-way, inside a batch: another node takes the task over when
/// the lease runs out and finishes it; every message moved exactly once.
#[sqlx::test]
async fn a_redrive_survives_its_node_being_killed_and_another_node_finishes_it(pool: PgPool) {
    const N: usize = 5000;
    let (account, token) = new_account(&pool, "crash", &Scope::ALL).await;
    let url = database_url(&pool);
    let first = Server::start(&url, free_port()).await;
    let app = TestApp::remote(pool.clone(), first.address.clone(), account, token.clone());
    let orders = source_queue(&app, "orders", "dlq").await;
    let dead: BTreeSet<String> = dead_letter(&app, &orders, N).await.into_iter().collect();
    assert_eq!(dead.len(), N);
    let dlq = queue_named(&app, "dlq").await;
    assert_eq!(ids_in(&pool, &dlq).await, dead);

    // At full pace one batch's transaction follows another at once, so the kill most likely lands
    // inside one.
    let task = start(&app, &dlq, json!({})).await;
    let id: uuid::Uuid = task["redrive_id"].as_str().unwrap().parse().unwrap();
    let moved_now = || async {
        sqlx::query_scalar::<_, i64>("select moved from redrive_tasks where id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while moved_now().await < 500 {
        assert!(Instant::now() < deadline, "the first node never moved 500");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Whether the kill cut a batch's transaction short: open transactions of the first node's
    // connections (the only ones moving messages) just before it, for the report.
    let open: i64 = sqlx::query_scalar(
        "select count(*) from pg_stat_activity where datname = current_database() and query like '%redrive%'
           and xact_start is not null and pid <> pg_backend_pid()",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    first.kill().await;
    let at_kill = moved_now().await;
    assert!(at_kill < N as i64, "the first node finished before it was killed");
    // Another node takes the task over once the dead node's lease runs out.
    let second = Server::start(&url, free_port()).await;
    let app = TestApp::remote(pool.clone(), second.address.clone(), account, token);
    let done = finished(&app, &dlq, &task, Duration::from_secs(30)).await;
    assert_eq!(
        (done["status"].as_str(), done["moved"].as_i64(), done["total"].as_i64()),
        (Some("completed"), Some(N as i64), Some(N as i64))
    );
    let back = ids_in(&pool, &orders).await;
    let left = ids_in(&pool, &dlq).await;
    assert_eq!(back, dead, "the moved set is the dead-letter queue's set");
    assert!(left.is_empty() && back.is_disjoint(&left), "no message is in both queues");
    let pending: i64 = sqlx::query_scalar("select count(*) from redrive_messages").fetch_one(&pool).await.unwrap();
    assert_eq!(pending, 0);
    assert_counts_exact(&pool).await;
    assert_eq!((app.backlog(&orders).await, app.backlog(&dlq).await), (N as i64, 0));
    eprintln!(
        "crash test: {N} dead-lettered, {at_kill} moved when the first node was killed ({open} batch transactions \
         open just before), {N} moved in all, 0 in both queues"
    );
    second.kill().await;
}
