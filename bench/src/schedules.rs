//! Schedules at scale: `--schedules` schedules (accounts of 1,000, the most an account may have, each
//! firing into a queue of its own) on `* * * * *`. The figures: the time from each tick to its message's
//! commit (the message's timestamp less the minute it fired for; p50, p99, max) over `--minutes` ticks,
//! every tick's message counted (each schedule once per minute: none lost, none twice), and the CPU of the
//! service and of PostgreSQL between ticks (seconds 20-50 of a minute) as a share of one core, beside the
//! same node's CPU over 30 s before any schedule was made.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde_json::{json, Value};

use crate::cpu;
use crate::setup::{self, Env};

#[derive(clap::Args, Debug, Clone)]
pub struct SchedulesArgs {
    #[arg(long, default_value_t = 10_000)]
    pub schedules: usize,
    /// Ticks measured (minutes), after the one in which the schedules were made.
    #[arg(long, default_value_t = 2)]
    pub minutes: i64,
}

const PER_ACCOUNT: usize = 1_000;
const CONCURRENCY: usize = 16;

struct Tenant {
    account: String,
    token: String,
    queue: String,
}

pub async fn run(args: SchedulesArgs) -> anyhow::Result<()> {
    let limits = [("SKIPLOCK_PUBLISH_RATE_LIMIT", "0".to_owned()), ("SKIPLOCK_RATE_LIMIT", "0".to_owned())];
    let env = Env::start(&limits).await?;
    let accounts = args.schedules.div_ceil(PER_ACCOUNT);
    let mut tenants = Vec::new();
    for a in 0..accounts {
        let (account, token) = if a == 0 {
            (env.account.clone(), env.token.clone())
        } else {
            setup::create_account(&env.database_url, &format!("schedules-{a}")).await?
        };
        let queue = env.queue_with_consumer((&account, &token), "ticks", json!({"type": "http_pull"})).await?;
        tenants.push(Tenant { account, token, queue });
    }
    // The node with its accounts and queues and no schedule yet: what the CPU between ticks is set against.
    let postmaster = env.postmaster_pid().await?;
    let server = [env.server.id().context("the server runs")?];
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = cpu::sample(&server, postmaster);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let unscheduled = cpu::sample(&server, postmaster) - before;

    let made: Vec<(usize, usize)> = (0..args.schedules).map(|n| (n / PER_ACCOUNT, n)).collect();
    stream::iter(made)
        .map(|(a, n)| {
            let t = &tenants[a];
            let body = json!({"queue_id": t.queue, "cron": "* * * * *",
                              "message": {"body": format!("s{n}"), "content_type": "text"}});
            post(&env, t, "schedules", body)
        })
        .buffer_unordered(CONCURRENCY)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    let first = next_minute_ms();
    let last = first + (args.minutes - 1) * 60_000;
    eprintln!("{} schedules made; ticks measured from {first} to {last}", args.schedules);

    // Between the first two measured ticks: the CPU of a quiet half-minute.
    sleep_until_ms(first + 20_000).await;
    let before = cpu::sample(&server, postmaster);
    sleep_until_ms(first + 50_000).await;
    let idle = cpu::sample(&server, postmaster) - before;
    let share = |seconds: f64| 100.0 * seconds / 30.0;

    sleep_until_ms(last + 20_000).await;
    // Every message: its schedule and its tick's lag.
    let mut per_tick: HashMap<(String, i64), usize> = HashMap::new();
    let mut lags = Vec::new();
    for t in &tenants {
        loop {
            let got = post(
                &env,
                t,
                &format!("queues/{}/messages/pull", t.queue),
                json!({"batch_size": 100, "visibility_timeout_ms": 60_000}),
            )
            .await?;
            let messages = got["messages"].as_array().cloned().unwrap_or_default();
            if messages.is_empty() {
                break;
            }
            let leases: Vec<Value> = messages.iter().map(|m| json!({"lease_id": m["lease_id"]})).collect();
            post(&env, t, &format!("queues/{}/messages/ack", t.queue), json!({"acks": leases})).await?;
            for m in &messages {
                let ts = m["timestamp_ms"].as_i64().unwrap_or_default();
                let tick = ts - ts.rem_euclid(60_000);
                *per_tick.entry((m["body"].as_str().unwrap_or_default().to_owned(), tick)).or_default() += 1;
                if (first..=last).contains(&tick) {
                    lags.push(Duration::from_millis((ts - tick) as u64));
                }
            }
        }
    }
    lags.sort();
    let measured: Vec<_> = per_tick.iter().filter(|((_, tick), _)| (first..=last).contains(tick)).collect();
    let doubled = measured.iter().filter(|(_, n)| **n > 1).count();
    let expected = args.schedules * args.minutes as usize;
    let missing = expected.saturating_sub(measured.len());
    let (p50, p99) = (setup::percentile_ms(&lags, 50.0), setup::percentile_ms(&lags, 99.0));
    let max = lags.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    println!(
        "| schedules | ticks measured | tick -> commit p50 / p99 / max | missing | twice | CPU between ticks: service / PostgreSQL | before any schedule |"
    );
    println!("|--:|--:|--:|--:|--:|--:|--:|");
    println!(
        "| {} | {} | {p50:.0} / {p99:.0} / {max:.0} ms | {missing} | {doubled} | {:.2}% / {:.2}% of a core | {:.2}% / {:.2}% |",
        args.schedules,
        lags.len(),
        share(idle.server),
        share(idle.postgres),
        share(unscheduled.server),
        share(unscheduled.postgres)
    );
    let result = json!({
        "workload": "schedules firing every minute: tick to commit, and the CPU between ticks",
        "schedules": args.schedules, "minutes": args.minutes, "ticks": lags.len(),
        "lag_ms": {"p50": p50, "p99": p99, "max": max}, "missing": missing, "doubled": doubled,
        "idle_percent_of_a_core": {"service": share(idle.server), "postgres": share(idle.postgres)},
        "before_any_schedule_percent_of_a_core": {"service": share(unscheduled.server), "postgres": share(unscheduled.postgres)},
        "targets": {"lag_p99_ms": 1000, "idle_percent_of_a_core": 1.0},
        "at": chrono::Utc::now().to_rfc3339(),
    });
    env.finish().await?;
    setup::write_result("schedules", &result)
}

async fn post(env: &Env, t: &Tenant, path: &str, body: Value) -> anyhow::Result<Value> {
    let url = format!("{}/client/v4/accounts/{}/{path}", env.base, t.account);
    let resp = env.client.post(url).bearer_auth(&t.token).json(&body).send().await?;
    let (status, body): (_, Value) = (resp.status(), resp.json().await?);
    anyhow::ensure!(status.is_success(), "POST {path}: {status} {body}");
    Ok(body["result"].clone())
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The start of the next minute, in Unix milliseconds.
fn next_minute_ms() -> i64 {
    let now = now_ms();
    now - now.rem_euclid(60_000) + 60_000
}

async fn sleep_until_ms(at: i64) {
    let wait = (at - now_ms()).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(wait)).await;
}
