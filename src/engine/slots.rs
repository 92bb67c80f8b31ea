//! Dispatch slots a node holds. A webhook consumer's `max_concurrency` caps its batches in flight across
//! every node: each batch holds one of its consumer's slots, rows of `dispatch_slots` that a node takes
//! for a while (`held_until`, renewed while it keeps them). A node keeps the slots it took and hands them
//! from batch to batch in memory, giving one back only after it has lain idle a while: taking and giving
//! back a slot row for every batch wrote two versions of that row per batch, and beside a snapshot held
//! open elsewhere in the database every read of the slot walked all the versions written since
//! (docs/design-notes.md, "Delivery beside a held snapshot").

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ids::ConsumerId;

/// A slot idle this long is given back, for other nodes.
pub const LINGER: Duration = Duration::from_secs(2);

/// One consumer's slots on this node: those free to take, and how many are in use.
pub struct SlotPool {
    pub consumer: ConsumerId,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Held and free, with when each became free.
    free: Vec<(i32, Instant)>,
    /// Held and in use by a batch (or reserved for one).
    busy: Vec<i32>,
}

impl SlotPool {
    pub fn new(consumer: ConsumerId) -> Self {
        SlotPool { consumer, state: Mutex::default() }
    }

    /// A held slot free to use (numbered under `max`, the consumer's `max_concurrency`), now in use.
    pub fn take_free(&self, max: i32) -> Option<i32> {
        let mut state = self.state.lock().expect("slots lock");
        let at = state.free.iter().rposition(|(slot, _)| *slot < max)?;
        let (slot, _) = state.free.remove(at);
        state.busy.push(slot);
        Some(slot)
    }

    /// A slot just taken from the database, in use.
    pub fn taken(&self, slot: i32) {
        self.state.lock().expect("slots lock").busy.push(slot);
    }

    /// A slot whose batch is over (its receiver answered, or it was given back), free again.
    pub fn put_back(&self, slot: i32) {
        let mut state = self.state.lock().expect("slots lock");
        if let Some(at) = state.busy.iter().position(|s| *s == slot) {
            state.busy.swap_remove(at);
            state.free.push((slot, Instant::now()));
        }
    }

    /// How many slots this node holds.
    pub fn held(&self) -> usize {
        let state = self.state.lock().expect("slots lock");
        state.free.len() + state.busy.len()
    }

    /// Every slot held, for the renewal of their rows.
    pub fn all(&self) -> Vec<i32> {
        let state = self.state.lock().expect("slots lock");
        state.free.iter().map(|(slot, _)| *slot).chain(state.busy.iter().copied()).collect()
    }

    /// Takes out the free slots idle since before `idle_since` or numbered `max` or more (the consumer's
    /// `max_concurrency` went down), for their rows to be given back.
    pub fn idle(&self, idle_since: Instant, max: i32) -> Vec<i32> {
        let mut state = self.state.lock().expect("slots lock");
        let (gone, kept): (Vec<_>, Vec<_>) =
            state.free.drain(..).partition(|(slot, since)| *since < idle_since || *slot >= max);
        state.free = kept;
        gone.into_iter().map(|(slot, _)| slot).collect()
    }

    /// Forgets slots this node no longer holds (their rows' hold ran out and another node took them).
    pub fn lost(&self, slots: &[i32]) {
        let mut state = self.state.lock().expect("slots lock");
        state.free.retain(|(slot, _)| !slots.contains(slot));
        state.busy.retain(|slot| !slots.contains(slot));
    }

    /// Takes out every free slot (the consumer's worker stopped); busy ones come back as their batches end.
    pub fn drain_free(&self) -> Vec<i32> {
        self.state.lock().expect("slots lock").free.drain(..).map(|(slot, _)| slot).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_goes_from_batch_to_batch_and_is_given_back_once_idle() {
        let pool = SlotPool::new(ConsumerId::new());
        assert_eq!(pool.take_free(10), None, "a node holds nothing at first");
        pool.taken(3);
        assert_eq!((pool.held(), pool.take_free(10)), (1, None), "in use, not free");
        pool.put_back(3);
        assert_eq!(pool.take_free(3), None, "not numbered under a max of 3");
        assert_eq!(pool.take_free(10), Some(3), "free again for the next batch");
        pool.put_back(3);
        assert!(pool.idle(Instant::now() - LINGER, 10).is_empty(), "not idle long enough");
        assert_eq!(pool.idle(Instant::now() + Duration::from_millis(1), 10), vec![3]);
        assert_eq!(pool.held(), 0);
    }

    #[test]
    fn slots_over_a_lowered_max_and_lost_slots_leave_the_pool() {
        let pool = SlotPool::new(ConsumerId::new());
        for slot in [0, 1, 2] {
            pool.taken(slot);
            pool.put_back(slot);
        }
        assert_eq!(pool.idle(Instant::now() - LINGER, 2), vec![2], "max_concurrency went down to 2");
        pool.lost(&[0]);
        assert_eq!(pool.all(), vec![1]);
    }
}
