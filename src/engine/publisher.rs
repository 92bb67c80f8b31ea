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
//! One account must not make another's publishes wait: while statements are in flight, the small
//! publishes of accounts with none in flight go at once on a slot of their own (`EXPRESS_STATEMENTS`),
//! rather than behind or inside a busy account's batches.
//!
//! Statements run on connections the collector keeps rather than gives back to the pool after each:
//! sqlx checks every connection given back with a round trip, which would be one more per publish.
//!
//! A queue whose webhook consumer has a worker on this node waiting with a free slot and no batching
//! wait has its messages leased to that worker by the statement that stores them, and handed to it after
//! the commit: at a trickle, a claim per message was most of the push path's database cost. Otherwise a
//! queue whose worker on this node is ready to claim wakes that worker in-process after the commit: the
//! node that stored the messages delivers them, and no notification is sent.
//! Otherwise dispatchers and long-polling pulls on every node are woken with `NOTIFY` by a task of its
//! own, so a wake-up never holds up a publish answer and wake-ups for many commits go out together, as
//! one statement. Only queues a webhook consumer reads, or that long-polling pulls wait on, are woken:
//! notifying every queue read by pulls nearly doubled PostgreSQL's CPU per message for single publishes
//! (one noisy run).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex as SyncMutex};
use std::time::Instant;

use sqlx::{Connection, PgConnection, PgPool};
use tokio::sync::{mpsc, oneshot, Notify, OwnedSemaphorePermit, Semaphore};

use crate::engine::delivery::Delivery;
use crate::engine::wakeups::Wakeups;
use crate::error::ApiError;
use crate::ids::{AccountId, QueueId};
use crate::queue::message::NewMessage;
use crate::store::messages;
use crate::store::owned::OwnedQueue;
use crate::store::pool::CHECK_IDLE_CONNECTIONS_AFTER;
use crate::store::publish::{self, Lanes, LeaseOffer, LeasedAtPublish, Publish, Published};

/// The most messages, and bytes of bodies, one statement stores.
const MAX_MESSAGES_PER_COMMIT: usize = 1000;
const MAX_BYTES_PER_COMMIT: usize = 4 * 1024 * 1024;
/// Statements in flight at once, and how many messages must wait before one starts beside another.
const MAX_STATEMENTS: u32 = 4;
const CONCURRENT_STATEMENT_MESSAGES: usize = 100;
/// Statements beyond `MAX_STATEMENTS` for the publishes of accounts that have none in flight.
const EXPRESS_STATEMENTS: usize = 1;

/// One publish: its messages, each stored once in every target queue (a topic's publish has several),
/// all in the same statement and commit.
struct Job {
    targets: Vec<OwnedQueue>,
    messages: Vec<NewMessage>,
    done: oneshot::Sender<Result<Vec<Option<usize>>, Arc<sqlx::Error>>>,
}

impl Job {
    fn account(&self) -> AccountId {
        self.targets[0].account()
    }
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
    /// Starts the collector on `pool`, waking the dispatcher workers of `here` (this node's) in-process
    /// where they claim at once. It stops when every `Publisher` clone is dropped.
    pub fn start(pool: PgPool, here: Arc<Wakeups>, delivery: Arc<Delivery>) -> Publisher {
        let (jobs, queue) = mpsc::channel::<Job>(16 * 1024);
        let wakes = Arc::new(Wakes { here, delivery, queues: SyncMutex::default(), added: Notify::new() });
        tokio::spawn(collect(pool.clone(), queue, wakes.clone()));
        tokio::spawn(wake_dispatchers(pool, Arc::downgrade(&wakes)));
        Publisher { jobs }
    }

    /// Stores the messages durably in each of `targets` (queues of one account, none twice), in one
    /// commit, and answers for each how many were duplicates of keys that queue already held (not
    /// stored), or None when the account has no such queue (deleted meanwhile, or never was).
    pub async fn publish(
        &self,
        targets: Vec<OwnedQueue>,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<Option<usize>>, PublishError> {
        assert!(!targets.is_empty(), "a publish stores into at least one queue");
        let (done, answer) = oneshot::channel();
        self.jobs.send(Job { targets, messages, done }).await.map_err(|_| PublishError::Stopped)?;
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
        self.messages += job.messages.len() * job.targets.len();
        self.bytes += job.messages.iter().map(|m| m.body.len()).sum::<usize>() * job.targets.len();
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

    /// Takes out the jobs for which `take` holds, in a batch of their own.
    fn split_off(&mut self, take: impl Fn(&Job) -> bool) -> Batch {
        let (mut taken, mut kept) = (Batch::default(), Batch::default());
        for job in std::mem::take(&mut self.jobs) {
            if take(&job) {
                taken.push(job);
            } else {
                kept.push(job);
            }
        }
        *self = kept;
        taken
    }

    fn accounts(&self) -> impl Iterator<Item = AccountId> + '_ {
        self.jobs.iter().map(Job::account)
    }
}

/// The accounts with statements in flight, and how many each.
#[derive(Default)]
struct InFlight(SyncMutex<HashMap<AccountId, usize>>);

impl InFlight {
    fn has(&self, account: AccountId) -> bool {
        self.0.lock().expect("in-flight lock").contains_key(&account)
    }

    fn started(&self, batch: &Batch) -> Vec<AccountId> {
        let mut accounts: Vec<AccountId> = batch.accounts().collect();
        accounts.sort_by_key(|a| a.0);
        accounts.dedup();
        let mut counts = self.0.lock().expect("in-flight lock");
        for account in &accounts {
            *counts.entry(*account).or_default() += 1;
        }
        accounts
    }

    fn ended(&self, accounts: &[AccountId]) {
        let mut counts = self.0.lock().expect("in-flight lock");
        for account in accounts {
            if let Some(count) = counts.get_mut(account) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(account);
                }
            }
        }
    }
}

async fn collect(pool: PgPool, mut jobs: mpsc::Receiver<Job>, wakes: Arc<Wakes>) {
    let connections = Arc::new(Connections { pool, spare: SyncMutex::default(), lanes: SyncMutex::default() });
    let statements = Arc::new(Semaphore::new(MAX_STATEMENTS as usize));
    let express = Arc::new(Semaphore::new(EXPRESS_STATEMENTS));
    let in_flight = Arc::new(InFlight::default());
    let mut batch = Batch::default();
    loop {
        if batch.jobs.is_empty() {
            let Some(job) = jobs.recv().await else { return };
            batch.push(job);
        }
        batch.fill(&mut jobs);
        if statements.available_permits() < MAX_STATEMENTS as usize {
            // Small publishes of accounts with nothing in flight need not wait for other accounts'
            // statements; large ones start statements of their own anyway.
            if let Ok(permit) = express.clone().try_acquire_owned() {
                let quiet = batch.split_off(|job| {
                    job.messages.len() * job.targets.len() < CONCURRENT_STATEMENT_MESSAGES
                        && !in_flight.has(job.account())
                });
                if quiet.jobs.is_empty() {
                    drop(permit);
                } else {
                    spawn_store(&connections, &wakes, &in_flight, quiet, permit);
                    continue;
                }
            }
        }
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
        spawn_store(&connections, &wakes, &in_flight, std::mem::take(&mut batch), permit);
    }
}

/// Stores `batch` on a task of its own, holding `permit` and counting its accounts in flight meanwhile.
fn spawn_store(
    connections: &Arc<Connections>,
    wakes: &Arc<Wakes>,
    in_flight: &Arc<InFlight>,
    batch: Batch,
    permit: OwnedSemaphorePermit,
) {
    let (connections, wakes, in_flight) = (connections.clone(), wakes.clone(), in_flight.clone());
    let accounts = in_flight.started(&batch);
    tokio::spawn(async move {
        store(&connections, batch, &wakes).await;
        in_flight.ended(&accounts);
        drop(permit);
    });
}

/// The connections statements run on: taken from the pool when none is spare, and kept (outside the
/// pool's count, at most one per statement in flight) while they work.
struct Connections {
    pool: PgPool,
    spare: SyncMutex<Vec<(PgConnection, Instant)>>,
    /// Queues the last statement that stored into them found with lanes, whose publishes run in the form
    /// that reads lanes at once rather than after the cheaper one found them (`publish::Lanes`). A hint
    /// only: a queue wrongly in it or missing from it is stored into just the same.
    lanes: SyncMutex<HashSet<QueueId>>,
}

/// Queues the lanes hint keeps at most; past it, it starts again (deleted queues would stay in it).
const MAX_QUEUES_WITH_LANES: usize = 100_000;

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
    async fn publish(&self, publishes: &[Publish<'_>], offers: &[LeaseOffer]) -> Result<Published, sqlx::Error> {
        let lanes = {
            let seen = self.lanes.lock().expect("lanes lock");
            if publishes.iter().any(|p| seen.contains(&p.queue.id())) {
                Lanes::Read
            } else {
                Lanes::Absent
            }
        };
        let mut conn = self.take().await?;
        let outcome = publish::publish(&mut conn, publishes, offers, lanes).await;
        if matches!(outcome, Ok(_) | Err(sqlx::Error::Database(_))) {
            self.spare.lock().expect("connections lock").push((conn, Instant::now()));
        }
        if let Ok(published) = &outcome {
            let mut seen = self.lanes.lock().expect("lanes lock");
            if seen.len() >= MAX_QUEUES_WITH_LANES {
                seen.clear();
            }
            // The answer's rows of lanes (for waking their consumers) are never publish targets: left out.
            let targets = published.stored.iter().filter(|s| publishes.iter().any(|p| p.queue.id() == s.queue));
            for stored in targets {
                if stored.lanes {
                    seen.insert(stored.queue);
                } else {
                    seen.remove(&stored.queue);
                }
            }
        }
        outcome
    }
}

/// Stores a batch with one statement and answers each of its publishes.
async fn store(connections: &Connections, batch: Batch, wakes: &Wakes) {
    let publishes: Vec<Publish<'_>> = batch
        .jobs
        .iter()
        .flat_map(|j| j.targets.iter().map(|&queue| Publish { queue, messages: &j.messages }))
        .collect();
    let taken = wakes.here.take_offers(publishes.iter().map(|p| p.queue.id()));
    let offers: Vec<LeaseOffer> = taken.iter().map(|t| t.terms).collect();
    let outcome = connections.publish(&publishes, &offers).await.map_err(Arc::new);
    drop(publishes);
    let (mut unhanded, mut leased_in) = (Vec::new(), HashSet::new());
    let outcome = outcome.map(|mut published| {
        leased_in = published.leased.iter().map(|b| b.queue.id()).collect();
        unhanded = wakes.after_commit(&mut published);
        published
    });
    // A slot set aside for messages that were not leased in it is free again; one whose messages were
    // leased goes with them (to the worker, or back to the pool with them when it has stopped).
    for t in taken.iter().filter(|t| !leased_in.contains(&t.terms.queue)) {
        t.slots.put_back(t.terms.slot);
    }
    // Before the answers, which a stopping node waits for: so they are given back before its pool closes.
    for batch in unhanded {
        let leases: Vec<_> = batch.messages.iter().map(|m| (m.id, m.attempts)).collect();
        wakes.delivery.give_back(batch.queue, &leases).await;
        if let Some(t) = taken.iter().find(|t| t.terms.queue == batch.queue.id()) {
            t.slots.put_back(batch.slot);
        }
    }
    // The duplicates are counted per publish to one queue, in the order the jobs' targets were given.
    let mut index = 0;
    for job in batch.jobs {
        let answer = match &outcome {
            Ok(published) => Ok(job
                .targets
                .iter()
                .map(|target| {
                    index += 1;
                    let stored = published.stored.iter().any(|s| s.queue == target.id());
                    stored.then(|| published.duplicates.get(index - 1).copied().unwrap_or(0))
                })
                .collect()),
            Err(err) => Err(err.clone()),
        };
        let _ = job.done.send(answer);
    }
}

/// Queues with new messages whose dispatchers and pulls on every node have not been woken yet.
struct Wakes {
    here: Arc<Wakeups>,
    delivery: Arc<Delivery>,
    queues: SyncMutex<HashSet<QueueId>>,
    added: Notify,
}

impl Wakes {
    /// Hands the messages the publish leased to the workers that offered to take them (returning those
    /// whose worker has stopped meanwhile, to be given back), and wakes this node's worker of each other
    /// queue stored to where it claims at once; the others, and queues that long-polling pulls wait on,
    /// are left for `NOTIFY`.
    fn after_commit(&self, published: &mut Published) -> Vec<LeasedAtPublish> {
        let unhanded: Vec<LeasedAtPublish> =
            std::mem::take(&mut published.leased).into_iter().filter_map(|batch| self.here.hand(batch).err()).collect();
        let notify: Vec<QueueId> = published
            .stored
            .iter()
            .filter(|s| s.waited || (s.pushed && !s.all_leased && !self.here.wake_here(s.queue)))
            .map(|s| s.queue)
            .collect();
        self.add(notify);
        unhanded
    }

    fn add(&self, queues: impl IntoIterator<Item = QueueId>) {
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

impl From<PublishError> for ApiError {
    fn from(err: PublishError) -> Self {
        match err {
            PublishError::Database(db) => Self::from_database(&db),
            PublishError::Stopped => Self::unavailable("the service is shutting down"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(account: AccountId) -> Job {
        let (done, _) = oneshot::channel();
        Job { targets: vec![OwnedQueue::for_tests(account, QueueId::new())], messages: Vec::new(), done }
    }

    #[test]
    fn an_account_is_in_flight_until_its_last_statement_ends() {
        let (busy, quiet) = (AccountId::new(), AccountId::new());
        let in_flight = InFlight::default();
        let mut first = Batch::default();
        first.push(job(busy));
        first.push(job(busy));
        let started_first = in_flight.started(&first);
        assert_eq!(started_first, vec![busy], "an account counts once per statement");
        let mut second = Batch::default();
        second.push(job(busy));
        let started_second = in_flight.started(&second);
        in_flight.ended(&started_first);
        assert!(in_flight.has(busy), "one of its statements still runs");
        in_flight.ended(&started_second);
        assert!(!in_flight.has(busy) && !in_flight.has(quiet));
    }

    #[test]
    fn split_off_takes_the_jobs_named_and_keeps_the_rest() {
        let (busy, quiet) = (AccountId::new(), AccountId::new());
        let mut batch = Batch::default();
        for account in [busy, quiet, busy, quiet] {
            batch.push(job(account));
        }
        let taken = batch.split_off(|job| job.account() == quiet);
        assert!(taken.accounts().all(|a| a == quiet) && taken.jobs.len() == 2);
        assert!(batch.accounts().all(|a| a == busy) && batch.jobs.len() == 2);
    }
}
