//! Accounts (tenants): created, listed and changed by the operator, read by their own tokens.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};

use crate::ids::AccountId;
use crate::queue::account::AccountStatus;

pub async fn create(db: impl PgExecutor<'_>, name: &str) -> Result<AccountId, sqlx::Error> {
    let id = AccountId::new();
    sqlx::query!("insert into accounts (id, name) values ($1, $2)", id.0, name).execute(db).await?;
    Ok(id)
}

pub async fn exists(db: impl PgExecutor<'_>, id: AccountId) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(r#"select exists (select 1 from accounts where id = $1) as "exists!""#, id.0)
        .fetch_one(db)
        .await
}

#[derive(Debug, Clone)]
pub struct AccountRow {
    pub id: AccountId,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub status: AccountStatus,
    pub status_changed_at: Option<DateTime<Utc>>,
    pub status_reason: Option<String>,
}

pub async fn get(db: impl PgExecutor<'_>, id: AccountId) -> Result<Option<AccountRow>, sqlx::Error> {
    sqlx::query_as!(
        AccountRow,
        r#"select id as "id: AccountId", name, created_at, status as "status: AccountStatus", status_changed_at,
                  status_reason
           from accounts where id = $1"#,
        id.0
    )
    .fetch_optional(db)
    .await
}

/// Which accounts a list shows: those whose name contains `name` (any case) and with `status`.
#[derive(Debug, Default)]
pub struct AccountFilter<'a> {
    pub name: Option<&'a str>,
    pub status: Option<AccountStatus>,
}

/// The accounts that pass `filter`, oldest first: `limit` of them after the first `offset`, and how
/// many pass in all.
pub async fn list(
    pool: &PgPool,
    filter: &AccountFilter<'_>,
    limit: i64,
    offset: i64,
) -> Result<(Vec<AccountRow>, i64), sqlx::Error> {
    let status = filter.status.map(AccountStatus::as_str);
    let rows = sqlx::query_as!(
        AccountRow,
        r#"select id as "id: AccountId", name, created_at, status as "status: AccountStatus", status_changed_at,
                  status_reason
           from accounts
           where ($1::text is null or strpos(lower(name), lower($1)) > 0) and ($2::text is null or status = $2)
           order by created_at, id limit $3 offset $4"#,
        filter.name,
        status,
        limit,
        offset,
    )
    .fetch_all(pool)
    .await?;
    let total = sqlx::query_scalar!(
        r#"select count(*) as "count!" from accounts
           where ($1::text is null or strpos(lower(name), lower($1)) > 0) and ($2::text is null or status = $2)"#,
        filter.name,
        status,
    )
    .fetch_one(pool)
    .await?;
    Ok((rows, total))
}

/// Renames an account; None when there is no such account.
pub async fn rename(db: impl PgExecutor<'_>, id: AccountId, name: &str) -> Result<Option<AccountRow>, sqlx::Error> {
    sqlx::query_as!(
        AccountRow,
        r#"update accounts set name = $2 where id = $1
           returning id as "id: AccountId", name, created_at, status as "status: AccountStatus", status_changed_at,
                     status_reason"#,
        id.0,
        name,
    )
    .fetch_optional(db)
    .await
}

/// Sets an account's status (with the operator's reason, kept while suspended); the time it changed is
/// kept only when it did change. None when there is no such account.
pub async fn set_status(
    db: impl PgExecutor<'_>,
    id: AccountId,
    status: AccountStatus,
    reason: Option<&str>,
) -> Result<Option<AccountRow>, sqlx::Error> {
    sqlx::query_as!(
        AccountRow,
        r#"update accounts
           set status_changed_at = case when status = $2 then status_changed_at else now() end,
               status = $2, status_reason = $3
           where id = $1
           returning id as "id: AccountId", name, created_at, status as "status: AccountStatus", status_changed_at,
                     status_reason"#,
        id.0,
        status.as_str(),
        reason,
    )
    .fetch_optional(db)
    .await
}

/// Every suspended account: each node reads them every second (`engine::standing`).
pub async fn suspended(pool: &PgPool) -> Result<Vec<AccountId>, sqlx::Error> {
    sqlx::query_scalar!(r#"select id as "id: AccountId" from accounts where status <> 'active'"#).fetch_all(pool).await
}
