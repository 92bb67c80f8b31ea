//! Consumer endpoints: one consumer per queue, `http_pull` or `webhook`.

use actix_web::{web, HttpRequest, HttpResponse};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use rand::RngCore;
use serde::Deserialize;
use serde_json::json;

use super::envelope::{ok, ok_list, ApiJson};
use super::paging::{query_pairs, whole, Paging};
use super::queues::find_queue;
use super::views::ConsumerView;
use crate::api::extract::{AuthedQueue, PathId, QueuesRead, QueuesWrite};
use crate::engine::audit::Change;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::ConsumerId;
use crate::queue::consumer::{parse_webhook_url, ConsumerKind, ConsumerSettings, ConsumerSettingsInput};
use crate::queue::settings::QueueName;
use crate::store::consumers::{ConsumerRow, ConsumerSpec};
use crate::store::owned::OwnedQueue;
use crate::store::{self, queues::QueueRow};

type Data = web::Data<Engine>;

#[derive(Deserialize)]
pub struct ConsumerBody {
    #[serde(rename = "type")]
    kind: Option<String>,
    dead_letter_queue: Option<String>,
    #[serde(default)]
    settings: ConsumerSettingsInput,
    url: Option<String>,
}

/// A validated consumer body. The dead-letter queue is created if the account has none of that name.
struct Validated {
    kind: ConsumerKind,
    settings: ConsumerSettings,
    dead_letter_queue: String,
    url: Option<String>,
}

fn validate(queue: &QueueRow, body: &ConsumerBody, kind: ConsumerKind, creating: bool) -> ApiResult<Validated> {
    let settings = ConsumerSettings::from_input(kind, &body.settings)?;
    let dead_letter_queue = match body.dead_letter_queue.as_deref() {
        None | Some("") => String::new(),
        Some(raw) => {
            let name = QueueName::parse("dead_letter_queue", raw)?;
            if name.as_str() == queue.name {
                return Err(ApiError::invalid("dead_letter_queue must be another queue than this one"));
            }
            name.as_str().to_owned()
        }
    };
    let url = match (kind, body.url.as_deref()) {
        (ConsumerKind::HttpPull, Some(_)) => {
            return Err(ApiError::invalid("url applies to webhook consumers only"));
        }
        (ConsumerKind::Webhook, None) if creating => {
            return Err(ApiError::invalid("url is required for a webhook consumer"));
        }
        (_, url) => url.map(parse_webhook_url).transpose()?,
    };
    Ok(Validated { kind, settings, dead_letter_queue, url })
}

impl Validated {
    fn spec(&self) -> ConsumerSpec<'_> {
        ConsumerSpec {
            kind: self.kind,
            settings: self.settings,
            dead_letter_queue: &self.dead_letter_queue,
            url: self.url.as_deref(),
        }
    }
}

fn new_signing_secret() -> String {
    let mut key = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut key);
    format!("whsec_{}", BASE64.encode(key))
}

pub async fn create(state: Data, at: AuthedQueue<QueuesWrite>, body: ApiJson<ConsumerBody>) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, at.queue).await?;
    let raw_kind = body.0.kind.as_deref().ok_or_else(|| ApiError::invalid("type is required: http_pull or webhook"))?;
    let kind = ConsumerKind::parse(raw_kind)?;
    let valid = validate(&queue, &body.0, kind, true)?;
    let secret = (kind == ConsumerKind::Webhook).then(new_signing_secret);
    let row = state.create_consumer(at.queue, &valid.spec(), secret.as_deref()).await?;
    let change = Change::new("consumer", row.id, "consumer.create").to(ConsumerView::new(&row));
    state.audit(at.queue.account(), &at.auth.actor, change).await;
    let mut view = ConsumerView::new(&row);
    view.signing_secret = secret;
    Ok(ok(view))
}

/// The queue's consumers: all of them without `page` and `per_page` (as for queues, Cloudflare's schema
/// gives this list none), a page with either. A queue has few, so they are paged here.
pub async fn list(state: Data, at: AuthedQueue<QueuesRead>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let paging = Paging::parse_optional(&query_pairs(&req)?)?;
    let queue = find_queue(&state, at.queue).await?;
    let rows = store::consumers::list(&state.pool, at.queue.account(), &[queue.id]).await?;
    let health = state.health(at.queue.account(), &rows.iter().map(|c| c.id).collect::<Vec<_>>()).await?;
    let views: Vec<ConsumerView> = rows.iter().map(|c| ConsumerView::new(c).with_health(&health)).collect();
    let (views, info) = match paging {
        None => {
            let info = whole(views.len());
            (views, info)
        }
        Some(paging) => paging.page_of(views),
    };
    Ok(ok_list(views, info))
}

pub(super) async fn find_consumer(state: &Engine, queue: OwnedQueue, id: ConsumerId) -> ApiResult<ConsumerRow> {
    store::consumers::get(&state.pool, queue, id).await?.ok_or_else(|| ApiError::not_found("consumer"))
}

pub async fn get(state: Data, at: AuthedQueue<QueuesRead>, id: PathId<ConsumerId>) -> ApiResult<HttpResponse> {
    let consumer = find_consumer(&state, at.queue, id.0).await?;
    let health = state.health(at.queue.account(), &[consumer.id]).await?;
    Ok(ok(ConsumerView::new(&consumer).with_health(&health)))
}

/// Replaces the consumer's settings (omitted ones return to their defaults); its type cannot change.
pub async fn update(
    state: Data,
    at: AuthedQueue<QueuesWrite>,
    id: PathId<ConsumerId>,
    body: ApiJson<ConsumerBody>,
) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, at.queue).await?;
    let current = find_consumer(&state, at.queue, id.0).await?;
    let kind = current.kind();
    if let Some(raw) = body.0.kind.as_deref() {
        if ConsumerKind::parse(raw)? != kind {
            return Err(ApiError::invalid(format!(
                "a consumer's type cannot change (this one is {}); delete it and create another",
                kind.as_str()
            )));
        }
    }
    let valid = validate(&queue, &body.0, kind, false)?;
    let row = state.update_consumer(at.queue, current.id, &valid.spec()).await?;
    let change = Change::new("consumer", row.id, "consumer.update")
        .from(ConsumerView::new(&current))
        .to(ConsumerView::new(&row));
    state.audit(at.queue.account(), &at.auth.actor, change).await;
    Ok(ok(ConsumerView::new(&row)))
}

pub async fn delete(state: Data, at: AuthedQueue<QueuesWrite>, id: PathId<ConsumerId>) -> ApiResult<HttpResponse> {
    let current = find_consumer(&state, at.queue, id.0).await?;
    state.delete_consumer(at.queue, id.0).await?;
    let change = Change::new("consumer", id.0, "consumer.delete").from(ConsumerView::new(&current));
    state.audit(at.queue.account(), &at.auth.actor, change).await;
    Ok(ok(json!({})))
}

pub async fn rotate_secret(
    state: Data,
    at: AuthedQueue<QueuesWrite>,
    id: PathId<ConsumerId>,
) -> ApiResult<HttpResponse> {
    let consumer = find_consumer(&state, at.queue, id.0).await?;
    if consumer.kind() != ConsumerKind::Webhook {
        return Err(ApiError::invalid("only webhook consumers have a signing secret to rotate"));
    }
    let secret = new_signing_secret();
    state.rotate_secret(at.queue, consumer.id, &secret).await?;
    let change = Change::new("consumer", consumer.id, "consumer.rotate_secret");
    state.audit(at.queue.account(), &at.auth.actor, change).await;
    Ok(ok(json!({ "signing_secret": secret })))
}
