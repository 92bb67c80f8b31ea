//! The operator's tokens: only the argon2id hash of a token's secret is stored. They belong to no
//! account and reach no account's rows by themselves; the operator API names the account it acts on.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::ids::TokenId;

#[derive(Debug, Clone)]
pub struct OperatorTokenRow {
    pub id: TokenId,
    pub name: String,
    pub scopes: Vec<String>,
    pub secret_hash: String,
    pub created_at: DateTime<Utc>,
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    id: TokenId,
    name: &str,
    scopes: &[&str],
    secret_hash: &str,
) -> Result<(), sqlx::Error> {
    let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
    sqlx::query!(
        "insert into operator_tokens (id, name, scopes, secret_hash) values ($1, $2, $3, $4)",
        id.0,
        name,
        &scopes,
        secret_hash,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// An operator token that has not been revoked.
pub async fn find_active(db: impl PgExecutor<'_>, id: TokenId) -> Result<Option<OperatorTokenRow>, sqlx::Error> {
    sqlx::query_as!(
        OperatorTokenRow,
        r#"select id as "id: TokenId", name, scopes, secret_hash, created_at
         from operator_tokens where id = $1 and revoked_at is null"#,
        id.0,
    )
    .fetch_optional(db)
    .await
}

/// Revokes an operator token; false when there is no such active token.
pub async fn revoke(db: impl PgExecutor<'_>, id: TokenId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("update operator_tokens set revoked_at = now() where id = $1 and revoked_at is null", id.0)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}
