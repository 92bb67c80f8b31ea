//! Queues and their settings, purge state and backlog metrics.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};

use super::{violated_constraint, StoreError};
use crate::ids::{AccountId, QueueId};
use crate::queue::settings::{Jurisdiction, QueueName, QueueSettings};
use crate::store::owned::OwnedQueue;

/// A queue's columns, as each statement that returns a `QueueRow` lists them (written out in each, so that
/// every statement is a literal that `query_as!` checks):
/// `id as "id: QueueId", account_id as "account_id: AccountId", name, delivery_delay, delivery_paused,
/// message_retention_period, created_at, modified_at, purge_started_at, purge_completed, jurisdiction,
/// idempotency_window`.
#[derive(Debug, Clone)]
pub struct QueueRow {
    pub id: QueueId,
    pub account_id: AccountId,
    pub name: String,
    pub delivery_delay: i32,
    pub delivery_paused: bool,
    pub message_retention_period: i32,
    pub created_at: DateTime<Utc>,
    pub modified_at: DateTime<Utc>,
    pub purge_started_at: Option<DateTime<Utc>>,
    pub purge_completed: bool,
    pub jurisdiction: Option<String>,
    pub idempotency_window: i32,
}

impl QueueRow {
    pub fn settings(&self) -> QueueSettings {
        QueueSettings {
            delivery_delay: self.delivery_delay.into(),
            delivery_paused: self.delivery_paused,
            message_retention_period: self.message_retention_period.into(),
            idempotency_window: self.idempotency_window.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, sqlx::FromRow)]
pub struct Backlog {
    pub count: i64,
    pub bytes: i64,
    pub oldest: Option<DateTime<Utc>>,
}

fn map_duplicate(err: sqlx::Error, name: &QueueName) -> StoreError {
    match violated_constraint(&err) {
        Some("queues_account_name_key") => StoreError::DuplicateQueueName(name.as_str().to_owned()),
        _ => err.into(),
    }
}

pub async fn create(
    db: impl PgExecutor<'_>,
    account: AccountId,
    name: &QueueName,
    settings: QueueSettings,
    jurisdiction: Option<Jurisdiction>,
) -> Result<QueueRow, StoreError> {
    sqlx::query_as!(
        QueueRow,
        r#"insert into queues (id, account_id, name, delivery_delay, delivery_paused, message_retention_period,
                             jurisdiction, idempotency_window)
         values ($1, $2, $3, $4, $5, $6, $7, $8)
         returning id as "id: QueueId", account_id as "account_id: AccountId", name, delivery_delay, delivery_paused,
                   message_retention_period, created_at, modified_at, purge_started_at, purge_completed, jurisdiction,
                   idempotency_window"#,
        QueueId::new().0,
        account.0,
        name.as_str(),
        settings.delivery_delay as i32,
        settings.delivery_paused,
        settings.message_retention_period as i32,
        jurisdiction.map(Jurisdiction::as_str),
        settings.idempotency_window as i32,
    )
    .fetch_one(db)
    .await
    .map_err(|e| map_duplicate(e, name))
}

/// The queue named `name`, created with default settings in `source`'s jurisdiction if the account has none
/// (a dead-letter queue: Cloudflare keeps one in its source queue's jurisdiction). None when no queue has
/// that name and `source` is gone, so there was nothing to take the jurisdiction from.
pub async fn ensure(pool: &PgPool, source: OwnedQueue, name: &QueueName) -> Result<Option<QueueRow>, sqlx::Error> {
    sqlx::query!(
        "insert into queues (id, account_id, name, jurisdiction)
         select $1, account_id, $3, jurisdiction from queues where account_id = $2 and id = $4
         on conflict (account_id, name) do nothing",
        QueueId::new().0,
        source.account().0,
        name.as_str(),
        source.id().0,
    )
    .execute(pool)
    .await?;
    sqlx::query_as!(
        QueueRow,
        r#"select id as "id: QueueId", account_id as "account_id: AccountId", name, delivery_delay, delivery_paused,
                  message_retention_period, created_at, modified_at, purge_started_at, purge_completed, jurisdiction,
                  idempotency_window
         from queues where account_id = $1 and name = $2"#,
        source.account().0,
        name.as_str(),
    )
    .fetch_optional(pool)
    .await
}

/// The account's queue named `name`, if it has one.
pub async fn named(db: impl PgExecutor<'_>, account: AccountId, name: &str) -> Result<Option<OwnedQueue>, sqlx::Error> {
    sqlx::query_scalar("select id from queues where account_id = $1 and name = $2 and parent_queue_id is null")
        .bind(account.0)
        .bind(name)
        .fetch_optional(db)
        .await
        .map(|id: Option<uuid::Uuid>| id.map(|id| OwnedQueue::vouched(account, QueueId(id))))
}

pub async fn count(db: impl PgExecutor<'_>, account: AccountId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select count(*) as "count!" from queues where account_id = $1 and parent_queue_id is null"#,
        account.0
    )
    .fetch_one(db)
    .await
}

pub async fn get(db: impl PgExecutor<'_>, queue: OwnedQueue) -> Result<Option<QueueRow>, sqlx::Error> {
    sqlx::query_as!(
        QueueRow,
        r#"select id as "id: QueueId", account_id as "account_id: AccountId", name, delivery_delay, delivery_paused,
                  message_retention_period, created_at, modified_at, purge_started_at, purge_completed, jurisdiction,
                  idempotency_window
         from queues where account_id = $1 and id = $2"#,
        queue.account().0,
        queue.id().0,
    )
    .fetch_optional(db)
    .await
}

/// The account's queues in creation order, optionally only those with the given names: `limit` of them
/// (None: all) after the first `offset`, and the total count.
pub async fn list(
    pool: &PgPool,
    account: AccountId,
    names: &[String],
    limit: Option<i64>,
    offset: i64,
) -> Result<(Vec<QueueRow>, i64), sqlx::Error> {
    let rows = sqlx::query_as!(
        QueueRow,
        r#"select id as "id: QueueId", account_id as "account_id: AccountId", name, delivery_delay, delivery_paused,
                  message_retention_period, created_at, modified_at, purge_started_at, purge_completed, jurisdiction,
                  idempotency_window
         from queues
         where account_id = $1 and parent_queue_id is null and (cardinality($2::text[]) = 0 or name = any($2))
         order by created_at, id limit $3 offset $4"#,
        account.0,
        names,
        limit,
        offset,
    )
    .fetch_all(pool)
    .await?;
    let total = sqlx::query_scalar!(
        r#"select count(*) as "count!" from queues
         where account_id = $1 and parent_queue_id is null and (cardinality($2::text[]) = 0 or name = any($2))"#,
        account.0,
        names,
    )
    .fetch_one(pool)
    .await?;
    Ok((rows, total))
}

pub async fn update(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
    name: &QueueName,
    settings: QueueSettings,
) -> Result<Option<QueueRow>, StoreError> {
    sqlx::query_as!(
        QueueRow,
        r#"update queues set name = $3, delivery_delay = $4, delivery_paused = $5,
                message_retention_period = $6, idempotency_window = $7, modified_at = now()
         where account_id = $1 and id = $2
         returning id as "id: QueueId", account_id as "account_id: AccountId", name, delivery_delay, delivery_paused,
                   message_retention_period, created_at, modified_at, purge_started_at, purge_completed, jurisdiction,
                   idempotency_window"#,
        queue.account().0,
        queue.id().0,
        name.as_str(),
        settings.delivery_delay as i32,
        settings.delivery_paused,
        settings.message_retention_period as i32,
        settings.idempotency_window as i32,
    )
    .fetch_optional(db)
    .await
    .map_err(|e| map_duplicate(e, name))
}

/// Deletes the queue (a lane too, `lanes`) with its consumers and lanes, and records each among the
/// deleted queues whose messages are still to go (`messages::delete_of_deleted`), in one transaction;
/// false if there was none. Its messages are deleted after this commits: no ack or claim finds the queue
/// then, and a deletion holding all its rows while acks of them ran deadlocked with those acks.
pub async fn delete(pool: &PgPool, queue: OwnedQueue) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let deleted: Vec<QueueId> = sqlx::query_scalar(
        "with family as (select id from queues where account_id = $1 and (id = $2 or parent_queue_id = $2))
         delete from queues q where q.id in (select id from family) returning q.id",
    )
    .bind(queue.account())
    .bind(queue.id())
    .fetch_all(&mut *tx)
    .await?;
    if deleted.is_empty() {
        return Ok(false);
    }
    sqlx::query("insert into deleted_queues (queue_id) select * from unnest($1::uuid[]) on conflict do nothing")
        .bind(&deleted)
        .execute(&mut *tx)
        .await?;
    // Its flow keys go now, in key order as acks lock them: the deletes of its messages then count none,
    // and cannot hold a message an ack's release waits for while waiting for that ack's key.
    sqlx::query(
        "delete from flow_keys where (queue_id, flow_key) in (
             select queue_id, flow_key from flow_keys where queue_id = any($1) order by queue_id, flow_key for update)",
    )
    .bind(&deleted)
    .execute(&mut *tx)
    .await?;
    sqlx::query("delete from idempotency_keys where queue_id = any($1)").bind(&deleted).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(true)
}

/// Makes lane `lane` of the queue for a further consumer (the `consumer_lanes` migration), with the
/// queue's delivery settings; None when the queue is gone.
pub async fn create_lane(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
    lane: QueueId,
) -> Result<Option<OwnedQueue>, sqlx::Error> {
    let made: Option<QueueId> = sqlx::query_scalar(
        "insert into queues (id, account_id, name, delivery_delay, delivery_paused, message_retention_period,
                             jurisdiction, idempotency_window, parent_queue_id)
         select $3, account_id, '~' || replace($3::text, '-', ''), delivery_delay, delivery_paused,
                message_retention_period, jurisdiction, 0, id
         from queues where account_id = $1 and id = $2 and parent_queue_id is null
         returning id",
    )
    .bind(queue.account())
    .bind(queue.id())
    .bind(lane)
    .fetch_optional(db)
    .await?;
    Ok(made.map(|lane| OwnedQueue::vouched(queue.account(), lane)))
}

/// Deleted queues that may still have messages, the oldest deletions first.
pub async fn deleted(pool: &PgPool, limit: i64) -> Result<Vec<QueueId>, sqlx::Error> {
    sqlx::query_scalar("select queue_id from deleted_queues order by deleted_at limit $1")
        .bind(limit)
        .fetch_all(pool)
        .await
}

/// Forgets a deleted queue once none of its messages is left; false while some are.
pub async fn forget_deleted(pool: &PgPool, queue: QueueId) -> Result<bool, sqlx::Error> {
    let forgotten = sqlx::query(
        "delete from deleted_queues d
         where d.queue_id = $1 and not exists (select 1 from messages m where m.queue_id = d.queue_id)",
    )
    .bind(queue)
    .execute(pool)
    .await?;
    Ok(forgotten.rows_affected() > 0)
}

/// Deletes every message of the queue, forgets its idempotency keys (a purge starts the queue afresh)
/// and records the purge; None if there is no such queue.
pub async fn purge(pool: &PgPool, queue: OwnedQueue) -> Result<Option<QueueRow>, sqlx::Error> {
    let id = queue.id();
    let mut tx = pool.begin().await?;
    let row = sqlx::query_as!(
        QueueRow,
        r#"update queues set purge_started_at = now(), purge_completed = true
         where account_id = $1 and id = $2
         returning id as "id: QueueId", account_id as "account_id: AccountId", name, delivery_delay, delivery_paused,
                   message_retention_period, created_at, modified_at, purge_started_at, purge_completed, jurisdiction,
                   idempotency_window"#,
        queue.account().0,
        id.0,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if row.is_some() {
        for lane in lanes(&mut *tx, queue).await? {
            super::messages::delete_all(&mut *tx, lane.id()).await?;
        }
        super::messages::delete_all(&mut *tx, id).await?;
        sqlx::query!("delete from idempotency_keys where queue_id = $1", id.0).execute(&mut *tx).await?;
        tx.commit().await?;
    }
    Ok(row)
}

/// Where a consumer's exhausted messages go: `known` when the consumer's dead-letter queue was found,
/// else the queue named `name`, made again (in the queue's jurisdiction) if it was deleted since. None
/// when the consumer names none, when the queue is gone, or when the name is now the queue's own (it was
/// renamed), which would loop messages forever.
pub async fn dead_letter_target(
    pool: &PgPool,
    queue: OwnedQueue,
    name: &str,
    known: Option<QueueId>,
) -> Result<Option<QueueId>, sqlx::Error> {
    if known.is_some() || name.is_empty() {
        return Ok(known);
    }
    let Ok(name) = QueueName::parse("dead_letter_queue", name) else { return Ok(None) };
    let made = ensure(pool, queue, &name).await?;
    Ok(made.map(|dead_letter| dead_letter.id).filter(|id| *id != queue.id()))
}

/// The lanes of the queue's further consumers (the `consumer_lanes` migration), oldest first.
pub async fn lanes(db: impl PgExecutor<'_>, queue: OwnedQueue) -> Result<Vec<OwnedQueue>, sqlx::Error> {
    let ids: Vec<QueueId> = sqlx::query_scalar(
        "select id from queues where account_id = $1 and parent_queue_id = $2 order by created_at, id",
    )
    .bind(queue.account())
    .bind(queue.id())
    .fetch_all(db)
    .await?;
    Ok(ids.into_iter().map(|lane| OwnedQueue::vouched(queue.account(), lane)).collect())
}

/// Deletes the messages waiting in the queue itself, not those in its lanes: its own consumer was
/// deleted while others read on, and nothing should wait there for no one.
pub async fn clear_own(pool: &PgPool, queue: OwnedQueue) -> Result<u64, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let owned: Option<QueueId> = sqlx::query_scalar("select id from queues where account_id = $1 and id = $2")
        .bind(queue.account())
        .bind(queue.id())
        .fetch_optional(&mut *tx)
        .await?;
    let Some(id) = owned else { return Ok(0) };
    let deleted = super::messages::delete_all(&mut *tx, id).await?;
    tx.commit().await?;
    Ok(deleted)
}
