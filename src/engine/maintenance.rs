//! Background upkeep every node runs: deleting messages past their queue's retention period and those of
//! deleted queues, folding the queue count deltas, and vacuuming the message tables often. Claims and
//! acks leave a dead row behind for every message; autovacuum visits a database at most once a minute,
//! far too rarely for a queue, and claims slow down as they walk dead index entries
//! (docs/design-notes.md). The work is
//! idempotent: sweeps claim rows with SKIP LOCKED, each count delta is folded by one fold, and a
//! vacuum another node is running is skipped, so any number of nodes can run it.

use std::time::Duration;

use sqlx::PgPool;

use crate::engine::activity::Activity;
use crate::engine::attempts::Keeping;
use crate::ids::QueueId;
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

    /// Its partitions, one per generation: vacuum and the statistics work on those.
    fn partitions(self) -> [&'static str; 3] {
        match self {
            MessageTable::Messages => ["messages_0", "messages_1", "messages_old"],
            MessageTable::Bodies => ["message_bodies_0", "message_bodies_1", "message_bodies_old"],
        }
    }
}

/// How often each message table is vacuumed, each on a loop of its own: a long vacuum of the bodies
/// must not hold back the next one of `messages`, whose dead index entries every claim walks, and
/// vacuuming often keeps the bodies' table within memory.
pub const VACUUM_EVERY: Duration = Duration::from_secs(5);
/// A table is vacuumed only when it has at least this many dead rows: a queue that is only published to
/// leaves none, and vacuuming its new pages anyway is costly work for nothing.
pub const VACUUM_DEAD_ROWS: i64 = 1_000;

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

    /// Vacuums each of the table's generations that is due, with at least `min_rows` dead rows (and, for
    /// the bodies, as many new rows since its last vacuum). Skipped while another node vacuums it, or the
    /// rotation truncates it. Returns whether any ran.
    pub async fn run_if_due(&self, pool: &PgPool, min_rows: i64) -> Result<bool, sqlx::Error> {
        let mut ran = false;
        for partition in self.table.partitions() {
            let (dead, inserted_since) = store::maintenance::dead_and_inserted_since_vacuum(pool, partition).await?;
            let due = dead >= min_rows && (self.table == MessageTable::Messages || inserted_since >= min_rows);
            if due {
                store::maintenance::vacuum(pool, partition).await?;
                ran = true;
            }
        }
        Ok(ran)
    }
}

/// The tables whose growth outdates the plans of the statements that read them.
const PLANNED_TABLES: [&str; 8] = [
    "messages_0",
    "messages_1",
    "messages_old",
    "message_bodies_0",
    "message_bodies_1",
    "message_bodies_old",
    "idempotency_keys",
    "ordering_keys",
];
/// How often their sizes are compared with the planner's statistics, and the least growth (in pages)
/// that counts.
pub const STATISTICS_EVERY: Duration = Duration::from_millis(250);
const STATISTICS_MIN_GROWTH: i64 = 32;

/// Keeps the planner's statistics in step with the tables' growth: analyzes each table that has at least
/// doubled since its statistics were gathered, and returns them. Statements are prepared once per
/// connection and their generic plans kept; a plan made while a table was small reads it whole once
/// another account fills it, and autovacuum, which would re-plan them by analyzing, comes by at most once
/// a minute. Analyzing a table each time it has doubled re-plans every statement that reads it, a few
/// times as it grows (docs/design-notes.md).
pub async fn refresh_statistics(pool: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    let outgrown = store::maintenance::outgrown_statistics(pool, &PLANNED_TABLES, STATISTICS_MIN_GROWTH).await?;
    for table in &outgrown {
        store::maintenance::analyze(pool, table).await?;
    }
    Ok(outgrown)
}

/// One turn of the retention upkeep: messages past their retention, activity buckets past the chart's
/// hour, idempotency keys past their window, flow keys with nothing left to hold. Each part is tried even if one before it failed.
pub async fn retention_turn(pool: &PgPool, activity: &Activity, attempts: Keeping) -> Result<(), sqlx::Error> {
    let swept = sweep_expired(pool).await;
    if let Ok(n) = swept {
        if n > 0 {
            activity.expired(n);
            tracing::info!(deleted = n, "deleted messages past their retention period");
        }
    }
    let pruned = store::activity::prune(pool).await;
    let forgotten = forget_expired_keys(pool).await;
    let shares = store::shares::forget_older_than(pool, super::shares::KEPT_SECONDS).await;
    let audited = super::audit::prune(pool).await;
    let idle_flows = forget_idle_flow_keys(pool).await;
    let attempts = super::attempts::prune(pool, attempts).await;
    let deleted = clear_deleted_queues(pool).await;
    let usage = super::usage::upkeep(pool).await;
    swept
        .and(pruned)
        .and(forgotten)
        .and(shares)
        .and(audited)
        .and(idle_flows)
        .and(attempts)
        .and(deleted)
        .and(usage)
        .map(|_| ())
}

/// Messages of a deleted queue removed per statement: each batch holds its rows' locks only until it commits.
const DELETED_QUEUE_BATCH: i64 = 10_000;
/// Deleted queues looked at per turn of the upkeep.
const DELETED_QUEUES_PER_TURN: i64 = 100;

/// Deletes the messages of a deleted queue in batches and forgets the queue once none is left; rows held
/// by a statement in flight at the time stay for a later turn. Whether the queue was forgotten.
pub async fn clear_deleted_queue(pool: &PgPool, queue: QueueId) -> Result<bool, sqlx::Error> {
    while store::messages::delete_of_deleted(pool, queue, DELETED_QUEUE_BATCH).await? >= DELETED_QUEUE_BATCH as u64 {}
    store::queues::forget_deleted(pool, queue).await
}

/// Finishes the deletions of queues that left messages behind (rows held at the time, a node stopped
/// halfway); returns how many it finished.
pub async fn clear_deleted_queues(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut finished = 0;
    for queue in store::queues::deleted(pool, DELETED_QUEUES_PER_TURN).await? {
        finished += u64::from(clear_deleted_queue(pool, queue).await?);
    }
    Ok(finished)
}

/// Keys removed per statement: small enough that a removal never holds up publishes for long.
const KEY_SWEEP_BATCH: i64 = 5_000;

/// Removes every idempotency key past its window, a bounded batch per statement. Expired keys already
/// no longer count (a publish replaces one), so this only keeps the table small.
pub async fn forget_expired_keys(pool: &PgPool) -> Result<u64, sqlx::Error> {
    in_batches(|| store::publish::forget_expired_keys(pool, KEY_SWEEP_BATCH)).await
}

/// Forgets the state of every flow key that has no messages and whose rate would let one go at once, a
/// bounded batch per statement: a key's next message makes its state again.
pub async fn forget_idle_flow_keys(pool: &PgPool) -> Result<u64, sqlx::Error> {
    in_batches(|| store::flow::forget_idle(pool, KEY_SWEEP_BATCH)).await
}

/// Repeats a removal of at most `KEY_SWEEP_BATCH` rows until one removes fewer; returns how many went.
async fn in_batches<F, Fut>(mut remove: F) -> Result<u64, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64, sqlx::Error>>,
{
    let mut total = 0;
    loop {
        let removed = remove().await?;
        total += removed;
        if removed < KEY_SWEEP_BATCH as u64 {
            return Ok(total);
        }
    }
}
