//! Event subscriptions: Cloudflare's routes and shapes, and the events themselves (a consumer failing and
//! recovering, messages dead-lettered, a backlog over its threshold, a redrive finished) arriving once
//! each, in Cloudflare's envelope, in the queue the subscription names.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{spawn_app, spawn_app_dispatching, TestApp};
use crate::receiver::{Answer, Receiver};
use crate::redrive::{dead_letter, source_queue};

const SUBSCRIPTIONS: &str = "event_subscriptions/subscriptions";
/// An event reaches its queue within about a second of what caused it (the backlog's within five).
const DELIVERED: Duration = Duration::from_secs(20);

/// Pulls and acks the queue's events until `count` arrived (and a moment more, to catch any extra);
/// answers their bodies.
pub(crate) async fn events(app: &TestApp, queue: &str, count: usize) -> Vec<Value> {
    let mut got = Vec::new();
    let deadline = Instant::now() + DELIVERED;
    let mut quiet_until: Option<Instant> = None;
    loop {
        let pulled = app.pull(queue, json!({"batch_size": 100, "visibility_timeout_ms": 60000})).await;
        let leases: Vec<&str> = pulled.iter().map(crate::helpers::lease).collect();
        if !leases.is_empty() {
            app.ack(queue, &leases, json!([])).await;
        }
        for m in &pulled {
            // A pull answers a JSON body in base64, as Cloudflare's does.
            assert_eq!(m["metadata"]["CF-Content-Type"], "json", "{m}");
            let bytes = BASE64.decode(m["body"].as_str().unwrap()).unwrap();
            got.push(serde_json::from_slice::<Value>(&bytes).unwrap());
        }
        if got.len() >= count {
            // Two more publish turns with nothing new: no event came twice.
            let until = *quiet_until.get_or_insert_with(|| Instant::now() + Duration::from_millis(2500));
            if Instant::now() >= until {
                return got;
            }
        }
        assert!(Instant::now() < deadline, "timed out waiting for {count} events in {queue}: {got:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) async fn subscribe(app: &TestApp, source: Value, events: &[&str], destination: &str) -> Value {
    let body = json!({"name": "alerts", "source": source, "events": events,
                      "destination": {"type": "queues.queue", "queue_id": destination}});
    app.post(SUBSCRIPTIONS, body).await.expect_ok().clone()
}

/// A webhook consumer of the queue "orders" whose receiver fails until `up` is set, one message at a time
/// and at once again, with `extra` settings.
struct Endpoint {
    hook: crate::helpers::Hook,
    up: Arc<AtomicBool>,
    receiver: Receiver,
}

/// The queue "alerts", subscribed to `events` of every queue, and a failing endpoint.
async fn failing_endpoint(app: &TestApp, events: &[&str], extra: Value) -> (String, Endpoint) {
    let up = Arc::new(AtomicBool::new(false));
    let answer = up.clone();
    let receiver =
        Receiver::start(move |_| if answer.load(Ordering::SeqCst) { Answer::status(200) } else { Answer::status(500) })
            .await;
    let alerts = app.pull_queue("alerts", json!({})).await;
    subscribe(app, json!({"type": "queues"}), events, &alerts).await;
    let mut settings = json!({"max_concurrency": 1, "batch_size": 1, "max_retries": 100, "retry_delay": 0,
                              "max_wait_time_ms": 0});
    settings.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let hook = app.webhook_queue("orders", &receiver.url, json!({ "settings": settings })).await;
    (alerts, Endpoint { hook, up, receiver })
}

#[sqlx::test]
async fn a_subscription_is_created_listed_changed_and_deleted_in_cloudflares_shape(pool: PgPool) {
    let app = spawn_app(pool).await;
    let orders = app.create_queue("orders").await;
    let alerts = app.create_queue("alerts").await;
    let other = app.create_queue("other-alerts").await;

    let made =
        subscribe(&app, json!({"type": "queues.queue", "queue_name": "orders"}), &["consumer.failing"], &alerts).await;
    assert_eq!(made["id"].as_str().unwrap().len(), 32);
    assert_eq!(made["source"], json!({"type": "queues.queue", "queue_id": orders, "queue_name": "orders"}));
    assert_eq!(made["destination"], json!({"type": "queues.queue", "queue_id": alerts}));
    assert_eq!((made["enabled"].as_bool(), made["events"].clone()), (Some(true), json!(["consumer.failing"])));
    assert!(made["created_at"].is_string() && made["modified_at"].is_string());
    let id = made["id"].as_str().unwrap();
    let path = format!("{SUBSCRIPTIONS}/{id}");
    assert_eq!(app.get(&path).await.expect_ok(), &made);

    let wide = json!({"name": "all", "source": {"type": "queues"}, "events": ["redrive.finished"],
                      "destination": {"type": "queues.queue", "queue_id": alerts}});
    app.post(SUBSCRIPTIONS, wide).await.expect_ok();
    let listed = app.get(&format!("{SUBSCRIPTIONS}?order=name&direction=desc")).await;
    let names: Vec<&str> = listed.expect_ok().as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["all", "alerts"]);
    assert_eq!(listed.body["result_info"]["total_count"], 2);

    let changed = app
        .patch(
            &path,
            json!({"enabled": false, "events": ["consumer.failing", "consumer.recovered"],
                             "destination": {"type": "queues.queue", "queue_id": other}}),
        )
        .await;
    let changed = changed.expect_ok();
    assert_eq!((changed["enabled"].as_bool(), changed["name"].as_str()), (Some(false), Some("alerts")));
    assert_eq!(changed["destination"]["queue_id"], other.as_str());
    assert_eq!(changed["events"], json!(["consumer.failing", "consumer.recovered"]));

    let gone = app.delete(&path).await;
    assert_eq!(gone.expect_ok()["id"], id);
    app.get(&path).await.expect_error(404);
    app.delete(&path).await.expect_error(404);

    let to = |queue: &str| json!({"type": "queues.queue", "queue_id": queue});
    for (body, says) in [
        (
            json!({"source": {"type": "queues"}, "events": ["redrive.finished"], "destination": to(&alerts)}),
            "name is required",
        ),
        (
            json!({"name": "x", "source": {"type": "kv"}, "events": ["namespace.created"], "destination": to(&alerts)}),
            "not an event source of this server",
        ),
        (
            json!({"name": "x", "source": {"type": "queues"}, "events": ["queue.exploded"], "destination": to(&alerts)}),
            "unknown event type",
        ),
        (json!({"name": "x", "source": {"type": "queues"}, "events": [], "destination": to(&alerts)}), "at least one"),
        (
            json!({"name": "x", "source": {"type": "queues.queue", "queue_name": "orders"},
                "events": ["backlog.over_threshold"], "destination": to(&alerts)}),
            "needs source.backlog_threshold",
        ),
        (
            json!({"name": "x", "source": {"type": "queues", "backlog_threshold": 5},
                "events": ["backlog.over_threshold"], "destination": to(&alerts)}),
            "an event of one queue",
        ),
        (
            json!({"name": "x", "source": {"type": "queues.queue", "queue_name": "orders"},
                "events": ["consumer.failing"], "destination": to(&orders)}),
            "the source queue itself",
        ),
        (
            json!({"name": "x", "source": {"type": "queues"}, "events": ["consumer.failing"],
                "destination": {"type": "workers.script", "queue_id": alerts}}),
            "destination.type must be",
        ),
        (
            json!({"name": "x", "source": {"type": "queues.queue"}, "events": ["consumer.failing"], "destination": to(&alerts)}),
            "queue_name or queue_id",
        ),
    ] {
        let why = app.post(SUBSCRIPTIONS, body.clone()).await.expect_error(400);
        assert!(why.contains(says), "{body}: {why}");
    }
    // The threshold belongs to the source: a change may drop the backlog event, and the threshold with
    // it, but not add it back.
    let backlog = json!({"name": "b", "source": {"type": "queues.queue", "queue_name": "orders", "backlog_threshold": 9},
                         "events": ["backlog.over_threshold"], "destination": to(&alerts)});
    let made = app.post(SUBSCRIPTIONS, backlog).await.expect_ok().clone();
    let path = format!("{SUBSCRIPTIONS}/{}", made["id"].as_str().unwrap());
    let dropped = app.patch(&path, json!({"events": ["consumer.failing"]})).await.expect_ok().clone();
    assert!(dropped["source"].get("backlog_threshold").is_none(), "{dropped}");
    let why = app.patch(&path, json!({"events": ["backlog.over_threshold"]})).await.expect_error(400);
    assert!(why.contains("only a new subscription sets"), "{why}");

    let missing = json!({"name": "x", "source": {"type": "queues.queue", "queue_name": "nope"},
                         "events": ["consumer.failing"], "destination": to(&alerts)});
    app.post(SUBSCRIPTIONS, missing).await.expect_error(404);
    let why = app.get(&format!("{SUBSCRIPTIONS}?order=colour")).await.expect_error(400);
    assert!(why.contains("order must be one of"), "{why}");
}

/// A batch of dead-lettered messages is one event with its count and ids; the subscription of another
/// queue, and a disabled one, get nothing; a redrive's end is an event of the queue it drained.
#[sqlx::test]
async fn dead_lettered_messages_and_a_finished_redrive_arrive_as_events(pool: PgPool) {
    let app = spawn_app(pool).await;
    let orders = source_queue(&app, "orders", "dlq").await;
    let refunds = source_queue(&app, "refunds", "dlq").await;
    let alerts = app.pull_queue("alerts", json!({})).await;
    let quiet = app.pull_queue("quiet", json!({})).await;
    subscribe(&app, json!({"type": "queues.queue", "queue_name": "orders"}), &["messages.dead_lettered"], &alerts)
        .await;
    subscribe(&app, json!({"type": "queues"}), &["redrive.finished"], &alerts).await;
    let off = subscribe(&app, json!({"type": "queues"}), &["messages.dead_lettered"], &quiet).await;
    app.patch(&format!("{SUBSCRIPTIONS}/{}", off["id"].as_str().unwrap()), json!({"enabled": false})).await.expect_ok();

    let mut ids = dead_letter(&app, &orders, 3).await;
    dead_letter(&app, &refunds, 2).await;
    let got = events(&app, &alerts, 1).await;
    assert_eq!(got.len(), 1, "one event for the batch, none for refunds: {got:?}");
    let e = &got[0];
    assert_eq!(e["type"], "skiplock.queues.messages.dead_lettered");
    assert_eq!(e["source"], json!({"type": "queues.queue", "queueId": orders, "queueName": "orders"}));
    assert_eq!((e["payload"]["count"].as_i64(), e["payload"]["deadLetterQueue"].as_str()), (Some(3), Some("dlq")));
    let mut listed: Vec<String> =
        e["payload"]["messageIds"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_owned()).collect();
    listed.sort();
    ids.sort();
    assert_eq!(listed, ids);
    assert_eq!(e["metadata"]["accountId"], app.account.to_string());
    assert_eq!(e["metadata"]["eventSchemaVersion"], 1);
    assert!(e["metadata"]["eventSubscriptionId"].as_str().unwrap().len() == 32);
    assert!(chrono::DateTime::parse_from_rfc3339(e["metadata"]["eventTimestamp"].as_str().unwrap()).is_ok());

    let dlq = app.get("queues?name=dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    let task = app.post(&format!("queues/{dlq}/redrive"), json!({})).await;
    assert_eq!(task.status, 201, "{:?}", task.body);
    let task_id = task.body["result"]["redrive_id"].as_str().unwrap().to_owned();
    let got = events(&app, &alerts, 1).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["type"], "skiplock.queues.redrive.finished");
    assert_eq!(got[0]["source"]["queueName"], "dlq");
    assert_eq!(
        got[0]["payload"],
        json!({"redriveId": task_id, "status": "completed", "moved": 5, "stayed": 0,
                                         "error": null})
    );
    assert_eq!(app.backlog(&quiet).await, 0, "the disabled subscription got nothing");
}

/// An endpoint whose circuit opens is one `consumer.failing` event, and its recovery one
/// `consumer.recovered`, however many attempts fail meanwhile.
#[sqlx::test]
async fn a_failing_endpoint_and_its_recovery_are_one_event_each(pool: PgPool) {
    let app = spawn_app_dispatching(pool).await;
    let (alerts, endpoint) = failing_endpoint(&app, &["consumer.failing", "consumer.recovered"], json!({})).await;
    let Endpoint { hook, up, receiver: _receiver } = endpoint;
    app.publish_texts(&hook.queue, &["a", "b"]).await;

    let failing = events(&app, &alerts, 1).await;
    assert_eq!(failing.len(), 1, "{failing:?}");
    let e = &failing[0];
    assert_eq!(e["type"], "skiplock.queues.consumer.failing");
    assert_eq!(e["source"]["queueName"], "orders");
    assert_eq!(e["payload"]["consumerId"], hook.consumer.as_str());
    assert!(e["payload"]["consecutiveFailures"].as_i64().unwrap() >= 5, "{e}");
    assert_eq!(
        (e["payload"]["lastFailure"]["outcome"].as_str(), e["payload"]["lastFailure"]["status"].as_i64()),
        (Some("server_error"), Some(500))
    );

    // The first probe fails too: the circuit was open already, so no second event.
    let consumer = format!("queues/{}/consumers/{}", hook.queue, hook.consumer);
    crate::helpers::wait_until("a probe fails", DELIVERED, || async {
        app.get(&consumer).await.expect_ok()["health"]["consecutive_failures"].as_i64().unwrap() > 5
    })
    .await;
    let more = events(&app, &alerts, 0).await;
    assert!(more.is_empty(), "a failed probe fired nothing: {more:?}");

    up.store(true, Ordering::SeqCst);
    let recovered = events(&app, &alerts, 1).await;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0]["type"], "skiplock.queues.consumer.recovered");
    assert_eq!(recovered[0]["payload"]["consumerId"], hook.consumer.as_str());
}

/// A backlog that rises over the threshold fires once; it fires again only after falling back to it.
#[sqlx::test]
async fn a_backlog_over_its_threshold_fires_once_per_crossing(pool: PgPool) {
    let app = spawn_app(pool).await;
    let orders = app.pull_queue("orders", json!({})).await;
    let alerts = app.pull_queue("alerts", json!({})).await;
    let source = json!({"type": "queues.queue", "queue_name": "orders", "backlog_threshold": 3});
    subscribe(&app, source, &["backlog.over_threshold"], &alerts).await;

    app.publish_texts(&orders, &["1", "2", "3", "4"]).await;
    let got = events(&app, &alerts, 1).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["type"], "skiplock.queues.backlog.over_threshold");
    assert_eq!(got[0]["payload"], json!({"backlog": 4, "threshold": 3}));

    app.publish_texts(&orders, &["5"]).await;
    let pulled = app.pull(&orders, json!({"batch_size": 100})).await;
    let leases: Vec<&str> = pulled.iter().map(crate::helpers::lease).collect();
    app.ack(&orders, &leases, json!([])).await;
    // Fallen back under it: wait for the check that re-arms it, then cross again.
    crate::helpers::wait_until("the threshold re-arms", DELIVERED, || async {
        let armed: bool = sqlx::query_scalar("select not over_threshold from event_subscriptions")
            .fetch_one(&app.pool)
            .await
            .unwrap();
        armed
    })
    .await;
    assert_eq!(app.backlog(&alerts).await, 0, "staying over it fired nothing more");
    app.publish_texts(&orders, &["6", "7", "8", "9", "10"]).await;
    let again = events(&app, &alerts, 1).await;
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0]["payload"]["backlog"], 5);
}

/// A consumer whose endpoint fails for its `disable_after_hours` is disabled: its health says so and
/// `consumer.disabled` arrives; a test send that succeeds enables it again, and its backlog flows.
#[sqlx::test]
async fn a_consumer_failing_past_its_disable_after_hours_is_disabled_until_a_test_send_succeeds(pool: PgPool) {
    let app = spawn_app_dispatching(pool).await;
    let wanted = ["consumer.disabled", "consumer.recovered"];
    let (alerts, endpoint) = failing_endpoint(&app, &wanted, json!({"disable_after_hours": 1})).await;
    let Endpoint { hook, up, receiver: _receiver } = endpoint;
    let consumer = format!("queues/{}/consumers/{}", hook.queue, hook.consumer);
    assert_eq!(app.get(&consumer).await.expect_ok()["settings"]["disable_after_hours"], 1);
    app.publish_texts(&hook.queue, &["a", "b"]).await;
    let health = || async { app.get(&consumer).await.expect_ok()["health"].clone() };
    crate::helpers::wait_until("the circuit opens", DELIVERED, || async { health().await["circuit"] == "open" }).await;

    // An hour of failing without waiting for it: the failures began two hours ago.
    sqlx::query("update webhook_health set failing_since = now() - interval '2 hours'")
        .execute(&app.pool)
        .await
        .unwrap();
    let disabled = events(&app, &alerts, 1).await;
    assert_eq!(disabled.len(), 1, "{disabled:?}");
    assert_eq!(disabled[0]["type"], "skiplock.queues.consumer.disabled");
    assert_eq!(disabled[0]["payload"]["consumerId"], hook.consumer.as_str());
    assert_eq!(disabled[0]["payload"]["disableAfterHours"], 1);
    let h = health().await;
    assert_eq!((h["state"].as_str(), h["next_probe_at"].is_null()), (Some("disabled"), true), "{h}");
    assert!(h["disabled_at"].is_string(), "{h}");
    assert_eq!(app.backlog(&hook.queue).await, 2, "nothing was lost while it was disabled");

    up.store(true, Ordering::SeqCst);
    let sent = app.post(&format!("{consumer}/test"), json!({})).await;
    assert_eq!(sent.expect_ok()["outcome"], "success");
    let h = health().await;
    assert_eq!((h["state"].as_str(), h["disabled_at"].is_null()), (Some("healthy"), true), "{h}");
    let recovered = events(&app, &alerts, 1).await;
    assert_eq!(recovered[0]["type"], "skiplock.queues.consumer.recovered", "{recovered:?}");
    crate::helpers::wait_until("the backlog flows again", DELIVERED, || async { app.backlog(&hook.queue).await == 0 })
        .await;

    let pull = app.create_queue("pulled").await;
    let why = app
        .post(&format!("queues/{pull}/consumers"), json!({"type": "http_pull", "settings": {"disable_after_hours": 1}}))
        .await
        .expect_error(400);
    assert!(why.contains("disable_after_hours applies to webhook consumers only"), "{why}");
}
