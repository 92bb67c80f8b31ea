//! W6 first delivery: a webhook consumer is created and a message published to its queue at once, `tries`
//! times, each on a queue of its own; the figure is the time from the publish's answer to the message's
//! arrival at a local receiver (a dispatcher that noticed new consumers only by its periodic read made
//! users wait up to a second).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use crate::setup::{percentile_ms, Env};

async fn receive(body: web::Bytes, arrived: web::Data<Mutex<Vec<Option<Instant>>>>) -> HttpResponse {
    let now = Instant::now();
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut arrived = arrived.lock().unwrap();
    for m in parsed["messages"].as_array().into_iter().flatten() {
        if let Some(slot) = m["body"].as_str().and_then(|s| s.parse::<usize>().ok()).and_then(|i| arrived.get_mut(i)) {
            slot.get_or_insert(now);
        }
    }
    HttpResponse::Ok().finish()
}

pub async fn run(tries: usize) -> anyhow::Result<()> {
    let arrived: web::Data<Mutex<Vec<Option<Instant>>>> = web::Data::new(Mutex::new(vec![None; tries]));
    let (port, handle) = crate::setup::start_receiver(arrived.clone(), receive)?;
    let env = Env::start(&[("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8".into())]).await?;
    // The first try is a warm-up (connections, caches) and is not counted.
    let mut answered = Vec::with_capacity(tries);
    for i in 0..tries {
        let queue = env.post("queues", &json!({"queue_name": format!("first-{i}")})).await?;
        let queue_id = queue["queue_id"].as_str().unwrap_or_default().to_owned();
        let consumer = json!({
            "type": "webhook",
            "url": format!("http://127.0.0.1:{port}/hook"),
            "settings": {"max_wait_time_ms": 0},
        });
        env.post(&format!("queues/{queue_id}/consumers"), &consumer).await?;
        env.post(&format!("queues/{queue_id}/messages"), &json!({"body": i.to_string(), "content_type": "text"}))
            .await?;
        answered.push(Instant::now());
        let deadline = Instant::now() + Duration::from_secs(5);
        while arrived.lock().unwrap()[i].is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let mut spans: Vec<Duration> = arrived
        .lock()
        .unwrap()
        .iter()
        .zip(&answered)
        .skip(1)
        .filter_map(|(a, sent)| a.map(|a| a.saturating_duration_since(*sent)))
        .collect();
    spans.sort();
    let ms = |p: f64| percentile_ms(&spans, p);
    let result = json!({
        "workload": "W6 first delivery: a webhook consumer created, then a publish at once",
        "tries": tries - 1, "arrived": spans.len(),
        "p50_ms": ms(50.0), "p99_ms": ms(99.0), "max_ms": ms(100.0),
        "at": chrono::Utc::now().to_rfc3339(),
    });
    println!(
        "W6 first delivery ({} tries after a warm-up): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; arrived {}",
        tries - 1,
        ms(50.0),
        ms(99.0),
        ms(100.0),
        spans.len()
    );
    handle.stop(false).await;
    env.finish().await?;
    crate::setup::write_result("first-delivery", &result)
}
