//! Plans and the accounts' own limits: changed by the operator, read by every node whenever the limits'
//! version moves (`engine::plans`). A plan's limits are stored as the JSON object the operator gave.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgExecutor, PgPool};

use crate::ids::AccountId;

#[derive(Debug, Clone)]
pub struct PlanRow {
    pub name: String,
    pub limits: Value,
    pub created_at: DateTime<Utc>,
    pub modified_at: DateTime<Utc>,
    /// How many accounts are on it.
    pub accounts: i64,
}

struct RawPlan {
    name: String,
    limits: String,
    created_at: DateTime<Utc>,
    modified_at: DateTime<Utc>,
    accounts: i64,
}

impl From<RawPlan> for PlanRow {
    fn from(raw: RawPlan) -> Self {
        Self {
            name: raw.name,
            // The column is jsonb, so its text always parses.
            limits: serde_json::from_str(&raw.limits).unwrap_or(Value::Null),
            created_at: raw.created_at,
            modified_at: raw.modified_at,
            accounts: raw.accounts,
        }
    }
}

/// Every plan, by name.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<PlanRow>, sqlx::Error> {
    let rows = sqlx::query_as!(
        RawPlan,
        r#"select p.name, p.limits::text as "limits!", p.created_at, p.modified_at,
                  (select count(*) from accounts a where a.plan = p.name) as "accounts!"
           from plans p order by p.name"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(PlanRow::from).collect())
}

pub async fn get(db: impl PgExecutor<'_>, name: &str) -> Result<Option<PlanRow>, sqlx::Error> {
    let row = sqlx::query_as!(
        RawPlan,
        r#"select p.name, p.limits::text as "limits!", p.created_at, p.modified_at,
                  (select count(*) from accounts a where a.plan = p.name) as "accounts!"
           from plans p where p.name = $1"#,
        name
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(PlanRow::from))
}

/// Makes a plan; false when one of that name exists.
pub async fn create(db: impl PgExecutor<'_>, name: &str, limits: &Value) -> Result<bool, sqlx::Error> {
    let made = sqlx::query!(
        "insert into plans (name, limits) values ($1, $2::text::jsonb) on conflict (name) do nothing",
        name,
        limits.to_string()
    )
    .execute(db)
    .await?;
    Ok(made.rows_affected() == 1)
}

/// Replaces a plan's limits; false when there is no such plan.
pub async fn set_limits(db: impl PgExecutor<'_>, name: &str, limits: &Value) -> Result<bool, sqlx::Error> {
    let changed = sqlx::query!(
        "update plans set limits = $2::text::jsonb, modified_at = now() where name = $1",
        name,
        limits.to_string()
    )
    .execute(db)
    .await?;
    Ok(changed.rows_affected() == 1)
}

#[derive(Debug, PartialEq, Eq)]
pub enum PlanDeleted {
    Deleted,
    NotFound,
    /// Accounts are on it (or it is the default plan): nothing was deleted.
    InUse,
}

/// Deletes a plan no account is on.
pub async fn delete(db: &PgPool, name: &str) -> Result<PlanDeleted, sqlx::Error> {
    let deleted = sqlx::query!(
        "delete from plans p where p.name = $1 and p.name <> 'default'
           and not exists (select 1 from accounts a where a.plan = p.name)",
        name
    )
    .execute(db)
    .await;
    match deleted {
        Ok(done) if done.rows_affected() == 1 => Ok(PlanDeleted::Deleted),
        Ok(_) => Ok(if get(db, name).await?.is_some() { PlanDeleted::InUse } else { PlanDeleted::NotFound }),
        // An account moved onto it meanwhile: the reference holds it.
        Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation() => Ok(PlanDeleted::InUse),
        Err(e) => Err(e),
    }
}

/// The number every change to the plans or the accounts' limits moves.
pub async fn version(db: impl PgExecutor<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!("select version from limits_version").fetch_one(db).await
}

/// An account whose limits differ from the default plan's: its plan and its own overrides.
#[derive(Debug, Clone)]
pub struct OwnLimits {
    pub account: AccountId,
    pub plan: String,
    pub overrides: Value,
}

/// Every plan's limits, the accounts whose limits are their own, and the version they were read at (read
/// in one snapshot, so that a change made meanwhile is read again at the next look).
pub async fn book(pool: &PgPool) -> Result<(i64, Vec<(String, Value)>, Vec<OwnLimits>), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query!("set transaction isolation level repeatable read, read only").execute(&mut *tx).await?;
    let version = version(&mut *tx).await?;
    let plans = sqlx::query!(r#"select name, limits::text as "limits!" from plans"#).fetch_all(&mut *tx).await?;
    let accounts = sqlx::query!(
        r#"select id as "id: AccountId", plan, limit_overrides::text as "overrides!" from accounts
           where plan <> 'default' or limit_overrides <> '{}'"#
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let parse = |text: &str| serde_json::from_str(text).unwrap_or(Value::Null);
    Ok((
        version,
        plans.into_iter().map(|p| (p.name, parse(&p.limits))).collect(),
        accounts
            .into_iter()
            .map(|a| OwnLimits { account: a.id, plan: a.plan, overrides: parse(&a.overrides) })
            .collect(),
    ))
}
