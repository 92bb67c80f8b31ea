//! Deleting an account: started by the operator (its tokens removed at once), then worked through by a
//! background task on any node, which holds the deletion while it works so that no two nodes work on one
//! account and another node takes it over when the one working on it stops.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::{AccountId, QueueId};
use crate::queue::account::AccountStatus;

/// Marks the account as being deleted and removes its tokens, in one transaction. An account being or
/// already deleted is left as it is. False when there is no such account.
pub async fn start(pool: &PgPool, account: AccountId) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let found = sqlx::query_scalar!(
        r#"update accounts
           set status = case when status in ('deleting', 'deleted') then status else 'deleting' end,
               status_changed_at = case when status in ('deleting', 'deleted') then status_changed_at else now() end,
               deletion_started_at = coalesce(deletion_started_at, now())
           where id = $1
           returning id"#,
        account.0
    )
    .fetch_optional(&mut *tx)
    .await?;
    if found.is_none() {
        return Ok(false);
    }
    super::tokens::delete_all(&mut *tx, account).await?;
    tx.commit().await?;
    Ok(true)
}

/// An account's deletion, as far as it went.
#[derive(Debug, Clone)]
pub struct DeletionRow {
    pub status: AccountStatus,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub deleted_queues: i64,
    pub deleted_messages: i64,
    pub remaining_queues: i64,
    pub remaining_messages: i64,
}

/// How far the account's deletion went, and what is left; None when there is no such account.
pub async fn progress(pool: &PgPool, account: AccountId) -> Result<Option<DeletionRow>, sqlx::Error> {
    sqlx::query_as!(
        DeletionRow,
        r#"select a.status as "status: AccountStatus", a.deletion_started_at as started_at,
                  a.deletion_finished_at as finished_at, a.deleted_queues, a.deleted_messages,
                  (select count(*) from queues q where q.account_id = a.id) as "remaining_queues!",
                  (select coalesce(sum(b.messages), 0)::int8 from queue_backlogs b
                     join queues q on q.id = b.queue_id where q.account_id = a.id) as "remaining_messages!"
           from accounts a where a.id = $1"#,
        account.0
    )
    .fetch_optional(pool)
    .await
}

/// Takes the oldest deletion no node holds for `node`, holding it for `hold_seconds`.
pub async fn claim(pool: &PgPool, node: Uuid, hold_seconds: f64) -> Result<Option<AccountId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"update accounts set deletion_held_until = now() + make_interval(secs => $2), deletion_holder = $1
           where id = (select id from accounts
                       where status = 'deleting' and (deletion_held_until is null or deletion_held_until < now())
                       order by deletion_started_at limit 1
                       for update skip locked)
           returning id as "id: AccountId""#,
        node,
        hold_seconds
    )
    .fetch_optional(pool)
    .await
}

/// One of the account's queues, if it has any left.
pub async fn next_queue(pool: &PgPool, account: AccountId) -> Result<Option<QueueId>, sqlx::Error> {
    sqlx::query_scalar!(r#"select id as "id: QueueId" from queues where account_id = $1 limit 1"#, account.0)
        .fetch_optional(pool)
        .await
}

/// Counts what `node` deleted and holds the deletion `hold_seconds` longer; false when `node` no longer
/// holds it (finished, or taken over by another node after the hold ran out).
pub async fn went(
    pool: &PgPool,
    account: AccountId,
    node: Uuid,
    (queues, messages): (i64, i64),
    hold_seconds: f64,
) -> Result<bool, sqlx::Error> {
    let held = sqlx::query!(
        "update accounts
         set deleted_queues = deleted_queues + $3, deleted_messages = deleted_messages + $4,
             deletion_held_until = now() + make_interval(secs => $5)
         where id = $1 and status = 'deleting' and deletion_holder = $2",
        account.0,
        node,
        queues,
        messages,
        hold_seconds,
    )
    .execute(pool)
    .await?;
    Ok(held.rows_affected() == 1)
}

/// Marks the deletion done once the account has no queue left and it started at least `settled_seconds`
/// ago, removing any token made meanwhile and moving it off its plan (so that the plan can go); a
/// deletion not yet settled is let go, for the next look to finish. True when it is done.
pub async fn finish(pool: &PgPool, account: AccountId, settled_seconds: f64) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let done = sqlx::query_scalar!(
        r#"update accounts
           set status = case when deletion_started_at < now() - make_interval(secs => $2) then 'deleted' else status end,
               status_changed_at = case when deletion_started_at < now() - make_interval(secs => $2) then now()
                                        else status_changed_at end,
               deletion_finished_at = case when deletion_started_at < now() - make_interval(secs => $2) then now() end,
               deletion_held_until = null, deletion_holder = null
           where id = $1 and status = 'deleting' and not exists (select 1 from queues q where q.account_id = $1)
           returning status = 'deleted' as "done!""#,
        account.0,
        settled_seconds,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if done == Some(true) {
        super::tokens::delete_all(&mut *tx, account).await?;
        super::topics::delete_all(&mut *tx, account).await?;
        sqlx::query!(
            "update accounts set plan = 'default', limit_overrides = '{}' where id = $1 and plan <> 'default'",
            account.0
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(done == Some(true))
}
