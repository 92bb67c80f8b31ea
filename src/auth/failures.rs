//! Failed verifications per token id. A token id whose wrong secrets keep coming is cooled down: its
//! secrets are hashed at most once a second, so a flood of guesses at one id costs a node an argon2 run a
//! second rather than its cores, which good tenants' requests share. A secret already verified on this
//! node never gets here (the verifier's cache answers first), and one not yet seen gets in at the next
//! second's try.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ids::TokenId;

/// Wrong secrets for one token id within `WINDOW` that start a cool-down.
pub const MOST_FAILURES: u32 = 10;
pub const WINDOW: Duration = Duration::from_secs(60);
/// How long a cool-down lasts after the last wrong secret.
pub const COOL_DOWN: Duration = Duration::from_secs(60);
/// While cooling, one secret per token id is still hashed this often.
pub const TRICKLE: Duration = Duration::from_secs(1);
/// Token ids remembered; past it, those neither cooling nor within their window are forgotten.
const CAPACITY: usize = 100_000;

struct Record {
    failures: u32,
    since: Instant,
    cooling_until: Option<Instant>,
    last_try: Instant,
}

#[derive(Default)]
pub struct Failures {
    records: Mutex<HashMap<TokenId, Record>>,
}

impl Failures {
    /// Whether a secret for `id` may be hashed now; a cooling id's try is taken by asking.
    pub fn may_try(&self, id: TokenId) -> bool {
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

    /// A wrong secret for `id` was hashed.
    pub fn failed(&self, id: TokenId) {
        let now = Instant::now();
        let mut records = self.records.lock().expect("failures lock");
        if records.len() >= CAPACITY && !records.contains_key(&id) {
            records.retain(|_, r| r.cooling_until.is_some_and(|u| now < u) || now.duration_since(r.since) < WINDOW);
            if records.len() >= CAPACITY {
                records.clear();
            }
        }
        let record =
            records.entry(id).or_insert(Record { failures: 0, since: now, cooling_until: None, last_try: now });
        let cooling = record.cooling_until.is_some_and(|u| now < u);
        if !cooling && now.duration_since(record.since) >= WINDOW {
            *record = Record { failures: 0, since: now, cooling_until: None, last_try: now };
        }
        record.failures += 1;
        record.last_try = now;
        if record.failures >= MOST_FAILURES {
            record.cooling_until = Some(now + COOL_DOWN);
        }
    }

    /// The right secret for `id` was hashed: its failures are forgotten.
    pub fn succeeded(&self, id: TokenId) {
        self.records.lock().expect("failures lock").remove(&id);
    }
}
