//! An account's rates hold across the nodes: each node fills its buckets at a share of the account's rate
//! in proportion to what it is asked for, beside what the other nodes are asked for. Every second a node
//! that was asked for a limited rate writes its figures and reads the others', so that an account limited
//! to N per second gets about N in all, through one node or several, and a node the account's clients
//! lean on gets the larger part. A node no other has reported beside takes the whole rate.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::limits::RateLimiter;
use super::Engine;
use crate::store::{self, shares::Demand};

/// How often a node exchanges its figures.
pub const EXCHANGE_EVERY: Duration = Duration::from_secs(1);
/// How long another node's figure counts: a node that stopped or went quiet stops counting after it.
const FRESH_SECONDS: f64 = 3.0;
/// How long figures are kept at all.
pub const KEPT_SECONDS: f64 = 60.0;

/// When this node last exchanged its figures.
pub struct RateShares {
    last: Mutex<Instant>,
}

impl Default for RateShares {
    fn default() -> Self {
        Self { last: Mutex::new(Instant::now()) }
    }
}

/// The kinds of rate, as stored.
const REQUESTS: i16 = 0;
const MESSAGES: i16 = 1;

impl Engine {
    /// Writes what this node was asked for since the last exchange and sets its shares from the others'
    /// figures. Costs nothing when no limited account asked for anything.
    pub async fn exchange_rate_shares(&self) -> Result<(), sqlx::Error> {
        let elapsed = {
            let mut last = self.shares.last.lock().expect("shares lock");
            let elapsed = last.elapsed();
            *last = Instant::now();
            elapsed
        };
        let limiters = [(REQUESTS, &self.request_rate), (MESSAGES, &self.publish_rate)];
        let mine: Vec<Demand> = limiters
            .iter()
            .flat_map(|(kind, limiter)| {
                limiter.demands(elapsed).into_iter().map(|(account, per_second)| Demand {
                    account,
                    kind: *kind,
                    per_second: per_second as f32,
                })
            })
            .collect();
        if mine.is_empty() {
            return Ok(());
        }
        let others: HashMap<_, _> = store::shares::exchange(&self.pool, self.node, &mine, FRESH_SECONDS)
            .await?
            .into_iter()
            .map(|o| ((o.account, o.kind), f64::from(o.per_second)))
            .collect();
        for asked in &mine {
            let other = others.get(&(asked.account, asked.kind)).copied().unwrap_or(0.0);
            let limiter: &RateLimiter = if asked.kind == REQUESTS { &self.request_rate } else { &self.publish_rate };
            limiter.set_share(asked.account, share(f64::from(asked.per_second), other));
        }
        Ok(())
    }
}

/// This node's share of a rate it is asked for at `mine` per second while the others are asked for
/// `others`.
fn share(mine: f64, others: f64) -> f64 {
    if others <= 0.0 {
        1.0
    } else {
        mine / (mine + others)
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn shares_follow_what_each_node_is_asked_for() {
        assert_eq!(share(500.0, 0.0), 1.0, "alone, the whole rate");
        assert_eq!(share(500.0, 500.0), 0.5);
        assert_eq!(share(300.0, 900.0), 0.25);
    }
}
