//! Accounts (tenants).

use sqlx::PgExecutor;

use crate::ids::AccountId;

pub async fn create(db: impl PgExecutor<'_>, name: &str) -> Result<AccountId, sqlx::Error> {
    let id = AccountId::new();
    sqlx::query("insert into accounts (id, name) values ($1, $2)").bind(id).bind(name).execute(db).await?;
    Ok(id)
}

pub async fn exists(db: impl PgExecutor<'_>, id: AccountId) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("select exists (select 1 from accounts where id = $1)").bind(id).fetch_one(db).await
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AccountRow {
    pub id: AccountId,
    pub name: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

pub async fn get(db: impl PgExecutor<'_>, id: AccountId) -> Result<Option<AccountRow>, sqlx::Error> {
    sqlx::query_as("select id, name, created_at from accounts where id = $1").bind(id).fetch_optional(db).await
}
