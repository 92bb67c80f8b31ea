//! Long polling (`wait_time_ms` on pull): a waiting pull answers as soon as a message can be leased,
//! woken across nodes, by timers, by pauses, deletes and shutdowns.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app, spawn_app_with, Resp, TestApp};

/// Wake-ups promised within 100 ms are checked against a looser bound: the test machine may be busy.
const PROMPT: Duration = Duration::from_secs(3);

async fn pull_resp(app: &TestApp, queue: &str, request: Value) -> Resp {
    app.post(&format!("queues/{queue}/messages/pull"), request).await
}

/// Waits until this node has `n` pulls waiting.
async fn until_waiting(app: &TestApp, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while app.metrics.waiting_pulls.get() != n {
        assert!(Instant::now() < deadline, "{} pulls waiting, expected {n}", app.metrics.waiting_pulls.get());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn wakeups(app: &TestApp, cause: &str) -> u64 {
    app.metrics.long_poll_wakeups.with_label_values(&[cause]).get()
}

/// Waits until this node's one pull is waiting and has had the look again that follows a fresh mark, and
/// that look found nothing, so that only a notification can wake it before its deadline.
async fn until_waiting_after_recheck(app: &TestApp) {
    until_waiting(app, 1).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while wakeups(app, "recheck") == 0 || app.metrics.long_poll_looks.get() < 2 {
        assert!(Instant::now() < deadline, "no look again after the mark was written");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn messages(resp: &Resp) -> Vec<Value> {
    resp.expect_ok()["messages"].as_array().unwrap().clone()
}

#[sqlx::test]
async fn a_waiting_pull_answers_as_soon_as_a_message_is_published(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let started = Instant::now();
    let (resp, published_at) = tokio::join!(pull_resp(&app, &q, json!({"wait_time_ms": 20_000})), async {
        until_waiting_after_recheck(&app).await;
        app.publish_texts(&q, &["hello"]).await;
        Instant::now()
    });
    let got = messages(&resp);
    assert_eq!(got.len(), 1, "{}", resp.body);
    assert_eq!(got[0]["body"], "hello");
    assert!(published_at.elapsed() < PROMPT, "answered {:?} after the publish", published_at.elapsed());
    assert!(started.elapsed() < Duration::from_secs(15), "it did not wait for the deadline");
    assert_eq!(wakeups(&app, "notify"), 1);
    assert_eq!(app.metrics.waiting_pulls.get(), 0, "the wait is over");
}

#[sqlx::test]
async fn a_publish_on_another_node_wakes_a_pull_waiting_on_this_one(pool: PgPool) {
    let a = spawn_app(pool).await;
    let b = a.another_node().await;
    let q = a.pull_queue("orders", json!({})).await;
    let (resp, published_at) = tokio::join!(pull_resp(&a, &q, json!({"wait_time_ms": 20_000})), async {
        until_waiting_after_recheck(&a).await;
        b.publish_texts(&q, &["from b"]).await;
        Instant::now()
    });
    assert_eq!(messages(&resp)[0]["body"], "from b");
    assert!(published_at.elapsed() < PROMPT, "answered {:?} after the publish", published_at.elapsed());
    assert_eq!(wakeups(&a, "notify"), 1, "woken by the other node's notification, not a timer");
    assert_eq!(wakeups(&a, "timer"), 0);
}

#[sqlx::test]
async fn a_retry_on_another_node_wakes_a_waiting_pull(pool: PgPool) {
    let a = spawn_app(pool).await;
    let b = a.another_node().await;
    let q = a.pull_queue("orders", json!({})).await;
    a.publish_texts(&q, &["again"]).await;
    let first = a.pull(&q, json!({"visibility_timeout_ms": 600_000})).await;
    let (resp, _) = tokio::join!(pull_resp(&a, &q, json!({"wait_time_ms": 20_000})), async {
        // After the look that follows the mark, so that the retry can only be found by its notification.
        until_waiting_after_recheck(&a).await;
        b.ack(&q, &[], json!([{"lease_id": lease(&first[0]), "delay_seconds": 0}])).await;
    });
    let got = messages(&resp);
    assert_eq!(got[0]["attempts"], 2, "{}", resp.body);
    assert!(wakeups(&a, "notify") >= 1, "woken by the retry's notification");
    assert_eq!(wakeups(&a, "timer"), 0, "the lease had ten minutes left");
}

#[sqlx::test]
async fn a_wait_ends_with_no_messages_at_its_deadline(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let started = Instant::now();
    let resp = pull_resp(&app, &q, json!({"wait_time_ms": 400})).await;
    assert!(messages(&resp).is_empty());
    assert!(started.elapsed() >= Duration::from_millis(400), "it waited: {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_millis(400) + PROMPT);
    assert_eq!(resp.result()["message_backlog_count"], 0);
    assert_eq!(wakeups(&app, "deadline"), 1);
}

#[sqlx::test]
async fn a_delayed_message_ends_the_wait_when_it_becomes_visible(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish(&q, json!({"body": "later", "content_type": "text", "delay_seconds": 1})).await;
    let started = Instant::now();
    let resp = pull_resp(&app, &q, json!({"wait_time_ms": 10_000})).await;
    assert_eq!(messages(&resp)[0]["body"], "later");
    assert!(started.elapsed() < Duration::from_secs(1) + PROMPT, "took {:?}", started.elapsed());
    // The publish's own notification may still arrive during the wait; the timer ends it either way.
    assert_eq!(wakeups(&app, "timer"), 1, "woken by its timer");
}

#[sqlx::test]
async fn a_lease_that_runs_out_ends_the_wait(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["slow"]).await;
    app.pull(&q, json!({"visibility_timeout_ms": 500})).await;
    let resp = pull_resp(&app, &q, json!({"wait_time_ms": 10_000})).await;
    let got = messages(&resp);
    assert_eq!(got[0]["attempts"], 2, "{}", resp.body);
    // The sweep that makes it claimable again wakes the queue's waiters, unless the look the wait makes when
    // the lease ends comes after the sweep and finds it first (a busy host): never its deadline.
    assert_eq!(wakeups(&app, "deadline"), 0);
    assert!(wakeups(&app, "notify") + wakeups(&app, "timer") >= 1);
}

#[sqlx::test]
async fn pausing_the_queue_ends_the_wait_with_no_messages(pool: PgPool) {
    let a = spawn_app(pool).await;
    let b = a.another_node().await;
    let q = a.pull_queue("orders", json!({})).await;
    let started = Instant::now();
    let (resp, _) = tokio::join!(pull_resp(&a, &q, json!({"wait_time_ms": 20_000})), async {
        until_waiting(&a, 1).await;
        b.patch(&format!("queues/{q}"), json!({"settings": {"delivery_paused": true}})).await.expect_ok();
        // A publish after the pause must not be handed to the ended wait.
        b.publish_texts(&q, &["held"]).await;
    });
    assert!(messages(&resp).is_empty(), "{}", resp.body);
    assert!(started.elapsed() < PROMPT, "ended by the pause, not the deadline: {:?}", started.elapsed());
    // A pull that starts on a paused queue is the usual 409.
    pull_resp(&a, &q, json!({"wait_time_ms": 1000})).await.expect_error(409);
}

#[sqlx::test]
async fn deleting_the_queue_answers_the_waiting_pull_with_a_404(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let started = Instant::now();
    let (resp, _) = tokio::join!(pull_resp(&app, &q, json!({"wait_time_ms": 20_000})), async {
        until_waiting(&app, 1).await;
        app.delete(&format!("queues/{q}")).await.expect_ok();
    });
    resp.expect_error(404);
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
}

#[sqlx::test]
async fn a_node_shutting_down_ends_its_waits_at_once_with_no_messages(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let started = Instant::now();
    let (resp, _, _) = tokio::join!(
        pull_resp(&app, &q, json!({"wait_time_ms": 20_000})),
        async {
            until_waiting(&app, 2).await;
            app.stop_node();
        },
        async {
            // A second waiter on another queue of the account ends too.
            let other = app.pull_queue("other", json!({})).await;
            let resp = pull_resp(&app, &other, json!({"wait_time_ms": 20_000})).await;
            assert!(messages(&resp).is_empty());
        }
    );
    assert!(messages(&resp).is_empty(), "{}", resp.body);
    assert!(started.elapsed() < PROMPT, "ended at once, not at the deadline: {:?}", started.elapsed());
    assert_eq!(wakeups(&app, "shutdown"), 2);
}

#[sqlx::test]
async fn waiting_pulls_are_capped_per_account(pool: PgPool) {
    let limits = skiplock::engine::limits::Limits { max_waiting_pulls: 1, ..Default::default() };
    let app = spawn_app_with(pool, limits).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a"]).await;
    let first = app.pull(&q, json!({"visibility_timeout_ms": 600_000})).await;
    let (resp, _) = tokio::join!(pull_resp(&app, &q, json!({"wait_time_ms": 20_000})), async {
        until_waiting(&app, 1).await;
        let over = pull_resp(&app, &q, json!({"wait_time_ms": 1000, "acks": [{"lease_id": lease(&first[0])}]})).await;
        assert!(over.expect_error(429).contains("at most 1"), "{}", over.body);
        assert_eq!(app.backlog(&q).await, 1, "the refused pull applied none of its acks");
        // A pull that does not wait is not capped.
        assert!(messages(&pull_resp(&app, &q, json!({})).await).is_empty());
        app.publish_texts(&q, &["b"]).await;
    });
    assert_eq!(messages(&resp)[0]["body"], "b");
    assert_eq!(app.metrics.waiting_pulls.get(), 0);
    // With the first wait over, another may wait.
    assert!(messages(&pull_resp(&app, &q, json!({"wait_time_ms": 50})).await).is_empty());
}

#[sqlx::test]
async fn a_waiting_pull_applies_its_acks_first_and_bad_waits_are_400s(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a"]).await;
    let first = app.pull(&q, json!({"visibility_timeout_ms": 600_000})).await;
    for (wait, needle) in [
        (json!(-1), "wait_time_ms must be between 0 and 20000"),
        (json!(20_001), "20000"),
        (json!("x"), "wait_time_ms"),
    ] {
        let body = json!({"wait_time_ms": wait, "acks": [{"lease_id": lease(&first[0])}]});
        let message = pull_resp(&app, &q, body).await.expect_error(400);
        assert!(message.contains(needle), "{wait}: {message}");
    }
    assert_eq!(app.backlog(&q).await, 1, "no ack applied");
    let resp = pull_resp(&app, &q, json!({"wait_time_ms": 100, "acks": [{"lease_id": lease(&first[0])}]})).await;
    assert_eq!(resp.result()["ackCount"], 1, "{}", resp.body);
    assert!(messages(&resp).is_empty());
    assert_eq!(resp.result()["message_backlog_count"], 0);
    // wait_time_ms 0 is the plain pull: it answers at once.
    let started = Instant::now();
    assert!(messages(&pull_resp(&app, &q, json!({"wait_time_ms": 0})).await).is_empty());
    assert!(started.elapsed() < PROMPT);
}

#[sqlx::test]
async fn only_queues_that_pulls_wait_on_are_notified(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let quiet = app.pull_queue("quiet", json!({})).await;
    let waited = app.pull_queue("waited", json!({})).await;
    let mut listener = sqlx::postgres::PgListener::connect_with(&pool).await.unwrap();
    listener.listen("skiplock_messages").await.unwrap();
    // Nobody waits on this queue: its publish must cost no notification.
    app.publish_texts(&quiet, &["nobody waits"]).await;
    let (resp, _) = tokio::join!(pull_resp(&app, &waited, json!({"wait_time_ms": 20_000})), async {
        // Once the pull's mark is written: a publish before it sees no one waiting, and notifies no one.
        until_waiting_after_recheck(&app).await;
        app.publish_texts(&waited, &["someone waits"]).await;
    });
    assert_eq!(messages(&resp)[0]["body"], "someone waits");
    // Notifications arrive in commit order, so the quiet queue's would have come first.
    let first = tokio::time::timeout(Duration::from_secs(10), listener.recv()).await.expect("a notification").unwrap();
    assert_eq!(first.payload(), waited.parse::<uuid::Uuid>().unwrap().to_string());
}

/// The pulls a publish wakes together look at the queue one at a time and share a look that found
/// nothing: each later publish must still reach one of those still waiting.
#[sqlx::test]
async fn pulls_waiting_together_each_get_one_of_the_messages_published_one_by_one(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let pulls = (0..4).map(|_| pull_resp(&app, &q, json!({"wait_time_ms": 20_000, "batch_size": 1})));
    let started = Instant::now();
    let (answers, _) = tokio::join!(futures_util::future::join_all(pulls), async {
        for (i, text) in ["one", "two", "three", "four"].iter().enumerate() {
            until_waiting(&app, 4 - i as i64).await;
            app.publish_texts(&q, &[text]).await;
        }
    });
    let mut got: Vec<String> =
        answers.iter().flat_map(messages).map(|m| m["body"].as_str().unwrap().to_owned()).collect();
    got.sort();
    assert_eq!(got, ["four", "one", "three", "two"], "each waiting pull got one message");
    assert!(started.elapsed() < Duration::from_secs(15), "no pull waited for its deadline");
}

/// Pulls on `queue` (waiting 1 s) until one ends with the queue known to be empty on this node.
async fn until_known_empty(app: &TestApp, queue: &str) {
    let id: skiplock::ids::QueueId = queue.parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while app.wakeups.known_empty(app.account, id).is_none() {
        assert!(Instant::now() < deadline, "no look found the queue empty");
        assert!(messages(&pull_resp(app, queue, json!({"wait_time_ms": 1000})).await).is_empty());
    }
}

/// Waits until this node has heard of a change of `queue` and no longer counts it as empty.
async fn until_heard(app: &TestApp, queue: &str) {
    let id: skiplock::ids::QueueId = queue.parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while app.wakeups.known_empty(app.account, id).is_some() {
        assert!(Instant::now() < deadline, "the change was not heard on this node");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[sqlx::test]
async fn a_long_poll_after_an_empty_look_waits_without_reading_the_queue_yet_gets_a_message_published_since(
    pool: PgPool,
) {
    let a = spawn_app(pool).await;
    let b = a.another_node().await;
    let q = a.pull_queue("orders", json!({})).await;
    until_known_empty(&a, &q).await;
    let skipped = a.metrics.long_poll_looks_skipped.get();
    let resp = pull_resp(&a, &q, json!({"wait_time_ms": 300})).await;
    assert!(messages(&resp).is_empty());
    assert_eq!(resp.result()["message_backlog_count"], 0, "an empty queue's backlog, not counted");
    assert_eq!(a.metrics.long_poll_looks_skipped.get(), skipped + 1, "it waited without looking");
    // Published between pulls, on another node: nobody waits, but this node hears of it.
    b.publish_texts(&q, &["between pulls"]).await;
    until_heard(&a, &q).await;
    let started = Instant::now();
    let resp = pull_resp(&a, &q, json!({"wait_time_ms": 20_000})).await;
    assert_eq!(messages(&resp)[0]["body"], "between pulls", "{}", resp.body);
    assert!(started.elapsed() < PROMPT, "found by a look, not left to the deadline: {:?}", started.elapsed());
    assert_eq!(a.metrics.long_poll_looks_skipped.get(), skipped + 1);
}

#[sqlx::test]
async fn a_queue_known_to_be_empty_is_read_again_after_its_consumer_or_settings_change_on_another_node(pool: PgPool) {
    let a = spawn_app(pool).await;
    let b = a.another_node().await;
    let q = a.pull_queue("orders", json!({})).await;
    until_known_empty(&a, &q).await;
    b.patch(&format!("queues/{q}"), json!({"settings": {"delivery_paused": true}})).await.expect_ok();
    until_heard(&a, &q).await;
    pull_resp(&a, &q, json!({"wait_time_ms": 20_000})).await.expect_error(409);
    b.patch(&format!("queues/{q}"), json!({"settings": {"delivery_paused": false}})).await.expect_ok();
    until_known_empty(&a, &q).await;
    let consumer =
        b.get(&format!("queues/{q}/consumers")).await.result()[0]["consumer_id"].as_str().unwrap().to_owned();
    b.delete(&format!("queues/{q}/consumers/{consumer}")).await.expect_ok();
    until_heard(&a, &q).await;
    let refused = pull_resp(&a, &q, json!({"wait_time_ms": 20_000})).await.expect_error(409);
    assert!(refused.contains("no http_pull consumer"), "{refused}");
    b.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull"})).await.expect_ok();
    until_known_empty(&a, &q).await;
    b.delete(&format!("queues/{q}")).await.expect_ok();
    until_heard(&a, &q).await;
    pull_resp(&a, &q, json!({"wait_time_ms": 20_000})).await.expect_error(404);
}
