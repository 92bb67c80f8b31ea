//! The webhook attempt log, endpoint health, the circuit breaker and test sends, against real receivers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{
    dispatcher, guarded_dispatcher, spawn_app, spawn_app_dispatching, wait_until, webhook_consumer, Hook, TestApp,
};
use crate::receiver::{Answer, Receiver};

const TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts reach the log within a moment of being made: this is how long a test waits for one.
const LOGGED: Duration = Duration::from_secs(10);

/// The consumer's attempts as the API lists them with `query`, once there are at least `count`.
async fn attempts(app: &TestApp, hook: &Hook, query: &str, count: usize) -> Vec<Value> {
    let path = format!("queues/{}/consumers/{}/attempts{query}", hook.queue, hook.consumer);
    let started = std::time::Instant::now();
    loop {
        let listed = app.get(&path).await.expect_ok().as_array().unwrap().clone();
        if listed.len() >= count {
            return listed;
        }
        assert!(started.elapsed() < LOGGED, "timed out waiting until {count} attempts are listed: {listed:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn health(app: &TestApp, hook: &Hook) -> Value {
    app.get(&format!("queues/{}/consumers/{}", hook.queue, hook.consumer)).await.expect_ok()["health"].clone()
}

async fn message_ids(app: &TestApp, queue: &str) -> Vec<String> {
    let peeked = app.post(&format!("queues/{queue}/messages/peek"), json!({"batch_size": 100})).await;
    let messages = peeked.expect_ok()["messages"].as_array().unwrap().clone();
    let mut ids: Vec<String> = messages.iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect();
    ids.sort();
    ids
}

/// Each way an endpoint can fail is recorded under its own outcome, with its status, the start of its
/// answer and the batch's messages.
#[sqlx::test]
async fn every_failure_class_is_recorded_with_what_the_endpoint_answered(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|r| match r.body["queue"].as_str().unwrap() {
        "five-hundred" => Answer { body: "boom ".repeat(500), ..Answer::status(500) },
        "not-found" => Answer { body: "no such hook".into(), ..Answer::status(404) },
        "redirect" => Answer { headers: vec![("location", "http://127.0.0.1:1/".into())], ..Answer::status(307) },
        "slow" => Answer { delay: Duration::from_secs(3), ..Answer::status(200) },
        "garbage" => Answer { body: r#"{"actions": "all of them"}"#.into(), ..Answer::status(200) },
        _ => Answer::status(200),
    })
    .await;
    let refused_port = crate::process::free_port();
    let d = dispatcher(&pool, Duration::from_millis(500)).await;
    let cases = [
        ("five-hundred", receiver.url.clone(), "server_error", Some(500)),
        ("not-found", receiver.url.clone(), "client_error", Some(404)),
        ("redirect", receiver.url.clone(), "redirect", Some(307)),
        ("slow", receiver.url.clone(), "timeout", None),
        ("garbage", receiver.url.clone(), "invalid_answer", Some(200)),
        ("refused", format!("http://127.0.0.1:{refused_port}/hook"), "refused", None),
        ("fine", receiver.url.clone(), "success", Some(200)),
    ];
    for (name, url, outcome, status) in cases {
        let hook = app.webhook_queue(name, &url, json!({})).await;
        app.publish_texts(&hook.queue, &["x", "y"]).await;
        let ids = message_ids(&app, &hook.queue).await;
        let consumer = webhook_consumer(&d, &hook).await;
        let delivered = d.dispatch_once(&consumer).await.unwrap().unwrap();
        assert_eq!(delivered.attempt.map(|a| a.as_str()), Some(outcome), "{name}");
        let listed = attempts(&app, &hook, "", 1).await;
        let attempt = &listed[0];
        assert_eq!(attempt["outcome"], outcome, "{name}: {attempt}");
        assert_eq!(attempt["status"], json!(status), "{name}");
        assert_eq!(attempt["batch_size"], 2, "{name}");
        assert_eq!(attempt["test"], false, "{name}");
        assert_eq!(attempt["consumer_id"], hook.consumer.as_str(), "{name}");
        let mut logged: Vec<String> =
            attempt["message_ids"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_owned()).collect();
        logged.sort();
        assert_eq!(logged, ids, "{name}: the batch's messages");
        assert!(attempt["latency_ms"].as_i64().unwrap() >= 0, "{name}");
        if outcome == "success" {
            assert!(attempt["error"].is_null(), "{name}: {attempt}");
        } else {
            assert!(attempt["error"].is_string(), "{name}: why it failed: {attempt}");
        }
    }
    // The answer's body is kept up to 1 KiB.
    let hook = app.get("queues?name=five-hundred").await.expect_ok()[0].clone();
    let hook = Hook {
        queue: hook["queue_id"].as_str().unwrap().into(),
        consumer: hook["consumers"][0]["consumer_id"].as_str().unwrap().into(),
        secret: String::new(),
    };
    let response = attempts(&app, &hook, "", 1).await[0]["response"].as_str().unwrap().to_owned();
    assert_eq!(response.len(), 1024);
    assert!(response.starts_with("boom boom"));

    // An address the guard keeps webhooks from.
    let guarded = guarded_dispatcher(&pool, TIMEOUT, skiplock::dispatch::guard::AddressGuard::new(vec![])).await;
    let hook = app.webhook_queue("guarded", &receiver.url, json!({})).await;
    app.publish_texts(&hook.queue, &["x"]).await;
    let consumer = webhook_consumer(&guarded, &hook).await;
    guarded.dispatch_once(&consumer).await.unwrap().unwrap();
    assert_eq!(attempts(&app, &hook, "", 1).await[0]["outcome"], "address_guard");
}

/// The log's filters and pages, the message's own route, and the consumer's health as attempts fail
/// and then succeed.
#[sqlx::test]
async fn attempts_are_filtered_paged_found_by_message_and_make_the_health(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let receiver = Receiver::start(move |_| match seen.fetch_add(1, Ordering::SeqCst) {
        0 | 1 => Answer { body: "down".into(), ..Answer::status(503) },
        _ => Answer::status(200),
    })
    .await;
    let hook = app.webhook_queue("orders", &receiver.url, json!({"settings": {"retry_delay": 0}})).await;
    assert_eq!(health(&app, &hook).await["state"], "healthy", "a consumer with no attempt yet");
    app.publish_texts(&hook.queue, &["x"]).await;
    let message = message_ids(&app, &hook.queue).await.remove(0);
    let d = dispatcher(&pool, TIMEOUT).await;
    let consumer = webhook_consumer(&d, &hook).await;
    for _ in 0..2 {
        d.dispatch_once(&consumer).await.unwrap().unwrap();
    }
    attempts(&app, &hook, "", 2).await;
    let failing = health(&app, &hook).await;
    assert_eq!(failing["state"], "failing", "{failing}");
    assert_eq!(failing["consecutive_failures"], 2);
    assert_eq!(failing["circuit"], "closed", "two failures do not open it");
    assert_eq!(failing["last_failure"]["outcome"], "server_error");
    assert_eq!(failing["last_failure"]["status"], 503);
    assert!(failing["failing_since"].is_string());

    d.dispatch_once(&consumer).await.unwrap().unwrap();
    let all = attempts(&app, &hook, "", 3).await;
    let outcomes: Vec<&str> = all.iter().map(|a| a["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["success", "server_error", "server_error"], "newest first");
    let healthy = health(&app, &hook).await;
    assert_eq!((healthy["state"].as_str(), healthy["consecutive_failures"].as_i64()), (Some("healthy"), Some(0)));
    assert!(healthy["failing_since"].is_null());
    assert_eq!(healthy["last_failure"]["status"], 503, "the last failure is still shown");
    assert_eq!(app.backlog(&hook.queue).await, 0, "the message was acked");

    let path = format!("queues/{}/consumers/{}/attempts", hook.queue, hook.consumer);
    let failed = app.get(&format!("{path}?outcome=server_error")).await;
    assert_eq!(failed.expect_ok().as_array().unwrap().len(), 2);
    let second = app.get(&format!("{path}?per_page=1&page=2")).await;
    assert_eq!(second.expect_ok()[0]["attempt_id"], all[1]["attempt_id"]);
    assert_eq!(second.body["result_info"]["total_count"], 3);
    let later = app.get(&format!("{path}?since=2999-01-01T00:00:00Z")).await;
    assert!(later.expect_ok().as_array().unwrap().is_empty());
    let earlier = app.get(&format!("{path}?until=2999-01-01T00:00:00Z&message_id={message}")).await;
    assert_eq!(earlier.expect_ok().as_array().unwrap().len(), 3);

    // The message's route lists them while the log names it, the message itself gone.
    let by_message = app.get(&format!("queues/{}/messages/{message}/attempts", hook.queue)).await;
    assert_eq!(by_message.expect_ok().as_array().unwrap().len(), 3);
    let unknown = "0".repeat(32);
    app.get(&format!("queues/{}/messages/{unknown}/attempts", hook.queue)).await.expect_error(404);

    for (query, says) in [
        ("?outcome=sideways", "outcome must be one of"),
        ("?since=yesterday", "since must be an RFC 3339 time"),
        ("?message_id=xyz", "message_id"),
        ("?colour=red", "unknown query parameter"),
    ] {
        let why = app.get(&format!("{path}{query}")).await.expect_error(400);
        assert!(why.contains(says), "{query}: {why}");
    }
}

/// After five failures in a row the endpoint gets one probe at a time, the first 5 s after the last
/// failure; when the endpoint answers again the backlog flows at once.
#[sqlx::test]
async fn the_breaker_opens_probes_and_closes_on_the_first_success(pool: PgPool) {
    let app = spawn_app_dispatching(pool.clone()).await;
    let up = Arc::new(AtomicBool::new(false));
    let answer = up.clone();
    let receiver =
        Receiver::start(move |_| if answer.load(Ordering::SeqCst) { Answer::status(200) } else { Answer::status(500) })
            .await;
    let settings = json!({"max_concurrency": 1, "batch_size": 1, "max_retries": 100, "retry_delay": 0,
                          "max_wait_time_ms": 0});
    let hook = app.webhook_queue("orders", &receiver.url, json!({ "settings": settings })).await;
    let texts: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    app.publish_texts(&hook.queue, &texts.iter().map(String::as_str).collect::<Vec<_>>()).await;

    wait_until("the circuit opens", Duration::from_secs(30), || async {
        health(&app, &hook).await["circuit"] == "open"
    })
    .await;
    let opened = health(&app, &hook).await;
    assert!(opened["next_probe_at"].is_string(), "{opened}");
    let before_probe = receiver.received().len();
    assert!(before_probe >= 5, "five failures opened it");
    let with_probe = receiver.wait_for(before_probe + 1, Duration::from_secs(30)).await;
    let gap = with_probe[before_probe].at - with_probe[before_probe - 1].at;
    assert!(gap >= Duration::from_secs(4), "the probe waited for its interval, not every due batch: {gap:?}");
    assert_eq!(app.backlog(&hook.queue).await, 20, "nothing was dead-lettered or lost while the circuit was open");

    up.store(true, Ordering::SeqCst);
    wait_until("the backlog flows once the endpoint answers", Duration::from_secs(60), || async {
        app.backlog(&hook.queue).await == 0
    })
    .await;
    let closed = health(&app, &hook).await;
    assert_eq!((closed["state"].as_str(), closed["circuit"].as_str()), (Some("healthy"), Some("closed")));
}

/// A test send reaches the endpoint signed, with a sample message, and is recorded as a test; a failed one
/// does not count against the consumer, and a successful one closes an open circuit at once.
#[sqlx::test]
async fn a_test_send_is_recorded_and_a_success_closes_the_circuit(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let up = Arc::new(AtomicBool::new(false));
    let answer = up.clone();
    let receiver = Receiver::start(move |_| {
        if answer.load(Ordering::SeqCst) {
            Answer::json(json!({}))
        } else {
            Answer { body: "down for maintenance".into(), ..Answer::status(500) }
        }
    })
    .await;
    let settings = json!({"settings": {"retry_delay": 0, "max_retries": 10}});
    let hook = app.webhook_queue("orders", &receiver.url, settings).await;
    let test = format!("queues/{}/consumers/{}/test", hook.queue, hook.consumer);

    let failed = app.post(&test, json!({})).await;
    let attempt = failed.expect_ok();
    assert_eq!((attempt["outcome"].as_str(), attempt["status"].as_i64()), (Some("server_error"), Some(500)));
    assert_eq!(attempt["test"], true);
    assert_eq!(attempt["response"], "down for maintenance");
    let sent = &receiver.received()[0];
    assert!(sent.header("webhook-signature").starts_with("v1,"), "signed as a delivery is");
    assert_eq!(sent.body["messages"][0]["body"], json!({"skiplock": "test send"}));
    assert_eq!(sent.body["consumer_id"], hook.consumer.as_str());
    let logged = attempts(&app, &hook, "", 1).await;
    assert_eq!(logged[0]["test"], true);
    assert_eq!(health(&app, &hook).await["state"], "healthy", "a failed test does not count");

    // Five failed deliveries open the circuit; a test send that succeeds closes it.
    app.publish_texts(&hook.queue, &["x"]).await;
    let d = dispatcher(&pool, TIMEOUT).await;
    let consumer = webhook_consumer(&d, &hook).await;
    for _ in 0..5 {
        d.dispatch_once(&consumer).await.unwrap().unwrap();
    }
    wait_until("the circuit opens", LOGGED, || async { health(&app, &hook).await["circuit"] == "open" }).await;
    up.store(true, Ordering::SeqCst);
    let passed = app.post(&test, json!({})).await;
    assert_eq!(passed.expect_ok()["outcome"], "success");
    let closed = health(&app, &hook).await;
    assert_eq!((closed["state"].as_str(), closed["circuit"].as_str()), (Some("healthy"), Some("closed")), "{closed}");

    let pull = app.pull_queue("pulled", json!({})).await;
    let puller = app.get(&format!("queues/{pull}/consumers")).await.expect_ok()[0]["consumer_id"].clone();
    let why = app.post(&format!("queues/{pull}/consumers/{}/test", puller.as_str().unwrap()), json!({})).await;
    assert!(why.expect_error(400).contains("only webhook consumers"));
    let unknown = "0".repeat(32);
    app.post(&format!("queues/{}/consumers/{unknown}/test", hook.queue), json!({})).await.expect_error(404);
}

/// The retention upkeep keeps attempts for their time and at most so many per consumer, the newest.
#[sqlx::test]
async fn attempts_are_pruned_by_age_and_by_rows_per_consumer(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let hook = app.webhook_queue("orders", "http://127.0.0.1:1/hook", json!({})).await;
    sqlx::query(
        "insert into webhook_attempts (account_id, queue_id, consumer_id, attempted_at, node, batch_size,
                                       message_ids, outcome, latency_ms)
         select c.account_id, c.queue_id, c.id, now() - make_interval(hours => case when i <= 5 then 100 else 0 end)
                + make_interval(secs => i), gen_random_uuid(), 1, '{}', 'success', 1
         from consumers c, generate_series(1, 30) i where c.id = $1::text::uuid",
    )
    .bind(&hook.consumer)
    .execute(&pool)
    .await
    .unwrap();
    let newest: i64 = sqlx::query_scalar("select max(id) from webhook_attempts").fetch_one(&pool).await.unwrap();
    let keeping = skiplock::engine::attempts::Keeping { days: 3.0, per_consumer: 10 };
    let pruned = skiplock::engine::attempts::prune(&pool, keeping).await.unwrap();
    assert_eq!(pruned, 20, "five too old, then fifteen beyond the newest ten");
    let kept = attempts(&app, &hook, "?per_page=50", 10).await;
    let mut ids: Vec<i64> = kept.iter().map(|a| a["attempt_id"].as_str().unwrap().parse().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, (newest - 9..=newest).collect::<Vec<_>>(), "the newest ten were kept");
}
