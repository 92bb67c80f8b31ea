//! The operator's usage export at scale: a month of usage records for many accounts (generated rows, one
//! per account and day), exported as CSV per day and per month through `GET /admin/v1/usage`: the time to
//! the last byte and the node's peak memory, which must not grow with the number of rows.

use std::time::Instant;

use anyhow::{bail, Context};
use chrono::{Datelike, TimeZone, Utc};
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection};
use tokio::process::Command;

use crate::setup::{self, free_port, Env};

#[derive(Debug, Clone, clap::Args)]
pub struct UsageExportArgs {
    /// Accounts with usage.
    #[arg(long, default_value_t = 100_000)]
    pub accounts: u32,
    /// Days of the month each account has a usage row for.
    #[arg(long, default_value_t = 30)]
    pub days: u32,
}

pub async fn run(args: UsageExportArgs) -> anyhow::Result<()> {
    let admin_port = free_port();
    let env = Env::start(&[("SKIPLOCK_ADMIN_BIND", format!("127.0.0.1:{admin_port}"))]).await?;
    let out = Command::new(setup::skiplock_binary())
        .args(["operator", "token", "create", "--name", "bench", "--scopes", "read"])
        .env("DATABASE_URL", &env.database_url)
        .output()
        .await?;
    let token: Value = serde_json::from_slice(&out.stdout).context("operator token create output")?;
    let token = token["token"].as_str().unwrap_or_default().to_owned();

    // Last month, whole: one row per account and day (as an account with one queue busy all month leaves).
    let now = Utc::now();
    let this_month = Utc.with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0).unwrap();
    let since = Utc
        .with_ymd_and_hms(
            if now.month() == 1 { now.year() - 1 } else { now.year() },
            if now.month() == 1 { 12 } else { now.month() - 1 },
            1,
            0,
            0,
            0,
        )
        .unwrap();
    let generated = Instant::now();
    let mut db = PgConnection::connect(&env.database_url).await?;
    sqlx::query(
        "insert into usage_hours (account_id, hour, queue_id, published, published_bytes, delivered, delivered_bytes,
                                  acked, write_ops, read_ops, delete_ops, storage_byte_seconds)
         select md5('account' || a)::uuid, $1 + make_interval(days => d, hours => 12), md5('queue' || a)::uuid,
                1000 + a % 100, 1000000, 1000 + a % 100, 1000000, 1000, 1000 + a % 100, 1000 + a % 100, 1000,
                3600000000
         from generate_series(1, $2) as a cross join generate_series(0, $3 - 1) as d",
    )
    .bind(since)
    .bind(args.accounts as i32)
    .bind(args.days as i32)
    .execute(&mut db)
    .await?;
    sqlx::query("analyze usage_hours").execute(&mut db).await?;
    let rows = u64::from(args.accounts) * u64::from(args.days);
    eprintln!("generated {rows} usage rows in {:.1} s", generated.elapsed().as_secs_f64());

    let pid = env.server.id().unwrap_or(0);
    let rss_before = setup::peak_rss_mib(pid);
    let mut results = Vec::new();
    println!(
        "| usage export ({} accounts x {} days) | lines | MiB | seconds | node peak RSS before / after |",
        args.accounts, args.days
    );
    println!("|---|--:|--:|--:|--:|");
    for granularity in ["day", "month"] {
        let url = format!(
            "http://127.0.0.1:{admin_port}/admin/v1/usage?format=csv&granularity={granularity}&since={}&until={}",
            since.format("%Y-%m-%d"),
            this_month.format("%Y-%m-%d")
        );
        let start = Instant::now();
        let mut resp = env.client.get(&url).bearer_auth(&token).send().await?;
        if !resp.status().is_success() {
            bail!("the export answered {}", resp.status());
        }
        let (mut bytes, mut lines) = (0usize, 0usize);
        while let Some(chunk) = resp.chunk().await? {
            bytes += chunk.len();
            lines += chunk.iter().filter(|b| **b == b'\n').count();
        }
        let seconds = start.elapsed().as_secs_f64();
        let rss_after = setup::peak_rss_mib(pid);
        println!(
            "| CSV per {granularity} | {} | {:.1} | {seconds:.2} | {rss_before:.0} / {rss_after:.0} MiB |",
            lines - 1,
            bytes as f64 / 1048576.0
        );
        results.push(json!({"granularity": granularity, "rows": lines - 1, "bytes": bytes, "seconds": seconds,
                            "peak_rss_mib_before": rss_before, "peak_rss_mib_after": rss_after}));
    }
    setup::write_result(
        "usage-export",
        &json!({"accounts": args.accounts, "days": args.days, "usage_rows": rows, "exports": results}),
    )?;
    drop(db);
    env.finish().await
}
