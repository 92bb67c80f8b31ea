//! Backlog figures for publish and pull answers. Counting a queue's messages costs time in proportion
//! to its backlog, so each node counts a queue at most once a second and keeps the figure up to date
//! with its own publishes and acks in between; the answers call these metrics best effort.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::ids::QueueId;
use crate::store::{self, queues::Backlog};

const FRESH_FOR: Duration = Duration::from_secs(1);
const CAPACITY: usize = 10_000;

#[derive(Default)]
pub struct BacklogCache {
    entries: Mutex<HashMap<QueueId, (Backlog, Instant)>>,
}

impl BacklogCache {
    /// The queue's backlog, counted if the figure at hand is older than a second.
    pub async fn get(&self, pool: &PgPool, queue: QueueId) -> Result<Backlog, sqlx::Error> {
        if let Some((backlog, at)) = self.entries.lock().expect("backlog lock").get(&queue) {
            if at.elapsed() < FRESH_FOR {
                return Ok(*backlog);
            }
        }
        let counted = store::queues::backlog(pool, queue).await?;
        let mut entries = self.entries.lock().expect("backlog lock");
        if entries.len() >= CAPACITY {
            entries.retain(|_, (_, at)| at.elapsed() < FRESH_FOR);
        }
        entries.insert(queue, (counted, Instant::now()));
        Ok(counted)
    }

    /// Adds messages this node just stored.
    pub fn added(&self, queue: QueueId, count: usize, bytes: usize, oldest: chrono::DateTime<chrono::Utc>) {
        if let Some((backlog, _)) = self.entries.lock().expect("backlog lock").get_mut(&queue) {
            backlog.count += count as i64;
            backlog.bytes += bytes as i64;
            backlog.oldest = backlog.oldest.or(Some(oldest));
        }
    }

    /// Forgets the figure after messages left the queue (acks, purges), so the next one is counted.
    pub fn forget(&self, queue: QueueId) {
        self.entries.lock().expect("backlog lock").remove(&queue);
    }
}
