//! The secrets sealed at rest (see `auth::sealing`), found and sealed again: those not under the current key
//! (in the clear, or under a key being rotated out), in batches, each replaced only if it is still the
//! value read, so that a secret rotated meanwhile is never overwritten. These statements span every
//! account: they are the operator's, run at a node's start and by `skiplock secrets rotate`.

use sqlx::{PgExecutor, PgPool};

use crate::ids::ConsumerId;

/// A webhook consumer's secrets as stored.
#[derive(Debug, sqlx::FromRow)]
pub struct StoredSecrets {
    pub id: ConsumerId,
    pub signing_secret: String,
    pub previous_signing_secret: Option<String>,
}

/// Up to `limit` webhook consumers with a secret that does not start with `kept` (sealed values', or those
/// under the current key); with `kept` None, those with a sealed secret.
pub async fn consumers_to_seal(
    db: impl PgExecutor<'_>,
    kept: Option<&str>,
    limit: i64,
) -> Result<Vec<StoredSecrets>, sqlx::Error> {
    sqlx::query_as(
        "select id, signing_secret, previous_signing_secret from consumers
          where signing_secret is not null
            and case when $1::text is null
                     then signing_secret like 'sealed:%' or previous_signing_secret like 'sealed:%'
                     else not starts_with(signing_secret, $1)
                          or not starts_with(coalesce(previous_signing_secret, $1), $1) end
          order by id
          limit $2",
    )
    .bind(kept)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// Replaces a consumer's secrets with `sealed` if they are still `stored`; false if they changed.
pub async fn reseal_consumer(
    db: impl PgExecutor<'_>,
    stored: &StoredSecrets,
    sealed: (&str, Option<&str>),
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "update consumers set signing_secret = $4, previous_signing_secret = $5
          where id = $1 and signing_secret = $2 and previous_signing_secret is not distinct from $3",
    )
    .bind(stored.id)
    .bind(&stored.signing_secret)
    .bind(&stored.previous_signing_secret)
    .bind(sealed.0)
    .bind(sealed.1)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Replaces the lease key as stored with `sealed` if it is still `stored`.
pub async fn reseal_server_key(pool: &PgPool, stored: &[u8], sealed: &[u8]) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("update server_keys set secret = $2 where name = 'lease' and secret = $1")
        .bind(stored)
        .bind(sealed)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The lease key as stored, if a node has made it.
pub async fn server_key_as_stored(pool: &PgPool) -> Result<Option<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar("select secret from server_keys where name = 'lease'").fetch_optional(pool).await
}
