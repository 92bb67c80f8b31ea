//! Backlog figures for publish and pull answers. Reading a queue's counts costs a query, so each node
//! counts a queue when it first answers for it and then keeps the figure up to date with its own
//! publishes and acks; once a second one statement counts again every queue whose figure was asked for
//! since it was last counted (`run`), however many queues that is. The answers call these metrics best
//! effort; `GET .../metrics` always reads.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::ids::QueueId;
use crate::store::{self, queues::Backlog};

pub const FRESH_FOR: Duration = Duration::from_secs(1);
const CAPACITY: usize = 10_000;

struct Entry {
    backlog: Backlog,
    /// When the figure was counted.
    counted_at: Instant,
    /// An answer used the figure since it was counted: the next refresh counts the queue again.
    wanted: bool,
}

#[derive(Default)]
pub struct BacklogCache {
    entries: Mutex<HashMap<QueueId, Entry>>,
}

impl BacklogCache {
    /// The queue's backlog: the figure at hand, or counted now if there is none.
    pub async fn get(&self, pool: &PgPool, queue: QueueId) -> Result<Backlog, sqlx::Error> {
        if let Some(entry) = self.entries.lock().expect("backlog lock").get_mut(&queue) {
            entry.wanted = true;
            return Ok(entry.backlog);
        }
        let counted = store::counts::backlog(pool, queue).await?;
        let mut entries = self.entries.lock().expect("backlog lock");
        if entries.len() >= CAPACITY {
            entries.retain(|_, e| e.wanted);
        }
        entries.insert(queue, Entry { backlog: counted, counted_at: Instant::now(), wanted: false });
        Ok(counted)
    }

    /// Counts again, in one statement, every queue whose figure was used since it was counted and is
    /// older than a second, and forgets those nobody asked for since: they are counted when next asked.
    pub async fn refresh(&self, pool: &PgPool) -> Result<(), sqlx::Error> {
        let started = Instant::now();
        let stale: Vec<QueueId> = {
            let mut entries = self.entries.lock().expect("backlog lock");
            entries.retain(|_, e| e.wanted || e.counted_at.elapsed() < FRESH_FOR);
            entries.iter().filter(|(_, e)| e.wanted && e.counted_at.elapsed() >= FRESH_FOR).map(|(q, _)| *q).collect()
        };
        if stale.is_empty() {
            return Ok(());
        }
        let counted = store::counts::backlogs(pool, &stale).await?;
        let now = Instant::now();
        let mut entries = self.entries.lock().expect("backlog lock");
        for (queue, backlog) in counted {
            // A queue forgotten meanwhile (purged, deleted) and counted afresh keeps the newer figure.
            if let Some(entry) = entries.get_mut(&queue).filter(|e| e.counted_at < started) {
                *entry = Entry { backlog, counted_at: now, wanted: false };
            }
        }
        Ok(())
    }

    /// Adds messages this node just stored.
    pub fn added(&self, queue: QueueId, count: usize, bytes: usize, oldest: chrono::DateTime<chrono::Utc>) {
        if let Some(entry) = self.entries.lock().expect("backlog lock").get_mut(&queue) {
            entry.backlog.count += count as i64;
            entry.backlog.bytes += bytes as i64;
            entry.backlog.oldest = entry.backlog.oldest.or(Some(oldest));
        }
    }

    /// Takes away messages this node just deleted (acks, purges by ref).
    pub fn removed(&self, queue: QueueId, count: usize, bytes: i64) {
        if let Some(entry) = self.entries.lock().expect("backlog lock").get_mut(&queue) {
            entry.backlog.count = (entry.backlog.count - count as i64).max(0);
            entry.backlog.bytes = (entry.backlog.bytes - bytes).max(0);
        }
    }

    /// Forgets the figure after a change it cannot follow (a purge, a dead-lettering), so the next
    /// answer counts.
    pub fn forget(&self, queue: QueueId) {
        self.entries.lock().expect("backlog lock").remove(&queue);
    }
}
