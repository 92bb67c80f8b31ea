//! The dispatcher's loops: `run` keeps one worker per active webhook consumer, woken when their queue
//! gets messages by the node's one listener (`wakeups`, LISTEN/NOTIFY); a worker decides when a batch
//! is due and keeps up to `max_concurrency` deliveries in flight while the backlog lasts. An idle
//! worker costs no query: it sleeps until a wake-up or until the earliest delayed or leased message of
//! its queue is due, which it read at its last look.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::breaker::Gate;
use super::{Dispatcher, WebhookConsumer};
use crate::ids::ConsumerId;
use crate::queue::attempt::OPEN_AFTER;
use crate::store;
use crate::store::publish::LeasedAtPublish;

/// How soon a worker looks again after the database failed it.
const AFTER_ERROR: Duration = Duration::from_secs(1);
/// How soon a worker looks at its circuit again after sending a probe.
const AFTER_PROBE: Duration = Duration::from_secs(1);
/// How soon to try again when every slot is taken (other nodes' deliveries finishing).
const SLOT_POLL: Duration = Duration::from_millis(100);

struct Worker {
    config: watch::Sender<WebhookConsumer>,
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

/// Runs the dispatcher until `stop` is cancelled, then lets in-flight deliveries finish (or releases
/// them after the grace period) before returning.
pub async fn run(dispatcher: Arc<Dispatcher>, stop: CancellationToken) {
    // The node's listener, unless the node runs one already (a dispatcher built on its own, in tests).
    let listener = dispatcher.engine.wakeups.start_listening(dispatcher.engine.pool.clone(), stop.clone());
    let mut workers: HashMap<ConsumerId, Worker> = HashMap::new();
    let slots = tokio::spawn(keep_slots(dispatcher.clone(), stop.clone()));
    loop {
        match dispatcher.consumers().await {
            Ok(active) => {
                count_health(&dispatcher, active.iter().map(|(c, _)| c));
                let max = active.iter().map(|(c, _)| (c.id, c.max_concurrency)).collect();
                *dispatcher.max_concurrency.lock().expect("max lock") = max;
                // A queue with messages ready wakes its worker: a wake-up it missed is made good here.
                let ready: Vec<_> = active.iter().filter(|(_, ready)| *ready).map(|(c, _)| c.queue.id()).collect();
                reconcile(&dispatcher, &mut workers, active.into_iter().map(|(c, _)| c).collect(), &stop);
                for queue in ready {
                    dispatcher.engine.wakeups.subscribe(queue).notify_one();
                }
            }
            Err(err) => tracing::warn!(error = %err, "reading webhook consumers failed; will retry"),
        }
        // Read again when any node announces a consumer change; the periodic read is a safety net.
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = dispatcher.engine.wakeups.consumers_changed().notified() => {}
            _ = tokio::time::sleep(dispatcher.settings.refresh_every) => {}
        }
    }
    for worker in workers.into_values() {
        worker.stop.cancel();
        let _ = worker.handle.await;
    }
    let _ = slots.await;
    dispatcher.give_back_all_slots().await;
    if let Some(listener) = listener {
        let _ = listener.await;
    }
}

/// Keeps the node's dispatch slots (`slots`): idle ones given back every second, the others renewed
/// at a third of their hold.
async fn keep_slots(dispatcher: Arc<Dispatcher>, stop: CancellationToken) {
    let renew_every = dispatcher.lease() / 3;
    let mut renewed = Instant::now();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(super::slots::UPKEEP_EVERY) => {}
        }
        let renew = renewed.elapsed() >= renew_every;
        let max = dispatcher.max_concurrency.lock().expect("max lock").clone();
        match dispatcher.keep_slots(&max, renew).await {
            Ok(()) if renew => renewed = Instant::now(),
            Ok(()) => {}
            Err(err) => tracing::warn!(error = %err, "keeping the dispatch slots failed; will retry"),
        }
    }
}

/// Sets the gauge of consumers by endpoint health from the consumers as read.
fn count_health<'a>(dispatcher: &Dispatcher, consumers: impl Iterator<Item = &'a WebhookConsumer>) {
    let mut counts = [("healthy", 0), ("failing", 0), ("open", 0)];
    for c in consumers {
        let state = match c.health.failures {
            0 => 0,
            f if f < OPEN_AFTER => 1,
            _ => 2,
        };
        counts[state].1 += 1;
    }
    for (label, count) in counts {
        dispatcher.engine.metrics.webhook_consumers.with_label_values(&[label]).set(count);
    }
}

/// Starts workers for new consumers, updates changed ones, and stops those deleted or paused.
fn reconcile(
    dispatcher: &Arc<Dispatcher>,
    workers: &mut HashMap<ConsumerId, Worker>,
    active: Vec<WebhookConsumer>,
    shutdown: &CancellationToken,
) {
    let mut seen = Vec::with_capacity(active.len());
    for consumer in active {
        seen.push(consumer.id);
        if let Some(worker) = workers.get(&consumer.id) {
            worker.config.send_if_modified(|current| {
                let changed = *current != consumer;
                *current = consumer.clone();
                changed
            });
            continue;
        }
        let wake = dispatcher.engine.wakeups.subscribe(consumer.queue.id());
        let (config, updates) = watch::channel(consumer.clone());
        let stop = shutdown.child_token();
        let handle = tokio::spawn(work(dispatcher.clone(), updates, wake, stop.clone(), shutdown.clone()));
        workers.insert(consumer.id, Worker { config, stop, handle });
    }
    dispatcher.breakers.keep_only(&seen);
    workers.retain(|id, worker| {
        let keep = seen.contains(id);
        if !keep {
            // Deleted or paused: claim nothing more; deliveries in flight finish on their own.
            worker.stop.cancel();
        }
        keep
    });
}

/// What a worker's next step is.
enum Next {
    /// A batch was claimed and more may be ready: look again at once.
    More,
    /// Messages are ready but every slot is taken: look again soon, or when a delivery ends.
    SlotsTaken,
    /// The node has no place in flight for the consumer's account: look again soon, or when one is freed.
    NodeFull,
    /// Nothing due yet: wait this long, or with None until woken.
    Wait(Option<Duration>),
}

/// One consumer's loop. `stop` ends claiming; `shutdown` (the process stopping) also bounds how long
/// in-flight deliveries may take before their batches are released.
async fn work(
    dispatcher: Arc<Dispatcher>,
    mut config: watch::Receiver<WebhookConsumer>,
    wake: Arc<Notify>,
    stop: CancellationToken,
    shutdown: CancellationToken,
) {
    let mut in_flight = JoinSet::new();
    let queue = config.borrow().queue.id();
    // Batches that publishes on this node leased for this worker (see `Dispatcher::offer`).
    let (hand, mut handed) = mpsc::unbounded_channel();
    let mut adopted = None;
    // When the queue's next delayed or leased message is due, as the last look found it, and whether that
    // look left the worker waiting (rather than polling for a slot or a place, or claiming again).
    let mut due: Option<Instant> = None;
    let mut waiting = false;
    loop {
        while in_flight.try_join_next().is_some() {}
        let consumer = config.borrow_and_update().clone();
        dispatcher.breakers.seed(&consumer);
        let step = match adopted.take() {
            Some(leased) => {
                // Back to the wait it interrupted, which also ends when this batch's own lease does, as
                // a claim's would; a worker that had more to do looks again at once.
                let lease = dispatcher.lease();
                let left = due.map_or(lease, |due| due.saturating_duration_since(Instant::now()).min(lease));
                let left = if waiting { left } else { Duration::ZERO };
                take_leased(&dispatcher, &consumer, leased, &mut in_flight, &shutdown, Some(left)).await
            }
            None => {
                let next = next_step(&dispatcher, &consumer, &mut in_flight, &shutdown).await;
                waiting = matches!(next, Ok(Next::Wait(_)));
                next
            }
        };
        let next = match step {
            Ok(next) => next,
            Err(err) => {
                tracing::warn!(error = %err, consumer = %consumer.id, "dispatching failed; will retry");
                Next::Wait(Some(AFTER_ERROR))
            }
        };
        if let Next::Wait(wait) = next {
            due = wait.map(|wait| Instant::now() + wait);
        }
        // Publishes on this node wake the worker in-process while it would claim at once, and lease their
        // messages for it while it waits with a slot to spare.
        let room = in_flight.len() < consumer.max_concurrency.max(1) as usize;
        let closed = !dispatcher.breakers.is_open(consumer.id);
        let offer =
            (room && closed && matches!(next, Next::Wait(_))).then(|| dispatcher.offer(&consumer, &hand)).flatten();
        dispatcher.engine.wakeups.claims_here(queue, room && matches!(next, Next::More | Next::Wait(_)), offer);
        let (wait, slots_taken, node_full) = match next {
            Next::More => continue,
            Next::SlotsTaken => (Some(SLOT_POLL), true, false),
            Next::NodeFull => (Some(SLOT_POLL), false, true),
            Next::Wait(wait) => (wait, false, false),
        };
        let timer = async {
            match wait {
                Some(wait) => tokio::time::sleep(wait).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            // A worker told to stop claims nothing more, even if woken meanwhile (see below).
            biased;
            _ = stop.cancelled() => break,
            Some(leased) = handed.recv() => adopted = Some(leased),
            _ = wake.notified() => {}
            _ = config.changed() => {}
            _ = timer => {}
            Some(_) = in_flight.join_next(), if slots_taken && !in_flight.is_empty() => {}
            _ = dispatcher.in_flight.freed().notified(), if node_full => {}
        }
    }
    dispatcher.engine.wakeups.claims_here(queue, false, None);
    // Batches leased for this worker that it will not deliver go back to the queue, for another node.
    handed.close();
    let consumer = config.borrow().clone();
    for leased in adopted.into_iter().chain(std::iter::from_fn(|| handed.try_recv().ok())) {
        give_back(&dispatcher, &consumer, leased).await;
    }
    // A publish that woke this worker alone just before it stopped: the other nodes take its messages.
    let unserved = tokio::select! { biased; _ = wake.notified() => true, () = std::future::ready(()) => false };
    if unserved {
        if let Err(err) = store::messages::wake(&dispatcher.engine.pool, &[queue], true).await {
            tracing::warn!(error = %err, "handing a wake-up to the other nodes failed; their timers find the messages");
        }
    }
    while in_flight.join_next().await.is_some() {}
}

/// Delivers a batch a publish leased for this worker, as one it claimed, then waits as before (`left`);
/// without a place in flight on this node for the account, the batch goes back to the queue to be
/// claimed when one frees.
async fn take_leased(
    dispatcher: &Arc<Dispatcher>,
    consumer: &WebhookConsumer,
    leased: LeasedAtPublish,
    in_flight: &mut JoinSet<()>,
    shutdown: &CancellationToken,
    left: Option<Duration>,
) -> Result<Next, sqlx::Error> {
    let Some(place) = dispatcher.in_flight.take(consumer.queue.account()) else {
        give_back(dispatcher, consumer, leased).await;
        return Ok(Next::NodeFull);
    };
    let route = match dispatcher.route(consumer).await {
        Ok(route) => route,
        Err(err) => {
            give_back(dispatcher, consumer, leased).await;
            return Err(err);
        }
    };
    let batch = dispatcher.fit(consumer, dispatcher.adopt(route, leased)).await;
    // Messages past the batch's bytes went back to the queue: look again at once.
    let left = if batch.next_due == Some(Duration::ZERO) { Some(Duration::ZERO) } else { left };
    deliver(dispatcher, consumer, batch, place, in_flight, shutdown);
    Ok(Next::Wait(left))
}

/// Gives back a batch a publish leased for this worker that it will not deliver.
async fn give_back(dispatcher: &Dispatcher, consumer: &WebhookConsumer, leased: LeasedAtPublish) {
    let leases: Vec<_> = leased.messages.iter().map(|m| (m.id, m.attempts)).collect();
    dispatcher.release(consumer, &leases, Some(leased.slot)).await;
}

async fn next_step(
    dispatcher: &Arc<Dispatcher>,
    consumer: &WebhookConsumer,
    in_flight: &mut JoinSet<()>,
    shutdown: &CancellationToken,
) -> Result<Next, sqlx::Error> {
    // An endpoint whose circuit is open gets one probe batch at a time, when its interval has passed.
    let probe = match dispatcher.breakers.gate(consumer.id) {
        Gate::Open(wait) => return Ok(Next::Wait(Some(wait))),
        Gate::ProbeDue => true,
        Gate::Closed => false,
    };
    if !consumer.max_wait.is_zero() {
        if let Some(wait) = not_due_for(dispatcher, consumer).await? {
            return Ok(wait);
        }
    }
    let Some(place) = dispatcher.in_flight.take(consumer.queue.account()) else { return Ok(Next::NodeFull) };
    let batch = dispatcher.claim(consumer).await?;
    let claimed = batch.messages.len() as i64;
    if claimed > 0 {
        let next_due = batch.next_due;
        if probe {
            dispatcher.breakers.probing(consumer.id, dispatcher.lease());
        }
        deliver(dispatcher, consumer, batch, place, in_flight, shutdown);
        if probe {
            // The probe's answer closes the circuit (and wakes the worker) or sets the next probe's time.
            return Ok(Next::Wait(Some(AFTER_PROBE)));
        }
        // A partial batch took all that was ready: a publish or retry meanwhile wakes the worker, and
        // the claim said when the next delayed message is due (a lease that runs out is swept and woken), so no
        // look is spent on it.
        return Ok(if claimed >= consumer.batch_size { Next::More } else { Next::Wait(next_due) });
    }
    // An empty claim means nothing ready, or every slot taken.
    let floor = dispatcher.engine.delivery.floors.of(consumer.queue.id());
    let ready =
        store::dispatch::readiness(&dispatcher.engine.pool, consumer.queue, floor, consumer.retention_seconds, 1)
            .await?;
    Ok(if ready.ready > 0 { Next::SlotsTaken } else { Next::Wait(until_next(&ready)) })
}

/// Delivers `batch` in a task of its own, holding `place` until the answer is applied; the task
/// releases the batch if the node stops before the receiver answers within the grace period.
fn deliver(
    dispatcher: &Arc<Dispatcher>,
    consumer: &WebhookConsumer,
    batch: super::Batch,
    place: super::share::Place,
    in_flight: &mut JoinSet<()>,
    shutdown: &CancellationToken,
) {
    let (dispatcher, consumer, shutdown) = (dispatcher.clone(), consumer.clone(), shutdown.clone());
    in_flight.spawn(async move {
        let grace = dispatcher.settings.shutdown_grace;
        let deadline = async {
            shutdown.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        let leases: Vec<_> = batch.messages.iter().map(|m| (m.id, m.attempts)).collect();
        let slot = batch.slot;
        tokio::select! {
            _ = dispatcher.deliver(&consumer, batch) => {}
            _ = deadline => dispatcher.release(&consumer, &leases, slot).await,
        }
        drop(place);
    });
}

/// The wait until a batch is due, or None when one is due now: `batch_size` messages are ready, or
/// the first ready one has waited `max_wait_time_ms`.
async fn not_due_for(dispatcher: &Dispatcher, c: &WebhookConsumer) -> Result<Option<Next>, sqlx::Error> {
    let floor = dispatcher.engine.delivery.floors.of(c.queue.id());
    let r =
        store::dispatch::readiness(&dispatcher.engine.pool, c.queue, floor, c.retention_seconds, c.batch_size).await?;
    if r.ready == 0 {
        return Ok(Some(Next::Wait(until_next(&r))));
    }
    if r.ready >= c.batch_size {
        return Ok(None);
    }
    let waited = r.first_ready_at.map_or(Duration::ZERO, |first| (r.now - first).to_std().unwrap_or_default());
    Ok(c.max_wait.checked_sub(waited).filter(|left| !left.is_zero()).map(|left| Next::Wait(Some(left))))
}

/// Until the queue's next delayed or leased message is due; None when it has none (a publish wakes it).
fn until_next(r: &store::dispatch::Readiness) -> Option<Duration> {
    r.next_at.map(|next| (next - r.now).to_std().unwrap_or(Duration::ZERO))
}
