//! Usage: what each account's queues did, per hour, as the statements doing the work counted it
//! (`store::usage`), read by tenants and exported by operators; its stored bytes sampled, and its age
//! bounded, by the upkeep.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tokio::sync::mpsc;

use super::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, QueueId};
use crate::metrics::Metrics;
use crate::store::{self, usage::AccountUsage, usage::Granularity, usage::QueueUsage, usage::Usage};

/// How long usage is kept: thirteen months, so that a year-on-year invoice can still be made.
pub const KEPT_DAYS: i64 = 396;
/// How often one of the nodes samples every queue's stored bytes.
pub const SAMPLE_SECONDS: i64 = 300;
/// Rows of an export buffered between PostgreSQL and the client.
const EXPORT_BUFFER: usize = 1_024;

impl Engine {
    /// The account's usage per period and queue (of one queue, even deleted, with `queue`).
    pub async fn account_usage(
        &self,
        account: AccountId,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        granularity: Granularity,
        queue: Option<QueueId>,
    ) -> ApiResult<Vec<QueueUsage>> {
        if let Some(queue) = queue {
            if !store::usage::queue_known(&self.pool, account, queue).await? {
                return Err(ApiError::new(Kind::QueueNotFound, "queue_id: the account has no such queue"));
            }
        }
        Ok(store::usage::of_account(&self.pool, account, since, until, granularity, queue).await?)
    }

    /// Every account's usage per period (one account's with `account`), streamed from PostgreSQL as it
    /// comes: the rows arrive on the receiver, and an error, if any, is the last thing to arrive.
    pub fn export_usage(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        granularity: Granularity,
        account: Option<AccountId>,
    ) -> mpsc::Receiver<Result<AccountUsage, sqlx::Error>> {
        let (sink, rows) = mpsc::channel(EXPORT_BUFFER);
        let pool = self.pool.clone();
        tokio::spawn(async move { store::usage::export(&pool, since, until, granularity, account, sink).await });
        rows
    }
}

/// Samples the stored bytes when this period has not been sampled, and forgets usage past `KEPT_DAYS` and
/// quota crossings of periods long over; part of the retention upkeep.
pub async fn upkeep(pool: &PgPool) -> Result<(), sqlx::Error> {
    store::usage::sample_storage(pool, SAMPLE_SECONDS).await?;
    store::usage::forget_before(pool, Utc::now() - chrono::Duration::days(KEPT_DAYS)).await?;
    // A quota's crossings are told once per period: a month and a little is as far back as one looks.
    store::events::forget_quota_notices(pool, Utc::now() - chrono::Duration::days(40)).await?;
    Ok(())
}

/// Counts the usage this node folded into the usage records in its metrics (no label per account).
pub fn count_folded(metrics: &Metrics, usage: &Usage) {
    for (kind, n) in [("write", usage.write_ops), ("read", usage.read_ops), ("delete", usage.delete_ops)] {
        metrics.usage_operations.with_label_values(&[kind]).inc_by(n.max(0) as u64);
    }
    let events = [
        ("published", usage.published),
        ("delivered", usage.delivered),
        ("acked", usage.acked),
        ("retried", usage.retried),
        ("dead_lettered", usage.dead_lettered),
        ("expired", usage.expired),
    ];
    for (event, n) in events {
        metrics.usage_messages.with_label_values(&[event]).inc_by(n.max(0) as u64);
    }
}
