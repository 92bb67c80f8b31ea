//! Background upkeep every node runs: deleting messages past their queue's retention period. The work
//! is idempotent and claims rows with SKIP LOCKED, so any number of nodes can run it at once.

use std::time::Duration;

use std::sync::Arc;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::activity::Activity;
use crate::store;

const SWEEP_BATCH: i64 = 10_000;

/// Deletes every expired message, in batches; returns how many went.
pub async fn sweep_expired(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    loop {
        let deleted = store::messages::delete_expired(pool, SWEEP_BATCH).await?;
        total += deleted;
        if deleted < SWEEP_BATCH as u64 {
            return Ok(total);
        }
    }
}

pub async fn run(pool: PgPool, activity: Arc<Activity>, every: Duration, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        match sweep_expired(&pool).await {
            Ok(0) => {}
            Ok(n) => {
                activity.expired(n);
                tracing::info!(deleted = n, "deleted messages past their retention period");
            }
            Err(err) => tracing::warn!(error = %err, "retention sweep failed; will retry"),
        }
        if let Err(err) = crate::activity::prune(&pool).await {
            tracing::warn!(error = %err, "pruning queue activity failed; will retry");
        }
    }
}
