//! Pull: leases a batch for the queue's http_pull consumer through the delivery core. Two skiplock
//! extensions: a pull may carry the acks and retries of the batch before it, applied first as an ack
//! would; and it may wait up to `wait_time_ms` for a message (long polling), woken by `wakeups`.

use std::time::{Duration, Instant};

use actix_web::web;
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};

use super::ack::{self, AckOutcome, LeaseRef, RetryRef};
use super::delivery_target;
use super::view::{Handle, MessageView};
use crate::api::envelope::{ok, ApiJson};
use crate::api::extract::{Authed, QueuesReadWrite};
use crate::api::queues::queue_id;
use crate::api::views::BacklogMetrics;
use crate::engine::delivery::Route;
use crate::engine::wakeups::{Cause, EmptyLook, KnownEmpty, Waiter, FRESH_MARK_LOOK};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, QueueId};
use crate::queue::consumer::{
    ConsumerKind, DEFAULT_VISIBILITY_TIMEOUT_MS, MAX_VISIBILITY_TIMEOUT_MS, MAX_WAIT_TIME_MS,
};
use crate::store::consumers::{ConsumerFields, DeliveryTarget};
use crate::store::messages::StoredMessage;
use crate::store::queues::Backlog;
use crate::store::{self};

type Data = web::Data<Engine>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullRequest {
    batch_size: Option<i64>,
    visibility_timeout_ms: Option<i64>,
    visibility_timeout: Option<i64>,
    acks: Option<Vec<LeaseRef>>,
    retries: Option<Vec<RetryRef>>,
    wait_time_ms: Option<i64>,
}

pub async fn pull(
    state: Data,
    auth: Authed<QueuesReadWrite>,
    path: web::Path<(String, String)>,
    body: ApiJson<PullRequest>,
) -> ApiResult<HttpResponse> {
    let account = auth.account_id();
    let request = body.0;
    let batch_size = request.batch_size.map(|n| crate::queue::in_range("batch_size", n, 1, 100, "")).transpose()?;
    let check_visibility = |field: &str, v: Option<i64>| {
        v.map(|v| crate::queue::in_range(field, v, 1, MAX_VISIBILITY_TIMEOUT_MS, " ms")).transpose()
    };
    // Both spellings are checked, so a bad value is refused whichever one would have been used.
    let visibility = check_visibility("visibility_timeout_ms", request.visibility_timeout_ms)?
        .or(check_visibility("visibility_timeout", request.visibility_timeout)?);
    let wait = request.wait_time_ms.map(|w| crate::queue::in_range("wait_time_ms", w, 0, MAX_WAIT_TIME_MS, " ms"));
    let wait = wait.transpose()?.unwrap_or(0);
    let carries_answers = request.acks.is_some() || request.retries.is_some();
    let (acks, retries) = (request.acks.unwrap_or_default(), request.retries.unwrap_or_default());
    ack::check(&acks, &retries)?;
    let pull = Pull { account, raw_queue: &path.1, queue: queue_id(&path.1)?, batch_size, visibility, carries_answers };
    // A place among the account's waiting pulls is taken first, so that a pull over the cap applies nothing.
    let waiter = if wait > 0 {
        let waiter = state.wakeups.wait_on(account, pull.queue).ok_or_else(|| {
            let max = state.wakeups.max_per_account();
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
    let known_empty = waiter.is_some() && !carries_answers && state.wakeups.known_empty(account, pull.queue).is_some();
    let read = if known_empty { None } else { Some(read_queue(&state, &pull).await?.open()?) };
    // The answers go first, so that a message retried with no delay can be in this very batch.
    let answered = match &read {
        Some(read) if carries_answers => {
            Some(ack::apply(&state, account, &path.1, &acks, &retries, Some(&read.route)).await?)
        }
        _ => None,
    };
    let leased = if let Some(waiter) = &waiter {
        let deadline = Instant::now() + Duration::from_millis(wait as u64);
        long_poll(&state, waiter, &pull, read, deadline).await?
    } else {
        let read = match read {
            Some(read) => read,
            None => read_queue(&state, &pull).await?.open()?,
        };
        state.delivery.lease(&read.route, None, read.limit, read.visibility).await?.messages
    };
    // A queue known to be empty, with nothing leased or delayed either, has no backlog to count.
    let nothing_held = leased.is_empty()
        && waiter.is_some()
        && state.wakeups.known_empty(account, pull.queue).is_some_and(|known| known.next_visible.is_none());
    let backlog = if nothing_held { Backlog::default() } else { state.backlog.get(&state.pool, pull.queue).await? };
    let messages: Vec<MessageView<'_>> = leased
        .iter()
        .map(|m| MessageView::of(m, Handle::Lease(state.signer.lease_id(pull.queue, m.id, m.attempts))))
        .collect();
    Ok(ok(PullAnswer {
        message_backlog_count: backlog.count,
        messages,
        metadata: Metadata { metrics: BacklogMetrics::from(&backlog) },
        answered,
    }))
}

#[derive(Serialize)]
struct PullAnswer<'a> {
    message_backlog_count: i64,
    messages: Vec<MessageView<'a>>,
    metadata: Metadata,
    /// Only for a pull that carried acks or retries, so that other clients see Cloudflare's answer.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    answered: Option<AckOutcome>,
}

#[derive(Serialize)]
struct Metadata {
    metrics: BacklogMetrics,
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

/// What a pull asks for.
struct Pull<'a> {
    account: AccountId,
    raw_queue: &'a str,
    queue: QueueId,
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

/// Reads the queue and its consumer for a look; a 404 when the account has no such queue.
async fn read_queue(state: &Engine, pull: &Pull<'_>) -> ApiResult<QueueState> {
    let at = Instant::now();
    let target = delivery_target(state, pull.account, pull.raw_queue).await?;
    let consumer = match pull_consumer(&target) {
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
    let route = state.delivery.route(pull.account, &target).await?;
    Ok(QueueState::Open(Read { route, limit, visibility, at }))
}

/// Leases as soon as a message can be leased, or answers none at the deadline. Between looks it holds no
/// connection and makes no query: it sleeps until the queue is woken (a publish, a retry, a pause or a
/// delete on any node), until its next delayed or leased message becomes visible, until the deadline, or
/// until the node stops. A queue paused meanwhile, or no longer read by an http_pull consumer, ends the
/// wait with no messages; a queue deleted meanwhile is a 404. `read` is the queue as the pull read it
/// before waiting, if it did.
async fn long_poll(
    state: &Engine,
    waiter: &Waiter,
    pull: &Pull<'_>,
    mut read: Option<Read>,
    deadline: Instant,
) -> ApiResult<Vec<StoredMessage>> {
    let marked = state.wakeups.mark(&state.pool, pull.queue, deadline).await?;
    let mut recheck = marked.then(|| Instant::now() + FRESH_MARK_LOOK);
    let mut woken = false;
    loop {
        // Enabled before looking, so that a wake-up sent while looking is not missed.
        let notified = waiter.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let listening_since = Instant::now();
        let look = if woken {
            look_after_wake(state, waiter, pull, listening_since).await?
        } else {
            first_look(state, pull, read.take()).await?
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
        let cause = tokio::select! {
            _ = waiter.stopping().cancelled() => Cause::Shutdown,
            _ = &mut notified => Cause::Notify,
            _ = tokio::time::sleep_until(at.into()) => cause,
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

/// What a look at the queue found.
enum Look {
    Leased(Vec<StoredMessage>),
    /// The queue was paused, or is no longer read by an http_pull consumer.
    Over,
    /// Nothing to lease; when the next delayed or leased message becomes visible.
    Nothing(Option<Instant>),
}

/// The look before the first wait. None at all when a look since the queue was last woken found it
/// empty (this node has heard of every change of the queue since: `wakeups::marks`), unless the pull
/// carried answers, whose retries may have put messages back. Otherwise a lease, with the queue as the
/// pull read it, or read now.
async fn first_look(state: &Engine, pull: &Pull<'_>, read: Option<Read>) -> ApiResult<Look> {
    if !pull.carries_answers {
        if let Some(known) = state.wakeups.known_empty(pull.account, pull.queue) {
            state.wakeups.look_skipped();
            return Ok(Look::Nothing(known.next_visible));
        }
    }
    let read = match read {
        Some(read) => read,
        None => read_queue(state, pull).await?.open()?,
    };
    lease_or_note_empty(state, pull, &read).await
}

/// A look after a wake-up, in this node's turn for the queue: the last look that found nothing stands for
/// this one if it began after `listening_since` (it saw all that woke this waiter); otherwise the queue is
/// read again (paused, deleted, consumer changed) and leased from, and finding nothing is kept for the
/// waiters behind.
async fn look_after_wake(
    state: &Engine,
    waiter: &Waiter,
    pull: &Pull<'_>,
    listening_since: Instant,
) -> ApiResult<Look> {
    let mut last_empty = waiter.look_turn().await;
    if let Some(look) = *last_empty {
        if look.began >= listening_since {
            return Ok(Look::Nothing(look.next_visible));
        }
    }
    let QueueState::Open(read) = read_queue(state, pull).await? else { return Ok(Look::Over) };
    let look = lease_or_note_empty(state, pull, &read).await?;
    if let Look::Nothing(next_visible) = look {
        *last_empty = Some(EmptyLook { began: read.at, next_visible });
    }
    Ok(look)
}

/// Leases from the queue; finding nothing, learns when its next delayed or leased message becomes
/// visible, and keeps the look for the long polls after it (`Wakeups::found_empty`).
async fn lease_or_note_empty(state: &Engine, pull: &Pull<'_>, read: &Read) -> ApiResult<Look> {
    let leased = state.delivery.lease(&read.route, None, read.limit, read.visibility).await?.messages;
    if !leased.is_empty() {
        return Ok(Look::Leased(leased));
    }
    let retention = read.route.spec.retention_seconds;
    let next = store::messages::next_visible_in_ms(&state.pool, pull.queue, retention).await?;
    let next_visible = next.map(|ms| Instant::now() + Duration::from_millis(ms.max(1) as u64));
    state.wakeups.found_empty(pull.queue, KnownEmpty { account: pull.account, began: read.at, next_visible });
    Ok(Look::Nothing(next_visible))
}
