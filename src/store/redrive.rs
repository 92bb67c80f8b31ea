//! Redrive tasks: their rows, the set of messages each set out to move, and the batch that moves
//! messages and advances the task in one transaction.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use crate::ids::{MessageId, QueueId, RedriveId};
use crate::store::owned::OwnedQueue;

/// A redrive task as its owner sees it (each statement that returns one lists its columns in full, so
/// that every statement is a literal that `query_as!` checks).
#[derive(Debug, Clone)]
pub struct RedriveTask {
    pub id: RedriveId,
    pub queue_id: QueueId,
    pub destination_queue: Option<String>,
    pub status: String,
    pub moved: i64,
    pub total: i64,
    pub error: Option<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// What a new task asks for.
pub struct NewTask<'a> {
    pub queue: OwnedQueue,
    /// By name; None: each message's source queue.
    pub destination: Option<&'a str>,
    /// Only these messages; None: every message of the queue.
    pub only: Option<&'a [MessageId]>,
    pub max_messages: Option<i64>,
    pub rate_per_second: Option<i32>,
}

#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("no destination queue of that name")]
    NoDestination,
    #[error("the destination is the queue itself")]
    SameQueue,
    #[error("the queue already has a running redrive task")]
    AlreadyRunning,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// Starts a task: records the messages of the queue it will move (in delivery order, after `only` and
/// `max_messages`), so `total` is known at once. A task with nothing to move is completed at once.
pub async fn create(pool: &PgPool, new: NewTask<'_>) -> Result<RedriveTask, CreateError> {
    let mut tx = pool.begin().await?;
    let destination: Option<QueueId> = match new.destination {
        None => None,
        Some(name) => Some(
            sqlx::query_scalar!(
                r#"select id as "id: QueueId" from queues where account_id = $1 and name = $2 for key share"#,
                new.queue.account().0,
                name,
            )
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(CreateError::NoDestination)?,
        ),
    };
    if destination == Some(new.queue.id()) {
        return Err(CreateError::SameQueue);
    }
    let id = RedriveId::new();
    let inserted = sqlx::query!(
        "insert into redrive_tasks (id, account_id, queue_id, destination_queue_id, destination_queue, rate_per_second)
         values ($1, $2, $3, $4, $5, $6)",
        id.0,
        new.queue.account().0,
        new.queue.id().0,
        destination.map(|d| d.0),
        new.destination,
        new.rate_per_second,
    )
    .execute(&mut *tx)
    .await;
    if let Err(err) = inserted {
        return Err(match crate::store::violated_constraint(&err) {
            Some("redrive_tasks_one_running") => CreateError::AlreadyRunning,
            _ => err.into(),
        });
    }
    let only: Option<Vec<Uuid>> = new.only.map(|ids| ids.iter().map(|m| m.0).collect());
    let task = sqlx::query_as!(
        RedriveTask,
        r#"with chosen as (
             insert into redrive_messages (task_id, message_id)
             select $1, m.id from messages m
             where m.queue_id = $2 and ($3::uuid[] is null or m.id = any($3))
             order by m.available_at, m.id
             limit $4
             returning 1)
         update redrive_tasks set total = (select count(*) from chosen),
             status = case when (select count(*) from chosen) = 0 then 'completed' else status end,
             finished_at = case when (select count(*) from chosen) = 0 then now() end
         where id = $1
         returning id as "id: RedriveId", queue_id as "queue_id: QueueId", destination_queue, status, moved, total, error,
                   started_at, finished_at"#,
        id.0,
        new.queue.id().0,
        only.as_deref(),
        new.max_messages,
    )
    .fetch_one(&mut *tx)
    .await?;
    // A task with nothing to move is finished as it is made.
    super::events::record_redrive_finished(&mut tx, id.0).await?;
    tx.commit().await?;
    Ok(task)
}

/// The queue's tasks, newest first: `limit` of them after the first `offset`, and how many there are in all.
pub async fn list(
    pool: &PgPool,
    queue: OwnedQueue,
    limit: i64,
    offset: i64,
) -> Result<(Vec<RedriveTask>, i64), sqlx::Error> {
    let tasks = sqlx::query_as!(
        RedriveTask,
        r#"select id as "id: RedriveId", queue_id as "queue_id: QueueId", destination_queue, status, moved, total, error,
                   started_at, finished_at
         from redrive_tasks where account_id = $1 and queue_id = $2 order by started_at desc, id desc
         limit $3 offset $4"#,
        queue.account().0,
        queue.id().0,
        limit,
        offset,
    )
    .fetch_all(pool)
    .await?;
    let total = sqlx::query_scalar!(
        r#"select count(*) as "count!" from redrive_tasks where account_id = $1 and queue_id = $2"#,
        queue.account().0,
        queue.id().0,
    )
    .fetch_one(pool)
    .await?;
    Ok((tasks, total))
}

pub async fn get(pool: &PgPool, queue: OwnedQueue, id: RedriveId) -> Result<Option<RedriveTask>, sqlx::Error> {
    sqlx::query_as!(
        RedriveTask,
        r#"select id as "id: RedriveId", queue_id as "queue_id: QueueId", destination_queue, status, moved, total, error,
                   started_at, finished_at
         from redrive_tasks where account_id = $1 and queue_id = $2 and id = $3"#,
        queue.account().0,
        queue.id().0,
        id.0,
    )
    .fetch_optional(pool)
    .await
}

/// Cancels a running task (messages already moved stay moved) and forgets the messages it had left;
/// a task that is not running is returned as it is. Waits for a batch in progress, which holds the row.
pub async fn cancel(pool: &PgPool, queue: OwnedQueue, id: RedriveId) -> Result<Option<RedriveTask>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let cancelled = sqlx::query_as!(
        RedriveTask,
        r#"update redrive_tasks set status = 'cancelled', finished_at = now(), lease_token = null
         where account_id = $1 and queue_id = $2 and id = $3 and status = 'running'
         returning id as "id: RedriveId", queue_id as "queue_id: QueueId", destination_queue, status, moved, total, error,
                   started_at, finished_at"#,
        queue.account().0,
        queue.id().0,
        id.0,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if cancelled.is_some() {
        sqlx::query!("delete from redrive_messages where task_id = $1", id.0).execute(&mut *tx).await?;
        super::events::record_redrive_finished(&mut tx, id.0).await?;
    }
    tx.commit().await?;
    match cancelled {
        Some(task) => Ok(Some(task)),
        None => get(pool, queue, id).await,
    }
}

/// A running task a node holds: `token` proves the lease is still its own.
#[derive(Debug, Clone, Copy)]
pub struct Held {
    pub id: RedriveId,
    pub token: Uuid,
    pub rate_per_second: Option<i32>,
}

/// Takes a running task that no node holds (never taken, released, or its node's lease ran out) for
/// `lease_seconds`. Across all accounts: only the redrive runner calls it.
pub async fn take(db: impl PgExecutor<'_>, lease_seconds: f64) -> Result<Option<Held>, sqlx::Error> {
    sqlx::query_as!(
        Held,
        r#"update redrive_tasks t set lease_until = now() + make_interval(secs => $1), lease_token = $2
         where t.id = (
             select id from redrive_tasks where status = 'running' and lease_until < now()
             order by started_at limit 1
             for update skip locked)
         returning t.id as "id: RedriveId", t.lease_token as "token!", t.rate_per_second"#,
        lease_seconds,
        Uuid::new_v4(),
    )
    .fetch_optional(db)
    .await
}

/// Gives a held task back so that any node may take it at once (a node stopping).
pub async fn release(db: impl PgExecutor<'_>, held: Held) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update redrive_tasks set lease_until = '-infinity', lease_token = null where id = $1 and lease_token = $2",
        held.id.0,
        held.token,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// What one batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The task is no longer this node's: cancelled, finished, or its lease was taken over.
    Lost,
    /// `moved` messages moved; `selected` were looked at (0: what is left is all in flight).
    Moved { moved: i64, selected: i64, finished: bool },
}

struct StepRow {
    selected: i64,
    moved: i64,
    destinations: Vec<QueueId>,
}

/// Moves up to `limit` of the task's messages in one transaction: each goes to the destination (or
/// its source queue) with its id, body, content type and publish time, attempts from 0 and deliverable
/// at once; the queues' count deltas are written and the task advanced in the same transaction, so a
/// crash at any moment neither loses nor repeats a move. A message whose destination does not exist
/// stays (counted in `stayed`); one that left the queue meanwhile (acked, purged, expired) no longer
/// counts in `total`; one leased by a consumer waits for its lease to end. Renews the lease.
pub async fn step(pool: &PgPool, held: Held, limit: i64, lease_seconds: f64) -> Result<Step, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let row = sqlx::query_as!(
        StepRow,
        r#"with task as (
             select id, account_id, queue_id, destination_queue_id from redrive_tasks
             where id = $1 and lease_token = $2 and status = 'running'
             for update),
         batch as (
             select r.message_id from redrive_messages r left join messages m on m.id = r.message_id
             where r.task_id = (select id from task)
               and not coalesce(m.leased and m.available_at > now(), false)
             order by r.message_id
             limit $3),
         candidates as (
             select m.id, m.size, m.published_at, coalesce(t.destination_queue_id, m.dead_letter_source) as dest
             from messages m cross join task t
             where m.id = any(array(select message_id from batch)) and m.queue_id = t.queue_id
               and not (m.leased and m.available_at > now())
             for update of m skip locked),
         destinations as (
             select id from queues
             where id = any(array(select dest from candidates)) and account_id = (select account_id from task)
             for key share),
         moved as (
             update messages m set queue_id = c.dest, attempts = 0, leased = false, available_at = now(),
                 dead_letter_source = null, dead_letter_consumer = null, dead_lettered_at = null
             from candidates c
             where m.id = c.id and c.dest = any(array(select id from destinations))
             returning m.id, m.size, m.published_at, c.dest),
         deltas as (
             insert into queue_count_deltas (queue_id, messages, bytes, oldest)
             select (select queue_id from task), -count(*), -sum(size), null from moved having count(*) > 0
             union all
             select dest, count(*), sum(size), min(published_at) from moved group by dest),
         stayed as (
             select id from candidates
             where dest is null or not dest = any(array(select id from destinations))),
         gone as (
             select b.message_id as id from batch b
             where not exists (
                 select 1 from messages m where m.id = b.message_id and m.queue_id = (select queue_id from task))),
         settled as (
             delete from redrive_messages r
             where r.task_id = (select id from task)
               and (r.message_id = any(array(select id from moved)) or r.message_id = any(array(select id from stayed))
                    or r.message_id = any(array(select id from gone)))
             returning r.message_id),
         advanced as (
             update redrive_tasks t
             set moved = t.moved + (select count(*) from moved), stayed = t.stayed + (select count(*) from stayed),
                 total = t.total - (select count(*) from gone),
                 lease_until = now() + make_interval(secs => $4)
             where t.id = (select id from task))
         select (select count(*) from batch) as "selected!", (select count(*) from moved) as "moved!",
                array(select distinct dest from moved) as "destinations!: Vec<QueueId>"
         from task"#,
        held.id.0,
        held.token,
        limit,
        lease_seconds,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else { return Ok(Step::Lost) };
    // Sees this batch's deletes: the task is done when nothing it set out to move is left.
    let finished = sqlx::query!(
        "update redrive_tasks t
         set status = case when t.stayed = 0 then 'completed' else 'failed' end, finished_at = now(),
             lease_token = null,
             error = case
                 when t.stayed = 0 then null
                 when t.destination_queue is not null then format(
                     '%s messages stayed in the queue: the destination queue %L no longer exists',
                     t.stayed, t.destination_queue)
                 else format(
                     '%s messages stayed in the queue: the queue they were dead-lettered from no longer exists or was not recorded',
                     t.stayed)
             end
         where t.id = $1 and not exists (select 1 from redrive_messages where task_id = $1)",
        held.id.0,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        > 0;
    if finished {
        super::events::record_redrive_finished(&mut tx, held.id.0).await?;
    }
    tx.commit().await?;
    // Their consumers (a dispatcher, long-polling pulls) learn of the messages as of a publish's; the
    // moves are committed, so a wake-up lost here only waits for the dispatchers' periodic read.
    if !row.destinations.is_empty() {
        if let Err(err) = super::messages::wake(pool, &row.destinations, true).await {
            tracing::warn!(error = %err, "waking the consumers of redriven messages failed");
        }
    }
    Ok(Step::Moved { moved: row.moved, selected: row.selected, finished })
}

/// How many tasks there are in each status, for the metrics.
pub async fn count_by_status(pool: &PgPool) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let rows = sqlx::query!(r#"select status, count(*) as "count!" from redrive_tasks group by status"#)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(|row| (row.status, row.count)).collect())
}
