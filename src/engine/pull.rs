//! A pull: leases a batch for the queue's http_pull consumer through the delivery core, after applying
//! the acks and retries it carries (a skiplock extension), and, asked to wait (long polling, another
//! extension), until a message can be leased or its wait ends, woken by `wakeups`.

use std::time::{Duration, Instant};

use super::ack::{AckOutcome, LeaseAnswers};
use super::delivery::Route;
use super::wakeups::{Cause, EmptyLook, KnownEmpty, Waiter, FRESH_MARK_LOOK};
use super::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::ConsumerId;
use crate::queue::consumer::{ConsumerKind, DEFAULT_VISIBILITY_TIMEOUT_MS};
use crate::store::consumers::{ConsumerFields, DeliveryTarget};
use crate::store::messages::StoredMessage;
use crate::store::owned::OwnedQueue;
use crate::store::queues::Backlog;

/// What a pull asks for, its values checked.
#[derive(Debug, Default, Clone)]
pub struct PullRequest {
    /// The consumer pulling, when the queue has several (`consumer_id`); None: its only http_pull one.
    pub consumer: Option<ConsumerId>,
    /// The consumer's batch size when None.
    pub batch_size: Option<i64>,
    /// The consumer's visibility timeout when None.
    pub visibility_ms: Option<i64>,
    /// How long to wait for a message; 0 answers at once.
    pub wait_ms: i64,
    /// Acks and retries of the batch before, applied before the first look.
    pub answers: Option<LeaseAnswers>,
}

/// What a pull leased, the queue's backlog, and what its carried answers did.
pub struct Pulled {
    /// Where the messages were leased: the queue, or the pulling consumer's lane in it, which their
    /// lease ids name.
    pub lane: OwnedQueue,
    pub messages: Vec<StoredMessage>,
    pub backlog: Backlog,
    pub answered: Option<AckOutcome>,
}

impl Engine {
    /// A pull by the queue's http_pull consumer, or by the one it names when the queue has several (their
    /// lanes, the `consumer_lanes` migration). A queue whose only http_pull consumer reads a lane (its
    /// first consumer is a webhook) is pulled from that lane, found when the queue itself answers that it
    /// has none: the common pull pays nothing for it.
    pub async fn pull(&self, queue: OwnedQueue, request: PullRequest) -> ApiResult<Pulled> {
        let lane = match request.consumer {
            Some(id) => self.pull_lane(queue, id).await?,
            None => queue,
        };
        match self.pull_from(lane, request.clone(), request.consumer.is_some()).await {
            // Refused before anything was applied: the queue's own consumer is not an http_pull one.
            Err(err) if matches!(err.kind, Kind::NoPullConsumer) && request.consumer.is_none() => {
                let pulling: Vec<_> = crate::store::consumers::list(&self.pool, queue.account(), &[queue.id()])
                    .await?
                    .into_iter()
                    .filter(|c| c.kind() == ConsumerKind::HttpPull)
                    .collect();
                match pulling.as_slice() {
                    [only] => self.pull_from(only.lane(), request, false).await,
                    [] => Err(err),
                    _ => Err(several_pull_consumers()),
                }
            }
            pulled => pulled,
        }
    }

    /// The lane of the queue's consumer `id`, which must be an http_pull one.
    async fn pull_lane(&self, queue: OwnedQueue, id: ConsumerId) -> ApiResult<OwnedQueue> {
        let consumer = crate::store::consumers::get(&self.pool, queue, id).await?.ok_or_else(|| {
            ApiError::invalid(format!(
                "consumer_id {id} is not a consumer of this queue (GET .../consumers lists them)"
            ))
        })?;
        if consumer.kind() != ConsumerKind::HttpPull {
            return Err(ApiError::invalid(format!(
                "consumer_id {id} is a webhook consumer; a pull names one of the queue's http_pull consumers"
            )));
        }
        Ok(consumer.lane())
    }

    async fn pull_from(&self, queue: OwnedQueue, request: PullRequest, named: bool) -> ApiResult<Pulled> {
        self.check_quotas(queue.account(), false)?;
        let carries_answers = request.answers.is_some();
        let pull =
            Pull { queue, batch_size: request.batch_size, visibility: request.visibility_ms, carries_answers, named };
        // A place among the account's waiting pulls is taken first, so that a pull over the cap applies nothing.
        let waiter = if request.wait_ms > 0 {
            let max = self.limits_of(queue.account()).max_waiting_pulls;
            let waiter = self.wakeups.wait_on(queue.account(), queue.id(), max).ok_or_else(|| {
                let message = format!(
                    "too many long-polling pulls are waiting for this account on this node (at most {max}); \
                     wait for one to end, or pull with wait_time_ms 0"
                );
                ApiError::new(Kind::RateLimited, message).after(1)
            })?;
            Some(waiter)
        } else {
            None
        };
        // A long poll on a queue known to be empty waits before reading it (`first_look`).
        let known_empty =
            waiter.is_some() && !carries_answers && self.wakeups.known_empty(queue.account(), queue.id()).is_some();
        let read = if known_empty { None } else { Some(self.read_queue(&pull).await?.open()?) };
        // The answers go first, so that a message retried with no delay can be in this very batch.
        let answered = match (&read, &request.answers) {
            (Some(read), Some(answers)) => Some(self.ack(queue, answers, Some(&read.route)).await?),
            _ => None,
        };
        let messages = if let Some(waiter) = &waiter {
            let deadline = Instant::now() + Duration::from_millis(request.wait_ms as u64);
            self.long_poll(waiter, &pull, read, deadline).await?
        } else {
            let read = match read {
                Some(read) => read,
                None => self.read_queue(&pull).await?.open()?,
            };
            self.delivery.lease(&read.route, None, read.limit, read.visibility).await?.messages
        };
        // A queue known to be empty, with nothing leased or delayed either, has no backlog to count.
        let nothing_held = messages.is_empty()
            && waiter.is_some()
            && self.wakeups.known_empty(queue.account(), queue.id()).is_some_and(|k| k.next_visible.is_none());
        let backlog = if nothing_held { Backlog::default() } else { self.backlog.get(&self.pool, queue.id()).await? };
        Ok(Pulled { lane: queue, messages, backlog, answered })
    }

    /// Reads the queue and its consumer for a look; a 404 when the queue is gone.
    async fn read_queue(&self, pull: &Pull) -> ApiResult<QueueState> {
        let at = Instant::now();
        let target = crate::store::consumers::delivery_target(&self.pool, pull.queue)
            .await?
            .ok_or_else(ApiError::queue_not_found)?;
        let consumer = match pull_consumer(&target) {
            Ok(_) if target.pulled_in_lanes && !pull.named => return Ok(QueueState::Closed(several_pull_consumers())),
            Ok(consumer) => consumer,
            Err(err) => return Ok(QueueState::Closed(err)),
        };
        if target.delivery_paused {
            return Ok(QueueState::Closed(ApiError::new(
                Kind::DeliveryPaused,
                "queue_delivery_paused: delivery is paused for this queue; resume it by setting settings.delivery_paused to false",
            )));
        }
        let limit = pull.batch_size.unwrap_or(consumer.batch_size.into());
        let visibility =
            pull.visibility.unwrap_or(consumer.visibility_timeout_ms.map_or(DEFAULT_VISIBILITY_TIMEOUT_MS, i64::from));
        let route = self.delivery.route(pull.queue, &target).await?;
        Ok(QueueState::Open(Read { route, limit, visibility, at }))
    }

    /// Leases as soon as a message can be leased, or answers none at the deadline. Between looks it holds
    /// no connection and makes no query: it sleeps until the queue is woken (a publish, a retry, a pause or
    /// a delete on any node), until its next delayed or leased message becomes visible, until the deadline,
    /// or until the node stops. A queue paused meanwhile, or no longer read by an http_pull consumer, ends
    /// the wait with no messages; a queue deleted meanwhile is a 404, an account suspended meanwhile a 403. `read` is the queue as the pull read
    /// it before waiting, if it did.
    async fn long_poll(
        &self,
        waiter: &Waiter,
        pull: &Pull,
        mut read: Option<Read>,
        deadline: Instant,
    ) -> ApiResult<Vec<StoredMessage>> {
        let marked = self.wakeups.mark(&self.pool, pull.queue.id(), deadline).await?;
        let mut recheck = marked.then(|| Instant::now() + FRESH_MARK_LOOK);
        let mut woken = false;
        loop {
            // Enabled before looking, so that a wake-up sent while looking is not missed.
            let notified = waiter.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let listening_since = Instant::now();
            let look = if woken {
                self.look_after_wake(waiter, pull, listening_since).await?
            } else {
                self.first_look(pull, read.take()).await?
            };
            let next_visible = match look {
                Look::Leased(leased) => return Ok(leased),
                Look::Over => return Ok(Vec::new()),
                Look::Nothing(next_visible) => next_visible,
            };
            let timer = next_visible.filter(|at| *at < deadline);
            let (at, cause) = match (timer, recheck) {
                (Some(t), Some(r)) if r < t => (r, Cause::Recheck),
                (None, Some(r)) if r < deadline => (r, Cause::Recheck),
                (Some(t), _) => (t, Cause::Timer),
                _ => (deadline, Cause::Deadline),
            };
            let cause = loop {
                // An account suspended or deleted meanwhile ends its waits (the set of refused accounts changed).
                let standing = self.standing.changed();
                tokio::pin!(standing);
                standing.as_mut().enable();
                if let Some(status) = self.standing.refusal(pull.queue.account()) {
                    return Err(ApiError::account_refused(status));
                }
                break tokio::select! {
                    _ = waiter.stopping().cancelled() => Cause::Shutdown,
                    _ = &mut notified => Cause::Notify,
                    _ = tokio::time::sleep_until(at.into()) => cause,
                    _ = &mut standing => continue,
                };
            };
            waiter.woken(cause);
            if cause == Cause::Recheck {
                recheck = None;
            }
            if matches!(cause, Cause::Shutdown | Cause::Deadline) {
                return Ok(Vec::new());
            }
            woken = true;
        }
    }

    /// The look before the first wait. None at all when a look since the queue was last woken found it
    /// empty (this node has heard of every change of the queue since: `wakeups::marks`), unless the pull
    /// carried answers, whose retries may have put messages back. Otherwise a lease, with the queue as the
    /// pull read it, or read now.
    async fn first_look(&self, pull: &Pull, read: Option<Read>) -> ApiResult<Look> {
        if !pull.carries_answers {
            if let Some(known) = self.wakeups.known_empty(pull.queue.account(), pull.queue.id()) {
                self.wakeups.look_skipped();
                return Ok(Look::Nothing(known.next_visible));
            }
        }
        let read = match read {
            Some(read) => read,
            None => self.read_queue(pull).await?.open()?,
        };
        self.lease_or_note_empty(pull, &read).await
    }

    /// A look after a wake-up, in this node's turn for the queue: the last look that found nothing stands
    /// for this one if it began after `listening_since` (it saw all that woke this waiter); otherwise the
    /// queue is read again (paused, deleted, consumer changed) and leased from, and finding nothing is kept
    /// for the waiters behind.
    async fn look_after_wake(&self, waiter: &Waiter, pull: &Pull, listening_since: Instant) -> ApiResult<Look> {
        let mut last_empty = waiter.look_turn().await;
        if let Some(look) = *last_empty {
            if look.began >= listening_since {
                return Ok(Look::Nothing(look.next_visible));
            }
        }
        let QueueState::Open(read) = self.read_queue(pull).await? else { return Ok(Look::Over) };
        let look = self.lease_or_note_empty(pull, &read).await?;
        if let Look::Nothing(next_visible) = look {
            *last_empty = Some(EmptyLook { began: read.at, next_visible });
        }
        Ok(look)
    }

    /// Leases from the queue; finding nothing, learns when its next delayed or leased message becomes
    /// visible, and keeps the look for the long polls after it (`Wakeups::found_empty`).
    async fn lease_or_note_empty(&self, pull: &Pull, read: &Read) -> ApiResult<Look> {
        let leased = self.delivery.lease(&read.route, None, read.limit, read.visibility).await?.messages;
        if !leased.is_empty() {
            return Ok(Look::Leased(leased));
        }
        self.metrics.long_poll_looks.inc();
        let retention = read.route.spec.retention_seconds;
        let next = crate::store::messages::next_visible_in_ms(&self.pool, pull.queue, retention).await?;
        let next_visible = next.map(|ms| Instant::now() + Duration::from_millis(ms.max(1) as u64));
        let look = KnownEmpty { account: pull.queue.account(), began: read.at, next_visible };
        self.wakeups.found_empty(pull.queue.id(), look);
        Ok(Look::Nothing(next_visible))
    }
}

/// The queue's consumer, if it is an http_pull one.
fn pull_consumer(target: &DeliveryTarget) -> ApiResult<&ConsumerFields> {
    match &target.consumer {
        Some(c) if c.kind == ConsumerKind::HttpPull => Ok(c),
        _ => Err(ApiError::new(
            Kind::NoPullConsumer,
            "this queue has no http_pull consumer; create one with POST .../consumers {\"type\": \"http_pull\"}",
        )),
    }
}

/// The answer to a pull that does not say which of the queue's http_pull consumers it is.
fn several_pull_consumers() -> ApiError {
    ApiError::invalid(
        "consumer_id is required: this queue has several http_pull consumers; name the one pulling \
         (GET .../consumers lists them)",
    )
}

/// What a pull asks of each look.
struct Pull {
    queue: OwnedQueue,
    /// The pull named its consumer.
    named: bool,
    batch_size: Option<i64>,
    visibility: Option<i64>,
    /// It carries acks or retries, applied before its first look.
    carries_answers: bool,
}

/// The queue as a look read it: where its messages go, and the batch the pull leases.
struct Read {
    route: Route,
    limit: i64,
    visibility: i64,
    /// When the queue was read: a look with this read saw everything committed before then.
    at: Instant,
}

/// What reading the queue found: a queue to lease from, or one that is paused or has no http_pull
/// consumer (a pull is refused; a wait ends with no messages).
enum QueueState {
    Open(Read),
    Closed(ApiError),
}

impl QueueState {
    fn open(self) -> ApiResult<Read> {
        match self {
            QueueState::Open(read) => Ok(read),
            QueueState::Closed(err) => Err(err),
        }
    }
}

/// What a look at the queue found.
enum Look {
    Leased(Vec<StoredMessage>),
    /// The queue was paused, or is no longer read by an http_pull consumer.
    Over,
    /// Nothing to lease; when the next delayed or leased message becomes visible.
    Nothing(Option<Instant>),
}
