//! The one place message events are recorded. Each event bumps its Prometheus counter; published and
//! acked counts are also kept per queue in memory and flushed to `queue_activity` in 10-second buckets
//! every few seconds (the dashboard's chart), so hot paths never write a shared counter row and every
//! node's share adds up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sqlx::PgPool;

use crate::ids::QueueId;
use crate::metrics::Metrics;
use crate::queue::consumer::ConsumerKind;
use crate::store;

pub const BUCKET_SECONDS: i64 = 10;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub published: i64,
    pub acked: i64,
}

pub struct Activity {
    pending: Mutex<HashMap<QueueId, Counts>>,
    pub metrics: Arc<Metrics>,
}

impl Activity {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { pending: Mutex::default(), metrics }
    }

    pub fn published(&self, queue: QueueId, n: usize) {
        self.metrics.published.inc_by(n as u64);
        self.pending.lock().expect("activity lock").entry(queue).or_default().published += n as i64;
    }

    pub fn acked(&self, queue: QueueId, kind: ConsumerKind, n: usize) {
        if n > 0 {
            self.metrics.acked.with_label_values(&[kind.as_str()]).inc_by(n as u64);
            self.pending.lock().expect("activity lock").entry(queue).or_default().acked += n as i64;
        }
    }

    pub fn delivered(&self, kind: ConsumerKind, n: usize) {
        self.metrics.delivered.with_label_values(&[kind.as_str()]).inc_by(n as u64);
    }

    pub fn retried(&self, kind: ConsumerKind, n: usize) {
        self.metrics.retried.with_label_values(&[kind.as_str()]).inc_by(n as u64);
    }

    /// Messages whose deliveries ran out: moved to a dead-letter queue, or deleted without one.
    pub fn exhausted(&self, n: usize, to_dead_letter_queue: bool) {
        let counter = if to_dead_letter_queue { &self.metrics.dead_lettered } else { &self.metrics.dropped };
        counter.inc_by(n as u64);
    }

    pub fn extended(&self, n: usize) {
        self.metrics.leases_extended.inc_by(n as u64);
    }

    pub fn expired(&self, n: u64) {
        self.metrics.expired.inc_by(n);
    }

    /// Writes what was counted since the last flush into the current bucket.
    pub async fn flush(&self, pool: &PgPool) -> Result<(), sqlx::Error> {
        let pending = std::mem::take(&mut *self.pending.lock().expect("activity lock"));
        if pending.is_empty() {
            return Ok(());
        }
        let queues: Vec<QueueId> = pending.keys().copied().collect();
        let published: Vec<i64> = queues.iter().map(|q| pending[q].published).collect();
        let acked: Vec<i64> = queues.iter().map(|q| pending[q].acked).collect();
        let written = store::activity::add(pool, &queues, &published, &acked, BUCKET_SECONDS).await;
        if written.is_err() {
            // Keep the counts for the next flush rather than lose them.
            let mut again = self.pending.lock().expect("activity lock");
            for (queue, counts) in pending {
                let entry = again.entry(queue).or_default();
                entry.published += counts.published;
                entry.acked += counts.acked;
            }
        }
        written.map(|_| ())
    }
}
