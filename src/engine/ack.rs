//! Acks and retries of leased messages, named by their lease ids: by `POST .../messages/ack`, or carried
//! by the next pull. Both apply them here, the same way.

use std::collections::{BTreeMap, HashSet};

use super::delivery::{Answer, Route, Settled};
use super::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::MessageId;
use crate::queue::answer::Decision;
use crate::store::owned::OwnedQueue;

/// A consumer's answers: the lease ids it acks, and those it retries with their delays.
#[derive(Debug, Default, Clone)]
pub struct LeaseAnswers {
    pub acks: Vec<String>,
    pub retries: Vec<(String, Option<i64>)>,
}

impl LeaseAnswers {
    pub fn is_empty(&self) -> bool {
        self.acks.is_empty() && self.retries.is_empty()
    }
}

/// What a request's acks and retries did.
#[derive(Debug, Default)]
pub struct AckOutcome {
    pub ack_count: usize,
    pub retry_count: usize,
    /// Keyed by the lease id that changed nothing, with the reason.
    pub warnings: BTreeMap<String, String>,
}

impl Engine {
    /// Applies acks and retries (already checked) to the queue, each in the queue or the lane its lease was
    /// issued for (a queue with several consumers, the `consumer_lanes` migration). `known` is the route of
    /// the queue or lane the caller has looked up already (a pull, whose answers are its own consumer's);
    /// otherwise it is looked up only if a retry needs it.
    pub async fn ack(&self, queue: OwnedQueue, answers: &LeaseAnswers, known: Option<&Route>) -> ApiResult<AckOutcome> {
        if known.is_some() {
            return self.ack_in(queue, answers, known).await;
        }
        let lease_ids: Vec<&str> =
            answers.acks.iter().map(String::as_str).chain(answers.retries.iter().map(|(l, _)| l.as_str())).collect();
        let lanes = self.lease_lanes(queue, &lease_ids).await?;
        if lanes.iter().all(|lane| *lane == queue) {
            return self.ack_in(queue, answers, None).await;
        }
        let mut parts: Vec<(OwnedQueue, LeaseAnswers)> = Vec::new();
        fn part_of(parts: &mut Vec<(OwnedQueue, LeaseAnswers)>, lane: OwnedQueue) -> &mut LeaseAnswers {
            let at = match parts.iter().position(|(l, _)| *l == lane) {
                Some(at) => at,
                None => {
                    parts.push((lane, LeaseAnswers::default()));
                    parts.len() - 1
                }
            };
            &mut parts[at].1
        }
        for (ack, lane) in answers.acks.iter().zip(&lanes) {
            part_of(&mut parts, *lane).acks.push(ack.clone());
        }
        for (retry, lane) in answers.retries.iter().zip(&lanes[answers.acks.len()..]) {
            part_of(&mut parts, *lane).retries.push(retry.clone());
        }
        let mut outcome = AckOutcome::default();
        for (lane, part) in &parts {
            let done = self.ack_in(*lane, part, None).await?;
            outcome.ack_count += done.ack_count;
            outcome.retry_count += done.retry_count;
            outcome.warnings.extend(done.warnings);
        }
        Ok(outcome)
    }

    /// For each lease id, the queue or the lane of it that issued it; the queue for one that opens for
    /// neither (its answer then warns that it is unknown). The lanes are read only for a lease id that is
    /// not the queue's own.
    pub async fn lease_lanes(&self, queue: OwnedQueue, lease_ids: &[&str]) -> ApiResult<Vec<OwnedQueue>> {
        let mut lanes: Option<Vec<OwnedQueue>> = None;
        let mut found = Vec::with_capacity(lease_ids.len());
        for lease_id in lease_ids {
            if self.signer.open_lease(queue.id(), lease_id).is_some() {
                found.push(queue);
                continue;
            }
            let lanes = match &mut lanes {
                Some(lanes) => lanes,
                None => lanes.insert(crate::store::queues::lanes(&self.pool, queue).await?),
            };
            let lane = lanes.iter().find(|lane| self.signer.open_lease(lane.id(), lease_id).is_some());
            found.push(lane.copied().unwrap_or(queue));
        }
        Ok(found)
    }

    /// `ack` within one queue or lane.
    async fn ack_in(&self, queue: OwnedQueue, answers: &LeaseAnswers, known: Option<&Route>) -> ApiResult<AckOutcome> {
        self.check_quotas(queue.account(), false)?;
        let mut warnings: BTreeMap<String, String> = BTreeMap::new();
        let mut unknown = |lease_id: &str| {
            warnings.insert(lease_id.to_owned(), "unknown lease id for this queue; nothing changed".into());
        };
        // Each answer with the lease it came with; the precedence rules are the delivery module's.
        let mut given: Vec<(Answer, &str)> = Vec::new();
        for lease_id in &answers.acks {
            match self.signer.open_lease(queue.id(), lease_id) {
                Some(lease) => given
                    .push((Answer { id: lease.message_id, attempt: lease.attempt, decision: Decision::Ack }, lease_id)),
                None => unknown(lease_id),
            }
        }
        let acks = given.len();
        for (lease_id, delay) in &answers.retries {
            match self.signer.open_lease(queue.id(), lease_id) {
                Some(lease) => given.push((
                    Answer { id: lease.message_id, attempt: lease.attempt, decision: Decision::Retry(*delay) },
                    lease_id,
                )),
                None => unknown(lease_id),
            }
        }
        // Retries need the consumer's settings. An ack's delete checks the queue is the account's itself,
        // so only a request with retries, or with nothing to apply, looks the queue up first.
        let looked_up;
        let route = match known {
            Some(route) => Some(route),
            None if acks == given.len() && acks > 0 => None,
            None => {
                looked_up = self.route_of(queue).await?;
                Some(&looked_up)
            }
        };
        let plain: Vec<Answer> = given.iter().map(|(a, _)| *a).collect();
        let settled = if plain.is_empty() {
            Settled::default()
        } else {
            self.delivery.settle(queue, route, &plain, 0).await?.ok_or_else(ApiError::queue_not_found)?
        };
        let acked: HashSet<MessageId> = given[..acks].iter().map(|(a, _)| a.id).collect();
        for (answer, lease_id) in &given[..acks] {
            if !settled.acked.contains(&answer.id) {
                warnings.insert(
                    lease_id.to_string(),
                    "the message is already gone (acked, dead-lettered or expired); nothing changed".into(),
                );
            }
        }
        let mut retry_count = 0;
        for (answer, lease_id) in &given[acks..] {
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

    /// The queue's route, read now; a 404 when the queue is gone.
    pub async fn route_of(&self, queue: OwnedQueue) -> ApiResult<Route> {
        let target =
            crate::store::consumers::delivery_target(&self.pool, queue).await?.ok_or_else(ApiError::queue_not_found)?;
        Ok(self.delivery.route(queue, &target).await?)
    }
}
