//! Topics (skiplock's, beyond Cloudflare): an account's topic binds its queues by routing-key pattern
//! and filter; a publish to the topic stores each message in every queue its key reaches, in one commit
//! (`crate::engine::topics`).

use std::borrow::Cow;

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::envelope::{decode, ok, ok_list, publish_request_bytes, ApiJson, PublishBody};
use super::messages::{prepare_batch, say_held_back, PublishMessage};
use super::paging::{only_known, query_pairs, Paging};
use super::views::timestamp;
use crate::api::extract::{path_id, Authed, PathId, QueuesRead, QueuesWrite};
use crate::engine::audit::Change;
use crate::engine::topics::Reached;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{BindingId, QueueId, TopicId};
use crate::queue::topic::{Attributes, RoutingKey};
use crate::store::topics::{Binding, Topic};

type Data = web::Data<Engine>;

/// The most a page of topics holds.
const MAX_PER_PAGE: i64 = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BindBody {
    queue_id: Option<String>,
    pattern: Option<String>,
    filter: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteBody {
    routing_key: Option<String>,
    attributes: Option<Value>,
}

/// A topic publish: the queue batch publish's fields, with the routing key and attributes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishBatch<'a> {
    #[serde(borrow)]
    routing_key: Option<Cow<'a, str>>,
    attributes: Option<Value>,
    #[serde(borrow)]
    messages: Option<Vec<PublishMessage<'a>>>,
    delay_seconds: Option<i64>,
}

#[derive(Serialize)]
struct TopicView {
    id: TopicId,
    name: String,
    binding_count: i64,
    created_at: String,
    modified_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    bindings: Option<Vec<BindingView>>,
}

impl TopicView {
    fn new(t: &Topic, bindings: Option<&[Binding]>) -> Self {
        TopicView {
            id: t.id,
            name: t.name.clone(),
            binding_count: t.binding_count,
            created_at: timestamp(t.created_at),
            modified_at: timestamp(t.modified_at),
            bindings: bindings.map(|b| b.iter().map(BindingView::from).collect()),
        }
    }
}

#[derive(Serialize)]
struct BindingView {
    id: BindingId,
    topic_id: TopicId,
    queue_id: QueueId,
    queue_name: String,
    pattern: String,
    filter: Option<Value>,
    created_at: String,
}

impl From<&Binding> for BindingView {
    fn from(b: &Binding) -> Self {
        BindingView {
            id: b.id,
            topic_id: b.topic,
            queue_id: b.queue.id(),
            queue_name: b.queue_name.clone(),
            pattern: b.pattern.clone(),
            filter: b.filter.clone(),
            created_at: timestamp(b.created_at),
        }
    }
}

/// Which queues a key reached (or would reach); `duplicates` for a publish whose messages carried keys.
fn reached_view(key: &RoutingKey, reached: &[Reached], duplicates: bool) -> Value {
    let queues: Vec<Value> = reached
        .iter()
        .map(|r| {
            let mut queue = json!({"queue_id": r.queue.id(), "queue_name": r.queue_name});
            if duplicates {
                queue["duplicates"] = json!(r.duplicates);
            }
            queue
        })
        .collect();
    json!({"routing_key": key.as_str(), "queues": reached.len(), "reached": queues})
}

fn routing(key: Option<&str>, attributes: Option<&Value>) -> ApiResult<(RoutingKey, Attributes)> {
    let key = key.ok_or_else(|| ApiError::invalid("routing_key is required, such as \"orders.eu.created\""))?;
    let attributes = attributes.map(Attributes::parse).transpose()?.unwrap_or_default();
    Ok((RoutingKey::parse(key)?, attributes))
}

/// `POST .../topics`.
pub async fn create(state: Data, at: Authed<QueuesWrite>, body: ApiJson<CreateBody>) -> ApiResult<HttpResponse> {
    let account = at.account_id();
    let name = body.0.name.ok_or_else(|| ApiError::invalid("name is required"))?;
    let made = state.create_topic(account, &name).await?;
    let view = TopicView::new(&made, None);
    state.audit(account, &at.actor, Change::new("topic", made.id, "topic.create").to(&view)).await;
    Ok(ok(view))
}

/// `GET .../topics`: a page by name.
pub async fn list(state: Data, at: Authed<QueuesRead>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let pairs = query_pairs(&req)?;
    only_known(&pairs, &["page", "per_page"])?;
    let paging = Paging::parse(&pairs)?;
    if paging.per_page > MAX_PER_PAGE {
        return Err(ApiError::invalid(format!(
            "per_page must be between 1 and {MAX_PER_PAGE}, got {}",
            paging.per_page
        )));
    }
    let (found, total) = state.topics(at.account_id(), paging.per_page, paging.offset()).await?;
    let info = paging.info(found.len(), total);
    Ok(ok_list(found.iter().map(|t| TopicView::new(t, None)).collect::<Vec<_>>(), info))
}

/// `GET .../topics/{topic_id}`: the topic with its bindings.
pub async fn get(state: Data, at: Authed<QueuesRead>, id: PathId<TopicId>) -> ApiResult<HttpResponse> {
    let (topic, bindings) = state.topic_with_bindings(at.account_id(), id.0).await?;
    Ok(ok(TopicView::new(&topic, Some(&bindings))))
}

/// `DELETE .../topics/{topic_id}`: answers the topic deleted, with the bindings it had.
pub async fn delete(state: Data, at: Authed<QueuesWrite>, id: PathId<TopicId>) -> ApiResult<HttpResponse> {
    let (topic, bindings) = state.delete_topic(at.account_id(), id.0).await?;
    let view = TopicView::new(&topic, Some(&bindings));
    state.audit(at.account_id(), &at.actor, Change::new("topic", id.0, "topic.delete").from(&view)).await;
    Ok(ok(view))
}

/// `POST .../topics/{topic_id}/bindings`.
pub async fn bind(
    state: Data,
    at: Authed<QueuesWrite>,
    topic: PathId<TopicId>,
    body: ApiJson<BindBody>,
) -> ApiResult<HttpResponse> {
    let account = at.account_id();
    let body = body.0;
    let raw = body.queue_id.ok_or_else(|| ApiError::invalid("queue_id is required"))?;
    let queue_id: QueueId = path_id(&raw, Kind::MalformedQueueId)
        .map_err(|_| ApiError::invalid(format!("queue_id must be a queue's id, got {raw:?}")))?;
    let pattern = body.pattern.ok_or_else(|| ApiError::invalid("pattern is required, such as \"orders.*.created\""))?;
    let made = state.bind((account, topic.0), queue_id, &pattern, body.filter.as_ref()).await?;
    let view = BindingView::from(&made);
    state.audit(account, &at.actor, Change::new("topic_binding", made.id, "topic_binding.create").to(&view)).await;
    Ok(ok(view))
}

/// `GET .../topics/{topic_id}/bindings`.
pub async fn bindings(state: Data, at: Authed<QueuesRead>, topic: PathId<TopicId>) -> ApiResult<HttpResponse> {
    let (_, found) = state.topic_with_bindings(at.account_id(), topic.0).await?;
    Ok(ok(found.iter().map(BindingView::from).collect::<Vec<_>>()))
}

/// `DELETE .../topics/{topic_id}/bindings/{binding_id}`.
pub async fn unbind(
    state: Data,
    at: Authed<QueuesWrite>,
    topic: PathId<TopicId>,
    id: PathId<BindingId>,
) -> ApiResult<HttpResponse> {
    let gone = state.unbind(at.account_id(), topic.0, id.0).await?;
    let view = BindingView::from(&gone);
    state
        .audit(at.account_id(), &at.actor, Change::new("topic_binding", id.0, "topic_binding.delete").from(&view))
        .await;
    Ok(ok(view))
}

/// `POST .../topics/{topic_id}/route`: the queues a publish would reach; nothing is stored.
pub async fn route(
    state: Data,
    at: Authed<QueuesRead>,
    topic: PathId<TopicId>,
    body: ApiJson<RouteBody>,
) -> ApiResult<HttpResponse> {
    let (key, attributes) = routing(body.0.routing_key.as_deref(), body.0.attributes.as_ref())?;
    let reached = state.route(at.account_id(), topic.0, &key, &attributes).await?;
    Ok(ok(reached_view(&key, &reached, false)))
}

/// `POST .../topics/{topic_id}/messages`: each message stored in every queue the key reaches, in one commit.
pub async fn publish(
    state: Data,
    at: Authed<QueuesWrite>,
    topic: PathId<TopicId>,
    body: PublishBody,
) -> ApiResult<HttpResponse> {
    let account = at.account_id();
    let sizes = state.limits_of(account).sizes();
    let body = body.within(publish_request_bytes(sizes.batch)).await?;
    let batch: PublishBatch = decode(&body.0)?;
    let (key, attributes) = routing(batch.routing_key.as_deref(), batch.attributes.as_ref())?;
    let prepared = prepare_batch(batch.messages.as_deref(), batch.delay_seconds, &body.0, sizes)?;
    let keyed = prepared.iter().any(|m| m.idempotency_key.is_some());
    let published = state.publish_to_topic(account, topic.0, (&key, &attributes), prepared).await?;
    let mut answer = ok(reached_view(&key, &published.reached, keyed));
    say_held_back(&mut answer, published.held_back);
    Ok(answer)
}
