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
use crate::api::queues::queue_id;
use crate::api::views::BacklogMetrics;
use crate::auth::{Authed, QueuesReadWrite};
use crate::delivery::Route;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::AccountId;
use crate::queue::consumer::{
    ConsumerKind, DEFAULT_VISIBILITY_TIMEOUT_MS, MAX_VISIBILITY_TIMEOUT_MS, MAX_WAIT_TIME_MS,
};
use crate::state::AppState;
use crate::store::consumers::{ConsumerFields, DeliveryTarget};
use crate::store::messages::StoredMessage;
use crate::store::{self};
use crate::wakeups::{Cause, EmptyLook, Waiter, FRESH_MARK_LOOK};

type Data = web::Data<AppState>;

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
    // A place among the account's waiting pulls is taken first, so that a pull over the cap applies nothing.
    let waiter = if wait > 0 {
        let queue = queue_id(&path.1)?;
        let waiter = state.wakeups.wait_on(account, queue).ok_or_else(|| {
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
    let target = delivery_target(&state, account, &path.1).await?;
    let consumer = pull_consumer(&target)?;
    if target.delivery_paused {
        return Err(ApiError::new(
            Kind::DeliveryPaused,
            "queue_delivery_paused: delivery is paused for this queue; resume it by setting settings.delivery_paused to false",
        ));
    }
    let limit = batch_size.unwrap_or(consumer.batch_size.into());
    let visibility =
        visibility.unwrap_or(consumer.visibility_timeout_ms.map_or(DEFAULT_VISIBILITY_TIMEOUT_MS, i64::from));
    let route = state.delivery.route(account, &target).await?;
    // The answers go first, so that a message retried with no delay can be in this very batch.
    let answered = if carries_answers {
        Some(ack::apply(&state, account, &path.1, &acks, &retries, Some(&route)).await?)
    } else {
        None
    };
    let leased = match &waiter {
        None => state.delivery.lease(&route, None, limit, visibility).await?.messages,
        Some(waiter) => {
            let deadline = Instant::now() + Duration::from_millis(wait as u64);
            let batch = Batch { account, raw_queue: &path.1, route: &route, limit, visibility };
            long_poll(&state, waiter, batch, deadline).await?
        }
    };
    let backlog = state.backlog.get(&state.pool, target.queue_id).await?;
    let messages: Vec<MessageView<'_>> = leased
        .iter()
        .map(|m| MessageView::of(m, Handle::Lease(state.signer.lease_id(target.queue_id, m.id, m.attempts))))
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

/// What a pull leases.
struct Batch<'a> {
    account: AccountId,
    raw_queue: &'a str,
    route: &'a Route,
    limit: i64,
    visibility: i64,
}

/// Leases as soon as a message can be leased, or answers none at the deadline. Between looks it holds no
/// connection and makes no query: it sleeps until the queue is woken (a publish, a retry, a pause or a
/// delete on any node), until its next delayed or leased message becomes visible, until the deadline, or
/// until the node stops. A queue paused meanwhile, or no longer read by an http_pull consumer, ends the
/// wait with no messages; a queue deleted meanwhile is a 404.
async fn long_poll(
    state: &AppState,
    waiter: &Waiter,
    batch: Batch<'_>,
    deadline: Instant,
) -> ApiResult<Vec<StoredMessage>> {
    let queue = batch.route.queue();
    let marked = state.wakeups.mark(&state.pool, queue, deadline).await?;
    let mut recheck = marked.then(|| Instant::now() + FRESH_MARK_LOOK);
    let mut woken = false;
    loop {
        // Enabled before looking, so that a wake-up sent while looking is not missed.
        let notified = waiter.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let listening_since = Instant::now();
        let next_visible = if woken {
            match look_after_wake(state, waiter, &batch, listening_since).await? {
                Look::Leased(leased) => return Ok(leased),
                Look::Over => return Ok(Vec::new()),
                Look::Nothing(next_visible) => next_visible,
            }
        } else {
            let leased = state.delivery.lease(batch.route, None, batch.limit, batch.visibility).await?.messages;
            if !leased.is_empty() {
                return Ok(leased);
            }
            next_visible(state, &batch).await?
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

/// What a look at the queue after a wake-up found.
enum Look {
    Leased(Vec<StoredMessage>),
    /// The queue was paused, or is no longer read by an http_pull consumer.
    Over,
    /// Nothing to lease; when the next delayed or leased message becomes visible.
    Nothing(Option<Instant>),
}

/// A look after a wake-up, in this node's turn for the queue: the last look that found nothing stands for
/// this one if it began after `listening_since` (it saw all that woke this waiter); otherwise the queue is
/// checked (paused, deleted, consumer changed) and leased from, and finding nothing is kept for the
/// waiters behind.
async fn look_after_wake(
    state: &AppState,
    waiter: &Waiter,
    batch: &Batch<'_>,
    listening_since: Instant,
) -> ApiResult<Look> {
    let mut last_empty = waiter.look_turn().await;
    if let Some(look) = *last_empty {
        if look.began >= listening_since {
            return Ok(Look::Nothing(look.next_visible));
        }
    }
    let began = Instant::now();
    let target = delivery_target(state, batch.account, batch.raw_queue).await?;
    if target.delivery_paused || pull_consumer(&target).is_err() {
        return Ok(Look::Over);
    }
    let leased = state.delivery.lease(batch.route, None, batch.limit, batch.visibility).await?.messages;
    if !leased.is_empty() {
        return Ok(Look::Leased(leased));
    }
    let next_visible = next_visible(state, batch).await?;
    *last_empty = Some(EmptyLook { began, next_visible });
    Ok(Look::Nothing(next_visible))
}

/// When the queue's next delayed or leased message becomes visible, if it has one.
async fn next_visible(state: &AppState, batch: &Batch<'_>) -> ApiResult<Option<Instant>> {
    let retention = batch.route.spec.retention_seconds;
    let next = store::messages::next_visible_in_ms(&state.pool, batch.route.queue(), retention).await?;
    Ok(next.map(|ms| Instant::now() + Duration::from_millis(ms.max(1) as u64)))
}
