//! Each queue's message count, bytes and oldest publish time, as the triggers of the `queue_counts`
//! migration keep them: a row per queue in `queue_counts` plus the deltas written since the last fold.

use sqlx::{PgConnection, PgExecutor, PgPool};

use crate::ids::QueueId;
use crate::store::queues::Backlog;
use crate::store::usage::Usage;

/// A queue's figures, from the `queue_backlogs` view (its folded row plus the deltas not yet folded). A
/// queue with several consumers counts as its furthest-behind consumer: the largest count and bytes among
/// the queue and its lanes (the `consumer_lanes` migration), and the oldest message of any.
pub async fn backlog(db: impl PgExecutor<'_>, queue: QueueId) -> Result<Backlog, sqlx::Error> {
    sqlx::query_as(
        "select coalesce(max(b.messages), 0)::int8 as count, coalesce(max(b.bytes), 0)::int8 as bytes, min(b.oldest) as oldest
         from (select $1::uuid as queue_id union all select id from queues where parent_queue_id = $1) as q
         left join queue_backlogs b on b.queue_id = q.queue_id",
    )
    .bind(queue)
    .fetch_one(db)
    .await
}

/// The figures of many queues in one statement (a queue with no row counts nothing), as `backlog`.
pub async fn backlogs(db: impl PgExecutor<'_>, queues: &[QueueId]) -> Result<Vec<(QueueId, Backlog)>, sqlx::Error> {
    let rows: Vec<(QueueId, i64, i64, Option<chrono::DateTime<chrono::Utc>>)> = sqlx::query_as(
        "select q.queue_id, coalesce(max(b.messages), 0)::int8, coalesce(max(b.bytes), 0)::int8, min(b.oldest)
         from unnest($1::uuid[]) as q(queue_id)
         cross join lateral (select q.queue_id as id union all select id from queues where parent_queue_id = q.queue_id) f
         left join queue_backlogs b on b.queue_id = f.id
         group by q.queue_id",
    )
    .bind(queues)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(queue, count, bytes, oldest)| (queue, Backlog { count, bytes, oldest })).collect())
}

/// Adds the deltas written so far into `queue_counts`. Any number of nodes can fold at once: each
/// delta is deleted, and so added, by one of them. Rows are upserted in queue order so that two folds
/// never wait on each other in a cycle. A folded delete leaves the queue's oldest time possibly too
/// early, so it marks it not exact, for `refresh_oldest`.
pub async fn fold(pool: &PgPool) -> Result<Usage, sqlx::Error> {
    fold_from(pool, "queue_count_deltas").await
}

/// `fold`, when the deltas take more than `most_bytes` on disk; the usage it folded, if it did. Below that the
/// rotation's fold of each 10 s half is enough, and a busy queue's `queue_counts` row gets a version
/// every 10 s rather than every second, which matters while a snapshot held elsewhere keeps them all.
pub async fn fold_if_over(pool: &PgPool, most_bytes: i64) -> Result<Option<Usage>, sqlx::Error> {
    let bytes: i64 = sqlx::query_scalar(
        "select pg_relation_size('queue_count_deltas_0') + pg_relation_size('queue_count_deltas_1')",
    )
    .fetch_one(pool)
    .await?;
    if bytes <= most_bytes {
        return Ok(None);
    }
    fold(pool).await.map(Some)
}

/// The halves of `queue_count_deltas`, by half (migration `…01_count_deltas_in_halves`).
const HALVES: [&str; 2] = ["queue_count_deltas_0", "queue_count_deltas_1"];

/// Folds the deltas of the half that writers no longer append to (the clock's other 10 s step) and
/// truncates it, so that its space comes back whatever snapshot is held open elsewhere; the half it
/// truncated and the usage it folded, or None when that half is empty on disk, or in use beyond `lock_timeout_ms`, which leaves it
/// for the next turn. A writer still on that half waits for the lock, or outlasts it. Runs in a savepoint
/// of the caller's transaction.
pub async fn fold_and_truncate(
    conn: &mut PgConnection,
    lock_timeout_ms: u32,
) -> Result<Option<(i16, Usage)>, sqlx::Error> {
    let (half, pages): (i16, i64) = sqlx::query_as(
        "select (1 - count_delta_half())::int2, pg_relation_size(case when count_delta_half() = 0
             then 'queue_count_deltas_1' else 'queue_count_deltas_0' end::regclass)",
    )
    .fetch_one(&mut *conn)
    .await?;
    if pages == 0 {
        return Ok(None);
    }
    let table = HALVES[half as usize];
    sqlx::query("savepoint folding").execute(&mut *conn).await?;
    let attempt = async {
        sqlx::query(&format!("set local lock_timeout = {lock_timeout_ms}")).execute(&mut *conn).await?;
        sqlx::query(&format!("lock table {table} in access exclusive mode")).execute(&mut *conn).await?;
        let folded = fold_from(&mut *conn, table).await?;
        sqlx::query(&format!("truncate {table}")).execute(&mut *conn).await?;
        Ok::<_, sqlx::Error>(folded)
    };
    match attempt.await {
        Ok(folded) => {
            sqlx::query("release savepoint folding").execute(&mut *conn).await?;
            sqlx::query("set local lock_timeout = 0").execute(&mut *conn).await?;
            Ok(Some((half, folded)))
        }
        // lock_not_available: a fold or a writer has the half; try again at the next turn.
        Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("55P03") => {
            sqlx::query("rollback to savepoint folding").execute(&mut *conn).await?;
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// The usage columns of the deltas and of `usage_hours`, in one order (the `usage` migration).
macro_rules! usage_columns {
    () => {
        "published, published_bytes, delivered, delivered_bytes, acked, retried, dead_lettered, expired, write_ops, \
         read_ops, delete_ops"
    };
}

/// The totals of the usage columns of `folded`, named as `Usage`'s fields.
macro_rules! usage_totals {
    () => {
        "coalesce(sum(published), 0)::int8 as published, coalesce(sum(published_bytes), 0)::int8 as published_bytes,
         coalesce(sum(delivered), 0)::int8 as delivered, coalesce(sum(delivered_bytes), 0)::int8 as delivered_bytes,
         coalesce(sum(acked), 0)::int8 as acked, coalesce(sum(retried), 0)::int8 as retried,
         coalesce(sum(dead_lettered), 0)::int8 as dead_lettered, coalesce(sum(expired), 0)::int8 as expired,
         coalesce(sum(write_ops), 0)::int8 as write_ops, coalesce(sum(read_ops), 0)::int8 as read_ops,
         coalesce(sum(delete_ops), 0)::int8 as delete_ops, 0::int8 as storage_byte_seconds"
    };
}

/// The fold of the deltas in `table` (the whole table, or one half): their counts into `queue_counts`, and
/// their usage into `usage_hours` by the hour each was written in (a lane's under its queue), in the same statement, so that usage is
/// added once whatever crashes (the deltas it adds are deleted by the same commit). Answers the usage it
/// folded, for the node's metrics.
async fn fold_from(db: impl PgExecutor<'_>, table: &str) -> Result<Usage, sqlx::Error> {
    sqlx::query_as(&format!(
        concat!(
            "with folded as (delete from {table} returning queue_id, messages, bytes, oldest, epoch_hour, ",
            usage_columns!(),
            "),
              used as (
                  insert into usage_hours as u (account_id, hour, queue_id, ",
            usage_columns!(),
            ")
                  select q.account_id, to_timestamp(f.epoch_hour::float8 * 3600), coalesce(q.parent_queue_id, f.queue_id),
                         sum(f.published), sum(f.published_bytes), sum(f.delivered), sum(f.delivered_bytes),
                         sum(f.acked), sum(f.retried), sum(f.dead_lettered), sum(f.expired), sum(f.write_ops),
                         sum(f.read_ops), sum(f.delete_ops)
                  from folded f join metered_queues q on q.queue_id = f.queue_id
                  where f.published <> 0 or f.delivered <> 0 or f.acked <> 0 or f.retried <> 0
                     or f.dead_lettered <> 0 or f.expired <> 0 or f.write_ops <> 0 or f.delete_ops <> 0
                  group by q.account_id, f.epoch_hour, coalesce(q.parent_queue_id, f.queue_id)
                  order by q.account_id, f.epoch_hour, coalesce(q.parent_queue_id, f.queue_id)
                  on conflict (account_id, hour, queue_id) do update set
                      published = u.published + excluded.published,
                      published_bytes = u.published_bytes + excluded.published_bytes,
                      delivered = u.delivered + excluded.delivered,
                      delivered_bytes = u.delivered_bytes + excluded.delivered_bytes,
                      acked = u.acked + excluded.acked,
                      retried = u.retried + excluded.retried,
                      dead_lettered = u.dead_lettered + excluded.dead_lettered,
                      expired = u.expired + excluded.expired,
                      write_ops = u.write_ops + excluded.write_ops,
                      read_ops = u.read_ops + excluded.read_ops,
                      delete_ops = u.delete_ops + excluded.delete_ops),
              sums as (
                  select queue_id, sum(messages)::int8 as messages, sum(bytes)::int8 as bytes, min(oldest) as oldest,
                         not bool_or(messages < 0) as oldest_exact
                  from folded group by queue_id),
              counted as (
                  insert into queue_counts as c (queue_id, messages, bytes, oldest, oldest_exact)
                  select queue_id, messages, bytes, oldest, oldest_exact from sums order by queue_id
                  on conflict (queue_id) do update set
                      messages = c.messages + excluded.messages,
                      bytes = c.bytes + excluded.bytes,
                      oldest = case when c.messages + excluded.messages > 0 then least(c.oldest, excluded.oldest) end,
                      oldest_exact = c.messages + excluded.messages = 0 or (c.oldest_exact and excluded.oldest_exact))
         select ",
            usage_totals!(),
            " from folded"
        ),
        table = table
    ))
    .fetch_one(db)
    .await
}

/// Sets the oldest publish time of every queue whose figure is not exact from its messages, forgets
/// the rows of deleted queues that hold nothing, and returns the queues holding messages past their
/// retention period, or whose queue is gone. Folds first, so that recent deletes are seen.
pub async fn refresh_oldest(pool: &PgPool) -> Result<Vec<QueueId>, sqlx::Error> {
    fold(pool).await?;
    let mut tx = pool.begin().await?;
    // The rows are locked before the messages are read, by a later statement with a later snapshot: a
    // delete folded meanwhile would otherwise be marked and then overwritten by a time that predates it.
    let stale: Vec<QueueId> =
        sqlx::query_scalar("select queue_id from queue_counts where not oldest_exact order by queue_id for update")
            .fetch_all(&mut *tx)
            .await?;
    if !stale.is_empty() {
        sqlx::query(
            "update queue_counts c set oldest_exact = true,
                 oldest = (select min(m.published_at) from messages m where m.queue_id = c.queue_id)
             where c.queue_id = any($1)",
        )
        .bind(&stale)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    let expired = sqlx::query_scalar(
        "select b.queue_id from queue_backlogs b left join queues q on q.id = b.queue_id
         where b.messages > 0 and (q.id is null or b.oldest < now() - make_interval(secs => q.message_retention_period))",
    )
    .fetch_all(pool)
    .await?;
    sqlx::query(
        "delete from queue_counts c
         where messages = 0 and not exists (select 1 from queues q where q.id = c.queue_id)",
    )
    .execute(pool)
    .await?;
    Ok(expired)
}
