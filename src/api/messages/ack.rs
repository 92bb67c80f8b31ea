//! Ack and retry: the answers of a pull consumer, applied by the delivery core. A pull may carry them
//! too (`apply`, shared with the pull handler), so that they work the same either way.

use std::collections::{BTreeMap, HashSet};

use actix_web::web;
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};

use super::delivery_target;
use crate::api::envelope::{ok, ApiJson};
use crate::api::extract::{Authed, QueuesReadWrite};
use crate::api::queues::queue_id;
use crate::engine::delivery::{Answer, Route, Settled};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::{AccountId, MessageId};
use crate::queue::answer::Decision;
use crate::queue::message::check_delay;

type Data = web::Data<Engine>;

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

/// What a request's acks and retries did.
#[derive(Serialize, Default)]
pub struct AckOutcome {
    #[serde(rename = "ackCount")]
    ack_count: usize,
    #[serde(rename = "retryCount")]
    retry_count: usize,
    /// Keyed by the lease id that changed nothing, with the reason.
    warnings: BTreeMap<String, String>,
}

pub async fn ack(
    state: Data,
    auth: Authed<QueuesReadWrite>,
    path: web::Path<(String, String)>,
    body: ApiJson<AckRequest>,
) -> ApiResult<HttpResponse> {
    let request = body.0;
    check(&request.acks, &request.retries)?;
    let outcome = apply(&state, auth.account_id(), &path.1, &request.acks, &request.retries, None).await?;
    Ok(ok(outcome))
}

/// Checks a request's acks and retries before anything of the request is applied.
pub(super) fn check(acks: &[LeaseRef], retries: &[RetryRef]) -> ApiResult<()> {
    if acks.len() + retries.len() > MAX_ACKS {
        return Err(ApiError::invalid(format!("at most {MAX_ACKS} acks and retries per request")));
    }
    for (i, r) in retries.iter().enumerate() {
        if let Some(d) = r.delay_seconds {
            check_delay(format_args!("retries[{i}].delay_seconds"), d)?;
        }
    }
    Ok(())
}

/// Applies acks and retries (already `check`ed) as POST .../ack does. `known` is the queue's route when
/// the caller has looked it up already (a pull); otherwise it is looked up only if a retry needs it.
pub(super) async fn apply(
    state: &Engine,
    account: AccountId,
    raw_queue: &str,
    acks: &[LeaseRef],
    retries: &[RetryRef],
    known: Option<&Route>,
) -> ApiResult<AckOutcome> {
    let queue = queue_id(raw_queue)?;
    let mut warnings: BTreeMap<String, String> = BTreeMap::new();
    let mut unknown = |lease_id: &str| {
        warnings.insert(lease_id.to_owned(), "unknown lease id for this queue; nothing changed".into());
    };

    // Each answer with the lease it came with; the precedence rules are the delivery module's.
    let mut answers: Vec<(Answer, &str)> = Vec::new();
    for a in acks {
        match state.signer.open_lease(queue, &a.lease_id) {
            Some(lease) => answers
                .push((Answer { id: lease.message_id, attempt: lease.attempt, decision: Decision::Ack }, &a.lease_id)),
            None => unknown(&a.lease_id),
        }
    }
    let acks = answers.len();
    for r in retries {
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
    let looked_up;
    let route = match known {
        Some(route) => Some(route),
        None if acks == answers.len() && acks > 0 => None,
        None => {
            let target = delivery_target(state, account, raw_queue).await?;
            looked_up = state.delivery.route(account, &target).await?;
            Some(&looked_up)
        }
    };
    let plain: Vec<Answer> = answers.iter().map(|(a, _)| *a).collect();
    let settled = if plain.is_empty() {
        Settled::default()
    } else {
        state.delivery.settle(account, queue, route, &plain, 0).await?.ok_or_else(ApiError::queue_not_found)?
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
    Ok(AckOutcome { ack_count: settled.acked.len(), retry_count, warnings })
}
