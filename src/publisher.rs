//! Group commit for publishes. Every publish request hands its messages to one collector, which takes
//! all publishes waiting at that moment and stores them with one statement and one commit, then answers
//! each. Under load, concurrent single-message publishes share a transaction (one WAL flush for many
//! messages) while each 2xx still means its messages are committed; when the service is idle a publish
//! is written at once, with no added wait.
//!
//! One statement at a time, as a rule: statements of many rows cost PostgreSQL far less per message
//! than several concurrent smaller ones. But once a batch is large, a bigger one saves little, while
//! more statements overlap each other's WAL flushes and use more cores: so another statement starts
//! while others are in flight (up to `MAX_STATEMENTS`) only when at least
//! `CONCURRENT_STATEMENT_MESSAGES` are waiting. The figures behind both are in docs/design-notes.md.
//!
//! Statements run on connections the collector keeps rather than gives back to the pool after each:
//! sqlx checks every connection given back with a round trip, which would be one more per publish.
//!
//! Dispatchers and long-polling pulls are woken after the commit by a task of their own, so a wake-up
//! never holds up a publish answer and wake-ups for many commits go out together, as one statement.
//! Only queues a webhook consumer reads, or that long-polling pulls wait on, are woken: notifying every
//! queue read by pulls nearly doubled PostgreSQL's CPU per message for single publishes (one noisy run).

use std::collections::HashSet;
use std::sync::{Arc, Mutex as SyncMutex};
use std::time::Instant;

use sqlx::{Connection, PgConnection, PgPool};
use tokio::sync::{mpsc, oneshot, Notify, Semaphore};

use crate::ids::{AccountId, QueueId};
use crate::queue::message::NewMessage;
use crate::store::messages;
use crate::store::pool::CHECK_IDLE_CONNECTIONS_AFTER;
use crate::store::publish::{self, Publish};

/// The most messages, and bytes of bodies, one statement stores.
const MAX_MESSAGES_PER_COMMIT: usize = 1000;
const MAX_BYTES_PER_COMMIT: usize = 4 * 1024 * 1024;
/// Statements in flight at once, and how many messages must wait before one starts beside another.
const MAX_STATEMENTS: u32 = 4;
const CONCURRENT_STATEMENT_MESSAGES: usize = 100;

struct Job {
    account: AccountId,
    queue: QueueId,
    messages: Vec<NewMessage>,
    done: oneshot::Sender<Result<Option<usize>, Arc<sqlx::Error>>>,
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
    /// Starts the collector on `pool`. It stops when every `Publisher` clone is dropped.
    pub fn start(pool: PgPool) -> Publisher {
        let (jobs, queue) = mpsc::channel::<Job>(16 * 1024);
        let wakes = Arc::new(Wakes::default());
        tokio::spawn(collect(pool.clone(), queue, wakes.clone()));
        tokio::spawn(wake_dispatchers(pool, Arc::downgrade(&wakes)));
        Publisher { jobs }
    }

    /// Stores the messages durably and answers how many were duplicates of keys the queue already
    /// held (not stored). Ok(None): the account has no such queue.
    pub async fn publish(
        &self,
        account: AccountId,
        queue: QueueId,
        messages: Vec<NewMessage>,
    ) -> Result<Option<usize>, PublishError> {
        let (done, answer) = oneshot::channel();
        self.jobs.send(Job { account, queue, messages, done }).await.map_err(|_| PublishError::Stopped)?;
        Ok(answer.await.map_err(|_| PublishError::Stopped)??)
    }
}

/// Publishes waiting to be stored together.
#[derive(Default)]
struct Batch {
    jobs: Vec<Job>,
    messages: usize,
    bytes: usize,
}

impl Batch {
    fn push(&mut self, job: Job) {
        self.messages += job.messages.len();
        self.bytes += job.messages.iter().map(|m| m.body.len()).sum::<usize>();
        self.jobs.push(job);
    }

    fn full(&self) -> bool {
        self.messages >= MAX_MESSAGES_PER_COMMIT || self.bytes >= MAX_BYTES_PER_COMMIT
    }

    /// Adds every job waiting now, up to the caps.
    fn fill(&mut self, jobs: &mut mpsc::Receiver<Job>) {
        while !self.full() {
            let Ok(job) = jobs.try_recv() else { break };
            self.push(job);
        }
    }
}

async fn collect(pool: PgPool, mut jobs: mpsc::Receiver<Job>, wakes: Arc<Wakes>) {
    let connections = Arc::new(Connections { pool, spare: SyncMutex::default() });
    let statements = Arc::new(Semaphore::new(MAX_STATEMENTS as usize));
    let mut batch = Batch::default();
    loop {
        if batch.jobs.is_empty() {
            let Some(job) = jobs.recv().await else { return };
            batch.push(job);
        }
        batch.fill(&mut jobs);
        let busy = statements.available_permits() < MAX_STATEMENTS as usize;
        if busy && batch.messages < CONCURRENT_STATEMENT_MESSAGES && !batch.full() {
            // A statement is running and little waits: gather more until it ends.
            tokio::select! {
                job = jobs.recv() => match job {
                    Some(job) => batch.push(job),
                    None => {
                        let _ = statements.acquire_many(MAX_STATEMENTS).await;
                        store(&connections, std::mem::take(&mut batch), &wakes).await;
                        return;
                    }
                },
                all = statements.acquire_many(MAX_STATEMENTS) => drop(all),
            }
            continue;
        }
        let permit = statements.clone().acquire_owned().await.expect("the semaphore is never closed");
        let (connections, wakes, batch) = (connections.clone(), wakes.clone(), std::mem::take(&mut batch));
        tokio::spawn(async move {
            store(&connections, batch, &wakes).await;
            drop(permit);
        });
    }
}

/// The connections statements run on: taken from the pool when none is spare, and kept (outside the
/// pool's count, at most one per statement in flight) while they work.
struct Connections {
    pool: PgPool,
    spare: SyncMutex<Vec<(PgConnection, Instant)>>,
}

impl Connections {
    async fn take(&self) -> Result<PgConnection, sqlx::Error> {
        loop {
            let spare = self.spare.lock().expect("connections lock").pop();
            let Some((mut conn, idle_since)) = spare else { break };
            // Checked before use after the same idle time as the pool's own connections.
            if idle_since.elapsed() < CHECK_IDLE_CONNECTIONS_AFTER || conn.ping().await.is_ok() {
                return Ok(conn);
            }
        }
        Ok(self.pool.acquire().await?.detach())
    }

    /// Runs the publishes on a connection; one that failed other than with an error from the database
    /// may be broken, and is dropped.
    async fn publish(&self, publishes: &[Publish<'_>]) -> Result<publish::Published, sqlx::Error> {
        let mut conn = self.take().await?;
        let outcome = publish::publish(&mut conn, publishes).await;
        if matches!(outcome, Ok(_) | Err(sqlx::Error::Database(_))) {
            self.spare.lock().expect("connections lock").push((conn, Instant::now()));
        }
        outcome
    }
}

/// Stores a batch with one statement and answers each of its publishes.
async fn store(connections: &Connections, batch: Batch, wakes: &Wakes) {
    let publishes: Vec<Publish<'_>> =
        batch.jobs.iter().map(|j| Publish { account: j.account, queue: j.queue, messages: &j.messages }).collect();
    let outcome = connections.publish(&publishes).await.map_err(Arc::new);
    drop(publishes);
    if let Ok(published) = &outcome {
        wakes.add(published.stored.iter().filter(|s| s.woken).map(|s| s.queue));
    }
    for (index, job) in batch.jobs.into_iter().enumerate() {
        let answer = match &outcome {
            Ok(published) => Ok(published
                .stored
                .iter()
                .any(|s| s.queue == job.queue)
                .then(|| published.duplicates.get(index).copied().unwrap_or(0))),
            Err(err) => Err(err.clone()),
        };
        let _ = job.done.send(answer);
    }
}

/// Queues with new messages whose dispatchers have not been woken yet.
#[derive(Default)]
struct Wakes {
    queues: SyncMutex<HashSet<QueueId>>,
    added: Notify,
}

impl Wakes {
    fn add(&self, queues: impl Iterator<Item = QueueId>) {
        let mut waiting = self.queues.lock().expect("wakes lock");
        let before = waiting.len();
        waiting.extend(queues);
        if waiting.len() > before {
            self.added.notify_one();
        }
    }
}

/// Sends the wake-ups, all queues waiting at once, until the collector is gone.
async fn wake_dispatchers(pool: PgPool, wakes: std::sync::Weak<Wakes>) {
    loop {
        let Some(pending) = wakes.upgrade() else { return };
        // Wait with a timeout, so the task notices when the collector is gone.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), pending.added.notified()).await;
        let queues: Vec<QueueId> = pending.queues.lock().expect("wakes lock").drain().collect();
        drop(pending);
        if queues.is_empty() {
            continue;
        }
        // A lost wake-up only delays delivery until the dispatcher's next poll.
        if let Err(err) = messages::wake(&pool, &queues, true).await {
            tracing::warn!(error = %err, "waking the dispatchers failed; they will find the messages by polling");
        }
    }
}
