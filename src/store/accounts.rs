//! Accounts (tenants): created, listed and changed by the operator, read by their own tokens.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgExecutor, PgPool};

use crate::ids::AccountId;
use crate::queue::account::AccountStatus;

/// Makes an account on `plan`, which must exist (a foreign-key error otherwise).
pub async fn create(db: impl PgExecutor<'_>, name: &str, plan: &str) -> Result<AccountId, sqlx::Error> {
    let id = AccountId::new();
    sqlx::query!("insert into accounts (id, name, plan) values ($1, $2, $3)", id.0, name, plan).execute(db).await?;
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
    pub plan: String,
    /// The limits set for this account alone, over its plan's.
    pub limit_overrides: Value,
}

struct RawAccount {
    id: AccountId,
    name: String,
    created_at: DateTime<Utc>,
    status: AccountStatus,
    status_changed_at: Option<DateTime<Utc>>,
    status_reason: Option<String>,
    plan: String,
    limit_overrides: String,
}

impl From<RawAccount> for AccountRow {
    fn from(raw: RawAccount) -> Self {
        Self {
            id: raw.id,
            name: raw.name,
            created_at: raw.created_at,
            status: raw.status,
            status_changed_at: raw.status_changed_at,
            status_reason: raw.status_reason,
            plan: raw.plan,
            // The column is jsonb, so its text always parses.
            limit_overrides: serde_json::from_str(&raw.limit_overrides).unwrap_or(Value::Null),
        }
    }
}

pub async fn get(db: impl PgExecutor<'_>, id: AccountId) -> Result<Option<AccountRow>, sqlx::Error> {
    sqlx::query_as!(
        RawAccount,
        r#"select id as "id: AccountId", name, created_at, status as "status: AccountStatus", status_changed_at,
                  status_reason, plan, limit_overrides::text as "limit_overrides!"
           from accounts where id = $1"#,
        id.0
    )
    .fetch_optional(db)
    .await
    .map(|row| row.map(AccountRow::from))
}

/// Which accounts a list shows: those whose name contains `name` (any case), with `status`, on `plan`.
#[derive(Debug, Default)]
pub struct AccountFilter<'a> {
    pub name: Option<&'a str>,
    pub status: Option<AccountStatus>,
    pub plan: Option<&'a str>,
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
        RawAccount,
        r#"select id as "id: AccountId", name, created_at, status as "status: AccountStatus", status_changed_at,
                  status_reason, plan, limit_overrides::text as "limit_overrides!"
           from accounts
           where ($1::text is null or strpos(lower(name), lower($1)) > 0) and ($2::text is null or status = $2)
             and ($5::text is null or plan = $5)
           order by created_at, id limit $3 offset $4"#,
        filter.name,
        status,
        limit,
        offset,
        filter.plan,
    )
    .fetch_all(pool)
    .await?;
    let total = sqlx::query_scalar!(
        r#"select count(*) as "count!" from accounts
           where ($1::text is null or strpos(lower(name), lower($1)) > 0) and ($2::text is null or status = $2)
             and ($3::text is null or plan = $3)"#,
        filter.name,
        status,
        filter.plan,
    )
    .fetch_one(pool)
    .await?;
    Ok((rows.into_iter().map(AccountRow::from).collect(), total))
}

/// What an update of an account changes: each part given is set, the others kept.
#[derive(Debug, Default)]
pub struct AccountChange<'a> {
    pub name: Option<&'a str>,
    /// Must name a plan (a foreign-key error otherwise).
    pub plan: Option<&'a str>,
    pub limit_overrides: Option<&'a Value>,
}

/// Changes an account; None when there is no such account.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: AccountId,
    change: &AccountChange<'_>,
) -> Result<Option<AccountRow>, sqlx::Error> {
    sqlx::query_as!(
        RawAccount,
        r#"update accounts
           set name = coalesce($2, name), plan = coalesce($3, plan),
               limit_overrides = coalesce($4::text::jsonb, limit_overrides)
           where id = $1
           returning id as "id: AccountId", name, created_at, status as "status: AccountStatus", status_changed_at,
                     status_reason, plan, limit_overrides::text as "limit_overrides!""#,
        id.0,
        change.name,
        change.plan,
        change.limit_overrides.map(Value::to_string),
    )
    .fetch_optional(db)
    .await
    .map(|row| row.map(AccountRow::from))
}

/// Sets an account's status, active or suspended (with the operator's reason, kept while suspended); the
/// time it changed is kept only when it did change. None when there is no such account or it is being
/// deleted.
pub async fn set_status(
    db: impl PgExecutor<'_>,
    id: AccountId,
    status: AccountStatus,
    reason: Option<&str>,
) -> Result<Option<AccountRow>, sqlx::Error> {
    sqlx::query_as!(
        RawAccount,
        r#"update accounts
           set status_changed_at = case when status = $2 then status_changed_at else now() end,
               status = $2, status_reason = $3
           where id = $1 and status in ('active', 'suspended')
           returning id as "id: AccountId", name, created_at, status as "status: AccountStatus", status_changed_at,
                     status_reason, plan, limit_overrides::text as "limit_overrides!""#,
        id.0,
        status.as_str(),
        reason,
    )
    .fetch_optional(db)
    .await
    .map(|row| row.map(AccountRow::from))
}

/// Every account whose requests are refused, suspended, being deleted or deleted within the last
/// minute, with its status: each node reads them every second (`engine::standing`).
pub async fn refused(pool: &PgPool) -> Result<Vec<(AccountId, AccountStatus)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select id as "id!: AccountId", status as "status!: AccountStatus" from accounts
           where status in ('suspended', 'deleting')
           union all
           select id, status from accounts
           where status = 'deleted' and deletion_finished_at > now() - interval '1 minute'"#
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.status)).collect())
}
