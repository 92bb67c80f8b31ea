//! Limits that protect the service and its tenants from each other: a per-account request rate and
//! publish rate (token buckets per node), queues per account, and backlog bytes per queue.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ids::AccountId;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Requests per second per account on each node (0: unlimited).
    pub rate_per_second: u32,
    /// How many requests above the rate an account may make at once.
    pub rate_burst: u32,
    /// Messages published per second per account on each node (0: unlimited, the default: a cap nobody
    /// set would hold a lone tenant back silently). An account publishing faster is held back, so that it
    /// cannot take the whole node from the others; hosted deployments set one (docs/operations.md).
    pub publish_rate_per_second: u32,
    pub max_queues_per_account: i64,
    pub max_backlog_bytes_per_queue: i64,
    /// Long-polling pulls waiting at once per account on each node.
    pub max_waiting_pulls: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            rate_per_second: 5_000,
            rate_burst: 10_000,
            publish_rate_per_second: 0,
            max_queues_per_account: 1_000,
            max_backlog_bytes_per_queue: 25_000_000_000,
            max_waiting_pulls: 1_000,
        }
    }
}

/// Token buckets, one per account that made a request recently.
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<AccountId, (f64, Instant)>>,
}

const MAX_BUCKETS: usize = 100_000;

impl RateLimiter {
    /// Requests of `limits.rate_per_second`, up to `limits.rate_burst` at once.
    pub fn requests(limits: &Limits) -> Self {
        Self::new(limits.rate_per_second, limits.rate_burst)
    }

    /// Published messages of `limits.publish_rate_per_second`, a second's worth at once (at least a
    /// whole batch, so that every batch can pass).
    pub fn messages(limits: &Limits) -> Self {
        let rate = limits.publish_rate_per_second;
        Self::new(rate, rate.max(crate::queue::message::MAX_BATCH_MESSAGES as u32))
    }

    fn new(rate: u32, burst: u32) -> Self {
        Self { rate: rate.into(), burst: burst.max(1).into(), buckets: Mutex::default() }
    }

    /// Takes one request's token, or says how long until one is available.
    pub fn take(&self, account: AccountId) -> Result<(), Duration> {
        self.take_many(account, 1, Duration::ZERO).map(|_| ())
    }

    /// Takes `n` tokens. A shortfall the bucket refills within `max_wait` is taken on credit, and the
    /// answer is how long the caller waits before going on; a longer one takes nothing and says how
    /// long until it would be refilled.
    pub fn take_many(&self, account: AccountId, n: u32, max_wait: Duration) -> Result<Duration, Duration> {
        if self.rate == 0.0 {
            return Ok(Duration::ZERO);
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock().expect("rate limiter lock");
        if buckets.len() >= MAX_BUCKETS {
            // Full buckets carry no state worth keeping.
            let (rate, burst) = (self.rate, self.burst);
            buckets.retain(|_, (tokens, at)| *tokens + at.elapsed().as_secs_f64() * rate < burst);
        }
        let (tokens, at) = buckets.entry(account).or_insert((self.burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * self.rate).min(self.burst);
        *at = now;
        let shortfall = f64::from(n) - *tokens;
        let wait = Duration::from_secs_f64(shortfall.max(0.0) / self.rate);
        if wait > max_wait {
            return Err(wait);
        }
        *tokens -= f64::from(n);
        Ok(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let limiter = RateLimiter::requests(&Limits { rate_per_second: 10, rate_burst: 3, ..Limits::default() });
        let account = AccountId::new();
        for _ in 0..3 {
            assert!(limiter.take(account).is_ok());
        }
        let wait = limiter.take(account).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(100), "{wait:?}");
        assert!(limiter.take(AccountId::new()).is_ok(), "accounts do not share a bucket");
    }

    #[test]
    fn zero_means_unlimited() {
        let limiter = RateLimiter::requests(&Limits { rate_per_second: 0, ..Limits::default() });
        let account = AccountId::new();
        assert!((0..100_000).all(|_| limiter.take(account).is_ok()));
    }

    #[test]
    fn no_publish_rate_is_set_by_default() {
        assert_eq!(Limits::default().publish_rate_per_second, 0);
        let limiter = RateLimiter::messages(&Limits::default());
        assert_eq!(limiter.take_many(AccountId::new(), 1_000_000, Duration::ZERO), Ok(Duration::ZERO));
    }

    #[test]
    fn a_publish_over_the_rate_waits_for_its_messages_and_one_too_far_over_is_refused() {
        let limiter = RateLimiter::messages(&Limits { publish_rate_per_second: 100, ..Limits::default() });
        let (account, second) = (AccountId::new(), Duration::from_secs(1));
        assert_eq!(limiter.take_many(account, 100, second), Ok(Duration::ZERO), "a second's worth at once");
        let wait = limiter.take_many(account, 50, second).unwrap();
        assert!(wait > Duration::from_millis(400) && wait <= Duration::from_millis(500), "{wait:?}");
        let refused = limiter.take_many(account, 100, second).unwrap_err();
        assert!(refused > second, "1.5 s of messages owed: {refused:?}");
        let wait = limiter.take_many(account, 40, second).unwrap();
        assert!(
            wait > Duration::from_millis(800) && wait <= Duration::from_millis(900),
            "the refusal took nothing: {wait:?}"
        );
        assert_eq!(
            limiter.take_many(AccountId::new(), 100, second),
            Ok(Duration::ZERO),
            "accounts do not share a bucket"
        );
    }

    #[test]
    fn every_batch_can_pass_however_low_the_rate() {
        let limiter = RateLimiter::messages(&Limits { publish_rate_per_second: 10, ..Limits::default() });
        assert_eq!(limiter.take_many(AccountId::new(), 100, Duration::ZERO), Ok(Duration::ZERO));
    }
}
