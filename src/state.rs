//! What every request handler shares: the pool, the token verifier and the lease signer.

use std::sync::Arc;

use sqlx::PgPool;

use crate::activity::Activity;
use crate::auth::Verifier;
use crate::backlog::BacklogCache;
use crate::limits::{Limits, RateLimiter};
use crate::publisher::Publisher;
use crate::queue::lease::Signer;

pub struct AppState {
    pub pool: PgPool,
    pub verifier: Verifier,
    pub signer: Signer,
    pub activity: Arc<Activity>,
    pub publisher: Publisher,
    pub backlog: BacklogCache,
    pub limits: Limits,
    pub rate: RateLimiter,
}

impl AppState {
    pub async fn load(pool: PgPool, activity: Arc<Activity>, limits: Limits) -> Result<Self, sqlx::Error> {
        let key = crate::store::server_key(&pool).await?;
        Ok(Self {
            verifier: Verifier::new(pool.clone()),
            signer: Signer::new(key),
            publisher: Publisher::start(pool.clone()),
            backlog: BacklogCache::default(),
            rate: RateLimiter::new(&limits),
            limits,
            pool,
            activity,
        })
    }
}
