//! Wrong-token floods beside a good tenant: a good account publishes single messages at 100 a second,
//! alone, then beside `--flooders` connections sending a real token id with wrong secrets (each a
//! verification the node might run argon2 for), then beside as many sending random token ids. Each flood
//! runs twice: at the rate it was first measured at (93 and 1,380 requests/s, the floods the hardening
//! target is set for), and as fast as it is answered (closed loop, bounded only by the two cores the
//! node, the flood and the good tenant share). The figures: the good tenant's publish p99 in each phase
//! against alone, the flood's rate, and the node's peak RSS.

use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::json;

use crate::http::{Connection, Request};
use crate::setup::{self, percentile_ms, Env};

#[derive(clap::Args, Debug, Clone)]
pub struct FloodArgs {
    /// How long each phase is measured, after a warm-up.
    #[arg(long, default_value_t = 15)]
    pub seconds: u64,
    /// Connections sending wrong tokens.
    #[arg(long, default_value_t = 8)]
    pub flooders: usize,
}

const RATE: u32 = 100;
/// The floods' rates as first measured (requests/s): wrong secrets of a real id were bounded by argon2 then.
const REAL_ID_RATE: u64 = 93;
const RANDOM_ID_RATE: u64 = 1_380;
/// The good tenant's p99 beside a flood at its measured rate may be at most this many times its p99 alone.
const TARGET_RATIO: f64 = 2.0;
const WARM_UP: Duration = Duration::from_secs(3);

/// Which wrong tokens a flood sends.
#[derive(Clone, Copy, PartialEq)]
enum Wrong {
    /// The good tenant's token id with a secret of its own per request.
    SecretOfARealId,
    /// A token id nobody holds per request.
    RandomId,
}

pub async fn run(args: FloodArgs) -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    let host = env.base.trim_start_matches("http://").to_owned();
    let queue = env.queue_with_consumer((&env.account, &env.token), "good", json!({"type": "http_pull"})).await?;
    let path = format!("/client/v4/accounts/{}/queues/{queue}/messages", env.account);
    let good =
        Request::post(&host, &path, &env.token, json!({"body": "good", "content_type": "text"}).to_string().as_bytes());
    let phase = Duration::from_secs(args.seconds);

    let alone = publish_at_rate(&host, &good, phase).await?;
    let mut rows = vec![("alone", alone, 0.0, peak_rss_mib(&env))];
    for (name, wrong, rate) in [
        ("beside wrong secrets of a real token id, 93/s", Wrong::SecretOfARealId, Some(REAL_ID_RATE)),
        ("beside random token ids, 1,380/s", Wrong::RandomId, Some(RANDOM_ID_RATE)),
        ("beside wrong secrets of a real token id, as fast as answered", Wrong::SecretOfARealId, None),
        ("beside random token ids, as fast as answered", Wrong::RandomId, None),
    ] {
        let end = Instant::now() + WARM_UP + phase;
        // Each connection sends its share of the rate, on a schedule (open loop), or back to back.
        let every = rate.map(|r| Duration::from_secs_f64(args.flooders as f64 / r as f64));
        let floods = (0..args.flooders).map(|_| flood(&host, &path, &env.token, wrong, end, every));
        let (times, sent) =
            tokio::try_join!(publish_at_rate(&host, &good, phase), futures_util::future::try_join_all(floods))?;
        let rate = sent.iter().sum::<u64>() as f64 / (WARM_UP + phase).as_secs_f64();
        rows.push((name, times, rate, peak_rss_mib(&env)));
    }

    let alone_p99 = percentile_ms(&rows[0].1, 99.0);
    println!(
        "| good tenant, 100 publishes/s | publish p50 / p99 | p99 / alone | flood requests/s | node peak RSS MiB |"
    );
    println!("|---|--:|--:|--:|--:|");
    let mut phases = Vec::new();
    for (name, times, rate, rss) in &rows {
        let (p50, p99) = (percentile_ms(times, 50.0), percentile_ms(times, 99.0));
        println!(
            "| {name} | {p50:.1} / {p99:.1} ms | {:.2}x | {rate:.0} | {rss:.0} |",
            p99 / alone_p99.max(f64::EPSILON)
        );
        phases
            .push(json!({"phase": name, "p50_ms": p50, "p99_ms": p99, "p99_ratio": p99 / alone_p99.max(f64::EPSILON),
                           "flood_per_second": rate, "peak_rss_mib": rss}));
    }
    // The target: beside each flood at its measured rate, p99 at most 2x alone and the node under 150 MiB.
    let met = phases[1..3].iter().all(|p| p["p99_ratio"].as_f64().unwrap_or(f64::MAX) <= TARGET_RATIO)
        && rows.iter().all(|(_, _, _, rss)| *rss < 150.0);
    println!(
        "target (p99 <= {TARGET_RATIO}x alone beside the floods at their measured rates, RSS < 150 MiB): {}",
        if met { "met" } else { "NOT met" }
    );
    let result = json!({
        "workload": "wrong-token floods beside a good tenant publishing 100 msg/s",
        "seconds": args.seconds, "flooders": args.flooders, "phases": phases, "target_met": met,
        "at": chrono::Utc::now().to_rfc3339(),
    });
    env.finish().await?;
    setup::write_result("flood", &result)
}

/// Publishes RATE single messages a second for a warm-up and then `phase`, timing those of `phase`
/// (sorted).
async fn publish_at_rate(host: &str, request: &Request, phase: Duration) -> anyhow::Result<Vec<Duration>> {
    let mut connection = Connection::open(host).await?;
    let started = Instant::now();
    let (counted, end) = (started + WARM_UP, started + WARM_UP + phase);
    let every = Duration::from_secs(1) / RATE;
    let (mut times, mut next) = (Vec::new(), started);
    while next < end {
        tokio::time::sleep_until(next.into()).await;
        let sent = Instant::now();
        let answer = connection.send(request).await?;
        if answer.status != 200 {
            bail!("good publish: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
        }
        if sent >= counted {
            times.push(sent.elapsed());
        }
        next += every;
    }
    times.sort();
    Ok(times)
}

/// Sends wrong tokens on one connection until `end`, one `every` so long or back to back, each answered
/// 401, or 429 once the address cools down; returns how many were sent.
async fn flood(
    host: &str,
    path: &str,
    token: &str,
    wrong: Wrong,
    end: Instant,
    every: Option<Duration>,
) -> anyhow::Result<u64> {
    let mut connection = Connection::open(host).await?;
    // skl_<id>_<secret>: the secret (or the id) made anew for each request.
    let id = token.split('_').nth(1).unwrap_or_default().to_owned();
    let mut sent = 0u64;
    let mut next = Instant::now();
    while Instant::now() < end {
        if let Some(every) = every {
            tokio::time::sleep_until(next.into()).await;
            next += every;
        }
        let fresh = uuid::Uuid::new_v4().simple().to_string();
        // A secret of the right shape (43 characters), so that it is looked up and not refused as malformed.
        let secret = format!("{fresh}{fresh}")[..43].to_owned();
        let text = match wrong {
            Wrong::SecretOfARealId => format!("skl_{id}_{secret}"),
            Wrong::RandomId => format!("skl_{fresh}_{secret}"),
        };
        // The server may close a connection after a refusal whose body it did not read: open another.
        match connection.send(&Request::post(host, path, &text, b"{\"body\": \"x\"}")).await {
            Ok(answer) if answer.status == 401 || answer.status == 429 => sent += 1,
            Ok(answer) => bail!("a wrong token was answered {}", answer.status),
            Err(_) => connection = Connection::open(host).await?,
        }
    }
    Ok(sent)
}

/// The node's peak resident set so far, in MiB.
fn peak_rss_mib(env: &Env) -> f64 {
    setup::peak_rss_mib(env.server.id().unwrap_or(0))
}
