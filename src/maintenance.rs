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

/// The tables the service vacuums itself: the narrow, hot `messages`, and `message_bodies`, written
/// on publish and ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageTable {
    Messages,
    Bodies,
}

impl MessageTable {
    pub const ALL: [MessageTable; 2] = [MessageTable::Messages, MessageTable::Bodies];

    fn name(self) -> &'static str {
        match self {
            MessageTable::Messages => "messages",
            MessageTable::Bodies => "message_bodies",
        }
    }
}

/// How often each message table is vacuumed, each on a loop of its own: a long vacuum of the bodies
/// must not hold back the next one of `messages`, whose dead index entries every claim walks. Often
/// also keeps the bodies small: at 20k messages/s, every 30 s let a gigabyte of dead bodies pile up,
/// each vacuum of it took 6-30 s and the table outgrew memory.
pub const VACUUM_EVERY: Duration = Duration::from_secs(5);
/// A table is vacuumed only when it has at least this many dead rows. A queue that is only published
/// to leaves none, and vacuuming its new pages anyway took a tenth of the database's time under a
/// publish-only load (a second per `message_bodies` vacuum at 60k messages/s).
const VACUUM_DEAD_ROWS: i64 = 1_000;

/// Vacuums `table` if it holds at least `min_dead_rows` dead rows, skipping it while another node is
/// vacuuming it.
pub async fn vacuum(pool: &PgPool, table: MessageTable, min_dead_rows: i64) -> Result<(), sqlx::Error> {
    let dead: i64 = sqlx::query_scalar(
        "select coalesce((select n_dead_tup from pg_stat_user_tables where relid = $1::regclass), 0)",
    )
    .bind(table.name())
    .fetch_one(pool)
    .await?;
    if dead >= min_dead_rows {
        // VACUUM refuses a transaction block; raw_sql sends it alone with the simple protocol.
        sqlx::raw_sql(&format!("vacuum (skip_locked) {}", table.name())).execute(pool).await?;
    }
    Ok(())
}

pub async fn run_vacuum(pool: PgPool, table: MessageTable, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(VACUUM_EVERY);
    // A vacuum that overran its slot is followed by the next one after a full interval, not at once.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        if let Err(err) = vacuum(&pool, table, VACUUM_DEAD_ROWS).await {
            tracing::warn!(error = %err, table = table.name(), "vacuuming a message table failed; will retry");
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
