//! `make bench`: skiplock's HTTP API side by side with the raw SQL ceiling (skiplock's own statements
//! run directly by pgbench) and pgmq (its SQL API, installed from the pgmq crate's embedded SQL) on
//! one private PostgreSQL cluster, with 1 KiB messages. Runs alternate between systems and repeat;
//! the table shows medians. W4 (push latency) is `latency`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};
use skiplock::testkit::TempCluster;
use sqlx::{Connection, PgConnection};
use tokio::process::{Child, Command};

#[derive(Debug, Clone, clap::Args)]
pub struct SuiteArgs {
    /// A short run (under 3 minutes): shorter workloads, one round, a smaller backlog.
    #[arg(long)]
    pub quick: bool,
}

struct Plan {
    seconds: u64,
    rounds: usize,
    preload: i64,
    cycle_seconds: u64,
    cycle_sample: u64,
    big_backlog: i64,
}

const BODY: usize = 1024;

struct Bench {
    pg: TempCluster,
    server: Child,
    server_pid: u32,
    http: reqwest::Client,
    base: String,
    token: String,
    /// Queue ids by workload, for skiplock and for the raw ceiling (raw work runs on its own queue).
    skiplock_url: String,
    pgmq_url: String,
}

/// One measured run.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    messages: u64,
    seconds: f64,
    wal_bytes: i64,
}

impl Run {
    fn rate(&self) -> f64 {
        self.messages as f64 / self.seconds.max(1e-9)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

async fn wal_lsn(url: &str) -> anyhow::Result<i64> {
    let mut c = PgConnection::connect(url).await?;
    Ok(sqlx::query_scalar("select (pg_current_wal_lsn() - '0/0')::int8").fetch_one(&mut c).await?)
}

/// Runs each `;`-separated statement on its own (VACUUM and CREATE DATABASE refuse a transaction).
async fn exec(url: &str, sql: &str) -> anyhow::Result<()> {
    let mut c = PgConnection::connect(url).await?;
    for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        sqlx::raw_sql(statement).execute(&mut c).await?;
    }
    Ok(())
}

impl Bench {
    async fn start() -> anyhow::Result<Bench> {
        let pg = tokio::task::spawn_blocking(TempCluster::create).await?;
        let admin = pg.url("postgres");
        exec(&admin, "create database skiplock; create database pgmqbench").await?;
        let skiplock_url = pg.url("skiplock");
        let pgmq_url = pg.url("pgmqbench");
        let (account, token) = crate::setup::prepare(&skiplock_url).await?;
        let pool = sqlx::PgPool::connect(&pgmq_url).await?;
        pgmq::PGMQueueExt::new_with_pool(pool.clone()).await.install_sql_from_embedded().await?;
        pool.close().await;
        let (server, address) =
            crate::setup::serve(&skiplock_url, &["--roles", "api"], &[("SKIPLOCK_RATE_LIMIT", "0".into())]).await?;
        let server_pid = server.id().context("server pid")?;
        let http = reqwest::Client::builder().pool_max_idle_per_host(128).build()?;
        let base = format!("{address}/client/v4/accounts/{account}");
        Ok(Bench { pg, server, server_pid, http, base, token, skiplock_url, pgmq_url })
    }

    async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let resp = self.http.post(format!("{}/{path}", self.base)).bearer_auth(&self.token).json(body).send().await?;
        let status = resp.status();
        let value: Value = resp.json().await?;
        if !status.is_success() {
            bail!("POST {path}: {status} {value}");
        }
        Ok(value["result"].clone())
    }

    /// A queue with an http_pull consumer; returns its id.
    async fn queue(&self, name: &str) -> anyhow::Result<String> {
        let q = self.post("queues", &json!({"queue_name": name})).await?;
        let id = q["queue_id"].as_str().unwrap_or_default().to_owned();
        self.post(&format!("queues/{id}/consumers"), &json!({"type": "http_pull", "settings": {"max_retries": 100}}))
            .await?;
        Ok(id)
    }

    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.server_pid)).unwrap_or_default();
        status
            .lines()
            .find_map(|l| {
                l.strip_prefix("VmHWM:").map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0))
            })
            .unwrap_or(0)
    }

    /// Runs a pgbench script; returns the transactions done and the seconds they took.
    async fn pgbench(&self, url: &str, script: &str, clients: usize, seconds: u64) -> anyhow::Result<(u64, f64)> {
        let file = std::env::temp_dir().join(format!("skiplock-bench-{}.sql", uuid::Uuid::new_v4().simple()));
        std::fs::write(&file, script)?;
        let started = Instant::now();
        let out = Command::new(self.pg.program("pgbench"))
            .args(["-n", "-c", &clients.to_string(), "-j", &clients.min(4).to_string(), "-T", &seconds.to_string()])
            .arg("-f")
            .arg(&file)
            .arg(url)
            .output()
            .await?;
        let elapsed = started.elapsed().as_secs_f64();
        let _ = std::fs::remove_file(&file);
        let text = String::from_utf8_lossy(&out.stdout);
        let done = text
            .lines()
            .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
            .and_then(|v| v.split('/').next())
            .and_then(|v| v.trim().parse().ok())
            .with_context(|| format!("pgbench output: {text}{}", String::from_utf8_lossy(&out.stderr)))?;
        Ok((done, elapsed.min(seconds as f64 + 1.0).max(seconds as f64)))
    }

    async fn measured<F, Fut>(&self, url: &str, work: F) -> anyhow::Result<Run>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<(u64, f64)>>,
    {
        let before = wal_lsn(url).await?;
        let (messages, seconds) = work().await?;
        let after = wal_lsn(url).await?;
        Ok(Run { messages, seconds, wal_bytes: after - before })
    }

    /// skiplock: `clients` tasks publishing `batch` messages per request for `seconds`.
    async fn http_publish(
        &self,
        queue: &str,
        clients: usize,
        batch: usize,
        seconds: u64,
    ) -> anyhow::Result<(u64, f64)> {
        let done = Arc::new(AtomicU64::new(0));
        let until = Instant::now() + Duration::from_secs(seconds);
        let body = "x".repeat(BODY);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..clients {
            let (http, url, token, done, body) =
                (self.http.clone(), self.base.clone(), self.token.clone(), done.clone(), body.clone());
            let queue = queue.to_owned();
            tasks.spawn(async move {
                let (path, request) = if batch == 1 {
                    (format!("{url}/queues/{queue}/messages"), json!({"body": body, "content_type": "text"}))
                } else {
                    let messages: Vec<Value> =
                        (0..batch).map(|_| json!({"body": body, "content_type": "text"})).collect();
                    (format!("{url}/queues/{queue}/messages/batch"), json!({ "messages": messages }))
                };
                let payload = serde_json::to_vec(&request).unwrap();
                while Instant::now() < until {
                    let resp = http
                        .post(&path)
                        .bearer_auth(&token)
                        .header("content-type", "application/json")
                        .body(payload.clone())
                        .send()
                        .await;
                    if matches!(resp, Ok(ref r) if r.status().is_success()) {
                        done.fetch_add(batch as u64, Ordering::Relaxed);
                    }
                }
            });
        }
        let started = Instant::now();
        while tasks.join_next().await.is_some() {}
        Ok((done.load(Ordering::Relaxed), started.elapsed().as_secs_f64()))
    }

    /// skiplock: `consumers` tasks pulling 100 and acking them, for `seconds` (optionally also publishing
    /// 100 before each pull: the steady cycle). Returns acked messages.
    async fn http_drain(&self, queue: &str, consumers: usize, seconds: u64, cycle: bool) -> anyhow::Result<(u64, f64)> {
        let done = Arc::new(AtomicU64::new(0));
        let until = Instant::now() + Duration::from_secs(seconds);
        let mut tasks = tokio::task::JoinSet::new();
        let body = "x".repeat(BODY);
        for _ in 0..consumers {
            let (http, url, token, done) = (self.http.clone(), self.base.clone(), self.token.clone(), done.clone());
            let queue = queue.to_owned();
            let batch: Vec<Value> = (0..100).map(|_| json!({"body": body, "content_type": "text"})).collect();
            let publish = serde_json::to_vec(&json!({ "messages": batch })).unwrap();
            tasks.spawn(async move {
                while Instant::now() < until {
                    if cycle {
                        let _ = http
                            .post(format!("{url}/queues/{queue}/messages/batch"))
                            .bearer_auth(&token)
                            .header("content-type", "application/json")
                            .body(publish.clone())
                            .send()
                            .await;
                    }
                    let Ok(resp) = http
                        .post(format!("{url}/queues/{queue}/messages/pull"))
                        .bearer_auth(&token)
                        .json(&json!({"batch_size": 100, "visibility_timeout_ms": 60000}))
                        .send()
                        .await
                    else {
                        continue;
                    };
                    let Ok(pulled) = resp.json::<Value>().await else { continue };
                    let leases: Vec<Value> = pulled["result"]["messages"]
                        .as_array()
                        .map(|m| m.iter().map(|m| json!({"lease_id": m["lease_id"]})).collect())
                        .unwrap_or_default();
                    if leases.is_empty() {
                        if !cycle {
                            return;
                        }
                        continue;
                    }
                    let acked = http
                        .post(format!("{url}/queues/{queue}/messages/ack"))
                        .bearer_auth(&token)
                        .json(&json!({ "acks": leases }))
                        .send()
                        .await;
                    if matches!(acked, Ok(ref r) if r.status().is_success()) {
                        done.fetch_add(leases.len() as u64, Ordering::Relaxed);
                    }
                }
            });
        }
        let started = Instant::now();
        while tasks.join_next().await.is_some() {}
        Ok((done.load(Ordering::Relaxed), started.elapsed().as_secs_f64()))
    }

    /// Fills a skiplock queue (or the raw queue) with `count` ready 1 KiB messages, fast, in SQL.
    async fn preload_skiplock(&self, queue: &str, count: i64) -> anyhow::Result<()> {
        let mut left = count;
        while left > 0 {
            let n = left.min(20_000);
            exec(
                &self.skiplock_url,
                &format!(
                    "with ids as (select gen_random_uuid() as id from generate_series(1, {n})),
                 bodies as (insert into message_bodies (id, content_type, body)
                            select id, 1, convert_to(repeat('x', {BODY}), 'UTF8') from ids)
                 insert into messages (id, queue_id, available_at, size, published_at)
                 select id, '{queue}', now() - interval '1 second', {BODY}, now() from ids"
                ),
            )
            .await?;
            left -= n;
        }
        exec(&self.skiplock_url, "vacuum analyze messages; vacuum analyze message_bodies").await
    }

    async fn preload_pgmq(&self, count: i64) -> anyhow::Result<()> {
        let mut left = count;
        while left > 0 {
            let n = left.min(20_000);
            exec(&self.pgmq_url, &format!(
                "select pgmq.send_batch('bench', array(select jsonb_build_object('p', repeat('x', {})) from generate_series(1, {n})))",
                BODY - 8
            ))
            .await?;
            left -= n;
        }
        exec(&self.pgmq_url, "vacuum analyze pgmq.q_bench").await
    }
}

fn raw_insert(queue: &str, rows: usize) -> String {
    format!(
        "with ids as (select gen_random_uuid() as id from generate_series(1, {rows})),
         bodies as (insert into message_bodies (id, content_type, body)
                    select id, 1, convert_to(repeat('x', {BODY}), 'UTF8') from ids)
         insert into messages (id, queue_id, available_at, size, published_at)
         select id, '{queue}', now(), {BODY}, now() from ids;\n"
    )
}

fn raw_drain(queue: &str) -> String {
    format!(
        "with candidates as (
             select id from messages where queue_id = '{queue}' and available_at <= now()
             order by available_at, id limit 100 for update skip locked),
         claimed as (
             update messages m set available_at = now() + interval '60 seconds', attempts = m.attempts + 1, leased = true
             from candidates c where m.id = c.id returning m.id)
         select coalesce(array_agg(c.id), '{{}}')::text as ids from claimed c join message_bodies b on b.id = c.id \\gset
         with gone as (delete from messages where queue_id = '{queue}' and id = any(':ids'::uuid[]) returning id)
         delete from message_bodies b using gone where b.id = gone.id;\n"
    )
}

fn pgmq_send(rows: usize) -> String {
    if rows == 1 {
        format!("select pgmq.send('bench', jsonb_build_object('p', repeat('x', {})));\n", BODY - 8)
    } else {
        format!(
            "select pgmq.send_batch('bench', array(select jsonb_build_object('p', repeat('x', {})) from generate_series(1, {rows})));\n",
            BODY - 8
        )
    }
}

const PGMQ_DRAIN: &str = "select pgmq.delete('bench', array(select msg_id from pgmq.read('bench', 60, 100)));\n";

struct Row {
    workload: &'static str,
    skiplock: f64,
    raw: f64,
    pgmq: f64,
    wal: [f64; 3],
}

pub async fn run(args: SuiteArgs) -> anyhow::Result<()> {
    let plan = if args.quick {
        Plan { seconds: 6, rounds: 1, preload: 150_000, cycle_seconds: 45, cycle_sample: 15, big_backlog: 300_000 }
    } else {
        Plan { seconds: 20, rounds: 3, preload: 700_000, cycle_seconds: 600, cycle_sample: 60, big_backlog: 1_000_000 }
    };
    let bench = Bench::start().await?;
    exec(&bench.pgmq_url, "select pgmq.create('bench')").await?;
    let sk_queue = bench.queue("bench").await?;
    let raw_queue = bench.queue("raw").await?;
    let (sk, raw, pq) = (&bench.skiplock_url, &bench.skiplock_url, &bench.pgmq_url);
    let mut rows = Vec::new();

    // W1 and W3: publishing.
    for (workload, clients, batch) in
        [("W1 publish, batches of 100, 4 clients", 4, 100), ("W3 single publish, 64 clients", 64, 1)]
    {
        let (mut s, mut r, mut p) = (vec![], vec![], vec![]);
        let mut wal = [vec![], vec![], vec![]];
        for _ in 0..plan.rounds {
            let run = bench.measured(sk, || bench.http_publish(&sk_queue, clients, batch, plan.seconds)).await?;
            s.push(run.rate());
            wal[0].push(run.wal_bytes as f64 / run.messages.max(1) as f64);
            let run = bench
                .measured(raw, || async {
                    let (tx, secs) = bench.pgbench(raw, &raw_insert(&raw_queue, batch), clients, plan.seconds).await?;
                    Ok((tx * batch as u64, secs))
                })
                .await?;
            r.push(run.rate());
            wal[1].push(run.wal_bytes as f64 / run.messages.max(1) as f64);
            let run = bench
                .measured(pq, || async {
                    let (tx, secs) = bench.pgbench(pq, &pgmq_send(batch), clients, plan.seconds).await?;
                    Ok((tx * batch as u64, secs))
                })
                .await?;
            p.push(run.rate());
            wal[2].push(run.wal_bytes as f64 / run.messages.max(1) as f64);
        }
        rows.push(Row { workload, skiplock: median(s), raw: median(r), pgmq: median(p), wal: wal.map(median) });
    }
    let peak_rss_mib = bench.peak_rss_kib() as f64 / 1024.0;
    // Start W2 from what W1/W3 left, topped up.
    exec(sk, "vacuum analyze messages").await?;

    // W2: draining a preloaded queue, 4 consumers pulling and acking 100 at a time.
    let (mut s, mut r, mut p) = (vec![], vec![], vec![]);
    let mut wal = [vec![], vec![], vec![]];
    for _ in 0..plan.rounds {
        bench.preload_skiplock(&sk_queue, plan.preload).await?;
        let run = bench.measured(sk, || bench.http_drain(&sk_queue, 4, plan.seconds, false)).await?;
        s.push(run.rate());
        wal[0].push(run.wal_bytes as f64 / run.messages.max(1) as f64);
        bench.preload_skiplock(&raw_queue, plan.preload).await?;
        let run = bench
            .measured(raw, || async {
                let (tx, secs) = bench.pgbench(raw, &raw_drain(&raw_queue), 4, plan.seconds).await?;
                Ok((tx * 100, secs))
            })
            .await?;
        r.push(run.rate());
        wal[1].push(run.wal_bytes as f64 / run.messages.max(1) as f64);
        bench.preload_pgmq(plan.preload).await?;
        let run = bench
            .measured(pq, || async {
                let (tx, secs) = bench.pgbench(pq, PGMQ_DRAIN, 4, plan.seconds).await?;
                Ok((tx * 100, secs))
            })
            .await?;
        p.push(run.rate());
        wal[2].push(run.wal_bytes as f64 / run.messages.max(1) as f64);
    }
    let w2_empty = median(s.clone());
    rows.push(Row {
        workload: "W2 drain, pull 100 + ack 100, 4 consumers",
        skiplock: median(s),
        raw: median(r),
        pgmq: median(p),
        wal: wal.map(median),
    });
    for q in [&sk_queue, &raw_queue] {
        exec(sk, &format!("with gone as (delete from messages where queue_id = '{q}' returning id) delete from message_bodies b using gone where b.id = gone.id; vacuum messages; vacuum message_bodies")).await?;
    }
    exec(pq, "select pgmq.purge_queue('bench'); vacuum pgmq.q_bench").await?;

    // W5: the steady publish/pull/ack cycle, sampled; skiplock and pgmq.
    let samples = plan.cycle_seconds / plan.cycle_sample;
    let mut cycle_sk = Vec::new();
    let mut cycle_pq = Vec::new();
    for _ in 0..samples {
        let run = bench.measured(sk, || bench.http_drain(&sk_queue, 4, plan.cycle_sample, true)).await?;
        cycle_sk.push(run.rate());
    }
    for _ in 0..samples {
        let script = format!("{}{PGMQ_DRAIN}", pgmq_send(100));
        let (tx, secs) = bench.pgbench(pq, &script, 4, plan.cycle_sample).await?;
        cycle_pq.push((tx * 100) as f64 / secs);
    }
    // W2 again, behind a big backlog.
    bench.preload_skiplock(&sk_queue, plan.big_backlog).await?;
    let pull_started = Instant::now();
    bench.post(&format!("queues/{sk_queue}/messages/pull"), &json!({"batch_size": 100})).await?;
    let pull_ms_backlog = pull_started.elapsed().as_secs_f64() * 1000.0;
    let big = bench.http_drain(&sk_queue, 4, plan.seconds, false).await?;
    let w2_big = big.0 as f64 / big.1;

    // Report.
    let date = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC");
    println!(
        "\nskiplock bench ({}), {date}, 1 KiB messages, {} s per run, median of {} round(s)\n",
        if args.quick { "quick" } else { "full" },
        plan.seconds,
        plan.rounds
    );
    println!("| workload | skiplock (HTTP) msg/s | raw SQL ceiling msg/s | pgmq msg/s | skiplock / ceiling | skiplock / pgmq | WAL bytes/msg (skiplock, raw, pgmq) |");
    println!("|---|--:|--:|--:|--:|--:|--:|");
    for r in &rows {
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.2}x | {:.2}x | {:.0}, {:.0}, {:.0} |",
            r.workload,
            r.skiplock,
            r.raw,
            r.pgmq,
            r.skiplock / r.raw,
            r.skiplock / r.pgmq,
            r.wal[0],
            r.wal[1],
            r.wal[2]
        );
    }
    let first = cycle_sk.first().copied().unwrap_or(1.0);
    let worst = cycle_sk.iter().copied().fold(f64::MAX, f64::min);
    println!(
        "\nW5 cycle (publish 100, pull 100, ack, 4 clients), {} samples of {} s: skiplock {:?} msg/s (worst/first {:.2}); pgmq {:?} msg/s (skiplock/pgmq, medians {:.2}x)",
        samples,
        plan.cycle_sample,
        cycle_sk.iter().map(|v| v.round()).collect::<Vec<_>>(),
        worst / first,
        cycle_pq.iter().map(|v| v.round()).collect::<Vec<_>>(),
        median(cycle_sk.clone()) / median(cycle_pq.clone()).max(1.0)
    );
    println!(
        "W5 backlog: W2 drain behind {} waiting messages {:.0} msg/s vs {:.0} empty ({:.2}x); a pull of 100 took {:.1} ms",
        plan.big_backlog, w2_big, w2_empty, w2_big / w2_empty.max(1.0), pull_ms_backlog
    );
    println!("skiplock peak RSS during W1-W3: {peak_rss_mib:.0} MiB");

    let result = json!({
        "date": date.to_string(), "quick": args.quick, "seconds": plan.seconds, "rounds": plan.rounds,
        "rows": rows.iter().map(|r| json!({
            "workload": r.workload, "skiplock": r.skiplock, "raw": r.raw, "pgmq": r.pgmq,
            "vs_raw": r.skiplock / r.raw, "vs_pgmq": r.skiplock / r.pgmq,
            "wal_bytes_per_message": {"skiplock": r.wal[0], "raw": r.wal[1], "pgmq": r.wal[2]},
        })).collect::<Vec<_>>(),
        "w5_cycle": {"sample_seconds": plan.cycle_sample, "skiplock": cycle_sk, "pgmq": cycle_pq},
        "w5_backlog": {"messages": plan.big_backlog, "w2_behind_backlog": w2_big, "w2_empty": w2_empty, "pull_ms": pull_ms_backlog},
        "peak_rss_mib": peak_rss_mib,
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("bench-{}.json", chrono::Utc::now().format("%Y%m%dT%H%M%SZ")));
    std::fs::write(&file, serde_json::to_string_pretty(&result)?)?;
    eprintln!("wrote {}", file.display());
    // W4: publish -> webhook latency, on the same cluster, with its own server.
    let admin = bench.pg.url("postgres");
    drop(bench.server);
    std::env::set_var("DATABASE_URL", admin);
    crate::latency::run(1000, if args.quick { 10 } else { 20 }).await?;
    drop(bench.pg);
    Ok(())
}
