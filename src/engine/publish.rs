//! A publish as the engine carries it out: held to its account's publish rate, checked against the
//! queue's backlog quota, stored by the group-commit publisher, then counted (activity, backlog).

use std::time::Duration;

use super::limits::{Limits, Rate};
use super::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::AccountId;
use crate::queue::message::NewMessage;
use crate::store::owned::OwnedQueue;
use crate::store::queues::Backlog;

/// The most a publish waits for its share of its account's publish rate before it is refused instead.
const MAX_RATE_WAIT: Duration = Duration::from_secs(1);

/// What a publish did.
pub struct PublishOutcome {
    /// Messages not stored because the queue already held their idempotency key.
    pub duplicates: usize,
    /// The queue's backlog after the publish, when it could be read (best effort: the messages are stored).
    pub backlog: Option<Backlog>,
    /// How long the publish was held back for its account's publish rate.
    pub held_back: Duration,
}

impl Engine {
    /// Stores the messages durably (the answer comes after the commit) or refuses them all.
    pub async fn publish(&self, queue: OwnedQueue, messages: Vec<NewMessage>) -> ApiResult<PublishOutcome> {
        let (stored, held_back) = self.store_in(vec![queue], messages).await?;
        let duplicates = stored.into_iter().next().flatten().ok_or_else(ApiError::queue_not_found)?;
        // The messages are committed; metrics are best effort and must not turn a stored publish into an error.
        let backlog = match self.backlog.get(&self.pool, queue.id()).await {
            Ok(backlog) => Some(backlog),
            Err(err) => {
                tracing::warn!(error = %err, "backlog metrics after publish failed");
                None
            }
        };
        Ok(PublishOutcome { duplicates, backlog, held_back })
    }

    /// Stores each message once in every queue of `targets` (one account's, none twice), in one commit,
    /// or refuses them all: held to the account's publish rate for every copy, and refused when a target's
    /// backlog quota has no room. Answers, per target, its duplicates (None: the queue is gone), and how
    /// long the publish was held back.
    pub(super) async fn store_in(
        &self,
        targets: Vec<OwnedQueue>,
        messages: Vec<NewMessage>,
    ) -> ApiResult<(Vec<Option<usize>>, Duration)> {
        let (count, bytes) = (messages.len(), messages.iter().map(|m| m.body.len()).sum::<usize>());
        let account = targets[0].account();
        self.check_quotas(account, true)?;
        let limits = self.limits_of(account);
        let held_back = self.hold_to_publish_rate(account, &limits, count * targets.len()).await?;
        // The backlog figure is up to about two seconds old, so a queue may overshoot its quota by that much.
        let max = limits.max_backlog_bytes_per_queue;
        for queue in &targets {
            let backlog = self.backlog.get(&self.pool, queue.id()).await?;
            if backlog.bytes + bytes as i64 > max {
                let message = format!(
                    "the queue is full: its backlog holds {} of its {max} bytes; publish again once consumers catch up",
                    backlog.bytes
                );
                return Err(ApiError::new(Kind::QueueFull, message).after(10));
            }
        }
        let stored = self.publisher.publish(targets.clone(), messages).await?;
        let now = chrono::Utc::now();
        for (queue, duplicates) in targets.iter().zip(&stored) {
            let Some(duplicates) = *duplicates else { continue };
            self.activity.published(queue.id(), count - duplicates);
            // Which messages were duplicates is not known here; the cached backlog refreshes by itself.
            if duplicates == 0 {
                self.backlog.added(queue.id(), count, bytes, now);
            }
        }
        Ok((stored, held_back))
    }

    /// Holds a publish back until this node's share of the account's publish rate allows its `count` messages,
    /// answering how long it waited, or refuses it (429, nothing stored) when that would take longer than
    /// `MAX_RATE_WAIT`.
    async fn hold_to_publish_rate(&self, account: AccountId, limits: &Limits, count: usize) -> ApiResult<Duration> {
        let held_back = &self.metrics.publishes_held_back;
        match self.publish_rate.take_many(account, Rate::messages(limits), count as u32, MAX_RATE_WAIT) {
            Ok(wait) if wait.is_zero() => Ok(wait),
            Ok(wait) => {
                held_back.with_label_values(&["delayed"]).inc();
                tokio::time::sleep(wait).await;
                Ok(wait)
            }
            Err(refill) => {
                held_back.with_label_values(&["refused"]).inc();
                let message = format!(
                    "this account is over its publish rate of {} messages per second; \
                     retry after the Retry-After seconds",
                    limits.publish_rate_per_second
                );
                Err(ApiError::new(Kind::RateLimited, message).after(refill.as_secs_f64().ceil() as u64))
            }
        }
    }
}
