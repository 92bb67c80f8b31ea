//! What every request handler shares: the pool, the lease signer, the publisher, the delivery core,
//! the activity and backlog counters, the long-polling wake-ups and the limits. Built by the composition root (`startup`).

use std::sync::Arc;

use sqlx::PgPool;

use crate::activity::Activity;
use crate::backlog::BacklogCache;
use crate::delivery::Delivery;
use crate::limits::{Limits, RateLimiter};
use crate::publisher::Publisher;
use crate::queue::lease::Signer;
use crate::wakeups::Wakeups;

pub struct AppState {
    pub pool: PgPool,
    pub signer: Signer,
    pub activity: Arc<Activity>,
    pub publisher: Publisher,
    pub backlog: Arc<BacklogCache>,
    pub delivery: Arc<Delivery>,
    pub wakeups: Arc<Wakeups>,
    pub limits: Limits,
    /// Each account's publish rate on this node (`Limits::publish_rate_per_second`).
    pub publish_rate: RateLimiter,
}
