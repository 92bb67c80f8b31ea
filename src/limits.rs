//! Limits that protect the service and its tenants from each other: a per-account request rate (a
//! token bucket per node), queues per account, and backlog bytes per queue.

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
    pub fn new(limits: &Limits) -> Self {
        Self { rate: limits.rate_per_second.into(), burst: limits.rate_burst.max(1).into(), buckets: Mutex::default() }
    }

    /// Takes one request's token, or says how long until one is available.
    pub fn take(&self, account: AccountId) -> Result<(), Duration> {
        if self.rate == 0.0 {
            return Ok(());
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
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - *tokens) / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let limiter = RateLimiter::new(&Limits { rate_per_second: 10, rate_burst: 3, ..Limits::default() });
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
        let limiter = RateLimiter::new(&Limits { rate_per_second: 0, ..Limits::default() });
        let account = AccountId::new();
        assert!((0..100_000).all(|_| limiter.take(account).is_ok()));
    }
}
