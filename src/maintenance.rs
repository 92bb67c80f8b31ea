//! Background upkeep every node runs: deleting messages past their queue's retention period, folding
//! the queue count deltas, and vacuuming the message tables often. Claims and acks leave a dead row
//! behind for every message; autovacuum visits a database at most once a minute, far too rarely for a
//! queue, and claims slow down as they walk dead index entries (PERF-NOTES.md). The work is
//! idempotent: sweeps claim rows with SKIP LOCKED, each count delta is folded by one fold, and a
//! vacuum another node is running is skipped, so any number of nodes can run it.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::activity::Activity;
use crate::store;

const SWEEP_BATCH: i64 = 10_000;

/// Deletes every expired message, in batches, from the queues that hold some; returns how many went.
/// Finding those queues refreshes the oldest publish time of queues that had messages deleted.
pub async fn sweep_expired(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    for queue in store::counts::refresh_oldest(pool).await? {
        loop {
            let deleted = store::messages::delete_expired(pool, queue, SWEEP_BATCH).await?;
            total += deleted;
            if deleted < SWEEP_BATCH as u64 {
                break;
            }
        }
    }
    Ok(total)
}

/// How often the narrow, hot `messages` table is vacuumed; `message_bodies`, larger and written only
/// on publish and ack, every `BODIES_EVERY`th time.
pub const VACUUM_EVERY: Duration = Duration::from_secs(5);
const BODIES_EVERY: u32 = 6;
/// A table is vacuumed only when it has at least this many dead rows. A queue that is only published
/// to leaves none, and vacuuming its new pages anyway took a tenth of the database's time under a
/// publish-only load (a second per `message_bodies` vacuum at 60k messages/s).
const VACUUM_DEAD_ROWS: i64 = 1_000;

/// Vacuums `messages` (and `message_bodies` when `bodies`) if they hold at least `min_dead_rows` dead
/// rows, skipping a table another node is vacuuming.
pub async fn vacuum(pool: &PgPool, bodies: bool, min_dead_rows: i64) -> Result<(), sqlx::Error> {
    let (messages_dead, bodies_dead): (i64, i64) = sqlx::query_as(
        "select coalesce((select n_dead_tup from pg_stat_user_tables where relid = 'messages'::regclass), 0),
                coalesce((select n_dead_tup from pg_stat_user_tables where relid = 'message_bodies'::regclass), 0)",
    )
    .fetch_one(pool)
    .await?;
    // VACUUM refuses a transaction block; raw_sql sends it alone with the simple protocol.
    if messages_dead >= min_dead_rows {
        sqlx::raw_sql("vacuum (skip_locked) messages").execute(pool).await?;
    }
    if bodies && bodies_dead >= min_dead_rows {
        sqlx::raw_sql("vacuum (skip_locked) message_bodies").execute(pool).await?;
    }
    Ok(())
}

pub async fn run_vacuum(pool: PgPool, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(VACUUM_EVERY);
    for round in 0u32.. {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        if let Err(err) = vacuum(&pool, round % BODIES_EVERY == 0, VACUUM_DEAD_ROWS).await {
            tracing::warn!(error = %err, "vacuuming the message tables failed; will retry");
        }
    }
}

/// How often the queue count deltas are folded; readers add the unfolded ones, so this bounds the
/// work of a read rather than how fresh it is.
const FOLD_EVERY: Duration = Duration::from_secs(1);

pub async fn run_count_folding(pool: PgPool, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(FOLD_EVERY);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        if let Err(err) = store::counts::fold(&pool).await {
            tracing::warn!(error = %err, "folding queue counts failed; will retry");
        }
    }
}

pub async fn run(pool: PgPool, activity: Arc<Activity>, every: Duration, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        match sweep_expired(&pool).await {
            Ok(0) => {}
            Ok(n) => {
                activity.expired(n);
                tracing::info!(deleted = n, "deleted messages past their retention period");
            }
            Err(err) => tracing::warn!(error = %err, "retention sweep failed; will retry"),
        }
        if let Err(err) = crate::activity::prune(&pool).await {
            tracing::warn!(error = %err, "pruning queue activity failed; will retry");
        }
    }
}
