//! Ordered delivery per key: messages of one key come in publish order, one at a time, whoever pulls
//! them and whatever happens to their leases; keys take turns; unkeyed messages are never held back.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app, TestApp};
use crate::receiver::{Answer, Receiver};

const DEADLINE: Duration = Duration::from_secs(20);

/// Publishes one batch of `(key, body)` text messages, a None key publishing without one.
async fn publish_keyed(app: &TestApp, queue: &str, messages: &[(Option<&str>, &str)]) -> Value {
    let messages: Vec<Value> = messages
        .iter()
        .map(|(key, body)| match key {
            Some(key) => json!({"body": body, "content_type": "text", "ordering_key": key}),
            None => json!({"body": body, "content_type": "text"}),
        })
        .collect();
    app.post(&format!("queues/{queue}/messages/batch"), json!({ "messages": messages })).await.expect_ok().clone()
}

fn bodies(messages: &[Value]) -> Vec<&str> {
    messages.iter().map(|m| m["body"].as_str().unwrap()).collect()
}

fn leases(messages: &[Value]) -> Vec<&str> {
    messages.iter().map(lease).collect()
}

async fn pull_bodies(app: &TestApp, queue: &str, batch_size: usize) -> Vec<Value> {
    app.pull(queue, json!({"batch_size": batch_size, "visibility_timeout_ms": 600_000})).await
}

fn sorted(mut v: Vec<&str>) -> Vec<&str> {
    v.sort_unstable();
    v
}

#[sqlx::test]
async fn a_key_gives_one_message_at_a_time_in_publish_order(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    publish_keyed(&app, &q, &[(Some("a"), "a1"), (Some("b"), "b1"), (Some("a"), "a2"), (None, "u1")]).await;
    publish_keyed(&app, &q, &[(Some("a"), "a3"), (Some("b"), "b2"), (None, "u2")]).await;

    let first = pull_bodies(&app, &q, 10).await;
    assert_eq!(sorted(bodies(&first)), vec!["a1", "b1", "u1", "u2"], "one message per key; unkeyed ones all");
    let key_of = |m: &Value| m["metadata"]["ordering_key"].as_str().map(str::to_owned);
    let keys: BTreeMap<&str, Option<String>> = first.iter().map(|m| (m["body"].as_str().unwrap(), key_of(m))).collect();
    assert_eq!(keys["a1"].as_deref(), Some("a"));
    assert_eq!(keys["u1"], None, "an unkeyed message's metadata is Cloudflare's");
    assert!(pull_bodies(&app, &q, 10).await.is_empty(), "while a1 and b1 are leased, a2 and b2 wait");

    let by_body: HashMap<&str, &str> = first.iter().map(|m| (m["body"].as_str().unwrap(), lease(m))).collect();
    app.ack(&q, &[by_body["a1"]], json!([])).await;
    assert_eq!(bodies(&pull_bodies(&app, &q, 10).await), vec!["a2"], "the ack of a1 lets a2 go, not b2");
    let acked = app.ack(&q, &[by_body["b1"]], json!([])).await;
    assert_eq!(acked["ackCount"], 1);
    let next = pull_bodies(&app, &q, 10).await;
    assert_eq!(bodies(&next), vec!["b2"]);
    let stats = app.get(&format!("queues/{q}/stats")).await;
    assert_eq!(stats.expect_ok()["ordering_key_count"], 2, "a and b still have messages");
}

#[sqlx::test]
async fn keys_are_per_queue(pool: PgPool) {
    let app = spawn_app(pool).await;
    let one = app.pull_queue("one", json!({})).await;
    let two = app.pull_queue("two", json!({})).await;
    publish_keyed(&app, &one, &[(Some("k"), "one-1"), (Some("k"), "one-2")]).await;
    publish_keyed(&app, &two, &[(Some("k"), "two-1"), (Some("k"), "two-2")]).await;
    assert_eq!(bodies(&pull_bodies(&app, &one, 10).await), vec!["one-1"]);
    assert_eq!(bodies(&pull_bodies(&app, &two, 10).await), vec!["two-1"], "a lease in one queue holds back no other");
}

#[sqlx::test]
async fn a_batch_keeps_array_order_and_one_pull_takes_every_key_in_turn(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let batch: Vec<(Option<&str>, String)> = (0..60).map(|i| (Some(["x", "y", "z"][i % 3]), format!("m{i}"))).collect();
    let batch: Vec<(Option<&str>, &str)> = batch.iter().map(|(k, b)| (*k, b.as_str())).collect();
    publish_keyed(&app, &q, &batch).await;
    let mut seen: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for _ in 0..20 {
        let got = pull_bodies(&app, &q, 100).await;
        assert_eq!(got.len(), 3, "each pull takes the head of each of the three keys");
        for m in &got {
            let n: usize = m["body"].as_str().unwrap()[1..].parse().unwrap();
            seen.entry(m["metadata"]["ordering_key"].as_str().unwrap().to_owned()).or_default().push(n);
        }
        app.ack(&q, &leases(&got), json!([])).await;
    }
    for (i, key) in ["x", "y", "z"].iter().enumerate() {
        let expected: Vec<usize> = (0..60).filter(|n| n % 3 == i).collect();
        assert_eq!(seen[*key], expected, "key {key} in array order");
    }
    assert!(pull_bodies(&app, &q, 100).await.is_empty());
    let stats = app.get(&format!("queues/{q}/stats")).await;
    assert_eq!(stats.expect_ok()["ordering_key_count"], 0, "keys without messages are forgotten");
}

#[sqlx::test]
async fn a_retry_keeps_its_place_and_dead_lettering_lets_the_next_go(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({"dead_letter_queue": "orders-dlq", "settings": {"max_retries": 1}})).await;
    publish_keyed(&app, &q, &[(Some("k"), "k1"), (Some("k"), "k2")]).await;

    let got = pull_bodies(&app, &q, 10).await;
    assert_eq!(bodies(&got), vec!["k1"]);
    app.ack(&q, &[], json!([{"lease_id": lease(&got[0]), "delay_seconds": 0}])).await;
    let again = pull_bodies(&app, &q, 10).await;
    assert_eq!(bodies(&again), vec!["k1"], "the retried message is still the key's head");
    assert_eq!(again[0]["attempts"], 2);
    app.ack(&q, &[], json!([{"lease_id": lease(&again[0]), "delay_seconds": 0}])).await;

    let next = pull_bodies(&app, &q, 10).await;
    assert_eq!(bodies(&next), vec!["k2"], "k1 was dead-lettered, so k2 goes");
    let dlq = app.get("queues?name=orders-dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    let peeked = app.post(&format!("queues/{dlq}/messages/peek"), json!({"batch_size": 10})).await;
    let peeked = peeked.expect_ok()["messages"].as_array().unwrap().clone();
    assert_eq!(bodies(&peeked), vec!["k1"]);
    assert_eq!(peeked[0]["metadata"]["ordering_key"], "k", "the key goes with the message");
}

#[sqlx::test]
async fn a_delayed_head_holds_back_its_key_but_nothing_else(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.post(
        &format!("queues/{q}/messages"),
        json!({"body": "late", "content_type": "text", "ordering_key": "k", "delay_seconds": 3600}),
    )
    .await
    .expect_ok();
    publish_keyed(&app, &q, &[(Some("k"), "after-late"), (Some("other"), "o1"), (None, "u1")]).await;
    assert_eq!(sorted(bodies(&pull_bodies(&app, &q, 10).await)), vec!["o1", "u1"]);

    // Purging the delayed head (by its peek ref) lets the next message of its key go at once.
    let peeked = app.post(&format!("queues/{q}/messages/peek"), json!({"batch_size": 10})).await;
    let peeked = peeked.expect_ok()["messages"].as_array().unwrap().clone();
    let late = peeked.iter().find(|m| m["body"] == "late").expect("peek shows the delayed head");
    assert_eq!(late["metadata"]["ordering_key"], "k");
    let purged = app.post(&format!("queues/{q}/messages/purge"), json!({"refs": [{"ref": late["ref"]}]})).await;
    purged.expect_ok();
    assert_eq!(bodies(&pull_bodies(&app, &q, 10).await), vec!["after-late"]);
}

#[sqlx::test]
async fn an_expired_lease_gives_the_same_message_again_not_the_next(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    publish_keyed(&app, &q, &[(Some("k"), "k1"), (Some("k"), "k2")]).await;
    let got = app.pull(&q, json!({"batch_size": 10, "visibility_timeout_ms": 300})).await;
    assert_eq!(bodies(&got), vec!["k1"]);
    let again = app.pull_until_some(&q, json!({"batch_size": 10, "visibility_timeout_ms": 600_000}), DEADLINE).await;
    assert_eq!(bodies(&again), vec!["k1"], "the lease ran out: k1 again, never k2 before it");
    assert_eq!(again[0]["attempts"], 2);
}

#[sqlx::test]
async fn a_publish_racing_the_ack_of_its_keys_last_message_is_never_stranded(pool: PgPool) {
    let a = spawn_app(pool).await;
    let b = a.another_node().await;
    let q = a.pull_queue("orders", json!({})).await;
    let pull = json!({"batch_size": 10, "visibility_timeout_ms": 600_000});
    for round in 0..40 {
        let (first, next, after) = (format!("first{round}"), format!("next{round}"), format!("after{round}"));
        publish_keyed(&a, &q, &[(Some("k"), first.as_str())]).await;
        let got = pull_bodies(&a, &q, 10).await;
        assert_eq!(bodies(&got), vec![first.as_str()]);
        // The key's only message is acked on one node while the next is published on the other: whichever
        // commits first, the new message becomes the key's head, and the key stays known, so a message
        // published after it waits behind it.
        let (acked, published) = (leases(&got), [(Some("k"), next.as_str())]);
        tokio::join!(a.ack(&q, &acked, json!([])), publish_keyed(&b, &q, &published));
        publish_keyed(&a, &q, &[(Some("k"), after.as_str())]).await;
        let again = a.pull_until_some(&q, pull.clone(), DEADLINE).await;
        assert_eq!(bodies(&again), vec![next.as_str()], "round {round}");
        a.ack(&q, &leases(&again), json!([])).await;
        let last = pull_bodies(&a, &q, 10).await;
        assert_eq!(bodies(&last), vec![after.as_str()], "round {round}");
        a.ack(&q, &leases(&last), json!([])).await;
    }
}

#[sqlx::test]
async fn keys_are_served_round_robin_so_a_deep_key_starves_none(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let deep: Vec<String> = (0..100).map(|i| format!("deep{i}")).collect();
    publish_keyed(&app, &q, &deep.iter().map(|b| (Some("deep"), b.as_str())).collect::<Vec<_>>()).await;
    let small: Vec<(String, String)> =
        (0..5).flat_map(|k| (0..3).map(move |i| (format!("s{k}"), format!("s{k}-{i}")))).collect();
    publish_keyed(&app, &q, &small.iter().map(|(k, b)| (Some(k.as_str()), b.as_str())).collect::<Vec<_>>()).await;
    let mut small_left = small.len();
    let mut pulls = 0;
    while small_left > 0 {
        pulls += 1;
        assert!(pulls <= 10, "the small keys were starved");
        let got = pull_bodies(&app, &q, 5).await;
        small_left -= got.iter().filter(|m| m["body"].as_str().unwrap().starts_with('s')).count();
        app.ack(&q, &leases(&got), json!([])).await;
    }
    // Each small key needs three pulls, one message each; six keys share five places a pull, so a key may
    // miss a turn (a key whose next message was let go joins the back of the line).
    assert!(pulls <= 5, "{pulls} pulls until every small key's messages were delivered");
}

#[sqlx::test]
async fn invalid_ordering_keys_are_refused_and_nothing_is_stored(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    for bad in [json!(""), json!("with space"), json!("é"), json!("k".repeat(129)), json!(7)] {
        let messages = json!([
            {"body": "fine", "content_type": "text", "ordering_key": "ok"},
            {"body": "bad", "content_type": "text", "ordering_key": bad},
        ]);
        let resp = app.post(&format!("queues/{q}/messages/batch"), json!({ "messages": messages })).await;
        let message = resp.expect_error(400);
        if bad.is_string() {
            assert!(message.contains("messages[1].ordering_key"), "{message}");
        }
    }
    let resp = app
        .post(&format!("queues/{q}/messages"), json!({"body": "x", "content_type": "text", "ordering_key": "a b"}))
        .await;
    assert!(resp.expect_error(400).contains("message.ordering_key"));
    assert_eq!(app.backlog(&q).await, 0, "nothing of a refused request is stored");
    publish_keyed(&app, &q, &[(Some(&"k".repeat(128)), "longest"), (Some("~!#"), "punctuation")]).await;
    assert_eq!(app.backlog(&q).await, 2);
}

#[sqlx::test]
async fn idempotency_and_ordering_keys_work_together(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let send = |body: &'static str, id: &'static str| json!({"body": body, "content_type": "text", "ordering_key": "k", "idempotency_key": id});
    let url = format!("queues/{q}/messages/batch");
    app.post(&url, json!({"messages": [send("k1", "i1"), send("k2", "i2")]})).await.expect_ok();
    let resent = app.post(&url, json!({"messages": [send("k1", "i1"), send("k3", "i3")]})).await;
    assert_eq!(resent.expect_ok()["metadata"]["duplicates"], 1);
    let mut order = Vec::new();
    for _ in 0..3 {
        let got = pull_bodies(&app, &q, 10).await;
        assert_eq!(got.len(), 1);
        order.push(got[0]["body"].as_str().unwrap().to_owned());
        app.ack(&q, &leases(&got), json!([])).await;
    }
    assert_eq!(order, vec!["k1", "k2", "k3"]);
}

#[sqlx::test]
async fn a_redrive_brings_a_key_back_in_order(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({"dead_letter_queue": "dlq", "settings": {"max_retries": 0}})).await;
    let batch: Vec<String> = (0..5).map(|i| format!("k{i}")).collect();
    publish_keyed(&app, &q, &batch.iter().map(|b| (Some("k"), b.as_str())).collect::<Vec<_>>()).await;
    for _ in 0..5 {
        let got = pull_bodies(&app, &q, 10).await;
        assert_eq!(got.len(), 1);
        app.ack(&q, &[], json!([{"lease_id": lease(&got[0])}])).await;
    }
    let dlq = app.get("queues?name=dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    assert_eq!(app.backlog(&dlq).await, 5);
    let started = app.post(&format!("queues/{dlq}/redrive"), json!({})).await;
    assert_eq!(started.status, 201, "{}", started.body);
    let deadline = Instant::now() + DEADLINE;
    while app.backlog(&q).await < 5 {
        assert!(Instant::now() < deadline, "the redrive did not finish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut order = Vec::new();
    for _ in 0..5 {
        let got = pull_bodies(&app, &q, 10).await;
        assert_eq!(got.len(), 1, "still one at a time after the redrive");
        order.push(got[0]["body"].as_str().unwrap().to_owned());
        app.ack(&q, &leases(&got), json!([])).await;
    }
    assert_eq!(order, batch, "the redriven key keeps its order");
}

/// What a puller saw of one delivery.
#[derive(Debug, Clone)]
struct Delivery {
    key: String,
    seq: usize,
    id: String,
    received: Instant,
    /// When the puller sent the ack, or None: it let the lease run out.
    acked: Option<Instant>,
    lease_ends: Instant,
}

#[sqlx::test]
async fn pullers_on_two_nodes_never_hold_two_messages_of_a_key_and_keep_its_order(pool: PgPool) {
    const KEYS: usize = 12;
    const PER_KEY: usize = 8;
    const VISIBILITY_MS: u64 = 400;
    let a = spawn_app(pool).await;
    let b = a.another_node().await;
    // Deliveries are plenty: an ack slowed past a few leases on a loaded machine must not use them up, which
    // would delete the message unacked and leave the pullers waiting for it.
    let q = a.pull_queue("orders", json!({"settings": {"max_retries": 100}})).await;
    let messages: Vec<(String, String)> =
        (0..PER_KEY).flat_map(|seq| (0..KEYS).map(move |k| (format!("key{k}"), format!("key{k}:{seq}")))).collect();
    for chunk in messages.chunks(50) {
        publish_keyed(&a, &q, &chunk.iter().map(|(k, b)| (Some(k.as_str()), b.as_str())).collect::<Vec<_>>()).await;
    }
    let log: Arc<Mutex<Vec<Delivery>>> = Arc::default();
    let apps = [Arc::new(a), Arc::new(b)];
    let mut pullers = Vec::new();
    for p in 0..4 {
        let (app, log, q) = (apps[p % 2].clone(), log.clone(), q.clone());
        pullers.push(tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut round = 0usize;
            let acked = |log: &[Delivery]| {
                log.iter().filter(|d| d.acked.is_some()).map(|d| d.id.clone()).collect::<std::collections::HashSet<_>>()
            };
            while acked(&log.lock().unwrap()).len() < KEYS * PER_KEY {
                if Instant::now() >= deadline {
                    let log = log.lock().unwrap();
                    let acked: std::collections::HashSet<_> =
                        log.iter().filter(|d| d.acked.is_some()).map(|d| (d.key.clone(), d.seq)).collect();
                    let waiting: Vec<String> = (0..KEYS)
                        .flat_map(|k| (0..PER_KEY).map(move |seq| (format!("key{k}"), seq)))
                        .filter(|m| !acked.contains(m))
                        .map(|(key, seq)| format!("{key}:{seq}"))
                        .collect();
                    panic!("the pullers did not finish; never acked: {waiting:?}");
                }
                round += 1;
                let sent = Instant::now();
                let got = app.pull(&q, json!({"batch_size": 5, "visibility_timeout_ms": VISIBILITY_MS})).await;
                let received = Instant::now();
                let mut acks = Vec::new();
                for (i, m) in got.iter().enumerate() {
                    let (key, seq) = m["body"].as_str().unwrap().split_once(':').unwrap();
                    // Every seventh delivery is dropped: its lease runs out and it must come back first.
                    let drop = (round * 5 + i + p).is_multiple_of(7);
                    let delivery = Delivery {
                        key: key.to_owned(),
                        seq: seq.parse().unwrap(),
                        id: m["id"].as_str().unwrap().to_owned(),
                        received,
                        acked: None,
                        lease_ends: sent + Duration::from_millis(VISIBILITY_MS),
                    };
                    if !drop {
                        acks.push((log.lock().unwrap().len(), lease(m).to_owned()));
                    }
                    log.lock().unwrap().push(delivery);
                }
                if acks.is_empty() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                let sent = Instant::now();
                for (i, _) in &acks {
                    log.lock().unwrap()[*i].acked = Some(sent);
                }
                let leases: Vec<&str> = acks.iter().map(|(_, l)| l.as_str()).collect();
                app.ack(&q, &leases, json!([])).await;
            }
        }));
    }
    for puller in pullers {
        puller.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let mut by_key: BTreeMap<&str, Vec<&Delivery>> = BTreeMap::new();
    for d in &log {
        by_key.entry(d.key.as_str()).or_default().push(d);
    }
    for (key, mut deliveries) in by_key {
        deliveries.sort_by_key(|d| d.received);
        // Acks are permissive (API.md): an ack sent after its lease ran out still deletes the message,
        // even while another consumer holds it again, and that lets the key's next message go. So a
        // message is released by its own ack or lease end, or by the first ack of any of its deliveries.
        let first_ack = |seq: usize| deliveries.iter().filter(|d| d.seq == seq).filter_map(|d| d.acked).min();
        let mut first_seen: Vec<usize> = Vec::new();
        for (i, d) in deliveries.iter().enumerate() {
            if !first_seen.contains(&d.seq) {
                first_seen.push(d.seq);
            }
            // A later message of the key comes only once every earlier delivery was acked or ran out (an
            // ack sent after the lease ran out may come after the message was delivered and acked again).
            for before in deliveries[..i].iter().filter(|b| b.seq < d.seq) {
                let own = before.acked.map_or(before.lease_ends, |acked| acked.min(before.lease_ends));
                let released = first_ack(before.seq).map_or(own, |acked| acked.min(own));
                assert!(d.received >= released, "{key}: seq {} handed out while seq {} was held", d.seq, before.seq);
            }
        }
        assert_eq!(first_seen, (0..PER_KEY).collect::<Vec<_>>(), "{key}: first deliveries in publish order");
        let acked: std::collections::BTreeSet<usize> =
            deliveries.iter().filter(|d| d.acked.is_some()).map(|d| d.seq).collect();
        assert_eq!(acked.len(), PER_KEY, "{key}: every message acked");
    }
}

#[sqlx::test]
async fn a_webhook_consumer_keeps_each_key_in_order_across_concurrent_batches(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer { delay: Duration::from_millis(30), ..Answer::status(200) }).await;
    let hook = app
        .webhook_queue(
            "hooked",
            &receiver.url,
            json!({"settings": {"batch_size": 4, "max_concurrency": 4, "max_wait_time_ms": 0}}),
        )
        .await;
    let messages: Vec<(String, String)> =
        (0..10).flat_map(|seq| (0..6).map(move |k| (format!("key{k}"), format!("key{k}:{seq}")))).collect();
    publish_keyed(&app, &hook.queue, &messages.iter().map(|(k, b)| (Some(k.as_str()), b.as_str())).collect::<Vec<_>>())
        .await;
    let node = crate::helpers::listening_dispatcher(&pool, Duration::from_secs(5)).await;
    let deadline = Instant::now() + DEADLINE;
    let delivered = loop {
        let got = receiver.received();
        let count: usize = got.iter().map(|r| r.ids().len()).sum();
        if count >= messages.len() {
            break got;
        }
        assert!(Instant::now() < deadline, "{count} of {} delivered", messages.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    node.stop().await;
    assert!(receiver.max_in_flight() > 1, "batches were in flight at once");
    let mut next: HashMap<String, usize> = HashMap::new();
    for batch in &delivered {
        let mut keys_in_batch = Vec::new();
        for m in batch.body["messages"].as_array().unwrap() {
            let (key, seq) = m["body"].as_str().unwrap().split_once(':').unwrap();
            assert_eq!(m["metadata"]["ordering_key"], key);
            let expected = next.entry(key.to_owned()).or_default();
            assert_eq!(seq.parse::<usize>().unwrap(), *expected, "{key} out of order");
            *expected += 1;
            keys_in_batch.push(key.to_owned());
        }
        let distinct: std::collections::HashSet<_> = keys_in_batch.iter().collect();
        assert_eq!(distinct.len(), keys_in_batch.len(), "one message per key in a batch");
    }
}
