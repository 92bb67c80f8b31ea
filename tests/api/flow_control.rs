//! Flow control per key: a key's messages are let go within its parallelism and rate, on every node and
//! for pull and webhook consumers alike; the rest wait (not failed, not counted as attempts) in publish
//! order, while other keys go at full speed; a key can be paused, resumed and given limits of its own.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app, wait_until, TestApp};
use crate::receiver::{Answer, Receiver};

const DEADLINE: Duration = Duration::from_secs(20);

/// Publishes one batch of `(flow key, body)` text messages, a None key publishing without one.
async fn publish_flow(app: &TestApp, queue: &str, messages: &[(Option<&str>, &str)]) {
    let messages: Vec<Value> = messages
        .iter()
        .map(|(key, body)| match key {
            Some(key) => json!({"body": body, "content_type": "text", "flow_control_key": key}),
            None => json!({"body": body, "content_type": "text"}),
        })
        .collect();
    app.post(&format!("queues/{queue}/messages/batch"), json!({ "messages": messages })).await.expect_ok();
}

async fn pull(app: &TestApp, queue: &str) -> Vec<Value> {
    app.pull(queue, json!({"batch_size": 100, "visibility_timeout_ms": 600_000})).await
}

fn bodies(messages: &[Value]) -> Vec<&str> {
    let mut bodies: Vec<&str> = messages.iter().map(|m| m["body"].as_str().unwrap()).collect();
    bodies.sort_unstable();
    bodies
}

fn by_body(messages: &[Value]) -> HashMap<&str, &str> {
    messages.iter().map(|m| (m["body"].as_str().unwrap(), lease(m))).collect()
}

async fn flow_key(app: &TestApp, queue: &str, key: &str) -> Value {
    app.get(&format!("queues/{queue}/flow_keys/{key}")).await.expect_ok().clone()
}

#[sqlx::test]
async fn a_keys_parallelism_holds_on_every_node_and_an_ack_lets_the_next_go(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("shops", json!({"settings": {"flow_control": {"parallelism": 2}}})).await;
    let consumer = app.get(&format!("queues/{q}/consumers")).await;
    assert_eq!(
        consumer.expect_ok()[0]["settings"]["flow_control"],
        json!({"parallelism": 2, "rate": null, "period": null})
    );
    publish_flow(
        &app,
        &q,
        &[(Some("s1"), "s1-1"), (Some("s1"), "s1-2"), (Some("s2"), "s2-1"), (Some("s1"), "s1-3"), (None, "u1")],
    )
    .await;
    publish_flow(&app, &q, &[(Some("s1"), "s1-4"), (Some("s2"), "s2-2"), (Some("s2"), "s2-3"), (None, "u2")]).await;

    let first = pull(&app, &q).await;
    assert_eq!(bodies(&first), ["s1-1", "s1-2", "s2-1", "s2-2", "u1", "u2"], "two of each key, in publish order");
    let other = app.another_node().await;
    assert!(pull(&other, &q).await.is_empty(), "no node has a third message of a key while two are leased");

    let s1 = flow_key(&app, &q, "s1").await;
    assert_eq!((s1["released"].as_i64(), s1["waiting"].as_i64()), (Some(2), Some(2)));
    assert_eq!(s1["held_by"], "parallelism");
    assert_eq!(s1["parallelism"], 2);
    let stats = app.get(&format!("queues/{q}/stats")).await;
    assert_eq!(
        (stats.expect_ok()["flow_keys_waiting"].as_i64(), stats.expect_ok()["flow_waiting_count"].as_i64()),
        (Some(2), Some(3))
    );
    let listed = app.get(&format!("queues/{q}/flow_keys?waiting=true")).await;
    let keys: Vec<&str> =
        listed.expect_ok().as_array().unwrap().iter().map(|k| k["flow_control_key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["s1", "s2"], "the key holding the most back first");
    let past = app.get(&format!("queues/{q}/flow_keys?page=3&per_page=1")).await;
    assert_eq!(
        (past.expect_ok().as_array().unwrap().len(), past.body["result_info"]["total_count"].as_i64()),
        (0, Some(2))
    );

    let leases = by_body(&first);
    other.ack(&q, &[leases["s1-1"]], json!([])).await;
    assert_eq!(bodies(&pull(&other, &q).await), ["s1-3"], "the ack of s1-1 lets s1-3 go, not s2-3");
    app.ack(&q, &[leases["u1"], leases["s2-1"]], json!([{"lease_id": leases["s1-2"], "delay_seconds": 0}])).await;
    let next = pull(&app, &q).await;
    assert_eq!(bodies(&next), ["s1-2", "s2-3"], "a retry keeps its place; an ack lets the key's next go");
    assert_eq!(next.iter().find(|m| m["body"] == "s1-2").unwrap()["attempts"], 2);
    assert_eq!(next.iter().find(|m| m["body"] == "s2-3").unwrap()["attempts"], 1, "waiting is not an attempt");
}

#[sqlx::test]
async fn a_paused_key_holds_its_messages_until_it_is_resumed(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("paused", json!({})).await;
    let paused = app.post(&format!("queues/{q}/flow_keys/tenant-9/pause"), json!({})).await;
    assert_eq!(paused.expect_ok()["paused"], true);
    publish_flow(&app, &q, &[(Some("tenant-9"), "t9-1"), (Some("tenant-9"), "t9-2"), (Some("tenant-1"), "t1-1")]).await;
    assert_eq!(bodies(&pull(&app, &q).await), ["t1-1"], "other keys go at full speed");
    let key = flow_key(&app, &q, "tenant-9").await;
    assert_eq!((key["waiting"].as_i64(), key["held_by"].as_str()), (Some(2), Some("paused")));

    let resumed = app.post(&format!("queues/{q}/flow_keys/tenant-9/resume"), json!({})).await;
    assert_eq!((&resumed.expect_ok()["paused"], &resumed.expect_ok()["overrides"]), (&json!(false), &Value::Null));
    assert_eq!(bodies(&pull(&app, &q).await), ["t9-1", "t9-2"], "resuming lets the held messages go at once");

    // A key with limits of its own keeps them through a pause; a key never paused resumes as it was.
    let own = json!({"parallelism": 1, "rate": null, "period": null});
    app.put(&format!("queues/{q}/flow_keys/tenant-1"), own.clone()).await.expect_ok();
    app.post(&format!("queues/{q}/flow_keys/tenant-1/pause"), json!({})).await.expect_ok();
    let resumed = app.post(&format!("queues/{q}/flow_keys/tenant-1/resume"), json!({})).await;
    assert_eq!((&resumed.expect_ok()["paused"], &resumed.expect_ok()["overrides"]), (&json!(false), &own));
    let never = app.post(&format!("queues/{q}/flow_keys/tenant-2/resume"), json!({})).await;
    assert_eq!((&never.expect_ok()["paused"], &never.expect_ok()["overrides"]), (&json!(false), &Value::Null));
    let unknown = app.post("queues/00000000000000000000000000000000/flow_keys/tenant-2/resume", json!({})).await;
    assert_eq!(unknown.status, 404);
}

#[sqlx::test]
async fn limits_changed_while_messages_wait_let_them_go(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("changing", json!({"settings": {"flow_control": {"parallelism": 1}}})).await;
    publish_flow(
        &app,
        &q,
        &[(Some("k"), "k1"), (Some("k"), "k2"), (Some("k"), "k3"), (Some("k"), "k4"), (Some("k"), "k5")],
    )
    .await;
    assert_eq!(bodies(&pull(&app, &q).await), ["k1"]);

    let put = app.put(&format!("queues/{q}/flow_keys/k"), json!({"parallelism": 3})).await;
    let key = put.expect_ok();
    assert_eq!((key["parallelism"].as_i64(), key["overrides"]["parallelism"].as_i64()), (Some(3), Some(3)));
    assert_eq!(bodies(&pull(&app, &q).await), ["k2", "k3"], "the key's own limit lets two more go at once");

    let consumer =
        app.get(&format!("queues/{q}/consumers")).await.expect_ok()[0]["consumer_id"].as_str().unwrap().to_owned();
    let changed = json!({"type": "http_pull", "settings": {"flow_control": {"parallelism": 10}}});
    app.put(&format!("queues/{q}/consumers/{consumer}"), changed).await.expect_ok();
    assert!(pull(&app, &q).await.is_empty(), "the key's own limit stands over the consumer's");

    let cleared = app.delete(&format!("queues/{q}/flow_keys/k")).await;
    assert_eq!(
        (cleared.expect_ok()["parallelism"].as_i64(), cleared.expect_ok()["overrides"].is_null()),
        (Some(10), true)
    );
    assert_eq!(bodies(&pull(&app, &q).await), ["k4", "k5"], "the consumer's limit applies again");
    assert_eq!(app.delete(&format!("queues/{q}/flow_keys/k")).await.status, 404, "nothing of its own left to remove");
}

#[sqlx::test]
async fn limits_coming_to_keys_with_messages_count_those_messages(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("late-limits", json!({})).await;
    publish_flow(&app, &q, &[(Some("k"), "k1"), (Some("k"), "k2"), (Some("k"), "k3"), (Some("j"), "j1")]).await;
    let listed = app.get(&format!("queues/{q}/flow_keys")).await;
    assert_eq!(listed.expect_ok(), &json!([]), "a key without limits is not counted");

    let put = app.put(&format!("queues/{q}/flow_keys/k"), json!({"parallelism": 2})).await;
    assert_eq!(put.expect_ok()["released"], 3, "the key's messages published before its limit are counted");
    publish_flow(&app, &q, &[(Some("k"), "k4")]).await;
    let first = pull(&app, &q).await;
    assert_eq!(bodies(&first), ["j1", "k1", "k2", "k3"], "k4 waits while three of its key are let go");
    let leases = by_body(&first);
    app.ack(&q, &[leases["k1"]], json!([])).await;
    assert!(pull(&app, &q).await.is_empty(), "two of the key still let go");
    app.ack(&q, &[leases["k2"]], json!([])).await;
    assert_eq!(bodies(&pull(&app, &q).await), ["k4"]);

    // A consumer's limit coming to a queue counts every key's messages in the same way.
    publish_flow(&app, &q, &[(Some("j"), "j2"), (Some("j"), "j3")]).await;
    let consumer =
        app.get(&format!("queues/{q}/consumers")).await.expect_ok()[0]["consumer_id"].as_str().unwrap().to_owned();
    let limited = json!({"type": "http_pull", "settings": {"flow_control": {"parallelism": 1}}});
    app.put(&format!("queues/{q}/consumers/{consumer}"), limited).await.expect_ok();
    assert_eq!(flow_key(&app, &q, "j").await["released"], 3);
    publish_flow(&app, &q, &[(Some("j"), "j4")]).await;
    assert_eq!(bodies(&pull(&app, &q).await), ["j2", "j3"], "j4 is held behind the three let go");
    let unlimited = json!({"type": "http_pull", "settings": {}});
    app.put(&format!("queues/{q}/consumers/{consumer}"), unlimited).await.expect_ok();
    assert_eq!(bodies(&pull(&app, &q).await), ["j4"], "removing the limit lets the held message go");
    let listed = app.get(&format!("queues/{q}/flow_keys")).await;
    let keys: Vec<&str> =
        listed.expect_ok().as_array().unwrap().iter().map(|k| k["flow_control_key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["k"], "only the key with limits of its own is left");
}

#[sqlx::test]
async fn a_rate_spaces_a_keys_messages_a_period_apart_at_most_a_period_ahead(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("rated", json!({"settings": {"flow_control": {"rate": 1, "period": 60}}})).await;
    publish_flow(&app, &q, &[(Some("r"), "r1"), (Some("r"), "r2"), (Some("r"), "r3"), (None, "u")]).await;
    let times: Vec<f64> = sqlx::query_scalar(
        "select extract(epoch from available_at)::float8 from messages where flow_key = 'r' and not held order by available_at",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(times.len(), 2, "the second is let go a minute ahead, the third waits");
    assert!((times[1] - times[0] - 60.0).abs() < 0.001, "a period apart: {times:?}");
    assert_eq!(bodies(&pull(&app, &q).await), ["r1", "u"], "one a minute");
    let key = flow_key(&app, &q, "r").await;
    assert_eq!(
        (key["released"].as_i64(), key["waiting"].as_i64(), key["held_by"].as_str()),
        (Some(2), Some(1), Some("rate"))
    );
    assert_eq!((key["rate"].as_i64(), key["period"].as_i64()), (Some(1), Some(60)));
    assert!(key["next_release_at"].is_string());
}

#[sqlx::test]
async fn flow_keys_compose_with_ordering_keys(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("both", json!({"settings": {"flow_control": {"parallelism": 1}}})).await;
    let message = |order: &str, body: &str| json!({"body": body, "content_type": "text", "ordering_key": order, "flow_control_key": "shop"});
    let batch = json!({"messages": [message("a", "a1"), message("b", "b1"), message("a", "a2"), message("b", "b2")]});
    app.post(&format!("queues/{q}/messages/batch"), batch).await.expect_ok();

    let mut delivered = Vec::new();
    for _ in 0..4 {
        let got = pull(&app, &q).await;
        assert_eq!(got.len(), 1, "one at a time for the flow key, whatever the ordering keys: {got:?}");
        let metadata = &got[0]["metadata"];
        assert_eq!((metadata["flow_control_key"].as_str(), metadata["ordering_key"].is_string()), (Some("shop"), true));
        delivered.push(got[0]["body"].as_str().unwrap().to_owned());
        app.ack(&q, &[lease(&got[0])], json!([])).await;
    }
    let position = |body: &str| delivered.iter().position(|b| b == body).unwrap();
    assert!(position("a1") < position("a2") && position("b1") < position("b2"), "each order kept: {delivered:?}");
    assert!(pull(&app, &q).await.is_empty());
    let key = flow_key(&app, &q, "shop").await;
    assert_eq!((key["released"].as_i64(), key["waiting"].as_i64()), (Some(0), Some(0)), "nothing counted twice");
    let forgotten = skiplock::engine::maintenance::forget_idle_flow_keys(&pool).await.unwrap();
    assert_eq!(forgotten, 1, "maintenance forgets the state of a key with nothing left");
    app.post(&format!("queues/{q}/messages"), message("c", "c1")).await.expect_ok();
    assert_eq!(bodies(&pull(&app, &q).await), ["c1"], "a forgotten key starts again with its next message");
}

#[sqlx::test]
async fn a_webhook_consumer_never_has_more_of_a_key_in_flight_than_its_parallelism(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer { delay: Duration::from_millis(40), ..Answer::status(200) }).await;
    let consumer = json!({"settings": {"batch_size": 1, "max_concurrency": 8, "max_wait_time_ms": 0,
                                        "flow_control": {"parallelism": 2}}});
    let hook = app.webhook_queue("hooked", &receiver.url, consumer).await;
    let messages: Vec<String> = (0..12).map(|i| format!("m{i}")).collect();
    publish_flow(&app, &hook.queue, &messages.iter().map(|b| (Some("one-key"), b.as_str())).collect::<Vec<_>>()).await;
    let node = crate::helpers::listening_dispatcher(&pool, Duration::from_secs(5)).await;
    let other = crate::helpers::listening_dispatcher(&pool, Duration::from_secs(5)).await;
    let received = receiver.wait_for(messages.len(), DEADLINE).await;
    assert_eq!(received[0].body["messages"][0]["metadata"], json!({"flow_control_key": "one-key"}));
    wait_until("the key's messages all acked", DEADLINE, || async { app.backlog(&hook.queue).await == 0 }).await;
    node.stop().await;
    other.stop().await;
    let most = receiver.max_in_flight();
    assert!((1..=2).contains(&most), "{most} batches of the key in flight at once on two nodes; at most two");
}

#[sqlx::test]
async fn bad_limits_and_keys_are_400s_naming_the_field(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("checked").await;
    let consumer = |flow: Value| json!({"type": "http_pull", "settings": {"flow_control": flow}});
    let cases = [
        (consumer(json!({"parallelism": 0})), "settings.flow_control.parallelism must be between 1 and 10000"),
        (consumer(json!({"rate": 10001})), "settings.flow_control.rate must be between 1 and 10000"),
        (consumer(json!({"rate": 5, "period": 0})), "settings.flow_control.period must be between 1 and 86400"),
        (consumer(json!({"period": 60})), "settings.flow_control.period applies to a rate"),
        (consumer(json!({"parallelism": 2, "burst": 4})), "unknown field `burst`"),
    ];
    for (body, expected) in cases {
        let message = app.post(&format!("queues/{q}/consumers"), body).await.expect_error(400);
        assert!(message.contains(expected), "{expected:?} in {message:?}");
    }
    let published = app.post(&format!("queues/{q}/messages"), json!({"body": "x", "flow_control_key": "a b"})).await;
    assert!(published.expect_error(400).contains("message.flow_control_key must be 1-128 characters"));
    let published = app.post(&format!("queues/{q}/messages"), json!({"body": "x", "flow_control_key": ".."})).await;
    assert!(published.expect_error(400).contains("message.flow_control_key cannot be \"..\""));
    let batch = json!({"messages": [{"body": 1}, {"body": 2, "flow_control_key": ""}]});
    let published = app.post(&format!("queues/{q}/messages/batch"), batch).await;
    assert!(published.expect_error(400).contains("messages[1].flow_control_key"));
    assert_eq!(app.backlog(&q).await, 0, "nothing of a refused batch is stored");

    let put = app.put(&format!("queues/{q}/flow_keys/k"), json!({"parallelism": -1})).await;
    assert!(put.expect_error(400).contains("parallelism must be between 1 and 10000"));
    let put = app.put(&format!("queues/{q}/flow_keys/k"), json!({"paused": "yes"})).await;
    assert!(put.expect_error(400).contains("paused"));
    let listed = app.get(&format!("queues/{q}/flow_keys?waiting=maybe")).await;
    assert!(listed.expect_error(400).contains("waiting must be true or false"));
}

#[sqlx::test]
async fn a_key_with_a_slash_is_named_percent_encoded(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("slashed", json!({})).await;
    publish_flow(&app, &q, &[(Some("shop/7"), "x")]).await;
    let key = app.put(&format!("queues/{q}/flow_keys/shop%2F7"), json!({"parallelism": 1})).await;
    assert_eq!(key.expect_ok()["flow_control_key"], "shop/7");
    assert_eq!(flow_key(&app, &q, "shop%2F7").await["released"], 1);
}
