//! Changes to consumers and what follows them: making a dead-letter queue that does not exist yet
//! (within the account's quota of queues, in its source queue's jurisdiction), the limits of flow control
//! its queue's keys take, and the notice to every node's dispatcher.

use super::Engine;
use crate::auth::sealing::Purpose;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::ConsumerId;
use crate::queue::consumer::MAX_CONSUMERS_PER_QUEUE;
use crate::queue::settings::{check_dead_letter_jurisdiction, QueueName};
use crate::store::consumers::{ConsumerRow, ConsumerSpec};
use crate::store::owned::OwnedQueue;
use crate::store::{self, StoreError};

/// How long a rotated-out signing secret keeps signing deliveries.
const SECRET_GRACE_SECONDS: i64 = 24 * 3600;

impl Engine {
    /// A consumer of the queue: its first reads the queue itself, each further one a lane of its own
    /// that receives the messages published from then on; a 409 past `MAX_CONSUMERS_PER_QUEUE`. Its
    /// dead-letter queue is made if the account has none of that name.
    pub async fn create_consumer(
        &self,
        queue: OwnedQueue,
        spec: &ConsumerSpec<'_>,
        signing_secret: Option<&str>,
    ) -> ApiResult<ConsumerRow> {
        // Refuse a consumer too many before making its dead-letter queue, so a refused request changes nothing.
        let existing = store::consumers::list(&self.pool, queue.account(), &[queue.id()]).await?;
        if existing.len() >= MAX_CONSUMERS_PER_QUEUE {
            return Err(StoreError::ConsumerExists.into());
        }
        self.ensure_dead_letter_queue(queue, spec.dead_letter_queue).await?;
        let sealed = signing_secret.map(|secret| self.keys.seal_text(Purpose::WebhookSecret, secret));
        let own = existing.iter().any(|c| c.lane_id == queue.id());
        let made = match own {
            false => store::consumers::create(&self.pool, queue, spec, sealed.as_deref()).await,
            true => Err(StoreError::ConsumerExists),
        };
        // Another request made the queue's own consumer meanwhile: this one takes a lane.
        let row = match made {
            Err(StoreError::ConsumerExists) => {
                store::consumers::create_in_lane(&self.pool, queue, spec, sealed.as_deref()).await?
            }
            made => made?,
        };
        self.consumer_limits_changed(queue).await?;
        self.announce_change(queue.id()).await;
        Ok(row)
    }

    /// Replaces the consumer's settings; a 404 when the queue has no such consumer.
    pub async fn update_consumer(
        &self,
        queue: OwnedQueue,
        id: ConsumerId,
        spec: &ConsumerSpec<'_>,
    ) -> ApiResult<ConsumerRow> {
        self.ensure_dead_letter_queue(queue, spec.dead_letter_queue).await?;
        let row = store::consumers::update(&self.pool, queue, id, spec)
            .await?
            .ok_or_else(|| ApiError::not_found("consumer"))?;
        self.consumer_limits_changed(queue).await?;
        self.announce_change(queue.id()).await;
        Ok(row)
    }

    /// Deletes the consumer, and with it what waited for it alone: its lane, or, when it read the queue
    /// itself while others read lanes, the copies waiting there.
    pub async fn delete_consumer(&self, queue: OwnedQueue, id: ConsumerId) -> ApiResult<()> {
        let row = store::consumers::get(&self.pool, queue, id).await?.ok_or_else(|| ApiError::not_found("consumer"))?;
        if row.lane_id != queue.id() {
            store::queues::delete(&self.pool, row.lane()).await?;
        } else {
            if !store::consumers::delete(&self.pool, queue, id).await? {
                return Err(ApiError::not_found("consumer"));
            }
            if !store::queues::lanes(&self.pool, queue).await?.is_empty() {
                store::queues::clear_own(&self.pool, queue).await?;
            }
        }
        self.consumer_limits_changed(queue).await?;
        self.announce_change(queue.id()).await;
        Ok(())
    }

    /// A new signing secret for a webhook consumer; the old one keeps signing for a day.
    pub async fn rotate_secret(&self, queue: OwnedQueue, id: ConsumerId, secret: &str) -> ApiResult<()> {
        let sealed = self.keys.seal_text(Purpose::WebhookSecret, secret);
        if !store::consumers::rotate_secret(&self.pool, queue, id, &sealed, SECRET_GRACE_SECONDS).await? {
            return Err(ApiError::not_found("consumer"));
        }
        Ok(())
    }

    /// Makes the dead-letter queue if the account has none of that name, within its queue quota and in the
    /// source queue's jurisdiction; one that exists already must be in that jurisdiction (Cloudflare's rule).
    async fn ensure_dead_letter_queue(&self, queue: OwnedQueue, name: &str) -> ApiResult<()> {
        if name.is_empty() {
            return Ok(());
        }
        let name = QueueName::parse("dead_letter_queue", name)?;
        let source = store::queues::get(&self.pool, queue).await?.ok_or_else(ApiError::queue_not_found)?;
        let (known, _) =
            store::queues::list(&self.pool, queue.account(), &[name.as_str().to_owned()], Some(1), 0).await?;
        let dead_letter = match known.into_iter().next() {
            Some(existing) => existing,
            None => {
                let max = self.limits_of(queue.account()).max_queues_per_account;
                if store::queues::count(&self.pool, queue.account()).await? >= max {
                    return Err(ApiError::new(
                        Kind::QueueQuota,
                        format!(
                            "making the dead-letter queue '{}' would pass this account's quota of {max} queues",
                            name.as_str()
                        ),
                    ));
                }
                store::queues::ensure(&self.pool, queue, &name).await?.ok_or_else(ApiError::queue_not_found)?
            }
        };
        check_dead_letter_jurisdiction(
            &source.name,
            source.jurisdiction.as_deref(),
            &dead_letter.name,
            dead_letter.jurisdiction.as_deref(),
        )?;
        Ok(())
    }
}
