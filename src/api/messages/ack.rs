//! Ack and retry: the answers of a pull consumer, applied by the delivery core.

use std::collections::{BTreeMap, HashSet};

use actix_web::web;
use actix_web::HttpResponse;
use serde::Deserialize;
use serde_json::json;

use super::delivery_target;
use crate::api::envelope::{ok, ApiJson};
use crate::api::queues::queue_id;
use crate::auth::{Authed, QueuesReadWrite};
use crate::delivery::{Answer, Settled};
use crate::error::{ApiError, ApiResult};
use crate::ids::MessageId;
use crate::queue::answer::Decision;
use crate::queue::message::check_delay;
use crate::state::AppState;

type Data = web::Data<AppState>;

const MAX_ACKS: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
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

pub async fn ack(
    state: Data,
    auth: Authed<QueuesReadWrite>,
    path: web::Path<(String, String)>,
    body: ApiJson<AckRequest>,
) -> ApiResult<HttpResponse> {
    let account = auth.account_id();
    let request = body.0;
    if request.acks.len() + request.retries.len() > MAX_ACKS {
        return Err(ApiError::invalid(format!("at most {MAX_ACKS} acks and retries per request")));
    }
    // Validate everything before applying anything.
    for (i, r) in request.retries.iter().enumerate() {
        if let Some(d) = r.delay_seconds {
            check_delay(format_args!("retries[{i}].delay_seconds"), d)?;
        }
    }
    let queue = queue_id(&path.1)?;
    let mut warnings: BTreeMap<String, String> = BTreeMap::new();
    let mut unknown = |lease_id: &str| {
        warnings.insert(lease_id.to_owned(), "unknown lease id for this queue; nothing changed".into());
    };

    // Each answer with the lease it came with; the precedence rules are the delivery module's.
    let mut answers: Vec<(Answer, &str)> = Vec::new();
    for a in &request.acks {
        match state.signer.open_lease(queue, &a.lease_id) {
            Some(lease) => answers
                .push((Answer { id: lease.message_id, attempt: lease.attempt, decision: Decision::Ack }, &a.lease_id)),
            None => unknown(&a.lease_id),
        }
    }
    let acks = answers.len();
    for r in &request.retries {
        match state.signer.open_lease(queue, &r.lease_id) {
            Some(lease) => answers.push((
                Answer { id: lease.message_id, attempt: lease.attempt, decision: Decision::Retry(r.delay_seconds) },
                &r.lease_id,
            )),
            None => unknown(&r.lease_id),
        }
    }
    // Retries need the consumer's settings. An ack's delete checks the queue is the account's itself, so
    // only a request with retries, or with nothing to apply, looks the queue up first.
    let route = if acks == answers.len() && acks > 0 {
        None
    } else {
        let target = delivery_target(&state, account, &path.1).await?;
        Some(state.delivery.route(account, &target).await?)
    };
    let plain: Vec<Answer> = answers.iter().map(|(a, _)| *a).collect();
    let settled = if plain.is_empty() {
        Settled::default()
    } else {
        state.delivery.settle(account, queue, route.as_ref(), &plain, 0).await?.ok_or_else(ApiError::queue_not_found)?
    };
    let acked: HashSet<MessageId> = answers[..acks].iter().map(|(a, _)| a.id).collect();
    for (answer, lease_id) in &answers[..acks] {
        if !settled.acked.contains(&answer.id) {
            warnings.insert(
                lease_id.to_string(),
                "the message is already gone (acked, dead-lettered or expired); nothing changed".into(),
            );
        }
    }
    let mut retry_count = 0;
    for (answer, lease_id) in &answers[acks..] {
        if settled.retried.contains(&answer.id) {
            retry_count += 1;
        } else if !acked.contains(&answer.id) {
            // A message acked in the same request is gone; its retry had nothing left to do.
            warnings.insert(
                lease_id.to_string(),
                "this lease is no longer the message's current one (it expired and the message was \
                 delivered again, or it was already acked or retried); the retry changed nothing"
                    .into(),
            );
        }
    }
    let ack_count = settled.acked.len();
    Ok(ok(json!({ "ackCount": ack_count, "retryCount": retry_count, "warnings": warnings })))
}
