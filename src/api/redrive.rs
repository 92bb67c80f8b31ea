//! Redrive (a skiplock extension): start, list, show and cancel the tasks that move a queue's
//! dead-lettered messages back to their source queues or to a named queue. The runner (`crate::engine::redrive`)
//! does the moving.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};

use super::envelope::{created, ok, ok_list, ApiJson};
use super::messages::RefItem;
use super::paging::Paging;
use super::views::timestamp;
use crate::api::extract::{AuthedQueue, PathId, QueuesRead, QueuesWrite};
use crate::engine::audit::Change;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{MessageId, RedriveId};
use crate::queue::settings::QueueName;
use crate::store::redrive::{self, CreateError, NewTask, RedriveTask};

type Data = web::Data<Engine>;

/// Refs in one redrive request, as in a purge by ref.
const MAX_REFS: usize = 1000;
const MAX_MESSAGES: i64 = 1_000_000;
const MAX_RATE: i64 = 10_000;

#[derive(Serialize)]
struct TaskView {
    redrive_id: RedriveId,
    status: String,
    destination_queue: Option<String>,
    moved: i64,
    total: i64,
    started_at: String,
    finished_at: Option<String>,
    error: Option<String>,
}

impl From<RedriveTask> for TaskView {
    fn from(t: RedriveTask) -> Self {
        TaskView {
            redrive_id: t.id,
            status: t.status,
            destination_queue: t.destination_queue,
            moved: t.moved,
            total: t.total,
            started_at: timestamp(t.started_at),
            finished_at: t.finished_at.map(timestamp),
            error: t.error,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartRedrive {
    destination_queue: Option<String>,
    refs: Option<Vec<RefItem>>,
    max_messages: Option<i64>,
    rate_per_second: Option<i64>,
}

/// `POST .../queues/{queue_id}/redrive`: starts a task (201).
pub async fn start(state: Data, at: AuthedQueue<QueuesWrite>, body: ApiJson<StartRedrive>) -> ApiResult<HttpResponse> {
    let body = body.0;
    let max_messages =
        body.max_messages.map(|n| crate::queue::in_range("max_messages", n, 1, MAX_MESSAGES, "")).transpose()?;
    let rate =
        body.rate_per_second.map(|n| crate::queue::in_range("rate_per_second", n, 1, MAX_RATE, "")).transpose()?;
    let destination =
        body.destination_queue.as_deref().map(|d| QueueName::parse("destination_queue", d)).transpose()?;
    if let Some(refs) = &body.refs {
        if refs.is_empty() || refs.len() > MAX_REFS {
            return Err(ApiError::invalid(format!(
                "refs must hold 1 to {MAX_REFS} refs from a peek, got {}",
                refs.len()
            )));
        }
    }
    let queue = at.queue;
    let only: Option<Vec<MessageId>> = match &body.refs {
        None => None,
        Some(refs) => Some(
            refs.iter()
                .enumerate()
                .map(|(i, item)| {
                    // A ref that names no message of this queue is a 404, as an id in a path would be.
                    state.signer.open_ref(queue.id(), &item.reference).ok_or_else(|| {
                        ApiError::new(
                            Kind::NotFound,
                            format!("refs[{i}] names no message of this queue: take refs from its peek"),
                        )
                    })
                })
                .collect::<ApiResult<_>>()?,
        ),
    };
    let task = redrive::create(
        &state.pool,
        NewTask {
            queue,
            destination: destination.as_ref().map(|d| d.as_str()),
            only: only.as_deref(),
            max_messages,
            rate_per_second: rate.map(|r| r as i32),
        },
    )
    .await
    .map_err(|err| match err {
        CreateError::NoDestination => ApiError::new(
            Kind::QueueNotFound,
            format!("destination queue '{}' not found", destination.as_ref().map_or("", |d| d.as_str())),
        ),
        CreateError::SameQueue => {
            ApiError::new(Kind::RedriveConflict, "destination_queue is the queue itself; name another queue")
        }
        CreateError::AlreadyRunning => ApiError::new(
            Kind::RedriveConflict,
            "this queue already has a running redrive task; wait for it or cancel it first",
        ),
        CreateError::Database(db) => db.into(),
    })?;
    let view = TaskView::from(task);
    let change = Change::new("redrive", view.redrive_id, "redrive.start").to(&view);
    state.audit(queue.account(), &at.auth.actor, change).await;
    Ok(created(view))
}

/// `GET .../queues/{queue_id}/redrive`: a page of the queue's tasks, newest first (`page`, `per_page`).
pub async fn list(state: Data, at: AuthedQueue<QueuesRead>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let paging = Paging::of(&req)?;
    let (tasks, total) = redrive::list(&state.pool, at.queue, paging.per_page, paging.offset()).await?;
    let info = paging.info(tasks.len(), total);
    Ok(ok_list(tasks.into_iter().map(TaskView::from).collect::<Vec<_>>(), info))
}

/// `GET .../queues/{queue_id}/redrive/{redrive_id}`.
pub async fn get(state: Data, at: AuthedQueue<QueuesRead>, id: PathId<RedriveId>) -> ApiResult<HttpResponse> {
    let task = redrive::get(&state.pool, at.queue, id.0).await?;
    Ok(ok(TaskView::from(task.ok_or_else(|| ApiError::not_found("redrive task"))?)))
}

/// `DELETE .../queues/{queue_id}/redrive/{redrive_id}`: cancels a running task; messages already moved
/// stay moved. A task that is no longer running is answered as it is.
pub async fn cancel(state: Data, at: AuthedQueue<QueuesWrite>, id: PathId<RedriveId>) -> ApiResult<HttpResponse> {
    let task = redrive::cancel(&state.pool, at.queue, id.0).await?;
    let view = TaskView::from(task.ok_or_else(|| ApiError::not_found("redrive task"))?);
    let change = Change::new("redrive", id.0, "redrive.cancel").to(&view);
    state.audit(at.queue.account(), &at.auth.actor, change).await;
    Ok(ok(view))
}
