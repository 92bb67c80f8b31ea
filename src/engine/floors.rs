//! Claim floors: where a node's claims start walking a queue's waiting messages, and where its sweep
//! starts walking the leases that run. Beside a snapshot held open elsewhere in the database, every
//! message claimed or acked leaves an index entry behind that no vacuum may remove until the snapshot
//! ends, and a claim that walked from the queue's first entry would cross all of them, ever more slowly
//! (docs/design-notes.md, "Delivery beside a held snapshot"). A floor moves up to the earliest message a
//! claim saw waiting, but never past `writers_since`: no transaction still running can commit a message
//! available before that, so nothing claimable is ever left below a floor.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use crate::ids::QueueId;

/// Floors kept per node: as many queues as this, then the least recently moved are forgotten (a
/// forgotten floor starts again from the beginning, which is always right, only slower).
const CAPACITY: usize = 100_000;

/// Before anything is known: the beginning (no message is available before 1970).
fn beginning() -> DateTime<Utc> {
    DateTime::UNIX_EPOCH
}

pub struct Floors {
    /// `store::horizon::writers_since` as last read; None until read, or while it cannot be.
    writers_since: Mutex<Option<DateTime<Utc>>>,
    queues: Mutex<HashMap<QueueId, DateTime<Utc>>>,
    running: Mutex<DateTime<Utc>>,
}

impl Default for Floors {
    fn default() -> Self {
        Floors { writers_since: Mutex::new(None), queues: Mutex::default(), running: Mutex::new(beginning()) }
    }
}

impl Floors {
    /// Where claims of `queue` start.
    pub fn of(&self, queue: QueueId) -> DateTime<Utc> {
        self.queues.lock().expect("floors lock").get(&queue).copied().unwrap_or_else(beginning)
    }

    /// The bound a floor may move up to, as read before a claim: taken before the claim so that every
    /// transaction the claim's snapshot could not see began after it.
    pub fn bound(&self) -> Option<DateTime<Utc>> {
        *self.writers_since.lock().expect("floors lock")
    }

    pub fn set_bound(&self, writers_since: Option<DateTime<Utc>>) {
        *self.writers_since.lock().expect("floors lock") = writers_since;
    }

    /// After a claim of `queue` that saw `first_live` as its earliest waiting message (None: it saw none),
    /// with `bound` read before it.
    pub fn claimed(&self, queue: QueueId, bound: Option<DateTime<Utc>>, first_live: Option<DateTime<Utc>>) {
        let Some(to) = raise_to(bound, first_live) else { return };
        let mut queues = self.queues.lock().expect("floors lock");
        if queues.len() >= CAPACITY && !queues.contains_key(&queue) {
            queues.clear();
        }
        let floor = queues.entry(queue).or_insert_with(beginning);
        *floor = (*floor).max(to);
    }

    /// Forgets a queue's floor (a queue deleted).
    pub fn forget(&self, queue: QueueId) {
        self.queues.lock().expect("floors lock").remove(&queue);
    }

    /// Where the sweep of leases that ran out starts.
    pub fn running(&self) -> DateTime<Utc> {
        *self.running.lock().expect("floors lock")
    }

    /// After a sweep that saw `first_running` as the earliest lease still running, with `bound` read
    /// before it.
    pub fn swept(&self, bound: Option<DateTime<Utc>>, first_running: Option<DateTime<Utc>>) {
        if let Some(to) = raise_to(bound, first_running) {
            let mut running = self.running.lock().expect("floors lock");
            *running = (*running).max(to);
        }
    }
}

/// How far a floor may rise: to the earliest row seen, and never past the bound.
fn raise_to(bound: Option<DateTime<Utc>>, first_seen: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    let bound = bound?;
    Some(first_seen.map_or(bound, |first| first.min(bound)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(seconds, 0).unwrap()
    }

    #[test]
    fn a_floor_rises_to_the_earliest_waiting_message_but_never_past_the_writers_bound() {
        let floors = Floors::default();
        let queue = QueueId::new();
        assert_eq!(floors.of(queue), beginning());
        floors.claimed(queue, Some(at(100)), Some(at(50)));
        assert_eq!(floors.of(queue), at(50), "up to the earliest message still waiting");
        floors.claimed(queue, Some(at(80)), None);
        assert_eq!(floors.of(queue), at(80), "with nothing waiting, up to the bound");
        floors.claimed(queue, Some(at(90)), Some(at(60)));
        assert_eq!(floors.of(queue), at(80), "a floor never falls");
    }

    #[test]
    fn without_a_bound_no_floor_moves() {
        let floors = Floors::default();
        let queue = QueueId::new();
        floors.claimed(queue, None, Some(at(50)));
        floors.swept(None, Some(at(50)));
        assert_eq!((floors.of(queue), floors.running()), (beginning(), beginning()));
    }
}
