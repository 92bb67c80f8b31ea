//! Peek (messages without leasing them) and purge by ref.

use std::collections::{BTreeMap, HashSet};

use actix_web::web;
use actix_web::HttpResponse;
use serde::Deserialize;
use serde_json::json;

use super::view::{Handle, MessageView};
use crate::api::envelope::{ok, ApiJson};
use crate::api::extract::{Authed, QueuesRead, QueuesWrite};
use crate::api::queues::find_queue;
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

pub async fn peek(
    state: Data,
    auth: Authed<QueuesRead>,
    path: web::Path<(String, String)>,
    body: ApiJson<PeekRequest>,
) -> ApiResult<HttpResponse> {
    let limit = body.0.batch_size.map(|n| crate::queue::in_range("batch_size", n, 1, MAX_PEEK, "")).transpose()?;
    let queue = find_queue(&state, auth.account_id(), &path.1).await?;
    let retention = queue.message_retention_period.into();
    let found = store::messages::peek(&state.pool, queue.id, retention, limit.unwrap_or(10)).await?;
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

pub async fn purge(
    state: Data,
    auth: Authed<QueuesWrite>,
    path: web::Path<(String, String)>,
    body: ApiJson<PurgeRefs>,
) -> ApiResult<HttpResponse> {
    let refs = body.0.refs.ok_or_else(|| ApiError::invalid("refs is required: [{\"ref\": ...}] from a peek"))?;
    if refs.len() > MAX_REFS {
        return Err(ApiError::invalid(format!("at most {MAX_REFS} refs per request")));
    }
    let queue = find_queue(&state, auth.account_id(), &path.1).await?;
    let mut warnings: BTreeMap<String, &str> = BTreeMap::new();
    let mut wanted: Vec<(MessageId, &str)> = Vec::new();
    for item in &refs {
        match state.signer.open_ref(queue.id, &item.reference) {
            Some(id) => wanted.push((id, &item.reference)),
            None => {
                warnings.insert(item.reference.clone(), "unknown ref for this queue");
            }
        }
    }
    let ids: Vec<MessageId> = wanted.iter().map(|(id, _)| *id).collect();
    let gone = store::messages::delete(&state.pool, queue.id, &ids).await?;
    state.backlog.removed(queue.id, gone.ids.len(), gone.bytes);
    if gone.keyed {
        // The purged head of an ordering key let the key's next message go; a lost wake-up only delays it.
        if let Err(err) = store::messages::wake(&state.pool, &[queue.id], true).await {
            tracing::warn!(error = %err, "waking the consumers of a purged ordering key failed");
        }
    }
    let deleted: HashSet<MessageId> = gone.ids.into_iter().collect();
    for (id, reference) in wanted {
        if !deleted.contains(&id) {
            warnings.insert(reference.to_owned(), "the message is no longer in the queue");
        }
    }
    Ok(ok(json!({ "errors": [], "warnings": warnings })))
}
