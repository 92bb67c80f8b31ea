//! Deleting an account. The operator's request removes its tokens and refuses its requests at once (on
//! every node within about a second, as a suspension is); a background task on any node then deletes its
//! queues one by one, each queue's messages in short batches first, so that no statement holds a lock
//! for long and the other accounts are not paused. The node working on a deletion holds it for a while
//! and renews the hold after every batch; when that node stops, another takes the deletion over once the
//! hold runs out, and goes on where it was, since every step removes what is left.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::AccountId;
use crate::store::{self, deletion::DeletionRow};

/// How often each node looks for a deletion to work on.
pub const DELETION_EVERY: Duration = Duration::from_secs(1);
/// How long a node holds a deletion without renewing it before another may take it over.
const HOLD_SECONDS: f64 = 15.0;
/// Messages deleted per statement.
const BATCH: i64 = 1_000;
/// A deletion is done no sooner than this after it started: by then no node trusts a token of the account
/// it verified before (`auth::verifier::CACHE_TTL`), so that nothing of it can be made again once it is
/// marked deleted and no longer refused by name.
const SETTLED_SECONDS: f64 = 2.0 * crate::auth::verifier::CACHE_TTL.as_secs_f64();
/// A pause between batches, so that a deletion leaves the database to the other accounts' work.
const BETWEEN_BATCHES: Duration = Duration::from_millis(5);

impl Engine {
    /// Starts deleting the account, or answers how far its deletion went if it was started before.
    pub async fn delete_account(&self, account: AccountId) -> ApiResult<DeletionRow> {
        if !store::deletion::start(&self.pool, account).await? {
            return Err(ApiError::not_found("account"));
        }
        // Tokens verified a moment ago may still be cached; the refused accounts' set turns them away.
        self.refresh_standing().await?;
        self.deletion(account).await
    }

    /// How far the account's deletion went.
    pub async fn deletion(&self, account: AccountId) -> ApiResult<DeletionRow> {
        store::deletion::progress(&self.pool, account).await?.ok_or_else(|| ApiError::not_found("account"))
    }

    /// Works through the deletions no other node holds, one account after another, until none is left
    /// or the node stops.
    pub async fn delete_accounts(&self, stop: &CancellationToken) -> Result<(), sqlx::Error> {
        while let Some(account) = store::deletion::claim(&self.pool, self.node, HOLD_SECONDS).await? {
            if !self.delete_held_account(account, stop).await? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Deletes what is left of a held account's data; false when the node is stopping first.
    async fn delete_held_account(&self, account: AccountId, stop: &CancellationToken) -> Result<bool, sqlx::Error> {
        while let Some(queue) = store::deletion::next_queue(&self.pool, account).await? {
            let Some(queue) = self.owned_queue(account, queue).await? else { continue };
            loop {
                if stop.is_cancelled() {
                    return Ok(false);
                }
                let gone = store::messages::delete_some(&self.pool, queue, BATCH).await?;
                let last = gone < BATCH as u64;
                let mut queues_gone = 0;
                if last {
                    store::activity::forget(&self.pool, queue).await?;
                    match self.delete_queue(queue).await {
                        Ok(()) => queues_gone = 1,
                        // Gone meanwhile (by another node's turn) is as good as deleted, and not ours to count.
                        Err(err) if err.kind == crate::error::Kind::QueueNotFound => {}
                        Err(err) => {
                            tracing::warn!(error = %err, %account, "deleting an account's queue failed; retrying");
                            return Ok(true);
                        }
                    }
                }
                let counts = (queues_gone, gone as i64);
                if !store::deletion::went(&self.pool, account, self.node, counts, HOLD_SECONDS).await? {
                    return Ok(true);
                }
                if last {
                    break;
                }
                tokio::time::sleep(BETWEEN_BATCHES).await;
            }
        }
        if store::deletion::finish(&self.pool, account, SETTLED_SECONDS).await? {
            tracing::info!(%account, "account deleted");
        }
        Ok(true)
    }
}
