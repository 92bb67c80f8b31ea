//! Usage per account, queue and hour (the `usage` migration): what the statements doing the work counted,
//! folded into `usage_hours` with the message counts (`counts`), the stored bytes sampled, and the reads of
//! it for tenants and operators.

use chrono::{DateTime, Utc};
use futures_util::TryStreamExt;
use sqlx::{PgExecutor, PgPool};
use tokio::sync::mpsc;

use crate::ids::{AccountId, QueueId};
use crate::queue::quota::Used;

/// What one period of usage adds up to. Operations are Cloudflare's: each 64 KB chunk of a message
/// written, read or deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct Usage {
    pub published: i64,
    pub published_bytes: i64,
    pub delivered: i64,
    pub delivered_bytes: i64,
    pub acked: i64,
    pub retried: i64,
    pub dead_lettered: i64,
    pub expired: i64,
    pub write_ops: i64,
    pub read_ops: i64,
    pub delete_ops: i64,
    /// Stored bytes times the seconds they were stored, as sampled.
    pub storage_byte_seconds: i64,
}

impl Usage {
    /// The operations billed.
    pub fn operations(&self) -> i64 {
        self.write_ops + self.read_ops + self.delete_ops
    }
}

/// One queue's usage over one period.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct QueueUsage {
    pub start: DateTime<Utc>,
    pub queue_id: QueueId,
    pub queue_name: String,
    #[sqlx(flatten)]
    pub usage: Usage,
}

/// One account's usage over one period (the operator's export).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AccountUsage {
    pub account_id: AccountId,
    pub start: DateTime<Utc>,
    #[sqlx(flatten)]
    pub usage: Usage,
}

/// The periods usage is summed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    Hour,
    Day,
    Month,
}

impl Granularity {
    fn unit(self) -> &'static str {
        match self {
            Granularity::Hour => "hour",
            Granularity::Day => "day",
            Granularity::Month => "month",
        }
    }
}

/// The sums of a select over `usage_hours u`, named as `Usage`'s fields.
macro_rules! usage_sums {
    () => {
        "sum(u.published)::int8 as published, sum(u.published_bytes)::int8 as published_bytes,
         sum(u.delivered)::int8 as delivered, sum(u.delivered_bytes)::int8 as delivered_bytes,
         sum(u.acked)::int8 as acked, sum(u.retried)::int8 as retried, sum(u.dead_lettered)::int8 as dead_lettered,
         sum(u.expired)::int8 as expired, sum(u.write_ops)::int8 as write_ops, sum(u.read_ops)::int8 as read_ops,
         sum(u.delete_ops)::int8 as delete_ops, sum(u.storage_byte_seconds)::int8 as storage_byte_seconds"
    };
}

/// The account's usage from `since` until `until` (hours starting in it), per period and queue, oldest
/// first; of one queue with `queue` (a deleted queue's usage included: it was the account's).
pub async fn of_account(
    db: impl PgExecutor<'_>,
    account: AccountId,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    granularity: Granularity,
    queue: Option<QueueId>,
) -> Result<Vec<QueueUsage>, sqlx::Error> {
    sqlx::query_as(concat!(
        "select date_trunc($4, u.hour, 'UTC') as start, u.queue_id, m.name as queue_name, ",
        usage_sums!(),
        "
         from usage_hours u join metered_queues m on m.queue_id = u.queue_id
         where u.account_id = $1 and u.hour >= $2 and u.hour < $3 and ($5::uuid is null or u.queue_id = $5)
         group by 1, u.queue_id, m.name
         order by 1, m.name, u.queue_id"
    ))
    .bind(account)
    .bind(since)
    .bind(until)
    .bind(granularity.unit())
    .bind(queue)
    .fetch_all(db)
    .await
}

/// What each of `accounts` has used of its quotas: its operations since `day` and since `month` (as
/// folded: the last seconds' deltas are not in it), and the bytes its queues store now. Each queue's
/// backlog is read by its id (a join would have the view count every queue of every account first).
pub async fn quota_used(
    db: impl PgExecutor<'_>,
    accounts: &[AccountId],
    day: DateTime<Utc>,
    month: DateTime<Utc>,
) -> Result<Vec<(AccountId, Used)>, sqlx::Error> {
    let rows: Vec<(AccountId, i64, i64, i64)> = sqlx::query_as(
        "select a.id,
                coalesce((select sum(u.write_ops + u.read_ops + u.delete_ops) from usage_hours u
                          where u.account_id = a.id and u.hour >= $2), 0)::int8,
                coalesce((select sum(u.write_ops + u.read_ops + u.delete_ops) from usage_hours u
                          where u.account_id = a.id and u.hour >= $3), 0)::int8,
                coalesce((select sum((select b.bytes from queue_backlogs b where b.queue_id = q.id))
                          from queues q where q.account_id = a.id), 0)::int8
         from unnest($1::uuid[]) as a(id)",
    )
    .bind(accounts)
    .bind(day)
    .bind(month)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(account, today, month, stored)| {
            (account, Used { operations_today: today, operations_this_month: month, stored_bytes: stored })
        })
        .collect())
}

/// Sends each account's usage per period from `since` until `until` (one account's with `account`) to
/// `sink`, in account and period order, as PostgreSQL produces it: nothing is held beyond the channel's
/// room. An error ends the rows with it, so that the reader knows the export is short; a receiver gone
/// stops the export. Across accounts: the operator's export.
pub async fn export(
    pool: &PgPool,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    granularity: Granularity,
    account: Option<AccountId>,
    sink: mpsc::Sender<Result<AccountUsage, sqlx::Error>>,
) {
    let query = concat!(
        "select u.account_id, date_trunc($3, u.hour, 'UTC') as start, ",
        usage_sums!(),
        "
         from usage_hours u
         where u.hour >= $1 and u.hour < $2 and ($4::uuid is null or u.account_id = $4)
         group by u.account_id, 2
         order by u.account_id, 2"
    );
    let mut rows = sqlx::query_as::<_, AccountUsage>(query)
        .bind(since)
        .bind(until)
        .bind(granularity.unit())
        .bind(account)
        .fetch(pool);
    loop {
        let next = match rows.try_next().await {
            Ok(Some(row)) => Ok(row),
            Ok(None) => return,
            Err(err) => Err(err),
        };
        let failed = next.is_err();
        if sink.send(next).await.is_err() || failed {
            return;
        }
    }
}

/// Adds each queue's stored bytes (a queue with several consumers: its lane holding most, whose copies
/// share the queue's bodies) times the sampling period to the current hour's byte-seconds, when no node has sampled this `period_seconds` period yet; whether this call sampled.
/// Across accounts: the upkeep.
pub async fn sample_storage(pool: &PgPool, period_seconds: i64) -> Result<bool, sqlx::Error> {
    let sampled = sqlx::query(
        "with taken as (
             insert into usage_samples (period) values (floor(extract(epoch from now()) / $1)::int8)
             on conflict do nothing returning period)
         insert into usage_hours as u (account_id, hour, queue_id, storage_byte_seconds)
         select q.account_id, date_trunc('hour', now(), 'UTC'), coalesce(q.parent_queue_id, q.id), max(b.bytes) * $1
         from queue_backlogs b join queues q on q.id = b.queue_id
         where b.bytes > 0 and exists (select 1 from taken)
         group by q.account_id, coalesce(q.parent_queue_id, q.id)
         order by q.account_id, coalesce(q.parent_queue_id, q.id)
         on conflict (account_id, hour, queue_id) do update
             set storage_byte_seconds = u.storage_byte_seconds + excluded.storage_byte_seconds",
    )
    .bind(period_seconds)
    .execute(pool)
    .await?;
    Ok(sampled.rows_affected() > 0)
}

/// Removes usage and samples older than `before`, and the records of queues deleted before it whose
/// usage is gone. Across accounts: the upkeep.
pub async fn forget_before(pool: &PgPool, before: DateTime<Utc>) -> Result<u64, sqlx::Error> {
    let gone = sqlx::query("delete from usage_hours where hour < $1").bind(before).execute(pool).await?;
    sqlx::query("delete from usage_samples where sampled_at < $1").bind(before).execute(pool).await?;
    sqlx::query(
        "delete from metered_queues m
         where m.deleted_at < $1 and not exists (select 1 from usage_hours u where u.queue_id = m.queue_id)",
    )
    .bind(before)
    .execute(pool)
    .await?;
    Ok(gone.rows_affected())
}

/// Whether `queue` is, or was, the account's (its usage is kept after it is deleted).
pub async fn queue_known(db: impl PgExecutor<'_>, account: AccountId, queue: QueueId) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("select exists (select 1 from metered_queues where queue_id = $2 and account_id = $1)")
        .bind(account)
        .bind(queue)
        .fetch_one(db)
        .await
}
