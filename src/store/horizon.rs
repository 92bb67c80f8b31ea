//! What the database's cleanup horizon is held back by, and how far back the service's own writes reach:
//! the two readings that delivery beside a held snapshot relies on (docs/design-notes.md, "Delivery beside
//! a held snapshot"). Both read the server's activity, not any table, and answer no tenant.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

/// The name every connection of the service gives itself (`pool::pool_options`).
pub const APPLICATION_NAME: &str = "skiplock";

/// A time no message written by a transaction still running can be available before: the start of the
/// service's oldest transaction in progress on any node (upkeep such as vacuum aside, which writes no
/// message), or the server's clock when none is. Every write of `available_at` takes the clock at the
/// write, which is later than its transaction's start; a transaction that starts after this reading
/// writes later still. None when another role's sessions of the service hide their transactions from
/// this one (see docs/operations.md): then no floor may move.
pub async fn writers_since(db: impl PgExecutor<'_>) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar(
        "select case when bool_or(state is null) then null else least(now(), min(xact_start)) end
         from (select now() as xact_start, 'self' as state
               union all
               select xact_start, state from pg_stat_activity
               where datname = current_database() and application_name = $1 and pid <> pg_backend_pid()
                 and (xact_start is not null or state is null)
                 and coalesce(query, '') !~* '^\\s*(vacuum|analyze)') a",
    )
    .bind(APPLICATION_NAME)
    .fetch_one(db)
    .await
}

/// The session or replication slot that holds the database's cleanup horizon back the longest.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct HorizonHolder {
    /// `session` or `replication slot`.
    pub kind: String,
    /// The session's process id; None for a slot.
    pub pid: Option<i32>,
    /// The session's application or the slot's name.
    pub name: Option<String>,
    pub client_addr: Option<String>,
    /// How long its snapshot or transaction has been open, in seconds (for a slot, the age of its oldest
    /// transaction in transaction ids, as slots keep no time).
    pub age_seconds: Option<f64>,
    /// How many transaction ids behind the newest it is.
    pub xid_age: i32,
    pub state: Option<String>,
}

/// The oldest holder of the cleanup horizon in this database, if any holds it back at all: a session's
/// snapshot (`backend_xmin`) or transaction id (`backend_xid`), or a replication slot's `xmin` or
/// `catalog_xmin`. The service's own sessions are included, as any long transaction holds it back.
pub async fn oldest_holder(db: impl PgExecutor<'_>) -> Result<Option<HorizonHolder>, sqlx::Error> {
    sqlx::query_as(
        "select * from (
             select 'session' as kind, pid, application_name as name, host(client_addr) as client_addr,
                    extract(epoch from now() - coalesce(xact_start, backend_start))::float8 as age_seconds,
                    greatest(age(backend_xmin), age(backend_xid)) as xid_age, state
             from pg_stat_activity
             where datname = current_database() and pid <> pg_backend_pid()
               and (backend_xmin is not null or backend_xid is not null)
             union all
             select 'replication slot', null, slot_name::text, null, null,
                    greatest(age(xmin), age(catalog_xmin)), case when active then 'active' else 'inactive' end
             from pg_replication_slots
             where (database = current_database() or database is null)
               and (xmin is not null or catalog_xmin is not null)) h
         order by xid_age desc nulls last
         limit 1",
    )
    .fetch_optional(db)
    .await
}
