//! The crash suite's fan-out mode: one queue with three consumers, two pulling (each pull naming its
//! `consumer_id`) and a webhook one whose receiver misbehaves as in the webhook mode, each with a
//! dead-letter queue of its own, while the server is SIGKILLed and PostgreSQL restarted as in the other
//! modes. Every consumer keeps its own history, which `chaos::check` judges as one of its kind's: each gets
//! every acknowledged publish and acks it (a copy deleted before its consumer resolved it is lost to that
//! consumer). After the final drain, the database must hold nothing of the queue: no copy in it, its lanes
//! or the dead-letter queues, and, once the rotation has taken the young generations the shared bodies
//! live in, no body.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::chaos::{self, ChaosArgs, Client, FaultyReceiver, History, Mode, Report};

const PULL_CONSUMERS: usize = 2;
/// How long the rotation may take to truncate the generations holding the drained queue's bodies: a
/// generation is current for 10 s, then truncated at the next turn (1 s) that finds it empty.
const BODIES_GONE_WITHIN: Duration = Duration::from_secs(60);

/// One of the queue's consumers and what it saw.
struct Consumer {
    /// Its name in the report.
    label: String,
    /// `Pull` or `Webhook`: how its history is judged.
    kind: Mode,
    consumer_id: String,
    dead_letter_queue: String,
    history: Arc<Mutex<History>>,
}

pub(crate) async fn run(args: ChaosArgs) -> anyhow::Result<()> {
    let (mut cluster, client) = chaos::start(args.mode).await?;
    let queue =
        client.post("queues", &json!({"queue_name": "chaos"})).await.map_err(|_| anyhow::anyhow!("create queue"))?;
    let queue = queue["queue_id"].as_str().unwrap_or_default().to_owned();
    let receiver = FaultyReceiver::start().await?;
    let mut consumers = Vec::new();
    for n in 1..=PULL_CONSUMERS {
        let label = format!("pull {n}");
        let dead_letter_queue = format!("chaos-dlq-pull-{n}");
        let settings = json!({"type": "http_pull", "dead_letter_queue": dead_letter_queue,
                              "settings": {"max_retries": chaos::MAX_RETRIES}});
        consumers.push(add_consumer(&client, &queue, label, Mode::Pull, dead_letter_queue, settings).await?);
    }
    let dead_letter_queue = "chaos-dlq-webhook".to_owned();
    let settings = json!({
        "type": "webhook", "url": format!("http://127.0.0.1:{}/hook", receiver.port),
        "dead_letter_queue": dead_letter_queue,
        "settings": {"max_retries": chaos::MAX_RETRIES, "max_wait_time_ms": 100, "batch_size": 50, "max_concurrency": 8},
    });
    consumers.push(add_consumer(&client, &queue, "webhook".into(), Mode::Webhook, dead_letter_queue, settings).await?);

    // The producers' record of what was published, which every consumer's history gets a copy of.
    let published: Arc<Mutex<History>> = Arc::default();
    let stop = CancellationToken::new();
    let mut load = tokio::task::JoinSet::new();
    let pause = chaos::producer_pause(&args);
    for p in 0..args.producers {
        load.spawn(chaos::produce(client.clone(), queue.clone(), p, published.clone(), stop.clone(), pause));
    }
    for c in consumers.iter().filter(|c| c.kind == Mode::Pull) {
        for _ in 0..args.consumers {
            load.spawn(chaos::consume_as(
                client.clone(),
                queue.clone(),
                Some(c.consumer_id.clone()),
                c.history.clone(),
                stop.clone(),
                chaos::VISIBILITY_MS,
                chaos::Consumer::PLAIN,
            ));
        }
    }

    let (kills, pg_restarts) = cluster.kill_repeatedly(&args, Some(&receiver)).await?;
    stop.cancel();
    while load.join_next().await.is_some() {}

    // Drain: every consumer's copies still stored are delivered once more and acked, its dead letters too.
    let mut dead_letter_ids = Vec::new();
    for c in &consumers {
        let id = queue_id(&client, &c.dead_letter_queue).await?;
        let _ = client.post(&format!("queues/{id}/consumers"), &json!({"type": "http_pull"})).await;
        dead_letter_ids.push(id);
    }
    receiver.behave_from_now_on();
    let drain_deadline = Instant::now() + Duration::from_secs(600);
    loop {
        // The queue's backlog is its furthest-behind consumer's.
        let mut left = chaos::backlog(&client, &queue).await;
        for id in &dead_letter_ids {
            left = left.saturating_add(chaos::backlog(&client, id).await);
        }
        if left == 0 {
            break;
        }
        if Instant::now() > drain_deadline {
            bail!("{left} messages could not be drained");
        }
        for (c, dead_letters) in consumers.iter().zip(&dead_letter_ids) {
            if c.kind == Mode::Pull {
                chaos::drain_once_as(&client, &queue, Some(&c.consumer_id), &c.history, false).await;
            }
            chaos::drain_once(&client, dead_letters, &c.history, true).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let dead_letters: Vec<&str> = dead_letter_ids.iter().map(String::as_str).collect();
    let metered = chaos::metered(&cluster.url, &queue, &dead_letters).await?;
    let leftovers = leftovers(&cluster.url, &queue, &dead_letters).await?;
    cluster.kill().await;

    let webhook = consumers.iter().find(|c| c.kind == Mode::Webhook).context("the webhook consumer")?;
    receiver.record_into(&mut webhook.history.lock().unwrap());
    let published = published.lock().unwrap();
    let mut histories = Vec::new();
    for c in &consumers {
        let mut h = c.history.lock().unwrap();
        h.published = published.published.clone();
        h.delays_ms = published.delays_ms.clone();
        histories.push(h);
    }
    let reports: Vec<(String, Report)> = consumers
        .iter()
        .zip(&histories)
        .map(|(c, h)| (c.label.clone(), chaos::check(h, c.kind, kills, pg_restarts)))
        .collect();
    let histories: Vec<&History> = histories.iter().map(|h| &**h).collect();
    let verdict = Verdict { reports, metering: chaos::metering(&histories, &metered), leftovers };
    println!("{verdict}");
    if !verdict.passed() {
        bail!("the chaos checker found violations");
    }
    Ok(())
}

async fn add_consumer(
    client: &Client,
    queue: &str,
    label: String,
    kind: Mode,
    dead_letter_queue: String,
    settings: Value,
) -> anyhow::Result<Consumer> {
    let made = client
        .post(&format!("queues/{queue}/consumers"), &settings)
        .await
        .map_err(|_| anyhow::anyhow!("create the {label} consumer"))?;
    let consumer_id = made["consumer_id"].as_str().context("consumer_id")?.to_owned();
    Ok(Consumer { label, kind, consumer_id, dead_letter_queue, history: Arc::default() })
}

async fn queue_id(client: &Client, name: &str) -> anyhow::Result<String> {
    let resp = client.http.get(format!("{}/queues?name={name}", client.base)).bearer_auth(&client.token).send().await?;
    let body: Value = resp.json().await?;
    Ok(body["result"][0]["queue_id"].as_str().with_context(|| format!("queue {name}"))?.to_owned())
}

/// What the database holds of the queue after the drain.
struct Leftovers {
    /// The hidden queues its second and further consumers read.
    lanes: i64,
    /// Messages in the queue, its lanes and the dead-letter queues.
    copies: i64,
    /// Bodies stored as the drain ended (shared ones wait for their generation), those still stored once
    /// the rotation had `BODIES_GONE_WITHIN` to take them, and how long that took.
    bodies_drained: i64,
    bodies: i64,
    waited: Duration,
}

impl Leftovers {
    fn violations(&self) -> Vec<String> {
        let mut found = Vec::new();
        if self.lanes != PULL_CONSUMERS as i64 {
            found.push(format!("the queue has {} lanes for its {} consumers", self.lanes, PULL_CONSUMERS + 1));
        }
        if self.copies != 0 {
            found.push(format!("{} messages stored after every consumer acked everything", self.copies));
        }
        if self.bodies != 0 {
            found.push(format!(
                "{} message bodies stored {} s after every consumer acked everything",
                self.bodies,
                self.waited.as_secs()
            ));
        }
        found
    }
}

/// Reads the queue's leftovers, waiting for the rotation to take the shared bodies. The cluster holds
/// this run's account alone, so every body in `message_bodies` is one of the queue's messages (a lane's
/// copy moved to the old generation gets a body under the copy's own id, not the published one: hence
/// the whole table rather than the ids the consumers were given).
async fn leftovers(url: &str, queue: &str, dead_letters: &[&str]) -> anyhow::Result<Leftovers> {
    let pool = sqlx::PgPool::connect(url).await?;
    let lanes: i64 = sqlx::query_scalar("select count(*) from queues where parent_queue_id = $1::uuid")
        .bind(queue)
        .fetch_one(&pool)
        .await?;
    let copies: i64 = sqlx::query_scalar(
        "select count(*) from messages
         where queue_id = $1::uuid or queue_id = any($2::text[]::uuid[])
            or queue_id in (select id from queues where parent_queue_id = $1::uuid)",
    )
    .bind(queue)
    .bind(dead_letters)
    .fetch_one(&pool)
    .await?;
    let started = Instant::now();
    let mut bodies_drained = None;
    let bodies = loop {
        let bodies: i64 = sqlx::query_scalar("select count(*) from message_bodies").fetch_one(&pool).await?;
        bodies_drained.get_or_insert(bodies);
        if bodies == 0 || started.elapsed() > BODIES_GONE_WITHIN {
            break bodies;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    pool.close().await;
    Ok(Leftovers { lanes, copies, bodies_drained: bodies_drained.unwrap_or(bodies), bodies, waited: started.elapsed() })
}

/// Every consumer's report, the queue's metering against all of them, and what the database kept.
struct Verdict {
    reports: Vec<(String, Report)>,
    metering: chaos::Metering,
    leftovers: Leftovers,
}

impl Verdict {
    fn passed(&self) -> bool {
        self.reports.iter().all(|(_, r)| r.passed())
            && self.metering.violations().is_empty()
            && self.leftovers.violations().is_empty()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| chaos (FanOut) | consumer | {}", chaos::COLUMNS)?;
        writeln!(f, "|---|---|{}", chaos::ALIGNMENT)?;
        for (label, report) in &self.reports {
            writeln!(f, "| result | {label} | {}", report.cells())?;
        }
        write!(f, "{}", self.metering)?;
        let l = &self.leftovers;
        writeln!(
            f,
            "storage: after the drain {} messages in the queue, its {} lanes and the dead-letter queues, and {} bodies; \
             {} bodies {} ms later",
            l.copies,
            l.lanes,
            l.bodies_drained,
            l.bodies,
            l.waited.as_millis()
        )?;
        for violation in l.violations() {
            writeln!(f, "storage violation: {violation}")?;
        }
        for (label, report) in &self.reports {
            report.write_details(f, &format!("{label}: "))?;
        }
        Ok(())
    }
}
