//! Ack and retry: the answers of a pull consumer, applied by the engine (`Engine::ack`). A pull may carry
//! them too, checked here the same way.

use std::collections::BTreeMap;

use actix_web::web;
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};

use crate::api::envelope::{ok, ApiJson};
use crate::api::extract::{AuthedQueue, QueuesReadWrite};
use crate::engine::ack::{AckOutcome, LeaseAnswers};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::queue::message::check_delay;

const MAX_ACKS: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckBody {
    #[serde(default)]
    acks: Vec<LeaseRef>,
    #[serde(default)]
    retries: Vec<RetryRef>,
}

#[derive(Deserialize)]
pub struct LeaseRef {
    lease_id: String,
}

#[derive(Deserialize)]
pub struct RetryRef {
    lease_id: String,
    delay_seconds: Option<i64>,
}

/// What a request's acks and retries did, as Cloudflare answers it.
#[derive(Serialize)]
pub struct AckView {
    #[serde(rename = "ackCount")]
    ack_count: usize,
    #[serde(rename = "retryCount")]
    retry_count: usize,
    /// Keyed by the lease id that changed nothing, with the reason.
    warnings: BTreeMap<String, String>,
}

impl From<AckOutcome> for AckView {
    fn from(o: AckOutcome) -> Self {
        AckView { ack_count: o.ack_count, retry_count: o.retry_count, warnings: o.warnings }
    }
}

pub async fn ack(
    engine: web::Data<Engine>,
    at: AuthedQueue<QueuesReadWrite>,
    body: ApiJson<AckBody>,
) -> ApiResult<HttpResponse> {
    let answers = checked(body.0.acks, body.0.retries)?;
    Ok(ok(AckView::from(engine.ack(at.queue, &answers, None).await?)))
}

/// A request's acks and retries, checked before anything of the request is applied.
pub(super) fn checked(acks: Vec<LeaseRef>, retries: Vec<RetryRef>) -> ApiResult<LeaseAnswers> {
    if acks.len() + retries.len() > MAX_ACKS {
        return Err(ApiError::invalid(format!("at most {MAX_ACKS} acks and retries per request")));
    }
    for (i, r) in retries.iter().enumerate() {
        if let Some(d) = r.delay_seconds {
            check_delay(format_args!("retries[{i}].delay_seconds"), d)?;
        }
    }
    Ok(LeaseAnswers {
        acks: acks.into_iter().map(|a| a.lease_id).collect(),
        retries: retries.into_iter().map(|r| (r.lease_id, r.delay_seconds)).collect(),
    })
}
