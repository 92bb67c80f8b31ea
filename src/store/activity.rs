//! Per-queue activity buckets (messages published and acked per interval), for the dashboard's chart.

use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::QueueId;
use crate::store::owned::OwnedQueue;

/// Adds counts to each queue's current bucket of `bucket_seconds`; queues deleted meanwhile are skipped.
pub async fn add(
    pool: &PgPool,
    queues: &[QueueId],
    published: &[i64],
    acked: &[i64],
    bucket_seconds: i64,
) -> Result<(), sqlx::Error> {
    let queues: Vec<Uuid> = queues.iter().map(|q| q.0).collect();
    sqlx::query!(
        "insert into queue_activity (queue_id, bucket, published, acked)
         select t.queue_id, to_timestamp(floor(extract(epoch from now()) / $4) * $4), t.published, t.acked
         from unnest($1::uuid[], $2::int8[], $3::int8[]) as t(queue_id, published, acked)
         join queues q on q.id = t.queue_id
         on conflict (queue_id, bucket) do update
         set published = queue_activity.published + excluded.published,
             acked = queue_activity.acked + excluded.acked",
        &queues,
        published,
        acked,
        bucket_seconds as f64,
    )
    .execute(pool)
    .await
    .map(|_| ())
}

/// Deletes buckets older than an hour and those of deleted queues.
pub async fn prune(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "delete from queue_activity a
         where a.bucket < now() - interval '1 hour'
            or not exists (select 1 from queues q where q.id = a.queue_id)"
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// Forgets a queue's activity (its account is being deleted).
pub async fn forget(pool: &PgPool, queue: OwnedQueue) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "delete from queue_activity a using queues q
         where a.queue_id = $2 and q.id = a.queue_id and q.account_id = $1",
        queue.account().0,
        queue.id().0
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}
