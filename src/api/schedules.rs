//! Schedules (a skiplock extension): a message published to one of the account's queues on a cron
//! expression in a time zone, or every so many seconds. Create, list, show, change, pause, resume and
//! delete; the engine (`crate::engine::schedules`) fires them.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::envelope::{created, ok, ok_list, ApiJson};
use super::paging::Paging;
use super::views::timestamp;
use crate::api::extract::{path_id, Authed, PathId, QueuesRead, QueuesWrite};
use crate::engine::audit::Change;
use crate::engine::schedules::{next_runs, ScheduleInput};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, QueueId, ScheduleId};
use crate::queue::message::{self, ContentType, Field, PublishInput, PulledBody};
use crate::queue::schedule::NEXT_RUNS;
use crate::store::schedules::Schedule;

type Data = web::Data<Engine>;

/// A schedule's message, as a single publish's body has it (its keys aside: the tick's idempotency key is
/// made from the schedule's template).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageBody {
    body: Option<Box<RawValue>>,
    content_type: Option<String>,
    delay_seconds: Option<i64>,
}

/// A schedule as created or changed: on a change, what is left out stays as it is.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    queue_id: Option<String>,
    cron: Option<String>,
    interval_seconds: Option<i64>,
    time_zone: Option<String>,
    message: Option<MessageBody>,
    /// Present as null: no template (the default key).
    #[serde(default, deserialize_with = "present")]
    idempotency_key: Option<Option<String>>,
    paused: Option<bool>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Serialize)]
struct MessageView {
    body: Value,
    content_type: &'static str,
    delay_seconds: Option<i32>,
}

#[derive(Serialize)]
struct ScheduleView {
    schedule_id: ScheduleId,
    queue_id: QueueId,
    cron: Option<String>,
    time_zone: String,
    interval_seconds: Option<i64>,
    message: MessageView,
    idempotency_key: Option<String>,
    paused: bool,
    next_run_at: Option<String>,
    next_runs: Vec<String>,
    last_run_at: Option<String>,
    last_error: Option<String>,
    runs: i64,
    created_on: String,
    modified_on: String,
}

impl From<&Schedule> for ScheduleView {
    fn from(s: &Schedule) -> Self {
        let content_type = ContentType::from_code(s.content_type);
        // A json body shows as the JSON it is; text as its string, bytes as base64.
        let body = match content_type {
            ContentType::Json => serde_json::from_slice(&s.body).unwrap_or(Value::Null),
            _ => json!(PulledBody { content_type, bytes: &s.body }),
        };
        ScheduleView {
            schedule_id: s.id,
            queue_id: s.queue.id(),
            cron: s.cron.clone(),
            time_zone: s.time_zone.clone(),
            interval_seconds: s.interval_seconds,
            message: MessageView { body, content_type: content_type.as_str(), delay_seconds: s.delay_seconds },
            idempotency_key: s.idempotency_key.clone(),
            paused: s.paused,
            next_run_at: s.next_run_at.filter(|_| !s.paused).map(timestamp),
            next_runs: next_runs(s, NEXT_RUNS).into_iter().map(timestamp).collect(),
            last_run_at: s.last_run_at.map(timestamp),
            last_error: s.last_error.clone(),
            runs: s.runs,
            created_on: timestamp(s.created_at),
            modified_on: timestamp(s.modified_at),
        }
    }
}

/// Turns the body into what the engine takes: the queue resolved in the account (another account's is a
/// 404), the message checked as a publish is, within the account's plan's sizes.
async fn input(state: &Engine, account: AccountId, body: ScheduleBody) -> ApiResult<ScheduleInput> {
    let queue = match body.queue_id.as_deref() {
        None => None,
        Some(raw) => {
            let id: QueueId = path_id(raw, Kind::MalformedQueueId)
                .map_err(|_| ApiError::invalid(format!("queue_id must be a queue's id, got {raw:?}")))?;
            Some(state.owned_queue(account, id).await?.ok_or_else(ApiError::queue_not_found)?)
        }
    };
    let message = match &body.message {
        None => None,
        Some(m) => {
            let sizes = state.limits_of(account).sizes();
            let given = PublishInput {
                field: Field::Message,
                body: m.body.as_deref(),
                content_type: m.content_type.as_deref(),
                delay_seconds: m.delay_seconds,
                idempotency_key: None,
                ordering_key: None,
                flow_control_key: None,
            };
            Some(message::prepare(given, None, &web::Bytes::new(), sizes)?)
        }
    };
    Ok(ScheduleInput {
        queue,
        cron: body.cron,
        interval_seconds: body.interval_seconds,
        time_zone: body.time_zone,
        message,
        idempotency_key: body.idempotency_key,
        paused: body.paused,
    })
}

/// `POST .../schedules` (201).
pub async fn create(state: Data, at: Authed<QueuesWrite>, body: ApiJson<ScheduleBody>) -> ApiResult<HttpResponse> {
    let account = at.account_id();
    let made = state.create_schedule(account, input(&state, account, body.0).await?).await?;
    let view = ScheduleView::from(&made);
    let change = Change::new("schedule", made.id, "schedule.create").to(&view);
    state.audit(account, &at.actor, change).await;
    Ok(created(view))
}

/// `GET .../schedules`: a page of the account's schedules, oldest first (`page`, `per_page`).
pub async fn list(state: Data, at: Authed<QueuesRead>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let paging = Paging::of(&req)?;
    let (schedules, total) = state.schedules(at.account_id(), paging.per_page, paging.offset()).await?;
    let info = paging.info(schedules.len(), total);
    Ok(ok_list(schedules.iter().map(ScheduleView::from).collect::<Vec<_>>(), info))
}

/// `GET .../schedules/{schedule_id}`.
pub async fn get(state: Data, at: Authed<QueuesRead>, id: PathId<ScheduleId>) -> ApiResult<HttpResponse> {
    let found = state.schedule(at.account_id(), id.0).await?.ok_or_else(|| ApiError::not_found("schedule"))?;
    Ok(ok(ScheduleView::from(&found)))
}

/// `PATCH .../schedules/{schedule_id}`: changes what the body names.
pub async fn update(
    state: Data,
    at: Authed<QueuesWrite>,
    id: PathId<ScheduleId>,
    body: ApiJson<ScheduleBody>,
) -> ApiResult<HttpResponse> {
    let account = at.account_id();
    let given = input(&state, account, body.0).await?;
    changed(&state, &at, id.0, given, "schedule.update").await
}

/// `POST .../schedules/{schedule_id}/pause`: no tick fires until it is resumed.
pub async fn pause(state: Data, at: Authed<QueuesWrite>, id: PathId<ScheduleId>) -> ApiResult<HttpResponse> {
    let given = ScheduleInput { paused: Some(true), ..Default::default() };
    changed(&state, &at, id.0, given, "schedule.pause").await
}

/// `POST .../schedules/{schedule_id}/resume`: goes on from now; ticks missed while paused do not fire.
pub async fn resume(state: Data, at: Authed<QueuesWrite>, id: PathId<ScheduleId>) -> ApiResult<HttpResponse> {
    let given = ScheduleInput { paused: Some(false), ..Default::default() };
    changed(&state, &at, id.0, given, "schedule.resume").await
}

async fn changed(
    state: &Engine,
    at: &Authed<QueuesWrite>,
    id: ScheduleId,
    given: ScheduleInput,
    action: &'static str,
) -> ApiResult<HttpResponse> {
    let (before, after) =
        state.update_schedule(at.account_id(), id, given).await?.ok_or_else(|| ApiError::not_found("schedule"))?;
    let view = ScheduleView::from(&after);
    let change = Change::new("schedule", id, action).from(ScheduleView::from(&before)).to(&view);
    state.audit(at.account_id(), &at.actor, change).await;
    Ok(ok(view))
}

/// `DELETE .../schedules/{schedule_id}`.
pub async fn delete(state: Data, at: Authed<QueuesWrite>, id: PathId<ScheduleId>) -> ApiResult<HttpResponse> {
    let before = state.schedule(at.account_id(), id.0).await?.ok_or_else(|| ApiError::not_found("schedule"))?;
    if !state.delete_schedule(at.account_id(), id.0).await? {
        return Err(ApiError::not_found("schedule"));
    }
    let change = Change::new("schedule", id.0, "schedule.delete").from(ScheduleView::from(&before));
    state.audit(at.account_id(), &at.actor, change).await;
    Ok(ok(json!({})))
}
