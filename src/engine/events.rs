//! Event subscriptions and the events' way to them. A tenant's changes to subscriptions are checked here
//! (`queue::event` has the rules); an event is recorded in the transaction of what caused it
//! (`store::events`), and every node publishes the recorded events into their destination queues, taking
//! and deleting them in the transaction that stores them as messages: none is lost, and none published
//! twice, whichever node dies when.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;

use super::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, ConsumerId, QueueId, SubscriptionId};
use crate::queue::attempt;
use crate::queue::event::{self, EventType, Occurred};
use crate::queue::message::{ContentType, NewMessage};
use crate::store;
use crate::store::attempts::{HealthChange, HealthWritten};
use crate::store::events::{NewEvent, Subscription, SubscriptionFields};
use crate::store::owned::OwnedQueue;
use crate::store::publish::Publish;

/// Subscriptions an account may have.
pub const MAX_SUBSCRIPTIONS_PER_ACCOUNT: i64 = 100;
/// How often a node looks for recorded events: an event reaches its queue within about this.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(1);
/// How often the backlogs of subscriptions with a threshold, and consumers failing for their
/// `disable_after_hours`, are looked at.
pub const BACKLOG_EVERY: Duration = Duration::from_secs(5);
/// Events published per transaction.
const PUBLISH_BATCH: i64 = 500;

/// How a list of subscriptions is ordered (Cloudflare's `order`); ties go by id, so pages never overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    CreatedAt,
    Name,
    Enabled,
    Source,
}

/// A subscription's source: one queue of the account, or all of them.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    Queue(OwnedQueue),
    EveryQueue,
}

/// A new subscription, its queues resolved in the account.
pub struct NewSubscription {
    pub name: String,
    pub enabled: bool,
    pub source: Source,
    pub backlog_threshold: Option<i64>,
    pub events: Vec<String>,
    pub destination: OwnedQueue,
}

/// A change to a subscription: None keeps what is there.
#[derive(Default)]
pub struct SubscriptionChange {
    pub name: Option<String>,
    pub enabled: Option<bool>,
    pub events: Option<Vec<String>>,
    pub destination: Option<OwnedQueue>,
}

impl Engine {
    /// The account's queue named `name`, if it has one.
    pub async fn queue_named(&self, account: AccountId, name: &str) -> Result<Option<OwnedQueue>, sqlx::Error> {
        store::queues::named(&self.pool, account, name).await
    }

    pub async fn create_subscription(&self, account: AccountId, new: NewSubscription) -> ApiResult<Subscription> {
        let name = event::check_name(&new.name)?;
        let (source_type, queue) = match new.source {
            Source::Queue(queue) => (event::ONE_QUEUE, Some(queue)),
            Source::EveryQueue => (event::EVERY_QUEUE, None),
        };
        event::check_events(&new.events, source_type, new.backlog_threshold)?;
        check_no_loop(queue, new.destination)?;
        if store::events::count(&self.pool, account).await? >= MAX_SUBSCRIPTIONS_PER_ACCOUNT {
            return Err(ApiError::new(
                Kind::QueueQuota,
                format!(
                    "this account has reached its quota of {MAX_SUBSCRIPTIONS_PER_ACCOUNT} event subscriptions; \
                     delete one before creating another"
                ),
            ));
        }
        let fields = SubscriptionFields {
            name: &name,
            enabled: new.enabled,
            events: &new.events,
            destination: new.destination.id(),
        };
        Ok(store::events::create(&self.pool, account, source_type, queue, new.backlog_threshold, &fields).await?)
    }

    pub async fn subscription(&self, account: AccountId, id: SubscriptionId) -> ApiResult<Option<Subscription>> {
        Ok(store::events::get(&self.pool, account, id).await?)
    }

    /// A page of the account's subscriptions in `order`, and how many it has. An account has few, so they
    /// are read whole and ordered here.
    pub async fn subscriptions(
        &self,
        account: AccountId,
        order: Order,
        descending: bool,
        limit: i64,
        offset: i64,
    ) -> ApiResult<(Vec<Subscription>, i64)> {
        let mut all = store::events::all(&self.pool, account).await?;
        all.sort_by(|a, b| {
            let by = match order {
                Order::CreatedAt => a.created_at.cmp(&b.created_at),
                Order::Name => a.name.cmp(&b.name),
                Order::Enabled => a.enabled.cmp(&b.enabled),
                Order::Source => (&a.source_type, &a.queue_name).cmp(&(&b.source_type, &b.queue_name)),
            };
            let by = if descending { by.reverse() } else { by };
            by.then_with(|| a.id.0.cmp(&b.id.0))
        });
        let total = all.len() as i64;
        let page = all.into_iter().skip(offset.max(0) as usize).take(limit.max(0) as usize).collect();
        Ok((page, total))
    }

    /// Changes the account's subscription, answering it before and after; None when it has no such
    /// subscription.
    pub async fn update_subscription(
        &self,
        account: AccountId,
        id: SubscriptionId,
        change: SubscriptionChange,
    ) -> ApiResult<Option<(Subscription, Subscription)>> {
        let Some(s) = store::events::get(&self.pool, account, id).await? else { return Ok(None) };
        let name = match &change.name {
            Some(name) => event::check_name(name)?,
            None => s.name.clone(),
        };
        let events = change.events.unwrap_or_else(|| s.events.clone());
        // The threshold is part of the source, set once: a change may drop the backlog event (and its
        // threshold with it), not add it.
        let backlog = events.iter().any(|e| e == EventType::BacklogOverThreshold.as_str());
        if backlog && s.backlog_threshold.is_none() {
            return Err(ApiError::invalid(
                "backlog.over_threshold needs source.backlog_threshold, which only a new subscription sets: \
                 create one with it",
            ));
        }
        let threshold = s.backlog_threshold.filter(|_| backlog);
        event::check_events(&events, &s.source_type, threshold)?;
        let destination = change.destination.unwrap_or(s.destination);
        check_no_loop(s.queue, destination)?;
        let enabled = change.enabled.unwrap_or(s.enabled);
        let fields = SubscriptionFields { name: &name, enabled, events: &events, destination: destination.id() };
        let after = store::events::update(&self.pool, account, id, &fields, threshold).await?;
        Ok(after.map(|after| (s, after)))
    }

    /// Deletes the account's subscription, answering it as it was; None when it has no such subscription.
    pub async fn delete_subscription(&self, account: AccountId, id: SubscriptionId) -> ApiResult<Option<Subscription>> {
        Ok(store::events::delete(&self.pool, account, id).await?)
    }

    /// Publishes the events recorded so far into their destination queues, a batch per transaction.
    pub async fn publish_events(&self) -> Result<(), sqlx::Error> {
        // An idle node looks with one statement, not a transaction's three.
        if !store::events::any_pending(&self.pool).await? {
            return Ok(());
        }
        loop {
            let mut tx = self.pool.begin().await?;
            let taken = store::events::take(&mut tx, PUBLISH_BATCH).await?;
            if taken.is_empty() {
                return Ok(());
            }
            let mut by_queue: HashMap<QueueId, (OwnedQueue, Vec<NewMessage>)> = HashMap::new();
            for e in &taken {
                let (account, subscription) = (e.destination.account().to_string(), e.subscription_id.to_string());
                let queue_id = e.queue.as_ref().map(|(id, _)| id.to_string());
                let queue = e.queue.as_ref().zip(queue_id.as_deref()).map(|((_, name), id)| (id, name.as_str()));
                let occurred = Occurred {
                    event: &e.event,
                    account: &account,
                    subscription: &subscription,
                    queue,
                    at: e.occurred_at,
                };
                let body = event::envelope(&occurred, e.payload.clone());
                let (_, messages) = by_queue.entry(e.destination.id()).or_insert_with(|| (e.destination, Vec::new()));
                messages.push(NewMessage {
                    content_type: ContentType::Json,
                    body: Bytes::from(body.to_string()),
                    delay_seconds: None,
                    idempotency_key: None,
                    ordering_key: None,
                    flow_key: None,
                });
            }
            let publishes: Vec<Publish<'_>> =
                by_queue.values().map(|(queue, messages)| Publish { queue: *queue, messages }).collect();
            // Events are few: their statement reads lanes at once rather than keep a hint of its own.
            let published = store::publish::publish(&mut tx, &publishes, &[], store::publish::Lanes::Read).await?;
            tx.commit().await?;
            // Events of a destination deleted meanwhile are dropped with it.
            for s in &published.stored {
                let stored = by_queue.get(&s.queue).map_or(0, |(_, m)| m.len());
                self.activity.published(s.queue, stored);
                self.metrics.events_published.inc_by(stored as u64);
            }
            // The events are stored; a lost wake-up only waits for the consumers' own periodic look.
            let woken: Vec<QueueId> =
                published.stored.iter().filter(|s| s.pushed || s.waited).map(|s| s.queue).collect();
            if !woken.is_empty() {
                if let Err(err) = store::messages::wake(&self.pool, &woken, true).await {
                    tracing::warn!(error = %err, "waking the consumers of published events failed");
                }
            }
            if (taken.len() as i64) < PUBLISH_BATCH {
                return Ok(());
            }
        }
    }

    /// Fires `backlog.over_threshold` for subscriptions whose queue's backlog rose over their threshold.
    pub async fn check_backlog_thresholds(&self) -> Result<(), sqlx::Error> {
        store::events::check_backlogs(&self.pool).await.map(|_| ())
    }

    /// Disables the webhook consumers failing for their `disable_after_hours` (`consumer.disabled`), and
    /// tells every node's dispatcher to let them go now.
    pub async fn disable_failing_consumers(&self) -> Result<(), sqlx::Error> {
        for queue in store::events::disable_failing(&self.pool).await? {
            tracing::info!(queue = %queue, "a webhook consumer failing for its disable_after_hours was disabled");
            self.announce_change(queue).await;
        }
        Ok(())
    }

    /// A webhook consumer's endpoint answered again after failing (a probe or a test send): the database
    /// says it is healthy at once, with `consumer.recovered` when its circuit was open, and every node's
    /// dispatcher is told so that it resumes now.
    pub async fn endpoint_recovered(&self, queue: OwnedQueue, consumer: ConsumerId) -> Result<(), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        if let Some(before) = store::attempts::mark_healthy(&mut tx, queue, consumer).await? {
            let events: Vec<NewEvent> = attempt::circuit_events(before, 0, true)
                .into_iter()
                .map(|e| NewEvent {
                    account: queue.account(),
                    queue: queue.id(),
                    event: e.as_str(),
                    payload: json!({"consumerId": consumer.to_string()}),
                })
                .collect();
            store::events::record(&mut *tx, &events).await?;
        }
        tx.commit().await?;
        store::consumers::announce_change(&self.pool, queue.id()).await
    }
}

/// A subscription must not publish a queue's events into that same queue: each event could cause another.
fn check_no_loop(source: Option<OwnedQueue>, destination: OwnedQueue) -> ApiResult<()> {
    if source.is_some_and(|s| s.id() == destination.id()) {
        return Err(ApiError::invalid(
            "destination.queue_id is the source queue itself: events about a queue go to another queue",
        ));
    }
    Ok(())
}

/// The events of the circuits a write of attempts opened or closed (`written`, with the `health` changes
/// it wrote).
pub fn circuit_events(health: &[HealthChange], written: &[HealthWritten]) -> Vec<NewEvent> {
    let mut events = Vec::new();
    for w in written {
        let Some(h) = health.iter().find(|h| h.consumer == w.consumer_id) else { continue };
        for e in attempt::circuit_events(w.before, w.after, h.last_success_at.is_some()) {
            let mut payload = json!({"consumerId": w.consumer_id.to_string()});
            if e == EventType::ConsumerFailing {
                payload["consecutiveFailures"] = json!(w.after);
                payload["failingSince"] = json!(w.failing_since.map(event::timestamp));
                payload["lastFailure"] = json!(h.last_failure.as_ref().map(|f| json!({
                    "outcome": f.outcome, "status": f.status, "error": f.error, "at": event::timestamp(f.attempted_at),
                })));
            }
            events.push(NewEvent { account: h.account, queue: h.queue, event: e.as_str(), payload });
        }
    }
    events
}
