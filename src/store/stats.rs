//! Queue statistics for the dashboard: message counts by state, and activity over time.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::ids::{AccountId, QueueId};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct QueueState {
    pub account_id: AccountId,
    pub queue_id: QueueId,
    pub queue_name: String,
    pub backlog_count: i64,
    pub backlog_bytes: i64,
    /// Leased and not yet expired.
    pub in_flight_count: i64,
    /// Waiting for a publish or retry delay.
    pub delayed_count: i64,
    pub oldest: Option<DateTime<Utc>>,
    /// The consumer's dead-letter queue, by name ("" when none).
    pub dead_letter_queue: String,
}

/// The state of an account's queues by name, or of every account's queues (metrics) when `account`
/// is None.
pub async fn queue_states(pool: &PgPool, account: Option<AccountId>) -> Result<Vec<QueueState>, sqlx::Error> {
    sqlx::query_as(
        "select q.account_id, q.id as queue_id, q.name as queue_name,
                coalesce(b.messages, 0) as backlog_count, coalesce(b.bytes, 0) as backlog_bytes,
                f.in_flight_count, f.delayed_count, b.oldest,
                coalesce(con.dead_letter_queue, '') as dead_letter_queue
         from queues q
         left join queue_backlogs b on b.queue_id = q.id
         left join consumers con on con.queue_id = q.id
         -- Only messages whose availability lies ahead: a walk along the claim index, not the queue.
         cross join lateral (
             select count(*) filter (where m.leased) as in_flight_count,
                    count(*) filter (where not m.leased) as delayed_count
             from messages m where m.queue_id = q.id and m.available_at > now()) f
         where $1::uuid is null or q.account_id = $1
         order by q.account_id, q.name",
    )
    .bind(account)
    .fetch_all(pool)
    .await
}

/// How many messages of a dead-letter queue came from one source queue.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SourceCount {
    pub queue_id: QueueId,
    pub source: QueueId,
    pub messages: i64,
}

/// For each of the account's queues that holds dead-lettered messages, how many came from each source
/// (read from the partial index of dead-lettered messages only).
pub async fn dead_letter_source_counts(pool: &PgPool, account: AccountId) -> Result<Vec<SourceCount>, sqlx::Error> {
    sqlx::query_as(
        "select m.queue_id, m.dead_letter_source as source, count(*) as messages
         from messages m
         where m.queue_id = any(array(select id from queues where account_id = $1))
           and m.dead_letter_source is not null
         group by m.queue_id, m.dead_letter_source",
    )
    .bind(account)
    .fetch_all(pool)
    .await
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ActivityBucket {
    pub bucket: DateTime<Utc>,
    pub published: i64,
    pub acked: i64,
}

/// The queue's activity buckets since `since`, oldest first.
pub async fn activity(pool: &PgPool, queue: QueueId, since: DateTime<Utc>) -> Result<Vec<ActivityBucket>, sqlx::Error> {
    sqlx::query_as(
        "select bucket, published, acked from queue_activity where queue_id = $1 and bucket >= $2 order by bucket",
    )
    .bind(queue)
    .bind(since)
    .fetch_all(pool)
    .await
}
