//! Consumers: at most one per queue (the `consumers_queue_key` constraint says so).

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::{is_foreign_key_violation, violated_constraint, StoreError};
use crate::ids::{AccountId, ConsumerId, QueueId};
use crate::queue::consumer::{Backoff, ConsumerKind, ConsumerSettings, RetryPolicy};
use crate::queue::flow::FlowLimits;
use crate::queue::settings::MAX_DELAY_SECONDS;
use crate::store::owned::OwnedQueue;

/// A consumer with its queue's name, as `list` and `get` read it (each lists the columns in full, so that
/// every statement is a literal that `query_as!` checks).
#[derive(Debug, Clone)]
pub struct ConsumerRow {
    pub id: ConsumerId,
    pub account_id: AccountId,
    /// The queue it consumes, as the tenant names it.
    pub queue_id: QueueId,
    pub queue_name: String,
    /// Where its messages wait: the queue itself for its first consumer, else the consumer's lane (the
    /// `consumer_lanes` migration).
    pub lane_id: QueueId,
    pub kind: ConsumerKind,
    pub dead_letter_queue: String,
    pub batch_size: i32,
    pub max_retries: i32,
    pub retry_delay: i32,
    pub max_wait_time_ms: Option<i32>,
    pub max_concurrency: Option<i32>,
    pub visibility_timeout_ms: Option<i32>,
    pub url: Option<String>,
    pub created_at: DateTime<Utc>,
    pub retry_backoff: Backoff,
    pub retry_delay_max: Option<i32>,
    pub flow_parallelism: Option<i32>,
    pub flow_rate: Option<i32>,
    pub flow_period: Option<i32>,
    pub disable_after_hours: Option<i32>,
}

/// A consumer's retry policy from its columns.
pub fn retry_policy(retry_delay: i32, backoff: Backoff, max: Option<i32>) -> RetryPolicy {
    RetryPolicy { backoff, max_delay: max.map_or(MAX_DELAY_SECONDS, Into::into), base_delay: retry_delay.into() }
}

impl ConsumerRow {
    pub fn kind(&self) -> ConsumerKind {
        self.kind
    }

    /// Where its messages wait, with the account that owns them (the row was read for that account).
    pub fn lane(&self) -> OwnedQueue {
        OwnedQueue::vouched(self.account_id, self.lane_id)
    }

    pub fn settings(&self) -> ConsumerSettings {
        ConsumerSettings {
            batch_size: self.batch_size.into(),
            max_retries: self.max_retries.into(),
            retry_delay: self.retry_delay.into(),
            max_wait_time_ms: self.max_wait_time_ms.map(Into::into),
            visibility_timeout_ms: self.visibility_timeout_ms.map(Into::into),
            max_concurrency: self.max_concurrency.map(Into::into),
            retry: retry_policy(self.retry_delay, self.retry_backoff, self.retry_delay_max),
            flow: FlowLimits {
                parallelism: self.flow_parallelism.map(Into::into),
                rate: self.flow_rate.map(Into::into),
                period: self.flow_period.map(Into::into),
            },
            disable_after_hours: self.disable_after_hours.map(Into::into),
        }
    }
}

/// What a consumer is created or replaced with.
pub struct ConsumerSpec<'a> {
    pub kind: ConsumerKind,
    pub settings: ConsumerSettings,
    pub dead_letter_queue: &'a str,
    pub url: Option<&'a str>,
}

/// Makes the queue's first consumer, which reads the queue itself; `ConsumerExists` when it has one.
pub async fn create(
    pool: &PgPool,
    queue: OwnedQueue,
    spec: &ConsumerSpec<'_>,
    signing_secret: Option<&str>,
) -> Result<ConsumerRow, StoreError> {
    let id = ConsumerId::new();
    insert(pool, queue, id, spec, signing_secret).await?;
    get(pool, queue, id).await?.ok_or(StoreError::QueueGone)
}

/// Makes a further consumer of the queue, in a lane of its own (the `consumer_lanes` migration) made in
/// the same commit.
pub async fn create_in_lane(
    pool: &PgPool,
    queue: OwnedQueue,
    spec: &ConsumerSpec<'_>,
    signing_secret: Option<&str>,
) -> Result<ConsumerRow, StoreError> {
    let id = ConsumerId::new();
    let mut tx = pool.begin().await?;
    let lane = super::queues::create_lane(&mut *tx, queue, QueueId::new()).await?.ok_or(StoreError::QueueGone)?;
    insert(&mut *tx, lane, id, spec, signing_secret).await?;
    tx.commit().await?;
    get(pool, queue, id).await?.ok_or(StoreError::QueueGone)
}

async fn insert(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
    id: ConsumerId,
    spec: &ConsumerSpec<'_>,
    signing_secret: Option<&str>,
) -> Result<(), StoreError> {
    let s = &spec.settings;
    sqlx::query!(
        "insert into consumers (id, account_id, queue_id, kind, dead_letter_queue, batch_size, max_retries,
             retry_delay, max_wait_time_ms, max_concurrency, visibility_timeout_ms, url, signing_secret,
             retry_backoff, retry_delay_max, flow_parallelism, flow_rate, flow_period, disable_after_hours)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)",
        id.0,
        queue.account().0,
        queue.id().0,
        spec.kind.as_str(),
        spec.dead_letter_queue,
        s.batch_size as i32,
        s.max_retries as i32,
        s.retry_delay as i32,
        s.max_wait_time_ms.map(|v| v as i32),
        s.max_concurrency.map(|v| v as i32),
        s.visibility_timeout_ms.map(|v| v as i32),
        spec.url,
        signing_secret,
        s.retry.backoff.as_str(),
        retry_delay_max(s),
        s.flow.parallelism.map(|v| v as i32),
        s.flow.rate.map(|v| v as i32),
        s.flow.period.map(|v| v as i32),
        s.disable_after_hours.map(|v| v as i32),
    )
    .execute(db)
    .await
    .map_err(|e| match violated_constraint(&e) {
        Some("consumers_queue_key") => StoreError::ConsumerExists,
        _ if is_foreign_key_violation(&e) => StoreError::QueueGone,
        _ => e.into(),
    })?;
    Ok(())
}

/// The stored cap of exponential backoff (null when backoff is constant).
fn retry_delay_max(settings: &ConsumerSettings) -> Option<i32> {
    (settings.retry.backoff == Backoff::Exponential).then_some(settings.retry.max_delay as i32)
}

pub async fn list(
    db: impl PgExecutor<'_>,
    account: AccountId,
    queues: &[QueueId],
) -> Result<Vec<ConsumerRow>, sqlx::Error> {
    let queues: Vec<Uuid> = queues.iter().map(|q| q.0).collect();
    sqlx::query_as!(
        ConsumerRow,
        r#"select c.id as "id: ConsumerId", c.account_id as "account_id: AccountId",
                coalesce(p.id, q.id) as "queue_id!: QueueId", coalesce(p.name, q.name) as "queue_name!",
                c.queue_id as "lane_id: QueueId", c.kind as "kind: ConsumerKind", c.dead_letter_queue, c.batch_size, c.max_retries,
                c.retry_delay, c.max_wait_time_ms, c.max_concurrency, c.visibility_timeout_ms, c.url, c.created_at,
                c.retry_backoff as "retry_backoff: Backoff", c.retry_delay_max,
                c.flow_parallelism, c.flow_rate, c.flow_period, c.disable_after_hours
         from consumers c join queues q on q.id = c.queue_id left join queues p on p.id = q.parent_queue_id
         where c.account_id = $1
           and c.queue_id in (select id from queues where account_id = $1 and (id = any($2) or parent_queue_id = any($2)))
         order by c.created_at, c.id"#,
        account.0,
        &queues,
    )
    .fetch_all(db)
    .await
}

pub async fn get(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
    id: ConsumerId,
) -> Result<Option<ConsumerRow>, sqlx::Error> {
    sqlx::query_as!(
        ConsumerRow,
        r#"select c.id as "id: ConsumerId", c.account_id as "account_id: AccountId",
                coalesce(p.id, q.id) as "queue_id!: QueueId", coalesce(p.name, q.name) as "queue_name!",
                c.queue_id as "lane_id: QueueId", c.kind as "kind: ConsumerKind", c.dead_letter_queue, c.batch_size, c.max_retries,
                c.retry_delay, c.max_wait_time_ms, c.max_concurrency, c.visibility_timeout_ms, c.url, c.created_at,
                c.retry_backoff as "retry_backoff: Backoff", c.retry_delay_max,
                c.flow_parallelism, c.flow_rate, c.flow_period, c.disable_after_hours
         from consumers c join queues q on q.id = c.queue_id left join queues p on p.id = q.parent_queue_id
         where c.account_id = $1 and c.id = $3
           and c.queue_id in (select id from queues where account_id = $1 and (id = $2 or parent_queue_id = $2))"#,
        queue.account().0,
        queue.id().0,
        id.0,
    )
    .fetch_optional(db)
    .await
}

pub async fn update(
    pool: &PgPool,
    queue: OwnedQueue,
    id: ConsumerId,
    spec: &ConsumerSpec<'_>,
) -> Result<Option<ConsumerRow>, sqlx::Error> {
    let s = &spec.settings;
    let updated = sqlx::query!(
        "update consumers set dead_letter_queue = $4, batch_size = $5, max_retries = $6, retry_delay = $7,
             max_wait_time_ms = $8, max_concurrency = $9, visibility_timeout_ms = $10,
             url = coalesce($11, url), retry_backoff = $12, retry_delay_max = $13,
             flow_parallelism = $14, flow_rate = $15, flow_period = $16, disable_after_hours = $17
         where account_id = $1 and id = $3
           and queue_id in (select id from queues where account_id = $1 and (id = $2 or parent_queue_id = $2))",
        queue.account().0,
        queue.id().0,
        id.0,
        spec.dead_letter_queue,
        s.batch_size as i32,
        s.max_retries as i32,
        s.retry_delay as i32,
        s.max_wait_time_ms.map(|v| v as i32),
        s.max_concurrency.map(|v| v as i32),
        s.visibility_timeout_ms.map(|v| v as i32),
        spec.url,
        s.retry.backoff.as_str(),
        retry_delay_max(s),
        s.flow.parallelism.map(|v| v as i32),
        s.flow.rate.map(|v| v as i32),
        s.flow.period.map(|v| v as i32),
        s.disable_after_hours.map(|v| v as i32),
    )
    .execute(pool)
    .await?;
    if updated.rows_affected() == 0 {
        return Ok(None);
    }
    get(pool, queue, id).await
}

pub async fn delete(db: impl PgExecutor<'_>, queue: OwnedQueue, id: ConsumerId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "delete from consumers where account_id = $1 and queue_id = $2 and id = $3",
        queue.account().0,
        queue.id().0,
        id.0,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Everything a pull or an ack needs to know about a queue, in one round trip: its pause state,
/// its consumer's settings and the id of the dead-letter queue, if that queue exists.
#[derive(Debug, Clone)]
pub struct DeliveryTarget {
    pub queue_id: QueueId,
    pub delivery_paused: bool,
    pub message_retention_period: i32,
    pub consumer: Option<ConsumerFields>,
    pub dead_letter_queue_id: Option<QueueId>,
    /// Some of the queue's further consumers, in lanes, are http_pull ones: a pull must name its consumer.
    pub pulled_in_lanes: bool,
}

#[derive(Debug, Clone)]
pub struct ConsumerFields {
    pub kind: ConsumerKind,
    pub dead_letter_queue: String,
    pub batch_size: i32,
    pub max_retries: i32,
    pub retry: RetryPolicy,
    pub visibility_timeout_ms: Option<i32>,
}

pub async fn delivery_target(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
) -> Result<Option<DeliveryTarget>, sqlx::Error> {
    let row = sqlx::query_as!(
        DeliveryTargetRow,
        r#"select q.id as "queue_id: QueueId", q.delivery_paused, q.message_retention_period,
                c.kind as "kind?: ConsumerKind", c.dead_letter_queue as "dead_letter_queue?", c.batch_size as "batch_size?",
                c.max_retries as "max_retries?", c.retry_delay as "retry_delay?",
                c.retry_backoff as "retry_backoff?: Backoff", c.retry_delay_max, c.visibility_timeout_ms,
                d.id as "dead_letter_queue_id?: QueueId",
                exists (select 1 from queues l join consumers lc on lc.queue_id = l.id
                        where l.parent_queue_id = q.id and lc.kind = 'http_pull') as "pulled_in_lanes!"
         from queues q
         left join consumers c on c.queue_id = q.id
         left join queues d on d.account_id = q.account_id and d.name = c.dead_letter_queue and d.id <> q.id
                           and d.id <> coalesce(q.parent_queue_id, q.id)
         where q.account_id = $1 and q.id = $2"#,
        queue.account().0,
        queue.id().0,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(DeliveryTargetRow::into_target))
}

struct DeliveryTargetRow {
    queue_id: QueueId,
    delivery_paused: bool,
    message_retention_period: i32,
    kind: Option<ConsumerKind>,
    dead_letter_queue: Option<String>,
    batch_size: Option<i32>,
    max_retries: Option<i32>,
    retry_delay: Option<i32>,
    retry_backoff: Option<Backoff>,
    retry_delay_max: Option<i32>,
    visibility_timeout_ms: Option<i32>,
    dead_letter_queue_id: Option<QueueId>,
    pulled_in_lanes: bool,
}

impl DeliveryTargetRow {
    fn into_target(self) -> DeliveryTarget {
        let consumer = match (self.kind, self.batch_size, self.max_retries, self.retry_delay, self.retry_backoff) {
            (Some(kind), Some(batch_size), Some(max_retries), Some(retry_delay), Some(backoff)) => {
                Some(ConsumerFields {
                    kind,
                    dead_letter_queue: self.dead_letter_queue.unwrap_or_default(),
                    batch_size,
                    max_retries,
                    retry: retry_policy(retry_delay, backoff, self.retry_delay_max),
                    visibility_timeout_ms: self.visibility_timeout_ms,
                })
            }
            _ => None,
        };
        DeliveryTarget {
            queue_id: self.queue_id,
            delivery_paused: self.delivery_paused,
            message_retention_period: self.message_retention_period,
            consumer,
            dead_letter_queue_id: self.dead_letter_queue_id,
            pulled_in_lanes: self.pulled_in_lanes,
        }
    }
}

/// Replaces a webhook consumer's signing secret; the old one keeps signing for `grace_seconds`.
/// False when the account has no such webhook consumer.
pub async fn rotate_secret(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
    id: ConsumerId,
    new_secret: &str,
    grace_seconds: i64,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "update consumers set previous_signing_secret = signing_secret,
             previous_secret_expires_at = now() + make_interval(secs => $5),
             signing_secret = $4
         where account_id = $1 and id = $3 and kind = 'webhook'
           and queue_id in (select id from queues where account_id = $1 and (id = $2 or parent_queue_id = $2))",
        queue.account().0,
        queue.id().0,
        id.0,
        new_secret,
        grace_seconds as f64,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The channel on which consumer changes are announced.
pub const CHANGES_CHANNEL: &str = "skiplock_changes";

/// Tells every dispatcher that the consumers of `queue` changed (created, updated, deleted, paused), so
/// they read them again now rather than at their next periodic read.
pub async fn announce_change(pool: &PgPool, queue: QueueId) -> Result<(), sqlx::Error> {
    // `$2::uuid::text`: the id is sent as a uuid, as `query!` checks, and notified as its text.
    sqlx::query!("select pg_notify($1, $2::uuid::text)", CHANGES_CHANNEL, queue.0).execute(pool).await.map(|_| ())
}
