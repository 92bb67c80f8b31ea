//! Event subscriptions (Cloudflare's `event_subscriptions/subscriptions`, its routes and shapes): the
//! events of one queue or of every queue of the account, published as messages into a queue of the
//! account's (`crate::engine::events`). The sources are skiplock's own; Cloudflare's product sources are
//! a 400 naming them.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::envelope::{ok, ok_list, ApiJson};
use super::paging::{only_known, param, query_pairs, Paging};
use super::views::timestamp;
use crate::api::extract::{path_id, Authed, PathId, QueuesRead, QueuesWrite};
use crate::engine::audit::Change;
use crate::engine::events::{NewSubscription, Order, Source, SubscriptionChange};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, QueueId, SubscriptionId};
use crate::queue::event::{self, DESTINATION_QUEUE, ONE_QUEUE};
use crate::store::events::Subscription;
use crate::store::owned::OwnedQueue;

type Data = web::Data<Engine>;

/// The most a page of subscriptions holds (Cloudflare's `per_page` maximum).
const MAX_PER_PAGE: i64 = 100;

/// A source as given: its type first, then the fields of skiplock's sources.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceBody {
    #[serde(rename = "type")]
    kind: String,
    queue_name: Option<String>,
    queue_id: Option<String>,
    backlog_threshold: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DestinationBody {
    #[serde(rename = "type")]
    kind: Option<String>,
    queue_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    name: Option<String>,
    enabled: Option<bool>,
    /// Read by its type first, so that a source of Cloudflare's gets a 400 naming ours rather than one
    /// about its fields.
    source: Option<Value>,
    events: Option<Vec<String>>,
    destination: Option<DestinationBody>,
}

/// A change: the source is set once.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchBody {
    name: Option<String>,
    enabled: Option<bool>,
    events: Option<Vec<String>>,
    destination: Option<DestinationBody>,
}

#[derive(Serialize)]
struct SubscriptionView {
    id: SubscriptionId,
    name: String,
    enabled: bool,
    source: Value,
    events: Vec<String>,
    destination: Value,
    created_at: String,
    modified_at: String,
}

impl From<&Subscription> for SubscriptionView {
    fn from(s: &Subscription) -> Self {
        let mut source = json!({"type": s.source_type});
        if let Some(queue) = s.queue {
            source["queue_id"] = json!(queue.id());
            source["queue_name"] = json!(s.queue_name);
        }
        if let Some(threshold) = s.backlog_threshold {
            source["backlog_threshold"] = json!(threshold);
        }
        SubscriptionView {
            id: s.id,
            name: s.name.clone(),
            enabled: s.enabled,
            source,
            events: s.events.clone(),
            destination: json!({"type": DESTINATION_QUEUE, "queue_id": s.destination.id()}),
            created_at: timestamp(s.created_at),
            modified_at: timestamp(s.modified_at),
        }
    }
}

/// The account's queue `raw` names by id (`field` in messages); another account's is a 404.
async fn queue_by_id(state: &Engine, account: AccountId, field: &str, raw: &str) -> ApiResult<OwnedQueue> {
    let id: QueueId = path_id(raw, Kind::MalformedQueueId)
        .map_err(|_| ApiError::invalid(format!("{field} must be a queue's id, got {raw:?}")))?;
    state.owned_queue(account, id).await?.ok_or_else(ApiError::queue_not_found)
}

async fn destination(state: &Engine, account: AccountId, d: DestinationBody) -> ApiResult<OwnedQueue> {
    match d.kind.as_deref() {
        Some(DESTINATION_QUEUE) => {}
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "destination.type must be {DESTINATION_QUEUE:?} (events go into a queue), got {other:?}"
            )))
        }
        None => return Err(ApiError::invalid(format!("destination.type is required: {DESTINATION_QUEUE:?}"))),
    }
    let raw = d.queue_id.ok_or_else(|| ApiError::invalid("destination.queue_id is required"))?;
    queue_by_id(state, account, "destination.queue_id", &raw).await
}

/// The source's type checked first, then its fields; its queue resolved in the account.
async fn source(state: &Engine, account: AccountId, raw: Value) -> ApiResult<(Source, Option<i64>)> {
    let kind = raw.get("type").and_then(Value::as_str).ok_or_else(|| {
        ApiError::invalid(format!("source.type is required: {ONE_QUEUE:?} (one queue) or {:?}", event::EVERY_QUEUE))
    })?;
    let kind = event::check_source_type(kind)?;
    let body: SourceBody =
        serde_json::from_value(raw).map_err(|e| ApiError::invalid(format!("invalid request body at source: {e}")))?;
    debug_assert_eq!(body.kind, kind);
    if kind != ONE_QUEUE {
        if body.queue_name.is_some() || body.queue_id.is_some() {
            return Err(ApiError::invalid(format!(
                "source.queue_name and source.queue_id belong to a {ONE_QUEUE:?} source; {kind:?} is every queue"
            )));
        }
        return Ok((Source::EveryQueue, body.backlog_threshold));
    }
    let queue = match (body.queue_name, body.queue_id) {
        (Some(name), None) => state.queue_named(account, &name).await?.ok_or_else(ApiError::queue_not_found)?,
        (None, Some(id)) => queue_by_id(state, account, "source.queue_id", &id).await?,
        _ => {
            return Err(ApiError::invalid(
                "a queues.queue source names its queue by queue_name or queue_id, one of them",
            ))
        }
    };
    Ok((Source::Queue(queue), body.backlog_threshold))
}

/// `POST .../event_subscriptions/subscriptions`.
pub async fn create(state: Data, at: Authed<QueuesWrite>, body: ApiJson<CreateBody>) -> ApiResult<HttpResponse> {
    let account = at.account_id();
    let body = body.0;
    let name = body.name.ok_or_else(|| ApiError::invalid("name is required"))?;
    let events = body.events.ok_or_else(|| {
        ApiError::invalid(format!("events is required, one or more of: {}", event::EventType::names().join(", ")))
    })?;
    let raw_source = body.source.ok_or_else(|| {
        ApiError::invalid(format!(
            "source is required: {{\"type\": {ONE_QUEUE:?}, \"queue_name\": ...}} or {{\"type\": {:?}}}",
            event::EVERY_QUEUE
        ))
    })?;
    let (source, backlog_threshold) = source(&state, account, raw_source).await?;
    let given = body.destination.ok_or_else(|| {
        ApiError::invalid(format!("destination is required: {{\"type\": {DESTINATION_QUEUE:?}, \"queue_id\": ...}}"))
    })?;
    let destination = destination(&state, account, given).await?;
    let new =
        NewSubscription { name, enabled: body.enabled.unwrap_or(true), source, backlog_threshold, events, destination };
    let made = state.create_subscription(account, new).await?;
    let view = SubscriptionView::from(&made);
    let change = Change::new("event_subscription", made.id, "event_subscription.create").to(&view);
    state.audit(account, &at.actor, change).await;
    Ok(ok(view))
}

/// `GET .../event_subscriptions/subscriptions`: a page in `order` (`created_at`, `name`, `enabled`,
/// `source`; by name unless asked) and `direction`.
pub async fn list(state: Data, at: Authed<QueuesRead>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let pairs = query_pairs(&req)?;
    only_known(&pairs, &["page", "per_page", "order", "direction"])?;
    let paging = Paging::parse(&pairs)?;
    if paging.per_page > MAX_PER_PAGE {
        return Err(ApiError::invalid(format!(
            "per_page must be between 1 and {MAX_PER_PAGE}, got {}",
            paging.per_page
        )));
    }
    let order = match param(&pairs, "order").unwrap_or("name") {
        "created_at" => Order::CreatedAt,
        "name" => Order::Name,
        "enabled" => Order::Enabled,
        "source" => Order::Source,
        other => {
            return Err(ApiError::invalid(format!(
                "order must be one of created_at, name, enabled, source; got {other:?}"
            )))
        }
    };
    let descending = match param(&pairs, "direction").unwrap_or("asc") {
        "asc" => false,
        "desc" => true,
        other => return Err(ApiError::invalid(format!("direction must be asc or desc, got {other:?}"))),
    };
    let (found, total) =
        state.subscriptions(at.account_id(), order, descending, paging.per_page, paging.offset()).await?;
    let info = paging.info(found.len(), total);
    Ok(ok_list(found.iter().map(SubscriptionView::from).collect::<Vec<_>>(), info))
}

/// `GET .../event_subscriptions/subscriptions/{subscription_id}`.
pub async fn get(state: Data, at: Authed<QueuesRead>, id: PathId<SubscriptionId>) -> ApiResult<HttpResponse> {
    let found = state.subscription(at.account_id(), id.0).await?.ok_or_else(not_found)?;
    Ok(ok(SubscriptionView::from(&found)))
}

/// `PATCH .../event_subscriptions/subscriptions/{subscription_id}`: changes what the body names.
pub async fn update(
    state: Data,
    at: Authed<QueuesWrite>,
    id: PathId<SubscriptionId>,
    body: ApiJson<PatchBody>,
) -> ApiResult<HttpResponse> {
    let account = at.account_id();
    let body = body.0;
    let destination = match body.destination {
        Some(d) => Some(destination(&state, account, d).await?),
        None => None,
    };
    let change = SubscriptionChange { name: body.name, enabled: body.enabled, events: body.events, destination };
    let (before, after) = state.update_subscription(account, id.0, change).await?.ok_or_else(not_found)?;
    let view = SubscriptionView::from(&after);
    let change = Change::new("event_subscription", id.0, "event_subscription.update")
        .from(SubscriptionView::from(&before))
        .to(&view);
    state.audit(account, &at.actor, change).await;
    Ok(ok(view))
}

/// `DELETE .../event_subscriptions/subscriptions/{subscription_id}`: answers the subscription deleted.
pub async fn delete(state: Data, at: Authed<QueuesWrite>, id: PathId<SubscriptionId>) -> ApiResult<HttpResponse> {
    let gone = state.delete_subscription(at.account_id(), id.0).await?.ok_or_else(not_found)?;
    let view = SubscriptionView::from(&gone);
    let change = Change::new("event_subscription", id.0, "event_subscription.delete").from(&view);
    state.audit(at.account_id(), &at.actor, change).await;
    Ok(ok(view))
}

fn not_found() -> ApiError {
    ApiError::not_found("event subscription")
}
