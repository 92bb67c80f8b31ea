//! The dispatcher's real loop: batching by size and wait, wake-ups on publish, concurrency, pausing,
//! shutdown, and two dispatcher processes sharing one database.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::helpers::{dispatcher, spawn_app, TestApp};
use crate::receiver::{Answer, Receiver};

const DEADLINE: Duration = Duration::from_secs(15);

/// Runs the dispatcher loop until the returned token is cancelled.
async fn run_dispatcher(pool: &PgPool, timeout: Duration) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    let d = Arc::new(dispatcher(pool, timeout).await);
    let handle = tokio::spawn(skiplock::dispatch::run(d, stop.clone()));
    (stop, handle)
}

async fn publish_n(app: &TestApp, queue: &str, n: usize) {
    let messages: Vec<Value> = (0..n).map(|i| json!({"body": format!("m{i}"), "content_type": "text"})).collect();
    app.post(&format!("queues/{queue}/messages/batch"), json!({ "messages": messages })).await.expect_ok();
}

#[sqlx::test]
async fn a_full_batch_goes_at_once_and_a_partial_one_after_max_wait(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let full = Receiver::start(|_| Answer::status(200)).await;
    let partial = Receiver::start(|_| Answer::status(200)).await;
    let full_hook =
        app.webhook_queue("full", &full.url, json!({"settings": {"batch_size": 5, "max_wait_time_ms": 30000}})).await;
    let partial_hook = app
        .webhook_queue("partial", &partial.url, json!({"settings": {"batch_size": 10, "max_wait_time_ms": 700}}))
        .await;
    let (stop, handle) = run_dispatcher(&pool, Duration::from_secs(5)).await;

    let sent = Instant::now();
    publish_n(&app, &full_hook.queue, 5).await;
    let got = full.wait_for(1, DEADLINE).await;
    assert_eq!(got[0].ids().len(), 5);
    assert!(got[0].at - sent < Duration::from_secs(10), "a full batch does not wait for max_wait_time_ms");

    let sent = Instant::now();
    publish_n(&app, &partial_hook.queue, 3).await;
    let got = partial.wait_for(1, DEADLINE).await;
    assert_eq!(got[0].ids().len(), 3);
    assert!(got[0].at - sent >= Duration::from_millis(700), "a partial batch waits max_wait_time_ms");
    stop.cancel();
    handle.await.unwrap();
    assert_eq!(full.received().len(), 1, "never an empty batch");
    assert_eq!(partial.received().len(), 1, "never an empty batch");
}

#[sqlx::test]
async fn max_wait_zero_delivers_each_publish_at_once(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue("now", &receiver.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    let (stop, handle) = run_dispatcher(&pool, Duration::from_secs(5)).await;
    for round in 1..=3 {
        app.publish_texts(&hook.queue, &["ping"]).await;
        let got = receiver.wait_for(round, DEADLINE).await;
        assert_eq!(got[round - 1].ids().len(), 1);
    }
    stop.cancel();
    handle.await.unwrap();
    assert_eq!(app.backlog(&hook.queue).await, 0);
}

#[sqlx::test]
async fn paused_queues_and_deleted_consumers_get_no_deliveries(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let paused = app.webhook_queue("paused", &receiver.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    let deleted = app.webhook_queue("deleted", &receiver.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    let witness = app.webhook_queue("witness", &receiver.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    app.patch(&format!("queues/{}", paused.queue), json!({"settings": {"delivery_paused": true}})).await.expect_ok();
    app.delete(&format!("queues/{}/consumers/{}", deleted.queue, deleted.consumer)).await.expect_ok();
    let (stop, handle) = run_dispatcher(&pool, Duration::from_secs(5)).await;
    app.publish_texts(&paused.queue, &["held"]).await;
    app.publish_texts(&deleted.queue, &["kept"]).await;
    // Published last; once it is delivered, the dispatcher has been through the others.
    app.publish_texts(&witness.queue, &["witness"]).await;
    receiver.wait_for(1, DEADLINE).await;
    let queues: Vec<String> =
        receiver.received().iter().map(|r| r.body["queue"].as_str().unwrap().to_owned()).collect();
    assert_eq!(queues, ["witness"]);
    assert_eq!(app.backlog(&paused.queue).await, 1);

    app.patch(&format!("queues/{}", paused.queue), json!({"settings": {"delivery_paused": false}})).await.expect_ok();
    let got = receiver.wait_for(2, DEADLINE).await;
    assert_eq!(got[1].body["queue"], "paused", "resuming delivers what waited");
    stop.cancel();
    handle.await.unwrap();
    assert_eq!(app.backlog(&deleted.queue).await, 1);
}

#[sqlx::test]
async fn concurrency_grows_with_the_backlog_up_to_max_concurrency(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer { delay: Duration::from_millis(150), ..Answer::status(200) }).await;
    let settings = json!({"settings": {"batch_size": 2, "max_wait_time_ms": 0, "max_concurrency": 3}});
    let hook = app.webhook_queue("busy", &receiver.url, settings).await;
    publish_n(&app, &hook.queue, 40).await;
    let (stop, handle) = run_dispatcher(&pool, Duration::from_secs(5)).await;
    let got = receiver.wait_for(20, DEADLINE).await;
    stop.cancel();
    handle.await.unwrap();
    assert_eq!(receiver.max_in_flight(), 3, "three batches in flight at once, never more");
    let mut seen: HashMap<String, usize> = HashMap::new();
    for id in got.iter().flat_map(|r| r.ids()) {
        *seen.entry(id).or_default() += 1;
    }
    assert_eq!(seen.len(), 40);
    assert!(seen.values().all(|n| *n == 1), "no message in two batches");
}

#[sqlx::test]
async fn a_shutdown_releases_batches_whose_receiver_has_not_answered(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer { delay: Duration::from_secs(30), ..Answer::status(200) }).await;
    let hook = app.webhook_queue("slow", &receiver.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    let (stop, handle) = run_dispatcher(&pool, Duration::from_secs(60)).await;
    app.publish_texts(&hook.queue, &["in flight"]).await;
    receiver.wait_for(1, DEADLINE).await;
    let stopping = Instant::now();
    stop.cancel();
    handle.await.unwrap();
    assert!(stopping.elapsed() < Duration::from_secs(5), "the shutdown grace bounds the wait");
    let state: (bool, bool, i32) =
        sqlx::query_as("select available_at <= now(), leased, attempts from messages").fetch_one(&pool).await.unwrap();
    assert_eq!(state, (true, false, 0), "released: available at once, the abandoned delivery not counted");
}

#[sqlx::test]
async fn two_dispatcher_processes_share_the_work_within_max_concurrency(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer { delay: Duration::from_millis(50), ..Answer::status(200) }).await;
    let settings = json!({"settings": {"batch_size": 5, "max_wait_time_ms": 0, "max_concurrency": 2}});
    let hook = app.webhook_queue("shared", &receiver.url, settings).await;
    let url = crate::process::database_url(&pool);
    let extra = [("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8")];
    let one =
        crate::process::Server::start_with(&url, crate::process::free_port(), &["--roles", "api,dispatcher"], &extra)
            .await;
    let two =
        crate::process::Server::start_with(&url, crate::process::free_port(), &["--roles", "api,dispatcher"], &extra)
            .await;
    publish_n(&app, &hook.queue, 100).await;
    publish_n(&app, &hook.queue, 100).await;
    let deadline = Instant::now() + DEADLINE;
    while app.backlog(&hook.queue).await > 0 {
        assert!(Instant::now() < deadline, "not everything was delivered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    one.kill().await;
    two.kill().await;
    let mut seen: HashMap<String, usize> = HashMap::new();
    for id in receiver.received().iter().flat_map(|r| r.ids()) {
        *seen.entry(id).or_default() += 1;
    }
    assert_eq!(seen.len(), 200);
    assert!(seen.values().all(|n| *n == 1), "no message in two batches");
    assert!(receiver.max_in_flight() <= 2, "max_concurrency held across processes: {}", receiver.max_in_flight());
}

/// A consumer created on any node reaches a running dispatcher by notification: this dispatcher reads
/// its consumer list only every two minutes, so a first delivery within the deadline came by the notice.
#[sqlx::test]
async fn a_new_consumer_is_delivered_to_at_once_without_waiting_for_the_periodic_read(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let running = crate::helpers::listening_dispatcher(&pool, Duration::from_secs(5)).await;
    let hook = app.webhook_queue("fresh", &receiver.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    publish_n(&app, &hook.queue, 1).await;
    let deadline = Instant::now() + DEADLINE;
    while receiver.received().is_empty() {
        assert!(Instant::now() < deadline, "no delivery: the new consumer was not noticed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.stop().await;
}

/// One account's slow receiver and backlog do not hold all of a node's deliveries in flight: another
/// account's message goes out while they wait. Without the fair share, the busy account's batches take
/// every place (4 here) and the quiet account's delivery waits for one of them to be answered.
#[sqlx::test]
async fn one_accounts_slow_receiver_does_not_hold_up_another_accounts_deliveries(pool: PgPool) {
    let busy = spawn_app(pool.clone()).await;
    let (account, token) = crate::helpers::new_account(&pool, "quiet", &skiplock::auth::Scope::ALL).await;
    let quiet = TestApp::remote(pool.clone(), busy.address.clone(), account, token);
    const SLOW: Duration = Duration::from_secs(5);
    let slow = Receiver::start(|_| Answer { delay: SLOW, ..Answer::status(200) }).await;
    let fast = Receiver::start(|_| Answer::status(200)).await;
    let settings = json!({"settings": {"batch_size": 1, "max_wait_time_ms": 0, "max_concurrency": 10}});
    let backlog = busy.webhook_queue("backlog", &slow.url, settings).await;
    let hook = quiet.webhook_queue("quiet", &fast.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    let settings = skiplock::dispatch::DispatchSettings {
        timeout: Duration::from_secs(30),
        max_in_flight: 4,
        ..Default::default()
    };
    let running = crate::helpers::listening_dispatcher_with(&pool, settings).await;
    publish_n(&busy, &backlog.queue, 10).await;
    slow.wait_for(3, DEADLINE).await;
    let sent = Instant::now();
    quiet.publish_texts(&hook.queue, &["meanwhile"]).await;
    let got = fast.wait_for(1, DEADLINE).await;
    assert!(got[0].at - sent < SLOW / 2, "the quiet account waited {:?} for the busy one", got[0].at - sent);
    assert!(slow.max_in_flight() < 4, "the busy account left a place for the others");
    running.stop().await;
}
