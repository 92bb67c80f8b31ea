//! The webhook dispatcher: claims batches for `webhook` consumers and POSTs them, signed, to their URLs,
//! then applies the receiver's answer. Any number of nodes run it against one database: batches are
//! claimed with SKIP LOCKED and each consumer's batches in flight are capped by dispatch slots.
//!
//! `deliver` is one delivery from claim to outcome; `worker` runs one consumer's loop; `run` keeps a
//! worker for every active webhook consumer, asleep until NOTIFY or the consumer's own timer wakes it.

mod acks;
pub mod breaker;
pub mod client;
pub mod guard;
mod outcome;
mod payload;
mod share;
pub mod signature;
mod slots;
mod worker;

use outcome::Reading;
pub use outcome::{Outcome, OutcomeKind};

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::mpsc;

use crate::auth::sealing::Purpose;
use crate::engine::attempts::TestSend;
use crate::engine::delivery::{Answer, Route, RouteSettings};
use crate::engine::slots::SlotPool;
use crate::engine::wakeups::Offer;
use crate::engine::Engine;
use crate::ids::{ConsumerId, MessageId, QueueId};
use crate::queue::answer::Decision;
use crate::queue::consumer::{ConsumerKind, RetryPolicy, MAX_CONCURRENCY};
use crate::queue::message;
use crate::store::attempts::AttemptRow;
use crate::store::dispatch::WebhookConsumerRow;
use crate::store::messages::{AckedBatch, StoredMessage};
use crate::store::owned::OwnedQueue;
use crate::store::publish::{LeaseOffer, LeasedAtPublish};
use crate::store::{self};
use client::{Reply, WebhookClient};
use futures_util::future::BoxFuture;

pub use worker::run;

/// How the dispatcher behaves on this node.
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    /// How long a receiver has to answer.
    pub timeout: Duration,
    /// Deliveries in flight at once from this node, over all consumers, shared fairly between accounts
    /// (`share`).
    pub max_in_flight: usize,
    /// How often the list of consumers is read again, a safety net: changes arrive by notification.
    pub refresh_every: Duration,
    /// At shutdown, how long in-flight deliveries may finish before their batches are released.
    pub shutdown_grace: Duration,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_in_flight: 512,
            refresh_every: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

pub struct Dispatcher {
    engine: Arc<Engine>,
    client: WebhookClient,
    settings: DispatchSettings,
    /// Consumers whose dispatch slots exist for their current max_concurrency.
    slots_made: std::sync::Mutex<std::collections::HashSet<(ConsumerId, i32)>>,
    /// The dispatch slots this node holds, per consumer (`engine::slots`), and the id it holds them as.
    slots: std::sync::Mutex<std::collections::HashMap<ConsumerId, Arc<SlotPool>>>,
    node: uuid::Uuid,
    /// Each active consumer's `max_concurrency`, as the last read of the consumers found it.
    max_concurrency: std::sync::Mutex<std::collections::HashMap<ConsumerId, i32>>,
    /// This node's deliveries in flight, by account.
    in_flight: Arc<share::InFlight>,
    /// Batches answered with acks alone are settled together.
    acks: acks::AckCollector,
    /// Each consumer's circuit breaker, as this node sees it.
    pub breakers: breaker::Breakers,
}

/// A webhook consumer as the dispatcher works with it.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookConsumer {
    pub id: ConsumerId,
    pub queue: OwnedQueue,
    /// The queue as the tenant names it (`queue` may be a lane of it).
    pub named_queue: QueueId,
    pub queue_name: String,
    pub url: String,
    pub secrets: Vec<String>,
    pub dead_letter_queue: String,
    pub dead_letter_queue_id: Option<QueueId>,
    pub batch_size: i64,
    pub max_wait: Duration,
    pub max_concurrency: i32,
    pub max_deliveries: i32,
    pub retry: RetryPolicy,
    pub retention_seconds: i64,
    /// The endpoint's health as the database had it when the consumers were read.
    pub health: StoredHealth,
}

/// An endpoint's health as the database has it: what the breaker takes from the other nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StoredHealth {
    pub failures: i32,
    pub last_failure_at: Option<chrono::DateTime<Utc>>,
    pub last_success_at: Option<chrono::DateTime<Utc>>,
}

impl From<WebhookConsumerRow> for WebhookConsumer {
    fn from(row: WebhookConsumerRow) -> Self {
        let retry = store::consumers::retry_policy(row.retry_delay, row.retry_backoff, row.retry_delay_max);
        Self {
            id: row.id,
            queue: row.queue(),
            named_queue: row.named_queue_id,
            queue_name: row.queue_name,
            url: row.url,
            secrets: std::iter::once(row.signing_secret).chain(row.previous_signing_secret).collect(),
            dead_letter_queue: row.dead_letter_queue,
            dead_letter_queue_id: row.dead_letter_queue_id,
            batch_size: row.batch_size.into(),
            max_wait: Duration::from_millis(row.max_wait_time_ms.max(0) as u64),
            max_concurrency: row.max_concurrency.unwrap_or(MAX_CONCURRENCY as i32),
            max_deliveries: row.max_retries + 1,
            retry,
            retention_seconds: row.message_retention_period.into(),
            health: StoredHealth {
                failures: row.consecutive_failures,
                last_failure_at: row.last_failure_at,
                last_success_at: row.last_success_at,
            },
        }
    }
}

/// A claimed batch, with the route it was claimed by, the slot it holds and the secrets its claim read.
pub struct Batch {
    pub messages: Vec<StoredMessage>,
    pub slot: Option<i32>,
    pub secrets: Vec<String>,
    /// How soon the queue's next message becomes deliverable (a delayed or leased one, this batch's own
    /// lease included) as the claim found it, when it leased anything: the worker's timer.
    pub next_due: Option<Duration>,
    /// Whether the batch's acks are applied without waiting for other batches' (see `acks`): its next
    /// delivery waits on them.
    pub settle_at_once: bool,
    route: Route,
}

/// How many of a batch's message ids its attempt records.
const LOGGED_MESSAGE_IDS: usize = 100;

/// One POST to an endpoint, as the attempt log records it with its reading.
struct Attempt<I> {
    at: chrono::DateTime<Utc>,
    elapsed: Duration,
    test: bool,
    message_ids: I,
    size: usize,
}

/// How long a batch whose signing secret does not open on this node is held before it goes back.
const UNSIGNABLE_HOLD: Duration = Duration::from_secs(2);

impl Dispatcher {
    pub fn new(engine: Arc<Engine>, client: WebhookClient, settings: DispatchSettings) -> Self {
        let in_flight = share::InFlight::new(settings.max_in_flight);
        let acks = acks::AckCollector::start(engine.delivery.clone());
        let (slots_made, slots, node) = (Default::default(), Default::default(), uuid::Uuid::new_v4());
        let (max_concurrency, breakers) = Default::default();
        Self { engine, client, settings, slots_made, slots, node, max_concurrency, in_flight, acks, breakers }
    }

    /// Every webhook consumer of an active account whose queue is not paused, with whether its queue has a
    /// message ready.
    pub async fn consumers(&self) -> Result<Vec<(WebhookConsumer, bool)>, sqlx::Error> {
        let active = store::dispatch::active_webhook_consumers(&self.engine.pool).await?;
        Ok(active.into_iter().map(|a| (a.consumer.into(), a.has_ready)).collect())
    }

    /// Long enough for a delivery that uses its whole timeout (and the answer's read) to still settle
    /// its own batch; short enough that a batch whose node died comes back soon.
    fn lease(&self) -> Duration {
        self.settings.timeout * 2 + Duration::from_secs(5)
    }

    async fn route(&self, c: &WebhookConsumer) -> Result<Route, sqlx::Error> {
        let settings = RouteSettings {
            kind: ConsumerKind::Webhook,
            dead_letter_queue: &c.dead_letter_queue,
            known_dead_letter_queue: c.dead_letter_queue_id,
            max_retries: c.max_deliveries - 1,
            retention_seconds: c.retention_seconds,
            retry: c.retry,
        };
        self.engine.delivery.route_with(c.queue, settings).await
    }

    /// The terms on which `c`'s worker takes messages leased by the publish that stores them: those of
    /// its claim. Only a consumer without a batching wait makes one (a claim would deliver at once).
    fn offer(&self, c: &WebhookConsumer, hand: &mpsc::UnboundedSender<LeasedAtPublish>) -> Option<Offer> {
        let terms = LeaseOffer {
            queue: c.queue.id(),
            consumer: c.id,
            // Set aside from `slots` by the publish that takes the offer up.
            slot: -1,
            lease_ms: self.lease().as_millis() as i64,
            batch_size: c.batch_size,
        };
        c.max_wait.is_zero().then(|| Offer { terms, slots: self.slots_of(c.id), hand: hand.clone() })
    }

    /// The dispatch slots this node holds for consumer `consumer`.
    fn slots_of(&self, consumer: ConsumerId) -> Arc<SlotPool> {
        let mut slots = self.slots.lock().expect("slots lock");
        slots.entry(consumer).or_insert_with(|| Arc::new(SlotPool::new(consumer))).clone()
    }

    /// A dispatch slot for `c`'s next batch: one this node holds free, or else one more taken from the
    /// database while the node holds fewer than `max_concurrency`. None when every slot is in use.
    async fn take_slot(&self, c: &WebhookConsumer) -> Result<Option<i32>, sqlx::Error> {
        let pool = self.slots_of(c.id);
        if let Some(slot) = pool.take_free(c.max_concurrency) {
            return Ok(Some(slot));
        }
        if pool.held() >= c.max_concurrency.max(1) as usize {
            return Ok(None);
        }
        let key = (c.id, c.max_concurrency);
        if !self.slots_made.lock().expect("slots lock").contains(&key) {
            store::dispatch::ensure_slots(&self.engine.pool, c.id, c.max_concurrency).await?;
            self.slots_made.lock().expect("slots lock").insert(key);
        }
        let hold_ms = self.lease().as_millis() as i64;
        let taken = store::dispatch::take_slot(&self.engine.pool, c.id, c.max_concurrency, self.node, hold_ms).await?;
        if let Some(slot) = taken {
            // The node's pool of the consumer as it is now: the one read before the statement may have been
            // forgotten meanwhile (the consumer inactive at the upkeep's last look).
            self.slots_of(c.id).taken(slot);
        }
        Ok(taken)
    }

    /// A batch of messages a publish leased for a consumer whose route is `route`, as its claim would
    /// have found them.
    fn adopt(&self, route: Route, leased: LeasedAtPublish) -> Batch {
        let slot = Some(leased.slot);
        let claim = self.engine.delivery.adopt(&route, leased);
        let (messages, secrets) = (claim.messages, claim.secrets);
        Batch { messages, slot, secrets, next_due: None, settle_at_once: false, route }
    }

    /// Claims up to a batch for `c` in one of its dispatch slots; empty when nothing is ready or every
    /// slot is in use.
    pub async fn claim(&self, c: &WebhookConsumer) -> Result<Batch, sqlx::Error> {
        let route = self.route(c).await?;
        let lease_ms = self.lease().as_millis() as i64;
        let Some(slot) = self.take_slot(c).await? else {
            return Ok(Batch {
                messages: Vec::new(),
                slot: None,
                secrets: Vec::new(),
                next_due: None,
                settle_at_once: false,
                route,
            });
        };
        let claim = match self.engine.delivery.lease(&route, Some(c.id), c.batch_size, lease_ms).await {
            Ok(claim) => claim,
            Err(err) => {
                self.slots_of(c.id).put_back(slot);
                return Err(err);
            }
        };
        if claim.messages.is_empty() {
            self.slots_of(c.id).put_back(slot);
        }
        let slot = (!claim.messages.is_empty()).then_some(slot);
        // Exhausted messages took places in the batch that deliverable ones behind them may want: now.
        let next_due = (!claim.messages.is_empty()).then(|| {
            let next_ms = claim.next_in_ms.map_or(lease_ms, |next| next.clamp(0, lease_ms));
            Duration::from_millis(if claim.exhausted > 0 { 0 } else { next_ms as u64 })
        });
        let settle_at_once = claim.messages.iter().any(|m| m.ordering_key.is_some());
        let (messages, secrets) = (claim.messages, claim.secrets);
        Ok(self.fit(c, Batch { messages, slot, secrets, next_due, settle_at_once, route }).await)
    }

    /// The batch within the bytes a batch of its account may total (see `Limits::sizes`): the messages past
    /// them go back to the queue at once, their attempts untouched, for the next batch.
    async fn fit(&self, c: &WebhookConsumer, mut batch: Batch) -> Batch {
        let budget = self.engine.limits_of(c.queue.account()).sizes().batch;
        let keep = message::within_bytes(batch.messages.iter().map(|m| m.body.len()), budget);
        if keep < batch.messages.len() {
            let rest = batch.messages.split_off(keep);
            let leases: Vec<_> = rest.iter().map(|m| (m.id, m.attempts)).collect();
            self.engine.delivery.give_back(c.queue, &leases).await;
            batch.next_due = Some(Duration::ZERO);
        }
        batch
    }

    /// Claims one batch and delivers it now, whatever the batching settings: for tests and tools that
    /// want one deterministic step. None when there was nothing to claim.
    pub async fn dispatch_once(&self, c: &WebhookConsumer) -> Result<Option<Outcome>, sqlx::Error> {
        let batch = self.claim(c).await?;
        if batch.messages.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.deliver(c, batch).await))
    }

    /// POSTs the batch, gives its slot back once the receiver answered, records the attempt and applies
    /// the answer.
    pub async fn deliver(&self, c: &WebhookConsumer, batch: Batch) -> Outcome {
        let (body, ids) = payload::encode(&self.engine.signer, c, &batch.messages);
        // The claim's own reading of the secrets: the cached consumer may predate a rotation.
        let secrets = if batch.secrets.is_empty() { &c.secrets } else { &batch.secrets };
        let headers = match self.signed_headers(c, secrets, &body) {
            Ok(headers) => headers,
            Err(why) => {
                // Sealed under a key this node lacks (nodes configured unlike): a node with it delivers. The
                // batch and its slot are held a while first, so this node does not claim it again at once.
                tokio::time::sleep(UNSIGNABLE_HOLD).await;
                let leases: Vec<_> = batch.messages.iter().map(|m| (m.id, m.attempts)).collect();
                self.release(c, &leases, batch.slot).await;
                return Outcome { failure: Some(why), ..Default::default() };
            }
        };
        let metrics = &self.engine.activity.metrics;
        metrics.batches_in_flight.inc();
        let (at, started) = (Utc::now(), std::time::Instant::now());
        let reply = self.client.post(&c.url, &headers, body).await;
        let elapsed = started.elapsed();
        metrics.batches_in_flight.dec();
        // The batch is no longer at the receiver: its slot may carry the next one while its messages,
        // still leased, wait for the answer to be applied.
        if let Some(slot) = batch.slot {
            self.slots_of(c.id).put_back(slot);
        }
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let reading = outcome::read(reply, &id_refs);
        let message_ids = batch.messages.iter().map(|m| m.id);
        let attempt = Attempt { at, elapsed, test: false, message_ids, size: batch.messages.len() };
        self.engine.attempt_log.record(self.attempt_row(c, attempt, &reading));
        if self.breakers.record(c.id, reading.attempt.is_success(), at) {
            self.circuit_closed(c).await;
        }
        let outcome = self.settle(c, &batch, &id_refs, reading).await;
        metrics.deliveries.with_label_values(&[outcome.kind.as_str()]).inc();
        metrics.delivery_duration.with_label_values(&[outcome.kind.as_str()]).observe(elapsed.as_secs_f64());
        outcome
    }

    /// The Standard Webhooks headers signing `body` with each of `secrets` (sealed); why not when one does
    /// not open on this node.
    fn signed_headers(
        &self,
        c: &WebhookConsumer,
        secrets: &[String],
        body: &[u8],
    ) -> Result<[(&'static str, String); 3], String> {
        let webhook_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
        let timestamp = Utc::now().timestamp();
        let opened = secrets.iter().map(|s| self.engine.keys.open_text(Purpose::WebhookSecret, s));
        let secrets = match opened.collect::<Result<Vec<_>, _>>() {
            Ok(secrets) => secrets,
            Err(err) => {
                tracing::error!(error = %err, consumer = %c.id, "a signing secret does not open; the batch goes back");
                return Err(err.to_string());
            }
        };
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        let signature = signature::header(&secrets, &webhook_id, timestamp, body);
        Ok([("webhook-id", webhook_id), ("webhook-timestamp", timestamp.to_string()), ("webhook-signature", signature)])
    }

    /// The attempt as the attempt log records it.
    fn attempt_row(
        &self,
        c: &WebhookConsumer,
        attempt: Attempt<impl Iterator<Item = MessageId>>,
        reading: &Reading,
    ) -> AttemptRow {
        AttemptRow {
            id: 0,
            account_id: c.queue.account(),
            queue_id: c.named_queue,
            consumer_id: c.id,
            attempted_at: attempt.at,
            node: self.node,
            test: attempt.test,
            batch_size: attempt.size as i32,
            message_ids: attempt.message_ids.take(LOGGED_MESSAGE_IDS).map(|id| id.0).collect(),
            outcome: reading.attempt.as_str().to_owned(),
            status: reading.status.map(i32::from),
            latency_ms: attempt.elapsed.as_millis().min(i32::MAX as u128) as i32,
            response: reading.response.clone(),
            error: reading.failure.clone(),
        }
    }

    /// The consumer's circuit closed on this node: the database says so at once, so that the other nodes
    /// resume too when they read the consumers again, which the announcement makes them do now.
    async fn circuit_closed(&self, c: &WebhookConsumer) {
        tracing::info!(consumer = %c.id, "the webhook endpoint answered again; delivery resumes");
        if let Err(err) = self.engine.endpoint_recovered(c.queue, c.id).await {
            tracing::warn!(error = %err, "announcing a closed circuit failed; other nodes resume at their next probe");
        }
        self.engine.wakeups.subscribe(c.queue.id()).notify_one();
    }

    /// Sends a signed sample batch of one message to the consumer's endpoint now and answers the attempt as
    /// the log records it. Its answer is not applied (the sample is no message of the queue); a success
    /// closes the consumer's circuit, a failure does not count against it.
    pub async fn test_send(&self, c: &WebhookConsumer) -> AttemptRow {
        let id = MessageId::new();
        let sample = StoredMessage {
            id,
            published_id: id,
            attempts: 1,
            published_at: Utc::now(),
            content_type: message::ContentType::Json.code(),
            body: br#"{"skiplock":"test send"}"#.to_vec(),
            dead_letter_source: None,
            dead_letter_consumer: None,
            dead_lettered_at: None,
            ordering_key: None,
            flow_key: None,
        };
        let (body, ids) = payload::encode(&self.engine.signer, c, std::slice::from_ref(&sample));
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let (at, started) = (Utc::now(), std::time::Instant::now());
        let reply = match self.signed_headers(c, &c.secrets, &body) {
            Ok(headers) => self.client.post(&c.url, &headers, body).await,
            Err(reason) => Reply::Failed { kind: client::Failure::ConnectError, reason },
        };
        let elapsed = started.elapsed();
        let reading = outcome::read(reply, &id_refs);
        let attempt = Attempt { at, elapsed, test: true, message_ids: std::iter::once(sample.id), size: 1 };
        let row = self.attempt_row(c, attempt, &reading);
        self.engine.attempt_log.record(row.clone());
        if reading.attempt.is_success() {
            // Closed here, or failing as the database says (another node's circuit): closed everywhere.
            let closed_here = self.breakers.record(c.id, true, at);
            if closed_here || c.health.failures > 0 {
                self.circuit_closed(c).await;
            }
        }
        row
    }

    /// Gives a batch's leases back untouched (shutdown before the receiver answered, or a batch a publish
    /// leased that this node cannot deliver now), for any node to claim.
    pub async fn release(&self, c: &WebhookConsumer, leases: &[(MessageId, i32)], slot: Option<i32>) {
        self.engine.delivery.give_back(c.queue, leases).await;
        if let Some(slot) = slot {
            self.slots_of(c.id).put_back(slot);
        }
    }

    /// Turns the reply, read, into acks and retries and applies them.
    async fn settle(&self, c: &WebhookConsumer, batch: &Batch, id_refs: &[&str], reading: Reading<'_>) -> Outcome {
        let messages = &batch.messages;
        let Reading { kind, decisions, failure, floor, attempt, .. } = reading;
        let answers: Vec<Answer> = messages
            .iter()
            .zip(id_refs)
            .map(|(m, id)| Answer {
                id: m.id,
                attempt: m.attempts,
                decision: decisions.get(id).copied().unwrap_or(Decision::Ack),
            })
            .collect();
        if let Some(why) = &failure {
            tracing::info!(consumer = %c.id, queue = %c.queue.id(), messages = messages.len(), reason = %why, "webhook delivery failed; the batch will be retried");
        }
        let mut outcome =
            Outcome { kind, delivered: messages.len(), failure, attempt: Some(attempt), ..Default::default() };
        // Acks alone, the common answer, go with other batches' acks.
        if answers.iter().all(|a| a.decision == Decision::Ack) {
            let ids = answers.iter().map(|a| a.id).collect();
            let acked = AckedBatch { queue: c.queue, ids };
            return match self.acks.ack(acked, batch.settle_at_once).await {
                Ok(Some(gone)) => Outcome { acked: gone.len(), ..outcome },
                Ok(None) => {
                    tracing::info!(queue = %c.queue.id(), "the queue was deleted during a delivery");
                    outcome
                }
                Err(err) => {
                    tracing::warn!(error = %err, "applying a webhook answer failed; its leases expire by themselves");
                    outcome
                }
            };
        }
        match self.engine.delivery.settle(c.queue, Some(&batch.route), &answers, floor).await {
            Ok(Some(settled)) => {
                outcome.acked = settled.acked.len();
                outcome.retried = settled.retried.len();
            }
            Ok(None) => tracing::info!(queue = %c.queue.id(), "the queue was deleted during a delivery"),
            Err(err) => {
                tracing::warn!(error = %err, "applying a webhook answer failed; its leases expire by themselves")
            }
        }
        outcome
    }
}

impl TestSend for Dispatcher {
    fn test_send(
        &self,
        queue: OwnedQueue,
        consumer: ConsumerId,
    ) -> BoxFuture<'_, Result<Option<AttemptRow>, sqlx::Error>> {
        Box::pin(async move {
            let Some(row) = store::dispatch::webhook_consumer(&self.engine.pool, queue, consumer).await? else {
                return Ok(None);
            };
            Ok(Some(Dispatcher::test_send(self, &row.into()).await))
        })
    }
}
