//! Accounts (tenants).

use sqlx::PgExecutor;

use crate::ids::AccountId;

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
    pub created_at: chrono::DateTime<chrono::Utc>,
}

pub async fn get(db: impl PgExecutor<'_>, id: AccountId) -> Result<Option<AccountRow>, sqlx::Error> {
    sqlx::query_as!(AccountRow, r#"select id as "id: AccountId", name, created_at from accounts where id = $1"#, id.0)
        .fetch_optional(db)
        .await
}
