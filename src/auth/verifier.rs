//! Verifies bearer tokens. Argon2 is what makes a stolen hash useless, and also what makes it slow
//! (tens of milliseconds and ~19 MiB a run), so a node runs it once per token, not once per request:
//! outcomes are cached, and a cached outcome older than `CACHE_TTL` is checked again against the token's
//! row, a cheap query, so a revoked token stops working on every node within `CACHE_TTL`. Argon2 runs
//! again only when the row's hash is not the one this secret was verified against. Concurrent requests
//! with the same token wait for one check instead of each running their own. One verifier reads one book
//! of tokens (`books`): accounts' or the operator's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use sqlx::PgPool;

use super::books::TokenBook;
use super::failures::TokenFailures;
use super::token::Token;

pub const CACHE_TTL: Duration = Duration::from_secs(5);
const CACHE_CAPACITY: usize = 10_000;

/// A SHA-256 of the whole token text, so no secret is kept in memory longer than a request.
type Key = [u8; 32];

struct Cached<P> {
    /// None: the token was rejected.
    principal: Option<P>,
    /// The stored hash the secret was found to match; a later check skips argon2 while it is unchanged.
    verified_hash: Option<String>,
    checked_at: Instant,
}

/// Argon2 runs at once at most this many times per node: each takes ~19 MiB and a core for tens of
/// milliseconds, and tokens with a known id and a wrong secret must not exhaust the machine.
const MAX_CONCURRENT_HASHES: usize = 4;

pub struct Verifier<B: TokenBook> {
    pool: PgPool,
    ttl: Duration,
    hashing: tokio::sync::Semaphore,
    hashes_run: AtomicU64,
    /// Wrong secrets per token id, which cool a guessed-at id down.
    failures: TokenFailures,
    /// Secrets refused without hashing, their token id cooling down.
    refused_cooling: AtomicU64,
    cache: Mutex<HashMap<Key, Cached<B::Principal>>>,
    /// One check at a time per token; the others wait for its outcome.
    checking: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
    book: std::marker::PhantomData<B>,
}

impl<B: TokenBook> Verifier<B> {
    pub fn new(pool: PgPool) -> Self {
        Self::with_ttl(pool, CACHE_TTL)
    }

    /// A verifier whose outcomes are checked again after `ttl` (tests use a short one).
    pub fn with_ttl(pool: PgPool, ttl: Duration) -> Self {
        Self {
            pool,
            ttl,
            hashing: tokio::sync::Semaphore::new(MAX_CONCURRENT_HASHES),
            hashes_run: AtomicU64::new(0),
            failures: TokenFailures::default(),
            refused_cooling: AtomicU64::new(0),
            cache: Mutex::default(),
            checking: Mutex::default(),
            book: std::marker::PhantomData,
        }
    }

    /// `Ok(None)` when the token is unknown, revoked, wrong or of another book; `Err` only when the
    /// database fails.
    pub async fn verify(&self, text: &str) -> Result<Option<B::Principal>, sqlx::Error> {
        let Some(token) = Token::parse(text).filter(|t| t.kind == B::KIND) else { return Ok(None) };
        let key: Key = Sha256::digest(text.as_bytes()).into();
        if let Some(principal) = self.fresh(&key) {
            return Ok(principal);
        }
        let turn = self.checking.lock().expect("verifier lock").entry(key).or_default().clone();
        let _turn = turn.lock().await;
        // Whoever held the turn before may have just checked this token.
        if let Some(principal) = self.fresh(&key) {
            return Ok(principal);
        }
        let checked = self.check(token, &key).await;
        self.checking.lock().expect("verifier lock").remove(&key);
        // Refused unheard while its token id cools down: not remembered, so the next second's try is heard.
        let Some(checked) = checked? else { return Ok(None) };
        let principal = checked.principal.clone();
        self.remember(key, checked);
        Ok(principal)
    }

    /// Whether this node has verified `text` as a good token (its cache says so, however old: `verify`
    /// still reads the row again once the outcome is stale, without argon2).
    pub fn known_good(&self, text: &str) -> bool {
        let key: Key = Sha256::digest(text.as_bytes()).into();
        self.cache.lock().expect("verifier lock").get(&key).is_some_and(|c| c.principal.is_some())
    }

    /// How many times argon2 has run.
    pub fn hashes_run(&self) -> u64 {
        self.hashes_run.load(Ordering::Relaxed)
    }

    /// How many secrets were refused without hashing while their token id cooled down.
    pub fn refused_cooling(&self) -> u64 {
        self.refused_cooling.load(Ordering::Relaxed)
    }

    fn fresh(&self, key: &Key) -> Option<Option<B::Principal>> {
        let cache = self.cache.lock().expect("verifier lock");
        cache.get(key).filter(|c| c.checked_at.elapsed() < self.ttl).map(|c| c.principal.clone())
    }

    /// Reads the token's row; runs argon2 unless the secret was already verified against this hash.
    /// None: refused without hashing, the token id cooling down after repeated wrong secrets.
    async fn check(&self, token: Token, key: &Key) -> Result<Option<Cached<B::Principal>>, sqlx::Error> {
        let checked_at = Instant::now();
        let known = self.cache.lock().expect("verifier lock").get(key).and_then(|c| c.verified_hash.clone());
        // A secret never verified here, for a cooling token id, is refused before its row is read: a flood
        // of guesses costs no round trip each.
        if known.is_none() && !self.failures.may_try(token.id) {
            self.refused_cooling.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        let Some(row) = B::find(&self.pool, token.id).await? else {
            return Ok(Some(Cached { principal: None, verified_hash: None, checked_at }));
        };
        let matches = if known.as_deref() == Some(row.secret_hash.as_str()) {
            true
        } else {
            let id = token.id;
            let hash = row.secret_hash.clone();
            let _permit = self.hashing.acquire().await.expect("the semaphore is never closed");
            self.hashes_run.fetch_add(1, Ordering::Relaxed);
            let matches = tokio::task::spawn_blocking(move || token.matches(&hash)).await.unwrap_or(false);
            if matches {
                self.failures.succeeded(id);
            } else {
                self.failures.failed(id);
            }
            matches
        };
        if !matches {
            return Ok(Some(Cached { principal: None, verified_hash: None, checked_at }));
        }
        Ok(Some(Cached { principal: Some(row.principal), verified_hash: Some(row.secret_hash), checked_at }))
    }

    fn remember(&self, key: Key, checked: Cached<B::Principal>) {
        let mut cache = self.cache.lock().expect("verifier lock");
        if cache.len() >= CACHE_CAPACITY && !cache.contains_key(&key) {
            // Forget expired outcomes, then rejections, so a flood of bad tokens cannot push out good ones.
            cache.retain(|_, c| c.checked_at.elapsed() < self.ttl && c.principal.is_some());
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
        }
        cache.insert(key, checked);
    }
}
