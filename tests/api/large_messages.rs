//! Message sizes per plan: a plan that allows 1 MiB messages publishes, pulls, peeks and delivers them,
//! the default keeps Cloudflare's 128 KB and 256 KB, webhook batches are split by bytes, and a plan's
//! longest retention bounds its queues.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use reqwest::Method;
use serde_json::{json, Value};
use skiplock::auth::OperatorScope;
use sqlx::PgPool;

use crate::helpers::{dispatcher, spawn_app, webhook_consumer, TestApp};
use crate::operator::Operator;
use crate::receiver::{Answer, Receiver};

const MIB: usize = 1_048_576;

/// A new account on a new plan `plan` with `limits`, driven as a tenant.
async fn account_on(app: &TestApp, plan: &str, limits: Value) -> TestApp {
    let operator = Operator::new(app, &OperatorScope::ALL).await;
    operator.call(Method::POST, "plans", Some(json!({"name": plan, "limits": limits}))).await.expect_ok();
    let (id, token) = operator.create_account(plan).await;
    operator.call(Method::PATCH, &format!("accounts/{id}"), Some(json!({"plan": plan}))).await.expect_ok();
    TestApp::remote(app.pool.clone(), app.address.clone(), id.parse().unwrap(), token)
}

fn text(n: usize) -> Value {
    json!({"body": "x".repeat(n), "content_type": "text"})
}

#[sqlx::test]
async fn a_plan_with_1_mib_messages_publishes_pulls_and_peeks_them(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let large = account_on(&app, "large", json!({"max_message_bytes": MIB})).await;
    let queue = large.pull_queue("big", json!({})).await;
    let messages = format!("queues/{queue}/messages");
    large.publish(&queue, text(MIB)).await;
    let bytes: Vec<u8> = (0..MIB).map(|i| (i % 251) as u8).collect();
    large.publish(&queue, json!({"body": BASE64.encode(&bytes), "content_type": "bytes"})).await;

    // Its request may be larger than the 2 MiB of other requests: 1 MiB of newlines is 2 MiB of escapes.
    let escaped = json!({"body": "\n".repeat(MIB), "content_type": "text"});
    assert!(escaped.to_string().len() > 2 * MIB);
    large.publish(&queue, escaped).await;
    let over = large.post(&messages, text(MIB + 1)).await.expect_error(413);
    assert!(over.contains("message.body is 1048577 bytes; a message may be at most 1048576"), "{over}");
    let two = json!({"messages": [text(600_000), text(600_000)]});
    let over = large.post(&format!("{messages}/batch"), two).await.expect_error(413);
    assert!(over.contains("the batch's bodies total 1200000 bytes; a batch may be at most 1048576"), "{over}");

    let peeked = large.post(&format!("{messages}/peek"), json!({"batch_size": 3})).await;
    let peeked = peeked.expect_ok()["messages"].as_array().unwrap().clone();
    assert_eq!(peeked.len(), 3);
    assert_eq!(peeked[0]["body"].as_str().map(str::len), Some(MIB));
    let pulled = large.pull(&queue, json!({"batch_size": 3})).await;
    assert_eq!(pulled[0]["body"], text(MIB)["body"], "a 1 MiB text body comes back whole");
    assert_eq!(BASE64.decode(pulled[1]["body"].as_str().unwrap()).unwrap(), bytes, "and 1 MiB of bytes");
    assert_eq!(pulled[2]["body"].as_str().map(|b| b.bytes().all(|c| c == b'\n') && b.len() == MIB), Some(true));

    // The default plan keeps Cloudflare's sizes, and a request body larger than its own plan allows is
    // refused before it is read.
    let queue = app.pull_queue("small", json!({})).await;
    let messages = format!("queues/{queue}/messages");
    let over = app.post(&messages, text(128_001)).await.expect_error(413);
    assert!(over.contains("a message may be at most 128000"), "{over}");
    let three = json!({"messages": [text(128_000), text(128_000), text(1)]});
    let over = app.post(&format!("{messages}/batch"), three).await.expect_error(413);
    assert!(over.contains("a batch may be at most 256000"), "{over}");
    let over = app.post(&messages, text(3 * MIB)).await.expect_error(413);
    assert!(over.contains("the request body is larger than 2097152 bytes"), "{over}");
    app.publish(&queue, text(128_000)).await;
    assert_eq!(app.backlog(&queue).await, 1, "nothing refused was stored");
}

#[sqlx::test]
async fn webhook_batches_are_split_by_bytes_without_counting_an_attempt(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    // Five 100 KB messages for a consumer taking ten at once: no delivery carries more than 256 KB.
    let hook = app.webhook_queue("hooked", &receiver.url, json!({"settings": {"batch_size": 10}})).await;
    let bodies: Vec<String> = (0..5).map(|i| format!("{i}{}", "y".repeat(99_999))).collect();
    for body in &bodies {
        app.publish(&hook.queue, json!({"body": body, "content_type": "text"})).await;
    }
    let d = dispatcher(&pool, Duration::from_secs(5)).await;
    let consumer = webhook_consumer(&d, &hook).await;
    let mut sizes = Vec::new();
    while let Some(outcome) = d.dispatch_once(&consumer).await.unwrap() {
        assert_eq!(outcome.acked, outcome.delivered);
        sizes.push(outcome.delivered);
    }
    assert_eq!(sizes, [2, 2, 1], "each delivery takes what fits in 256 KB, in order");
    let received: Vec<Value> =
        receiver.received().iter().flat_map(|r| r.body["messages"].as_array().unwrap().clone()).collect();
    let got: Vec<&str> = received.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(got, bodies.iter().map(String::as_str).collect::<Vec<_>>(), "each message once, in order");
    assert!(received.iter().all(|m| m["attempts"] == 1), "a message put back for the next batch is not retried");
    assert_eq!(app.backlog(&hook.queue).await, 0);

    // A 1 MiB message of a plan that allows it goes alone, and the small one after it in the next batch.
    let large = account_on(&app, "large", json!({"max_message_bytes": MIB})).await;
    let hook = large.webhook_queue("big", &receiver.url, json!({"settings": {"batch_size": 10}})).await;
    large.publish(&hook.queue, text(MIB)).await;
    large.publish(&hook.queue, text(10)).await;
    // A dispatcher that starts now reads the account's plan as it starts.
    let d = dispatcher(&pool, Duration::from_secs(5)).await;
    let consumer = webhook_consumer(&d, &hook).await;
    assert_eq!(d.dispatch_once(&consumer).await.unwrap().map(|o| o.acked), Some(1));
    assert_eq!(d.dispatch_once(&consumer).await.unwrap().map(|o| o.acked), Some(1));
    let last = receiver.received();
    assert_eq!(last[last.len() - 2].body["messages"][0]["body"].as_str().map(str::len), Some(MIB));
}

#[sqlx::test]
async fn a_plans_longest_retention_bounds_its_queues(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let short = account_on(&app, "short", json!({"max_retention_seconds": 86_400})).await;
    let made = short.post("queues", json!({"queue_name": "daily"})).await;
    let queue = made.expect_ok()["queue_id"].as_str().unwrap().to_owned();
    assert_eq!(made.result()["settings"]["message_retention_period"], json!(86_400), "the default, bounded");
    let longer = json!({"queue_name": "weekly", "settings": {"message_retention_period": 604_800}});
    let refused = short.post("queues", longer).await.expect_error(400);
    assert!(refused.contains("settings.message_retention_period is 604800 seconds"), "{refused}");
    assert!(refused.contains("at most 86400 seconds"), "{refused}");
    let change = json!({"settings": {"message_retention_period": 86_401}});
    assert!(short.patch(&format!("queues/{queue}"), change).await.expect_error(400).contains("at most 86400"));
    let change = json!({"settings": {"message_retention_period": 3_600}});
    let changed = short.patch(&format!("queues/{queue}"), change).await;
    assert_eq!(changed.expect_ok()["settings"]["message_retention_period"], json!(3_600));
    // The default plan keeps Cloudflare's 14 days.
    let fortnight = json!({"queue_name": "long", "settings": {"message_retention_period": 1_209_600}});
    app.post("queues", fortnight).await.expect_ok();
}
