//! The SQL peers of the suite, on the same PostgreSQL cluster as skiplock:
//! - the raw ceiling: skiplock's own inserts, SKIP LOCKED claims and deletes run directly by pgbench,
//!   with the payload made inside the database (no client, no HTTP: what the schema costs by itself);
//! - pgmq through its own Rust client, the way a pgmq user sends and receives: payloads cross the wire
//!   in both directions, as skiplock's do;
//! - pgmq's SQL functions run by pgbench with the payload made inside the database and read messages
//!   never leaving it (how pgmq is usually benchmarked, and the lower bound of its cost).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use pgmq::PGMQueueExt;
use serde::{Deserialize, Serialize};
use tokio::process::Command;

use crate::api_load::sample_rates;

pub const BODY: usize = 1024;

/// Runs pgbench scripts against one database.
pub struct Pgbench {
    pub program: PathBuf,
    pub url: String,
}

impl Pgbench {
    /// Runs `script` on `clients` connections for `seconds`; returns transactions done and seconds taken.
    pub async fn run(&self, script: &str, clients: usize, seconds: f64) -> anyhow::Result<(u64, f64)> {
        self.pgbench(script, clients, &["-T", &(seconds.round().max(1.0) as u64).to_string()], seconds).await
    }

    /// Runs `script` `transactions` times on each of `clients` connections; returns the seconds taken.
    /// Drains use this: a timed run would go on counting empty claims once the queue is empty.
    pub async fn run_transactions(&self, script: &str, clients: usize, transactions: u64) -> anyhow::Result<f64> {
        let started = Instant::now();
        self.pgbench(script, clients, &["-t", &transactions.to_string()], 0.0).await?;
        Ok(started.elapsed().as_secs_f64())
    }

    async fn pgbench(&self, script: &str, clients: usize, limit: &[&str], seconds: f64) -> anyhow::Result<(u64, f64)> {
        let file = std::env::temp_dir().join(format!("skiplock-bench-{}.sql", uuid::Uuid::new_v4().simple()));
        std::fs::write(&file, script)?;
        let started = Instant::now();
        let out = Command::new(&self.program)
            .args(["-n", "-c", &clients.to_string(), "-j", &clients.min(4).to_string()])
            .args(limit)
            .arg("-f")
            .arg(&file)
            .arg(&self.url)
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
        // pgbench's own clock starts after its connections are made; ours includes them.
        Ok((done, elapsed.min(seconds + 1.0).max(seconds)))
    }
}

/// A time-ordered UUID (version 7) made in SQL, as skiplock's ids are, so the ceiling's indexes grow as
/// skiplock's do.
pub const UUID_V7_FUNCTION: &str = "create or replace function bench_uuid_v7() returns uuid language sql volatile as $$
    select encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing
        substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6),
        52, 1), 53, 1), 'hex')::uuid $$";

/// The ceiling's publish: `rows` messages into skiplock's two tables in one transaction.
pub fn raw_insert(queue: &str, rows: usize) -> String {
    format!(
        "with ids as (select bench_uuid_v7() as id from generate_series(1, {rows})),
         current as (select gen from message_generations where state = 'current'),
         bodies as (insert into message_bodies (id, content_type, body, gen)
                    select id, 1, convert_to(repeat('x', {BODY}), 'UTF8'), gen from ids, current)
         insert into messages (id, queue_id, available_at, size, published_at, gen)
         select id, '{queue}', now(), {BODY}, now(), gen from ids, current;\n"
    )
}

/// The ceiling's consumer: claim 100 with SKIP LOCKED (reading their bodies), then delete them.
pub fn raw_drain(queue: &str) -> String {
    format!(
        "with candidates as (
             select id from messages where queue_id = '{queue}' and available_at <= now()
             order by available_at, id limit 100 for update skip locked),
         claimed as (
             update messages m set available_at = now() + interval '60 seconds', attempts = m.attempts + 1, leased = true
             from candidates c where m.id = c.id returning m.id)
         select coalesce(array_agg(c.id), '{{}}')::text as ids, sum(length(b.body)) as bytes
         from claimed c join message_bodies b on b.id = c.id \\gset
         with gone as (delete from messages where queue_id = '{queue}' and id = any(':ids'::uuid[]) returning id)
         delete from message_bodies b using gone where b.id = gone.id;\n"
    )
}

/// Fills the ceiling's queue with `count` ready messages.
pub fn raw_preload(queue: &str, count: u64) -> String {
    format!(
        "with ids as (select bench_uuid_v7() as id from generate_series(1, {count})),
         current as (select gen from message_generations where state = 'current'),
         bodies as (insert into message_bodies (id, content_type, body, gen)
                    select id, 1, convert_to(repeat('x', {BODY}), 'UTF8'), gen from ids, current)
         insert into messages (id, queue_id, available_at, size, published_at, gen)
         select id, '{queue}', now() - interval '1 second', {BODY}, now(), gen from ids, current"
    )
}

/// pgmq's publish with the payload made in the database.
pub fn pgmq_sql_send(rows: usize) -> String {
    let payload = format!("jsonb_build_object('p', repeat('x', {}))", BODY - 8);
    if rows == 1 {
        format!("select pgmq.send('bench', {payload});\n")
    } else {
        format!("select pgmq.send_batch('bench', array(select {payload} from generate_series(1, {rows})));\n")
    }
}

/// pgmq's consumer with the messages never leaving the database.
pub const PGMQ_SQL_DRAIN: &str =
    "select pgmq.delete('bench', array(select msg_id from pgmq.read('bench', 60, 100)));\n";

pub fn pgmq_sql_preload(count: u64) -> String {
    format!(
        "select pgmq.send_batch('bench', array(select jsonb_build_object('p', repeat('x', {})) from generate_series(1, {count})))",
        BODY - 8
    )
}

/// A pgmq message as a pgmq user would define it: 1 KiB of JSON.
#[derive(Serialize, Deserialize)]
struct Payload {
    p: String,
}

/// pgmq through its Rust client.
#[derive(Clone)]
pub struct PgmqClient {
    queue: PGMQueueExt,
}

const PGMQ_QUEUE: &str = "bench";

impl PgmqClient {
    /// A client on `url` with room for `connections` concurrent calls.
    pub async fn connect(url: &str, connections: u32) -> anyhow::Result<PgmqClient> {
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(connections).connect(url).await?;
        Ok(PgmqClient { queue: PGMQueueExt::new_with_pool(pool).await })
    }

    fn payload() -> Payload {
        Payload { p: "x".repeat(BODY - 8) }
    }

    /// `clients` tasks sending `batch` messages per call (`send` for one) for `seconds`.
    pub async fn publish(&self, clients: usize, batch: usize, seconds: f64) -> anyhow::Result<(u64, f64)> {
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let until = started + Duration::from_secs_f64(seconds);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..clients {
            let (client, done) = (self.clone(), done.clone());
            tasks.spawn(async move {
                let messages: Vec<Payload> = (0..batch).map(|_| Self::payload()).collect();
                while Instant::now() < until {
                    if batch == 1 {
                        client.queue.send(PGMQ_QUEUE, &messages[0]).await?;
                    } else {
                        client.queue.send_batch(PGMQ_QUEUE, &messages).await?;
                    }
                    done.fetch_add(batch as u64, Ordering::Relaxed);
                }
                anyhow::Ok(())
            });
        }
        while let Some(task) = tasks.join_next().await {
            task??;
        }
        Ok((done.load(Ordering::Relaxed), started.elapsed().as_secs_f64()))
    }

    /// Reads up to 100 messages (60 s visibility) and deletes them; returns how many.
    async fn read_and_delete(&self) -> anyhow::Result<u64> {
        let read = self.queue.read_batch::<Payload>(PGMQ_QUEUE, 60, 100).await?;
        if read.is_empty() {
            return Ok(0);
        }
        let ids: Vec<i64> = read.iter().map(|m| m.msg_id).collect();
        self.queue.delete_batch(PGMQ_QUEUE, &ids).await?;
        Ok(ids.len() as u64)
    }

    /// `consumers` tasks reading 100 and deleting them until `seconds` pass or the queue is empty.
    pub async fn drain(&self, consumers: usize, seconds: f64) -> anyhow::Result<(u64, f64)> {
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let until = started + Duration::from_secs_f64(seconds);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..consumers {
            let (client, done) = (self.clone(), done.clone());
            tasks.spawn(async move {
                while Instant::now() < until {
                    let n = client.read_and_delete().await?;
                    if n == 0 {
                        break;
                    }
                    done.fetch_add(n, Ordering::Relaxed);
                }
                anyhow::Ok(())
            });
        }
        while let Some(task) = tasks.join_next().await {
            task??;
        }
        Ok((done.load(Ordering::Relaxed), started.elapsed().as_secs_f64()))
    }

    /// The steady cycle (send 100, read 100, delete them) on `clients` tasks; messages deleted per second
    /// in each of `intervals` intervals of `interval` seconds.
    pub async fn cycle(&self, clients: usize, intervals: usize, interval: f64) -> anyhow::Result<Vec<f64>> {
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let until = started + Duration::from_secs_f64(interval * intervals as f64);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..clients {
            let (client, done) = (self.clone(), done.clone());
            tasks.spawn(async move {
                let messages: Vec<Payload> = (0..100).map(|_| Self::payload()).collect();
                while Instant::now() < until {
                    client.queue.send_batch(PGMQ_QUEUE, &messages).await?;
                    done.fetch_add(client.read_and_delete().await?, Ordering::Relaxed);
                }
                anyhow::Ok(())
            });
        }
        let rates = sample_rates(&done, started, intervals, interval).await;
        while let Some(task) = tasks.join_next().await {
            task??;
        }
        Ok(rates)
    }
}
