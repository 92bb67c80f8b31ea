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
use crate::store::owned::OwnedQueue;

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
    // Each lease in the queue or the lane of its consumer (a queue with several consumers).
    let lease_ids: Vec<&str> = leases.iter().map(|l| l.lease_id.as_str()).collect();
    let lanes = state.lease_lanes(at.queue, &lease_ids).await?;
    let mut warnings: BTreeMap<&str, &str> = BTreeMap::new();
    let mut wanted: Vec<(Extension, &str)> = Vec::with_capacity(leases.len());
    let mut by_lane: Vec<(OwnedQueue, Vec<Extension>)> = vec![(at.queue, Vec::new())];
    for ((l, ms), lane) in leases.iter().zip(timeouts).zip(lanes) {
        match state.signer.open_lease(lane.id(), &l.lease_id) {
            Some(lease) => {
                let extension = Extension { id: lease.message_id, attempt: lease.attempt, visibility_timeout_ms: ms };
                wanted.push((extension, &l.lease_id));
                match by_lane.iter_mut().find(|(q, _)| *q == lane) {
                    Some((_, extensions)) => extensions.push(extension),
                    None => by_lane.push((lane, vec![extension])),
                }
            }
            None => {
                warnings.insert(&l.lease_id, "unknown lease id for this queue; nothing changed");
            }
        }
    }
    // The queue's own part goes even with no genuine lease, so that a queue the account does not have is a 404.
    let mut extended = Vec::new();
    for (lane, extensions) in &by_lane {
        if lane != &at.queue && extensions.is_empty() {
            continue;
        }
        extended.extend(state.delivery.extend(*lane, extensions).await?.ok_or_else(ApiError::queue_not_found)?);
    }
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
