//! The audit log: one row per change to an account's configuration, written after the change by the
//! node that made it, read by the account's tokens and by the operator, and pruned by age.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::AccountId;

/// One entry, as it is written.
#[derive(Debug, Clone)]
pub struct NewEntry<'a> {
    pub account: AccountId,
    pub actor_type: &'a str,
    pub actor_id: Uuid,
    pub actor_ip: Option<String>,
    pub request_id: Option<&'a str>,
    pub resource_type: &'a str,
    pub resource_id: Option<String>,
    pub action: &'a str,
    pub old_value: Option<&'a Value>,
    pub new_value: Option<&'a Value>,
}

pub async fn record(pool: &PgPool, entry: &NewEntry<'_>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "insert into audit_logs (id, account_id, actor_type, actor_id, actor_ip, request_id, resource_type,
                                 resource_id, action, old_value, new_value)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text::jsonb, $11::text::jsonb)",
        // Time-ordered, so that entries of one moment keep the order they were written in.
        Uuid::now_v7(),
        entry.account.0,
        entry.actor_type,
        entry.actor_id,
        entry.actor_ip,
        entry.request_id,
        entry.resource_type,
        entry.resource_id,
        entry.action,
        entry.old_value.map(Value::to_string),
        entry.new_value.map(Value::to_string),
    )
    .execute(pool)
    .await?;
    Ok(())
}

#[derive(Debug, Clone)]
pub struct AuditRow {
    pub id: Uuid,
    pub account_id: AccountId,
    pub at: DateTime<Utc>,
    pub actor_type: String,
    pub actor_id: Uuid,
    pub actor_ip: Option<String>,
    pub request_id: Option<String>,
    pub resource_type: String,
    pub resource_id: Option<String>,
    pub action: String,
    pub old_value: Option<String>,
    pub new_value: Option<String>,
}

/// Which entries a read shows: of one account (every account when None, the operator's read), within
/// `since`..`before`, of one action; newest first unless `oldest_first`.
#[derive(Debug, Default)]
pub struct AuditFilter<'a> {
    pub account: Option<AccountId>,
    pub since: Option<DateTime<Utc>>,
    pub before: Option<DateTime<Utc>>,
    pub action: Option<&'a str>,
    pub oldest_first: bool,
}

/// A page of the entries that pass `filter`, and how many pass in all.
pub async fn list(
    pool: &PgPool,
    filter: &AuditFilter<'_>,
    limit: i64,
    offset: i64,
) -> Result<(Vec<AuditRow>, i64), sqlx::Error> {
    let account = filter.account.map(|a| a.0);
    let rows = sqlx::query_as!(
        AuditRow,
        r#"select id, account_id as "account_id: AccountId", at, actor_type, actor_id, actor_ip, request_id,
                  resource_type, resource_id, action, old_value::text, new_value::text
           from audit_logs
           where ($1::uuid is null or account_id = $1) and ($2::timestamptz is null or at >= $2)
             and ($3::timestamptz is null or at < $3) and ($4::text is null or action = $4)
           order by case when $5 then at end asc, case when $5 then id end asc,
                    case when not $5 then at end desc, case when not $5 then id end desc
           limit $6 offset $7"#,
        account,
        filter.since,
        filter.before,
        filter.action,
        filter.oldest_first,
        limit,
        offset,
    )
    .fetch_all(pool)
    .await?;
    let total = sqlx::query_scalar!(
        r#"select count(*) as "count!" from audit_logs
           where ($1::uuid is null or account_id = $1) and ($2::timestamptz is null or at >= $2)
             and ($3::timestamptz is null or at < $3) and ($4::text is null or action = $4)"#,
        account,
        filter.since,
        filter.before,
        filter.action,
    )
    .fetch_one(pool)
    .await?;
    Ok((rows, total))
}

/// Deletes entries older than `days`, a bounded batch at a time; answers how many went.
pub async fn prune(pool: &PgPool, days: i32, batch: i64) -> Result<u64, sqlx::Error> {
    let gone = sqlx::query!(
        "delete from audit_logs where id = any(array(
             select id from audit_logs where at < now() - make_interval(days => $1) limit $2))",
        days,
        batch
    )
    .execute(pool)
    .await?;
    Ok(gone.rows_affected())
}
