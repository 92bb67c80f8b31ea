//! Publish, one message or a batch: validated, then stored durably by the group-commit publisher.

use std::borrow::Cow;
use std::time::Duration;

use actix_web::web::{self, Bytes};
use actix_web::HttpResponse;
use serde::Deserialize;
use serde_json::json;

use crate::api::envelope::{decode, ok, RawBody};
use crate::api::extract::{Authed, QueuesWrite};
use crate::api::queues::queue_id;
use crate::api::views::BacklogMetrics;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::AccountId;
use crate::queue::message::{self, check_batch, check_delay, Field, PublishInput};

type Data = web::Data<Engine>;

/// A published message, borrowing from the request body (see `message::prepare`).
#[derive(Deserialize)]
pub struct PublishMessage<'a> {
    #[serde(borrow)]
    body: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    content_type: Option<Cow<'a, str>>,
    delay_seconds: Option<i64>,
    #[serde(borrow)]
    idempotency_key: Option<Cow<'a, str>>,
    #[serde(borrow)]
    ordering_key: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub struct PublishBatch<'a> {
    #[serde(borrow)]
    messages: Option<Vec<PublishMessage<'a>>>,
    delay_seconds: Option<i64>,
}

async fn store_batch(
    state: &Engine,
    account: AccountId,
    raw_queue: &str,
    request: &Bytes,
    messages: &[(Field, &PublishMessage<'_>)],
    batch_delay: Option<i64>,
) -> ApiResult<HttpResponse> {
    let queue = queue_id(raw_queue)?;
    let batch_delay = batch_delay.map(|d| check_delay("delay_seconds", d)).transpose()?;
    let prepared = messages
        .iter()
        .map(|(field, m)| {
            let input = PublishInput {
                field: *field,
                body: m.body,
                content_type: m.content_type.as_deref(),
                delay_seconds: m.delay_seconds,
                idempotency_key: m.idempotency_key.as_deref(),
                ordering_key: m.ordering_key.as_deref(),
            };
            message::prepare(input, batch_delay, request)
        })
        .collect::<Result<Vec<_>, _>>()?;
    check_batch(&prepared)?;
    let (count, bytes) = (prepared.len(), prepared.iter().map(|m| m.body.len()).sum::<usize>());
    hold_to_publish_rate(state, account, count).await?;
    // The backlog figure is up to about two seconds old, so a queue may overshoot its quota by that much.
    let max = state.limits.max_backlog_bytes_per_queue;
    let backlog = state.backlog.get(&state.pool, queue).await?;
    if backlog.bytes + bytes as i64 > max {
        let message = format!(
            "the queue is full: its backlog holds {} of its {max} bytes; publish again once consumers catch up",
            backlog.bytes
        );
        return Err(ApiError::new(Kind::QueueFull, message).after(10));
    }
    let keyed = prepared.iter().any(|m| m.idempotency_key.is_some());
    let duplicates = state.publisher.publish(account, queue, prepared).await?.ok_or_else(ApiError::queue_not_found)?;
    state.activity.published(queue, count - duplicates);
    // Which messages were duplicates is not known here; the cached backlog refreshes by itself.
    if duplicates == 0 {
        state.backlog.added(queue, count, bytes, chrono::Utc::now());
    }
    // The messages are committed; metrics are best effort and must not turn a stored publish into an error.
    let metrics = match state.backlog.get(&state.pool, queue).await {
        Ok(backlog) => json!(BacklogMetrics::from(&backlog)),
        Err(err) => {
            tracing::warn!(error = %err, "backlog metrics after publish failed");
            json!({})
        }
    };
    // `duplicates` is skiplock's extension: shown only to publishers that use keys.
    if keyed {
        return Ok(ok(json!({ "metadata": { "metrics": metrics, "duplicates": duplicates } })));
    }
    Ok(ok(json!({ "metadata": { "metrics": metrics } })))
}

/// The most a publish waits for its share of its account's publish rate before it is refused instead.
const MAX_RATE_WAIT: Duration = Duration::from_secs(1);

/// Holds a publish back until its account's publish rate on this node allows its `count` messages, or
/// refuses it (429, nothing stored) when that would take longer than `MAX_RATE_WAIT`.
async fn hold_to_publish_rate(state: &Engine, account: AccountId, count: usize) -> ApiResult<()> {
    let held_back = &state.activity.metrics.publishes_held_back;
    match state.publish_rate.take_many(account, count as u32, MAX_RATE_WAIT) {
        Ok(wait) if wait.is_zero() => Ok(()),
        Ok(wait) => {
            held_back.with_label_values(&["delayed"]).inc();
            tokio::time::sleep(wait).await;
            Ok(())
        }
        Err(refill) => {
            held_back.with_label_values(&["refused"]).inc();
            let message = format!(
                "this account is over its publish rate of {} messages per second on this node; \
                 retry after the Retry-After seconds",
                state.limits.publish_rate_per_second
            );
            Err(ApiError::new(Kind::RateLimited, message).after(refill.as_secs_f64().ceil() as u64))
        }
    }
}

pub async fn publish(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String)>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    let message: PublishMessage = decode(&body.0)?;
    store_batch(&state, auth.account_id(), &path.1, &body.0, &[(Field::Message, &message)], None).await
}

pub async fn publish_batch(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String)>,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    let batch: PublishBatch = decode(&body.0)?;
    let messages = batch.messages.as_deref().ok_or_else(|| ApiError::invalid("messages is required"))?;
    if messages.is_empty() {
        return Err(ApiError::invalid("messages must hold at least one message"));
    }
    if messages.len() > message::MAX_BATCH_MESSAGES {
        return Err(ApiError::new(
            Kind::TooManyMessages,
            format!("a batch may hold at most {} messages, got {}", message::MAX_BATCH_MESSAGES, messages.len()),
        ));
    }
    let named: Vec<(Field, &PublishMessage)> = messages.iter().enumerate().map(|(i, m)| (Field::Batch(i), m)).collect();
    store_batch(&state, auth.account_id(), &path.1, &body.0, &named, batch.delay_seconds).await
}
