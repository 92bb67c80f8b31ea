//! API tokens: only the argon2id hash of a token's secret is stored.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};

use crate::ids::{AccountId, TokenId};

#[derive(Debug, Clone)]
pub struct TokenRow {
    pub id: TokenId,
    pub account_id: AccountId,
    pub name: String,
    pub scopes: Vec<String>,
    pub secret_hash: String,
    pub created_at: DateTime<Utc>,
    pub not_before: Option<DateTime<Utc>>,
    pub expires_on: Option<DateTime<Utc>>,
    pub request_ip_in: Vec<String>,
    pub request_ip_not_in: Vec<String>,
}

/// When and from where a token may be used: unbounded on a side left None, from any address unless
/// `request_ip_in` lists networks, never from those `request_ip_not_in` lists.
#[derive(Debug, Clone, Default)]
pub struct Validity {
    pub not_before: Option<DateTime<Utc>>,
    pub expires_on: Option<DateTime<Utc>>,
    pub request_ip_in: Vec<String>,
    pub request_ip_not_in: Vec<String>,
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    account: AccountId,
    id: TokenId,
    name: &str,
    scopes: &[&str],
    secret_hash: &str,
    validity: Validity,
) -> Result<TokenRow, sqlx::Error> {
    let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
    sqlx::query_as!(
        TokenRow,
        r#"insert into api_tokens (id, account_id, name, scopes, secret_hash, not_before, expires_on, request_ip_in,
                                 request_ip_not_in)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         returning id as "id: TokenId", account_id as "account_id: AccountId", name, scopes, secret_hash, created_at,
                   not_before, expires_on, request_ip_in, request_ip_not_in"#,
        id.0,
        account.0,
        name,
        &scopes,
        secret_hash,
        validity.not_before,
        validity.expires_on,
        &validity.request_ip_in,
        &validity.request_ip_not_in,
    )
    .fetch_one(db)
    .await
}

/// A token that has not been revoked (account-independent: the token id is what the client shows).
pub async fn find_active(db: impl PgExecutor<'_>, id: TokenId) -> Result<Option<TokenRow>, sqlx::Error> {
    sqlx::query_as!(
        TokenRow,
        r#"select id as "id: TokenId", account_id as "account_id: AccountId", name, scopes, secret_hash, created_at,
                not_before, expires_on, request_ip_in, request_ip_not_in
         from api_tokens
         where id = $1 and revoked_at is null"#,
        id.0,
    )
    .fetch_optional(db)
    .await
}

/// The account's active tokens in creation order: `limit` of them after the first `offset`, and how many
/// there are in all.
pub async fn list(
    pool: &PgPool,
    account: AccountId,
    limit: i64,
    offset: i64,
) -> Result<(Vec<TokenRow>, i64), sqlx::Error> {
    let rows = sqlx::query_as!(
        TokenRow,
        r#"select id as "id: TokenId", account_id as "account_id: AccountId", name, scopes, secret_hash, created_at,
                not_before, expires_on, request_ip_in, request_ip_not_in
         from api_tokens
         where account_id = $1 and revoked_at is null order by created_at, id limit $2 offset $3"#,
        account.0,
        limit,
        offset,
    )
    .fetch_all(pool)
    .await?;
    let total = sqlx::query_scalar!(
        r#"select count(*) as "count!" from api_tokens where account_id = $1 and revoked_at is null"#,
        account.0,
    )
    .fetch_one(pool)
    .await?;
    Ok((rows, total))
}

/// Revokes a token of `account`; false when it has no such active token.
pub async fn revoke(db: impl PgExecutor<'_>, account: AccountId, id: TokenId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "update api_tokens set revoked_at = now() where account_id = $1 and id = $2 and revoked_at is null",
        account.0,
        id.0,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The operator's revoke: any account's token, by id.
pub async fn revoke_by_operator(db: impl PgExecutor<'_>, id: TokenId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("update api_tokens set revoked_at = now() where id = $1 and revoked_at is null", id.0)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes every token of the account (its deletion): none of them works from then on.
pub async fn delete_all(db: impl PgExecutor<'_>, account: AccountId) -> Result<u64, sqlx::Error> {
    let gone = sqlx::query!("delete from api_tokens where account_id = $1", account.0).execute(db).await?;
    Ok(gone.rows_affected())
}
