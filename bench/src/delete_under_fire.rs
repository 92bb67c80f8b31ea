//! W12 delete under fire: an account of 100,000 messages over 100 queues is deleted while a neighbour
//! publishes single messages at 1,000 a second through another node; the node working on the deletion is
//! SIGKILLed part-way, and the other node finishes it once the dead node's hold runs out. The figures:
//! the neighbour's publish p99 before and during the deletion, how long the deletion took, and checks that
//! every row of the deleted account is gone and every message the neighbour was answered for is there.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::json;
use sqlx::{Connection, PgConnection};

use crate::setup::{self, percentile_ms, Env};

#[derive(clap::Args, Debug, Clone)]
pub struct DeleteUnderFireArgs {
    #[arg(long, default_value_t = 100)]
    pub queues: usize,
    #[arg(long, default_value_t = 1_000)]
    pub per_queue: usize,
    /// The neighbour's publishes a second.
    #[arg(long, default_value_t = 1_000)]
    pub rate: u32,
    /// Seconds of the neighbour's publishing measured before the deletion starts.
    #[arg(long, default_value_t = 10)]
    pub before_seconds: u64,
}

pub async fn run(args: DeleteUnderFireArgs) -> anyhow::Result<()> {
    let mut env = Env::start(&[]).await?;
    let (victim, victim_token) = setup::create_account(&env.database_url, "departing").await?;
    println!("W12 delete under fire: filling {} queues with {} messages each", args.queues, args.per_queue);
    for q in 0..args.queues {
        let queue =
            env.queue_with_consumer((&victim, &victim_token), &format!("q{q}"), json!({"type": "http_pull"})).await?;
        let url = format!("{}/client/v4/accounts/{victim}/queues/{queue}/messages/batch", env.base);
        for batch in 0..args.per_queue.div_ceil(100) {
            let n = (args.per_queue - batch * 100).min(100);
            let body = json!({ "messages": vec![json!({"body": "x".repeat(256), "content_type": "text"}); n] });
            let resp = env.client.post(&url).bearer_auth(&victim_token).json(&body).send().await?;
            if !resp.status().is_success() {
                bail!("filling the account: {}", resp.text().await?);
            }
        }
    }
    let (mut other, other_base) = setup::serve(&env.database_url, &[], &[]).await?;
    let other_pid = other.id().context("the second node's pid")?;
    let neighbour =
        env.queue_with_consumer((&env.account, &env.token), "neighbour", json!({"type": "http_pull"})).await?;
    let publish_url = format!("{other_base}/client/v4/accounts/{}/queues/{neighbour}/messages", env.account);
    let mut db = PgConnection::connect(&env.database_url).await?;

    // The neighbour's publishes through the second node: alone first, then through the deletion.
    let publisher = Publisher {
        client: env.client.clone(),
        url: publish_url,
        token: env.token.clone(),
        rate: args.rate,
        times: Arc::default(),
    };
    let before = publisher.run_for(Duration::from_secs(args.before_seconds)).await?;
    // The second node is paused while the deletion starts, so that the first one takes it: that is the node
    // then killed.
    signal(other_pid, "-STOP").await?;
    sqlx::query(
        "update accounts set status = 'deleting', status_changed_at = now(), deletion_started_at = now()
         where id = $1::uuid",
    )
    .bind(&victim)
    .execute(&mut db)
    .await?;
    sqlx::query("delete from api_tokens where account_id = $1::uuid").bind(&victim).execute(&mut db).await?;
    let started = Instant::now();
    while deleted_messages(&mut db, &victim).await? == 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    signal(other_pid, "-CONT").await?;
    let total = (args.queues * args.per_queue) as i64;
    let during = tokio::spawn({
        let publisher = publisher.clone();
        async move { publisher.run_for(Duration::from_secs(3_600)).await }
    });
    // SIGKILL the working node a third of the way through.
    while deleted_messages(&mut db, &victim).await? < total / 3 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    env.server.start_kill()?;
    let killed_at = started.elapsed();
    let killed_after = deleted_messages(&mut db, &victim).await?;
    println!("  killed the working node after {killed_at:.1?} ({killed_after} of {total} messages deleted)");
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let status: String = sqlx::query_scalar("select status from accounts where id = $1::uuid")
            .bind(&victim)
            .fetch_one(&mut db)
            .await?;
        if status == "deleted" {
            break;
        }
        if Instant::now() > deadline {
            bail!("the deletion did not finish within 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = started.elapsed();
    during.abort();
    let during = publisher.last_times();
    let left: i64 = sqlx::query_scalar(
        "select (select count(*) from queues where account_id = $1::uuid)
              + (select count(*) from consumers where account_id = $1::uuid)
              + (select count(*) from api_tokens where account_id = $1::uuid)
              + (select count(*) from messages m where not exists (select 1 from queues q where q.id = m.queue_id))",
    )
    .bind(&victim)
    .fetch_one(&mut db)
    .await?;
    let kept: i64 = sqlx::query_scalar("select count(*) from messages where queue_id = $1::uuid")
        .bind(&neighbour)
        .fetch_one(&mut db)
        .await?;
    let answered = before.len() as i64 + during.len() as i64;
    let (p99_before, p99_during) = (p99(&before), p99(&during));
    println!(
        "  deleted {total} messages over {} queues in {took:.1?}; rows left: {left}; the neighbour's messages: \
         {kept} stored of {answered} answered",
        args.queues
    );
    println!(
        "  the neighbour's publish p99: {p99_before:.1} ms before, {p99_during:.1} ms during ({:.2}x)",
        p99_during / p99_before
    );
    setup::write_result(
        "delete-under-fire",
        &json!({
            "queues": args.queues, "messages": total, "took_seconds": took.as_secs_f64(),
            "killed_after_seconds": killed_at.as_secs_f64(), "killed_after_messages": killed_after,
            "rows_left": left, "neighbour_stored": kept, "neighbour_answered": answered,
            "neighbour_p99_ms_before": p99_before, "neighbour_p99_ms_during": p99_during,
        }),
    )?;
    other.kill().await.ok();
    if left != 0 || kept < answered {
        bail!("rows of the deleted account are left ({left}) or the neighbour lost messages ({kept} of {answered})");
    }
    env.finish().await
}

async fn deleted_messages(db: &mut PgConnection, account: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar("select deleted_messages from accounts where id = $1::uuid").bind(account).fetch_one(db).await
}

fn p99(times: &[Duration]) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort();
    percentile_ms(&sorted, 99.0)
}

async fn signal(pid: u32, which: &str) -> anyhow::Result<()> {
    let status = tokio::process::Command::new("kill").args([which, &pid.to_string()]).status().await?;
    if !status.success() {
        bail!("kill {which} {pid} failed");
    }
    Ok(())
}

/// Single publishes at a steady rate, each timed into `times`, where a run stopped from outside still
/// leaves what it measured.
#[derive(Clone)]
struct Publisher {
    client: reqwest::Client,
    url: String,
    token: String,
    rate: u32,
    times: Arc<Mutex<Vec<Duration>>>,
}

impl Publisher {
    async fn run_for(&self, length: Duration) -> anyhow::Result<Vec<Duration>> {
        self.times.lock().expect("times lock").clear();
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(self.rate)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let end = Instant::now() + length;
        let mut inflight = tokio::task::JoinSet::new();
        while Instant::now() < end {
            tick.tick().await;
            let (client, url, token) = (self.client.clone(), self.url.clone(), self.token.clone());
            let times = self.times.clone();
            inflight.spawn(async move {
                let sent = Instant::now();
                let resp = client
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&json!({"body": "n", "content_type": "text"}))
                    .send()
                    .await?;
                if !resp.status().is_success() {
                    bail!("the neighbour's publish answered {}", resp.status());
                }
                let took = sent.elapsed();
                times.lock().expect("times lock").push(took);
                anyhow::Ok(took)
            });
            while let Some(done) = inflight.try_join_next() {
                done??;
            }
        }
        while let Some(done) = inflight.join_next().await {
            done??;
        }
        Ok(self.last_times())
    }

    fn last_times(&self) -> Vec<Duration> {
        self.times.lock().expect("times lock").clone()
    }
}
