//! Each queue's message count, bytes and oldest publish time, as the triggers of the `queue_counts`
//! migration keep them: a row per queue in `queue_counts` plus the deltas written since the last fold.

use sqlx::{PgExecutor, PgPool};

use crate::ids::QueueId;
use crate::store::queues::Backlog;

/// A queue's figures, from the `queue_backlogs` view (its folded row plus the deltas not yet folded).
pub async fn backlog(db: impl PgExecutor<'_>, queue: QueueId) -> Result<Backlog, sqlx::Error> {
    sqlx::query_as(
        "select coalesce(b.messages, 0) as count, coalesce(b.bytes, 0) as bytes, b.oldest
         from (select $1::uuid as queue_id) as q left join queue_backlogs b on b.queue_id = q.queue_id",
    )
    .bind(queue)
    .fetch_one(db)
    .await
}

/// Adds the deltas written so far into `queue_counts`. Any number of nodes can fold at once: each
/// delta is deleted, and so added, by one of them. Rows are upserted in queue order so that two folds
/// never wait on each other in a cycle.
pub async fn fold(pool: &PgPool) -> Result<(), sqlx::Error> {
    sqlx::query(
        "with folded as (delete from queue_count_deltas returning queue_id, messages, bytes, oldest),
              sums as (
                  select queue_id, sum(messages)::int8 as messages, sum(bytes)::int8 as bytes, min(oldest) as oldest
                  from folded group by queue_id)
         insert into queue_counts as c (queue_id, messages, bytes, oldest)
         select queue_id, messages, bytes, oldest from sums order by queue_id
         on conflict (queue_id) do update set
             messages = c.messages + excluded.messages,
             bytes = c.bytes + excluded.bytes,
             oldest = case when c.messages + excluded.messages > 0 then least(c.oldest, excluded.oldest) end",
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Sets every queue's oldest publish time from its messages (deletes leave it too early), forgets the
/// rows of deleted queues that hold nothing, and returns the queues holding messages past their
/// retention period, or whose queue is gone. One pass over the messages.
pub async fn refresh_oldest(pool: &PgPool) -> Result<Vec<QueueId>, sqlx::Error> {
    let expired = sqlx::query_scalar(
        "with oldest as (select queue_id, min(published_at) as oldest from messages group by queue_id),
              stale as (
                  select c.queue_id, o.oldest from queue_counts c left join oldest o on o.queue_id = c.queue_id
                  where c.oldest is distinct from o.oldest
                  order by c.queue_id
                  for update of c),
              refreshed as (update queue_counts c set oldest = s.oldest from stale s where c.queue_id = s.queue_id)
         select o.queue_id from oldest o left join queues q on q.id = o.queue_id
         where q.id is null or o.oldest < now() - make_interval(secs => q.message_retention_period)",
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
