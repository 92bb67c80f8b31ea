//! The engine: the runtime between the HTTP layers (`api`, `dispatch`) and the SQL (`store`). It owns a
//! message's lifecycle: publishing with group commit, leasing and settling, long polling and wake-ups,
//! limits, backlog figures, activity, redrive and the background upkeep.

pub mod accounts;
pub mod ack;
pub mod activity;
pub mod attempts;
pub mod audit;
pub mod background;
pub mod backlog;
pub mod consumers;
pub mod deletion;
pub mod delivery;
pub mod events;
pub mod firing;
pub mod floors;
pub mod flow;
pub mod gauges;
pub mod horizon;
pub mod limits;
pub mod maintenance;
pub mod periodic;
pub mod plans;
pub mod publish;
pub mod publisher;
pub mod pull;
pub mod queues;
pub mod quotas;
pub mod redrive;
pub mod rotation;
pub mod schedules;
pub mod sealing;
pub mod shares;
pub mod slots;
pub mod standing;
pub mod sweep;
pub mod topics;
pub mod usage;
pub mod wakeups;

use std::sync::Arc;

use sqlx::PgPool;

use crate::auth::sealing::{Keyring, Purpose};
use crate::auth::{AccountTokens, OperatorTokens, Verifier};
use crate::ids::{AccountId, QueueId};
use crate::metrics::Metrics;
use crate::queue::lease::Signer;
use crate::store::owned::{OwnedQueue, Owners};
use activity::Activity;
use backlog::BacklogCache;
use delivery::Delivery;
use limits::{Limits, RateLimiter};
use plans::PlanBook;
use publisher::Publisher;
use shares::RateShares;
use wakeups::Wakeups;

/// One node's engine: what the API's handlers and the dispatcher's workers share. Built once by the
/// composition root (`startup`) and handed to both.
pub struct Engine {
    pub pool: PgPool,
    pub metrics: Arc<Metrics>,
    /// Signs lease ids and peek refs with the key every node shares.
    pub signer: Signer,
    /// The keys that seal webhook signing secrets and the lease key at rest.
    pub keys: Keyring,
    pub activity: Arc<Activity>,
    pub backlog: Arc<BacklogCache>,
    pub delivery: Arc<Delivery>,
    pub wakeups: Arc<Wakeups>,
    /// Accounts' tokens.
    pub verifier: Verifier<AccountTokens>,
    /// The operator's tokens.
    pub operators: Verifier<OperatorTokens>,
    /// Failed authentications per client address, both APIs together.
    pub addresses: crate::auth::failures::AddressFailures,
    /// Refusals to cooling addresses, held before they are answered.
    pub refusal_holds: crate::auth::failures::Holds,
    /// Which accounts are suspended.
    pub standing: standing::Standing,
    /// Which accounts have used up a quota of their plan.
    pub quotas: quotas::Quotas,
    /// The limits in force for each account: its plan's and its own over the node's.
    pub plans: PlanBook,
    /// Each account's requests on this node, at its share of the account's rate.
    pub request_rate: RateLimiter,
    /// Each account's published messages on this node (`Limits::publish_rate_per_second`), at its share.
    pub publish_rate: RateLimiter,
    shares: RateShares,
    pub publisher: Publisher,
    /// The webhook attempts this node makes, written in batches.
    pub attempt_log: attempts::AttemptLog,
    /// This node, as the others see it in what it holds and reports (deletions, rate figures).
    pub node: uuid::Uuid,
    /// Which account owns each queue this node has been asked about.
    owners: Owners,
    horizon: horizon::HorizonWatch,
}

impl Engine {
    /// The engine of a node on `pool`, its events counted in `metrics`, its secrets sealed with `keys`.
    /// Reads (or makes) the shared lease-signing key, refusing a database whose key it cannot open, and
    /// starts the group-commit publisher.
    pub async fn new(
        pool: PgPool,
        metrics: Arc<Metrics>,
        limits: Limits,
        keys: Keyring,
    ) -> anyhow::Result<Arc<Engine>> {
        let mut fresh = vec![0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut fresh);
        let stored = crate::store::server_key(&pool, &keys.seal(Purpose::LeaseKey, &fresh)).await?;
        let signer = Signer::new(keys.open(Purpose::LeaseKey, &stored)?);
        let activity = Arc::new(Activity::new(metrics.clone()));
        let backlog = Arc::new(BacklogCache::default());
        let floors = Arc::new(floors::Floors::default());
        let delivery = Arc::new(Delivery::new(pool.clone(), activity.clone(), backlog.clone(), floors));
        let wakeups = Arc::new(Wakeups::new(metrics.clone()));
        let publisher = Publisher::start(pool.clone(), wakeups.clone(), delivery.clone());
        let attempt_log = attempts::AttemptLog::start(pool.clone(), metrics.clone());
        let engine = Arc::new(Engine {
            verifier: Verifier::new(pool.clone()),
            operators: Verifier::new(pool.clone()),
            addresses: Default::default(),
            refusal_holds: Default::default(),
            standing: standing::Standing::default(),
            quotas: quotas::Quotas::default(),
            plans: PlanBook::new(limits),
            request_rate: RateLimiter::default(),
            publish_rate: RateLimiter::for_messages(),
            shares: RateShares::default(),
            node: uuid::Uuid::new_v4(),
            pool,
            metrics,
            signer,
            keys,
            activity,
            backlog,
            delivery,
            wakeups,
            publisher,
            attempt_log,
            owners: Owners::default(),
            horizon: horizon::HorizonWatch::default(),
        });
        // A node serves no suspended account, and holds each to its limits, from its first request.
        engine.refresh_standing().await?;
        engine.refresh_plans().await?;
        Ok(engine)
    }

    /// The account's queue `queue`, or None when the account has no such queue.
    pub async fn owned_queue(&self, account: AccountId, queue: QueueId) -> Result<Option<OwnedQueue>, sqlx::Error> {
        self.owners.resolve(&self.pool, account, queue).await
    }
}
