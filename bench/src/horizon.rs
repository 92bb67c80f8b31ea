//! W10 held horizon: what a snapshot held open by another connection does to the service. One server
//! (both roles) on a fresh database carries, for the whole run:
//!   W4: single publishes at a steady rate (1,000/s) to a webhook consumer with max_wait_time_ms = 0,
//!       each message's send and arrival noted (latency.rs's publisher, receiver and Timeline);
//!   W1 + W2: at the start of each minute, a cycle on a pull queue: `cycle_messages` (100,000) messages of
//!       1 KiB published in batches of 100 by 4 connections (W1), then drained by 4 pullers pulling 100
//!       and acking them (W2) until all are acked. A cycle that overruns its minute delays the next one,
//!       which still belongs to its own minute; a cycle that could only start after the run's end is not run.
//! The run is `before` minutes, then `held` minutes during which another plain connection holds a
//! repeatable-read snapshot (it read one row of `accounts`) open, then `after` minutes. Per minute: W4
//! p50/p99 (send -> arrival) and the messages late (arrived more than 5 s after their send, or not at
//! all after a grace of up to 60 s at the end) of the messages sent in it; the W1 and W2 rates of its
//! cycle; and, sampled just before the minute's end, the dead rows, the sizes of the largest tables and
//! of the database, the age of the oldest snapshot (backend_xmin) in the database, and the CPU of the
//! server and PostgreSQL over the minute.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::web;
use anyhow::Context;
use serde_json::{json, Value};
use sqlx::{Connection, Executor, PgConnection};

use crate::api_load::Api;
use crate::cpu::{self, CpuTimes};
use crate::latency::{publish_at_rate, Timeline};
use crate::setup::{percentile_ms, Env};

#[derive(Debug, Clone, clap::Args)]
pub struct HorizonArgs {
    /// Minutes before the snapshot is taken.
    #[arg(long, default_value_t = 3)]
    pub before_minutes: u32,
    /// Minutes the snapshot is held.
    #[arg(long, default_value_t = 10)]
    pub held_minutes: u32,
    /// Minutes after it is released.
    #[arg(long, default_value_t = 3)]
    pub after_minutes: u32,
    /// W4: single-message publishes per second, for the whole run.
    #[arg(long, default_value_t = 1000)]
    pub rate: u32,
    /// W1 + W2: messages published and then drained at the start of each minute.
    #[arg(long, default_value_t = 100_000)]
    pub cycle_messages: u64,
}

const MINUTE: Duration = Duration::from_secs(60);
/// A W4 message arriving later than this after its send is late.
const LATE: Duration = Duration::from_secs(5);
/// How long the end of the run waits for W4's stragglers.
const GRACE: Duration = Duration::from_secs(60);
/// The most a cycle's drain may take before the cycle is given up.
const DRAIN_LIMIT: Duration = Duration::from_secs(300);
/// Each minute's sample is taken this long before the minute ends (the hold is released at a minute's
/// end, and the next cycle starts there).
const SAMPLE_BEFORE_END: Duration = Duration::from_millis(500);

/// Targets, printed beside the figures.
const TARGET_P99_MS: f64 = 50.0;
const TARGET_W2_RATIO: f64 = 0.7;
/// Sizes are bounded when messages + bodies stay within this many times their most before the hold.
const TARGET_SIZE_RATIO: f64 = 2.0;
/// "Back to the figures before": W2 at this share of its rate before at least, dead rows at most this
/// many times their most before, W4 p99 within its target or its worst before, nothing late.
const RECOVERED_W2_RATIO: f64 = 0.9;
const RECOVERED_DEAD_RATIO: f64 = 1.5;

#[derive(Clone, Copy)]
enum Phase {
    Before,
    Held,
    After,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Before => "before",
            Phase::Held => "held",
            Phase::After => "after",
        }
    }
}

/// `skiplock-bench horizon`: runs W10, prints the table and the verdicts, writes
/// `bench/results/horizon-<time>.json`.
pub async fn run(args: HorizonArgs) -> anyhow::Result<()> {
    let result = measure(&args).await?;
    print(&result);
    crate::setup::write_result("horizon", &result)
}

/// What one minute's cycle did.
struct Cycle {
    minute: usize,
    /// Seconds from the run's start to the cycle's.
    started_s: f64,
    published: u64,
    publish_seconds: f64,
    acked: u64,
    drain_seconds: f64,
    error: Option<String>,
}

impl Cycle {
    fn json(&self) -> Value {
        let rate = |n: u64, s: f64| if s > 0.0 && n > 0 { Some(n as f64 / s) } else { None };
        json!({
            "minute": self.minute, "started_s": self.started_s,
            "published": self.published, "publish_seconds": self.publish_seconds,
            "w1_rate": rate(self.published, self.publish_seconds),
            "acked": self.acked, "drain_seconds": self.drain_seconds,
            "w2_rate": if self.error.is_none() { rate(self.acked, self.drain_seconds) } else { None },
            "error": self.error,
        })
    }
}

async fn measure(args: &HorizonArgs) -> anyhow::Result<Value> {
    let minutes = (args.before_minutes + args.held_minutes + args.after_minutes) as usize;
    anyhow::ensure!(minutes > 0, "the run has no minutes");
    let phase = |m: usize| match m as u32 {
        m if m < args.before_minutes => Phase::Before,
        m if m < args.before_minutes + args.held_minutes => Phase::Held,
        _ => Phase::After,
    };

    let total = args.rate as usize * 60 * minutes;
    let timeline = web::Data::new(Mutex::new(Timeline::new(total)));
    let (receiver_port, receiver_handle) = crate::setup::start_receiver(timeline.clone(), crate::latency::receive)?;
    let env = Env::start(&[
        ("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8".into()),
        ("SKIPLOCK_PUBLISH_RATE_LIMIT", "0".into()),
        // W4's 1,000 requests a second and a cycle's pulls and acks, from one account.
        ("SKIPLOCK_RATE_LIMIT", "0".into()),
    ])
    .await?;
    let webhook = json!({
        "type": "webhook",
        "url": format!("http://127.0.0.1:{receiver_port}/hook"),
        "settings": {"max_wait_time_ms": 0, "batch_size": 100},
    });
    let w4_queue = env.queue_with_consumer((&env.account, &env.token), "w4", webhook).await?;
    let pull_queue = env.queue_with_consumer((&env.account, &env.token), "w1w2", json!({"type": "http_pull"})).await?;
    crate::latency::warm_up(&env, &w4_queue, &timeline).await?;
    let api = Api {
        host: env.base.trim_start_matches("http://").to_owned(),
        account: env.account.clone(),
        token: env.token.clone(),
    };
    let server_pid = env.server.id().context("the server runs")?;
    let postmaster = match env.postmaster_pid().await {
        Ok(pid) => Some(pid),
        Err(err) => {
            eprintln!("no CPU figures: {err:#}");
            None
        }
    };
    let mut sampler = PgConnection::connect(&env.database_url).await?;
    let mut holder = PgConnection::connect(&env.database_url).await?;
    // The holder's session must not be ended by a timeout of the server's configuration.
    sqlx::raw_sql("set idle_in_transaction_session_timeout = 0; set statement_timeout = 0")
        .execute(&mut holder)
        .await?;
    let holder_pid: i32 = sqlx::query_scalar("select pg_backend_pid()").fetch_one(&mut holder).await?;

    eprintln!(
        "W10: {minutes} minutes ({} before, {} held, {} after): W4 at {}/s to a webhook consumer; each minute \
         {} messages published (W1) and drained (W2)",
        args.before_minutes, args.held_minutes, args.after_minutes, args.rate, args.cycle_messages
    );
    let env = Arc::new(env);
    let start = Instant::now();
    let end = start + MINUTE * minutes as u32;

    let publisher = {
        let (env, queue, rate, timeline) = (env.clone(), w4_queue.clone(), args.rate, timeline.clone());
        tokio::spawn(async move { publish_at_rate(&env, &queue, rate, &timeline).await })
    };
    let hold = {
        let from = start + MINUTE * args.before_minutes;
        let until = from + MINUTE * args.held_minutes;
        let held = args.held_minutes > 0;
        tokio::spawn(async move {
            if held {
                Some(hold(holder, start, from, until).await)
            } else {
                None
            }
        })
    };
    let cycles = {
        let (api, queue, count) = (api.clone(), pull_queue.clone(), args.cycle_messages);
        tokio::spawn(async move {
            let mut cycles = Vec::new();
            for minute in 0..minutes {
                let at = (start + MINUTE * minute as u32).max(Instant::now());
                if at >= end {
                    eprintln!("minute {minute}'s cycle would start after the run's end: not run");
                    continue;
                }
                tokio::time::sleep_until(at.into()).await;
                let cycle = cycle(&api, &queue, count, minute, start).await;
                if let Some(err) = &cycle.error {
                    eprintln!("minute {minute}'s cycle: {err}");
                }
                cycles.push(cycle);
            }
            cycles
        })
    };

    let mut samples = Vec::with_capacity(minutes);
    let mut cpu_last = (Instant::now(), postmaster.map(|pm| cpu::sample(&[server_pid], pm)));
    for minute in 0..minutes {
        tokio::time::sleep_until((start + MINUTE * (minute as u32 + 1) - SAMPLE_BEFORE_END).into()).await;
        let mut sample = match database_sample(&mut sampler).await {
            Ok(sample) => sample,
            Err(err) => json!({"error": format!("{err:#}")}),
        };
        if let Some(pm) = postmaster {
            let (now, times) = (Instant::now(), cpu::sample(&[server_pid], pm));
            if let Some(last) = cpu_last.1 {
                sample["cpu_percent"] = percent(times - last, now.duration_since(cpu_last.0).as_secs_f64());
            }
            cpu_last = (now, Some(times));
        }
        sample["holder_holds"] = json!(sample["oldest_xmin"]["pid"].as_i64() == Some(holder_pid.into()));
        eprintln!(
            "minute {minute} ({}): dead rows {} (messages + bodies), oldest xmin {} s",
            phase(minute).name(),
            sample["dead_rows_messages"],
            sample["oldest_xmin"]["age_s"].as_f64().map_or("-".into(), |s| format!("{s:.0}"))
        );
        samples.push(sample);
    }

    let publish_seconds = publisher.await?;
    let hold = match hold.await? {
        Some(Ok(hold)) => hold,
        // The figures are kept all the same; each minute's sample says whether the holder still held.
        Some(Err(err)) => {
            eprintln!("the held snapshot: {err:#}");
            json!({"error": format!("{err:#}")})
        }
        None => Value::Null,
    };
    // Stragglers: up to GRACE after the last publish.
    let deadline = Instant::now() + GRACE;
    while !timeline.lock().unwrap().all_arrived() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let w4 = w4_minutes(&timeline.lock().unwrap(), start, minutes);
    let (duplicates, publish_errors) = {
        let t = timeline.lock().unwrap();
        (t.duplicates, t.publish_errors)
    };
    let cycles = cycles.await?;
    receiver_handle.stop(false).await;
    Arc::try_unwrap(env).map_err(|_| anyhow::anyhow!("publishes still running"))?.finish().await?;

    let rows: Vec<Value> = (0..minutes)
        .map(|m| {
            let cycle = cycles.iter().find(|c| c.minute == m).map(Cycle::json);
            json!({"minute": m, "phase": phase(m).name(), "w4": w4[m], "cycle": cycle, "sample": samples[m]})
        })
        .collect();
    let mut result = json!({
        "workload": "W10 held horizon: W4 beside W1 + W2 cycles, before, during and after a held snapshot",
        "before_minutes": args.before_minutes, "held_minutes": args.held_minutes,
        "after_minutes": args.after_minutes, "rate": args.rate, "cycle_messages": args.cycle_messages,
        "w4_achieved_rate": total as f64 / publish_seconds, "w4_duplicates": duplicates,
        "w4_publish_errors": publish_errors, "hold": hold, "holder_pid": holder_pid,
        "targets": {
            "held_w4_p99_ms": TARGET_P99_MS, "held_late": 0, "held_w2_ratio": TARGET_W2_RATIO,
            "held_size_ratio": TARGET_SIZE_RATIO, "late_after_s": LATE.as_secs(),
            "recovered_w2_ratio": RECOVERED_W2_RATIO, "recovered_dead_rows_ratio": RECOVERED_DEAD_RATIO,
        },
        "minutes": rows,
        "at": chrono::Utc::now().to_rfc3339(),
    });
    judge(&mut result);
    Ok(result)
}

/// Holds a repeatable-read snapshot on `db` from `from` to `until`; returns when it was taken and
/// released, in seconds from `start`.
async fn hold(mut db: PgConnection, start: Instant, from: Instant, until: Instant) -> anyhow::Result<Value> {
    tokio::time::sleep_until(from.into()).await;
    // Simple-query protocol: the transaction stays open after the query string.
    db.execute("begin isolation level repeatable read; select 1 from accounts limit 1")
        .await
        .context("taking the snapshot")?;
    let taken = start.elapsed().as_secs_f64();
    eprintln!("snapshot taken at {taken:.0} s");
    tokio::time::sleep_until(until.into()).await;
    db.execute("rollback").await.context("releasing the snapshot (was it ended?)")?;
    let released = start.elapsed().as_secs_f64();
    eprintln!("snapshot released at {released:.0} s");
    Ok(json!({"taken_s": taken, "released_s": released}))
}

/// One minute's cycle: `count` messages of 1 KiB published in batches of 100 over 4 connections (W1),
/// then drained by 4 pullers (W2) until all are acked, or DRAIN_LIMIT passes.
async fn cycle(api: &Api, queue: &str, count: u64, minute: usize, start: Instant) -> Cycle {
    let started = Instant::now();
    let body = "x".repeat(1024);
    let published = api.preload(queue, count, &body).await;
    let publish_seconds = started.elapsed().as_secs_f64();
    let mut error = published.err().map(|err| format!("publish: {err:#}"));
    let drain_started = Instant::now();
    let mut acked = 0;
    // After a failed publish, what was stored is drained all the same, so that the next cycle starts empty.
    while acked < count || error.is_some() {
        let left = DRAIN_LIMIT.saturating_sub(drain_started.elapsed());
        if left.is_zero() {
            error.get_or_insert_with(|| format!("drain: {acked} of {count} acked in {} s", DRAIN_LIMIT.as_secs()));
            break;
        }
        match api.drain(queue, 4, left.as_secs_f64()).await {
            Ok(drained) if drained.messages > 0 => acked += drained.messages,
            Ok(_) if error.is_some() => break,
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(err) => {
                error = Some(format!("drain: {err:#}"));
                break;
            }
        }
    }
    Cycle {
        minute,
        started_s: started.duration_since(start).as_secs_f64(),
        published: if error.as_deref().is_some_and(|e| e.starts_with("publish")) { 0 } else { count },
        publish_seconds,
        acked,
        drain_seconds: drain_started.elapsed().as_secs_f64(),
        error,
    }
}

/// The database's state: dead rows, the largest tables' sizes, the database's, the oldest snapshot.
async fn database_sample(db: &mut PgConnection) -> anyhow::Result<Value> {
    let (dead_messages, dead_total): (i64, i64) = sqlx::query_as(
        "select coalesce(sum(n_dead_tup) filter (where relname like 'message%'), 0)::int8,
                coalesce(sum(n_dead_tup), 0)::int8
         from pg_stat_user_tables",
    )
    .fetch_one(&mut *db)
    .await?;
    // Partitions are tables of their own (relkind 'r'), counted under their own names.
    let tables: Vec<(String, i64)> = sqlx::query_as(
        "select c.relname::text, pg_total_relation_size(c.oid)
         from pg_class c join pg_namespace n on n.oid = c.relnamespace
         where n.nspname = 'public' and c.relkind = 'r'
         order by 2 desc, 1",
    )
    .fetch_all(&mut *db)
    .await?;
    let sum = |prefix: &str| tables.iter().filter(|(name, _)| name.starts_with(prefix)).map(|(_, b)| b).sum::<i64>();
    let database: i64 = sqlx::query_scalar("select pg_database_size(current_database())").fetch_one(&mut *db).await?;
    // The oldest snapshot of a backend of this database (others' do not hold back its vacuum), but ours.
    let oldest: Option<(i64, f64, i32)> = sqlx::query_as(
        "select age(backend_xmin)::int8, coalesce(extract(epoch from now() - xact_start), 0)::float8, pid
         from pg_stat_activity
         where datname = current_database() and backend_xmin is not null and pid <> pg_backend_pid()
         order by age(backend_xmin) desc
         limit 1",
    )
    .fetch_optional(&mut *db)
    .await?;
    let largest: Vec<Value> =
        tables.iter().take(8).map(|(name, bytes)| json!({"table": name, "bytes": bytes})).collect();
    Ok(json!({
        "dead_rows_messages": dead_messages, "dead_rows_total": dead_total,
        "messages_bytes": sum("messages"), "bodies_bytes": sum("message_bodies"),
        "database_bytes": database, "largest_tables": largest,
        "oldest_xmin": oldest.map(|(age, age_s, pid)| json!({"age_xids": age, "age_s": age_s, "pid": pid})),
    }))
}

/// W4's figures per minute, for the messages sent in it.
fn w4_minutes(timeline: &Timeline, start: Instant, minutes: usize) -> Vec<Value> {
    let mut spans: Vec<Vec<Duration>> = vec![Vec::new(); minutes];
    let mut late = vec![0u64; minutes];
    let mut not_arrived = vec![0u64; minutes];
    for seq in 0..timeline.total() {
        let (Some(sent), arrived) = timeline.trip(seq) else { continue };
        let minute = ((sent.saturating_duration_since(start).as_secs() / 60) as usize).min(minutes - 1);
        match arrived {
            Some(arrived) => {
                let span = arrived.saturating_duration_since(sent);
                if span > LATE {
                    late[minute] += 1;
                }
                spans[minute].push(span);
            }
            None => {
                late[minute] += 1;
                not_arrived[minute] += 1;
            }
        }
    }
    (0..minutes)
        .map(|m| {
            let s = &mut spans[m];
            s.sort();
            json!({
                "messages": s.len() as u64 + not_arrived[m],
                "p50_ms": percentile_ms(s, 50.0), "p99_ms": percentile_ms(s, 99.0), "max_ms": percentile_ms(s, 100.0),
                "late": late[m], "not_arrived": not_arrived[m],
            })
        })
        .collect()
}

fn percent(cpu: CpuTimes, seconds: f64) -> Value {
    let of = |s: f64| s / seconds.max(0.001) * 100.0;
    json!({"server": of(cpu.server), "postgres": of(cpu.postgres), "client": of(cpu.client)})
}

/// Adds each minute's W2 ratio to the mean W2 rate before the hold, and the verdicts on the targets.
fn judge(result: &mut Value) {
    let rows = result["minutes"].as_array().cloned().unwrap_or_default();
    let f = |v: &Value| v.as_f64();
    let w2 = |row: &Value| f(&row["cycle"]["w2_rate"]);
    let in_phase = |p: &'static str| rows.iter().filter(move |r| r["phase"] == p);
    let before_w2: Vec<f64> = in_phase("before").filter_map(w2).collect();
    let before_mean = (!before_w2.is_empty()).then(|| before_w2.iter().sum::<f64>() / before_w2.len() as f64);
    let max_of = |values: Vec<f64>| values.into_iter().fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let size = |row: &Value| Some(f(&row["sample"]["messages_bytes"])? + f(&row["sample"]["bodies_bytes"])?);
    let before_size = max_of(in_phase("before").filter_map(size).collect());
    let before_dead = max_of(in_phase("before").filter_map(|r| f(&r["sample"]["dead_rows_messages"])).collect());
    let before_p99 = max_of(in_phase("before").filter_map(|r| f(&r["w4"]["p99_ms"])).collect());
    let ratio = |row: &Value| Some(w2(row)? / before_mean?);
    let minutes = result["minutes"].as_array_mut().expect("minutes");
    for row in minutes.iter_mut() {
        row["w2_ratio"] = json!(ratio(row));
    }

    let held: Vec<&Value> = rows.iter().filter(|r| r["phase"] == "held").collect();
    let verdict = |pass: bool, detail: String| json!({"pass": pass, "detail": detail});
    let mut verdicts = serde_json::Map::new();
    if !held.is_empty() {
        let worst_p99 = max_of(held.iter().filter_map(|r| f(&r["w4"]["p99_ms"])).collect()).unwrap_or_default();
        let late: u64 = held.iter().filter_map(|r| r["w4"]["late"].as_u64()).sum();
        verdicts.insert(
            "held_w4".into(),
            verdict(worst_p99 <= TARGET_P99_MS && late == 0, format!("worst p99 {worst_p99:.1} ms, {late} late")),
        );
        let ratios: Vec<Option<f64>> = held.iter().map(|r| ratio(r)).collect();
        let worst = ratios.iter().flatten().copied().fold(f64::INFINITY, f64::min);
        let missing = ratios.iter().filter(|r| r.is_none()).count();
        verdicts.insert(
            "held_w2".into(),
            verdict(
                missing == 0 && worst >= TARGET_W2_RATIO,
                format!(
                    "worst {}, before {}{}",
                    if worst.is_finite() { format!("{worst:.2}x") } else { "-".into() },
                    before_mean.map_or("-".into(), |m| format!("{m:.0} msg/s")),
                    if missing > 0 { format!(", {missing} held minutes without a W2 figure") } else { String::new() }
                ),
            ),
        );
        let held_size = max_of(held.iter().filter_map(|r| size(r)).collect());
        let pass = matches!((held_size, before_size), (Some(h), Some(b)) if h <= TARGET_SIZE_RATIO * b);
        verdicts.insert(
            "held_sizes".into(),
            verdict(
                pass,
                format!(
                    "messages + bodies at most {} MB held, {} MB before",
                    held_size.map_or("-".into(), |s| format!("{:.0}", s / 1e6)),
                    before_size.map_or("-".into(), |s| format!("{:.0}", s / 1e6))
                ),
            ),
        );
    }
    // The after-minutes from one minute after the release on (or the only one).
    let after: Vec<&Value> = rows.iter().filter(|r| r["phase"] == "after").collect();
    let judged = if after.len() > 1 { &after[1..] } else { &after[..] };
    if !judged.is_empty() {
        let p99_bound = TARGET_P99_MS.max(before_p99.unwrap_or_default());
        let fails: Vec<String> = judged
            .iter()
            .filter_map(|r| {
                let mut why = Vec::new();
                let p99 = f(&r["w4"]["p99_ms"]).unwrap_or(f64::INFINITY);
                if p99 > p99_bound {
                    why.push(format!("p99 {p99:.1} ms"));
                }
                if r["w4"]["late"].as_u64() != Some(0) {
                    why.push(format!("{} late", r["w4"]["late"]));
                }
                match ratio(r) {
                    Some(x) if x >= RECOVERED_W2_RATIO => {}
                    x => why.push(format!("W2 {}", x.map_or("-".into(), |x| format!("{x:.2}x")))),
                }
                let dead = f(&r["sample"]["dead_rows_messages"]);
                if matches!((dead, before_dead), (Some(d), Some(b)) if d > RECOVERED_DEAD_RATIO * b.max(1.0)) {
                    why.push(format!("{} dead rows", dead.unwrap_or_default()));
                }
                (!why.is_empty()).then(|| format!("minute {}: {}", r["minute"], why.join(", ")))
            })
            .collect();
        verdicts.insert(
            "recovered".into(),
            verdict(
                fails.is_empty(),
                if fails.is_empty() { format!("minutes {} on", judged[0]["minute"]) } else { fails.join("; ") },
            ),
        );
    }
    result["before_w2_mean"] = json!(before_mean);
    result["verdicts"] = Value::Object(verdicts);
}

/// The table, one row a minute, and the verdicts.
fn print(result: &Value) {
    let f = |v: &Value| v.as_f64();
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
    let mb = |v: &Value| opt(f(v).map(|b| b / 1e6), 0);
    println!(
        "\n| minute | phase | W4 p50 / p99 ms | late | cycle start | W1 msg/s | W2 msg/s | W2 / before | dead rows \
         (messages + bodies) | messages MB | bodies MB | database MB | oldest xmin s | CPU % of a core: skiplock / PostgreSQL |"
    );
    println!("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for row in result["minutes"].as_array().into_iter().flatten() {
        let (w4, cycle, sample) = (&row["w4"], &row["cycle"], &row["sample"]);
        let start = f(&cycle["started_s"]).map_or("-".into(), |s| format!("{}:{:02}", s as u64 / 60, s as u64 % 60));
        let cpu = &sample["cpu_percent"];
        println!(
            "| {} | {} | {} / {} | {} | {} | {} | {}{} | {} | {} | {} | {} | {} | {} | {} / {} |",
            row["minute"],
            row["phase"].as_str().unwrap_or_default(),
            opt(f(&w4["p50_ms"]), 1),
            opt(f(&w4["p99_ms"]), 1),
            w4["late"],
            start,
            opt(f(&cycle["w1_rate"]), 0),
            opt(f(&cycle["w2_rate"]), 0),
            if cycle["error"].is_string() { " (failed)" } else { "" },
            opt(f(&row["w2_ratio"]), 2),
            sample["dead_rows_messages"].as_i64().map_or("-".into(), |d| d.to_string()),
            mb(&sample["messages_bytes"]),
            mb(&sample["bodies_bytes"]),
            mb(&sample["database_bytes"]),
            opt(f(&sample["oldest_xmin"]["age_s"]), 0),
            opt(f(&cpu["server"]), 0),
            opt(f(&cpu["postgres"]), 0),
        );
    }
    let targets = [
        (
            "held_w4",
            format!("every held minute: W4 p99 <= {TARGET_P99_MS} ms and nothing late (> {} s)", LATE.as_secs()),
        ),
        ("held_w2", format!("every held minute: W2 >= {TARGET_W2_RATIO}x its mean rate before")),
        ("held_sizes", format!("sizes bounded: messages + bodies <= {TARGET_SIZE_RATIO}x their most before")),
        (
            "recovered",
            format!(
                "back within a minute of the release: W4 p99 <= {TARGET_P99_MS} ms (or the worst before), nothing \
                 late, W2 >= {RECOVERED_W2_RATIO}x, dead rows <= {RECOVERED_DEAD_RATIO}x their most before"
            ),
        ),
    ];
    println!();
    for (key, target) in targets {
        let verdict = &result["verdicts"][key];
        if verdict.is_null() {
            continue;
        }
        let pass = if verdict["pass"].as_bool() == Some(true) { "PASS" } else { "FAIL" };
        println!("{pass}  {target}: {}", verdict["detail"].as_str().unwrap_or_default());
    }
}
