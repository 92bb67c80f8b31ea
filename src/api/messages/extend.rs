//! Lease extension: a consumer's heartbeat keeps the messages it works on invisible for longer, applied
//! by the delivery core. Pull and webhook leases alike; the lease id stays the same.

use std::collections::{BTreeMap, HashSet};

use actix_web::web;
use actix_web::HttpResponse;
use serde::Deserialize;
use serde_json::json;

use crate::api::envelope::{ok, ApiJson};
use crate::api::extract::{AuthedQueue, QueuesReadWrite};

use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::queue::consumer::MAX_VISIBILITY_TIMEOUT_MS;
use crate::store::messages::Extension;

type Data = web::Data<Engine>;

const MAX_LEASES: usize = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    leases: Option<Vec<LeaseExtension>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseExtension {
    lease_id: String,
    visibility_timeout_ms: Option<i64>,
}

pub async fn extend(
    state: Data,
    at: AuthedQueue<QueuesReadWrite>,
    body: ApiJson<ExtendRequest>,
) -> ApiResult<HttpResponse> {
    let leases = body.0.leases.ok_or_else(|| {
        ApiError::invalid("leases is required: [{\"lease_id\": ..., \"visibility_timeout_ms\": ...}]")
    })?;
    if leases.is_empty() || leases.len() > MAX_LEASES {
        return Err(ApiError::invalid(format!(
            "leases must hold between 1 and {MAX_LEASES} entries, got {}",
            leases.len()
        )));
    }
    // Validate everything before applying anything.
    let mut timeouts = Vec::with_capacity(leases.len());
    for (i, l) in leases.iter().enumerate() {
        let field = format!("leases[{i}].visibility_timeout_ms");
        let ms = l.visibility_timeout_ms.ok_or_else(|| ApiError::invalid(format!("{field} is required")))?;
        timeouts.push(crate::queue::in_range(&field, ms, 1, MAX_VISIBILITY_TIMEOUT_MS, " ms")?);
    }
    let queue = at.queue.id();
    let mut warnings: BTreeMap<&str, &str> = BTreeMap::new();
    let mut wanted: Vec<(Extension, &str)> = Vec::with_capacity(leases.len());
    for (l, ms) in leases.iter().zip(timeouts) {
        match state.signer.open_lease(queue, &l.lease_id) {
            Some(lease) => wanted.push((
                Extension { id: lease.message_id, attempt: lease.attempt, visibility_timeout_ms: ms },
                &l.lease_id,
            )),
            None => {
                warnings.insert(&l.lease_id, "unknown lease id for this queue; nothing changed");
            }
        }
    }
    // Called even with no genuine lease, so that a queue the account does not have is a 404.
    let extensions: Vec<Extension> = wanted.iter().map(|(e, _)| *e).collect();
    let extended = state.delivery.extend(at.queue, &extensions).await?.ok_or_else(ApiError::queue_not_found)?;
    let mut counted = HashSet::new();
    for (e, lease_id) in &wanted {
        if !extended.contains(&(e.id, e.attempt)) {
            warnings.insert(
                lease_id,
                "this lease is no longer the message's current one (the message was acked, retried, \
                 dead-lettered or delivered again); nothing changed",
            );
        } else {
            counted.insert((e.id, e.attempt));
        }
    }
    Ok(ok(json!({ "extendCount": counted.len(), "warnings": warnings })))
}
