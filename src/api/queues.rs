//! Queue endpoints: create, list, get, replace, update, delete, metrics, purge.

use actix_web::{web, HttpResponse};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::json;

use super::envelope::{ok, ok_list, ApiJson};
use super::paging::{query_pairs, whole, Paging};
use super::views::{timestamp, QueueView};
use crate::api::extract::{Authed, AuthedQueue, QueuesRead, QueuesWrite};
use crate::engine::audit::{Actor, Change};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::QueueId;
use crate::queue::settings::{Jurisdiction, QueueName, QueueSettings, QueueSettingsInput};
use crate::store::owned::OwnedQueue;
use crate::store::{self, queues::QueueRow};

type Data = web::Data<Engine>;

/// The queue's row; a 404 when it was deleted since its owner was read.
pub async fn find_queue(state: &Engine, queue: OwnedQueue) -> ApiResult<QueueRow> {
    store::queues::get(&state.pool, queue).await?.ok_or_else(ApiError::queue_not_found)
}

/// A queue as the audit log records it: its name and settings (its consumers have entries of their own).
fn audited(queue: &QueueRow) -> serde_json::Value {
    let view = QueueView::new(queue, &[]);
    json!({ "queue_id": view.queue_id, "queue_name": view.queue_name, "settings": view.settings })
}

async fn view(state: &Engine, queue: &QueueRow) -> ApiResult<QueueView> {
    let consumers = store::consumers::list(&state.pool, queue.account_id, &[queue.id]).await?;
    let health = state.health(queue.account_id, &consumers.iter().map(|c| c.id).collect::<Vec<_>>()).await?;
    Ok(QueueView::new(queue, &consumers).with_health(&health))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateQueue {
    queue_name: Option<String>,
    #[serde(default)]
    settings: QueueSettingsInput,
    jurisdiction: Option<String>,
}

pub async fn create(state: Data, auth: Authed<QueuesWrite>, body: ApiJson<CreateQueue>) -> ApiResult<HttpResponse> {
    let body = body.0;
    let raw_name = body.queue_name.ok_or_else(|| ApiError::invalid("queue_name is required"))?;
    let name = QueueName::parse("queue_name", &raw_name)?;
    let longest = state.limits_of(auth.account_id()).max_retention_seconds;
    let settings = QueueSettings::defaults_within(longest).apply(&body.settings)?;
    let jurisdiction = body.jurisdiction.as_deref().map(Jurisdiction::parse).transpose()?;
    let queue = state.create_queue(auth.account_id(), &name, settings, jurisdiction).await?;
    let change = Change::new("queue", queue.id, "queue.create").to(audited(&queue));
    state.audit(auth.account_id(), &auth.actor, change).await;
    Ok(ok(QueueView::new(&queue, &[])))
}

/// The account's queues: every one of them (its quota bounds them) without `page` and `per_page`, as the
/// SDKs ask, since Cloudflare's schema gives this list no paging parameters; a page with either.
pub async fn list(state: Data, auth: Authed<QueuesRead>, req: actix_web::HttpRequest) -> ApiResult<HttpResponse> {
    // `name` may repeat, so the query is read as pairs rather than into a struct.
    let pairs = query_pairs(&req)?;
    let paging = Paging::parse_optional(&pairs)?;
    let names: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "name")
        .map(|(_, v)| QueueName::parse("name", v).map(|n| n.as_str().to_owned()))
        .collect::<Result<_, _>>()?;
    let (limit, offset) = paging.as_ref().map_or((None, 0), |p| (Some(p.per_page), p.offset()));
    let (queues, total) = store::queues::list(&state.pool, auth.account_id(), &names, limit, offset).await?;
    let ids: Vec<QueueId> = queues.iter().map(|q| q.id).collect();
    let consumers = store::consumers::list(&state.pool, auth.account_id(), &ids).await?;
    let health = state.health(auth.account_id(), &consumers.iter().map(|c| c.id).collect::<Vec<_>>()).await?;
    let views: Vec<QueueView> = queues.iter().map(|q| QueueView::new(q, &consumers).with_health(&health)).collect();
    let info = paging.map_or_else(|| whole(views.len()), |p| p.info(views.len(), total));
    Ok(ok_list(views, info))
}

pub async fn get(state: Data, at: AuthedQueue<QueuesRead>) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, at.queue).await?;
    Ok(ok(view(&state, &queue).await?))
}

/// A Queue object may be sent back as read (Cloudflare's schema types the body so): its read-only
/// fields are accepted and ignored, while any field a Queue does not have is still refused by name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateQueue {
    queue_name: Option<String>,
    #[serde(default)]
    settings: QueueSettingsInput,
    jurisdiction: Option<String>,
    #[serde(rename = "queue_id")]
    _queue_id: Option<IgnoredAny>,
    #[serde(rename = "created_on")]
    _created_on: Option<IgnoredAny>,
    #[serde(rename = "modified_on")]
    _modified_on: Option<IgnoredAny>,
    #[serde(rename = "producers")]
    _producers: Option<IgnoredAny>,
    #[serde(rename = "producers_total_count")]
    _producers_total_count: Option<IgnoredAny>,
    #[serde(rename = "consumers")]
    _consumers: Option<IgnoredAny>,
    #[serde(rename = "consumers_total_count")]
    _consumers_total_count: Option<IgnoredAny>,
}

/// PUT replaces the settings (omitted ones return to their defaults); PATCH changes only those given.
async fn update(
    state: Data,
    owned: OwnedQueue,
    actor: &Actor,
    body: UpdateQueue,
    replace: bool,
) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, owned).await?;
    let name = match &body.queue_name {
        Some(raw) => QueueName::parse("queue_name", raw)?,
        None => QueueName::parse("queue_name", &queue.name)?,
    };
    if let Some(raw) = &body.jurisdiction {
        let given = Jurisdiction::parse(raw)?;
        if queue.jurisdiction.as_deref() != Some(given.as_str()) {
            return Err(ApiError::invalid(
                "jurisdiction is set when a queue is created and cannot change; create a new queue instead",
            ));
        }
    }
    let longest = state.limits_of(owned.account()).max_retention_seconds;
    let base = if replace { QueueSettings::defaults_within(longest) } else { queue.settings() };
    let settings = base.apply(&body.settings)?;
    let updated = state.update_queue(owned, &queue, &name, settings).await?;
    let change = Change::new("queue", owned.id(), "queue.update").from(audited(&queue)).to(audited(&updated));
    state.audit(owned.account(), actor, change).await;
    Ok(ok(view(&state, &updated).await?))
}

pub async fn replace(state: Data, at: AuthedQueue<QueuesWrite>, body: ApiJson<UpdateQueue>) -> ApiResult<HttpResponse> {
    update(state, at.queue, &at.auth.actor, body.0, true).await
}

pub async fn patch(state: Data, at: AuthedQueue<QueuesWrite>, body: ApiJson<UpdateQueue>) -> ApiResult<HttpResponse> {
    update(state, at.queue, &at.auth.actor, body.0, false).await
}

pub async fn delete(state: Data, at: AuthedQueue<QueuesWrite>) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, at.queue).await?;
    state.delete_queue(at.queue).await?;
    let change = Change::new("queue", at.queue.id(), "queue.delete").from(audited(&queue));
    state.audit(at.queue.account(), &at.auth.actor, change).await;
    Ok(ok(json!({})))
}

pub async fn metrics(state: Data, at: AuthedQueue<QueuesRead>) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, at.queue).await?;
    let backlog = store::counts::backlog(&state.pool, queue.id).await?;
    Ok(ok(super::views::BacklogMetrics::from(&backlog)))
}

#[derive(Deserialize)]
pub struct PurgeQueue {
    delete_messages_permanently: Option<serde_json::Value>,
}

pub async fn purge(state: Data, at: AuthedQueue<QueuesWrite>, body: ApiJson<PurgeQueue>) -> ApiResult<HttpResponse> {
    if body.0.delete_messages_permanently != Some(json!(true)) {
        return Err(ApiError::invalid(
            "a purge deletes every message for good; confirm with {\"delete_messages_permanently\": true}",
        ));
    }
    let queue = state.purge_queue(at.queue).await?;
    state.audit(at.queue.account(), &at.auth.actor, Change::new("queue", at.queue.id(), "queue.purge")).await;
    Ok(ok(view(&state, &queue).await?))
}

pub async fn purge_status(state: Data, at: AuthedQueue<QueuesRead>) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, at.queue).await?;
    // Cloudflare's schema types `started_at` a string, so a queue never purged leaves it out.
    let mut status = json!({"completed": if queue.purge_completed { "true" } else { "false" }});
    if let Some(started) = queue.purge_started_at {
        status["started_at"] = json!(timestamp(started));
    }
    Ok(ok(status))
}
