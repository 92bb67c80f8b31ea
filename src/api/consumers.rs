//! Consumer endpoints: one consumer per queue, `http_pull` or `webhook`.

use actix_web::{web, HttpResponse};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use rand::RngCore;
use serde::Deserialize;
use serde_json::json;

use super::envelope::{ok, ok_list, path_id, ApiJson, ResultInfo};
use super::notices::announce_change;
use super::queues::find_queue;
use super::views::ConsumerView;
use crate::api::extract::{Authed, QueuesRead, QueuesWrite};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, ConsumerId};
use crate::queue::consumer::{parse_webhook_url, ConsumerKind, ConsumerSettings, ConsumerSettingsInput};
use crate::queue::settings::QueueName;
use crate::store::consumers::{ConsumerRow, ConsumerSpec};
use crate::store::{self, queues::QueueRow};

type Data = web::Data<Engine>;

/// How long a rotated-out signing secret keeps signing deliveries.
const SECRET_GRACE_SECONDS: i64 = 24 * 3600;

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

/// Makes the dead-letter queue if the account has none of that name, within its queue quota.
async fn ensure_dead_letter_queue(state: &Engine, account: AccountId, name: &str) -> ApiResult<()> {
    if name.is_empty() {
        return Ok(());
    }
    let name = QueueName::parse("dead_letter_queue", name)?;
    let (known, _) = store::queues::list(&state.pool, account, &[name.as_str().to_owned()], 1, 1).await?;
    if known.is_empty() {
        let max = state.limits.max_queues_per_account;
        if store::queues::count(&state.pool, account).await? >= max {
            return Err(ApiError::new(
                Kind::QueueQuota,
                format!(
                    "making the dead-letter queue '{}' would pass this account's quota of {max} queues",
                    name.as_str()
                ),
            ));
        }
        store::queues::ensure(&state.pool, account, &name).await?;
    }
    Ok(())
}

fn new_signing_secret() -> String {
    let mut key = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut key);
    format!("whsec_{}", BASE64.encode(key))
}

pub async fn create(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String)>,
    body: ApiJson<ConsumerBody>,
) -> ApiResult<HttpResponse> {
    let account = auth.account_id();
    let queue = find_queue(&state, account, &path.1).await?;
    let raw_kind = body.0.kind.as_deref().ok_or_else(|| ApiError::invalid("type is required: http_pull or webhook"))?;
    let kind = ConsumerKind::parse(raw_kind)?;
    let valid = validate(&queue, &body.0, kind, true)?;
    // Refuse a second consumer before making its dead-letter queue, so a refused request changes nothing.
    if !store::consumers::list(&state.pool, account, &[queue.id]).await?.is_empty() {
        return Err(store::StoreError::ConsumerExists.into());
    }
    ensure_dead_letter_queue(&state, account, &valid.dead_letter_queue).await?;
    let secret = (kind == ConsumerKind::Webhook).then(new_signing_secret);
    let spec = ConsumerSpec {
        kind: valid.kind,
        settings: valid.settings,
        dead_letter_queue: &valid.dead_letter_queue,
        url: valid.url.as_deref(),
    };
    let row = store::consumers::create(&state.pool, account, queue.id, &spec, secret.as_deref()).await?;
    announce_change(&state, queue.id).await;
    let mut view = ConsumerView::new(&row);
    view.signing_secret = secret;
    Ok(ok(view))
}

pub async fn list(state: Data, auth: Authed<QueuesRead>, path: web::Path<(String, String)>) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, auth.account_id(), &path.1).await?;
    let rows = store::consumers::list(&state.pool, auth.account_id(), &[queue.id]).await?;
    let views: Vec<ConsumerView> = rows.iter().map(ConsumerView::new).collect();
    let count = views.len();
    let info = ResultInfo { page: 1, per_page: 20, count, total_count: count as i64, total_pages: 1 };
    Ok(ok_list(views, info))
}

async fn find_consumer(state: &Engine, account: AccountId, queue: &QueueRow, raw_id: &str) -> ApiResult<ConsumerRow> {
    let id: ConsumerId = path_id(raw_id, Kind::MalformedObjectId)?;
    store::consumers::get(&state.pool, account, queue.id, id).await?.ok_or_else(|| ApiError::not_found("consumer"))
}

pub async fn get(
    state: Data,
    auth: Authed<QueuesRead>,
    path: web::Path<(String, String, String)>,
) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, auth.account_id(), &path.1).await?;
    let row = find_consumer(&state, auth.account_id(), &queue, &path.2).await?;
    Ok(ok(ConsumerView::new(&row)))
}

/// Replaces the consumer's settings (omitted ones return to their defaults); its type cannot change.
pub async fn update(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String, String)>,
    body: ApiJson<ConsumerBody>,
) -> ApiResult<HttpResponse> {
    let account = auth.account_id();
    let queue = find_queue(&state, account, &path.1).await?;
    let current = find_consumer(&state, account, &queue, &path.2).await?;
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
    ensure_dead_letter_queue(&state, account, &valid.dead_letter_queue).await?;
    let spec = ConsumerSpec {
        kind,
        settings: valid.settings,
        dead_letter_queue: &valid.dead_letter_queue,
        url: valid.url.as_deref(),
    };
    let row = store::consumers::update(&state.pool, account, queue.id, current.id, &spec)
        .await?
        .ok_or_else(|| ApiError::not_found("consumer"))?;
    announce_change(&state, queue.id).await;
    Ok(ok(ConsumerView::new(&row)))
}

pub async fn delete(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String, String)>,
) -> ApiResult<HttpResponse> {
    let queue = find_queue(&state, auth.account_id(), &path.1).await?;
    let id: ConsumerId = path_id(&path.2, Kind::MalformedObjectId)?;
    if !store::consumers::delete(&state.pool, auth.account_id(), queue.id, id).await? {
        return Err(ApiError::not_found("consumer"));
    }
    announce_change(&state, queue.id).await;
    Ok(ok(json!({})))
}

pub async fn rotate_secret(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String, String)>,
) -> ApiResult<HttpResponse> {
    let account = auth.account_id();
    let queue = find_queue(&state, account, &path.1).await?;
    let consumer = find_consumer(&state, account, &queue, &path.2).await?;
    if consumer.kind() != ConsumerKind::Webhook {
        return Err(ApiError::invalid("only webhook consumers have a signing secret to rotate"));
    }
    let secret = new_signing_secret();
    store::consumers::rotate_secret(&state.pool, account, queue.id, consumer.id, &secret, SECRET_GRACE_SECONDS).await?;
    Ok(ok(json!({ "signing_secret": secret })))
}
