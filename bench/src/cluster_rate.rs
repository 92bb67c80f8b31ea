//! W11 cluster-wide rate: one account on a plan of N published messages a second, publishing batches of
//! 100 as fast as its clients can, through one node, then through two nodes evenly, then through two
//! nodes with three clients on one for each on the other. Each phase reports the messages stored per
//! second against N: the plan's rate must hold across the nodes (N ± 10%), not per node.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::{Connection, PgConnection};

use crate::setup::{self, Env};

#[derive(clap::Args, Debug, Clone)]
pub struct ClusterRateArgs {
    /// The plan's publish rate, messages per second.
    #[arg(long, default_value_t = 2_000)]
    pub rate: u32,
    /// Seconds measured in each phase, after a warm-up of 3 s.
    #[arg(long, default_value_t = 15)]
    pub seconds: u64,
}

const BATCH: usize = 100;

pub async fn run(args: ClusterRateArgs) -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    let mut db = PgConnection::connect(&env.database_url).await?;
    sqlx::query("insert into plans (name, limits) values ('bench', $1::text::jsonb)")
        .bind(json!({ "publish_rate_per_second": args.rate }).to_string())
        .execute(&mut db)
        .await?;
    sqlx::query("update accounts set plan = 'bench' where id = $1::uuid").bind(&env.account).execute(&mut db).await?;
    let (_second, other_base) = setup::serve(&env.database_url, &[], &[]).await?;
    let queue = env.queue_with_consumer((&env.account, &env.token), "capped", json!({"type": "http_pull"})).await?;
    // Both nodes read the plan within a second of the change.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let one = env.base.clone();
    let phases: [(&str, Vec<&str>); 3] = [
        ("one node, 4 clients", vec![&one; 4]),
        ("two nodes, 2 + 2 clients", vec![&one, &one, &other_base, &other_base]),
        ("two nodes, 3 + 1 clients", vec![&one, &one, &one, &other_base]),
    ];
    let mut rows = Vec::new();
    println!("W11 cluster-wide rate: a plan of {} msg/s, batches of {BATCH}, {} s a phase", args.rate, args.seconds);
    for (name, bases) in phases {
        let (per_node, refused) = measure(&env, &queue, &bases, args.seconds).await?;
        let stored: f64 = per_node.iter().map(|(_, rate)| rate).sum();
        let ratio = stored / f64::from(args.rate);
        let nodes: Vec<String> = per_node.iter().map(|(base, rate)| format!("{base}: {rate:.0}")).collect();
        println!(
            "  {name}: {stored:.0} msg/s stored ({ratio:.2}x the plan; {}), {refused} batches refused",
            nodes.join(", ")
        );
        rows.push(json!({
            "phase": name, "stored_per_second": stored, "ratio": ratio, "refused_batches": refused,
            "per_node": per_node.iter().map(|(base, rate)| json!({"node": base, "per_second": rate})).collect::<Vec<_>>(),
        }));
    }
    setup::write_result("cluster-rate", &json!({ "plan_rate": args.rate, "seconds": args.seconds, "phases": rows }))?;
    env.finish().await
}

/// Clients publishing through `bases` (one client each) for a warm-up and then `seconds`: messages
/// stored per second through each node, and the batches refused (429) while measured.
async fn measure(env: &Env, queue: &str, bases: &[&str], seconds: u64) -> anyhow::Result<(Vec<(String, f64)>, u64)> {
    let warm_until = Instant::now() + Duration::from_secs(3);
    let end = warm_until + Duration::from_secs(seconds);
    let refused = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for base in bases {
        let url = format!("{base}/client/v4/accounts/{}/queues/{queue}/messages/batch", env.account);
        let (client, token, refused) = (env.client.clone(), env.token.clone(), refused.clone());
        let body = json!({ "messages": vec![json!({"body": "m", "content_type": "text"}); BATCH] });
        let base = base.to_string();
        clients.push(tokio::spawn(async move {
            let mut stored = 0u64;
            while Instant::now() < end {
                let resp = client.post(&url).bearer_auth(&token).json(&body).send().await?;
                let measured = Instant::now() > warm_until;
                match resp.status().as_u16() {
                    200 if measured => stored += BATCH as u64,
                    200 => {}
                    429 => {
                        if measured {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        // A client told to come back later does, after a tenth of a second.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    status => anyhow::bail!("publish answered {status}: {}", resp.text().await?),
                }
            }
            anyhow::Ok((base, stored))
        }));
    }
    let mut per_node: Vec<(String, f64)> = Vec::new();
    for client in clients {
        let (base, stored) = client.await??;
        let rate = stored as f64 / seconds as f64;
        match per_node.iter_mut().find(|(b, _)| *b == base) {
            Some((_, total)) => *total += rate,
            None => per_node.push((base, rate)),
        }
    }
    Ok((per_node, refused.load(Ordering::Relaxed)))
}
