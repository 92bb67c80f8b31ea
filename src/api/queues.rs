//! Queue endpoints: create, list, get, replace, update, delete, metrics, purge.

use actix_web::{web, HttpResponse};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::json;

use super::envelope::{ok, ok_list, path_id, query_pairs, ApiJson, Paging};
use super::views::{timestamp, QueueView};
use crate::api::extract::{Authed, QueuesRead, QueuesWrite};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, QueueId};
use crate::queue::settings::{Jurisdiction, QueueName, QueueSettings, QueueSettingsInput};
use crate::store::{self, queues::QueueRow};

type Data = web::Data<Engine>;

pub fn queue_id(raw: &str) -> ApiResult<QueueId> {
    let id = path_id(raw, Kind::MalformedQueueId)?;
    tracing::Span::current().record("queue_id", tracing::field::display(id));
    Ok(id)
}

/// The account's queue, or the 404 every other account's queue gets too.
pub async fn find_queue(state: &Engine, account: AccountId, raw_id: &str) -> ApiResult<QueueRow> {
    let id = queue_id(raw_id)?;
    store::queues::get(&state.pool, account, id).await?.ok_or_else(ApiError::queue_not_found)
}

async fn view(state: &Engine, queue: &QueueRow) -> ApiResult<QueueView> {
    let consumers = store::consumers::list(&state.pool, queue.account_id, &[queue.id]).await?;
    Ok(QueueView::new(queue, &consumers))
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
    let settings = QueueSettings::default().apply(&body.settings)?;
    let jurisdiction = body.jurisdiction.as_deref().map(Jurisdiction::parse).transpose()?;
    let max = state.limits.max_queues_per_account;
    if store::queues::count(&state.pool, auth.account_id()).await? >= max {
        return Err(ApiError::new(
            Kind::QueueQuota,
            format!("this account has reached its quota of {max} queues; delete one before creating another"),
        ));
    }
    let queue = store::queues::create(&state.pool, auth.account_id(), &name, settings, jurisdiction).await?;
    Ok(ok(QueueView::new(&queue, &[])))
}

pub async fn list(state: Data, auth: Authed<QueuesRead>, req: actix_web::HttpRequest) -> ApiResult<HttpResponse> {
    // `name` may repeat, so the query is read as pairs rather than into a struct.
    let pairs = query_pairs(&req)?;
    let paging = Paging::parse(&pairs)?;
    let names: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "name")
        .map(|(_, v)| QueueName::parse("name", v).map(|n| n.as_str().to_owned()))
        .collect::<Result<_, _>>()?;
    let (queues, total) =
        store::queues::list(&state.pool, auth.account_id(), &names, paging.page, paging.per_page).await?;
    let ids: Vec<QueueId> = queues.iter().map(|q| q.id).collect();
    let consumers = store::consumers::list(&state.pool, auth.account_id(), &ids).await?;
    let views: Vec<QueueView> = queues.iter().map(|q| QueueView::new(q, &consumers)).collect();
    let info = paging.info(views.len(), total);
    Ok(ok_list(views, info))
}

pub async fn get(state: Data, auth: Authed<QueuesRead>, path: web::Path<(String, String)>) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, auth.account_id(), &path.1).await?;
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
    account: AccountId,
    raw_id: &str,
    body: UpdateQueue,
    replace: bool,
) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, account, raw_id).await?;
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
    let base = if replace { QueueSettings::default() } else { queue.settings() };
    let settings = base.apply(&body.settings)?;
    let pausing = settings.delivery_paused && !queue.settings().delivery_paused;
    let updated = store::queues::update(&state.pool, account, queue.id, &name, settings)
        .await?
        .ok_or_else(ApiError::queue_not_found)?;
    // Pausing, resuming or renaming changes what the dispatchers deliver.
    super::notices::announce_change(&state, queue.id).await;
    if pausing {
        wake_waiting_pulls(&state, queue.id).await;
    }
    Ok(ok(view(&state, &updated).await?))
}

pub async fn replace(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String)>,
    body: ApiJson<UpdateQueue>,
) -> ApiResult<HttpResponse> {
    update(state, auth.account_id(), &path.1, body.0, true).await
}

pub async fn patch(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String)>,
    body: ApiJson<UpdateQueue>,
) -> ApiResult<HttpResponse> {
    update(state, auth.account_id(), &path.1, body.0, false).await
}

pub async fn delete(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String)>,
) -> ApiResult<HttpResponse> {
    let id = queue_id(&path.1)?;
    if !store::queues::delete(&state.pool, auth.account_id(), id).await? {
        return Err(ApiError::queue_not_found());
    }
    state.backlog.forget(id);
    super::notices::announce_change(&state, id).await;
    wake_waiting_pulls(&state, id).await;
    Ok(ok(json!({})))
}

/// Wakes the pulls waiting on the queue on every node, so that a pause or a delete ends their waits now.
/// Best effort: the change is made, and a waiting pull still ends by its deadline.
async fn wake_waiting_pulls(state: &Engine, queue: QueueId) {
    if let Err(err) = store::messages::wake(&state.pool, &[queue], false).await {
        tracing::warn!(error = %err, "waking the pulls waiting on a changed queue failed");
    }
}

pub async fn metrics(
    state: Data,
    auth: Authed<QueuesRead>,
    path: web::Path<(String, String)>,
) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, auth.account_id(), &path.1).await?;
    let backlog = store::counts::backlog(&state.pool, queue.id).await?;
    Ok(ok(super::views::BacklogMetrics::from(&backlog)))
}

#[derive(Deserialize)]
pub struct PurgeQueue {
    delete_messages_permanently: Option<serde_json::Value>,
}

pub async fn purge(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String)>,
    body: ApiJson<PurgeQueue>,
) -> ApiResult<HttpResponse> {
    let id = queue_id(&path.1)?;
    if body.0.delete_messages_permanently != Some(json!(true)) {
        return Err(ApiError::invalid(
            "a purge deletes every message for good; confirm with {\"delete_messages_permanently\": true}",
        ));
    }
    let queue =
        store::queues::purge(&state.pool, auth.account_id(), id).await?.ok_or_else(ApiError::queue_not_found)?;
    state.backlog.forget(id);
    Ok(ok(view(&state, &queue).await?))
}

pub async fn purge_status(
    state: Data,
    auth: Authed<QueuesRead>,
    path: web::Path<(String, String)>,
) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, auth.account_id(), &path.1).await?;
    // Cloudflare's schema types `started_at` a string, so a queue never purged leaves it out.
    let mut status = json!({"completed": if queue.purge_completed { "true" } else { "false" }});
    if let Some(started) = queue.purge_started_at {
        status["started_at"] = json!(timestamp(started));
    }
    Ok(ok(status))
}
