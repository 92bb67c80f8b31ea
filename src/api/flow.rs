//! Flow control per key (a skiplock extension): the keys of a queue with what each holds back and why, and
//! the account's own limits for one key (parallelism, rate, a pause) over those of the queue's consumer.

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use percent_encoding::percent_decode_str;
use serde::{Deserialize, Serialize};

use super::envelope::{ok, ok_list, ApiJson};
use super::paging::{query_pairs, Paging};
use super::views::timestamp;
use crate::api::extract::{AuthedQueue, QueuesRead, QueuesWrite};
use crate::engine::audit::Change;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::queue::flow::{FlowLimits, FlowLimitsInput, HeldBy};
use crate::queue::message::MessageKey;
use crate::store::flow::FlowKey;
use crate::store::owned::OwnedQueue;

type Data = web::Data<Engine>;

/// The key in the path as sent. Read by the handler once its request is authorized, percent-decoded (a
/// key may hold `/`, sent as `%2F`, which the router leaves encoded).
pub struct KeyPath(String);

impl FromRequest for KeyPath {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(Ok(KeyPath(req.match_info().get("flow_key").unwrap_or_default().to_owned())))
    }
}

impl KeyPath {
    fn key(&self) -> ApiResult<MessageKey> {
        const FIELD: &str = "the flow key in the path";
        let decoded = percent_decode_str(&self.0)
            .decode_utf8()
            .map_err(|_| ApiError::invalid(format!("{FIELD} must be UTF-8 once percent-decoded, got {:?}", self.0)))?;
        Ok(MessageKey::parse(FIELD, &decoded)?)
    }
}

/// The account's limits for a key: a limit left out or null takes the consumer's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyLimitsBody {
    parallelism: Option<i64>,
    rate: Option<i64>,
    period: Option<i64>,
    paused: Option<bool>,
}

#[derive(Serialize)]
struct FlowKeyView {
    flow_control_key: String,
    /// Let go: ready, leased, or waiting for a retry.
    released: i64,
    /// Held back by the key's limits.
    waiting: i64,
    held_by: Option<HeldBy>,
    next_release_at: Option<String>,
    parallelism: Option<i64>,
    rate: Option<i64>,
    period: Option<i64>,
    paused: bool,
    /// The account's own limits for the key; null when the consumer's apply.
    overrides: Option<FlowLimits>,
    modified_on: Option<String>,
}

impl From<&FlowKey> for FlowKeyView {
    fn from(k: &FlowKey) -> Self {
        FlowKeyView {
            flow_control_key: k.key.clone(),
            released: k.released,
            waiting: k.waiting,
            held_by: HeldBy::of(k.waiting, k.paused, k.released, k.limits.parallelism, k.next_at.is_some()),
            next_release_at: k.next_at.map(timestamp),
            parallelism: k.limits.parallelism,
            rate: k.limits.rate,
            period: k.limits.period,
            paused: k.paused,
            overrides: k.overrides,
            modified_on: k.updated_at.map(timestamp),
        }
    }
}

/// `GET .../flow_keys`: the queue's keys with messages or limits of their own, those holding the most
/// back first; `waiting=true` lists only keys holding messages back. Paged (`page`, `per_page`).
pub async fn list(state: Data, at: AuthedQueue<QueuesRead>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let pairs = query_pairs(&req)?;
    let waiting_only = match pairs.iter().find(|(name, _)| name == "waiting").map(|(_, v)| v.as_str()) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(ApiError::invalid(format!("waiting must be true or false, got {other:?}"))),
    };
    let rest: Vec<(String, String)> = pairs.into_iter().filter(|(name, _)| name != "waiting").collect();
    let paging = Paging::parse(&rest)?;
    let (keys, total) = state.flow_keys(at.queue, waiting_only, paging.per_page, paging.offset()).await?;
    let info = paging.info(keys.len(), total);
    Ok(ok_list(keys.iter().map(FlowKeyView::from).collect::<Vec<_>>(), info))
}

/// `GET .../flow_keys/{flow_key}`: any key, with or without messages.
pub async fn get(state: Data, at: AuthedQueue<QueuesRead>, path: KeyPath) -> ApiResult<HttpResponse> {
    let key = path.key()?;
    Ok(ok(FlowKeyView::from(&found(&state, at.queue, &key).await?)))
}

/// `PUT .../flow_keys/{flow_key}`: the account's limits for the key (its pause stays as it is unless given).
pub async fn put(
    state: Data,
    at: AuthedQueue<QueuesWrite>,
    path: KeyPath,
    body: ApiJson<KeyLimitsBody>,
) -> ApiResult<HttpResponse> {
    let key = path.key()?;
    let body = body.0;
    let given = FlowLimitsInput { parallelism: body.parallelism, rate: body.rate, period: body.period };
    let limits = FlowLimits::parse("", &given, false)?;
    let before = found(&state, at.queue, &key).await?;
    if !state.set_flow_limits(at.queue, key.as_str(), limits, body.paused).await? {
        return Err(ApiError::queue_not_found());
    }
    changed(&state, &at, &key, before, "flow_key.update").await
}

/// `DELETE .../flow_keys/{flow_key}`: the consumer's limits apply to the key again, unpaused.
pub async fn delete(state: Data, at: AuthedQueue<QueuesWrite>, path: KeyPath) -> ApiResult<HttpResponse> {
    let key = path.key()?;
    let before = found(&state, at.queue, &key).await?;
    if !state.clear_flow_limits(at.queue, key.as_str()).await? {
        return Err(ApiError::not_found("flow key with limits of its own"));
    }
    changed(&state, &at, &key, before, "flow_key.delete").await
}

/// `POST .../flow_keys/{flow_key}/pause`: none of the key's messages is let go until it is resumed.
pub async fn pause(state: Data, at: AuthedQueue<QueuesWrite>, path: KeyPath) -> ApiResult<HttpResponse> {
    paused(&state, &at, &path, true, "flow_key.pause").await
}

/// `POST .../flow_keys/{flow_key}/resume`: the key's messages go again, within its limits.
pub async fn resume(state: Data, at: AuthedQueue<QueuesWrite>, path: KeyPath) -> ApiResult<HttpResponse> {
    paused(&state, &at, &path, false, "flow_key.resume").await
}

async fn paused(
    state: &Engine,
    at: &AuthedQueue<QueuesWrite>,
    path: &KeyPath,
    paused: bool,
    action: &'static str,
) -> ApiResult<HttpResponse> {
    let key = path.key()?;
    let before = found(state, at.queue, &key).await?;
    if !state.pause_flow_key(at.queue, key.as_str(), paused).await? {
        return Err(ApiError::queue_not_found());
    }
    changed(state, at, &key, before, action).await
}

async fn found(state: &Engine, queue: OwnedQueue, key: &MessageKey) -> ApiResult<FlowKey> {
    state.flow_key(queue, key.as_str()).await?.ok_or_else(ApiError::queue_not_found)
}

/// Answers with the key as it is now, and records the change in the audit log.
async fn changed(
    state: &Engine,
    at: &AuthedQueue<QueuesWrite>,
    key: &MessageKey,
    before: FlowKey,
    action: &'static str,
) -> ApiResult<HttpResponse> {
    let after = FlowKeyView::from(&found(state, at.queue, key).await?);
    let id = format!("{}/{}", at.queue.id(), key.as_str());
    let change = Change::new("flow_key", id, action).from(FlowKeyView::from(&before)).to(&after);
    state.audit(at.queue.account(), &at.auth.actor, change).await;
    Ok(ok(after))
}
