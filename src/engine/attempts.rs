//! The webhook attempt log: the dispatcher hands each attempt here and goes on; a writer gathers the
//! attempts of a moment and writes them, with the health they change, in one statement. An attempt is a
//! record of what happened, not a part of the message's lifecycle, so it is written after the fact: a node
//! that dies loses the attempts of its last `GATHER` (the messages' own state is unharmed).

use std::collections::HashMap;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::Engine;
use crate::ids::{AccountId, ConsumerId};
use crate::queue::attempt::AttemptOutcome;
use crate::store;
use crate::store::attempts::{AttemptFilter, AttemptRow, HealthChange, HealthRow};
use crate::store::owned::OwnedQueue;

/// How long the writer gathers after the first attempt, and the most it writes at once.
const GATHER: Duration = Duration::from_millis(100);
const MAX_ATTEMPTS: usize = 500;
/// Attempts waiting to be written past which new ones are dropped (and counted) rather than held in memory:
/// a database that cannot keep up with the log must not take the node's memory with it.
const MAX_WAITING: usize = 64 * 1024;

/// How long attempts are kept, and how many per consumer at most.
#[derive(Debug, Clone, Copy)]
pub struct Keeping {
    pub days: f64,
    pub per_consumer: i64,
}

impl Default for Keeping {
    fn default() -> Self {
        Self { days: 3.0, per_consumer: 10_000 }
    }
}

/// Attempts pruned per statement.
const PRUNE_BATCH: i64 = 5_000;

pub struct AttemptLog {
    attempts: mpsc::Sender<AttemptRow>,
    /// What sends a consumer's test batch: the dispatcher, which the composition root hands in.
    sender: std::sync::OnceLock<std::sync::Arc<dyn TestSend>>,
}

/// Sends a signed sample batch to a webhook consumer's endpoint now (`POST .../consumers/{id}/test`),
/// answering the attempt, or None when the queue has no such webhook consumer.
pub trait TestSend: Send + Sync {
    fn test_send(
        &self,
        queue: OwnedQueue,
        consumer: ConsumerId,
    ) -> BoxFuture<'_, Result<Option<AttemptRow>, sqlx::Error>>;
}

impl AttemptLog {
    /// Starts the writer on `pool`; it stops when the log is dropped, writing what it holds.
    pub fn start(pool: sqlx::PgPool, metrics: std::sync::Arc<crate::metrics::Metrics>) -> Self {
        let (attempts, waiting) = mpsc::channel(MAX_WAITING);
        tokio::spawn(write(pool, metrics, waiting));
        Self { attempts, sender: Default::default() }
    }

    /// Makes `sender` the one test sends go through.
    pub fn set_test_sender(&self, sender: std::sync::Arc<dyn TestSend>) {
        let _ = self.sender.set(sender);
    }

    /// Hands the attempt to the writer.
    pub fn record(&self, attempt: AttemptRow) {
        if self.attempts.try_send(attempt).is_err() {
            tracing::warn!("the webhook attempt log is behind; an attempt was not recorded");
        }
    }
}

async fn write(
    pool: sqlx::PgPool,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    mut waiting: mpsc::Receiver<AttemptRow>,
) {
    let mut batch = Vec::with_capacity(MAX_ATTEMPTS);
    while let Some(first) = waiting.recv().await {
        batch.push(first);
        let deadline = tokio::time::Instant::now() + GATHER;
        while batch.len() < MAX_ATTEMPTS {
            match tokio::time::timeout_at(deadline, waiting.recv()).await {
                Ok(Some(attempt)) => batch.push(attempt),
                Ok(None) | Err(_) => break,
            }
        }
        let health = health_changes(&batch);
        // A write that fails (a failover, a pool exhausted for a moment) is tried again: the attempts and
        // the health they change are one transaction, so a retry writes them once.
        for tries in 1.. {
            match write_batch(&pool, &batch, &health).await {
                Ok(()) => {
                    metrics.webhook_attempts_written.inc_by(batch.len() as u64);
                    break;
                }
                Err(err) if tries < WRITE_TRIES => {
                    tracing::warn!(error = %err, attempts = batch.len(), "writing webhook attempts failed; trying again");
                    tokio::time::sleep(RETRY_AFTER * tries).await;
                }
                Err(err) => {
                    tracing::warn!(error = %err, attempts = batch.len(), "writing webhook attempts failed; they are lost");
                    break;
                }
            }
        }
        batch.clear();
    }
}

/// Tries at writing a batch, and the wait before the next try (times the tries so far).
const WRITE_TRIES: u32 = 4;
const RETRY_AFTER: Duration = Duration::from_millis(250);

/// Writes the attempts, the health they change, and the events of the circuits they open or close, in
/// one transaction.
async fn write_batch(pool: &sqlx::PgPool, batch: &[AttemptRow], health: &[HealthChange]) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    let written = store::attempts::write(&mut tx, batch, health).await?;
    let events = super::events::circuit_events(health, &written);
    store::events::record(&mut *tx, &events).await?;
    tx.commit().await
}

/// What the attempts, in the order they were made, do to each consumer's health. Test sends count only
/// when they succeed (a test that fails does not open the circuit of a consumer delivering well).
pub fn health_changes(attempts: &[AttemptRow]) -> Vec<HealthChange> {
    let mut changes: HashMap<ConsumerId, HealthChange> = HashMap::new();
    for a in attempts {
        let change = changes.entry(a.consumer_id).or_insert_with(|| HealthChange {
            account: a.account_id,
            queue: a.queue_id,
            consumer: a.consumer_id,
            trailing_failures: 0,
            last_success_at: None,
            failing_since: None,
            last_failure: None,
        });
        if a.outcome == AttemptOutcome::Success.as_str() {
            change.trailing_failures = 0;
            change.failing_since = None;
            change.last_success_at = Some(a.attempted_at);
        } else if !a.test {
            change.trailing_failures += 1;
            change.failing_since.get_or_insert(a.attempted_at);
            change.last_failure = Some(a.clone());
        }
    }
    changes.into_values().collect()
}

impl Engine {
    /// A page of the attempts to deliver the queue's messages (one consumer's with `consumer`), newest
    /// first, and how many match in all.
    pub async fn attempts(
        &self,
        queue: OwnedQueue,
        consumer: Option<ConsumerId>,
        filter: &AttemptFilter,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<AttemptRow>, i64), sqlx::Error> {
        store::attempts::list(&self.pool, queue, consumer, filter, limit, offset).await
    }

    /// Sends a sample batch to the queue's webhook consumer `consumer` now; None when it has none such.
    pub async fn test_send(&self, queue: OwnedQueue, consumer: ConsumerId) -> Result<Option<AttemptRow>, sqlx::Error> {
        match self.attempt_log.sender.get() {
            Some(sender) => sender.test_send(queue, consumer).await,
            None => Ok(None),
        }
    }

    /// Whether the queue holds message `id` now.
    pub async fn holds_message(&self, queue: OwnedQueue, id: crate::ids::MessageId) -> Result<bool, sqlx::Error> {
        store::messages::holds(&self.pool, queue, id).await
    }

    /// The endpoint health of the account's consumers `consumers`, for those that have had an attempt.
    pub async fn health(&self, account: AccountId, consumers: &[ConsumerId]) -> Result<Vec<HealthRow>, sqlx::Error> {
        if consumers.is_empty() {
            return Ok(Vec::new());
        }
        store::attempts::health(&self.pool, account, consumers).await
    }
}

/// Prunes attempts past `keeping`; part of the retention upkeep.
pub async fn prune(pool: &sqlx::PgPool, keeping: Keeping) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    for by_rows in [false, true] {
        loop {
            let gone = if by_rows {
                store::attempts::prune_beyond(pool, keeping.per_consumer, PRUNE_BATCH).await?
            } else {
                store::attempts::prune_older(pool, keeping.days, PRUNE_BATCH).await?
            };
            total += gone;
            if gone < PRUNE_BATCH as u64 {
                break;
            }
        }
    }
    Ok(total)
}
