//! The rate limits that protect the service and its tenants from each other: a token bucket per account
//! for its requests and one for its published messages, on each node, filled at the node's share of the
//! account's rate (`shares`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ids::AccountId;
pub use crate::queue::plan::Limits;

/// How fast an account's bucket fills and how much it holds, across the nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    per_second: f64,
    burst: f64,
}

impl Rate {
    /// Requests of `limits.rate_per_second`, up to `limits.rate_burst` at once.
    pub fn requests(limits: &Limits) -> Self {
        Self { per_second: limits.rate_per_second.into(), burst: limits.rate_burst.max(1).into() }
    }

    /// Published messages of `limits.publish_rate_per_second`, a second's worth at once.
    pub fn messages(limits: &Limits) -> Self {
        Self { per_second: limits.publish_rate_per_second.into(), burst: limits.publish_rate_per_second.max(1).into() }
    }

    pub fn is_unlimited(&self) -> bool {
        self.per_second == 0.0
    }
}

/// Token buckets, one per account that made a request recently, each filled at this node's share of the
/// account's rate. Each bucket also counts what it was asked for, which is what the nodes weigh their
/// shares by (`engine::shares`).
#[derive(Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<AccountId, Bucket>>,
    /// At least this many tokens at once, whatever the share (a whole batch of messages, so that every
    /// batch can pass).
    least_burst: f64,
}

struct Bucket {
    tokens: f64,
    at: Instant,
    /// Tokens asked for since the last exchange, taken or not.
    asked: u64,
    /// The account's whole rate, as last asked at.
    rate: Rate,
    /// This node's share of the account's rate.
    share: f64,
}

const MAX_BUCKETS: usize = 100_000;
/// The part of its rate an account must ask of a node for the node to count it in the shares.
pub const REPORTED_FROM: f64 = 0.05;

impl RateLimiter {
    /// Buckets of published messages: every batch can pass however low the rate.
    pub fn for_messages() -> Self {
        Self { least_burst: crate::queue::message::MAX_BATCH_MESSAGES as f64, ..Self::default() }
    }

    /// Takes one request's token, or says how long until one is available.
    pub fn take(&self, account: AccountId, rate: Rate) -> Result<(), Duration> {
        self.take_many(account, rate, 1, Duration::ZERO).map(|_| ())
    }

    /// Takes `n` tokens at this node's share of `rate` (the account's rate as it is now: a plan change
    /// takes effect at the next take). A shortfall the bucket refills within `max_wait` is taken on
    /// credit, and the answer is how long the caller waits before going on; a longer one takes nothing and
    /// says how long until it would be refilled.
    pub fn take_many(&self, account: AccountId, rate: Rate, n: u32, max_wait: Duration) -> Result<Duration, Duration> {
        if rate.is_unlimited() {
            return Ok(Duration::ZERO);
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock().expect("rate limiter lock");
        if buckets.len() >= MAX_BUCKETS {
            // Buckets that were not asked for lately and have filled up carry no state worth keeping.
            buckets.retain(|_, b| b.asked > 0 || now.saturating_duration_since(b.at) < Duration::from_secs(60));
        }
        let bucket = buckets.entry(account).or_insert(Bucket { tokens: f64::MAX, at: now, asked: 0, rate, share: 1.0 });
        bucket.asked += u64::from(n);
        bucket.rate = rate;
        let per_second = rate.per_second * bucket.share;
        let burst = (rate.burst * bucket.share).max(self.least_burst).max(1.0);
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * per_second).min(burst);
        bucket.at = now;
        let shortfall = f64::from(n) - bucket.tokens;
        let wait = Duration::from_secs_f64(shortfall.max(0.0) / per_second);
        if wait > max_wait {
            return Err(wait);
        }
        bucket.tokens -= f64::from(n);
        Ok(wait)
    }

    /// What each account asked of this node per second over the last `elapsed`, counting from now
    /// afresh: those that asked for at least `REPORTED_FROM` of their rate. One that asked for less takes
    /// the whole rate, as the other nodes do not count it: it can put the account over its rate by no more
    /// than that little, and a node serving an account lightly writes nothing.
    pub fn demands(&self, elapsed: Duration) -> Vec<(AccountId, f64)> {
        let seconds = elapsed.as_secs_f64().max(0.001);
        let mut buckets = self.buckets.lock().expect("rate limiter lock");
        let mut asked = Vec::new();
        for (account, bucket) in buckets.iter_mut() {
            let per_second = bucket.asked as f64 / seconds;
            bucket.asked = 0;
            if per_second < bucket.rate.per_second * REPORTED_FROM {
                bucket.share = 1.0;
            } else {
                asked.push((*account, per_second));
            }
        }
        asked
    }

    /// Sets this node's share of `account`'s rate.
    pub fn set_share(&self, account: AccountId, share: f64) {
        if let Some(bucket) = self.buckets.lock().expect("rate limiter lock").get_mut(&account) {
            bucket.share = share.clamp(0.0, 1.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let rate = Rate::requests(&Limits { rate_per_second: 10, rate_burst: 3, ..Limits::default() });
        let (limiter, account) = (RateLimiter::default(), AccountId::new());
        for _ in 0..3 {
            assert!(limiter.take(account, rate).is_ok());
        }
        let wait = limiter.take(account, rate).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(100), "{wait:?}");
        assert!(limiter.take(AccountId::new(), rate).is_ok(), "accounts do not share a bucket");
    }

    #[test]
    fn zero_means_unlimited() {
        let rate = Rate::requests(&Limits { rate_per_second: 0, ..Limits::default() });
        let (limiter, account) = (RateLimiter::default(), AccountId::new());
        assert!((0..100_000).all(|_| limiter.take(account, rate).is_ok()));
    }

    #[test]
    fn no_publish_rate_is_set_by_default() {
        assert_eq!(Limits::default().publish_rate_per_second, 0);
        let rate = Rate::messages(&Limits::default());
        let limiter = RateLimiter::for_messages();
        assert_eq!(limiter.take_many(AccountId::new(), rate, 1_000_000, Duration::ZERO), Ok(Duration::ZERO));
    }

    #[test]
    fn a_publish_over_the_rate_waits_for_its_messages_and_one_too_far_over_is_refused() {
        let rate = Rate::messages(&Limits { publish_rate_per_second: 100, ..Limits::default() });
        let limiter = RateLimiter::for_messages();
        let (account, second) = (AccountId::new(), Duration::from_secs(1));
        assert_eq!(limiter.take_many(account, rate, 100, second), Ok(Duration::ZERO), "a second's worth at once");
        let wait = limiter.take_many(account, rate, 50, second).unwrap();
        assert!(wait > Duration::from_millis(400) && wait <= Duration::from_millis(500), "{wait:?}");
        let refused = limiter.take_many(account, rate, 100, second).unwrap_err();
        assert!(refused > second, "1.5 s of messages owed: {refused:?}");
        let wait = limiter.take_many(account, rate, 40, second).unwrap();
        assert!(
            wait > Duration::from_millis(800) && wait <= Duration::from_millis(900),
            "the refusal took nothing: {wait:?}"
        );
        assert_eq!(
            limiter.take_many(AccountId::new(), rate, 100, second),
            Ok(Duration::ZERO),
            "accounts do not share a bucket"
        );
    }

    #[test]
    fn every_batch_can_pass_however_low_the_rate() {
        let rate = Rate::messages(&Limits { publish_rate_per_second: 10, ..Limits::default() });
        assert_eq!(
            RateLimiter::for_messages().take_many(AccountId::new(), rate, 100, Duration::ZERO),
            Ok(Duration::ZERO)
        );
    }

    #[test]
    fn a_node_with_half_the_share_fills_at_half_the_rate_and_says_what_it_was_asked() {
        let rate = Rate::messages(&Limits { publish_rate_per_second: 1000, ..Limits::default() });
        let (limiter, account) = (RateLimiter::for_messages(), AccountId::new());
        assert_eq!(limiter.take_many(account, rate, 100, Duration::ZERO), Ok(Duration::ZERO));
        limiter.set_share(account, 0.5);
        assert_eq!(limiter.take_many(account, rate, 400, Duration::ZERO), Ok(Duration::ZERO), "half a second's worth");
        let wait = limiter.take_many(account, rate, 350, Duration::from_secs(1)).unwrap();
        assert!(wait > Duration::from_millis(450) && wait <= Duration::from_millis(500), "{wait:?}");
        assert!(limiter.take_many(account, rate, 1000, Duration::ZERO).is_err());
        let light = AccountId::new();
        limiter.take_many(light, rate, 99, Duration::ZERO).unwrap();
        let asked = limiter.demands(Duration::from_secs(2));
        assert_eq!(asked, vec![(account, 925.0)], "taken or not, every message counts; under 5% of the rate, none");
        assert_eq!(limiter.demands(Duration::from_secs(1)), vec![], "counted afresh");
    }
}
