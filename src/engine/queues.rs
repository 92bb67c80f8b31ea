//! Changes to queues and what follows them: the quota on queues per account, the notice to every node's
//! dispatcher after a change, waking the pulls that wait on a queue paused or deleted, and the backlog
//! figures a purge or a delete makes stale.

use std::collections::HashSet;

use super::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, MessageId, QueueId};
use crate::queue::settings::{Jurisdiction, QueueName, QueueSettings};
use crate::store;
use crate::store::owned::OwnedQueue;
use crate::store::queues::QueueRow;

impl Engine {
    /// A new queue of the account, within its quota of queues.
    pub async fn create_queue(
        &self,
        account: AccountId,
        name: &QueueName,
        settings: QueueSettings,
        jurisdiction: Option<Jurisdiction>,
    ) -> ApiResult<QueueRow> {
        let limits = self.limits_of(account);
        settings.check_retention(limits.max_retention_seconds)?;
        let max = limits.max_queues_per_account;
        if store::queues::count(&self.pool, account).await? >= max {
            return Err(ApiError::new(
                Kind::QueueQuota,
                format!("this account has reached its quota of {max} queues; delete one before creating another"),
            ));
        }
        Ok(store::queues::create(&self.pool, account, name, settings, jurisdiction).await?)
    }

    /// Renames the queue or changes its settings (`current` is the queue as the caller read it); pausing it
    /// ends the waits of the pulls on it.
    pub async fn update_queue(
        &self,
        queue: OwnedQueue,
        current: &QueueRow,
        name: &QueueName,
        settings: QueueSettings,
    ) -> ApiResult<QueueRow> {
        // A queue kept longer than a later plan allows stays so until its retention is changed.
        if settings.message_retention_period != i64::from(current.message_retention_period) {
            settings.check_retention(self.limits_of(queue.account()).max_retention_seconds)?;
        }
        let pausing = settings.delivery_paused && !current.delivery_paused;
        let updated =
            store::queues::update(&self.pool, queue, name, settings).await?.ok_or_else(ApiError::queue_not_found)?;
        // Pausing, resuming or renaming changes what the dispatchers deliver.
        self.announce_change(queue.id()).await;
        if pausing {
            self.wake_waiting_pulls(queue.id()).await;
        }
        Ok(updated)
    }

    /// Deletes the queue with its consumer and messages; a 404 when it is gone already.
    pub async fn delete_queue(&self, queue: OwnedQueue) -> ApiResult<()> {
        if !store::queues::delete(&self.pool, queue).await? {
            return Err(ApiError::queue_not_found());
        }
        // The queue is gone once its row's deletion committed; what a failure here leaves, the upkeep finishes.
        if let Err(err) = super::maintenance::clear_deleted_queue(&self.pool, queue.id()).await {
            tracing::warn!(error = %err, queue = ?queue.id(), "deleting a deleted queue's messages failed; the upkeep will");
        }
        self.owners.forget(queue.id());
        self.delivery.floors.forget(queue.id());
        self.backlog.forget(queue.id());
        self.announce_change(queue.id()).await;
        self.wake_waiting_pulls(queue.id()).await;
        Ok(())
    }

    /// Deletes every message of the queue and forgets its idempotency keys.
    pub async fn purge_queue(&self, queue: OwnedQueue) -> ApiResult<QueueRow> {
        let row = store::queues::purge(&self.pool, queue).await?.ok_or_else(ApiError::queue_not_found)?;
        self.backlog.forget(queue.id());
        Ok(row)
    }

    /// Deletes the given messages of the queue (a purge by ref); returns those that were there.
    pub async fn purge_messages(&self, queue: OwnedQueue, ids: &[MessageId]) -> ApiResult<HashSet<MessageId>> {
        let gone = store::messages::delete(&self.pool, queue, ids).await?;
        self.backlog.removed(queue.id(), gone.ids.len(), gone.bytes);
        if gone.keyed {
            // The purged head of an ordering key let the key's next message go; a lost wake-up only delays it.
            if let Err(err) = store::messages::wake(&self.pool, &[queue.id()], true).await {
                tracing::warn!(error = %err, "waking the consumers of a purged ordering key failed");
            }
        }
        Ok(gone.ids.into_iter().collect())
    }

    /// Tells every node's dispatcher that this queue's consumers changed. Best effort: the change is
    /// committed, and a dispatcher that misses the notice finds it at its next periodic read.
    pub(super) async fn announce_change(&self, queue: QueueId) {
        if let Err(err) = store::consumers::announce_change(&self.pool, queue).await {
            tracing::warn!(error = %err, "announcing a consumer change failed; dispatchers find it within a second");
        }
    }

    /// Wakes the pulls waiting on the queue on every node, so that a pause or a delete ends their waits
    /// now. Best effort: the change is made, and a waiting pull still ends by its deadline.
    async fn wake_waiting_pulls(&self, queue: QueueId) {
        if let Err(err) = store::messages::wake(&self.pool, &[queue], false).await {
            tracing::warn!(error = %err, "waking the pulls waiting on a changed queue failed");
        }
    }
}
