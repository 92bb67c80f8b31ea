//! Peek (messages without leasing them) and purge by ref.

use std::collections::{BTreeMap, HashSet};

use actix_web::web;
use actix_web::HttpResponse;
use serde::Deserialize;
use serde_json::json;

use super::view::{Handle, MessageView};
use crate::api::envelope::{ok, ApiJson};
use crate::api::extract::{AuthedQueue, QueuesRead, QueuesWrite};

use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::MessageId;
use crate::store;

type Data = web::Data<Engine>;

const MAX_PEEK: i64 = 100;
/// Refs in one purge request, as acks in one ack request.
const MAX_REFS: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeekRequest {
    batch_size: Option<i64>,
}

pub async fn peek(state: Data, at: AuthedQueue<QueuesRead>, body: ApiJson<PeekRequest>) -> ApiResult<HttpResponse> {
    let limit = body.0.batch_size.map(|n| crate::queue::in_range("batch_size", n, 1, MAX_PEEK, "")).transpose()?;
    let queue = store::queues::get(&state.pool, at.queue).await?.ok_or_else(ApiError::queue_not_found)?;
    let retention = queue.message_retention_period.into();
    let found = store::messages::peek(&state.pool, at.queue, retention, limit.unwrap_or(10)).await?;
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
    pub(crate) reference: String,
}

pub async fn purge(state: Data, at: AuthedQueue<QueuesWrite>, body: ApiJson<PurgeRefs>) -> ApiResult<HttpResponse> {
    let refs = body.0.refs.ok_or_else(|| ApiError::invalid("refs is required: [{\"ref\": ...}] from a peek"))?;
    if refs.len() > MAX_REFS {
        return Err(ApiError::invalid(format!("at most {MAX_REFS} refs per request")));
    }
    // A queue deleted meanwhile is a 404, as before any ref is read.
    store::queues::get(&state.pool, at.queue).await?.ok_or_else(ApiError::queue_not_found)?;
    let queue = at.queue.id();
    let mut warnings: BTreeMap<String, &str> = BTreeMap::new();
    let mut wanted: Vec<(MessageId, &str)> = Vec::new();
    for item in &refs {
        match state.signer.open_ref(queue, &item.reference) {
            Some(id) => wanted.push((id, &item.reference)),
            None => {
                warnings.insert(item.reference.clone(), "unknown ref for this queue");
            }
        }
    }
    let ids: Vec<MessageId> = wanted.iter().map(|(id, _)| *id).collect();
    let deleted: HashSet<MessageId> = state.purge_messages(at.queue, &ids).await?;
    for (id, reference) in wanted {
        if !deleted.contains(&id) {
            warnings.insert(reference.to_owned(), "the message is no longer in the queue");
        }
    }
    Ok(ok(json!({ "errors": [], "warnings": warnings })))
}
