//! The webhook attempt log and test sends: `GET .../consumers/{id}/attempts`, `GET .../messages/{id}/attempts`
//! and `POST .../consumers/{id}/test`.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;

use super::consumers::find_consumer;
use super::envelope::{ok, ok_list};
use super::extract::{AuthedQueue, PathId, QueuesRead, QueuesWrite};
use super::paging::{only_known, param, query_pairs, time_param, Paging};
use super::views::timestamp;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::{ConsumerId, MessageId};
use crate::queue::attempt::AttemptOutcome;
use crate::queue::consumer::ConsumerKind;
use crate::store::attempts::{AttemptFilter, AttemptRow};
use crate::store::owned::OwnedQueue;

type Data = web::Data<Engine>;

/// One attempt as the API shows it.
#[derive(Serialize)]
pub struct AttemptView {
    pub attempt_id: String,
    pub consumer_id: ConsumerId,
    pub attempted_at: String,
    /// The node that made it.
    pub node: String,
    /// A test send rather than a delivery.
    pub test: bool,
    pub batch_size: i32,
    /// The first 100 of the batch's messages.
    pub message_ids: Vec<MessageId>,
    pub outcome: String,
    pub status: Option<i32>,
    pub latency_ms: i32,
    /// The first KiB of the answer's body.
    pub response: Option<String>,
    /// Why no usable answer came.
    pub error: Option<String>,
}

impl From<AttemptRow> for AttemptView {
    fn from(row: AttemptRow) -> Self {
        Self {
            attempt_id: row.id.to_string(),
            consumer_id: row.consumer_id,
            attempted_at: timestamp(row.attempted_at),
            node: row.node.simple().to_string(),
            test: row.test,
            batch_size: row.batch_size,
            message_ids: row.message_ids.into_iter().map(MessageId).collect(),
            outcome: row.outcome,
            status: row.status,
            latency_ms: row.latency_ms,
            response: row.response,
            error: row.error,
        }
    }
}

/// The filters and the page a read asks for; `message_id` only where `by_message` allows it.
fn filter(pairs: &[(String, String)], by_message: bool) -> ApiResult<(AttemptFilter, Paging)> {
    let mut known = vec!["since", "until", "outcome", "page", "per_page"];
    if by_message {
        known.push("message_id");
    }
    only_known(pairs, &known)?;
    let param = |key: &str| param(pairs, key);
    let time = |key: &str| time_param(pairs, key);
    let message = param("message_id")
        .map(|raw| raw.parse::<MessageId>().map_err(|e| ApiError::invalid(format!("message_id: {e}"))))
        .transpose()?;
    let filter = AttemptFilter {
        since: time("since")?,
        until: time("until")?,
        outcome: param("outcome").map(|raw| AttemptOutcome::parse("outcome", raw)).transpose()?,
        message,
    };
    Ok((filter, Paging::parse(pairs)?))
}

/// A page of the queue's attempts (one consumer's with `consumer`), and how many match in all.
async fn page(
    state: &Engine,
    queue: OwnedQueue,
    consumer: Option<ConsumerId>,
    filter: &AttemptFilter,
    paging: Paging,
) -> ApiResult<(HttpResponse, i64)> {
    let (rows, total) = state.attempts(queue, consumer, filter, paging.per_page, paging.offset()).await?;
    let views: Vec<AttemptView> = rows.into_iter().map(AttemptView::from).collect();
    let info = paging.info(views.len(), total);
    Ok((ok_list(views, info), total))
}

/// `GET .../consumers/{consumer_id}/attempts`: the consumer's attempts, newest first.
pub async fn of_consumer(
    state: Data,
    at: AuthedQueue<QueuesRead>,
    id: PathId<ConsumerId>,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let consumer = find_consumer(&state, at.queue, id.0).await?;
    let (filter, paging) = filter(&query_pairs(&req)?, true)?;
    Ok(page(&state, at.queue, Some(consumer.id), &filter, paging).await?.0)
}

/// `GET .../messages/{message_id}/attempts`: the attempts whose batch held the message, newest first; a 404
/// when the queue holds no such message and no attempt names it.
pub async fn of_message(
    state: Data,
    at: AuthedQueue<QueuesRead>,
    id: PathId<MessageId>,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let (mut filter, paging) = filter(&query_pairs(&req)?, false)?;
    filter.message = Some(id.0);
    let (answer, total) = page(&state, at.queue, None, &filter, paging).await?;
    if total == 0 && !state.holds_message(at.queue, id.0).await? {
        return Err(ApiError::not_found("message"));
    }
    Ok(answer)
}

/// `POST .../consumers/{consumer_id}/test`: sends a signed sample batch to a webhook consumer's endpoint
/// now and answers the attempt.
pub async fn test_send(state: Data, at: AuthedQueue<QueuesWrite>, id: PathId<ConsumerId>) -> ApiResult<HttpResponse> {
    let consumer = find_consumer(&state, at.queue, id.0).await?;
    if consumer.kind() != ConsumerKind::Webhook {
        return Err(ApiError::invalid("only webhook consumers have an endpoint to send a test to"));
    }
    let attempt = state.test_send(at.queue, consumer.id).await?.ok_or_else(|| ApiError::not_found("consumer"))?;
    Ok(ok(AttemptView::from(attempt)))
}
