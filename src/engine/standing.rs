//! Which accounts are suspended, as this node knows it: read from the database every second by each
//! node (and at once by the node that made the change), so a suspension reaches every node within about
//! a second. Requests of a suspended account are refused, its long polls end and the dispatcher stops
//! its webhook consumers (the consumers' list is read again whenever the set changes).

use std::collections::HashSet;
use std::sync::RwLock;
use std::time::Duration;

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use super::Engine;
use crate::ids::AccountId;
use crate::store;

/// How often each node reads the suspended accounts.
pub const STANDING_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct Standing {
    suspended: RwLock<HashSet<AccountId>>,
    changed: Notify,
}

impl Standing {
    pub fn is_suspended(&self, account: AccountId) -> bool {
        // Most deployments suspend nobody: an empty set is one read of its length.
        let suspended = self.suspended.read().expect("standing lock");
        !suspended.is_empty() && suspended.contains(&account)
    }

    /// Fires when the set of suspended accounts changes. Enable it before checking `is_suspended`.
    pub fn changed(&self) -> Notified<'_> {
        self.changed.notified()
    }

    /// Takes `now` as the suspended accounts; true when that changed anything.
    fn replace(&self, now: HashSet<AccountId>) -> bool {
        let mut suspended = self.suspended.write().expect("standing lock");
        if *suspended == now {
            return false;
        }
        *suspended = now;
        drop(suspended);
        self.changed.notify_waiters();
        true
    }
}

impl Engine {
    /// Reads the suspended accounts; when the set changed, wakes the long polls to check theirs and has
    /// the dispatcher read its consumers again.
    pub async fn refresh_standing(&self) -> Result<(), sqlx::Error> {
        let suspended = store::accounts::suspended(&self.pool).await?;
        if self.standing.replace(suspended.into_iter().collect()) {
            self.wakeups.consumers_changed().notify_one();
        }
        Ok(())
    }
}
