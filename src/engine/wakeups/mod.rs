//! Wake-ups: one LISTEN connection per node, shared by the long-polling pulls and the dispatcher's
//! workers. A publish, a retry, a pause or a delete on any node sends the queue's id on the channel
//! after its commit; the listener wakes the pulls waiting on that queue (all of them) and the queue's
//! dispatcher worker (a permit it finds when it next waits). The pulls woken together look at the queue
//! one at a time, and a look that found nothing to lease stands for the others woken before it began,
//! so a wake-up costs one or two looks rather than one per waiting pull. While nothing happens a waiting
//! pull holds no database connection and costs no query, and a long poll that follows a look that found
//! the queue empty may start waiting without looking again (`marks`).

mod marks;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::futures::Notified;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

use crate::engine::slots::SlotPool;
use crate::ids::{AccountId, QueueId};
use crate::metrics::Metrics;
use crate::store::consumers::CHANGES_CHANNEL;
use crate::store::messages::WAKE_CHANNEL;
use crate::store::publish::{LeaseOffer, LeasedAtPublish};
pub use marks::KnownEmpty;
use marks::Marks;

/// How long the listener waits before connecting again after losing its connection.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);
/// How long a queue stays marked as waited on in the database, and how much of it this node counts on
/// (less, for the clocks' sake); a wait ending later than the mark writes it again. Long, because idle
/// long polls rewrite it: with 20 s waits, once every 270 s per queue and node. The price is a
/// notification per publish, nobody listening, for up to five minutes after a queue's last long poll.
const MARK_SECONDS: i64 = 300;
const MARK_TRUSTED: Duration = Duration::from_secs(290);
/// After writing a mark, a wait looks again this soon: a publish already running when the mark was
/// written may not have seen it, and so may not wake anyone.
pub const FRESH_MARK_LOOK: Duration = Duration::from_millis(250);

/// Why a wait ended or looked again, for the `skiplock_long_poll_wakeups_total` counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    Notify,
    Timer,
    Deadline,
    Shutdown,
    /// The look again after writing a mark (`FRESH_MARK_LOOK`).
    Recheck,
}

impl Cause {
    fn as_str(self) -> &'static str {
        match self {
            Cause::Notify => "notify",
            Cause::Timer => "timer",
            Cause::Deadline => "deadline",
            Cause::Shutdown => "shutdown",
            Cause::Recheck => "recheck",
        }
    }
}

/// What a waiting pull's look at its queue found when it could lease nothing.
#[derive(Debug, Clone, Copy)]
pub struct EmptyLook {
    /// When the look began: it saw everything committed before then.
    pub began: Instant,
    /// When the queue's next delayed or leased message becomes visible, if it has one.
    pub next_visible: Option<Instant>,
}

/// One queue's waiting pulls on this node: what wakes them, and their looks after a wake-up, one at a
/// time, with the last one that found nothing.
#[derive(Default)]
struct QueueWaits {
    notify: Notify,
    last_empty_look: tokio::sync::Mutex<Option<EmptyLook>>,
}

#[derive(Default)]
struct Waiting {
    /// Waiters per queue, with the queue's wake-up and looks; an entry goes with its last waiter.
    queues: HashMap<QueueId, (usize, Arc<QueueWaits>)>,
    accounts: HashMap<AccountId, i64>,
    /// The dispatcher workers' wake-ups, per queue a webhook consumer reads.
    dispatch: HashMap<QueueId, Arc<Notify>>,
    /// Queues whose worker on this node claims as soon as it is woken (see `wake_here`).
    claiming: HashSet<QueueId>,
    /// Queues whose worker on this node takes their messages leased by the publish itself (see `offers`).
    offers: HashMap<QueueId, Offer>,
    /// This node's marks of queues as waited on, and what it knows of the marked queues.
    marks: Marks,
}

/// The node's long-polling pulls and dispatcher workers, and what wakes them.
pub struct Wakeups {
    waiting: Mutex<Waiting>,
    metrics: Arc<Metrics>,
    /// The node stopping: every wait ends at once.
    stop: CancellationToken,
    /// Whether a listener runs, so that a node starts one only.
    listening: AtomicBool,
    /// A consumer changed on some node: the dispatcher reads its consumers again.
    consumers_changed: Notify,
}

/// A dispatcher worker's offer to take its queue's messages as a publish on this node stores them: the
/// terms of its claim (`LeaseOffer`'s slot aside), the dispatch slots it holds, one of which a publish
/// sets aside for the messages, and where to hand them.
#[derive(Clone)]
pub struct Offer {
    pub terms: LeaseOffer,
    pub slots: Arc<SlotPool>,
    pub hand: mpsc::UnboundedSender<LeasedAtPublish>,
}

/// An offer a publish took up, with the slot set aside for it: given back to `slots` unless the publish
/// leased messages in it.
pub struct TakenOffer {
    pub terms: LeaseOffer,
    pub slots: Arc<SlotPool>,
}

/// One waiting pull's place; dropping it leaves the wait.
pub struct Waiter {
    wakeups: Arc<Wakeups>,
    account: AccountId,
    queue: QueueId,
    waits: Arc<QueueWaits>,
}

impl Wakeups {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            waiting: Mutex::default(),
            metrics,
            stop: CancellationToken::new(),
            listening: AtomicBool::new(false),
            consumers_changed: Notify::new(),
        }
    }

    /// Ends every wait, now and from now on: the node is stopping.
    pub fn stop_waits(&self) {
        self.stop.cancel();
    }

    /// Notified when a consumer was created, changed or deleted, or its queue paused, resumed or deleted,
    /// on any node (a permit is stored when the dispatcher is not waiting).
    pub fn consumers_changed(&self) -> &Notify {
        &self.consumers_changed
    }

    /// The wake-up of the dispatcher worker of `queue`: a permit is stored when it is not waiting.
    pub fn subscribe(&self, queue: QueueId) -> Arc<Notify> {
        self.waiting.lock().expect("wakeups lock").dispatch.entry(queue).or_default().clone()
    }

    /// Whether this node's worker of `queue` claims as soon as it is woken (it is running, not stopping,
    /// and has room for another batch in flight), and whether it takes messages leased by the publish
    /// that stores them (`offer`).
    pub fn claims_here(&self, queue: QueueId, claims: bool, offer: Option<Offer>) {
        let mut waiting = self.waiting.lock().expect("wakeups lock");
        if claims {
            waiting.claiming.insert(queue);
        } else {
            waiting.claiming.remove(&queue);
        }
        match offer {
            Some(offer) => waiting.offers.insert(queue, offer),
            None => waiting.offers.remove(&queue),
        };
    }

    /// The offers of this node's workers of `queues` that hold a free dispatch slot, each with one set
    /// aside, for a publish to lease their messages with.
    pub fn take_offers(&self, queues: impl IntoIterator<Item = QueueId>) -> Vec<TakenOffer> {
        let waiting = self.waiting.lock().expect("wakeups lock");
        let mut queues: Vec<QueueId> = queues.into_iter().collect();
        queues.sort_by_key(|queue| queue.0);
        queues.dedup();
        queues
            .into_iter()
            .filter_map(|queue| waiting.offers.get(&queue))
            .filter_map(|offer| {
                let slot = offer.slots.take_free(i32::MAX)?;
                Some(TakenOffer { terms: LeaseOffer { slot, ..offer.terms }, slots: offer.slots.clone() })
            })
            .collect()
    }

    /// Hands messages a publish leased to the worker that offered to take them; gives them back when that
    /// worker has stopped meanwhile, for the caller to release.
    pub fn hand(&self, batch: LeasedAtPublish) -> Result<(), LeasedAtPublish> {
        let hand = {
            let waiting = self.waiting.lock().expect("wakeups lock");
            waiting.offers.get(&batch.queue.id()).filter(|o| o.terms.consumer == batch.consumer).map(|o| o.hand.clone())
        };
        let Some(hand) = hand else { return Err(batch) };
        hand.send(batch).map_err(|returned| returned.0)?;
        self.metrics.publish_wakeups.with_label_values(&["leased_by_publish"]).inc();
        Ok(())
    }

    /// Wakes this node's worker of `queue` in-process if it claims at once, and says whether it did. A
    /// publish then needs no notification for the dispatchers: the node that stored the messages
    /// delivers them, and the others are asked (by `NOTIFY`) only when it cannot.
    pub fn wake_here(&self, queue: QueueId) -> bool {
        let waiting = self.waiting.lock().expect("wakeups lock");
        let woken = waiting.claiming.contains(&queue) && waiting.dispatch.get(&queue).map(|n| n.notify_one()).is_some();
        drop(waiting);
        let how = if woken { "this_node" } else { "all_nodes" };
        self.metrics.publish_wakeups.with_label_values(&[how]).inc();
        woken
    }

    /// A place to wait on `queue`, or None when the account already has `max` pulls waiting.
    pub fn wait_on(self: &Arc<Self>, account: AccountId, queue: QueueId, max: i64) -> Option<Waiter> {
        let mut waiting = self.waiting.lock().expect("wakeups lock");
        let count = waiting.accounts.entry(account).or_default();
        if *count >= max {
            return None;
        }
        *count += 1;
        let entry = waiting.queues.entry(queue).or_insert_with(|| (0, Arc::default()));
        entry.0 += 1;
        let waits = entry.1.clone();
        self.metrics.waiting_pulls.inc();
        Some(Waiter { wakeups: self.clone(), account, queue, waits })
    }

    /// Marks `queue` as waited on in the database (`store::messages::wait_on`), unless this node's last
    /// mark still covers a wait ending at `deadline`. True when it wrote a mark where this node had none
    /// in force: a publish already running may not have seen it. (One that only lengthens a mark in
    /// force is false: a publish running meanwhile sees the mark it lengthens.)
    pub async fn mark(&self, pool: &PgPool, queue: QueueId, deadline: Instant) -> Result<bool, sqlx::Error> {
        let in_force = self.waiting.lock().expect("wakeups lock").marks.in_force(queue, Instant::now());
        if in_force.is_some_and(|until| until > deadline) {
            return Ok(false);
        }
        let written_at = Instant::now();
        crate::store::messages::wait_on(pool, queue, MARK_SECONDS).await?;
        let now = Instant::now();
        let mut waiting = self.waiting.lock().expect("wakeups lock");
        waiting.marks.written(queue, written_at + MARK_TRUSTED, now + FRESH_MARK_LOOK, now);
        Ok(in_force.is_none())
    }

    /// The last look that found `queue` empty for `account`, if nothing has been heard of the queue since
    /// and it still holds (see `marks`).
    pub fn known_empty(&self, account: AccountId, queue: QueueId) -> Option<KnownEmpty> {
        self.waiting.lock().expect("wakeups lock").marks.known_empty(account, queue, Instant::now())
    }

    /// A look that found `queue` empty, kept for the long polls after it if the queue was heard throughout.
    pub fn found_empty(&self, queue: QueueId, look: KnownEmpty) {
        self.waiting.lock().expect("wakeups lock").marks.found_empty(queue, look, Instant::now());
    }

    /// Long polls that started waiting without looking, their queue known to be empty.
    pub fn look_skipped(&self) {
        self.metrics.long_poll_looks_skipped.inc();
    }

    fn wake(&self, queue: QueueId) {
        let mut waiting = self.waiting.lock().expect("wakeups lock");
        waiting.marks.heard(queue, Instant::now());
        if let Some((_, waits)) = waiting.queues.get(&queue) {
            waits.notify.notify_waiters();
        }
        if let Some(notify) = waiting.dispatch.get(&queue) {
            notify.notify_one();
        }
    }

    /// Wakes every waiter and worker: after the listener lost its connection, notifications may have
    /// been missed.
    fn wake_all(&self) {
        let mut waiting = self.waiting.lock().expect("wakeups lock");
        waiting.marks.forget_all();
        for (_, waits) in waiting.queues.values() {
            waits.notify.notify_waiters();
        }
        for notify in waiting.dispatch.values() {
            notify.notify_one();
        }
    }

    /// Starts the node's listener, unless one runs already; it stops with `stop`.
    pub fn start_listening(
        self: &Arc<Self>,
        pool: PgPool,
        stop: CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        if self.listening.swap(true, Ordering::SeqCst) {
            return None;
        }
        let wakeups = self.clone();
        Some(tokio::spawn(async move {
            wakeups.clone().listen(pool, stop).await;
            wakeups.listening.store(false, Ordering::SeqCst);
        }))
    }

    pub fn woken(&self, cause: Cause) {
        self.metrics.long_poll_wakeups.with_label_values(&[cause.as_str()]).inc();
    }

    /// Listens on the wake-up channel until `stop`, reconnecting when the connection is lost.
    async fn listen(self: Arc<Self>, pool: PgPool, stop: CancellationToken) {
        loop {
            let connected = async {
                let mut listener = PgListener::connect_with(&pool).await?;
                listener.listen_all([WAKE_CHANNEL, CHANGES_CHANNEL]).await?;
                Ok::<_, sqlx::Error>(listener)
            };
            let mut listener = match connected.await {
                Ok(listener) => listener,
                Err(err) => {
                    tracing::warn!(error = %err, "LISTEN failed; waits end by their timers, workers poll");
                    tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(RECONNECT_AFTER) => continue }
                }
            };
            // Anything sent while there was no connection went unheard.
            self.wake_all();
            self.consumers_changed.notify_one();
            loop {
                let notification = tokio::select! {
                    _ = stop.cancelled() => return,
                    n = listener.try_recv() => n,
                };
                match notification {
                    Ok(Some(n)) if n.channel() == CHANGES_CHANNEL => {
                        if let Ok(queue) = n.payload().parse::<uuid::Uuid>() {
                            self.waiting.lock().expect("wakeups lock").marks.heard(QueueId(queue), Instant::now());
                        }
                        self.consumers_changed.notify_one();
                    }
                    Ok(Some(n)) => {
                        if let Ok(queue) = n.payload().parse::<uuid::Uuid>() {
                            self.wake(QueueId(queue));
                        }
                    }
                    Ok(None) | Err(_) => {
                        tracing::warn!("LISTEN connection lost; reconnecting");
                        break;
                    }
                }
            }
        }
    }
}

impl Waiter {
    /// A wake-up of this queue. Enable it before looking at the queue, so that a wake-up sent while
    /// looking is not missed.
    pub fn notified(&self) -> Notified<'_> {
        self.waits.notify.notified()
    }

    /// The turn to look at the queue after a wake-up (this node's waiters on it look one at a time),
    /// holding the last look that found nothing to lease, for this one to take as its own if it began
    /// after this one started listening again.
    pub async fn look_turn(&self) -> tokio::sync::MutexGuard<'_, Option<EmptyLook>> {
        self.waits.last_empty_look.lock().await
    }

    /// The node stopping.
    pub fn stopping(&self) -> &CancellationToken {
        &self.wakeups.stop
    }

    pub fn woken(&self, cause: Cause) {
        self.wakeups.woken(cause);
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut waiting = self.wakeups.waiting.lock().expect("wakeups lock");
        if let Some(count) = waiting.accounts.get_mut(&self.account) {
            *count -= 1;
            if *count <= 0 {
                waiting.accounts.remove(&self.account);
            }
        }
        if let Some(entry) = waiting.queues.get_mut(&self.queue) {
            entry.0 -= 1;
            if entry.0 == 0 {
                waiting.queues.remove(&self.queue);
            }
        }
        self.wakeups.metrics.waiting_pulls.dec();
    }
}
