//! `make bench` / `make bench-quick`: skiplock's HTTP API beside its peers on one private PostgreSQL
//! cluster, 1 KiB messages (see `peers` for who they are and why each is there):
//!   W1 publish, batches of 100, 4 clients;  W3 single publish, 64 clients;
//!   W2 drain a preloaded queue, pull/read 100 then ack/delete them, 4 consumers;
//!   W2o the same drain of messages over 1,000 ordering keys, and ordered delivery's fairness (skiplock);
//!   W5 the steady publish/pull/ack cycle over time, and W2 behind a large backlog;
//!   W4 publish -> webhook latency at 1,000 messages/s (the `latency` module);
//!   W7 publish -> long-poll receive latency at 1,000 messages/s, 16 pullers waiting (`long_poll`);
//!   W8 a topic publish reaching four queues beside batch publishes to each of them (skiplock); W8f one
//!   queue with four consumers (two pull, two webhook) beside four queues of one each, drained (`fan_out`).
//! Runs alternate between systems and repeat; tables show medians. Besides messages/s, each run records
//! WAL bytes and the CPU each party spent per message, which is what bounds throughput when they share
//! a small machine. Results: Markdown on stdout, JSON under `bench/results/`.

use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};
use skiplock::testkit::TempCluster;
use sqlx::{Connection, PgConnection};
use tokio::process::Child;

use crate::api_load::Api;
use crate::cpu::{self, CpuTimes};
use crate::fan_out::{Layout, Receiver};
use crate::peers::{self, Pgbench, PgmqClient, BODY};
use crate::rabbitmq::Rabbit;
use crate::setup::percentile_ms;

#[derive(Debug, Clone, clap::Args)]
pub struct SuiteArgs {
    /// A short run (under 3 minutes): shorter workloads, one round, a smaller backlog.
    #[arg(long)]
    pub quick: bool,
    /// Run only these workloads (w1, w1k, w2, w2b, w2o, w2f, fairness, w3, w4, w5, w7, w8, w8f), comma-separated; w8
    /// also runs w8f; w1k
    /// also runs W1d and a W1 of skiplock beside it; w2o and w2f a W2 of skiplock beside each of their
    /// rounds, w2o also the fairness figure; w2 (or w2b) runs both W2 and W2b, a round of W2b after each round of W2 (so that
    /// `--only w2` can drive a skiplock without ordering keys).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Run only these systems (skiplock, raw, pgmq, pgmq_sql, rabbitmq), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub systems: Vec<String>,
    /// Rounds of every workload that has them (default: 1 quick; full: 5 of W1 and W3, 3 of W2 and of
    /// W5's backlog).
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Load pg_stat_statements into the cluster and print skiplock's costliest statements at the end.
    #[arg(long)]
    pub statements: bool,
}

struct Plan {
    seconds: f64,
    /// Rounds of W2 (and of W5's backlog, set beside it).
    rounds: usize,
    /// Rounds of W1 and W3: cheap (nothing to preload) and the noisiest, swinging ±15% from round to
    /// round, so a median of three would decide a 1.0x target by chance.
    publish_rounds: usize,
    preload: u64,
    cycle_intervals: usize,
    cycle_interval: f64,
    big_backlog: u64,
    latency_seconds: u32,
    /// Messages W8f and W8q feed each consumer.
    fan_out_messages: u64,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                seconds: 5.0,
                rounds: 1,
                publish_rounds: 1,
                preload: 120_000,
                cycle_intervals: 3,
                cycle_interval: 5.0,
                big_backlog: 300_000,
                latency_seconds: 8,
                fan_out_messages: 20_000,
            }
        } else {
            Plan {
                seconds: 20.0,
                rounds: 3,
                publish_rounds: 5,
                preload: 700_000,
                cycle_intervals: 10,
                cycle_interval: 60.0,
                big_backlog: 1_000_000,
                latency_seconds: 30,
                fan_out_messages: 200_000,
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Skiplock,
    Raw,
    Pgmq,
    PgmqSql,
    Rabbit,
}

impl System {
    const ALL: [System; 5] = [System::Skiplock, System::Raw, System::Pgmq, System::PgmqSql, System::Rabbit];

    fn name(self) -> &'static str {
        match self {
            System::Skiplock => "skiplock (HTTP)",
            System::Raw => "raw SQL ceiling (pgbench)",
            System::Pgmq => "pgmq (its Rust client)",
            System::PgmqSql => "pgmq (SQL in pgbench)",
            System::Rabbit => "RabbitMQ",
        }
    }

    fn key(self) -> &'static str {
        match self {
            System::Skiplock => "skiplock",
            System::Raw => "raw",
            System::Pgmq => "pgmq",
            System::PgmqSql => "pgmq_sql",
            System::Rabbit => "rabbitmq",
        }
    }
}

/// One measured run.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    messages: u64,
    seconds: f64,
    wal_bytes: i64,
    cpu: CpuTimes,
}

impl Run {
    fn rate(&self) -> f64 {
        self.messages as f64 / self.seconds.max(1e-9)
    }

    fn per_message(&self, value: f64) -> f64 {
        value / self.messages.max(1) as f64
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// A workload's runs, by system.
struct Row {
    workload: &'static str,
    runs: Vec<(System, Vec<Run>)>,
}

impl Row {
    fn runs(&self, system: System) -> Option<&Vec<Run>> {
        self.runs.iter().find(|(s, runs)| *s == system && !runs.is_empty()).map(|(_, runs)| runs)
    }

    fn rate(&self, system: System) -> Option<f64> {
        self.runs(system).map(|runs| median(runs.iter().map(Run::rate).collect()))
    }

    /// Medians of WAL bytes and CPU µs (server, PostgreSQL, client) per message.
    fn costs(&self, system: System) -> Option<[f64; 4]> {
        let runs = self.runs(system)?;
        let of = |f: &dyn Fn(&Run) -> f64| median(runs.iter().map(f).collect());
        Some([
            of(&|r| r.per_message(r.wal_bytes as f64)),
            of(&|r| r.per_message(r.cpu.server * 1e6)),
            of(&|r| r.per_message(r.cpu.postgres * 1e6)),
            of(&|r| r.per_message(r.cpu.client * 1e6)),
        ])
    }
}

/// Everything the suite runs against.
struct Bench {
    /// The systems asked for (all when empty).
    systems: Vec<String>,
    pg: TempCluster,
    _server: Child,
    server_pid: u32,
    api: Api,
    skiplock_url: String,
    raw_url: String,
    pgmq_url: String,
    raw: Pgbench,
    pgmq_sql: Pgbench,
    pgmq: PgmqClient,
    rabbit: Option<Rabbit>,
    body: String,
}

async fn connect(url: &str) -> anyhow::Result<PgConnection> {
    PgConnection::connect(url).await.with_context(|| format!("connecting to {url}"))
}

/// Runs each `;`-separated statement on its own (VACUUM and CREATE DATABASE refuse a transaction).
async fn exec(url: &str, sql: &str) -> anyhow::Result<()> {
    let mut c = connect(url).await?;
    for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        sqlx::raw_sql(statement).execute(&mut c).await.with_context(|| format!("running {statement}"))?;
    }
    Ok(())
}

async fn wal_lsn(url: &str) -> anyhow::Result<i64> {
    let mut c = connect(url).await?;
    Ok(sqlx::query_scalar("select (pg_current_wal_lsn() - '0/0')::int8").fetch_one(&mut c).await?)
}

impl Bench {
    async fn start(systems: Vec<String>, statements: bool) -> anyhow::Result<Bench> {
        let settings: &[(&str, &str)] =
            // `track = all` also counts the statements of functions and triggers.
            if statements {
                &[
                    ("shared_preload_libraries", "pg_stat_statements"),
                    ("pg_stat_statements.track", "all"),
                    ("pg_stat_statements.track_planning", "on"),
                ]
            } else {
                &[]
            };
        let pg = tokio::task::spawn_blocking(move || TempCluster::create_with(settings)).await?;
        exec(&pg.url("postgres"), "create database skiplock; create database raw; create database pgmqbench").await?;
        if statements {
            exec(&pg.url("skiplock"), "create extension pg_stat_statements").await?;
        }
        let (skiplock_url, raw_url, pgmq_url) = (pg.url("skiplock"), pg.url("raw"), pg.url("pgmqbench"));
        let (account, token) = crate::setup::prepare(&skiplock_url).await?;
        // The ceiling runs skiplock's statements on skiplock's schema, in a database of its own.
        crate::setup::prepare(&raw_url).await?;
        exec(&raw_url, peers::UUID_V7_FUNCTION).await?;
        let pool = sqlx::PgPool::connect(&pgmq_url).await?;
        pgmq::PGMQueueExt::new_with_pool(pool.clone()).await.install_sql_from_embedded().await?;
        pool.close().await;
        exec(&pgmq_url, "select pgmq.create('bench')").await?;
        let (server, address) = crate::setup::serve(
            &skiplock_url,
            &["--roles", "api"],
            &[("SKIPLOCK_RATE_LIMIT", "0".into()), ("SKIPLOCK_PUBLISH_RATE_LIMIT", "0".into())],
        )
        .await?;
        let server_pid = server.id().context("server pid")?;
        let api = Api { host: address.trim_start_matches("http://").to_owned(), account, token };
        let rabbit = Rabbit::connect("amqp://guest:guest@127.0.0.1:5672/%2f", "skiplock-bench").await?;
        if rabbit.is_none() {
            eprintln!("RabbitMQ does not answer on 127.0.0.1:5672; its column stays empty");
        }
        Ok(Bench {
            systems,
            raw: Pgbench { program: pg.program("pgbench"), url: raw_url.clone() },
            pgmq_sql: Pgbench { program: pg.program("pgbench"), url: pgmq_url.clone() },
            pgmq: PgmqClient::connect(&pgmq_url, 64).await?,
            pg,
            _server: server,
            server_pid,
            api,
            skiplock_url,
            raw_url,
            pgmq_url,
            rabbit,
            body: "x".repeat(BODY),
        })
    }

    /// A queue with an http_pull consumer, in skiplock (over its API) and in the ceiling's database
    /// (the same rows, made in SQL); returns both ids.
    async fn queue(&self, name: &str) -> anyhow::Result<(String, String)> {
        let id = self.skiplock_queue(name).await?;
        let mut raw = connect(&self.raw_url).await?;
        let raw_id: uuid::Uuid = sqlx::query_scalar(
            "insert into queues (id, account_id, name) select gen_random_uuid(), id, $1 from accounts limit 1 returning id",
        )
        .bind(name)
        .fetch_one(&mut raw)
        .await?;
        Ok((id, raw_id.simple().to_string()))
    }

    /// A queue with an http_pull consumer in skiplock only; returns its id.
    async fn skiplock_queue(&self, name: &str) -> anyhow::Result<String> {
        let client = reqwest::Client::new();
        let base = format!("http://{}/client/v4/accounts/{}", self.api.host, self.api.account);
        let created: Value = client
            .post(format!("{base}/queues"))
            .bearer_auth(&self.api.token)
            .json(&json!({"queue_name": name}))
            .send()
            .await?
            .json()
            .await?;
        let id = created["result"]["queue_id"].as_str().context("a queue id")?.to_owned();
        client
            .post(format!("{base}/queues/{id}/consumers"))
            .bearer_auth(&self.api.token)
            .json(&json!({"type": "http_pull", "settings": {"max_retries": 100}}))
            .send()
            .await?
            .error_for_status()?;
        Ok(id)
    }

    fn url(&self, system: System) -> &str {
        match system {
            System::Raw => &self.raw_url,
            System::Pgmq | System::PgmqSql => &self.pgmq_url,
            System::Skiplock | System::Rabbit => &self.skiplock_url,
        }
    }

    fn server_pids(&self, system: System) -> Vec<u32> {
        match system {
            System::Skiplock => vec![self.server_pid],
            System::Rabbit => cpu::pids_named("beam.smp"),
            _ => vec![],
        }
    }

    fn present(&self, system: System) -> bool {
        let asked = self.systems.is_empty() || self.systems.iter().any(|s| s == system.key());
        asked && (system != System::Rabbit || self.rabbit.is_some())
    }

    /// Writes out every dirty page before a measured run, so no run pays for the ones the work before
    /// it left (a 20-s publish run writes over a gigabyte, and backends write out the dirty buffers
    /// they evict, whoever dirtied them; with the systems in a fixed order, that cost fell on the same
    /// system every round).
    async fn checkpoint(&self) -> anyhow::Result<()> {
        exec(&self.pg.url("postgres"), "checkpoint").await
    }

    /// Measures `work` (messages, seconds), from a checkpoint: WAL written and CPU by party while it ran.
    async fn measure<F>(&self, system: System, work: F) -> anyhow::Result<Run>
    where
        F: std::future::Future<Output = anyhow::Result<(u64, f64)>>,
    {
        self.measure_nodes(system, &self.server_pids(system), work).await
    }

    /// As `measure`, the server's CPU being that of the processes `servers`.
    async fn measure_nodes<F>(&self, system: System, servers: &[u32], work: F) -> anyhow::Result<Run>
    where
        F: std::future::Future<Output = anyhow::Result<(u64, f64)>>,
    {
        self.checkpoint().await?;
        let postmaster = cpu::postmaster_pid(&self.pg.data_dir()).unwrap_or(0);
        let url = self.url(system);
        let (wal_before, cpu_before) = (wal_lsn(url).await?, cpu::sample(servers, postmaster));
        let (messages, seconds) = work.await?;
        let cpu = cpu::sample(servers, postmaster) - cpu_before;
        // A broker's writes are not PostgreSQL's WAL.
        let wal_bytes = if system == System::Rabbit { 0 } else { wal_lsn(url).await? - wal_before };
        Ok(Run { messages, seconds, wal_bytes, cpu })
    }

    fn rabbit(&self) -> anyhow::Result<&Rabbit> {
        self.rabbit.as_ref().context("RabbitMQ is not there")
    }

    /// W1 and W3: `clients` publishing `batch` messages per call.
    async fn publishing(
        &self,
        workload: &'static str,
        clients: usize,
        batch: usize,
        plan: &Plan,
        queues: &Queues,
    ) -> anyhow::Result<Row> {
        let mut runs: Vec<(System, Vec<Run>)> = System::ALL.iter().map(|s| (*s, vec![])).collect();
        for _ in 0..plan.publish_rounds {
            for (system, done) in runs.iter_mut().filter(|(s, _)| self.present(*s)) {
                let secs = plan.seconds;
                let run = match system {
                    System::Skiplock => {
                        self.measure(
                            *system,
                            self.api.publish(&queues.skiplock, (clients, batch), &self.body, secs, None),
                        )
                        .await?
                    }
                    System::Raw => {
                        let script = peers::raw_insert(&queues.raw, batch);
                        let work =
                            async { self.raw.run(&script, clients, secs).await.map(|(t, s)| (t * batch as u64, s)) };
                        self.measure(*system, work).await?
                    }
                    System::Pgmq => self.measure(*system, self.pgmq.publish(clients, batch, secs)).await?,
                    System::PgmqSql => {
                        let script = peers::pgmq_sql_send(batch);
                        let work = async {
                            self.pgmq_sql.run(&script, clients, secs).await.map(|(t, s)| (t * batch as u64, s))
                        };
                        self.measure(*system, work).await?
                    }
                    System::Rabbit => {
                        let work = self.rabbit()?.publish(clients, batch, self.body.as_bytes(), secs);
                        self.measure(*system, work).await?
                    }
                };
                eprintln!("  {workload}: {} {:.0} msg/s", system.name(), run.rate());
                done.push(run);
            }
        }
        Ok(Row { workload, runs })
    }

    /// W1k (W1 with a unique idempotency key on every message) and W1d (the same batches sent again, all
    /// duplicates), skiplock only. Each round follows a round of W1 without keys (skiplock only), so that
    /// W1k is read against a W1 measured seconds before it: on a shared host the load swings more between
    /// W1's rounds and W1k's than the keys cost.
    async fn keyed_publishing(&self, plan: &Plan, queues: &Queues) -> anyhow::Result<[Row; 3]> {
        let (mut plain, mut first, mut again) = (vec![], vec![], vec![]);
        // A cold service's first round runs slower than the rest (connections, caches, and a new cluster
        // making its first WAL files, which later rounds recycle), which would flatter the first W1k/W1
        // pair: warm it up first, unmeasured.
        self.api.publish(&queues.skiplock, (4, 100), &self.body, WARM_UP_SECONDS, None).await?;
        for round in 0..plan.publish_rounds {
            // Five full rounds would fill the queue past its 25 GB backlog limit.
            self.empty_skiplock().await?;
            let nonce = chrono::Utc::now().timestamp_micros() as u64 + round as u64;
            let (api, queue, body) = (&self.api, &queues.skiplock, &self.body);
            let unkeyed =
                self.measure(System::Skiplock, api.publish(queue, (4, 100), body, plan.seconds, None)).await?;
            // W1k starts where W1 did, from empty tables just checkpointed: on W1's 20 s of rows, and
            // writing them out, W1k ran 10-15% slower (docs/benchmarks.md).
            self.empty_skiplock().await?;
            let mut sent = vec![];
            let keyed = self
                .measure(System::Skiplock, async {
                    let (messages, seconds, per_client) =
                        api.publish_keyed(queue, 4, 100, body, plan.seconds, nonce).await?;
                    sent = per_client;
                    Ok((messages, seconds))
                })
                .await?;
            let duplicates =
                self.measure(System::Skiplock, api.publish_keyed_again(queue, 100, body, nonce, &sent)).await?;
            eprintln!(
                "  W1 beside W1k: {:.0} msg/s; W1k: {:.0} msg/s ({:.2}x); W1d (all duplicates): {:.0} msg/s ({:.2}x)",
                unkeyed.rate(),
                keyed.rate(),
                keyed.rate() / unkeyed.rate(),
                duplicates.rate(),
                duplicates.rate() / unkeyed.rate()
            );
            plain.push(unkeyed);
            first.push(keyed);
            again.push(duplicates);
        }
        Ok([
            Row {
                workload: "W1 beside W1k: the same publishes without keys (skiplock only)",
                runs: vec![(System::Skiplock, plain)],
            },
            Row {
                workload: "W1k publish with a unique idempotency key each, batches of 100, 4 clients",
                runs: vec![(System::Skiplock, first)],
            },
            Row {
                workload: "W1d the same keyed batches again (all duplicates)",
                runs: vec![(System::Skiplock, again)],
            },
        ])
    }

    /// W8t beside W8b: four queues fed the same messages, by a topic publish that reaches all four
    /// (each request storing 100 messages in each queue, in one commit) and by batch publishes of 100
    /// to each queue in turn; figures per message stored, a copy in each queue counting one.
    async fn topic_publishing(&self, plan: &Plan) -> anyhow::Result<[Row; 2]> {
        let mut queues = Vec::new();
        for i in 0..FANNED_QUEUES {
            queues.push(self.skiplock_queue(&format!("fanned-{i}")).await?);
        }
        let topic = self.skiplock_topic("orders", &queues).await?;
        let (api, body) = (&self.api, &self.body);
        // Unmeasured, as W1k's: a cold service's first round runs slower than the rest.
        api.publish_to_topic(&topic, (4, 100, FANNED_QUEUES), body, WARM_UP_SECONDS).await?;
        let (mut batched, mut topical) = (vec![], vec![]);
        for _ in 0..plan.publish_rounds {
            self.empty_skiplock().await?;
            let batches =
                self.measure(System::Skiplock, api.publish_in_turn(&queues, (4, 100), body, plan.seconds)).await?;
            self.empty_skiplock().await?;
            let fanned = (4, 100, FANNED_QUEUES);
            let topic =
                self.measure(System::Skiplock, api.publish_to_topic(&topic, fanned, body, plan.seconds)).await?;
            eprintln!(
                "  W8b: {:.0} msg/s; W8t: {:.0} msg/s ({:.2}x)",
                batches.rate(),
                topic.rate(),
                topic.rate() / batches.rate()
            );
            batched.push(batches);
            topical.push(topic);
        }
        self.empty_skiplock().await?;
        Ok([
            Row {
                workload: "W8b batch publish to four queues in turn, batches of 100, 4 clients (skiplock only)",
                runs: vec![(System::Skiplock, batched)],
            },
            Row {
                workload: "W8t topic publish reaching four queues, batches of 100, 4 clients (copies stored)",
                runs: vec![(System::Skiplock, topical)],
            },
        ])
    }

    /// W8f beside W8q: the same four consumers (two pulling, two webhooks) on one queue, and on four
    /// queues of one consumer each, fed the same `messages` while paused and then drained (`fan_out`);
    /// figures per delivery. A node of the dispatcher role delivers the webhooks, started beforehand so
    /// that no run times its start; its CPU counts as the server's.
    async fn fan_out_draining(&self, plan: &Plan) -> anyhow::Result<[Row; 2]> {
        let receiver = Receiver::start()?;
        let allow = [("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8".to_owned())];
        let dispatcher = crate::setup::serve_dispatcher(&self.skiplock_url, &allow).await?;
        let nodes = vec![self.server_pid, dispatcher.id().context("dispatcher pid")?];
        let shared = Layout::one_queue(&self.api, "fan-out", &receiver).await?;
        let apart = Layout::four_queues(&self.api, "fanned-apart", &receiver).await?;
        let (mut one, mut four) = (vec![], vec![]);
        for _ in 0..plan.rounds {
            for (layout, runs) in [(&apart, &mut four), (&shared, &mut one)] {
                self.empty_skiplock().await?;
                layout.set_paused(&self.api, true).await?;
                for queue in &layout.fed {
                    self.api.preload(queue, plan.fan_out_messages, &self.body).await?;
                }
                exec(&self.skiplock_url, "vacuum analyze messages; vacuum analyze message_bodies").await?;
                let work = layout.drain(&self.api, &receiver, plan.fan_out_messages);
                runs.push(self.measure_nodes(System::Skiplock, &nodes, work).await?);
            }
            let (a, b) = (four.last().map_or(0.0, Run::rate), one.last().map_or(0.0, Run::rate));
            eprintln!("  W8q: {a:.0} deliveries/s; W8f: {b:.0} deliveries/s ({:.2}x)", b / a.max(1.0));
        }
        self.empty_skiplock().await?;
        receiver.stop().await;
        Ok([
            Row {
                workload:
                    "W8q four queues of one consumer each (2 pull, 2 webhook) draining the same messages (deliveries)",
                runs: vec![(System::Skiplock, four)],
            },
            Row {
                workload: "W8f one queue with four consumers (2 pull, 2 webhook) draining its messages (deliveries)",
                runs: vec![(System::Skiplock, one)],
            },
        ])
    }

    /// A topic of skiplock's binding each of `queues` by `#`; returns its id.
    async fn skiplock_topic(&self, name: &str, queues: &[String]) -> anyhow::Result<String> {
        let client = reqwest::Client::new();
        let base = format!("http://{}/client/v4/accounts/{}/topics", self.api.host, self.api.account);
        let made: Value =
            client.post(&base).bearer_auth(&self.api.token).json(&json!({"name": name})).send().await?.json().await?;
        let id = made["result"]["id"].as_str().context("a topic id")?.to_owned();
        for queue in queues {
            client
                .post(format!("{base}/{id}/bindings"))
                .bearer_auth(&self.api.token)
                .json(&json!({"queue_id": queue, "pattern": "#"}))
                .send()
                .await?
                .error_for_status()?;
        }
        Ok(id)
    }

    /// Empties every system's queue, so the next workload starts from the same place for all.
    async fn empty_queues(&self) -> anyhow::Result<()> {
        self.empty_skiplock().await?;
        exec(&self.raw_url, "truncate messages, message_bodies; analyze messages, message_bodies").await?;
        exec(&self.pgmq_url, "select pgmq.purge_queue('bench'); vacuum analyze pgmq.q_bench").await?;
        if self.present(System::Rabbit) {
            self.rabbit()?.purge().await?;
        }
        Ok(())
    }

    /// Empties skiplock's queue and its keys. Its database holds only the bench's queue: emptying the
    /// tables at once is far quicker than deleting and vacuuming the millions of rows W1 leaves behind.
    /// The checkpoint after it spares the next round writing out the last one's pages.
    async fn empty_skiplock(&self) -> anyhow::Result<()> {
        exec(
            &self.skiplock_url,
            "truncate messages, message_bodies, idempotency_keys; analyze messages, message_bodies; checkpoint",
        )
        .await
    }

    async fn preload(&self, system: System, queues: &Queues, count: u64) -> anyhow::Result<()> {
        match system {
            System::Skiplock => {
                self.api.preload(&queues.skiplock, count, &self.body).await?;
                exec(&self.skiplock_url, "vacuum analyze messages; vacuum analyze message_bodies").await
            }
            System::Raw => {
                for chunk in (0..count).step_by(50_000) {
                    exec(&self.raw_url, &peers::raw_preload(&queues.raw, (count - chunk).min(50_000))).await?;
                }
                exec(&self.raw_url, "vacuum analyze messages; vacuum analyze message_bodies").await
            }
            System::Pgmq | System::PgmqSql => {
                for chunk in (0..count).step_by(50_000) {
                    exec(&self.pgmq_url, &peers::pgmq_sql_preload((count - chunk).min(50_000))).await?;
                }
                exec(&self.pgmq_url, "vacuum analyze pgmq.q_bench").await
            }
            System::Rabbit => self.rabbit()?.preload(count, self.body.as_bytes()).await,
        }
    }

    /// W2: drains a preloaded queue, 4 consumers taking 100 at a time. Also returns skiplock's pull
    /// timings (for W5's comparison with a large backlog).
    /// With `carried`, each round also runs W2b (see `carried_round`), returned as a second row.
    async fn draining(
        &self,
        plan: &Plan,
        queues: &Queues,
        carried: bool,
    ) -> anyhow::Result<(Row, Option<Row>, Vec<Duration>)> {
        let mut runs: Vec<(System, Vec<Run>)> = System::ALL.iter().map(|s| (*s, vec![])).collect();
        let mut carried_runs = Vec::new();
        let mut pulls = Vec::new();
        for _ in 0..plan.rounds {
            for (system, done) in runs.iter_mut().filter(|(s, _)| self.present(*s)) {
                self.empty_queues().await?;
                self.preload(*system, queues, plan.preload).await?;
                let secs = plan.seconds;
                let run = match system {
                    System::Skiplock => {
                        let work = async {
                            let drained = self.api.drain(&queues.skiplock, 4, secs).await?;
                            pulls.extend(drained.pulls);
                            Ok((drained.messages, drained.seconds))
                        };
                        self.measure(*system, work).await?
                    }
                    System::Raw => {
                        let left = format!("select count(*) from messages where queue_id = '{}'", queues.raw);
                        let script = peers::raw_drain(&queues.raw);
                        let work = self.drain_with_pgbench(&self.raw, &script, plan.preload, &left);
                        self.measure(*system, work).await?
                    }
                    System::Pgmq => self.measure(*system, self.pgmq.drain(4, secs)).await?,
                    System::PgmqSql => {
                        let left = "select count(*) from pgmq.q_bench";
                        let work = self.drain_with_pgbench(&self.pgmq_sql, peers::PGMQ_SQL_DRAIN, plan.preload, left);
                        self.measure(*system, work).await?
                    }
                    System::Rabbit => self.measure(*system, self.rabbit()?.drain(4, 100, secs)).await?,
                };
                eprintln!("  W2: {} {:.0} msg/s", system.name(), run.rate());
                done.push(run);
            }
            if carried {
                carried_runs.push(self.carried_round(plan, queues).await?);
            }
        }
        let carried = carried.then(|| Row {
            workload: "W2b drain, pull 100 carrying the last batch's acks, 4 consumers",
            runs: vec![(System::Skiplock, carried_runs)],
        });
        Ok((Row { workload: "W2 drain, pull 100 + ack 100, 4 consumers", runs }, carried, pulls))
    }

    /// A round of W2b: the W2 drain with each batch's acks carried by the next pull (skiplock's
    /// extension). Its rounds follow W2's round of every system, so that a host slowing or speeding up
    /// during the run weighs on both alike.
    async fn carried_round(&self, plan: &Plan, queues: &Queues) -> anyhow::Result<Run> {
        self.empty_queues().await?;
        self.preload(System::Skiplock, queues, plan.preload).await?;
        let work = self.api.drain_carrying_acks(&queues.skiplock, 4, plan.seconds);
        let run = self.measure(System::Skiplock, work).await?;
        eprintln!("  W2b: skiplock (HTTP) {:.0} msg/s", run.rate());
        Ok(run)
    }

    /// W2o (W2f): the W2 drain of messages whose ordering (flow) keys go round 1,000 keys, skiplock only.
    /// Each round follows a round of skiplock's W2 (as W1k's follow W1's), so that the two are read
    /// seconds apart on a host whose load swings more between W2's rounds and W2o's than the keys may
    /// cost. W2f's keys have no limits: what it measures is what keeping count of them costs.
    async fn draining_keyed(&self, plan: &Plan, queues: &Queues, keys: Keys) -> anyhow::Result<[Row; 2]> {
        let (mut plain, mut ordered) = (vec![], vec![]);
        for _ in 0..plan.rounds {
            self.empty_queues().await?;
            self.preload(System::Skiplock, queues, plan.preload).await?;
            let work = async {
                let drained = self.api.drain(&queues.skiplock, 4, plan.seconds).await?;
                Ok((drained.messages, drained.seconds))
            };
            let unkeyed = self.measure(System::Skiplock, work).await?;
            self.empty_queues().await?;
            self.api.preload_keyed(&queues.skiplock, plan.preload, &self.body, DRAIN_KEYS, keys.field()).await?;
            exec(&self.skiplock_url, "vacuum analyze messages; vacuum analyze message_bodies").await?;
            let work = async {
                let drained = self.api.drain(&queues.skiplock, 4, plan.seconds).await?;
                Ok((drained.messages, drained.seconds))
            };
            let keyed = self.measure(System::Skiplock, work).await?;
            eprintln!(
                "  W2 beside {name}: {:.0} msg/s; {name} ({DRAIN_KEYS} keys): {:.0} msg/s ({:.2}x)",
                unkeyed.rate(),
                keyed.rate(),
                keyed.rate() / unkeyed.rate(),
                name = keys.name(),
            );
            plain.push(unkeyed);
            ordered.push(keyed);
        }
        Ok([
            Row { workload: keys.beside(), runs: vec![(System::Skiplock, plain)] },
            Row { workload: keys.workload(), runs: vec![(System::Skiplock, ordered)] },
        ])
    }

    /// W2o or W2f and the W2 beside it, added to `rows`; the ratio of their medians.
    async fn keyed_beside_plain(
        &self,
        plan: &Plan,
        queues: &Queues,
        keys: Keys,
        rows: &mut Vec<Row>,
    ) -> anyhow::Result<f64> {
        let [plain, keyed] = self.draining_keyed(plan, queues, keys).await?;
        let (keyed_rate, plain_rate) = (keyed.rate(System::Skiplock), plain.rate(System::Skiplock));
        rows.extend([plain, keyed]);
        Ok(keyed_rate.unwrap_or(0.0) / plain_rate.unwrap_or(0.0).max(1e-9))
    }

    /// The fairness figure of ordered delivery, on a queue of its own, which is emptied afterwards.
    async fn fairness(&self) -> anyhow::Result<crate::fairness::Fairness> {
        let queue = self.skiplock_queue("fairness").await?;
        let shape = crate::fairness::Shape::ISSUE;
        let fairness = crate::fairness::measure(&self.api, &queue, shape).await?;
        eprintln!(
            "  fairness: {} short keys' {} messages each all came in {} pulls of 100 ({} of the deep key's meanwhile)",
            shape.small_keys, shape.per_small, fairness.pulls, fairness.big_delivered
        );
        self.empty_queues().await?;
        Ok(fairness)
    }

    /// A pgbench drain of a queue preloaded with `preload` messages: as many claims of 100 as it takes
    /// (4 clients), timed; the messages are those gone from the queue (`left` counts what remains).
    async fn drain_with_pgbench(
        &self,
        pgbench: &Pgbench,
        script: &str,
        preload: u64,
        left: &str,
    ) -> anyhow::Result<(u64, f64)> {
        let seconds = pgbench.run_transactions(script, 4, preload.div_ceil(400)).await?;
        let remaining: i64 = sqlx::query_scalar(left).fetch_one(&mut connect(&pgbench.url).await?).await?;
        Ok((preload.saturating_sub(remaining as u64), seconds))
    }

    /// W5: the steady cycle (publish 100, pull 100, ack) on 4 clients, sampled per interval.
    async fn cycling(&self, plan: &Plan, queues: &Queues) -> anyhow::Result<Vec<(System, Vec<f64>)>> {
        let mut samples = Vec::new();
        let (n, every) = (plan.cycle_intervals, plan.cycle_interval);
        for system in [System::Skiplock, System::Pgmq, System::Rabbit] {
            if !self.present(system) {
                continue;
            }
            self.empty_queues().await?;
            let rates = match system {
                System::Skiplock => self.api.cycle(&queues.skiplock, 4, &self.body, n, every).await?,
                System::Pgmq => self.pgmq.cycle(4, n, every).await?,
                System::Rabbit => self.rabbit()?.cycle(4, 100, self.body.as_bytes(), n, every).await?,
                System::Raw | System::PgmqSql => unreachable!("not cycled"),
            };
            eprintln!("  W5 cycle: {} {:?}", system.name(), rates.iter().map(|r| r.round()).collect::<Vec<_>>());
            samples.push((system, rates));
        }
        Ok(samples)
    }

    /// W5 backlog: skiplock's W2 with `big_backlog` messages waiting, in as many rounds as W2 had, so
    /// that its median is set beside W2's median rather than one run beside three (single runs swing
    /// by ±15% on this kind of machine).
    async fn behind_backlog(&self, plan: &Plan, queues: &Queues) -> anyhow::Result<Backlogged> {
        let mut backlogged = Backlogged { rates: Vec::new(), pulls: Vec::new() };
        for _ in 0..plan.rounds {
            self.empty_queues().await?;
            self.preload(System::Skiplock, queues, plan.big_backlog).await?;
            // From a checkpoint, as the W2 runs it is set beside are.
            self.checkpoint().await?;
            let drained = self.api.drain(&queues.skiplock, 4, plan.seconds).await?;
            let rate = drained.messages as f64 / drained.seconds;
            eprintln!("  W5 backlog: {rate:.0} msg/s");
            backlogged.rates.push(rate);
            backlogged.pulls.extend(drained.pulls);
        }
        backlogged.pulls.sort();
        Ok(backlogged)
    }

    fn peak_rss_mib(&self) -> f64 {
        crate::setup::peak_rss_mib(self.server_pid)
    }
}

/// W5 backlog's rounds: the rate of each, and the pull timings of all.
struct Backlogged {
    rates: Vec<f64>,
    pulls: Vec<Duration>,
}

impl Backlogged {
    /// The median round's messages/s, as W2's figure is.
    fn rate(&self) -> f64 {
        median(self.rates.clone())
    }
}

/// W2o's and W2f's keys: message i of their preload carries key i % this.
const DRAIN_KEYS: u64 = 1_000;

/// The queues W8's publishes feed.
const FANNED_QUEUES: usize = 4;

/// How long W1k's W1 publishes, unmeasured, before its first round: at W1's rate, about a gigabyte of
/// WAL, PostgreSQL's default `max_wal_size`.
const WARM_UP_SECONDS: f64 = 10.0;

/// The keys of a keyed drain.
#[derive(Debug, Clone, Copy)]
enum Keys {
    Ordering,
    Flow,
}

impl Keys {
    fn field(self) -> &'static str {
        match self {
            Keys::Ordering => "ordering_key",
            Keys::Flow => "flow_control_key",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Keys::Ordering => "W2o",
            Keys::Flow => "W2f",
        }
    }

    fn beside(self) -> &'static str {
        match self {
            Keys::Ordering => "W2 beside W2o: the same drain without keys (skiplock only)",
            Keys::Flow => "W2 beside W2f: the same drain without keys (skiplock only)",
        }
    }

    fn workload(self) -> &'static str {
        match self {
            Keys::Ordering => "W2o drain, messages over 1,000 ordering keys, pull 100 + ack 100, 4 consumers",
            Keys::Flow => "W2f drain, messages over 1,000 flow keys without limits, pull 100 + ack 100, 4 consumers",
        }
    }
}

/// The queue each system works on.
struct Queues {
    skiplock: String,
    raw: String,
}

fn fmt_rate(rate: Option<f64>) -> String {
    rate.map_or("-".into(), |r| format!("{r:.0}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    }
}

pub async fn run(args: SuiteArgs) -> anyhow::Result<()> {
    let mut plan = Plan::new(args.quick);
    if let Some(rounds) = args.rounds {
        (plan.rounds, plan.publish_rounds) = (rounds, rounds);
    }
    let wanted = |w: &str| args.only.is_empty() || args.only.iter().any(|o| o.eq_ignore_ascii_case(w));
    let bench = Bench::start(args.systems.clone(), args.statements).await?;
    let (skiplock, raw) = bench.queue("bench").await?;
    let queues = Queues { skiplock, raw };
    let mut rows = Vec::new();
    if wanted("w1") {
        rows.push(bench.publishing("W1 publish, batches of 100, 4 clients", 4, 100, &plan, &queues).await?);
    }
    if wanted("w1k") && bench.present(System::Skiplock) {
        rows.extend(bench.keyed_publishing(&plan, &queues).await?);
    }
    if wanted("w3") {
        rows.push(bench.publishing("W3 single publish, 64 clients", 64, 1, &plan, &queues).await?);
    }
    if wanted("w8") && bench.present(System::Skiplock) {
        rows.extend(bench.topic_publishing(&plan).await?);
    }
    if (wanted("w8") || wanted("w8f")) && bench.present(System::Skiplock) {
        rows.extend(bench.fan_out_draining(&plan).await?);
    }
    let peak_rss_mib = bench.peak_rss_mib();
    let mut empty_pulls = Vec::new();
    if wanted("w2") || wanted("w2b") || wanted("w5") {
        let carried = (wanted("w2") || wanted("w2b")) && bench.present(System::Skiplock);
        let (row, carried, pulls) = bench.draining(&plan, &queues, carried).await?;
        rows.push(row);
        rows.extend(carried);
        empty_pulls = pulls;
    }
    let ordered_rows = if wanted("w2o") && bench.present(System::Skiplock) {
        Some(bench.keyed_beside_plain(&plan, &queues, Keys::Ordering, &mut rows).await?)
    } else {
        None
    };
    let flow_rows = if wanted("w2f") && bench.present(System::Skiplock) {
        Some(bench.keyed_beside_plain(&plan, &queues, Keys::Flow, &mut rows).await?)
    } else {
        None
    };
    let fairness = if (wanted("w2o") || wanted("fairness")) && bench.present(System::Skiplock) {
        Some(bench.fairness().await?)
    } else {
        None
    };
    let (cycle, backlog) = if wanted("w5") {
        (bench.cycling(&plan, &queues).await?, Some(bench.behind_backlog(&plan, &queues).await?))
    } else {
        (vec![], None)
    };
    let latency = if wanted("w4") {
        // On the same cluster, with a server of its own (all roles) on a fresh database. What earlier
        // workloads left behind (the 1,000,000-message backlog, gigabytes of dirty pages) is emptied and
        // checkpointed first: W4 measures latency at 1,000 messages/s, not the flush of W5's writes.
        bench.empty_queues().await?;
        bench.checkpoint().await?;
        std::env::set_var("DATABASE_URL", bench.pg.url("postgres"));
        Some(crate::latency::measure(1000, plan.latency_seconds, Default::default()).await?)
    } else {
        None
    };
    let long_poll = if wanted("w7") {
        // As W4: emptied and checkpointed first, on a server of its own.
        bench.empty_queues().await?;
        bench.checkpoint().await?;
        std::env::set_var("DATABASE_URL", bench.pg.url("postgres"));
        Some(crate::long_poll::w7(1000, 5, plan.latency_seconds, 16).await?)
    } else {
        None
    };
    if args.statements {
        print_statements(&bench.skiplock_url).await?;
    }
    if let Some(rabbit) = bench.rabbit {
        rabbit.close().await?;
    }

    // The report.
    let date = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC");
    let machine = machine_description();
    println!(
        "\nskiplock bench ({}), {date}, {machine}; 1 KiB messages, {} s per run, medians of {} round(s) (W1, W3) and {} (W2)\n",
        if args.quick { "quick" } else { "full" },
        plan.seconds,
        plan.publish_rounds,
        plan.rounds
    );
    println!("| workload | skiplock (HTTP) | raw SQL ceiling | pgmq (client) | pgmq (SQL only) | RabbitMQ | skiplock / ceiling | skiplock / pgmq | skiplock / pgmq SQL |");
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for r in &rows {
        let s = r.rate(System::Skiplock);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            fmt_rate(s),
            fmt_rate(r.rate(System::Raw)),
            fmt_rate(r.rate(System::Pgmq)),
            fmt_rate(r.rate(System::PgmqSql)),
            fmt_rate(r.rate(System::Rabbit)),
            ratio(s, r.rate(System::Raw)),
            ratio(s, r.rate(System::Pgmq)),
            ratio(s, r.rate(System::PgmqSql)),
        );
    }
    println!("\nCosts per message (medians): WAL bytes; CPU µs of the server (skiplock or the broker) / PostgreSQL / the load generator\n");
    println!("| workload | system | msg/s | WAL bytes | CPU µs server | CPU µs PostgreSQL | CPU µs client |");
    println!("|---|---|--:|--:|--:|--:|--:|");
    for r in &rows {
        for system in System::ALL {
            if let (Some(rate), Some([wal, server, postgres, client])) = (r.rate(system), r.costs(system)) {
                println!(
                    "| {} | {} | {rate:.0} | {wal:.0} | {server:.1} | {postgres:.1} | {client:.1} |",
                    r.workload,
                    system.name()
                );
            }
        }
    }
    for (system, rates) in &cycle {
        let first = rates.first().copied().unwrap_or(0.0).max(1.0);
        let worst = rates.iter().copied().fold(f64::MAX, f64::min);
        println!(
            "\nW5 cycle (publish 100, pull 100, ack; 4 clients), {}: {:?} msg/s per {} s; worst / first {:.2}, median {:.0}",
            system.name(),
            rates.iter().map(|r| r.round()).collect::<Vec<_>>(),
            plan.cycle_interval,
            worst / first,
            median(rates.clone())
        );
    }
    let cycle_of = |s: System| cycle.iter().find(|(x, _)| *x == s).map(|(_, r)| r.clone());
    if let (Some(sk), Some(pq)) = (cycle_of(System::Skiplock), cycle_of(System::Pgmq)) {
        let per_interval: Vec<String> = sk.iter().zip(&pq).map(|(a, b)| format!("{:.2}", a / b.max(1.0))).collect();
        println!("W5 cycle, skiplock / pgmq per interval: {}", per_interval.join(", "));
    }
    if let Some(ratio) = ordered_rows {
        println!("\nW2o against the W2 beside it (skiplock, medians): {ratio:.2}x (target: at least 0.7x)");
    }
    if let Some(ratio) = flow_rows {
        println!("W2f against the W2 beside it (skiplock, medians): {ratio:.2}x (target: at least 0.8x)");
    }
    if let Some(f) = &fairness {
        println!(
            "Ordered delivery's fairness: {} messages of one key published first, then {} keys of {} messages; one consumer pulling 100 and acking: every short key's messages had all come after {} pulls (target: at most 12; {} of the deep key's came meanwhile, the first pull brought {} short-key messages of {}); every key's order held",
            f.shape.big, f.shape.small_keys, f.shape.per_small, f.pulls, f.big_delivered, f.first_pull.1, f.first_pull.0
        );
    }
    let w2_empty = rows.iter().find(|r| r.workload.starts_with("W2 drain")).and_then(|r| r.rate(System::Skiplock));
    empty_pulls.sort();
    if let Some(backlog) = &backlog {
        let (pulls, rate) = (&backlog.pulls, backlog.rate());
        println!(
            "W5 backlog: W2 with {} messages waiting: {rate:.0} msg/s ({} of W2's {}); pull of 100 p50 / p99: {:.1} / {:.1} ms, against {:.1} / {:.1} ms in W2",
            plan.big_backlog,
            ratio(Some(rate), w2_empty),
            fmt_rate(w2_empty),
            percentile_ms(pulls, 50.0),
            percentile_ms(pulls, 99.0),
            percentile_ms(&empty_pulls, 50.0),
            percentile_ms(&empty_pulls, 99.0),
        );
    }
    if let Some(l) = &latency {
        println!(
            "W4 publish -> webhook at {}/s, max_wait_time_ms = 0: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; not arrived {}, duplicates {}",
            l["rate"], l["p50_ms"].as_f64().unwrap_or_default(), l["p99_ms"].as_f64().unwrap_or_default(),
            l["max_ms"].as_f64().unwrap_or_default(), l["not_arrived"], l["duplicates"]
        );
    }
    if let Some(l) = &long_poll {
        println!(
            "W7 publish -> long-poll receive at {}/s, {} pullers waiting: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; not arrived {}, duplicates {}",
            l["rate"], l["pullers"], l["p50_ms"].as_f64().unwrap_or_default(), l["p99_ms"].as_f64().unwrap_or_default(),
            l["max_ms"].as_f64().unwrap_or_default(), l["not_arrived"], l["duplicates"]
        );
    }
    if wanted("w1") || wanted("w3") {
        println!("skiplock peak RSS during W1-W3: {peak_rss_mib:.0} MiB");
    }

    let result = json!({
        "date": date.to_string(), "machine": machine, "quick": args.quick, "seconds": plan.seconds, "rounds": plan.rounds, "publish_rounds": plan.publish_rounds,
        "rows": rows.iter().map(|r| json!({
            "workload": r.workload,
            "systems": System::ALL.iter().filter_map(|s| {
                let [wal, server, postgres, client] = r.costs(*s)?;
                Some((s.key().to_owned(), json!({
                    "msg_per_s": r.rate(*s), "runs": r.runs(*s).map(|runs| runs.iter().map(Run::rate).collect::<Vec<_>>()),
                    "wal_bytes_per_msg": wal, "cpu_us_per_msg": {"server": server, "postgres": postgres, "client": client},
                })))
            }).collect::<serde_json::Map<_, _>>(),
        })).collect::<Vec<_>>(),
        "w5_cycle": {"interval_seconds": plan.cycle_interval,
            "systems": cycle.iter().map(|(s, r)| (s.key().to_owned(), json!(r))).collect::<serde_json::Map<_, _>>()},
        "w5_backlog": backlog.as_ref().map(|b| {
            json!({"messages_waiting": plan.big_backlog, "msg_per_s": b.rate(), "runs": b.rates, "w2_msg_per_s": w2_empty,
                   "pull_p50_ms": percentile_ms(&b.pulls, 50.0), "pull_p99_ms": crate::setup::percentile_ms(&b.pulls, 99.0),
                   "w2_pull_p50_ms": percentile_ms(&empty_pulls, 50.0), "w2_pull_p99_ms": crate::setup::percentile_ms(&empty_pulls, 99.0)})
        }),
        "w2o": ordered_rows.map(|ratio| json!({"ordering_keys": DRAIN_KEYS, "w2o_over_w2_beside_it": ratio})),
        "w2f": flow_rows.map(|ratio| json!({"flow_keys": DRAIN_KEYS, "w2f_over_w2_beside_it": ratio})),
        "fairness": fairness.as_ref().map(crate::fairness::Fairness::json),
        "w4_latency": latency,
        "w7_long_poll": long_poll,
        "peak_rss_mib": peak_rss_mib,
    });
    crate::setup::write_result("bench", &result)
}

/// skiplock's statements by the time PostgreSQL spent on them (`--statements`).
async fn print_statements(url: &str) -> anyhow::Result<()> {
    let rows: Vec<(String, i64, f64, f64, i64, String)> = sqlx::query_as(
        "select d.datname::text, calls, total_exec_time, total_plan_time, rows,
                regexp_replace(query, '\\s+', ' ', 'g')
         from pg_stat_statements s join pg_database d on d.oid = s.dbid
         where d.datname in ('skiplock', 'pgmqbench') order by total_exec_time desc limit 16",
    )
    .fetch_all(&mut connect(url).await?)
    .await?;
    println!(
        "
skiplock's and pgmq's statements by time spent in PostgreSQL (pg_stat_statements)
"
    );
    println!("| database | total ms | calls | ms per call | planning ms per call | rows per call | statement |");
    println!("|---|--:|--:|--:|--:|--:|---|");
    for (database, calls, total_ms, plan_ms, rows, query) in rows {
        let per = |v: f64| v / calls.max(1) as f64;
        let query: String = query.chars().take(160).collect();
        println!(
            "| {database} | {total_ms:.0} | {calls} | {:.3} | {:.3} | {:.1} | `{query}` |",
            per(total_ms),
            per(plan_ms),
            per(rows as f64)
        );
    }
    Ok(())
}

/// Cores, memory and CPU model, for the record beside the figures.
fn machine_description() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model =
        cpuinfo.lines().find_map(|l| l.strip_prefix("model name")).map(|v| v.trim_start_matches([' ', '\t', ':']));
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    format!("{cores} cores ({}), {mem_gib:.0} GiB", model.unwrap_or("unknown CPU"))
}
