//! Leasing and settling batches: the one path by which pull consumers (`api`) and webhook consumers
//! (`dispatch`) take messages and apply their answers. It claims until exhausted messages stop taking
//! a batch's places, resolves acks and retries with one set of precedence rules, and records activity
//! and backlog changes once, whoever the caller is.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use sqlx::PgPool;

use crate::engine::activity::Activity;
use crate::engine::backlog::BacklogCache;
use crate::engine::floors::Floors;
use crate::ids::ConsumerId;
use crate::ids::QueueId;
use crate::queue::answer::Decision;
use crate::queue::consumer::{ConsumerKind, RetryPolicy, DEFAULT_MAX_RETRIES};
use crate::store::consumers::DeliveryTarget;
use crate::store::messages::{AckedBatch, Claim, ClaimSpec, Extension, Retry};
use crate::store::owned::OwnedQueue;
use crate::store::{self};

pub use crate::ids::MessageId;

/// Claims in one lease: exhausted messages take a claim's places as they are dead-lettered.
const MAX_CLAIMS_PER_LEASE: usize = 10;

/// Where a queue's messages go and how they come back: the claim's rules, the consumer's kind and
/// its retry delays.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub kind: ConsumerKind,
    pub spec: ClaimSpec,
    pub retry: RetryPolicy,
}

impl Route {
    pub fn queue(&self) -> QueueId {
        self.spec.queue.id()
    }
}

/// What a consumer said of one leased message.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    pub id: MessageId,
    /// The delivery the answer is about, from its lease.
    pub attempt: i32,
    pub decision: Decision,
}

/// What a settle applied.
#[derive(Debug, Default)]
pub struct Settled {
    /// Messages the acks deleted (acks of messages already gone are not here).
    pub acked: HashSet<MessageId>,
    /// Messages retried or, out of deliveries, dead-lettered or dropped.
    pub retried: HashSet<MessageId>,
    pub exhausted: usize,
}

/// The node's delivery core, shared by the API and the dispatcher.
pub struct Delivery {
    pool: PgPool,
    activity: Arc<Activity>,
    backlog: Arc<BacklogCache>,
    /// Where this node's claims of each queue start (`floors`).
    pub floors: Arc<Floors>,
}

impl Delivery {
    pub fn new(pool: PgPool, activity: Arc<Activity>, backlog: Arc<BacklogCache>, floors: Arc<Floors>) -> Self {
        Self { pool, activity, backlog, floors }
    }

    /// The route of a queue found by `store::consumers::delivery_target`: its consumer's delivery limit
    /// (Cloudflare's default when it has none) and dead-letter queue, made again if it was deleted
    /// since the consumer named it.
    pub async fn route(&self, queue: OwnedQueue, target: &DeliveryTarget) -> Result<Route, sqlx::Error> {
        let consumer = target.consumer.as_ref();
        let kind = consumer.map_or(ConsumerKind::HttpPull, |c| c.kind);
        let settings = RouteSettings {
            kind,
            dead_letter_queue: consumer.map_or("", |c| c.dead_letter_queue.as_str()),
            known_dead_letter_queue: target.dead_letter_queue_id,
            max_retries: consumer.map_or(DEFAULT_MAX_RETRIES, |c| c.max_retries),
            retention_seconds: target.message_retention_period.into(),
            retry: consumer.map_or(RetryPolicy::constant(0), |c| c.retry),
        };
        self.route_with(queue, settings).await
    }

    /// The route of a queue whose consumer the caller already holds (the dispatcher's).
    pub async fn route_with(&self, queue: OwnedQueue, s: RouteSettings<'_>) -> Result<Route, sqlx::Error> {
        let dead_letter_queue =
            store::queues::dead_letter_target(&self.pool, queue, s.dead_letter_queue, s.known_dead_letter_queue)
                .await?;
        let spec = ClaimSpec {
            queue,
            dead_letter_queue,
            max_deliveries: s.max_retries + 1,
            retention_seconds: s.retention_seconds,
        };
        Ok(Route { kind: s.kind, spec, retry: s.retry })
    }

    /// Leases up to `limit` messages for `visibility_ms`, for the webhook consumer `webhook` (whose claim
    /// reads its signing secrets) or a pull. A pull claims again while exhausted messages were dead-lettered
    /// in place of deliverable ones; a webhook claim fills one batch in one slot, so it claims once.
    pub async fn lease(
        &self,
        route: &Route,
        webhook: Option<ConsumerId>,
        limit: i64,
        visibility_ms: i64,
    ) -> Result<Claim, sqlx::Error> {
        let mut leased = Claim::default();
        for _ in 0..MAX_CLAIMS_PER_LEASE {
            let want = limit - leased.messages.len() as i64;
            let (queue, bound) = (route.queue(), self.floors.bound());
            let floor = self.floors.of(queue);
            let mut claim = store::messages::claim(&self.pool, route.spec, floor, webhook, want, visibility_ms).await?;
            self.floors.claimed(queue, bound, claim.first_live);
            if !claim.used_up.is_empty() {
                claim.exhausted = store::messages::dead_letter(&self.pool, route.spec, &claim.used_up).await?;
            }
            self.exhausted(route, claim.exhausted);
            leased.exhausted += claim.exhausted;
            leased.next_in_ms = leased.next_in_ms.or(claim.next_in_ms);
            if leased.secrets.is_empty() {
                leased.secrets = claim.secrets;
            }
            leased.messages.extend(claim.messages);
            if webhook.is_some() || claim.used_up.is_empty() || leased.messages.len() as i64 >= limit {
                break;
            }
        }
        self.activity.delivered(route.kind, leased.messages.len());
        Ok(leased)
    }

    /// Takes as leased by `route` the messages a publish leased as it stored them (see
    /// `store::publish::LeaseOffer`), recording them as a claim's would be.
    pub fn adopt(&self, route: &Route, leased: store::publish::LeasedAtPublish) -> Claim {
        self.activity.delivered(route.kind, leased.messages.len());
        Claim { messages: leased.messages, secrets: leased.secrets, ..Claim::default() }
    }

    /// Applies a batch's answers. None when the account has no such queue. `route` is needed only when
    /// some answer is a retry (an ack needs no more than the queue); `floor_seconds` is the least delay of
    /// any retry (a receiver's Retry-After).
    pub async fn settle(
        &self,
        queue: OwnedQueue,
        route: Option<&Route>,
        answers: &[Answer],
        floor_seconds: i64,
    ) -> Result<Option<Settled>, sqlx::Error> {
        let policy = route.map_or(RetryPolicy::constant(0), |r| r.retry);
        let (acks, retries) = plan(answers, &policy, floor_seconds);
        let mut settled = Settled::default();
        if !acks.is_empty() {
            let Some(done) = store::messages::ack(&self.pool, queue, &acks).await? else { return Ok(None) };
            let kind = route.map(|r| r.kind).or(done.consumer_kind).unwrap_or(ConsumerKind::HttpPull);
            settled.acked = self.acked(queue.id(), kind, done.deleted);
        }
        if !retries.is_empty() {
            let route = route.expect("a settle with retries is given the queue's route");
            let done = store::messages::retry(&self.pool, route.spec, &retries).await?;
            self.activity.retried(route.kind, done.retried.len());
            self.exhausted(route, done.exhausted.len());
            settled.exhausted = done.exhausted.len();
            if !done.retried.is_empty() {
                self.wake(queue.id(), route.kind == ConsumerKind::Webhook);
            }
            settled.retried = done.retried.into_iter().chain(done.exhausted).collect();
        }
        Ok(Some(settled))
    }

    /// Applies the acks of many webhook batches answered with acks alone, and gives their dispatch slots
    /// back, in one statement. For each batch, in order: None when its account has no such queue, else the
    /// messages its acks deleted.
    pub async fn settle_acked_batches(
        &self,
        batches: &[AckedBatch],
    ) -> Result<Vec<Option<HashSet<MessageId>>>, sqlx::Error> {
        let deleted = store::messages::ack_batches(&self.pool, batches).await?;
        let mut gone_by_queue = HashMap::with_capacity(deleted.len());
        for (queue, gone) in deleted {
            gone_by_queue.insert(queue, self.acked(queue, ConsumerKind::Webhook, gone));
        }
        Ok(batches
            .iter()
            .map(|b| {
                let gone = gone_by_queue.get(&b.queue.id())?;
                Some(b.ids.iter().filter(|id| gone.contains(id)).copied().collect())
            })
            .collect())
    }

    /// Records what an ack deleted from a queue (its backlog, its activity), wakes whoever waits on it
    /// when an acked message's ordering key lets the next one go, and returns the ids.
    fn acked(&self, queue: QueueId, kind: ConsumerKind, gone: store::messages::Deleted) -> HashSet<MessageId> {
        self.backlog.removed(queue, gone.ids.len(), gone.bytes);
        if gone.keyed {
            self.wake(queue, kind == ConsumerKind::Webhook);
        }
        self.activity.acked(queue, kind, gone.ids.len());
        gone.ids.into_iter().collect()
    }

    /// Gives leases back untouched (a delivery abandoned before its receiver answered, or messages a
    /// publish leased for a worker that stopped): the messages are available again at once without the
    /// abandoned delivery counting against their retries, and the dispatchers of every node are woken for
    /// them. Should this fail, the lease runs out by itself, as after a crash.
    pub async fn give_back(&self, queue: OwnedQueue, leases: &[(MessageId, i32)]) {
        let given_back = async {
            store::messages::release(&self.pool, queue, leases).await?;
            store::messages::wake(&self.pool, &[queue.id()], true).await
        };
        if let Err(err) = given_back.await {
            tracing::warn!(error = %err, "giving leases back failed; they run out by themselves");
        }
    }

    /// Extends leases of the account's queue (a consumer's heartbeat), for pull and webhook leases alike.
    /// Of several entries naming one lease the first counts. None when the account has no such queue;
    /// else the leases, as (message, delivery), that were current and now run longer.
    pub async fn extend(
        &self,
        queue: OwnedQueue,
        extensions: &[Extension],
    ) -> Result<Option<HashSet<(MessageId, i32)>>, sqlx::Error> {
        let mut seen = HashSet::new();
        let first: Vec<Extension> = extensions.iter().filter(|e| seen.insert((e.id, e.attempt))).copied().collect();
        let Some(extended) = store::messages::extend(&self.pool, queue, &first).await? else {
            return Ok(None);
        };
        self.activity.extended(extended.len());
        Ok(Some(extended.into_iter().collect()))
    }

    /// Wakes whoever waits on the queue on any node (long-polling pulls; its dispatcher, when `pushed`)
    /// for messages retried or dead-lettered into it: there now, or sooner than any timer they set. Sent by a task of its own, so
    /// that a retry's answer does not wait for it; a lost wake-up only delays a wait until its timer or
    /// deadline.
    fn wake(&self, queue: QueueId, pushed: bool) {
        let pool = self.pool.clone();
        tokio::spawn(async move {
            if let Err(err) = store::messages::wake(&pool, &[queue], pushed).await {
                tracing::warn!(error = %err, "waking the consumers of retried messages failed");
            }
        });
    }

    fn exhausted(&self, route: &Route, count: usize) {
        if count > 0 {
            self.activity.exhausted(count, route.spec.dead_letter_queue.is_some());
            self.backlog.forget(route.queue());
            if let Some(dead_letter_queue) = route.spec.dead_letter_queue {
                self.wake(dead_letter_queue, true);
            }
            // A message that left may have held back the next one of its ordering key.
            self.wake(route.queue(), route.kind == ConsumerKind::Webhook);
        }
    }
}

/// What a route is made of, for a caller that holds its consumer's settings.
#[derive(Debug, Clone, Copy)]
pub struct RouteSettings<'a> {
    pub kind: ConsumerKind,
    pub dead_letter_queue: &'a str,
    pub known_dead_letter_queue: Option<QueueId>,
    pub max_retries: i32,
    pub retention_seconds: i64,
    pub retry: RetryPolicy,
}

/// The precedence rules, in one place: an ack of a message beats any retry of it in the same batch; of
/// several retries the first counts. A retry waits its own delay, else the consumer's policy for that
/// delivery, and never less than `floor_seconds`.
pub fn plan(answers: &[Answer], policy: &RetryPolicy, floor_seconds: i64) -> (Vec<MessageId>, Vec<Retry>) {
    let acked: HashSet<MessageId> = answers.iter().filter(|a| a.decision == Decision::Ack).map(|a| a.id).collect();
    let mut acks: Vec<MessageId> = acked.iter().copied().collect();
    acks.sort_by_key(|id| id.0);
    let mut retried = HashSet::new();
    let retries = answers
        .iter()
        .filter_map(|a| match a.decision {
            Decision::Retry(delay) if !acked.contains(&a.id) && retried.insert(a.id) => Some(Retry {
                id: a.id,
                attempt: a.attempt,
                delay_seconds: delay
                    .unwrap_or_else(|| policy.delay_after(a.attempt, rand::random()))
                    .max(floor_seconds),
            }),
            _ => None,
        })
        .collect();
    (acks, retries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(n: u128, decision: Decision) -> Answer {
        Answer { id: MessageId(uuid::Uuid::from_u128(n)), attempt: 1, decision }
    }

    #[test]
    fn an_ack_beats_a_retry_of_the_same_message_and_the_first_retry_counts() {
        let answers = [
            answer(1, Decision::Retry(Some(5))),
            answer(1, Decision::Ack),
            answer(2, Decision::Retry(Some(7))),
            answer(2, Decision::Retry(Some(9))),
            answer(3, Decision::Retry(None)),
        ];
        let (acks, retries) = plan(&answers, &RetryPolicy::constant(30), 0);
        assert_eq!(acks, vec![MessageId(uuid::Uuid::from_u128(1))]);
        let delays: Vec<(u128, i64)> = retries.iter().map(|r| (r.id.0.as_u128(), r.delay_seconds)).collect();
        assert_eq!(delays, vec![(2, 7), (3, 30)]);
    }

    #[test]
    fn a_floor_raises_every_retry_delay() {
        let answers = [answer(1, Decision::Retry(Some(1))), answer(2, Decision::Retry(None))];
        let (_, retries) = plan(&answers, &RetryPolicy::constant(0), 20);
        assert!(retries.iter().all(|r| r.delay_seconds == 20));
    }
}
