//! The crash suite's schedules mode: `SCHEDULES` schedules fire every `INTERVAL_S` seconds into a queue
//! while the server is SIGKILLed at random moments and PostgreSQL restarted, as in the other modes. The
//! interval is longer than two holds of a killed node's ticks and their restarts, so that no tick is ever
//! missed by the policy for outages (which fires only the latest of the ticks an outage missed): every
//! tick due before the kills stopped must be stored exactly once. Each message is placed on its tick by
//! its timestamp (a tick's message commits after its tick and before the next one comes due).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::chaos::{wall_ms, ChaosArgs, Client};

const SCHEDULES: usize = 200;
const INTERVAL_S: i64 = 30;

struct Made {
    id: String,
    body: String,
    anchor_ms: i64,
}

pub(crate) async fn run(args: ChaosArgs) -> anyhow::Result<()> {
    let (mut cluster, client) = crate::chaos::start(args.mode).await?;
    let client = &client;
    let queue = client
        .post("queues", &json!({"queue_name": "chaos-ticks"}))
        .await
        .map_err(|_| anyhow::anyhow!("create queue"))?;
    let queue = queue["queue_id"].as_str().unwrap_or_default().to_owned();
    client
        .post(&format!("queues/{queue}/consumers"), &json!({"type": "http_pull"}))
        .await
        .map_err(|_| anyhow::anyhow!("consumer"))?;
    // Made over a few seconds, so that their ticks (counted from when each was made) spread out.
    let mut made = Vec::with_capacity(SCHEDULES);
    for n in 0..SCHEDULES {
        let body = format!("s{n}");
        let schedule = json!({"queue_id": queue, "interval_seconds": INTERVAL_S,
                              "message": {"body": body, "content_type": "text"}});
        let created = client.post("schedules", &schedule).await.map_err(|_| anyhow::anyhow!("create schedule"))?;
        // The first tick is one interval after the (whole) second the schedule was made in.
        let first: chrono::DateTime<chrono::Utc> =
            created["next_run_at"].as_str().context("next_run_at")?.parse().context("next_run_at")?;
        made.push(Made {
            id: created["schedule_id"].as_str().unwrap_or_default().to_owned(),
            body,
            anchor_ms: first.timestamp_millis() - INTERVAL_S * 1000,
        });
        if n % 20 == 19 {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    let (kills, pg_restarts) = cluster.kill_repeatedly(&args, None).await?;
    let ended_ms = wall_ms();
    let due = |m: &Made| (ended_ms - m.anchor_ms).div_euclid(INTERVAL_S * 1000);

    // Every tick due before the kills stopped gets its turn: a hold left by the last kill runs out first.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let runs = runs_per_schedule(client).await;
        let last_due = |m: &Made| m.anchor_ms + due(m) * INTERVAL_S * 1000;
        let behind =
            made.iter().filter(|m| due(m) >= 1 && runs.get(&m.id).is_none_or(|last| *last < last_due(m))).count();
        if behind == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("{behind} schedules had not fired their last tick due within 90 s of the kills' end");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for m in &made {
        client.post(&format!("schedules/{}/pause", m.id), &json!({})).await.map_err(|_| anyhow::anyhow!("pause"))?;
    }

    // Every message, placed on its schedule's tick.
    let by_body: HashMap<&str, &Made> = made.iter().map(|m| (m.body.as_str(), m)).collect();
    let mut stored: HashMap<(String, i64), usize> = HashMap::new();
    let mut early = Vec::new();
    loop {
        let got = client
            .post(
                &format!("queues/{queue}/messages/pull"),
                &json!({"batch_size": 100, "visibility_timeout_ms": 60_000}),
            )
            .await
            .map_err(|_| anyhow::anyhow!("pull"))?;
        let messages = got["messages"].as_array().cloned().unwrap_or_default();
        if messages.is_empty() {
            break;
        }
        let acks: Vec<Value> = messages.iter().map(|m| json!({"lease_id": m["lease_id"]})).collect();
        client
            .post(&format!("queues/{queue}/messages/ack"), &json!({"acks": acks}))
            .await
            .map_err(|_| anyhow::anyhow!("ack"))?;
        for message in &messages {
            let body = message["body"].as_str().unwrap_or_default().to_owned();
            let at = message["timestamp_ms"].as_i64().unwrap_or_default();
            let Some(m) = by_body.get(body.as_str()) else { continue };
            let tick = (at - m.anchor_ms).div_euclid(INTERVAL_S * 1000);
            if tick < 1 {
                early.push(format!("{body} stored at {at}, before its first tick"));
            }
            *stored.entry((body, tick)).or_default() += 1;
        }
    }

    let expected: usize = made.iter().map(|m| due(m).max(0) as usize).sum();
    let lost: Vec<String> = made
        .iter()
        .flat_map(|m| (1..=due(m)).map(move |tick| (m, tick)))
        .filter(|(m, tick)| !stored.contains_key(&(m.body.clone(), *tick)))
        .map(|(m, tick)| format!("{} tick {tick} (at {})", m.body, m.anchor_ms + tick * INTERVAL_S * 1000))
        .collect();
    let twice: Vec<String> = stored
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((body, tick), n)| format!("{body} tick {tick}: {n} messages"))
        .collect();
    println!("| chaos (Schedules) | schedules | interval | ticks due | messages | server kills | PostgreSQL restarts | lost | twice | early |");
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    println!(
        "| result | {SCHEDULES} | {INTERVAL_S} s | {expected} | {} | {kills} | {pg_restarts} | {} | {} | {} |",
        stored.values().sum::<usize>(),
        lost.len(),
        twice.len(),
        early.len()
    );
    for (what, list) in [("lost", &lost), ("twice", &twice), ("early", &early)] {
        for item in list.iter().take(10) {
            println!("{what}: {item}");
        }
    }
    cluster.kill().await;
    if !(lost.is_empty() && twice.is_empty() && early.is_empty()) {
        bail!("the chaos checker found violations");
    }
    Ok(())
}

/// Each schedule's last run (ms), from the schedules' listing.
async fn runs_per_schedule(client: &Client) -> HashMap<String, i64> {
    let mut runs = HashMap::new();
    for page in 1.. {
        let url = format!("{}/schedules?page={page}&per_page=100", client.base);
        let Ok(resp) = client.http.get(url).bearer_auth(&client.token).send().await else { break };
        let Ok(body) = resp.json::<Value>().await else { break };
        let listed = body["result"].as_array().cloned().unwrap_or_default();
        for s in &listed {
            let last = s["last_run_at"].as_str().and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok());
            if let (Some(id), Some(last)) = (s["schedule_id"].as_str(), last) {
                runs.insert(id.to_owned(), last.timestamp_millis());
            }
        }
        if listed.len() < 100 {
            break;
        }
    }
    runs
}
