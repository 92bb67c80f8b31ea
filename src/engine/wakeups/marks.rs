//! This node's marks of queues as waited on, and what the node knows of a marked queue between pulls.
//! While a mark is in force, every publish, retry, pause, delete or consumer change of the queue on any
//! node reaches this node, so a look that found nothing to lease stays true until one does: a long poll
//! that comes after it may start waiting without looking again. That is trusted for `KNOWN_EMPTY_FOR`
//! at most, which bounds how long a lost wake-up (a node that died between its commit and its
//! notification) can hide a message from the long polls that would otherwise have looked.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::ids::{AccountId, QueueId};

/// How long a look that found a queue empty stands for the long polls after it, at most.
pub const KNOWN_EMPTY_FOR: Duration = Duration::from_secs(60);

/// A look at a queue, for an account, that found its pull consumer in place, the queue not paused, and
/// nothing to lease.
#[derive(Debug, Clone, Copy)]
pub struct KnownEmpty {
    pub account: AccountId,
    /// When the look began, or when it read the queue's consumer if that was earlier: it saw everything
    /// committed before then.
    pub began: Instant,
    /// When the queue's next delayed or leased message becomes visible, if it has one.
    pub next_visible: Option<Instant>,
}

struct Mark {
    /// Until when the mark can be counted on.
    until: Instant,
    /// From when every change of the queue is known to reach this node: once the mark was written, and
    /// the publishes already running then have committed (`FRESH_MARK_LOOK` later).
    heard_from: Instant,
    /// When the last wake-up or change notice of the queue arrived.
    last_heard: Option<Instant>,
    empty: Option<KnownEmpty>,
}

#[derive(Default)]
pub(super) struct Marks {
    marks: HashMap<QueueId, Mark>,
}

impl Marks {
    /// Until when this node's mark of `queue` can be counted on, if one is in force.
    pub(super) fn in_force(&self, queue: QueueId, now: Instant) -> Option<Instant> {
        self.marks.get(&queue).map(|mark| mark.until).filter(|until| *until > now)
    }

    /// A mark written: it lengthens the one in force, or starts one that is heard from `heard_from`
    /// (marks that ran out are forgotten then, with what they knew).
    pub(super) fn written(&mut self, queue: QueueId, until: Instant, heard_from: Instant, now: Instant) {
        match self.marks.get_mut(&queue) {
            Some(mark) if mark.until > now => mark.until = until,
            _ => {
                self.marks.retain(|_, mark| mark.until > now);
                self.marks.insert(queue, Mark { until, heard_from, last_heard: None, empty: None });
            }
        }
    }

    /// The queue was woken, or its queue or consumer changed: what was known of it no longer holds.
    pub(super) fn heard(&mut self, queue: QueueId, now: Instant) {
        if let Some(mark) = self.marks.get_mut(&queue) {
            mark.last_heard = Some(now);
            mark.empty = None;
        }
    }

    /// Notices may have been missed: every mark is forgotten, to be written again (the table of marks
    /// is unlogged, and a database that crashed has lost them).
    pub(super) fn forget_all(&mut self) {
        self.marks.clear();
    }

    /// Keeps a look that found nothing, if the queue was heard throughout: marked since before the look
    /// began, and nothing arrived for it since.
    pub(super) fn found_empty(&mut self, queue: QueueId, look: KnownEmpty, now: Instant) {
        if let Some(mark) = self.marks.get_mut(&queue) {
            let heard_throughout = mark.until > now && mark.heard_from <= look.began;
            if heard_throughout && mark.last_heard.is_none_or(|heard| heard < look.began) {
                mark.empty = Some(look);
            }
        }
    }

    /// The last look that found the queue empty for `account`, if it still holds.
    pub(super) fn known_empty(&self, account: AccountId, queue: QueueId, now: Instant) -> Option<KnownEmpty> {
        let mark = self.marks.get(&queue).filter(|mark| mark.until > now)?;
        mark.empty.filter(|look| {
            look.account == account
                && now.duration_since(look.began) < KNOWN_EMPTY_FOR
                && look.next_visible.is_none_or(|at| at > now)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> QueueId {
        QueueId(uuid::Uuid::from_u128(1))
    }

    fn account(n: u128) -> AccountId {
        AccountId(uuid::Uuid::from_u128(n))
    }

    fn marked(now: Instant) -> Marks {
        let mut marks = Marks::default();
        marks.written(queue(), now + Duration::from_secs(50), now, now);
        marks
    }

    fn look(began: Instant) -> KnownEmpty {
        KnownEmpty { account: account(1), began, next_visible: None }
    }

    #[test]
    fn an_empty_look_holds_for_its_account_until_the_queue_is_heard_of() {
        let now = Instant::now();
        let mut marks = marked(now);
        marks.found_empty(queue(), look(now), now);
        assert!(marks.known_empty(account(1), queue(), now).is_some());
        assert!(marks.known_empty(account(2), queue(), now).is_none(), "another account looks for itself");
        marks.heard(queue(), now + Duration::from_millis(1));
        assert!(marks.known_empty(account(1), queue(), now).is_none());
    }

    #[test]
    fn a_look_is_not_kept_when_the_queue_was_heard_of_while_it_ran_or_before_the_mark_was_heard() {
        let now = Instant::now();
        let mut marks = Marks::default();
        marks.written(queue(), now + Duration::from_secs(50), now + Duration::from_millis(250), now);
        marks.found_empty(queue(), look(now), now);
        assert!(marks.known_empty(account(1), queue(), now).is_none(), "a publish may not have seen the mark");
        let later = now + Duration::from_millis(300);
        marks.heard(queue(), later + Duration::from_millis(1));
        marks.found_empty(queue(), look(later), later + Duration::from_millis(2));
        assert!(marks.known_empty(account(1), queue(), later).is_none(), "woken after the look began");
    }

    #[test]
    fn an_empty_look_runs_out_with_its_age_its_timer_and_its_mark() {
        let now = Instant::now();
        let mut marks = marked(now);
        marks.found_empty(queue(), look(now), now);
        assert!(marks.known_empty(account(1), queue(), now + KNOWN_EMPTY_FOR).is_none());
        let due = now + Duration::from_secs(5);
        marks.found_empty(queue(), KnownEmpty { next_visible: Some(due), ..look(now) }, now);
        assert!(marks.known_empty(account(1), queue(), due).is_none(), "a message becomes visible then");
        marks.found_empty(queue(), look(now), now);
        assert!(marks.in_force(queue(), now + Duration::from_secs(51)).is_none());
        assert!(marks.known_empty(account(1), queue(), now + Duration::from_secs(51)).is_none(), "the mark ran out");
        let mut marks = marked(now);
        marks.found_empty(queue(), look(now), now);
        marks.forget_all();
        assert!(marks.known_empty(account(1), queue(), now).is_none());
    }
}
