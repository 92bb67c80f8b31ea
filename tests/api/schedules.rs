//! Schedules: made, read, changed, paused, resumed and deleted through the API, with bad input named; fired
//! once per tick across two nodes; a tick held by a node that died is fired by another and stored once;
//! after an outage the latest missed tick fires once; a tick is taken ahead, stored at its time and not
//! at all when paused before it; a schedule goes with its queue.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{spawn_app, wait_until, TestApp};

/// The result of a 201.
fn created(resp: crate::helpers::Resp) -> Value {
    assert_eq!(resp.status, 201, "{}", resp.body);
    resp.result().clone()
}

async fn runs(app: &TestApp, id: &str) -> i64 {
    app.get(&format!("schedules/{id}")).await.expect_ok()["runs"].as_i64().unwrap()
}

/// Every message waiting in the queue, pulled and acked, as (body, timestamp_ms).
async fn drain(app: &TestApp, queue: &str) -> Vec<(Value, i64)> {
    let mut all = Vec::new();
    loop {
        let got = app.pull(queue, json!({"batch_size": 100, "visibility_timeout_ms": 60_000})).await;
        if got.is_empty() {
            return all;
        }
        let leases: Vec<&str> = got.iter().map(|m| m["lease_id"].as_str().unwrap()).collect();
        app.ack(queue, &leases, json!([])).await;
        all.extend(got.iter().map(|m| (m["body"].clone(), m["timestamp_ms"].as_i64().unwrap())));
    }
}

#[sqlx::test]
async fn schedules_are_made_read_changed_paused_resumed_and_deleted(pool: PgPool) {
    let app = spawn_app(pool).await;
    let queue = app.pull_queue("nightly", json!({})).await;
    let made = app
        .post(
            "schedules",
            json!({"queue_id": queue, "cron": "0 3 * * *", "time_zone": "Europe/Berlin",
                   "message": {"body": {"report": "daily"}, "content_type": "json"},
                   "idempotency_key": "nightly-{tick}"}),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let s = made.result().clone();
    let id = s["schedule_id"].as_str().unwrap().to_owned();
    assert_eq!(s["cron"], "0 3 * * *");
    assert_eq!(s["time_zone"], "Europe/Berlin");
    assert_eq!(s["message"]["body"], json!({"report": "daily"}));
    assert_eq!(s["idempotency_key"], "nightly-{tick}");
    let next: Vec<&str> = s["next_runs"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(next.len(), 5);
    assert_eq!(s["next_run_at"], next[0]);
    for t in &next {
        let at: chrono::DateTime<chrono::Utc> = t.parse().unwrap();
        let local = at.with_timezone(&chrono_tz::Europe::Berlin);
        assert_eq!(local.format("%H:%M").to_string(), "03:00", "{t}");
    }

    let listed = app.get("schedules").await;
    assert_eq!(listed.result().as_array().unwrap().len(), 1);
    assert_eq!(listed.body["result_info"]["total_count"], 1);

    let changed = app.patch(&format!("schedules/{id}"), json!({"interval_seconds": 3600})).await;
    let changed = changed.expect_ok();
    assert_eq!(changed["cron"], Value::Null);
    assert_eq!(changed["interval_seconds"], 3600);
    assert_eq!(changed["message"]["body"], json!({"report": "daily"}), "what is not named stays");

    let paused = app.post(&format!("schedules/{id}/pause"), json!({})).await;
    assert_eq!(paused.expect_ok()["paused"], true);
    assert_eq!(paused.result()["next_runs"], json!([]));
    assert_eq!(paused.result()["next_run_at"], Value::Null);
    let resumed = app.post(&format!("schedules/{id}/resume"), json!({})).await;
    assert_eq!(resumed.expect_ok()["next_runs"].as_array().unwrap().len(), 5);

    app.delete(&format!("schedules/{id}")).await.expect_ok();
    app.get(&format!("schedules/{id}")).await.expect_error(404);
    app.delete(&format!("schedules/{id}")).await.expect_error(404);
}

#[sqlx::test]
async fn bad_schedules_are_400s_naming_the_field_and_other_accounts_queues_are_404s(pool: PgPool) {
    let app = spawn_app(pool).await;
    let queue = app.create_queue("target").await;
    let message = json!({"body": "tick", "content_type": "text"});
    for (body, names) in [
        (json!({"queue_id": queue, "cron": "* * * *", "message": message}), "cron"),
        (json!({"queue_id": queue, "cron": "0 0 30 2 *", "message": message}), "cron"),
        (json!({"queue_id": queue, "cron": "@fortnightly", "message": message}), "cron"),
        (
            json!({"queue_id": queue, "cron": "0 3 * * *", "time_zone": "Europe/Atlantis", "message": message}),
            "time_zone",
        ),
        (json!({"queue_id": queue, "interval_seconds": 0, "message": message}), "interval_seconds"),
        (json!({"queue_id": queue, "interval_seconds": 60, "cron": "@hourly", "message": message}), "cron"),
        (json!({"queue_id": queue, "message": message}), "cron or interval_seconds"),
        (json!({"queue_id": queue, "interval_seconds": 60}), "message"),
        (json!({"interval_seconds": 60, "message": message}), "queue_id"),
        (json!({"queue_id": "nope", "interval_seconds": 60, "message": message}), "queue_id"),
        (json!({"queue_id": queue, "interval_seconds": 60, "message": {"content_type": "text"}}), "message.body"),
        (
            json!({"queue_id": queue, "interval_seconds": 60, "message": message, "idempotency_key": "a b"}),
            "idempotency_key",
        ),
        (json!({"queue_id": queue, "interval_seconds": 60, "message": message, "every": 5}), "every"),
    ] {
        let resp = app.post("schedules", body.clone()).await;
        let error = resp.expect_error(400);
        assert!(error.contains(names), "{body}: {error}");
    }
    let (b_account, b_token) = crate::helpers::new_account(&app.pool, "tenant-b", &skiplock::auth::Scope::ALL).await;
    let b = TestApp::remote(app.pool.clone(), app.address.clone(), b_account, b_token);
    let theirs = b.post("schedules", json!({"queue_id": queue, "interval_seconds": 60, "message": message})).await;
    theirs.expect_error(404);
    let mine = app.post("schedules", json!({"queue_id": queue, "interval_seconds": 60, "message": message})).await;
    let id = created(mine)["schedule_id"].as_str().unwrap().to_owned();
    b.get(&format!("schedules/{id}")).await.expect_error(404);
    b.patch(&format!("schedules/{id}"), json!({"paused": true})).await.expect_error(404);
    b.delete(&format!("schedules/{id}")).await.expect_error(404);
    assert_eq!(b.get("schedules").await.expect_ok().as_array().unwrap().len(), 0);
}

/// Two nodes fire the schedules of one queue: each tick is stored once (as many messages as the schedules
/// counted runs, no tick of a schedule twice), and pausing stops them.
#[sqlx::test]
async fn each_tick_fires_once_across_two_nodes(pool: PgPool) {
    let app = spawn_app(pool).await;
    let _other = app.another_node().await;
    let queue = app.pull_queue("ticks", json!({})).await;
    let made_at = std::time::Instant::now();
    let mut ids = Vec::new();
    for n in 0..5 {
        let body = json!({"queue_id": queue, "interval_seconds": 1,
                          "message": {"body": format!("schedule-{n}"), "content_type": "text"}});
        ids.push(created(app.post("schedules", body).await)["schedule_id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        wait_until("each schedule ran three times", Duration::from_secs(30), || async { runs(&app, id).await >= 3 })
            .await;
    }
    for id in &ids {
        app.post(&format!("schedules/{id}/pause"), json!({})).await.expect_ok();
    }
    let counted: i64 = {
        let mut total = 0;
        for id in &ids {
            total += runs(&app, id).await;
        }
        total
    };
    let messages = drain(&app, &queue).await;
    assert_eq!(messages.len() as i64, counted, "one message per counted run");
    let mut per_schedule: HashMap<String, usize> = HashMap::new();
    for (body, _) in &messages {
        *per_schedule.entry(body.as_str().unwrap().to_owned()).or_default() += 1;
    }
    assert_eq!(per_schedule.len(), 5);
    // A schedule of a tick a second cannot have stored more messages than seconds went by (plus the one
    // it may have been due for as it was made): a tick fired twice and counted twice would.
    let lasted = made_at.elapsed().as_secs() as usize + 1;
    for (body, count) in per_schedule {
        assert!(count <= lasted, "{body}: {count} messages in {lasted} s");
    }
    // Paused: nothing more comes.
    let before: Vec<i64> = futures_util::future::join_all(ids.iter().map(|id| runs(&app, id))).await;
    tokio::time::sleep(Duration::from_millis(1500)).await; // a window in which an unpaused schedule would fire
    let after: Vec<i64> = futures_util::future::join_all(ids.iter().map(|id| runs(&app, id))).await;
    assert_eq!(before, after);
}

/// A node that took a due tick and died (its hold left in the row) leaves the tick to another node once
/// the hold runs out; a tick whose message was stored before the node died (fired, not recorded) is
/// stored once; and after an outage a minutely schedule fires its latest missed tick once.
#[sqlx::test]
async fn a_tick_left_by_a_dead_node_fires_once_and_an_outage_fires_the_latest_tick_once(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let queue = app.pull_queue("recover", json!({})).await;
    let body = json!({"queue_id": queue, "cron": "* * * * *",
                      "message": {"body": "minutely", "content_type": "text"}});
    let id = created(app.post("schedules", body).await)["schedule_id"].as_str().unwrap().to_owned();
    let uuid = uuid::Uuid::parse_str(&id).unwrap();
    // Due 10 minutes ago and held by a node that is gone; the tick it would fire (the latest minute) was
    // already stored by it under the tick's key before it died.
    let now = chrono::Utc::now();
    let latest = now.timestamp() - now.timestamp() % 60;
    sqlx::query(
        "update schedules set next_run_at = now() - interval '10 minutes', held_by = gen_random_uuid(),
                held_until = now() + interval '1 second' where id = $1",
    )
    .bind(uuid)
    .execute(&pool)
    .await
    .unwrap();
    app.publish(
        &queue,
        json!({"body": "minutely", "content_type": "text",
                               "idempotency_key": format!("schedule:{id}:{latest}")}),
    )
    .await;
    wait_until("the tick was taken over", Duration::from_secs(20), || async { runs(&app, &id).await == 1 }).await;
    let s = app.get(&format!("schedules/{id}")).await.expect_ok().clone();
    let next: chrono::DateTime<chrono::Utc> = s["next_run_at"].as_str().unwrap().parse().unwrap();
    let last: chrono::DateTime<chrono::Utc> = s["last_run_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(last.timestamp(), latest, "the latest missed tick, not the first");
    assert!(next > chrono::Utc::now() - chrono::Duration::seconds(1) && next.timestamp() % 60 == 0, "{next}");
    let messages = drain(&app, &queue).await;
    assert_eq!(messages.len(), 1, "ten missed ticks and a tick fired twice stored once: {messages:?}");
}

#[sqlx::test]
async fn a_schedule_goes_with_its_queue(pool: PgPool) {
    let app = spawn_app(pool).await;
    let queue = app.create_queue("short-lived").await;
    let body = json!({"queue_id": queue, "interval_seconds": 60, "message": {"body": "x", "content_type": "text"}});
    let id = created(app.post("schedules", body).await)["schedule_id"].as_str().unwrap().to_owned();
    app.delete(&format!("queues/{queue}")).await.expect_ok();
    app.get(&format!("schedules/{id}")).await.expect_error(404);
}

/// A node takes a schedule ahead of its tick and publishes at the tick, not before; a schedule paused
/// after it was taken and before its tick does not fire that tick.
#[sqlx::test]
async fn a_tick_is_taken_ahead_and_stored_at_its_time_and_a_pause_before_it_holds(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let queue = app.pull_queue("ahead", json!({})).await;
    let make = |body: &str| json!({"queue_id": queue, "interval_seconds": 4, "message": {"body": body, "content_type": "text"}});
    // Made first, its tick comes no later than the kept one's: fired (wrongly) with it or before it.
    let paused = created(app.post("schedules", make("paused")).await);
    let kept = created(app.post("schedules", make("kept")).await);
    let tick = |s: &Value| s["next_run_at"].as_str().unwrap().parse::<chrono::DateTime<chrono::Utc>>().unwrap();
    let held = |id: &Value| {
        let id = uuid::Uuid::parse_str(id.as_str().unwrap()).unwrap();
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, bool>("select held_by is not null from schedules where id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    wait_until("the paused schedule was taken ahead of its tick", Duration::from_secs(10), || {
        held(&paused["schedule_id"])
    })
    .await;
    assert!(chrono::Utc::now() < tick(&paused), "taken ahead, before its tick");
    app.post(&format!("schedules/{}/pause", paused["schedule_id"].as_str().unwrap()), json!({})).await.expect_ok();

    let kept_id = kept["schedule_id"].as_str().unwrap();
    wait_until("the kept schedule fired", Duration::from_secs(15), || async { runs(&app, kept_id).await >= 1 }).await;
    let messages = drain(&app, &queue).await;
    let bodies: Vec<&str> = messages.iter().map(|(body, _)| body.as_str().unwrap()).collect();
    assert!(!bodies.contains(&"paused"), "a schedule paused before its tick fired it: {messages:?}");
    let (_, at) = messages.iter().find(|(body, _)| body == "kept").expect("the kept schedule's message");
    assert!(*at >= tick(&kept).timestamp_millis(), "stored at {at}, before its tick {}", tick(&kept));
    assert_eq!(runs(&app, paused["schedule_id"].as_str().unwrap()).await, 0);
}
