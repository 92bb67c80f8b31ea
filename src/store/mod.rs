//! All SQL lives here. Every function that touches a tenant's rows takes the account id first and filters
//! on it, or takes an `OwnedQueue` (a queue with its account, vouched for by `owned`), so a caller cannot
//! reach another account's objects by forgetting a check. The cross-account reads of the background work
//! (the dispatcher's consumers, the sweeps, the count fold, the gauges) answer no tenant.

pub mod accounts;
pub mod activity;
pub mod attempts;
pub mod audit;
pub mod consumers;
pub mod counts;
pub mod deletion;
pub mod dispatch;
pub mod events;
pub mod flow;
pub mod gauges;
pub mod generations;
pub mod horizon;
pub mod maintenance;
pub mod messages;
pub mod operators;
pub mod owned;
pub mod plans;
pub mod pool;
pub mod publish;
pub mod queues;
pub mod redrive;
pub mod schedules;
pub mod sealing;
pub mod shares;
pub mod stats;
pub mod tokens;
pub mod topics;
pub mod types;
pub mod usage;

use sqlx::PgPool;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("duplicate queue name {0}")]
    DuplicateQueueName(String),
    #[error("the queue already has a consumer")]
    ConsumerExists,
    /// The queue was deleted while the request worked on it.
    #[error("the queue is gone")]
    QueueGone,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The name of the unique constraint a failed statement broke, if that is why it failed.
pub(crate) fn violated_constraint(err: &sqlx::Error) -> Option<&str> {
    match err {
        sqlx::Error::Database(db) if db.is_unique_violation() => db.constraint(),
        _ => None,
    }
}

pub(crate) fn is_foreign_key_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_foreign_key_violation())
}

/// The key that signs lease ids as stored (sealed, or in the clear), shared by every node: the first node
/// to start stores `fresh`.
pub async fn server_key(pool: &PgPool, fresh: &[u8]) -> Result<Vec<u8>, sqlx::Error> {
    sqlx::query("insert into server_keys (name, secret) values ('lease', $1) on conflict (name) do nothing")
        .bind(fresh)
        .execute(pool)
        .await?;
    sqlx::query_scalar("select secret from server_keys where name = 'lease'").fetch_one(pool).await
}
