//! Failed verifications, per token id and per client address. A token id whose wrong secrets keep coming
//! is cooled down: its secrets are hashed at most once a second, so a flood of guesses at one id costs a
//! node an argon2 run a second rather than its cores, which good tenants' requests share. An address
//! that keeps failing, with any tokens (random ids cost a row read each), is cooled down the same way:
//! while it cools, a token from it that this node has not verified is refused unheard, once a second
//! excepted. A secret already verified on this node never gets here (the verifier's cache answers
//! first), and one not yet seen gets in at the next second's try. Refusals to a cooling address are held
//! a second before they are answered (`Holds`).

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ids::TokenId;

/// When failures start a cool-down, and how long it lasts.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Failures within `window` that start a cool-down.
    pub most: u32,
    pub window: Duration,
    /// How long a cool-down lasts after the last failure.
    pub cool_down: Duration,
}

/// Wrong secrets for one token id: ten a minute.
pub const PER_TOKEN: Policy = Policy { most: 10, window: Duration::from_secs(60), cool_down: Duration::from_secs(60) };
/// Failed authentications from one client address: a hundred a minute, room for a team behind one
/// address that mistypes, not for a flood.
pub const PER_ADDRESS: Policy =
    Policy { most: 100, window: Duration::from_secs(60), cool_down: Duration::from_secs(60) };
/// While cooling, one try per key is still heard this often.
pub const TRICKLE: Duration = Duration::from_secs(1);
/// Keys remembered; past it, those neither cooling nor within their window are forgotten.
const CAPACITY: usize = 100_000;
/// How long a refusal to a cooling address waits before it is answered: a flood that sends its next
/// request once answered (the usual kind) slows to one a second per connection, at no cost but a timer.
pub const HOLD: Duration = Duration::from_secs(1);
/// Refusals held at once on a node; past it they are answered at once, so that a flood over many
/// connections cannot turn the holds into memory.
const MOST_HELD: usize = 1_000;

/// The refusals being held.
pub struct Holds(tokio::sync::Semaphore);

impl Default for Holds {
    fn default() -> Self {
        Self(tokio::sync::Semaphore::new(MOST_HELD))
    }
}

impl Holds {
    /// Waits `HOLD`, unless `MOST_HELD` refusals wait already.
    pub async fn hold(&self) {
        if let Ok(_held) = self.0.try_acquire() {
            tokio::time::sleep(HOLD).await;
        }
    }
}

struct Record {
    failures: u32,
    since: Instant,
    cooling_until: Option<Instant>,
    last_try: Instant,
}

/// Failures per key (a token id, a client address) under a policy.
pub struct Failures<K> {
    policy: Policy,
    records: Mutex<HashMap<K, Record>>,
}

/// Per token id.
pub type TokenFailures = Failures<TokenId>;
/// Per client address.
pub type AddressFailures = Failures<IpAddr>;

impl Default for TokenFailures {
    fn default() -> Self {
        Self::new(PER_TOKEN)
    }
}

impl Default for AddressFailures {
    fn default() -> Self {
        Self::new(PER_ADDRESS)
    }
}

impl<K: Eq + Hash + Copy> Failures<K> {
    pub fn new(policy: Policy) -> Self {
        Self { policy, records: Mutex::default() }
    }

    /// Whether `id` cools down now (without taking its trickle's try).
    pub fn cooling(&self, id: K) -> bool {
        let records = self.records.lock().expect("failures lock");
        records.get(&id).and_then(|r| r.cooling_until).is_some_and(|until| Instant::now() < until)
    }

    /// Whether a try for `id` may be heard now; a cooling id's try is taken by asking.
    pub fn may_try(&self, id: K) -> bool {
        let now = Instant::now();
        let mut records = self.records.lock().expect("failures lock");
        let Some(record) = records.get_mut(&id) else { return true };
        match record.cooling_until {
            Some(until) if now < until => {
                let due = now.duration_since(record.last_try) >= TRICKLE;
                if due {
                    record.last_try = now;
                }
                due
            }
            _ => true,
        }
    }

    /// A try for `id` failed.
    pub fn failed(&self, id: K) {
        let Policy { most, window, cool_down } = self.policy;
        let now = Instant::now();
        let mut records = self.records.lock().expect("failures lock");
        if records.len() >= CAPACITY && !records.contains_key(&id) {
            records.retain(|_, r| r.cooling_until.is_some_and(|u| now < u) || now.duration_since(r.since) < window);
            if records.len() >= CAPACITY {
                records.clear();
            }
        }
        let record =
            records.entry(id).or_insert(Record { failures: 0, since: now, cooling_until: None, last_try: now });
        let cooling = record.cooling_until.is_some_and(|u| now < u);
        if !cooling && now.duration_since(record.since) >= window {
            *record = Record { failures: 0, since: now, cooling_until: None, last_try: now };
        }
        record.failures += 1;
        record.last_try = now;
        if record.failures >= most {
            record.cooling_until = Some(now + cool_down);
        }
    }

    /// A try for `id` succeeded: its failures are forgotten.
    pub fn succeeded(&self, id: K) {
        self.records.lock().expect("failures lock").remove(&id);
    }
}
