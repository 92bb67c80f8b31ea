//! The node's deliveries in flight, shared fairly between accounts. An account may always have its fair
//! share (the node's cap divided among the accounts delivering); beyond it, it may take more only while a
//! reserve stays free for the others, so one account's slow receivers or backlog never hold every place
//! while another account waits, and a lone account can still use most of the node.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::ids::AccountId;

pub struct InFlight {
    max: usize,
    held: Mutex<HashMap<AccountId, usize>>,
    /// A place was given back.
    freed: Notify,
}

/// One delivery's place; dropping it gives the place back.
pub struct Place {
    share: Arc<InFlight>,
    account: AccountId,
}

impl InFlight {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self { max: max.max(1), held: Mutex::default(), freed: Notify::new() })
    }

    /// A place for a delivery of `account`, or None when the node is full for it.
    pub fn take(self: &Arc<Self>, account: AccountId) -> Option<Place> {
        let mut held = self.held.lock().expect("in-flight lock");
        let total: usize = held.values().sum();
        let mine = held.get(&account).copied().unwrap_or(0);
        // Counted as two at least: a lone account's share leaves room for the next one.
        let accounts = (held.len() + usize::from(mine == 0)).max(2);
        let fair = (self.max / accounts).max(1);
        let reserve = self.max / 4;
        let free = self.max.saturating_sub(total);
        let allowed = free > 0 && (mine < fair || free > reserve);
        if !allowed {
            return None;
        }
        *held.entry(account).or_default() += 1;
        Some(Place { share: self.clone(), account })
    }

    /// Resolves when a place is given back.
    pub fn freed(&self) -> &Notify {
        &self.freed
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut held = self.share.held.lock().expect("in-flight lock");
        if let Some(count) = held.get_mut(&self.account) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.account);
            }
        }
        drop(held);
        self.share.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account() -> AccountId {
        AccountId(uuid::Uuid::new_v4())
    }

    #[test]
    fn a_lone_account_uses_all_but_the_reserve_and_another_still_gets_its_share() {
        let share = InFlight::new(8);
        let (busy, quiet) = (account(), account());
        let held: Vec<Place> = std::iter::from_fn(|| share.take(busy)).collect();
        assert_eq!(held.len(), 6, "all but the reserve of 8 / 4");
        let quiet_places: Vec<Place> = std::iter::from_fn(|| share.take(quiet)).collect();
        assert_eq!(quiet_places.len(), 2, "the reserve goes to the account under its fair share");
        drop(held);
        assert!(share.take(quiet).is_some(), "places given back are free again");
    }

    #[test]
    fn an_account_at_its_fair_share_waits_when_only_the_reserve_is_left() {
        let share = InFlight::new(4);
        let (a, b) = (account(), account());
        let _a: Vec<Place> = (0..2).filter_map(|_| share.take(a)).collect();
        let _b: Vec<Place> = (0..2).filter_map(|_| share.take(b)).collect();
        assert!(share.take(a).is_none() && share.take(b).is_none(), "the node is full");
    }
}
