//! Verifies bearer tokens, caching outcomes for a few seconds so argon2 does not run on every request.
//! A revoked token stops working on every node within `CACHE_TTL`, since each node's cache forgets it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use sqlx::PgPool;

use super::token::{Scope, Token};
use crate::ids::{AccountId, TokenId};
use crate::store;

pub const CACHE_TTL: Duration = Duration::from_secs(5);
const CACHE_CAPACITY: usize = 10_000;

/// Who a verified token speaks for.
#[derive(Debug, Clone)]
pub struct Principal {
    pub account_id: AccountId,
    pub token_id: TokenId,
    pub scopes: Vec<Scope>,
}

impl Principal {
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// A verification outcome (None: rejected) and when it was reached.
type CachedOutcome = (Option<Principal>, Instant);

/// Argon2 runs at once at most this many times per node: each takes ~19 MiB and a core for tens of
/// milliseconds, and tokens with a known id and a wrong secret must not exhaust the machine.
const MAX_CONCURRENT_HASHES: usize = 4;

pub struct Verifier {
    pool: PgPool,
    hashing: tokio::sync::Semaphore,
    /// Keyed by a SHA-256 of the whole token, so no secret is kept in memory longer than a request.
    cache: Mutex<HashMap<[u8; 32], CachedOutcome>>,
}

impl Verifier {
    pub fn new(pool: PgPool) -> Self {
        Self { pool, hashing: tokio::sync::Semaphore::new(MAX_CONCURRENT_HASHES), cache: Mutex::new(HashMap::new()) }
    }

    /// `Ok(None)` when the token is unknown, revoked or wrong; `Err` only when the database fails.
    pub async fn verify(&self, text: &str) -> Result<Option<Principal>, sqlx::Error> {
        let Some(token) = Token::parse(text) else { return Ok(None) };
        let key: [u8; 32] = Sha256::digest(text.as_bytes()).into();
        if let Some(cached) = self.cached(&key) {
            return Ok(cached);
        }
        let outcome = match store::tokens::find_active(&self.pool, token.id).await? {
            None => None,
            Some(row) => {
                let hash = row.secret_hash.clone();
                let _permit = self.hashing.acquire().await.expect("the semaphore is never closed");
                let matches = tokio::task::spawn_blocking(move || token.matches(&hash)).await.unwrap_or(false);
                matches.then(|| Principal {
                    account_id: row.account_id,
                    token_id: row.id,
                    scopes: row.scopes.iter().filter_map(|s| Scope::parse(s)).collect(),
                })
            }
        };
        self.remember(key, outcome.clone());
        Ok(outcome)
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Option<Principal>> {
        let cache = self.cache.lock().expect("verifier cache lock");
        cache.get(key).filter(|(_, at)| at.elapsed() < CACHE_TTL).map(|(principal, _)| principal.clone())
    }

    fn remember(&self, key: [u8; 32], outcome: Option<Principal>) {
        let mut cache = self.cache.lock().expect("verifier cache lock");
        if cache.len() >= CACHE_CAPACITY {
            // Forget expired outcomes, then rejections, so a flood of bad tokens cannot push out good ones.
            cache.retain(|_, (principal, at)| at.elapsed() < CACHE_TTL && principal.is_some());
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
        }
        cache.insert(key, (outcome, Instant::now()));
    }
}
