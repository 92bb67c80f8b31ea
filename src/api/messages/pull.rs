//! Pull: leases a batch for the queue's http_pull consumer (`Engine::pull`). Two skiplock extensions:
//! a pull may carry the acks and retries of the batch before it, and it may wait up to `wait_time_ms`
//! for a message (long polling).

use actix_web::web;
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};

use super::ack::{self, AckView, LeaseRef, RetryRef};
use super::view::{Handle, MessageView};
use crate::api::envelope::{ok, ApiJson};
use crate::api::extract::{AuthedQueue, QueuesReadWrite};
use crate::api::views::BacklogMetrics;
use crate::engine::pull::PullRequest;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::ConsumerId;
use crate::queue::consumer::{MAX_VISIBILITY_TIMEOUT_MS, MAX_WAIT_TIME_MS};
use crate::queue::in_range;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullBody {
    batch_size: Option<i64>,
    visibility_timeout_ms: Option<i64>,
    visibility_timeout: Option<i64>,
    acks: Option<Vec<LeaseRef>>,
    retries: Option<Vec<RetryRef>>,
    wait_time_ms: Option<i64>,
    consumer_id: Option<String>,
}

pub async fn pull(
    engine: web::Data<Engine>,
    at: AuthedQueue<QueuesReadWrite>,
    body: ApiJson<PullBody>,
) -> ApiResult<HttpResponse> {
    let body = body.0;
    let batch_size = body.batch_size.map(|n| in_range("batch_size", n, 1, 100, "")).transpose()?;
    let check_visibility =
        |field: &str, v: Option<i64>| v.map(|v| in_range(field, v, 1, MAX_VISIBILITY_TIMEOUT_MS, " ms")).transpose();
    // Both spellings are checked, so a bad value is refused whichever one would have been used.
    let visibility_ms = check_visibility("visibility_timeout_ms", body.visibility_timeout_ms)?
        .or(check_visibility("visibility_timeout", body.visibility_timeout)?);
    let wait_ms = body.wait_time_ms.map(|w| in_range("wait_time_ms", w, 0, MAX_WAIT_TIME_MS, " ms")).transpose()?;
    let answers = match (body.acks, body.retries) {
        (None, None) => None,
        (acks, retries) => Some(ack::checked(acks.unwrap_or_default(), retries.unwrap_or_default())?),
    };
    let consumer = body
        .consumer_id
        .map(|id| {
            id.parse::<ConsumerId>()
                .map_err(|_| ApiError::invalid(format!("consumer_id '{id}' is not a consumer id (32 hex digits)")))
        })
        .transpose()?;
    let request = PullRequest { consumer, batch_size, visibility_ms, wait_ms: wait_ms.unwrap_or(0), answers };
    let pulled = engine.pull(at.queue, request).await?;
    let queue = pulled.lane.id();
    let messages: Vec<MessageView<'_>> = pulled
        .messages
        .iter()
        .map(|m| MessageView::of(m, Handle::Lease(engine.signer.lease_id(queue, m.id, m.attempts))))
        .collect();
    Ok(ok(PullAnswer {
        message_backlog_count: pulled.backlog.count,
        messages,
        metadata: Metadata { metrics: BacklogMetrics::from(&pulled.backlog) },
        answered: pulled.answered.map(AckView::from),
    }))
}

#[derive(Serialize)]
struct PullAnswer<'a> {
    message_backlog_count: i64,
    messages: Vec<MessageView<'a>>,
    metadata: Metadata,
    /// Only for a pull that carried acks or retries, so that other clients see Cloudflare's answer.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    answered: Option<AckView>,
}

#[derive(Serialize)]
struct Metadata {
    metrics: BacklogMetrics,
}
