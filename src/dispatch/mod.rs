//! The webhook dispatcher: claims batches for `webhook` consumers and POSTs them, signed, to their URLs,
//! then applies the receiver's answer. Any number of nodes run it against one database: batches are
//! claimed with SKIP LOCKED and each consumer's batches in flight are capped by dispatch slots.
//!
//! `deliver` is one delivery from claim to outcome; `worker` runs one consumer's loop; `run` keeps a
//! worker for every active webhook consumer and wakes them on NOTIFY when messages are published.

pub mod client;
pub mod guard;
pub mod signature;
mod worker;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde::Serialize;
use serde_json::value::RawValue;
use sqlx::PgPool;

use crate::activity::Activity;
use crate::delivery::{Answer, Delivery, Route, RouteSettings};
use crate::ids::{AccountId, ConsumerId, MessageId, QueueId};
use crate::queue::answer::{self, Decision};
use crate::queue::consumer::{ConsumerKind, RetryPolicy, MAX_CONCURRENCY};
use crate::queue::lease::Signer;
use crate::queue::message::{ContentType, PulledBody};
use crate::queue::settings::MAX_DELAY_SECONDS;
use crate::store::dispatch::WebhookConsumerRow;
use crate::store::messages::{SlotRequest, StoredMessage};
use crate::store::{self};
use client::{Reply, WebhookClient};

pub use worker::run;

/// How the dispatcher behaves on this node.
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    /// How long a receiver has to answer.
    pub timeout: Duration,
    /// Deliveries in flight at once from this node, over all consumers.
    pub max_in_flight: usize,
    /// How often the list of consumers is read again.
    pub refresh_every: Duration,
    /// At shutdown, how long in-flight deliveries may finish before their batches are released.
    pub shutdown_grace: Duration,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_in_flight: 512,
            refresh_every: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

pub struct Dispatcher {
    pool: PgPool,
    signer: Signer,
    client: WebhookClient,
    settings: DispatchSettings,
    activity: Arc<Activity>,
    delivery: Arc<Delivery>,
    /// Consumers whose dispatch slots exist for their current max_concurrency.
    slots_made: std::sync::Mutex<std::collections::HashSet<(ConsumerId, i32)>>,
}

/// A webhook consumer as the dispatcher works with it.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookConsumer {
    pub id: ConsumerId,
    pub account_id: AccountId,
    pub queue_id: QueueId,
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
}

impl From<WebhookConsumerRow> for WebhookConsumer {
    fn from(row: WebhookConsumerRow) -> Self {
        let retry = store::consumers::retry_policy(row.retry_delay, &row.retry_backoff, row.retry_delay_max);
        Self {
            id: row.id,
            account_id: row.account_id,
            queue_id: row.queue_id,
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
        }
    }
}

/// What one delivery came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// ok, http_error, timeout, connect_error, refused or invalid_answer.
    pub kind: &'static str,
    pub delivered: usize,
    pub acked: usize,
    pub retried: usize,
    /// Why the whole batch was retried, when it was.
    pub failure: Option<String>,
}

/// A claimed batch, with the route it was claimed by, the slot it holds and the secrets its claim read.
pub struct Batch {
    pub messages: Vec<StoredMessage>,
    pub slot: Option<i32>,
    pub secrets: Vec<String>,
    route: Route,
}

impl Dispatcher {
    pub fn new(
        pool: PgPool,
        signer: Signer,
        client: WebhookClient,
        settings: DispatchSettings,
        activity: Arc<Activity>,
        delivery: Arc<Delivery>,
    ) -> Self {
        Self { pool, signer, client, settings, activity, delivery, slots_made: Default::default() }
    }

    /// Every webhook consumer whose queue is not paused.
    pub async fn consumers(&self) -> Result<Vec<WebhookConsumer>, sqlx::Error> {
        Ok(store::dispatch::active_webhook_consumers(&self.pool).await?.into_iter().map(Into::into).collect())
    }

    /// Long enough for a delivery that uses its whole timeout (and the answer's read) to still settle
    /// its own batch; short enough that a batch whose node died comes back soon.
    fn lease(&self) -> Duration {
        self.settings.timeout * 2 + Duration::from_secs(5)
    }

    /// Claims up to a batch for `c`, taking one of its dispatch slots; empty when nothing is ready
    /// or every slot is taken.
    pub async fn claim(&self, c: &WebhookConsumer) -> Result<Batch, sqlx::Error> {
        let settings = RouteSettings {
            kind: ConsumerKind::Webhook,
            dead_letter_queue: &c.dead_letter_queue,
            known_dead_letter_queue: c.dead_letter_queue_id,
            max_retries: c.max_deliveries - 1,
            retention_seconds: c.retention_seconds,
            retry: c.retry,
        };
        let route = self.delivery.route_with(c.account_id, c.queue_id, settings).await?;
        let lease_ms = self.lease().as_millis() as i64;
        let slot = SlotRequest { consumer: c.id, max_concurrency: c.max_concurrency, hold_ms: lease_ms };
        let key = (c.id, c.max_concurrency);
        if !self.slots_made.lock().expect("slots lock").contains(&key) {
            store::dispatch::ensure_slots(&self.pool, c.id, c.max_concurrency).await?;
            self.slots_made.lock().expect("slots lock").insert(key);
        }
        let claim = self.delivery.lease(&route, Some(slot), c.batch_size, lease_ms).await?;
        Ok(Batch { messages: claim.messages, slot: claim.slot, secrets: claim.secrets, route })
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

    /// POSTs the batch, applies the answer and gives the slot back.
    pub async fn deliver(&self, c: &WebhookConsumer, batch: Batch) -> Outcome {
        let (body, ids) = self.payload(c, &batch.messages);
        let webhook_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
        let timestamp = Utc::now().timestamp();
        // The claim's own reading of the secrets: the cached consumer may predate a rotation.
        let secrets = if batch.secrets.is_empty() { &c.secrets } else { &batch.secrets };
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        let headers = [
            ("webhook-id", webhook_id.clone()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signature::header(&secrets, &webhook_id, timestamp, &body)),
        ];
        let metrics = &self.activity.metrics;
        metrics.batches_in_flight.inc();
        let started = std::time::Instant::now();
        let reply = self.client.post(&c.url, &headers, body).await;
        let elapsed = started.elapsed().as_secs_f64();
        metrics.batches_in_flight.dec();
        let outcome = self.settle(c, &batch, &ids, reply).await;
        metrics.deliveries.with_label_values(&[outcome.kind]).inc();
        metrics.delivery_duration.with_label_values(&[outcome.kind]).observe(elapsed);
        if let Some(slot) = batch.slot {
            if let Err(err) = store::dispatch::release_slot(&self.pool, c.id, slot).await {
                tracing::warn!(error = %err, consumer = %c.id, "releasing a dispatch slot failed; it expires by itself");
            }
        }
        outcome
    }

    /// Gives a claimed batch's leases back untouched (shutdown before the receiver answered).
    pub async fn release(&self, c: &WebhookConsumer, leases: &[(MessageId, i32)], slot: Option<i32>) {
        if let Err(err) = store::messages::release(&self.pool, c.queue_id, leases).await {
            tracing::warn!(error = %err, "releasing a batch failed; its lease expires by itself");
        }
        if let Some(slot) = slot {
            let _ = store::dispatch::release_slot(&self.pool, c.id, slot).await;
        }
    }

    fn payload(&self, c: &WebhookConsumer, messages: &[StoredMessage]) -> (Vec<u8>, Vec<String>) {
        let ids: Vec<String> = messages.iter().map(|m| m.id.to_string()).collect();
        let items: Vec<DeliveredMessage<'_>> = messages
            .iter()
            .zip(&ids)
            .map(|(m, id)| {
                let content_type = ContentType::from_code(m.content_type);
                let body = match content_type {
                    // Stored JSON bodies are the JSON text the producer sent: embed it byte for byte.
                    ContentType::Json => {
                        WebhookBody::Json(std::str::from_utf8(&m.body).ok().and_then(|t| serde_json::from_str(t).ok()))
                    }
                    other => WebhookBody::Encoded(PulledBody { content_type: other, bytes: &m.body }),
                };
                DeliveredMessage {
                    id,
                    timestamp_ms: m.published_at.timestamp_millis(),
                    attempts: m.attempts,
                    content_type: content_type.as_str(),
                    body,
                    lease_id: self.signer.lease_id(c.queue_id, m.id, m.attempts),
                }
            })
            .collect();
        let delivery = Payload { queue: &c.queue_name, queue_id: c.queue_id, consumer_id: c.id, messages: items };
        (serde_json::to_vec(&delivery).expect("a delivery serializes"), ids)
    }

    /// Turns the reply into acks and retries and applies them.
    async fn settle(&self, c: &WebhookConsumer, batch: &Batch, ids: &[String], reply: Reply) -> Outcome {
        let messages = &batch.messages;
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let (kind, decisions, failure, floor): (_, HashMap<&str, Decision>, Option<String>, i64) = match reply {
            Reply::Answered { status, truncated: true, .. } if (200..300).contains(&status) => (
                "invalid_answer",
                retry_all(&id_refs),
                Some(format!("HTTP {status} with an answer over {} bytes", client::MAX_ANSWER_BYTES)),
                0,
            ),
            Reply::Answered { status, body, .. } if (200..300).contains(&status) => match answer::parse(&body) {
                Ok(actions) => ("ok", answer::resolve(actions.as_deref().unwrap_or_default(), &id_refs), None, 0),
                Err(why) => ("invalid_answer", retry_all(&id_refs), Some(format!("HTTP {status} with {why}")), 0),
            },
            Reply::Answered { status: 429, retry_after, .. } => {
                let wait = retry_after.map_or(0, |s| s.min(MAX_DELAY_SECONDS as u64) as i64);
                ("http_error", retry_all(&id_refs), Some("HTTP 429".into()), wait)
            }
            Reply::Answered { status, .. } => ("http_error", retry_all(&id_refs), Some(format!("HTTP {status}")), 0),
            Reply::Failed { kind, reason } => (kind, retry_all(&id_refs), Some(reason), 0),
        };
        let answers: Vec<Answer> = messages
            .iter()
            .zip(&id_refs)
            .map(|(m, id)| Answer {
                id: m.id,
                attempt: m.attempts,
                decision: decisions.get(id).copied().unwrap_or(Decision::Ack),
            })
            .collect();
        if let Some(why) = &failure {
            tracing::info!(consumer = %c.id, queue = %c.queue_id, messages = messages.len(), reason = %why, "webhook delivery failed; the batch will be retried");
        }
        let mut outcome = Outcome { kind, delivered: messages.len(), failure, ..Default::default() };
        match self.delivery.settle(c.account_id, c.queue_id, Some(&batch.route), &answers, floor).await {
            Ok(Some(settled)) => {
                outcome.acked = settled.acked.len();
                outcome.retried = settled.retried.len();
            }
            Ok(None) => tracing::info!(queue = %c.queue_id, "the queue was deleted during a delivery"),
            Err(err) => {
                tracing::warn!(error = %err, "applying a webhook answer failed; its leases expire by themselves")
            }
        }
        outcome
    }
}

/// The body of a delivery request.
#[derive(Serialize)]
struct Payload<'a> {
    queue: &'a str,
    queue_id: QueueId,
    consumer_id: ConsumerId,
    messages: Vec<DeliveredMessage<'a>>,
}

#[derive(Serialize)]
struct DeliveredMessage<'a> {
    id: &'a str,
    timestamp_ms: i64,
    attempts: i32,
    content_type: &'static str,
    body: WebhookBody<'a>,
    lease_id: String,
}

/// A body in a webhook delivery: `json` embedded as the JSON text the producer sent (null if it were
/// ever unreadable), `text` as a string, `bytes` as base64.
#[derive(Serialize)]
#[serde(untagged)]
enum WebhookBody<'a> {
    Json(Option<&'a RawValue>),
    Encoded(PulledBody<'a>),
}

fn retry_all<'a>(ids: &[&'a str]) -> HashMap<&'a str, Decision> {
    ids.iter().map(|id| (*id, Decision::Retry(None))).collect()
}
