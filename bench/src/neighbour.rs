//! W6 noisy neighbour: a quiet account publishes single messages and pulls them (acks carried by the
//! next pull) at 100 messages a second, first alone and then beside a busy account publishing as W1
//! does, as fast as it is answered (batches of 100, 4 clients), on the same node; the figure is the quiet account's publish and
//! pull p99, beside and alone. The service runs with its default publish rate limit per account
//! unless `--publish-rate-limit` says otherwise.

use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{json, Value};

use crate::api_load::Api;
use crate::http::{Connection, Request};
use crate::setup::{self, percentile_ms, Env};

#[derive(clap::Args, Debug, Clone)]
pub struct NeighbourArgs {
    /// How long each phase (alone, beside the busy account) is measured, after a warm-up.
    #[arg(long, default_value_t = 15)]
    pub seconds: u64,
    /// Messages a second the busy account publishes (default: as fast as it is answered).
    #[arg(long)]
    pub busy_rate: Option<f64>,
    /// The service's publish rate limit per account (`SKIPLOCK_PUBLISH_RATE_LIMIT`; 0: none). The
    /// default is the hosted-deployment example's (docs/operations.md); the service itself sets none.
    #[arg(long, default_value_t = 20_000)]
    pub publish_rate_limit: u32,
}

const RATE: u32 = 100;
const WARM_UP: Duration = Duration::from_secs(3);

/// The quiet account's request times, in one phase.
#[derive(Default)]
struct Times {
    publishes: Vec<Duration>,
    pulls: Vec<Duration>,
    received: u64,
}

pub async fn run(args: NeighbourArgs) -> anyhow::Result<()> {
    let env = Env::start(&[("SKIPLOCK_PUBLISH_RATE_LIMIT", args.publish_rate_limit.to_string())]).await?;
    let host = env.base.trim_start_matches("http://").to_owned();
    let (account, token) = setup::create_account(&env.database_url, "quiet").await?;
    let queue = env.queue_with_consumer((&account, &token), "quiet", json!({"type": "http_pull"})).await?;
    let busy_queue = env.queue_with_consumer((&env.account, &env.token), "busy", json!({"type": "http_pull"})).await?;
    let quiet = Quiet { host: host.clone(), account, token, queue };
    let busy = Api { host, account: env.account.clone(), token: env.token.clone() };
    let phase = Duration::from_secs(args.seconds);

    let alone = quiet.measure(phase).await?;
    let seconds = (WARM_UP + phase).as_secs_f64();
    let body = "x".repeat(1024);
    let (beside, (busy_messages, busy_seconds)) =
        tokio::try_join!(quiet.measure(phase), busy.publish(&busy_queue, (4, 100), &body, seconds, args.busy_rate))?;
    let ms = |d: &[Duration], p: f64| {
        let mut d = d.to_vec();
        d.sort();
        percentile_ms(&d, p)
    };
    let row = |name: &str, t: &Times| {
        format!(
            "| {name} | {:.1} / {:.1} ms | {:.1} / {:.1} ms | {} |",
            ms(&t.publishes, 50.0),
            ms(&t.publishes, 99.0),
            ms(&t.pulls, 50.0),
            ms(&t.pulls, 99.0),
            t.received
        )
    };
    println!("| quiet account, 100 msg/s | publish p50 / p99 | pull p50 / p99 | received |");
    println!("|---|--:|--:|--:|");
    println!("{}", row("alone", &alone));
    println!("{}", row("beside a busy account publishing as fast as it is let", &beside));
    let busy_rate = busy_messages as f64 / busy_seconds;
    let ratio = |f: fn(&Times) -> &Vec<Duration>| ms(f(&beside), 99.0) / ms(f(&alone), 99.0).max(f64::EPSILON);
    let (publish_ratio, pull_ratio) = (ratio(|t| &t.publishes), ratio(|t| &t.pulls));
    println!(
        "busy account: {busy_rate:.0} msg/s; p99 beside / alone: publish {publish_ratio:.2}x, pull {pull_ratio:.2}x"
    );
    let summary = |t: &Times| {
        json!({
            "publish_p50_ms": ms(&t.publishes, 50.0), "publish_p99_ms": ms(&t.publishes, 99.0),
            "pull_p50_ms": ms(&t.pulls, 50.0), "pull_p99_ms": ms(&t.pulls, 99.0), "received": t.received,
        })
    };
    let result = json!({
        "workload": "W6 noisy neighbour: a quiet account at 100 msg/s beside a busy one at full W1 speed",
        "seconds": args.seconds, "alone": summary(&alone), "beside": summary(&beside),
        "busy_rate": args.busy_rate, "publish_rate_limit": args.publish_rate_limit,
        "busy_messages_per_second": busy_rate,
        "publish_p99_ratio": publish_ratio, "pull_p99_ratio": pull_ratio,
        "at": chrono::Utc::now().to_rfc3339(),
    });
    env.finish().await?;
    setup::write_result("neighbour", &result)
}

struct Quiet {
    host: String,
    account: String,
    token: String,
    queue: String,
}

impl Quiet {
    fn request(&self, path: &str, body: &Value) -> Request {
        let path = format!("/client/v4/accounts/{}/queues/{}/messages{path}", self.account, self.queue);
        Request::post(&self.host, &path, &self.token, body.to_string().as_bytes())
    }

    /// Publishes RATE single messages a second and pulls every 100 ms (acks carried by the next pull), for
    /// a warm-up and then `phase`, timing the requests of `phase`.
    async fn measure(&self, phase: Duration) -> anyhow::Result<Times> {
        let started = Instant::now();
        let (counted, end) = (started + WARM_UP, started + WARM_UP + phase);
        let publisher = async {
            let mut connection = Connection::open(&self.host).await?;
            let request = self.request("", &json!({"body": "quiet", "content_type": "text"}));
            let mut times = Vec::new();
            let every = Duration::from_secs(1) / RATE;
            let mut next = Instant::now();
            while next < end {
                tokio::time::sleep_until(next.into()).await;
                let sent = Instant::now();
                let answer = connection.send(&request).await?;
                if answer.status != 200 {
                    bail!("quiet publish: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
                }
                if sent >= counted {
                    times.push(sent.elapsed());
                }
                next += every;
            }
            anyhow::Ok(times)
        };
        let puller = async {
            let mut connection = Connection::open(&self.host).await?;
            let (mut times, mut received, mut acks) = (Vec::new(), 0u64, Vec::<Value>::new());
            let mut next = Instant::now();
            while next < end + Duration::from_millis(500) {
                tokio::time::sleep_until(next.into()).await;
                let body = json!({"batch_size": 100, "acks": acks});
                let sent = Instant::now();
                let answer = connection.send(&self.request("/pull", &body)).await?;
                if answer.status != 200 {
                    bail!("quiet pull: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
                }
                if sent >= counted && sent < end {
                    times.push(sent.elapsed());
                }
                let parsed: Value = serde_json::from_slice(&answer.body)?;
                let messages = parsed["result"]["messages"].as_array().cloned().unwrap_or_default();
                received += messages.len() as u64;
                acks = messages.iter().map(|m| json!({"lease_id": m["lease_id"]})).collect();
                next += Duration::from_millis(100);
            }
            anyhow::Ok((times, received))
        };
        let (publishes, (pulls, received)) = tokio::try_join!(publisher, puller)?;
        Ok(Times { publishes, pulls, received })
    }
}
