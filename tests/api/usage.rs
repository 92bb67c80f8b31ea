//! Usage: every publish, delivery, ack, retry, dead-lettering and expiry is counted once, per account,
//! queue and hour, in Cloudflare's operations (64 KB chunks written, read, deleted); purges are not the
//! tenant's operations; the account reads its own, the operator exports every account's as JSON or CSV.

use reqwest::Method;
use serde_json::{json, Value};
use skiplock::auth::{OperatorScope, Scope};
use sqlx::PgPool;

use crate::helpers::{age_messages_two_minutes, lease, new_account, spawn_app, TestApp};
use crate::operator::Operator;

/// The account's usage per queue name, summed over the periods it answers, after a fold.
async fn usage(app: &TestApp, query: &str) -> Vec<Value> {
    skiplock::store::counts::fold(&app.pool).await.unwrap();
    app.get(&format!("usage{query}")).await.expect_ok().as_array().unwrap().clone()
}

fn of<'a>(rows: &'a [Value], name: &str) -> &'a Value {
    rows.iter().find(|r| r["queue_name"] == name).unwrap_or_else(|| panic!("no usage of {name} in {rows:?}"))
}

fn figures(row: &Value, keys: &[&str]) -> Vec<i64> {
    keys.iter().map(|k| row[*k].as_i64().unwrap_or_else(|| panic!("{k} in {row}"))).collect()
}

const MESSAGES: [&str; 6] = [
    "messages_published",
    "messages_delivered",
    "messages_acked",
    "messages_retried",
    "messages_dead_lettered",
    "messages_expired",
];
const OPERATIONS: [&str; 4] = ["operations", "write_operations", "read_operations", "delete_operations"];

#[sqlx::test]
async fn each_operation_is_counted_once_in_cloudflare_chunks_and_only_the_accounts_own(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let orders = app.pull_queue("orders", json!({"dead_letter_queue": "dlq", "settings": {"max_retries": 0}})).await;
    let dlq = app.get("queues?name=dlq").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    // 70,000 bytes are two 64 KB chunks: two operations each time it is written, read or deleted.
    let large = "x".repeat(70_000);
    app.publish_texts(&orders, &["a", "b"]).await;
    app.publish(&orders, json!({"body": large, "content_type": "text"})).await;
    let got = app.pull(&orders, json!({"batch_size": 10})).await;
    assert_eq!(got.len(), 3);
    let by_body = |body: &str| got.iter().find(|m| m["body"].as_str().map(|b| b.starts_with(body)) == Some(true));
    let (a, b, x) = (by_body("a").unwrap(), by_body("b").unwrap(), by_body("x").unwrap());
    // b's one delivery is used up: its retry dead-letters it.
    app.ack(&orders, &[lease(a), lease(x)], json!([{"lease_id": lease(b)}])).await;

    // A retry that returns a message, then a delete for want of a dead-letter queue.
    let plain = app.pull_queue("plain", json!({"settings": {"max_retries": 1, "visibility_timeout_ms": 1000}})).await;
    app.publish_texts(&plain, &["r"]).await;
    let first = app.pull(&plain, json!({})).await;
    app.ack(&plain, &[], json!([{"lease_id": lease(&first[0]), "delay_seconds": 0}])).await;
    let second = app.pull(&plain, json!({})).await;
    app.ack(&plain, &[], json!([{"lease_id": lease(&second[0])}])).await;

    // One expires unread; a purge is not the tenant's operation.
    let kept = app.create_queue("kept").await;
    app.patch(&format!("queues/{kept}"), json!({"settings": {"message_retention_period": 60}})).await.expect_ok();
    app.publish_texts(&kept, &["old"]).await;
    age_messages_two_minutes(&pool, &format!("queue_id = '{kept}'")).await;
    assert_eq!(skiplock::engine::maintenance::sweep_expired(&pool).await.unwrap(), 1);
    app.post(&format!("queues/{dlq}/purge"), json!({"delete_messages_permanently": true})).await.expect_ok();

    // Another account's work is not this account's usage.
    let (other_account, other_token) = new_account(&pool, "other", &Scope::ALL).await;
    let other = TestApp::remote(pool.clone(), app.address.clone(), other_account, other_token);
    let theirs = other.create_queue("orders").await;
    other.publish_texts(&theirs, &["theirs"]).await;

    let rows = usage(&app, "").await;
    assert_eq!(rows.len(), 4, "{rows:?}");
    let orders_row = of(&rows, "orders");
    assert_eq!(figures(orders_row, &MESSAGES), [3, 3, 2, 0, 1, 0]);
    // Written 1 + 1 + 2, read the same, deleted a and x (1 + 2); b's move is the dead-letter queue's write.
    assert_eq!(figures(orders_row, &OPERATIONS), [11, 4, 4, 3]);
    assert_eq!(figures(orders_row, &["bytes_published", "bytes_delivered"]), [70_002, 70_002]);
    assert_eq!(figures(of(&rows, "dlq"), &OPERATIONS), [1, 1, 0, 0], "the move is written; the purge is not counted");
    assert_eq!(figures(of(&rows, "dlq"), &MESSAGES), [0, 0, 0, 0, 0, 0]);
    assert_eq!(figures(of(&rows, "plain"), &MESSAGES), [1, 2, 0, 1, 1, 0]);
    assert_eq!(figures(of(&rows, "plain"), &OPERATIONS), [4, 1, 2, 1]);
    assert_eq!(figures(of(&rows, "kept"), &MESSAGES), [1, 0, 0, 0, 0, 1]);
    assert_eq!(figures(of(&rows, "kept"), &OPERATIONS), [2, 1, 0, 1]);
    assert_eq!(orders_row["queue_id"], json!(orders));
    let today = chrono::Utc::now().format("%Y-%m-%dT00:00:00").to_string();
    assert!(orders_row["start"].as_str().unwrap().starts_with(&today), "{orders_row}");

    // Folding again adds nothing: each delta is added once.
    assert_eq!(usage(&app, "").await, rows);
    // One queue, by the hour; a deleted queue's usage is still the account's.
    app.delete(&format!("queues/{orders}")).await.expect_ok();
    let hourly = usage(&app, &format!("?granularity=hour&queue_id={orders}")).await;
    assert_eq!(hourly.len(), 1);
    assert_eq!(figures(&hourly[0], &OPERATIONS), [11, 4, 4, 3]);
    // Another account's queue, and questions that make no sense, are refused saying why.
    assert_eq!(app.get(&format!("usage?queue_id={theirs}")).await.status, 404);
    assert!(app.get("usage?granularity=week").await.expect_error(400).contains("granularity"));
    assert!(app.get("usage?since=2026-11-02&until=2026-11-01").await.expect_error(400).contains("since"));
    assert!(app.get("usage?since=yesterday").await.expect_error(400).contains("since"));
    // Only YYYY-MM-DD dates of years PostgreSQL and people use: no signed, short or padded forms.
    for since in ["-4714-11-24", "2026-1-1", "+2026-11-01", "%202026-11-01", "0900-01-01"] {
        let refused = app.get(&format!("usage?since={since}&until=2026-11-25")).await;
        assert!(refused.expect_error(400).contains("from 1970 to 9999"), "{since}");
    }
    assert!(app.get("usage?since=2026-01-01&granularity=hour").await.expect_error(400).contains("31 days"));

    // The operator's export: every account, per period, as JSON or CSV.
    let operator = Operator::new(&app, &[OperatorScope::Read]).await;
    let short = operator.call(Method::GET, "usage?since=-5000-01-01", None).await;
    assert!(short.expect_error(400).contains("since"), "refused before any row is sent");
    let all = operator.call(Method::GET, "usage?granularity=month", None).await;
    let all = all.expect_ok().as_array().unwrap().clone();
    assert_eq!(all.len(), 2, "{all:?}");
    let mine = all.iter().find(|r| r["account_id"] == json!(app.account.to_string())).unwrap();
    assert_eq!(figures(mine, &OPERATIONS), [11 + 1 + 4 + 2, 4 + 1 + 1 + 1, 4 + 2, 3 + 1 + 1]);
    let csv = operator.text(&format!("usage?format=csv&account_id={}", other.account)).await;
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(lines[0].starts_with("account_id,start,operations,"));
    assert!(lines[1].starts_with(&format!("{},", other.account)), "{csv}");
    assert_eq!(lines[1].split(',').nth(2), Some("1"), "one write: {csv}");

    // Stored bytes are sampled by one node per period, as byte-hours; usage older than kept is forgotten.
    let stored = app.create_queue("stored").await;
    app.publish(&stored, json!({"body": "y".repeat(3_600), "content_type": "text"})).await;
    skiplock::store::counts::fold(&pool).await.unwrap();
    sqlx::query("delete from usage_samples").execute(&pool).await.unwrap();
    skiplock::engine::usage::upkeep(&pool).await.unwrap();
    skiplock::engine::usage::upkeep(&pool).await.unwrap();
    let stored_row = &usage(&app, &format!("?queue_id={stored}")).await[0];
    let per_sample = 3_600.0 * skiplock::engine::usage::SAMPLE_SECONDS as f64 / 3_600.0;
    assert_eq!(stored_row["storage_byte_hours"].as_f64(), Some(per_sample), "{stored_row}");
    sqlx::query("update usage_hours set hour = hour - interval '400 days' where queue_id = $1::uuid")
        .bind(&stored)
        .execute(&pool)
        .await
        .unwrap();
    skiplock::engine::usage::upkeep(&pool).await.unwrap();
    let left: i64 = sqlx::query_scalar("select count(*) from usage_hours where queue_id = $1::uuid")
        .bind(&stored)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "usage past thirteen months is removed");

    // A tenant's token is not an operator's.
    let url = format!("{}/admin/v1/usage", app.admin_address);
    app.raw(Method::GET, &url, Some(&app.token), None).await.expect_error(401);
}

/// Pulls and acks the events in `queue` until `count` have come (by percent), within a deadline.
async fn quota_events(app: &TestApp, queue: &str, count: usize) -> Vec<Value> {
    let mut got: Vec<Value> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while got.len() < count {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {count} quota events: {got:?}");
        let pulled = app.pull(queue, json!({"batch_size": 100})).await;
        if !pulled.is_empty() {
            app.ack(queue, &pulled.iter().map(lease).collect::<Vec<_>>(), json!([])).await;
        }
        for m in &pulled {
            let body = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, m["body"].as_str().unwrap());
            got.push(serde_json::from_slice(&body.unwrap()).unwrap());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    got.sort_by_key(|e| e["payload"]["percent"].as_i64());
    got
}

/// Sets the account's own limits through the operator API.
async fn override_limits(operator: &Operator<'_>, app: &TestApp, overrides: Value) {
    let change = json!({"limit_overrides": overrides});
    operator.call(Method::PATCH, &format!("accounts/{}", app.account), Some(change)).await.expect_ok();
}

/// Publishes one message at a time until one is refused, within a deadline; the refusal.
async fn publish_until_refused(app: &TestApp, queue: &str) -> crate::helpers::Resp {
    let start = std::time::Instant::now();
    loop {
        let resp = app.post(&format!("queues/{queue}/messages"), json!({"body": "0123456789"})).await;
        if resp.status != 200 {
            return resp;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(30), "never refused");
        skiplock::store::counts::fold(&app.pool).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[sqlx::test]
async fn past_a_quota_the_calls_that_add_operations_are_refused_and_reads_go_on(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let operator = Operator::new(&app, &[OperatorScope::Read, OperatorScope::Write]).await;
    let q = app.pull_queue("orders", json!({})).await;
    // Crossing 80% and 100% of a quota are events of the account, for a subscription to every queue.
    let alerts = app.pull_queue("alerts", json!({})).await;
    let subscription = json!({"name": "quotas", "source": {"type": "queues"}, "events": ["quota.warning", "quota.exceeded"],
                              "destination": {"type": "queues.queue", "queue_id": alerts}});
    app.post("event_subscriptions/subscriptions", subscription).await.expect_ok();
    app.publish_texts(&q, &["a", "b"]).await;
    let got = app.pull(&q, json!({"batch_size": 10})).await;
    override_limits(&operator, &app, json!({"max_operations_per_day": 6})).await;

    // 2 writes and 2 reads so far: two more publishes at most, and then the day's quota is used up.
    let refused = publish_until_refused(&app, &q).await;
    assert_eq!((refused.status, refused.error_code()), (429, 11017), "{:?}", refused.body);
    let message = refused.body["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("max_operations_per_day") && message.contains("resets at"), "{message}");
    let retry_after: i64 = refused.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&retry_after), "until the next UTC midnight: {retry_after}");
    assert_eq!(refused.headers["x-should-retry"], "false");
    // Pulls and acks add operations too; reads of settings and usage do not, and go on.
    let pull = app.post(&format!("queues/{q}/messages/pull"), json!({})).await;
    assert_eq!((pull.status, pull.error_code()), (429, 11017));
    let acks = json!({"acks": [{"lease_id": lease(&got[0])}]});
    assert_eq!(app.post(&format!("queues/{q}/messages/ack"), acks).await.status, 429);
    app.get(&format!("queues/{q}")).await.expect_ok();
    app.get("usage").await.expect_ok();
    let limits = app.get("limits").await;
    let today = &limits.expect_ok()["quotas"]["operations_today"];
    assert_eq!(today["limit"], json!(6));
    assert!(today["used"].as_i64().unwrap() >= 6, "{today}");
    assert_eq!(limits.result()["quotas"]["stored_bytes"]["limit"], json!(null));

    // A quota raised lets the account go on at once.
    override_limits(&operator, &app, json!({"max_operations_per_day": null, "max_stored_bytes": 30})).await;
    let told = quota_events(&app, &alerts, 2).await;
    let kinds: Vec<(&str, &str, i64)> = told
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["payload"]["quota"].as_str().unwrap(),
                e["payload"]["percent"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("skiplock.queues.quota.warning", "max_operations_per_day", 80),
            ("skiplock.queues.quota.exceeded", "max_operations_per_day", 100)
        ],
        "each crossing once: {told:?}"
    );
    assert_eq!(told[1]["source"], json!({"type": "queues"}));
    assert_eq!(told[1]["payload"]["limit"], json!(6));
    let acks = json!({"acks": [{"lease_id": lease(&got[0])}, {"lease_id": lease(&got[1])}]});
    app.post(&format!("queues/{q}/messages/ack"), acks).await.expect_ok();
    // Stored bytes hold publishes back, not the consumers that free them.
    let refused = publish_until_refused(&app, &q).await;
    assert_eq!(refused.error_code(), 11017);
    assert!(refused.body["errors"][0]["message"].as_str().unwrap().contains("max_stored_bytes"));
    let pulled = app.pull(&q, json!({"batch_size": 100})).await;
    assert!(pulled.len() >= 3, "30 bytes are three messages of 10: {}", pulled.len());
    let leases: Vec<&str> = pulled.iter().map(lease).collect();
    app.ack(&q, &leases, json!([])).await;
    // The stored-bytes quota's own events land in alerts too: consumed, their bytes go as well.
    crate::helpers::wait_until("the freed bytes let publishes in", std::time::Duration::from_secs(30), || async {
        let events = app.pull(&alerts, json!({"batch_size": 100})).await;
        if !events.is_empty() {
            app.ack(&alerts, &events.iter().map(lease).collect::<Vec<_>>(), json!([])).await;
        }
        app.post(&format!("queues/{q}/messages"), json!({"body": "0123456789"})).await.status == 200
    })
    .await;
    // The node's metrics: refusals by quota, and the operations it folded (no label per account).
    let refusals = |quota: &str| app.metrics.quota_refusals.with_label_values(&[quota]).get();
    assert!(refusals("max_operations_per_day") >= 3 && refusals("max_stored_bytes") >= 1);
    let writes = || app.metrics.usage_operations.with_label_values(&["write"]).get();
    crate::helpers::wait_until("the node's fold counts writes", std::time::Duration::from_secs(30), || async {
        writes() > 0
    })
    .await;
}
