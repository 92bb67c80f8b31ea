//! Publish -> webhook latency: single-message publishes at a fixed rate to a queue whose webhook
//! consumer has max_wait_time_ms = 0; a local receiver notes when each message arrives.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpResponse, HttpServer};
use serde_json::{json, Value};

use crate::setup::Env;

struct Arrivals {
    sent: Vec<Option<Instant>>,
    arrived: Vec<Option<Instant>>,
    duplicates: usize,
}

async fn receive(body: web::Bytes, arrivals: web::Data<Mutex<Arrivals>>) -> HttpResponse {
    let now = Instant::now();
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut a = arrivals.lock().unwrap();
    for m in parsed["messages"].as_array().into_iter().flatten() {
        let Some(seq) = m["body"].as_str().and_then(|s| s.parse::<usize>().ok()) else { continue };
        match a.arrived.get_mut(seq) {
            Some(slot @ None) => *slot = Some(now),
            Some(Some(_)) => a.duplicates += 1,
            None => {}
        }
    }
    HttpResponse::Ok().finish()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub async fn run(rate: u32, seconds: u32) -> anyhow::Result<()> {
    let total = (rate * seconds) as usize;
    let arrivals =
        web::Data::new(Mutex::new(Arrivals { sent: vec![None; total], arrived: vec![None; total], duplicates: 0 }));
    let data = arrivals.clone();
    let receiver = HttpServer::new(move || App::new().app_data(data.clone()).default_service(web::to(receive)))
        .workers(1)
        .disable_signals()
        .bind("127.0.0.1:0")?;
    let receiver_port = receiver.addrs()[0].port();
    let receiver = receiver.run();
    let receiver_handle = receiver.handle();
    tokio::spawn(receiver);

    let env = Env::start(&[("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8".into())]).await?;
    let queue = env.post("queues", &json!({"queue_name": "latency"})).await?;
    let queue_id = queue["queue_id"].as_str().unwrap_or_default().to_owned();
    let consumer = json!({
        "type": "webhook",
        "url": format!("http://127.0.0.1:{receiver_port}/hook"),
        "settings": {"max_wait_time_ms": 0, "batch_size": 100},
    });
    env.post(&format!("queues/{queue_id}/consumers"), &consumer).await?;
    // Let the dispatcher see the new consumer (it reads consumers every second).
    tokio::time::sleep(Duration::from_millis(1500)).await;

    eprintln!(
        "publishing {total} messages at {rate}/s, one per request, to a webhook consumer with max_wait_time_ms = 0"
    );
    let env = Arc::new(env);
    let start = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let mut publishes = tokio::task::JoinSet::new();
    let failures = Arc::new(Mutex::new(0usize));
    for seq in 0..total {
        tokio::time::sleep_until((start + interval * seq as u32).into()).await;
        let (env, arrivals, failures, queue_id) = (env.clone(), arrivals.clone(), failures.clone(), queue_id.clone());
        publishes.spawn(async move {
            arrivals.lock().unwrap().sent[seq] = Some(Instant::now());
            let body = json!({"body": seq.to_string(), "content_type": "text"});
            if let Err(err) = env.post(&format!("queues/{queue_id}/messages"), &body).await {
                let mut failures = failures.lock().unwrap();
                if *failures < 3 {
                    eprintln!("publish failed: {err:#}");
                }
                *failures += 1;
            }
        });
        while publishes.try_join_next().is_some() {}
    }
    while publishes.join_next().await.is_some() {}
    let publish_secs = start.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(30);
    while arrivals.lock().unwrap().arrived.iter().any(Option::is_none) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (mut latencies, duplicates) = {
        let a = arrivals.lock().unwrap();
        let latencies: Vec<Duration> = a
            .sent
            .iter()
            .zip(&a.arrived)
            .filter_map(|(s, r)| Some(r.as_ref()?.saturating_duration_since(*s.as_ref()?)))
            .collect();
        (latencies, a.duplicates)
    };
    latencies.sort();
    let lost = total - latencies.len();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (p50, p90, p99, max) = (
        percentile(&latencies, 50.0),
        percentile(&latencies, 90.0),
        percentile(&latencies, 99.0),
        percentile(&latencies, 100.0),
    );
    println!(
        "| workload | messages | achieved rate | p50 | p90 | p99 | max | not arrived | duplicates | publish errors |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    println!(
        "| publish -> webhook, max_wait_time_ms = 0 | {total} | {:.0}/s | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {lost} | {} | {} |",
        total as f64 / publish_secs,
        ms(p50),
        ms(p90),
        ms(p99),
        ms(max),
        duplicates,
        failures.lock().unwrap()
    );
    let result = json!({
        "workload": "W4 publish->webhook latency",
        "rate": rate, "seconds": seconds, "messages": total,
        "achieved_rate": total as f64 / publish_secs,
        "p50_ms": ms(p50), "p90_ms": ms(p90), "p99_ms": ms(p99), "max_ms": ms(max),
        "not_arrived": lost, "duplicates": duplicates,
        "at": chrono::Utc::now().to_rfc3339(),
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("latency-{}.json", chrono::Utc::now().format("%Y%m%dT%H%M%SZ")));
    std::fs::write(&file, serde_json::to_string_pretty(&result)?)?;
    eprintln!("wrote {}", file.display());

    receiver_handle.stop(false).await;
    Arc::try_unwrap(env).map_err(|_| anyhow::anyhow!("publishes still running"))?.finish().await?;
    Ok(())
}
