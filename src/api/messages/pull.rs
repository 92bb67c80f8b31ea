//! Pull: leases a batch for the queue's http_pull consumer through the delivery core. A pull may carry
//! the acks and retries of the batch before it (a skiplock extension), applied first as an ack would.

use actix_web::web;
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};

use super::ack::{self, AckOutcome, LeaseRef, RetryRef};
use super::delivery_target;
use super::view::{Handle, MessageView};
use crate::api::envelope::{ok, ApiJson};
use crate::api::views::BacklogMetrics;
use crate::auth::{Authed, QueuesReadWrite};
use crate::error::{ApiError, ApiResult, Kind};
use crate::queue::consumer::{ConsumerKind, DEFAULT_VISIBILITY_TIMEOUT_MS, MAX_VISIBILITY_TIMEOUT_MS};
use crate::state::AppState;

type Data = web::Data<AppState>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullRequest {
    batch_size: Option<i64>,
    visibility_timeout_ms: Option<i64>,
    visibility_timeout: Option<i64>,
    acks: Option<Vec<LeaseRef>>,
    retries: Option<Vec<RetryRef>>,
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
    let carries_answers = request.acks.is_some() || request.retries.is_some();
    let (acks, retries) = (request.acks.unwrap_or_default(), request.retries.unwrap_or_default());
    ack::check(&acks, &retries)?;
    let target = delivery_target(&state, account, &path.1).await?;
    let consumer =
        match &target.consumer {
            Some(c) if c.kind == ConsumerKind::HttpPull.as_str() => c,
            _ => return Err(ApiError::new(
                Kind::NoPullConsumer,
                "this queue has no http_pull consumer; create one with POST .../consumers {\"type\": \"http_pull\"}",
            )),
        };
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
    let leased = state.delivery.lease(&route, None, limit, visibility).await?.messages;
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
