//! Lease extension (`POST .../messages/extend`): heartbeats for pull and webhook leases.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skiplock::auth::Scope;
use sqlx::PgPool;

use crate::helpers::{dispatcher, lease, spawn_app, webhook_consumer, TestApp};
use crate::receiver::{Answer, Receiver};

async fn extend(app: &TestApp, queue: &str, leases: Value) -> Value {
    app.post(&format!("queues/{queue}/messages/extend"), json!({ "leases": leases })).await.expect_ok().clone()
}

/// Milliseconds until the message is deliverable again, by the database's clock.
async fn invisible_for_ms(pool: &PgPool, id: &Value) -> i64 {
    sqlx::query_scalar(
        "select (extract(epoch from available_at - now()) * 1000)::int8 from messages where id = $1::text::uuid",
    )
    .bind(id.as_str().unwrap())
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Waits until the message's lease has run out, by the database's clock.
async fn until_lease_ran_out(pool: &PgPool, id: &Value) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while invisible_for_ms(pool, id).await > 0 {
        assert!(Instant::now() < deadline, "the lease never ran out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[sqlx::test]
async fn an_extended_lease_holds_the_message_longer_and_still_acks_it(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b"]).await;
    let got = app.pull(&q, json!({"visibility_timeout_ms": 30_000})).await;
    let before = app.metrics.leases_extended.get();
    let answer = extend(&app, &q, json!([{"lease_id": lease(&got[0]), "visibility_timeout_ms": 600_000}])).await;
    assert_eq!(answer, json!({"extendCount": 1, "warnings": {}}));
    assert_eq!(app.metrics.leases_extended.get() - before, 1);
    let left = invisible_for_ms(&pool, &got[0]["id"]).await;
    assert!((590_000..=600_000).contains(&left), "invisible for {left} ms");
    let untouched = invisible_for_ms(&pool, &got[1]["id"]).await;
    assert!(untouched <= 30_000, "the other message keeps its lease: {untouched} ms");
    // Shortening works too: a consumer that gives up early makes the message visible soon.
    extend(&app, &q, json!([{"lease_id": lease(&got[1]), "visibility_timeout_ms": 1}])).await;
    let again = app.pull_until_some(&q, json!({}), Duration::from_secs(10)).await;
    assert_eq!(again[0]["id"], got[1]["id"]);
    // The same lease id still acks after its extension.
    assert_eq!(
        app.ack(&q, &[lease(&got[0])], json!([])).await,
        json!({"ackCount": 1, "retryCount": 0, "warnings": {}})
    );
}

#[sqlx::test]
async fn an_extended_lease_still_retries(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a"]).await;
    let got = app.pull(&q, json!({})).await;
    assert_eq!(
        extend(&app, &q, json!([{"lease_id": lease(&got[0]), "visibility_timeout_ms": 60_000}])).await["extendCount"],
        1
    );
    let answer = app.ack(&q, &[], json!([{"lease_id": lease(&got[0]), "delay_seconds": 0}])).await;
    assert_eq!(answer["retryCount"], 1, "{answer}");
    let again = app.pull(&q, json!({})).await;
    assert_eq!(again[0]["attempts"], 2);
}

#[sqlx::test]
async fn a_lease_that_ran_out_can_be_extended_until_the_message_is_pulled_again(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["slow"]).await;
    let got = app.pull(&q, json!({"visibility_timeout_ms": 100})).await;
    until_lease_ran_out(&pool, &got[0]["id"]).await;
    let answer = extend(&app, &q, json!([{"lease_id": lease(&got[0]), "visibility_timeout_ms": 600_000}])).await;
    assert_eq!(answer, json!({"extendCount": 1, "warnings": {}}));
    assert!(app.pull(&q, json!({})).await.is_empty(), "the extended lease holds the message again");

    // Once pulled again, the old lease is stale.
    extend(&app, &q, json!([{"lease_id": lease(&got[0]), "visibility_timeout_ms": 1}])).await;
    let second = app.pull_until_some(&q, json!({"visibility_timeout_ms": 600_000}), Duration::from_secs(10)).await;
    assert_eq!(second[0]["attempts"], 2);
    let stale = extend(&app, &q, json!([{"lease_id": lease(&got[0]), "visibility_timeout_ms": 1}])).await;
    assert_eq!(stale["extendCount"], 0);
    assert!(stale["warnings"][lease(&got[0])].as_str().unwrap().contains("no longer"), "{stale}");
    assert!(invisible_for_ms(&pool, &second[0]["id"]).await > 500_000, "the current lease is untouched");
}

#[sqlx::test]
async fn acked_retried_forged_and_other_queues_leases_change_nothing_and_warn(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    let other = app.pull_queue("other", json!({})).await;
    app.publish_texts(&q, &["acked", "retried", "kept"]).await;
    app.publish_texts(&other, &["theirs"]).await;
    let got = app.pull(&q, json!({"visibility_timeout_ms": 600_000})).await;
    let theirs = app.pull(&other, json!({"visibility_timeout_ms": 600_000})).await;
    app.ack(&q, &[lease(&got[0])], json!([{"lease_id": lease(&got[1]), "delay_seconds": 600}])).await;
    // Another character in the middle: the id names another message under a signature that does not fit.
    let genuine = lease(&got[2]);
    let swap = if &genuine[5..6] == "A" { "B" } else { "A" };
    let forged = format!("{}{swap}{}", &genuine[..5], &genuine[6..]);
    let entries: Vec<Value> = [lease(&got[0]), lease(&got[1]), lease(&theirs[0]), "garbage", forged.as_str()]
        .iter()
        .map(|l| json!({"lease_id": l, "visibility_timeout_ms": 1}))
        .collect();
    let answer = extend(&app, &q, json!(entries)).await;
    assert_eq!(answer["extendCount"], 0, "{answer}");
    let warnings = answer["warnings"].as_object().unwrap();
    assert_eq!(warnings.len(), 5, "{answer}");
    assert!(warnings[lease(&got[0])].as_str().unwrap().contains("no longer"));
    assert!(warnings["garbage"].as_str().unwrap().contains("unknown lease id"));
    assert!(invisible_for_ms(&pool, &got[1]["id"]).await > 500_000, "the retry's delay is kept");
    assert!(invisible_for_ms(&pool, &got[2]["id"]).await > 500_000, "the forged lease changed nothing");
    assert!(invisible_for_ms(&pool, &theirs[0]["id"]).await > 500_000, "the other queue's lease changed nothing");
}

#[sqlx::test]
async fn a_lease_named_twice_counts_once_and_the_first_entry_applies(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a"]).await;
    let got = app.pull(&q, json!({})).await;
    let l = lease(&got[0]);
    let entries =
        json!([{"lease_id": l, "visibility_timeout_ms": 600_000}, {"lease_id": l, "visibility_timeout_ms": 1}]);
    assert_eq!(extend(&app, &q, entries).await, json!({"extendCount": 1, "warnings": {}}));
    assert!(invisible_for_ms(&pool, &got[0]["id"]).await > 500_000);
}

#[sqlx::test]
async fn invalid_requests_are_400s_that_apply_nothing(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a"]).await;
    let got = app.pull(&q, json!({"visibility_timeout_ms": 30_000})).await;
    let good = json!({"lease_id": lease(&got[0]), "visibility_timeout_ms": 600_000});
    let many: Vec<Value> = (0..101).map(|_| good.clone()).collect();
    for (body, needle) in [
        (json!({}), "leases is required"),
        (json!({"leases": []}), "between 1 and 100"),
        (json!({"leases": many}), "between 1 and 100"),
        (json!({"leases": [good, {"lease_id": lease(&got[0])}]}), "leases[1].visibility_timeout_ms is required"),
        (json!({"leases": [good, {"lease_id": "x", "visibility_timeout_ms": 0}]}), "leases[1].visibility_timeout_ms"),
        (json!({"leases": [good, {"lease_id": "x", "visibility_timeout_ms": 43_200_001}]}), "43200000"),
        (json!({"leases": [good, {"lease_id": "x", "visibility_timeout_ms": "soon"}]}), "visibility_timeout_ms"),
        (json!({"leases": [{"visibility_timeout_ms": 5}]}), "lease_id"),
        (json!({"leases": [good], "extra": 1}), "extra"),
    ] {
        let resp = app.post(&format!("queues/{q}/messages/extend"), body.clone()).await;
        let message = resp.expect_error(400);
        assert!(message.contains(needle), "{body}: {message}");
    }
    let left = invisible_for_ms(&pool, &got[0]["id"]).await;
    assert!(left <= 30_000, "no invalid request extended the valid entry: {left} ms");
    // The largest value is accepted.
    let max = json!([{"lease_id": lease(&got[0]), "visibility_timeout_ms": 43_200_000}]);
    assert_eq!(extend(&app, &q, max).await["extendCount"], 1);
}

#[sqlx::test]
async fn extension_needs_read_and_write_scopes_and_an_existing_queue(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a"]).await;
    let got = app.pull(&q, json!({})).await;
    let body = json!({"leases": [{"lease_id": lease(&got[0]), "visibility_timeout_ms": 600_000}]});
    let url = app.url(&format!("queues/{q}/messages/extend"));
    for scopes in [&[Scope::QueuesRead][..], &[Scope::QueuesWrite][..]] {
        let token = app.token_with(scopes).await;
        let resp = app.raw(reqwest::Method::POST, &url, Some(&token), Some(body.to_string().into_bytes())).await;
        resp.expect_error(403);
    }
    let missing = app.post(&format!("queues/{}/messages/extend", "0".repeat(32)), body.clone()).await;
    missing.expect_error(404);
    app.delete(&format!("queues/{q}")).await.expect_ok();
    app.post(&format!("queues/{q}/messages/extend"), body).await.expect_error(404);
}

#[sqlx::test]
async fn a_webhook_receiver_extends_the_leases_of_the_batch_it_works_on(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    // The receiver takes a while before it acks, long enough for the test to extend while it works.
    let receiver = Receiver::start(|_| Answer { delay: Duration::from_secs(2), ..Answer::status(204) }).await;
    let hook = app.webhook_queue("orders", &receiver.url, json!({})).await;
    app.publish_texts(&hook.queue, &["long job"]).await;
    let d = dispatcher(&pool, Duration::from_secs(10)).await;
    let consumer = webhook_consumer(&d, &hook).await;
    let delivering = tokio::spawn(async move { d.dispatch_once(&consumer).await.unwrap() });
    let deadline = Instant::now() + Duration::from_secs(10);
    while receiver.received().is_empty() {
        assert!(Instant::now() < deadline, "no delivery arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let message = receiver.received()[0].body["messages"][0].clone();
    let answer =
        extend(&app, &hook.queue, json!([{"lease_id": lease(&message), "visibility_timeout_ms": 3_600_000}])).await;
    assert_eq!(answer, json!({"extendCount": 1, "warnings": {}}));
    assert!(invisible_for_ms(&pool, &message["id"]).await > 3_000_000);
    let outcome = delivering.await.unwrap().expect("a batch");
    assert_eq!(outcome.acked, 1, "the receiver's answer still settles the extended lease");
    assert_eq!(app.backlog(&hook.queue).await, 0);
}
