//! Flow control per key, as an account manages it: the state of its queue's keys, and its own limits for
//! one key (parallelism, rate, a pause) over the consumer's. The triggers on `messages` hold messages back
//! and let them go (`store::flow`); a change of limits lets go at once what the new ones allow, and wakes
//! whoever waits on the queue, on any node, for those messages.

use super::Engine;
use crate::error::ApiResult;
use crate::queue::flow::FlowLimits;
use crate::store;
use crate::store::flow::FlowKey;
use crate::store::owned::OwnedQueue;

/// Keys looked at per turn of the sweep that lets go what rates allow in time.
const RELEASE_BATCH: i64 = 1_000;

impl Engine {
    /// A page of the queue's keys with messages or limits of their own, those holding the most back first.
    pub async fn flow_keys(
        &self,
        queue: OwnedQueue,
        waiting_only: bool,
        limit: i64,
        offset: i64,
    ) -> ApiResult<(Vec<FlowKey>, i64)> {
        Ok(store::flow::keys(&self.pool, queue, waiting_only, limit, offset).await?)
    }

    /// One key of the queue; None when the account has no such queue.
    pub async fn flow_key(&self, queue: OwnedQueue, key: &str) -> ApiResult<Option<FlowKey>> {
        Ok(store::flow::key(&self.pool, queue, key).await?)
    }

    /// Sets the account's limits for a key (`paused: None` keeps its pause); false when there is no such queue.
    pub async fn set_flow_limits(
        &self,
        queue: OwnedQueue,
        key: &str,
        limits: FlowLimits,
        paused: Option<bool>,
    ) -> ApiResult<bool> {
        let set = store::flow::set_limits(&self.pool, queue, key, limits, paused).await?;
        self.flow_changed(queue, set).await
    }

    /// Pauses or resumes a key; false when there is no such queue.
    pub async fn pause_flow_key(&self, queue: OwnedQueue, key: &str, paused: bool) -> ApiResult<bool> {
        let set = store::flow::set_paused(&self.pool, queue, key, paused).await?;
        self.flow_changed(queue, set).await
    }

    /// Removes the account's limits for a key; false when it had none.
    pub async fn clear_flow_limits(&self, queue: OwnedQueue, key: &str) -> ApiResult<bool> {
        let cleared = store::flow::clear_limits(&self.pool, queue, key).await?;
        self.flow_changed(queue, cleared).await
    }

    /// After the queue's consumer changed: its keys took the limits that apply now in the change's own
    /// transaction (a trigger on `consumers`), and what those let go is woken for.
    pub(super) async fn consumer_limits_changed(&self, queue: OwnedQueue) -> ApiResult<()> {
        self.flow_changed(queue, true).await?;
        Ok(())
    }

    /// Lets go what the keys holding messages back now allow (`store::flow::release_due`), and wakes whoever
    /// waits on their queues.
    pub(super) async fn release_due_flows(&self) -> Result<(), sqlx::Error> {
        let queues = store::flow::release_due(&self.pool, RELEASE_BATCH).await?;
        if !queues.is_empty() {
            store::messages::wake(&self.pool, &queues, true).await?;
        }
        Ok(())
    }

    /// Wakes the queue's waiting pulls and dispatchers on every node for the messages a change let go.
    async fn flow_changed(&self, queue: OwnedQueue, changed: bool) -> ApiResult<bool> {
        if changed {
            store::messages::wake(&self.pool, &[queue.id()], true).await?;
        }
        Ok(changed)
    }
}
