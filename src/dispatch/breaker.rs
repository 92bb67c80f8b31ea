//! The circuit breaker of each webhook consumer this node delivers for. After `OPEN_AFTER` failed attempts
//! in a row the consumer's worker claims nothing but one probe batch at a growing interval
//! (`queue::attempt::probe_after`); the first success closes the circuit and delivery goes on at full pace.
//! A node counts its own attempts at once and takes the other nodes' from the endpoint's health in the
//! database, read with the consumers: a success there newer than this node's last failure closes it here.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::WebhookConsumer;
use crate::ids::ConsumerId;
use crate::queue::attempt::probe_after;

#[derive(Debug, Default, Clone, Copy)]
struct State {
    failures: i32,
    last_failure: Option<DateTime<Utc>>,
    last_success: Option<DateTime<Utc>>,
    /// A probe batch is out until then (its answer, or the end of its lease).
    probing_until: Option<DateTime<Utc>>,
}

/// Whether a consumer's worker may claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Closed,
    /// The circuit is open and a probe is due: the next batch claimed is the probe.
    ProbeDue,
    /// The circuit is open: nothing is claimed for this long.
    Open(Duration),
}

#[derive(Default)]
pub struct Breakers {
    states: Mutex<HashMap<ConsumerId, State>>,
}

impl Breakers {
    /// Takes in what the database says of the consumer's endpoint.
    pub fn seed(&self, c: &WebhookConsumer) {
        let mut states = self.states.lock().expect("breakers lock");
        let state = states.entry(c.id).or_default();
        // Only what happened after this node's own last attempt of the other kind changes its view.
        let (success, failure) = (c.health.last_success_at, c.health.last_failure_at);
        if c.health.failures == 0 && success.is_some() && success > state.last_failure {
            *state = State { last_success: success.max(state.last_success), ..State::default() };
        } else if c.health.failures > state.failures && failure > state.last_failure && failure > state.last_success {
            state.failures = c.health.failures;
            state.last_failure = failure;
        }
    }

    pub fn gate(&self, consumer: ConsumerId) -> Gate {
        let states = self.states.lock().expect("breakers lock");
        let Some(state) = states.get(&consumer) else { return Gate::Closed };
        let Some(after) = probe_after(state.failures) else { return Gate::Closed };
        let now = Utc::now();
        let next = state.last_failure.map_or(now, |at| at + after);
        let until = state.probing_until.map_or(next, |probing| probing.max(next));
        match (until - now).to_std() {
            Ok(wait) if !wait.is_zero() => Gate::Open(wait),
            _ => Gate::ProbeDue,
        }
    }

    /// Whether the consumer's circuit is open (claims wait for probes).
    pub fn is_open(&self, consumer: ConsumerId) -> bool {
        self.gate(consumer) != Gate::Closed
    }

    /// A probe batch went out; another waits for its answer, or for `hold` at most.
    pub fn probing(&self, consumer: ConsumerId, hold: Duration) {
        let mut states = self.states.lock().expect("breakers lock");
        let hold = chrono::Duration::from_std(hold).unwrap_or(chrono::Duration::MAX);
        states.entry(consumer).or_default().probing_until = Some(Utc::now() + hold);
    }

    /// Counts an attempt made at `at`; answers whether it closed an open circuit.
    pub fn record(&self, consumer: ConsumerId, success: bool, at: DateTime<Utc>) -> bool {
        let mut states = self.states.lock().expect("breakers lock");
        let state = states.entry(consumer).or_default();
        let was_open = probe_after(state.failures).is_some();
        if success {
            *state = State { last_success: Some(at).max(state.last_success), ..State::default() };
            return was_open;
        }
        state.failures += 1;
        state.last_failure = Some(state.last_failure.map_or(at, |last| last.max(at)));
        state.probing_until = None;
        false
    }

    /// Forgets consumers no longer delivered for.
    pub fn keep_only(&self, consumers: &[ConsumerId]) {
        self.states.lock().expect("breakers lock").retain(|id, _| consumers.contains(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::attempt::OPEN_AFTER;

    #[test]
    fn the_circuit_opens_after_failures_in_a_row_and_a_success_closes_it() {
        let breakers = Breakers::default();
        let id = ConsumerId::new();
        for _ in 0..OPEN_AFTER - 1 {
            assert!(!breakers.record(id, false, Utc::now()));
        }
        assert_eq!(breakers.gate(id), Gate::Closed);
        breakers.record(id, false, Utc::now());
        assert!(matches!(breakers.gate(id), Gate::Open(wait) if wait <= Duration::from_secs(5)));
        assert!(breakers.record(id, true, Utc::now()), "the success closed an open circuit");
        assert_eq!(breakers.gate(id), Gate::Closed);
    }

    #[test]
    fn the_other_nodes_failures_open_it_and_their_success_closes_it_but_older_news_does_not() {
        use super::super::StoredHealth;
        let breakers = Breakers::default();
        let id = ConsumerId::new();
        let before = Utc::now() - chrono::Duration::seconds(1);
        breakers.record(id, true, Utc::now());
        let stale = StoredHealth { failures: OPEN_AFTER, last_failure_at: Some(before), last_success_at: None };
        breakers.seed(&consumer(id, stale));
        assert_eq!(breakers.gate(id), Gate::Closed, "failures older than this node's success do not open it");
        let failing = StoredHealth { failures: OPEN_AFTER, last_failure_at: Some(Utc::now()), last_success_at: None };
        breakers.seed(&consumer(id, failing));
        assert!(breakers.is_open(id));
        let healthy = StoredHealth { failures: 0, last_failure_at: None, last_success_at: Some(Utc::now()) };
        breakers.seed(&consumer(id, healthy));
        assert_eq!(breakers.gate(id), Gate::Closed);
    }

    fn consumer(id: ConsumerId, health: super::super::StoredHealth) -> WebhookConsumer {
        use crate::store::owned::OwnedQueue;
        WebhookConsumer {
            id,
            queue: OwnedQueue::for_tests(crate::ids::AccountId::new(), crate::ids::QueueId::new()),
            named_queue: crate::ids::QueueId::new(),
            queue_name: "q".into(),
            url: "http://127.0.0.1:1/".into(),
            secrets: vec![],
            dead_letter_queue: String::new(),
            dead_letter_queue_id: None,
            batch_size: 10,
            max_wait: Duration::ZERO,
            max_concurrency: 1,
            max_deliveries: 3,
            retry: crate::store::consumers::retry_policy(0, crate::queue::consumer::Backoff::Constant, None),
            retention_seconds: 60,
            health,
        }
    }

    #[test]
    fn a_probe_is_due_once_its_interval_passed_and_only_one_goes_out() {
        let breakers = Breakers::default();
        let id = ConsumerId::new();
        let long_ago = Utc::now() - chrono::Duration::minutes(10);
        for _ in 0..OPEN_AFTER {
            breakers.record(id, false, long_ago);
        }
        assert_eq!(breakers.gate(id), Gate::ProbeDue);
        breakers.probing(id, Duration::from_secs(60));
        assert!(matches!(breakers.gate(id), Gate::Open(_)), "a second probe waits for the first");
        breakers.record(id, false, Utc::now());
        assert!(matches!(breakers.gate(id), Gate::Open(wait) if wait > Duration::from_secs(5)), "the interval grew");
    }
}
