//! Message endpoints: publish (single and batch), pull, ack/retry, peek and purge by ref.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

use actix_web::web::{self, Bytes};
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::envelope::{decode, ok, ApiJson, RawBody};
use super::queues::{find_queue, queue_id};
use crate::auth::{Authed, QueuesRead, QueuesReadWrite, QueuesWrite};
use crate::delivery::{Answer, Settled};
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, MessageId};
use crate::queue::answer::Decision;
use crate::queue::consumer::{ConsumerKind, DEFAULT_VISIBILITY_TIMEOUT_MS};
use crate::queue::message::{self, check_batch, check_delay, ContentType, Field, PublishInput, PulledBody};
use crate::state::AppState;
use crate::store::consumers::DeliveryTarget;
use crate::store::messages::StoredMessage;
use crate::store::{self, queues::Backlog};

type Data = web::Data<AppState>;

const MAX_PEEK: i64 = 100;
const MAX_ACKS: usize = 1000;

/// Backlog figures as publish and pull answers carry them.
#[derive(Serialize)]
pub struct BacklogMetrics {
    backlog_count: i64,
    backlog_bytes: i64,
    oldest_message_timestamp_ms: i64,
}

impl From<&Backlog> for BacklogMetrics {
    fn from(backlog: &Backlog) -> Self {
        BacklogMetrics {
            backlog_count: backlog.count,
            backlog_bytes: backlog.bytes,
            oldest_message_timestamp_ms: backlog.oldest.map(|t| t.timestamp_millis()).unwrap_or(0),
        }
    }
}

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
}

#[derive(Deserialize)]
pub struct PublishBatch<'a> {
    #[serde(borrow)]
    messages: Option<Vec<PublishMessage<'a>>>,
    delay_seconds: Option<i64>,
}

async fn store_batch(
    state: &AppState,
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
            };
            message::prepare(input, batch_delay, request)
        })
        .collect::<Result<Vec<_>, _>>()?;
    check_batch(&prepared)?;
    let (count, bytes) = (prepared.len(), prepared.iter().map(|m| m.body.len()).sum::<usize>());
    // The backlog figure is up to a second old, so a queue may overshoot its quota by that much.
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

/// The queue's delivery settings, or a 404 for a queue the account does not have.
async fn delivery_target(state: &AppState, account: AccountId, raw_queue: &str) -> ApiResult<DeliveryTarget> {
    let id = queue_id(raw_queue)?;
    store::consumers::delivery_target(&state.pool, account, id).await?.ok_or_else(ApiError::queue_not_found)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullRequest {
    batch_size: Option<i64>,
    visibility_timeout_ms: Option<i64>,
    visibility_timeout: Option<i64>,
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
    let check_visibility =
        |field: &str, v: Option<i64>| v.map(|v| crate::queue::in_range(field, v, 1, 43_200_000, " ms")).transpose();
    // Both spellings are checked, so a bad value is refused whichever one would have been used.
    let visibility = check_visibility("visibility_timeout_ms", request.visibility_timeout_ms)?
        .or(check_visibility("visibility_timeout", request.visibility_timeout)?);
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
    }))
}

#[derive(Serialize)]
struct PullAnswer<'a> {
    message_backlog_count: i64,
    messages: Vec<MessageView<'a>>,
    metadata: Metadata,
}

#[derive(Serialize)]
struct Metadata {
    metrics: BacklogMetrics,
}

/// A message as pull and peek show it; pull adds its lease id, peek its ref.
#[derive(Serialize)]
struct MessageView<'a> {
    id: MessageId,
    body: PulledBody<'a>,
    attempts: i32,
    timestamp_ms: i64,
    metadata: MessageMetadata,
    #[serde(flatten)]
    handle: Handle,
}

#[derive(Serialize)]
enum Handle {
    #[serde(rename = "lease_id")]
    Lease(String),
    #[serde(rename = "ref")]
    Ref(String),
}

#[derive(Serialize)]
struct MessageMetadata {
    #[serde(rename = "CF-Content-Type")]
    content_type: &'static str,
    #[serde(rename = "CF-sourceMessageSource")]
    source: &'static str,
}

impl<'a> MessageView<'a> {
    fn of(m: &'a StoredMessage, handle: Handle) -> Self {
        let content_type = ContentType::from_code(m.content_type);
        MessageView {
            id: m.id,
            body: PulledBody { content_type, bytes: &m.body },
            attempts: m.attempts,
            timestamp_ms: m.published_at.timestamp_millis(),
            metadata: MessageMetadata { content_type: content_type.as_str(), source: "api" },
            handle,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    #[serde(default)]
    acks: Vec<LeaseRef>,
    #[serde(default)]
    retries: Vec<RetryRef>,
}

#[derive(Deserialize)]
pub struct LeaseRef {
    lease_id: String,
}

#[derive(Deserialize)]
pub struct RetryRef {
    lease_id: String,
    delay_seconds: Option<i64>,
}

pub async fn ack(
    state: Data,
    auth: Authed<QueuesReadWrite>,
    path: web::Path<(String, String)>,
    body: ApiJson<AckRequest>,
) -> ApiResult<HttpResponse> {
    let account = auth.account_id();
    let request = body.0;
    if request.acks.len() + request.retries.len() > MAX_ACKS {
        return Err(ApiError::invalid(format!("at most {MAX_ACKS} acks and retries per request")));
    }
    // Validate everything before applying anything.
    for (i, r) in request.retries.iter().enumerate() {
        if let Some(d) = r.delay_seconds {
            check_delay(format_args!("retries[{i}].delay_seconds"), d)?;
        }
    }
    let queue = queue_id(&path.1)?;
    let mut warnings: BTreeMap<String, String> = BTreeMap::new();
    let mut unknown = |lease_id: &str| {
        warnings.insert(lease_id.to_owned(), "unknown lease id for this queue; nothing changed".into());
    };

    // Each answer with the lease it came with; the precedence rules are the delivery module's.
    let mut answers: Vec<(Answer, &str)> = Vec::new();
    for a in &request.acks {
        match state.signer.open_lease(queue, &a.lease_id) {
            Some(lease) => answers
                .push((Answer { id: lease.message_id, attempt: lease.attempt, decision: Decision::Ack }, &a.lease_id)),
            None => unknown(&a.lease_id),
        }
    }
    let acks = answers.len();
    for r in &request.retries {
        match state.signer.open_lease(queue, &r.lease_id) {
            Some(lease) => answers.push((
                Answer { id: lease.message_id, attempt: lease.attempt, decision: Decision::Retry(r.delay_seconds) },
                &r.lease_id,
            )),
            None => unknown(&r.lease_id),
        }
    }
    // Retries need the consumer's settings. An ack's delete checks the queue is the account's itself, so
    // only a request with retries, or with nothing to apply, looks the queue up first.
    let route = if acks == answers.len() && acks > 0 {
        None
    } else {
        let target = delivery_target(&state, account, &path.1).await?;
        Some(state.delivery.route(account, &target).await?)
    };
    let plain: Vec<Answer> = answers.iter().map(|(a, _)| *a).collect();
    let settled = if plain.is_empty() {
        Settled::default()
    } else {
        state.delivery.settle(account, queue, route.as_ref(), &plain, 0).await?.ok_or_else(ApiError::queue_not_found)?
    };
    let acked: HashSet<MessageId> = answers[..acks].iter().map(|(a, _)| a.id).collect();
    for (answer, lease_id) in &answers[..acks] {
        if !settled.acked.contains(&answer.id) {
            warnings.insert(
                lease_id.to_string(),
                "the message is already gone (acked, dead-lettered or expired); nothing changed".into(),
            );
        }
    }
    let mut retry_count = 0;
    for (answer, lease_id) in &answers[acks..] {
        if settled.retried.contains(&answer.id) {
            retry_count += 1;
        } else if !acked.contains(&answer.id) {
            // A message acked in the same request is gone; its retry had nothing left to do.
            warnings.insert(
                lease_id.to_string(),
                "this lease is no longer the message's current one (it expired and the message was \
                 delivered again, or it was already acked or retried); the retry changed nothing"
                    .into(),
            );
        }
    }
    let ack_count = settled.acked.len();
    Ok(ok(json!({ "ackCount": ack_count, "retryCount": retry_count, "warnings": warnings })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeekRequest {
    batch_size: Option<i64>,
}

pub async fn peek(
    state: Data,
    auth: Authed<QueuesRead>,
    path: web::Path<(String, String)>,
    body: ApiJson<PeekRequest>,
) -> ApiResult<HttpResponse> {
    let limit = body.0.batch_size.map(|n| crate::queue::in_range("batch_size", n, 1, MAX_PEEK, "")).transpose()?;
    let queue = find_queue(&state, auth.account_id(), &path.1).await?;
    let retention = queue.message_retention_period.into();
    let found = store::messages::peek(&state.pool, queue.id, retention, limit.unwrap_or(10)).await?;
    let messages: Vec<MessageView<'_>> =
        found.iter().map(|m| MessageView::of(m, Handle::Ref(state.signer.peek_ref(queue.id, m.id)))).collect();
    Ok(ok(json!({ "messages": messages })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeRefs {
    refs: Option<Vec<RefItem>>,
}

#[derive(Deserialize)]
pub struct RefItem {
    #[serde(rename = "ref")]
    reference: String,
}

pub async fn purge(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String)>,
    body: ApiJson<PurgeRefs>,
) -> ApiResult<HttpResponse> {
    let refs = body.0.refs.ok_or_else(|| ApiError::invalid("refs is required: [{\"ref\": ...}] from a peek"))?;
    if refs.len() > MAX_ACKS {
        return Err(ApiError::invalid(format!("at most {MAX_ACKS} refs per request")));
    }
    let queue = find_queue(&state, auth.account_id(), &path.1).await?;
    let mut warnings: BTreeMap<String, &str> = BTreeMap::new();
    let mut wanted: Vec<(MessageId, &str)> = Vec::new();
    for item in &refs {
        match state.signer.open_ref(queue.id, &item.reference) {
            Some(id) => wanted.push((id, &item.reference)),
            None => {
                warnings.insert(item.reference.clone(), "unknown ref for this queue");
            }
        }
    }
    let ids: Vec<MessageId> = wanted.iter().map(|(id, _)| *id).collect();
    let gone = store::messages::delete(&state.pool, queue.id, &ids).await?;
    state.backlog.removed(queue.id, gone.ids.len(), gone.bytes);
    let deleted: HashSet<MessageId> = gone.ids.into_iter().collect();
    for (id, reference) in wanted {
        if !deleted.contains(&id) {
            warnings.insert(reference.to_owned(), "the message is no longer in the queue");
        }
    }
    Ok(ok(json!({ "errors": [], "warnings": warnings })))
}
