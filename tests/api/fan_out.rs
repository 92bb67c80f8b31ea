//! Several consumers per queue: every consumer receives every message published while it exists, and
//! leases, retries, dead-letters and acks its copy on its own.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::events::{events, subscribe};
use crate::generations::{engine, AT_ONCE};
use crate::helpers::{dispatcher, lease, spawn_app, spawn_app_dispatching, webhook_consumer, Hook, TestApp};
use crate::receiver::{Answer, Receiver};

const DEADLINE: Duration = Duration::from_secs(10);

/// Adds a consumer to the queue; its id.
async fn add_consumer(app: &TestApp, queue: &str, body: Value) -> String {
    let made = app.post(&format!("queues/{queue}/consumers"), body).await;
    made.expect_ok()["consumer_id"].as_str().unwrap().to_owned()
}

/// Pulls as consumer `consumer` of the queue.
async fn pull_as(app: &TestApp, queue: &str, consumer: &str) -> Vec<Value> {
    app.pull(queue, json!({"consumer_id": consumer, "batch_size": 10, "visibility_timeout_ms": 60_000})).await
}

fn bodies(messages: &[Value]) -> Vec<&str> {
    messages.iter().map(|m| m["body"].as_str().unwrap()).collect()
}

fn leases(messages: &[Value]) -> Vec<&str> {
    messages.iter().map(lease).collect()
}

#[sqlx::test]
async fn every_consumer_receives_every_message_and_acks_its_own_copy(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let q = app.create_queue("events").await;
    let first = add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    let second = add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    let made = app.post(&format!("queues/{q}/consumers"), json!({"type": "webhook", "url": receiver.url})).await;
    let hook = Hook {
        queue: q.clone(),
        consumer: made.expect_ok()["consumer_id"].as_str().unwrap().to_owned(),
        secret: made.result()["signing_secret"].as_str().unwrap().to_owned(),
    };
    let listed = app.get(&format!("queues/{q}/consumers")).await;
    let listed = listed.expect_ok().as_array().unwrap().clone();
    let ids: Vec<&str> = listed.iter().map(|c| c["consumer_id"].as_str().unwrap()).collect();
    assert_eq!(ids, [first.as_str(), second.as_str(), hook.consumer.as_str()], "in the order they were added");
    assert!(listed.iter().all(|c| c["queue_id"] == q.as_str() && c["queue_name"] == "events"), "{listed:?}");

    app.publish_texts(&q, &["a", "b", "c"]).await;
    let refused = app.post(&format!("queues/{q}/messages/pull"), json!({})).await.expect_error(400);
    assert!(refused.contains("consumer_id"), "{refused}");
    let by_first = pull_as(&app, &q, &first).await;
    let by_second = pull_as(&app, &q, &second).await;
    assert_eq!(bodies(&by_first), ["a", "b", "c"]);
    assert_eq!(bodies(&by_second), ["a", "b", "c"], "a lease by one consumer does not hide the message from another");
    assert!(by_second.iter().all(|m| m["attempts"] == 1));

    // Lease extensions and acks through the queue's routes find each lease's consumer.
    let extend = json!({"leases": [{"lease_id": lease(&by_second[0]), "visibility_timeout_ms": 120_000},
                                   {"lease_id": lease(&by_first[0]), "visibility_timeout_ms": 120_000}]});
    let extended = app.post(&format!("queues/{q}/messages/extend"), extend).await;
    assert_eq!(extended.expect_ok()["extendCount"], 2, "{:?}", extended.result());
    assert_eq!(app.ack(&q, &leases(&by_first), json!([])).await["ackCount"], 3);
    assert_eq!(pull_as(&app, &q, &second).await, Vec::<Value>::new(), "the second consumer's copies are leased");
    assert_eq!(app.backlog(&q).await, 3, "the backlog is that of the consumer furthest behind");
    let mixed: Vec<&str> = leases(&by_second)[..2].to_vec();
    let answer = app.ack(&q, &mixed, json!([{"lease_id": lease(&by_second[2]), "delay_seconds": 0}])).await;
    assert_eq!((answer["ackCount"].as_i64(), answer["retryCount"].as_i64()), (Some(2), Some(1)), "{answer}");
    assert_eq!(bodies(&pull_as(&app, &q, &second).await), ["c"], "a retry by one consumer is its own");
    assert_eq!(pull_as(&app, &q, &first).await, Vec::<Value>::new(), "and changes nothing for the other");

    // The webhook consumer gets the batch too, named by the queue.
    let d = dispatcher(&pool, Duration::from_secs(5)).await;
    let consumer = webhook_consumer(&d, &hook).await;
    let outcome = d.dispatch_once(&consumer).await.unwrap().expect("a batch");
    assert_eq!((outcome.delivered, outcome.acked), (3, 3));
    let got = receiver.received();
    assert_eq!(got[0].body["queue"], "events");
    assert_eq!(got[0].body["queue_id"], q.as_str());
    assert_eq!(got[0].body["consumer_id"], hook.consumer.as_str());
    let delivered: Vec<&str> =
        got[0].body["messages"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(delivered, ["a", "b", "c"]);
}

#[sqlx::test]
async fn each_consumer_retries_and_dead_letters_on_its_own(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("jobs").await;
    let strict = add_consumer(
        &app,
        &q,
        json!({"type": "http_pull", "dead_letter_queue": "jobs-failed", "settings": {"max_retries": 0}}),
    )
    .await;
    let patient = add_consumer(&app, &q, json!({"type": "http_pull", "settings": {"max_retries": 5}})).await;
    let alerts = app.pull_queue("alerts", json!({})).await;
    subscribe(&app, json!({"type": "queues.queue", "queue_name": "jobs"}), &["messages.dead_lettered"], &alerts).await;
    app.publish_texts(&q, &["x"]).await;
    let got = pull_as(&app, &q, &strict).await;
    app.ack(&q, &[], json!([{"lease_id": lease(&got[0]), "delay_seconds": 0}])).await;
    assert_eq!(
        pull_as(&app, &q, &strict).await,
        Vec::<Value>::new(),
        "out of deliveries, it went to its dead-letter queue"
    );

    let dlq = app.get("queues?name=jobs-failed").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    add_consumer(&app, &dlq, json!({"type": "http_pull"})).await;
    let dead = app.pull(&dlq, json!({})).await;
    assert_eq!(bodies(&dead), ["x"]);
    assert_eq!(dead[0]["metadata"]["dead_letter_source_queue"], "jobs", "the source is the queue, not the lane");
    assert_eq!(dead[0]["metadata"]["dead_letter_source_consumer"], strict.as_str(), "the consumer that gave up");
    let stats = app.get(&format!("queues/{dlq}/stats")).await;
    assert_eq!(
        stats.expect_ok()["dead_letter_sources"],
        json!([{"queue_id": q, "queue_name": "jobs", "message_count": 1}]),
        "the dead-letter queue's source is the queue, not the consumer's lane"
    );
    let kept = pull_as(&app, &q, &patient).await;
    assert_eq!(bodies(&kept), ["x"]);
    assert_eq!(kept[0]["attempts"], 1, "the other consumer's deliveries are its own");
    assert_eq!(dead[0]["id"], kept[0]["id"], "a dead-lettered copy keeps the id it was published under");
    let got = events(&app, &alerts, 1).await;
    assert_eq!(got[0]["payload"]["messageIds"], json!([kept[0]["id"]]), "and so does its event: {got:?}");
}

#[sqlx::test]
async fn consumers_added_and_deleted_change_who_receives_what_from_then_on(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let q = app.create_queue("feed").await;
    let own = add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    app.publish_texts(&q, &["before"]).await;
    let later = add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    assert_eq!(
        pull_as(&app, &q, &later).await,
        Vec::<Value>::new(),
        "a consumer added later starts with what comes next"
    );
    app.publish_texts(&q, &["after"]).await;
    assert_eq!(bodies(&pull_as(&app, &q, &later).await), ["after"]);

    // Deleting the queue's first consumer clears what waited for it alone; the other reads on, and as
    // the queue's only pull consumer it needs no consumer_id.
    app.delete(&format!("queues/{q}/consumers/{own}")).await.expect_ok();
    app.publish_texts(&q, &["later still"]).await;
    assert_eq!(bodies(&app.pull(&q, json!({})).await), ["later still"]);
    assert_eq!(app.backlog(&q).await, 2, "after, leased, and later still, leased: the lane's two");
    let own_left: i64 = sqlx::query_scalar("select count(*) from messages where queue_id = $1::uuid")
        .bind(&q)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(own_left, 0, "nothing waits in the queue itself for no one");

    // A lane is never a queue of the tenant's.
    let lane: String =
        sqlx::query_scalar("select replace(id::text, '-', '') from queues where parent_queue_id is not null")
            .fetch_one(&pool)
            .await
            .unwrap();
    app.get(&format!("queues/{lane}")).await.expect_error(404);
    assert_eq!(app.get("queues").await.expect_ok().as_array().unwrap().len(), 1);

    // With its last consumer gone, the queue keeps what is published for the next one, as with one consumer.
    app.delete(&format!("queues/{q}/consumers/{later}")).await.expect_ok();
    app.publish_texts(&q, &["kept"]).await;
    add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    assert_eq!(bodies(&app.pull(&q, json!({})).await), ["kept"]);
}

#[sqlx::test]
async fn ordering_keys_idempotency_keys_and_topics_hold_for_every_consumer(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    let plain = app.pull_queue("audit", json!({})).await;
    let first = add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    let second = add_consumer(&app, &q, json!({"type": "http_pull"})).await;

    // An ordering key holds back its next message for each consumer until that consumer resolved the one
    // before; an idempotency key stores its message once, a copy for each consumer.
    let keyed = |body: &str, key: &str| {
        let mut message = json!({"body": body, "content_type": "text", "ordering_key": "k"});
        message["idempotency_key"] = json!(key);
        message
    };
    let batch = json!({"messages": [keyed("k1", "one"), keyed("k2", "two")]});
    let stored = app.post(&format!("queues/{q}/messages/batch"), batch.clone()).await;
    assert_eq!(stored.expect_ok()["metadata"]["duplicates"], 0);
    let again = app.post(&format!("queues/{q}/messages/batch"), batch).await;
    assert_eq!(again.expect_ok()["metadata"]["duplicates"], 2, "the keys are the queue's, whatever its consumers");
    let by_first = pull_as(&app, &q, &first).await;
    assert_eq!(bodies(&by_first), ["k1"], "k2 waits behind k1");
    assert_eq!(bodies(&pull_as(&app, &q, &second).await), ["k1"]);
    app.ack(&q, &leases(&by_first), json!([])).await;
    assert_eq!(bodies(&pull_as(&app, &q, &first).await), ["k2"], "the first consumer resolved k1");
    assert_eq!(pull_as(&app, &q, &second).await, Vec::<Value>::new(), "the second has not");
    // Each key on its own: an ordering key without an idempotency key, and the other way round.
    app.publish(&q, json!({"body": "k3", "content_type": "text", "ordering_key": "k"})).await;
    for _ in 0..2 {
        app.publish(&q, json!({"body": "once", "content_type": "text", "idempotency_key": "three"})).await;
    }
    assert_eq!(bodies(&pull_as(&app, &q, &second).await), ["once"], "k2 and k3 still wait behind k1");

    // A topic's publish reaches a queue with lanes and one without in one commit.
    let topic = app.post("topics", json!({"name": "all"})).await.expect_ok()["id"].as_str().unwrap().to_owned();
    for queue in [&q, &plain] {
        app.post(&format!("topics/{topic}/bindings"), json!({"queue_id": queue, "pattern": "#"})).await.expect_ok();
    }
    let publish = json!({"routing_key": "a", "messages": [{"body": "t", "content_type": "text"}]});
    let published = app.post(&format!("topics/{topic}/messages"), publish).await;
    assert_eq!(published.expect_ok()["queues"], 2);
    assert_eq!(bodies(&app.pull(&plain, json!({})).await), ["t"]);
    assert_eq!(bodies(&pull_as(&app, &q, &first).await), ["once", "t"], "k3 waits behind k2");
}

/// A node's worker for a queue's first consumer, a webhook waiting with a slot to spare and no batching
/// wait, takes its copy of a publish on its node leased by the statement that stores it, as a queue's
/// only consumer would; the pull consumer added after it gets its own copy, in its lane.
#[sqlx::test]
async fn a_publish_leases_the_queues_copy_for_its_nodes_waiting_worker_beside_a_lane(pool: PgPool) {
    let app = spawn_app_dispatching(pool).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let q = app.create_queue("mirrored").await;
    let hook = json!({"type": "webhook", "url": receiver.url, "settings": {"max_wait_time_ms": 0}});
    add_consumer(&app, &q, hook).await;
    let puller = add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    let leased = |app: &TestApp| app.metrics.publish_wakeups.with_label_values(&["leased_by_publish"]).get();
    // Until the node's worker for the new consumer runs and waits, publishes wake it instead.
    let (deadline, mut sent) = (Instant::now() + DEADLINE, 0);
    loop {
        sent += 1;
        let before = leased(&app);
        let body = format!("message {sent}");
        app.publish_texts(&q, &[body.as_str()]).await;
        let got = receiver.wait_for(sent, DEADLINE).await;
        if leased(&app) > before {
            let message = &got[sent - 1].body["messages"][0];
            assert_eq!((message["body"].as_str(), message["attempts"].as_i64()), (Some(body.as_str()), Some(1)));
            break;
        }
        assert!(Instant::now() < deadline, "no publish leased its copy for the node's worker");
    }
    let pulled = pull_as(&app, &q, &puller).await;
    let expected: Vec<String> = (1..=sent.min(10)).map(|n| format!("message {n}")).collect();
    assert_eq!(bodies(&pulled), expected, "the pull consumer's copies wait for it");
    app.stop_node();
}

#[sqlx::test]
async fn a_pull_naming_another_queues_or_a_webhook_consumer_is_refused(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("one").await;
    let other = app.create_queue("two").await;
    add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    let elsewhere = add_consumer(&app, &other, json!({"type": "http_pull"})).await;
    let hook = add_consumer(&app, &q, json!({"type": "webhook", "url": "https://example.com/hook"})).await;
    let resp = app.post(&format!("queues/{q}/messages/pull"), json!({"consumer_id": elsewhere})).await;
    assert!(resp.expect_error(400).contains("not a consumer of this queue"));
    let resp = app.post(&format!("queues/{q}/messages/pull"), json!({"consumer_id": hook})).await;
    assert!(resp.expect_error(400).contains("webhook"));
    let resp = app.post(&format!("queues/{q}/messages/pull"), json!({"consumer_id": "nope"})).await;
    assert!(resp.expect_error(400).contains("consumer_id"));
}

async fn count(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar(&format!("select count(*) from {table}")).fetch_one(pool).await.unwrap()
}

#[sqlx::test]
async fn a_body_is_stored_once_and_goes_with_its_generation_or_its_last_copy(pool: PgPool) {
    use skiplock::engine::rotation::Turn;
    let app = spawn_app(pool.clone()).await;
    let q = app.create_queue("shared").await;
    let first = add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    let second = add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    app.publish_texts(&q, &["kept", "done"]).await;
    assert_eq!(
        (count(&pool, "messages").await, count(&pool, "message_bodies").await),
        (4, 2),
        "a copy per consumer, one body each"
    );

    let by_first = pull_as(&app, &q, &first).await;
    assert_eq!(app.ack(&q, &leases(&by_first), json!([])).await["ackCount"], 2);
    let by_second = pull_as(&app, &q, &second).await;
    assert_eq!(app.ack(&q, &[lease(&by_second[1])], json!([])).await["ackCount"], 1);
    assert_eq!(count(&pool, "message_bodies").await, 2, "a shared body stays until its generation goes");

    // The turns move the copy still leased to the old generation, with a body of its own, and truncate
    // the young one with the bodies no copy reads any more.
    let engine = engine(&pool).await;
    let mut turns = Vec::new();
    for _ in 0..20 {
        let turn = engine.rotate(AT_ONCE).await.unwrap();
        let truncated = turn == Turn::Truncated(0);
        turns.push(turn);
        if truncated {
            break;
        }
    }
    assert!(turns.contains(&Turn::Truncated(0)), "{turns:?}");
    assert_eq!(count(&pool, "message_bodies_0").await, 0);
    assert_eq!(count(&pool, "message_bodies_old").await, 1, "the moved copy's own body");
    let answer = app.ack(&q, &[lease(&by_second[0])], json!([])).await;
    assert_eq!(answer["ackCount"], 1, "the moved copy keeps its lease: {answer}");
    assert_eq!((count(&pool, "messages").await, count(&pool, "message_bodies").await), (0, 0));
}

#[sqlx::test]
async fn a_copy_moved_to_the_old_generation_keeps_the_id_it_was_published_under(pool: PgPool) {
    use skiplock::engine::rotation::Turn;
    let app = spawn_app(pool.clone()).await;
    let q = app.create_queue("late").await;
    let mut consumers = Vec::new();
    for _ in 0..3 {
        consumers.push(add_consumer(&app, &q, json!({"type": "http_pull"})).await);
    }
    app.publish_texts(&q, &["slow"]).await;
    let by_first = pull_as(&app, &q, &consumers[0]).await;
    assert_eq!(app.ack(&q, &leases(&by_first), json!([])).await["ackCount"], 1);

    // The two consumers that have not read it yet when its generation drains: both copies move, each with a
    // body of its own under its own id.
    let engine = engine(&pool).await;
    let mut turns = Vec::new();
    while !turns.contains(&Turn::Truncated(0)) && turns.len() < 20 {
        turns.push(engine.rotate(AT_ONCE).await.unwrap());
    }
    assert!(turns.contains(&Turn::Truncated(0)), "{turns:?}");
    assert_eq!(count(&pool, "message_bodies_old").await, 2, "{turns:?}");
    for consumer in &consumers[1..] {
        let got = pull_as(&app, &q, consumer).await;
        assert_eq!(bodies(&got), ["slow"]);
        assert_eq!(got[0]["id"], by_first[0]["id"], "every consumer sees the id it was published under");
        assert_eq!(app.ack(&q, &leases(&got), json!([])).await["ackCount"], 1);
    }
    assert_eq!((count(&pool, "messages").await, count(&pool, "message_bodies").await), (0, 0));
}

/// Each consumer's figures in the queue's stats, first consumer first.
async fn consumer_stats(app: &TestApp, queue: &str) -> Vec<Value> {
    let stats = app.get(&format!("queues/{queue}/stats")).await;
    stats.expect_ok()["consumers"].as_array().unwrap().clone()
}

fn figures(stats: &Value) -> (i64, i64, Option<i64>) {
    (
        stats["backlog_count"].as_i64().unwrap(),
        stats["in_flight_count"].as_i64().unwrap(),
        stats["dead_letter_backlog_count"].as_i64(),
    )
}

#[sqlx::test]
async fn stats_give_each_consumers_own_backlog_in_flight_and_dead_letters(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.create_queue("orders").await;
    app.create_queue("orders-failed").await;
    let strict = add_consumer(
        &app,
        &q,
        json!({"type": "http_pull", "dead_letter_queue": "orders-failed", "settings": {"max_retries": 0}}),
    )
    .await;
    let slow = add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    let hook = add_consumer(&app, &q, json!({"type": "webhook", "url": "https://example.com/hook"})).await;
    app.publish_texts(&q, &["a", "b", "c"]).await;

    let got = pull_as(&app, &q, &strict).await;
    let stats = consumer_stats(&app, &q).await;
    let ids: Vec<&str> = stats.iter().map(|c| c["consumer_id"].as_str().unwrap()).collect();
    assert_eq!(ids, [strict.as_str(), slow.as_str(), hook.as_str()]);
    assert_eq!(stats[2]["type"], "webhook");
    assert_eq!(figures(&stats[0]), (3, 3, Some(0)), "the puller's copies are in flight");
    assert_eq!(figures(&stats[1]), (3, 0, None), "the other's wait, and it has no dead-letter queue");
    assert_eq!(figures(&stats[2]), (3, 0, None));

    let retried = json!([{"lease_id": lease(&got[2]), "delay_seconds": 0}]);
    app.ack(&q, &[lease(&got[0]), lease(&got[1])], retried).await;
    assert_eq!(pull_as(&app, &q, &strict).await, Vec::<Value>::new(), "c is out of deliveries");
    let stats = consumer_stats(&app, &q).await;
    assert_eq!(figures(&stats[0]), (0, 0, Some(1)), "acked two, dead-lettered one");
    assert_eq!(figures(&stats[1]), (3, 0, None), "nothing of that touches the others");
    assert_eq!(app.backlog(&q).await, 3, "the queue's backlog is its furthest-behind consumer's");
}

#[sqlx::test]
async fn a_consumer_failing_forever_does_not_delay_the_others(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let failing = Receiver::start(|_| Answer::status(500)).await;
    let q = app.create_queue("alerts").await;
    let made = app.post(&format!("queues/{q}/consumers"), json!({"type": "webhook", "url": failing.url})).await;
    let hook = Hook {
        queue: q.clone(),
        consumer: made.expect_ok()["consumer_id"].as_str().unwrap().to_owned(),
        secret: made.result()["signing_secret"].as_str().unwrap().to_owned(),
    };
    let puller = add_consumer(&app, &q, json!({"type": "http_pull"})).await;
    let d = dispatcher(&pool, Duration::from_secs(5)).await;
    let consumer = webhook_consumer(&d, &hook).await;

    for round in 0..3 {
        let text = format!("alert {round}");
        app.publish_texts(&q, &[text.as_str()]).await;
        let outcome = d.dispatch_once(&consumer).await.unwrap().expect("a batch to the failing receiver");
        assert_eq!(outcome.acked, 0, "its receiver answers 500");
        let got = pull_as(&app, &q, &puller).await;
        assert_eq!(bodies(&got), [text.as_str()], "the puller gets each message as it comes");
        assert_eq!(app.ack(&q, &leases(&got), json!([])).await["ackCount"], 1);
    }
    let stats = consumer_stats(&app, &q).await;
    assert_eq!(figures(&stats[1]).0, 0, "the puller is up to date");
    assert_eq!(figures(&stats[0]).0, 3, "the failing consumer keeps its own");
    assert_eq!(failing.received().len(), 3);
}

#[sqlx::test]
async fn consumers_added_and_deleted_on_one_node_are_seen_by_another(pool: PgPool) {
    let a = spawn_app(pool).await;
    let b = a.another_node().await;
    let q = a.create_queue("shared").await;
    add_consumer(&a, &q, json!({"type": "http_pull"})).await;
    b.publish_texts(&q, &["one"]).await;
    assert_eq!(bodies(&b.pull(&q, json!({})).await), ["one"], "b learns of the queue and its one consumer");

    let second = add_consumer(&a, &q, json!({"type": "http_pull"})).await;
    b.publish_texts(&q, &["two"]).await;
    let refused = b.post(&format!("queues/{q}/messages/pull"), json!({})).await.expect_error(400);
    assert!(refused.contains("consumer_id"), "b knows the queue has two pull consumers now: {refused}");
    let got = pull_as(&b, &q, &second).await;
    assert_eq!(bodies(&got), ["two"], "b stored a copy for the consumer added on a");
    assert_eq!(a.ack(&q, &leases(&got), json!([])).await["ackCount"], 1, "a lease taken on b, acked on a");

    a.delete(&format!("queues/{q}/consumers/{second}")).await.expect_ok();
    b.publish_texts(&q, &["three"]).await;
    let got = b.pull(&q, json!({"batch_size": 10, "visibility_timeout_ms": 60_000})).await;
    assert_eq!(bodies(&got), ["two", "three"], "one pull consumer again: no consumer_id needed");
}
