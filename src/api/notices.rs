//! Notices to the other nodes after a change is committed: consumer changes for the dispatchers.

use crate::engine::Engine;
use crate::ids::QueueId;
use crate::store;

/// Tells every node's dispatcher that this queue's consumers changed. Best effort: the change is
/// committed, and a dispatcher that misses the notice finds it at its next periodic read.
pub async fn announce_change(state: &Engine, queue: QueueId) {
    if let Err(err) = store::consumers::announce_change(&state.pool, queue).await {
        tracing::warn!(error = %err, "announcing a consumer change failed; dispatchers find it within a second");
    }
}
