//! Which accounts are refused, suspended or being deleted, as this node knows it: read from the database
//! every second by each node (and at once by the node that made the change), so a suspension or a
//! deletion reaches every node within about a second. Requests of such an account are refused, its long
//! polls end and the dispatcher stops its webhook consumers (the consumers' list is read again whenever
//! the set changes).

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use super::Engine;
use crate::ids::AccountId;
use crate::queue::account::AccountStatus;
use crate::store;

/// How often each node reads the refused accounts.
pub const STANDING_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct Standing {
    refused: RwLock<HashMap<AccountId, AccountStatus>>,
    changed: Notify,
}

impl Standing {
    /// Why the account's requests are refused (suspended or being deleted), or None when they are not.
    pub fn refusal(&self, account: AccountId) -> Option<AccountStatus> {
        // Most deployments refuse nobody: an empty map is one read of its length.
        let refused = self.refused.read().expect("standing lock");
        if refused.is_empty() {
            return None;
        }
        refused.get(&account).copied()
    }

    /// Fires when the set of refused accounts changes. Enable it before checking `refusal`.
    pub fn changed(&self) -> Notified<'_> {
        self.changed.notified()
    }

    /// Takes `now` as the refused accounts; true when that changed anything.
    fn replace(&self, now: HashMap<AccountId, AccountStatus>) -> bool {
        let mut refused = self.refused.write().expect("standing lock");
        if *refused == now {
            return false;
        }
        *refused = now;
        drop(refused);
        self.changed.notify_waiters();
        true
    }
}

impl Engine {
    /// Reads the refused accounts; when the set changed, wakes the long polls to check theirs and has
    /// the dispatcher read its consumers again.
    pub async fn refresh_standing(&self) -> Result<(), sqlx::Error> {
        let refused = store::accounts::refused(&self.pool).await?;
        if self.standing.replace(refused.into_iter().collect()) {
            self.wakeups.consumers_changed().notify_one();
        }
        Ok(())
    }
}
