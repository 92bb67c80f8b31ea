//! Group commit for webhook acks. A batch whose receiver acked every message hands its acks to one
//! collector, which gathers the batches answered within a few milliseconds of the first and applies
//! them with one statement. At a trickle every batch is a message or two, and an ack statement of its
//! own was the costliest statement per message on the push path; nobody waits on an ack's answer but the
//! batch's own task (its dispatch slot is free again as soon as the receiver answered), so the gathering
//! delays no receiver. It would delay the next delivery where that waits on this ack (a batch with
//! ordering keys, whose next messages the ack lets go): such a batch is applied at once, with whatever
//! else is waiting.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::time::Instant;

use crate::engine::delivery::Delivery;
use crate::ids::MessageId;
use crate::store::messages::AckedBatch;

/// How long the collector gathers after the first batch (longer means fewer statements per pushed
/// message; docs/benchmarks.md), and the most it takes into one statement.
const GATHER: Duration = Duration::from_millis(20);
const MAX_MESSAGES: usize = 1000;
/// Statements in flight at once: under load a full statement goes while the next one gathers.
const MAX_STATEMENTS: usize = 4;

/// What a batch's acks did: None when its queue is gone, else the messages they deleted.
pub type AckAnswer = Result<Option<HashSet<MessageId>>, Arc<sqlx::Error>>;

struct Job {
    batch: AckedBatch,
    at_once: bool,
    done: oneshot::Sender<AckAnswer>,
}

pub struct AckCollector {
    jobs: mpsc::Sender<Job>,
}

impl AckCollector {
    /// Starts the collector; it stops when the collector is dropped.
    pub fn start(delivery: Arc<Delivery>) -> Self {
        let (jobs, queue) = mpsc::channel(16 * 1024);
        tokio::spawn(collect(delivery, queue));
        Self { jobs }
    }

    /// Applies the batch's acks with those of other batches answered about now; `at_once`: without
    /// waiting for others (the next delivery waits on it).
    pub async fn ack(&self, batch: AckedBatch, at_once: bool) -> AckAnswer {
        let (done, answer) = oneshot::channel();
        let stopped = || Arc::new(sqlx::Error::PoolClosed);
        self.jobs.send(Job { batch, at_once, done }).await.map_err(|_| stopped())?;
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }
}

async fn collect(delivery: Arc<Delivery>, mut jobs: mpsc::Receiver<Job>) {
    let statements = Arc::new(Semaphore::new(MAX_STATEMENTS));
    while let Some(first) = jobs.recv().await {
        let until = Instant::now() + if first.at_once { Duration::ZERO } else { GATHER };
        let mut messages = first.batch.ids.len();
        let mut at_once = first.at_once;
        let mut taken = vec![first];
        while messages < MAX_MESSAGES {
            let next = if at_once {
                jobs.try_recv().ok()
            } else {
                tokio::time::timeout_at(until, jobs.recv()).await.ok().flatten()
            };
            let Some(job) = next else { break };
            messages += job.batch.ids.len();
            at_once |= job.at_once;
            taken.push(job);
        }
        let Ok(permit) = statements.clone().acquire_owned().await else { return };
        let delivery = delivery.clone();
        tokio::spawn(async move {
            let (batches, answers): (Vec<_>, Vec<_>) = taken.into_iter().map(|j| (j.batch, j.done)).unzip();
            match delivery.settle_acked_batches(&batches).await {
                Ok(found) => {
                    for (done, found) in answers.into_iter().zip(found) {
                        let _ = done.send(Ok(found));
                    }
                }
                Err(err) => {
                    let err = Arc::new(err);
                    for done in answers {
                        let _ = done.send(Err(err.clone()));
                    }
                }
            }
            drop(permit);
        });
    }
}
