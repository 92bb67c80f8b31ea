//! Group commit for publishes. Every publish request hands its messages to a small pool of writers;
//! a writer takes all publishes waiting at that moment and stores them with one statement and one
//! commit, then answers each. Under load, concurrent single-message publishes share a transaction
//! (one WAL flush for many messages) while each 2xx still means its messages are committed; when the
//! service is idle a publish is written at once, with no added wait.

use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot, Mutex};

use crate::ids::{AccountId, QueueId};
use crate::queue::message::NewMessage;
use crate::store::messages::{self, Publish};

/// The most messages one writer stores in one statement.
const MAX_MESSAGES_PER_COMMIT: usize = 1000;

struct Job {
    account: AccountId,
    queue: QueueId,
    messages: Vec<NewMessage>,
    done: oneshot::Sender<Result<bool, Arc<sqlx::Error>>>,
}

#[derive(Clone)]
pub struct Publisher {
    jobs: mpsc::Sender<Job>,
}

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Database(#[from] Arc<sqlx::Error>),
    #[error("the service is shutting down")]
    Stopped,
}

impl Publisher {
    /// Starts `writers` writers on `pool`. They stop when every `Publisher` clone is dropped.
    pub fn start(pool: PgPool, writers: usize) -> Publisher {
        let (jobs, queue) = mpsc::channel::<Job>(16 * 1024);
        let queue = Arc::new(Mutex::new(queue));
        for _ in 0..writers.max(1) {
            tokio::spawn(write(pool.clone(), queue.clone()));
        }
        Publisher { jobs }
    }

    /// Stores the messages durably. Ok(false): the account has no such queue.
    pub async fn publish(
        &self,
        account: AccountId,
        queue: QueueId,
        messages: Vec<NewMessage>,
    ) -> Result<bool, PublishError> {
        let (done, answer) = oneshot::channel();
        self.jobs.send(Job { account, queue, messages, done }).await.map_err(|_| PublishError::Stopped)?;
        Ok(answer.await.map_err(|_| PublishError::Stopped)??)
    }
}

async fn write(pool: PgPool, queue: Arc<Mutex<mpsc::Receiver<Job>>>) {
    loop {
        // Take everything waiting now (up to the cap), holding the receiver only while collecting.
        let batch = {
            let mut jobs = queue.lock().await;
            let Some(first) = jobs.recv().await else { return };
            let mut count = first.messages.len();
            let mut batch = vec![first];
            while count < MAX_MESSAGES_PER_COMMIT {
                match jobs.try_recv() {
                    Ok(job) => {
                        count += job.messages.len();
                        batch.push(job);
                    }
                    Err(_) => break,
                }
            }
            batch
        };
        let publishes: Vec<Publish<'_>> =
            batch.iter().map(|j| Publish { account: j.account, queue: j.queue, messages: &j.messages }).collect();
        let outcome = messages::publish(&pool, &publishes).await.map_err(Arc::new);
        drop(publishes);
        for job in batch {
            let answer = match &outcome {
                Ok(stored) => Ok(stored.contains(&job.queue)),
                Err(err) => Err(err.clone()),
            };
            let _ = job.done.send(answer);
        }
    }
}
