//! What the webhook dispatcher reads and writes besides messages: the consumers to deliver to,
//! whether a queue has a batch ready, and the dispatch slots that cap batches in flight (held by nodes,
//! `engine::slots`).
//!
//! The dispatcher is an operator-level role: it serves every account, so these reads span accounts;
//! each consumer's work is then scoped to its own queue.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use crate::ids::{AccountId, ConsumerId, QueueId};
use crate::store::owned::OwnedQueue;

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct WebhookConsumerRow {
    pub id: ConsumerId,
    pub account_id: AccountId,
    /// Where its messages wait: its queue, or its lane there (the `consumer_lanes` migration).
    pub queue_id: QueueId,
    /// The queue as the tenant names it, in deliveries.
    pub named_queue_id: QueueId,
    pub queue_name: String,
    pub message_retention_period: i32,
    pub url: String,
    pub signing_secret: String,
    /// The secret rotated out less than its grace period ago, which still signs.
    pub previous_signing_secret: Option<String>,
    pub dead_letter_queue: String,
    pub dead_letter_queue_id: Option<QueueId>,
    pub batch_size: i32,
    pub max_wait_time_ms: i32,
    pub max_concurrency: Option<i32>,
    pub max_retries: i32,
    pub retry_delay: i32,
    pub retry_backoff: crate::queue::consumer::Backoff,
    pub retry_delay_max: Option<i32>,
    /// The endpoint's health as every node's attempts left it (`store::attempts`).
    pub consecutive_failures: i32,
    pub last_failure_at: Option<DateTime<Utc>>,
    pub last_success_at: Option<DateTime<Utc>>,
}

impl WebhookConsumerRow {
    /// The consumer's queue, as the row names it with its account.
    pub fn queue(&self) -> OwnedQueue {
        OwnedQueue::vouched(self.account_id, self.queue_id)
    }
}

/// A webhook consumer as the dispatcher's full read finds it, with whether its queue has a message
/// deliverable now (a wake-up that was missed is made good by this read).
#[derive(Debug, sqlx::FromRow)]
pub struct ActiveConsumer {
    #[sqlx(flatten)]
    pub consumer: WebhookConsumerRow,
    pub has_ready: bool,
}

/// The columns of a `WebhookConsumerRow`, and the tables they come from.
macro_rules! webhook_consumer {
    () => {
        "select c.id, c.account_id, c.queue_id, coalesce(p.id, q.id) as named_queue_id,
    coalesce(p.name, q.name) as queue_name, q.message_retention_period,
    c.url, c.signing_secret,
    case when c.previous_secret_expires_at > now() then c.previous_signing_secret end as previous_signing_secret,
    c.dead_letter_queue, d.id as dead_letter_queue_id, c.batch_size,
    coalesce(c.max_wait_time_ms, 5000) as max_wait_time_ms, c.max_concurrency, c.max_retries,
    c.retry_delay, c.retry_backoff, c.retry_delay_max,
    coalesce(h.consecutive_failures, 0) as consecutive_failures, h.last_failure_at, h.last_success_at"
    };
}
macro_rules! webhook_consumer_from {
    () => {
        "from consumers c
         join queues q on q.id = c.queue_id
         left join queues p on p.id = q.parent_queue_id
         left join queues d on d.account_id = c.account_id and d.name = c.dead_letter_queue and d.id <> q.id
                           and d.id <> coalesce(p.id, q.id)
         left join webhook_health h on h.consumer_id = c.id"
    };
}

/// Every webhook consumer of an active account whose queue is not paused and that is not disabled.
pub async fn active_webhook_consumers(pool: &PgPool) -> Result<Vec<ActiveConsumer>, sqlx::Error> {
    sqlx::query_as(concat!(
        webhook_consumer!(),
        ", exists (select 1 from messages m
                   where m.queue_id = c.queue_id and not m.running and m.available_at <= now()) as has_ready ",
        webhook_consumer_from!(),
        " join accounts a on a.id = c.account_id and a.status = 'active'
         where c.kind = 'webhook' and not q.delivery_paused and c.url is not null and c.signing_secret is not null
           and h.disabled_at is null
         order by c.id",
    ))
    .fetch_all(pool)
    .await
}

/// The queue's webhook consumer `id` (in the queue or a lane of it), paused or not; None when the queue has no
/// such webhook consumer.
pub async fn webhook_consumer(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
    id: ConsumerId,
) -> Result<Option<WebhookConsumerRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        webhook_consumer!(),
        " ",
        webhook_consumer_from!(),
        " where c.account_id = $1 and (q.id = $2 or q.parent_queue_id = $2) and c.id = $3 and c.kind = 'webhook'
           and c.url is not null and c.signing_secret is not null",
    ))
    .bind(queue.account())
    .bind(queue.id())
    .bind(id)
    .fetch_optional(db)
    .await
}

/// Makes sure the consumer has slots `0..count`.
pub async fn ensure_slots(db: impl PgExecutor<'_>, consumer: ConsumerId, count: i32) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into dispatch_slots (consumer_id, slot) select $1, generate_series(0, $2 - 1)
         on conflict do nothing",
    )
    .bind(consumer)
    .bind(count)
    .execute(db)
    .await?;
    Ok(())
}

/// Takes one of the consumer's free slots (numbered under `max`) for node `node`, for `hold_ms` unless
/// renewed; None when every one is held.
pub async fn take_slot(
    db: impl PgExecutor<'_>,
    consumer: ConsumerId,
    max: i32,
    node: Uuid,
    hold_ms: i64,
) -> Result<Option<i32>, sqlx::Error> {
    sqlx::query_scalar(
        "update dispatch_slots s set held_until = now() + make_interval(secs => $4::float8 / 1000), holder = $3
         where (s.consumer_id, s.slot) = (
                   select consumer_id, slot from dispatch_slots
                   where consumer_id = $1 and slot < $2 and held_until < now()
                   limit 1
                   for update skip locked)
         returning s.slot",
    )
    .bind(consumer)
    .bind(max)
    .bind(node)
    .bind(hold_ms as f64)
    .fetch_optional(db)
    .await
}

/// Holds node `node`'s slots (`consumers[i]`, `slots[i]`) for another `hold_ms`; returns those it still
/// held (a slot whose hold ran out may have been taken by another node).
pub async fn renew_slots(
    db: impl PgExecutor<'_>,
    node: Uuid,
    consumers: &[ConsumerId],
    slots: &[i32],
    hold_ms: i64,
) -> Result<Vec<(ConsumerId, i32)>, sqlx::Error> {
    sqlx::query_as(
        "update dispatch_slots s set held_until = now() + make_interval(secs => $4::float8 / 1000)
         from unnest($2::uuid[], $3::int4[]) as h(consumer_id, slot)
         where s.consumer_id = h.consumer_id and s.slot = h.slot and s.holder = $1
         returning s.consumer_id, s.slot",
    )
    .bind(node)
    .bind(consumers)
    .bind(slots)
    .bind(hold_ms as f64)
    .fetch_all(db)
    .await
}

/// Gives node `node`'s slots back, free for any node.
pub async fn give_back_slots(
    db: impl PgExecutor<'_>,
    node: Uuid,
    consumers: &[ConsumerId],
    slots: &[i32],
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update dispatch_slots s set held_until = '-infinity', holder = null
         from unnest($2::uuid[], $3::int4[]) as h(consumer_id, slot)
         where s.consumer_id = h.consumer_id and s.slot = h.slot and s.holder = $1",
    )
    .bind(node)
    .bind(consumers)
    .bind(slots)
    .execute(db)
    .await?;
    Ok(())
}

/// How ready a queue is, by the database's clock.
#[derive(Debug, Clone, Copy, sqlx::FromRow)]
pub struct Readiness {
    /// Messages deliverable now, counted up to the batch size.
    pub ready: i64,
    /// When the first of them became deliverable.
    pub first_ready_at: Option<DateTime<Utc>>,
    /// When the next delayed message becomes deliverable.
    pub next_at: Option<DateTime<Utc>>,
    pub now: DateTime<Utc>,
}

/// How ready the queue is, walking its waiting messages from `floor` (the queue's claim floor).
pub async fn readiness(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
    floor: DateTime<Utc>,
    retention_seconds: i64,
    batch_size: i64,
) -> Result<Readiness, sqlx::Error> {
    sqlx::query_as(
        "with ready as (
             select available_at from messages
             where queue_id = $1 and not running and available_at >= $4 and available_at <= now()
               and published_at > now() - make_interval(secs => $2)
             order by available_at, id
             limit $3)
         select (select count(*) from ready) as ready,
                (select min(available_at) from ready) as first_ready_at,
                (select min(available_at) from messages
                 where queue_id = $1 and not running and available_at > now() and available_at < 'infinity')
                    as next_at,
                now() as now",
    )
    .bind(queue.id())
    .bind(retention_seconds as f64)
    .bind(batch_size)
    .bind(floor)
    .fetch_one(db)
    .await
}
