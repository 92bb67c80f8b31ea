//! Publish, one message or a batch: validated here, then stored durably by the engine.

use std::borrow::Cow;

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::web::{self, Bytes};
use actix_web::HttpResponse;
use serde::Deserialize;
use serde_json::json;

use crate::api::envelope::{decode, ok, publish_request_bytes, PublishBody};
use crate::api::extract::{AuthedQueue, QueuesWrite};
use crate::api::views::BacklogMetrics;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::queue::message::{self, check_batch, check_delay, Field, NewMessage, PublishInput, Sizes};
use crate::store::owned::OwnedQueue;

type Data = web::Data<Engine>;

/// A published message, borrowing from the request body (see `message::prepare`). Its fields are those
/// Cloudflare's schema defines and skiplock's three keys; any other (a misspelt `delay_seconds`, say) is a 400
/// that names it, `messages[i].field` in a batch, rather than a message stored without it. Refusing costs a
/// valid body nothing: the derived decoder matches each key against the same names either way.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
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
    #[serde(borrow)]
    flow_control_key: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishBatch<'a> {
    #[serde(borrow)]
    messages: Option<Vec<PublishMessage<'a>>>,
    delay_seconds: Option<i64>,
}

pub async fn publish(engine: Data, at: AuthedQueue<QueuesWrite>, body: PublishBody) -> ApiResult<HttpResponse> {
    let sizes = engine.limits_of(at.queue.account()).sizes();
    let body = body.within(publish_request_bytes(sizes.batch)).await?;
    let message: PublishMessage = decode(&body.0)?;
    let prepared = prepare(&[(Field::Message, &message)], None, &body.0, sizes)?;
    store_batch(&engine, at.queue, prepared).await
}

pub async fn publish_batch(engine: Data, at: AuthedQueue<QueuesWrite>, body: PublishBody) -> ApiResult<HttpResponse> {
    let sizes = engine.limits_of(at.queue.account()).sizes();
    let body = body.within(publish_request_bytes(sizes.batch)).await?;
    let batch: PublishBatch = decode(&body.0)?;
    let prepared = prepare_batch(batch.messages.as_deref(), batch.delay_seconds, &body.0, sizes)?;
    store_batch(&engine, at.queue, prepared).await
}

/// A batch's messages (1 to `MAX_BATCH_MESSAGES`) turned into stored ones by the rules of
/// `queue::message` and the sizes of the account's plan; a 400 names the first field to fix.
pub fn prepare_batch(
    messages: Option<&[PublishMessage<'_>]>,
    batch_delay: Option<i64>,
    request: &Bytes,
    sizes: Sizes,
) -> ApiResult<Vec<NewMessage>> {
    let messages = messages.ok_or_else(|| ApiError::invalid("messages is required"))?;
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
    prepare(&named, batch_delay, request, sizes)
}

fn prepare(
    messages: &[(Field, &PublishMessage<'_>)],
    batch_delay: Option<i64>,
    request: &Bytes,
    sizes: Sizes,
) -> ApiResult<Vec<NewMessage>> {
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
                flow_control_key: m.flow_control_key.as_deref(),
            };
            message::prepare(input, batch_delay, request, sizes)
        })
        .collect::<Result<Vec<_>, _>>()?;
    check_batch(&prepared, sizes)?;
    Ok(prepared)
}

/// Publishes the prepared messages and answers.
async fn store_batch(engine: &Engine, queue: OwnedQueue, prepared: Vec<NewMessage>) -> ApiResult<HttpResponse> {
    let keyed = prepared.iter().any(|m| m.idempotency_key.is_some());
    let published = engine.publish(queue, prepared).await?;
    let metrics = published.backlog.as_ref().map_or(json!({}), |b| json!(BacklogMetrics::from(b)));
    // `duplicates` is skiplock's extension: shown only to publishers that use keys.
    let mut answer = if keyed {
        ok(json!({ "metadata": { "metrics": metrics, "duplicates": published.duplicates } }))
    } else {
        ok(json!({ "metadata": { "metrics": metrics } }))
    };
    say_held_back(&mut answer, published.held_back);
    Ok(answer)
}

/// A publish held back by its account's publish rate says so, and for how long.
pub fn say_held_back(answer: &mut HttpResponse, held_back: std::time::Duration) {
    if !held_back.is_zero() {
        let held = HeaderValue::from(held_back.as_millis().max(1) as u64);
        answer.headers_mut().insert(HeaderName::from_static(HELD_BACK_HEADER), held);
    }
}

/// The header of a publish held back for its account's publish rate: how long, in milliseconds.
pub const HELD_BACK_HEADER: &str = "x-skiplock-held-back-ms";
