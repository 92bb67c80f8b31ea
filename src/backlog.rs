//! Backlog figures for publish and pull answers. Reading a queue's counts costs a query, so each node
//! reads a queue at most about once a second (`spacing` stretches that if the read is slow), by one
//! request at a time (the others answer with the figure at hand), and keeps the figure up to date with
//! its own publishes and acks in between. The answers call these metrics best effort; `GET .../metrics`
//! always reads.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::ids::QueueId;
use crate::store::{self, queues::Backlog};

const FRESH_FOR: Duration = Duration::from_secs(1);
const CAPACITY: usize = 10_000;

/// How long to wait before counting again after a count that took `took`: at least `floor`, and long
/// enough that counting takes at most a twentieth of one connection's time (docs/design-notes.md).
pub fn spacing(took: Duration, floor: Duration) -> Duration {
    floor.max(took * 20)
}

struct Entry {
    backlog: Backlog,
    /// The figure is used until then.
    fresh_until: Instant,
    /// A request is counting this queue now; others use the figure at hand meanwhile.
    counting: bool,
}

#[derive(Default)]
pub struct BacklogCache {
    entries: Mutex<HashMap<QueueId, Entry>>,
}

impl BacklogCache {
    /// The queue's backlog: counted if the figure at hand is older than a second and nobody is
    /// counting it already.
    pub async fn get(&self, pool: &PgPool, queue: QueueId) -> Result<Backlog, sqlx::Error> {
        {
            let mut entries = self.entries.lock().expect("backlog lock");
            if let Some(entry) = entries.get_mut(&queue) {
                if entry.counting || Instant::now() < entry.fresh_until {
                    return Ok(entry.backlog);
                }
                entry.counting = true;
            }
        }
        let started = Instant::now();
        let counted = store::counts::backlog(pool, queue).await;
        let mut entries = self.entries.lock().expect("backlog lock");
        let counted = match counted {
            Ok(counted) => counted,
            Err(err) => {
                if let Some(entry) = entries.get_mut(&queue) {
                    entry.counting = false;
                }
                return Err(err);
            }
        };
        if entries.len() >= CAPACITY {
            let now = Instant::now();
            entries.retain(|_, e| now < e.fresh_until);
        }
        let now = Instant::now();
        let fresh_until = now + spacing(now - started, FRESH_FOR);
        entries.insert(queue, Entry { backlog: counted, fresh_until, counting: false });
        Ok(counted)
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
