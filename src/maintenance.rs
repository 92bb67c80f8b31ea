//! Background upkeep every node runs: deleting messages past their queue's retention period, folding
//! the queue count deltas, and vacuuming the message tables often. Claims and acks leave a dead row
//! behind for every message; autovacuum visits a database at most once a minute, far too rarely for a
//! queue, and claims slow down as they walk dead index entries (docs/design-notes.md). The work is
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
/// must not hold back the next one of `messages`, whose dead index entries every claim walks, and
/// vacuuming often keeps the bodies' table within memory.
pub const VACUUM_EVERY: Duration = Duration::from_secs(5);
/// A table is vacuumed only when it has at least this many dead rows: a queue that is only published to
/// leaves none, and vacuuming its new pages anyway is costly work for nothing.
const VACUUM_DEAD_ROWS: i64 = 1_000;

/// One message table's vacuum.
///
/// Dead rows in `messages` slow every claim (it walks their index entries), so that table is vacuumed
/// whenever it has them. A dead body costs no reader anything, since bodies are only ever read by the
/// id of a live message; vacuuming one only makes room for a new body. So `message_bodies` is vacuumed
/// only when bodies have also been stored since its last vacuum, by this node or any other: a drain with
/// nothing published skips the work, which was a tenth of the machine's CPU while draining a backlog
/// (0.7 s of vacuum every 5 s), and the first publishes after it find the room made.
#[derive(Debug)]
pub struct TableVacuum {
    table: MessageTable,
}

impl TableVacuum {
    pub fn new(table: MessageTable) -> Self {
        TableVacuum { table }
    }

    /// Vacuums the table if it is due, with at least `min_rows` dead rows (and, for the bodies, as many
    /// new rows since its last vacuum). Skipped while another node is vacuuming it. Returns whether it ran.
    pub async fn run_if_due(&self, pool: &PgPool, min_rows: i64) -> Result<bool, sqlx::Error> {
        let (dead, inserted_since) =
            store::maintenance::dead_and_inserted_since_vacuum(pool, self.table.name()).await?;
        let due = dead >= min_rows && (self.table == MessageTable::Messages || inserted_since >= min_rows);
        if due {
            store::maintenance::vacuum(pool, self.table.name()).await?;
        }
        Ok(due)
    }
}

pub async fn run_vacuum(pool: PgPool, table: MessageTable, stop: CancellationToken) {
    let vacuum = TableVacuum::new(table);
    let mut ticker = tokio::time::interval(VACUUM_EVERY);
    // A vacuum that overran its slot is followed by the next one after a full interval, not at once.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        if let Err(err) = vacuum.run_if_due(&pool, VACUUM_DEAD_ROWS).await {
            tracing::warn!(error = %err, table = table.name(), "vacuuming a message table failed; will retry");
        }
    }
}

/// The tables whose growth outdates the plans of the statements that read them.
const PLANNED_TABLES: [&str; 4] = ["messages", "message_bodies", "idempotency_keys", "ordering_keys"];
/// How often their sizes are compared with the planner's statistics, and the least growth (in pages)
/// that counts.
const STATISTICS_EVERY: Duration = Duration::from_millis(250);
const STATISTICS_MIN_GROWTH: i64 = 32;

/// Keeps the planner's statistics in step with the tables' growth. Statements are prepared once per
/// connection and their generic plans kept; a plan made while a table was small reads it whole once another
/// account fills it, and autovacuum, which would re-plan them by analyzing, comes by at most once a minute.
/// Analyzing a table each time it has doubled re-plans every statement that reads it, a few times as it
/// grows (docs/design-notes.md). Tables grow by publishes, so a node looks only after it stored some: the
/// node that fills them analyzes them, and an idle node makes no query.
pub async fn run_statistics(pool: PgPool, activity: Arc<Activity>, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(STATISTICS_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut published_at_last_look = activity.metrics.published.get();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let published = activity.metrics.published.get();
        if published == published_at_last_look {
            continue;
        }
        match refresh_statistics(&pool).await {
            Ok(_) => published_at_last_look = published,
            Err(err) => tracing::warn!(error = %err, "refreshing planner statistics failed; will retry"),
        }
    }
}

/// Analyzes each table that has at least doubled since its statistics were gathered; returns them.
pub async fn refresh_statistics(pool: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    let outgrown = store::maintenance::outgrown_statistics(pool, &PLANNED_TABLES, STATISTICS_MIN_GROWTH).await?;
    for table in &outgrown {
        store::maintenance::analyze(pool, table).await?;
    }
    Ok(outgrown)
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
        if let Err(err) = store::activity::prune(&pool).await {
            tracing::warn!(error = %err, "pruning queue activity failed; will retry");
        }
        if let Err(err) = forget_expired_keys(&pool).await {
            tracing::warn!(error = %err, "forgetting expired idempotency keys failed; will retry");
        }
    }
}

/// Keys removed per statement: small enough that a removal never holds up publishes for long.
const KEY_SWEEP_BATCH: i64 = 5_000;

/// Removes every idempotency key past its window, a bounded batch per statement. Expired keys already
/// no longer count (a publish replaces one), so this only keeps the table small.
pub async fn forget_expired_keys(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    loop {
        let deleted = store::publish::forget_expired_keys(pool, KEY_SWEEP_BATCH).await?;
        total += deleted;
        if deleted < KEY_SWEEP_BATCH as u64 {
            return Ok(total);
        }
    }
}
