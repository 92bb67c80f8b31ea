//! The statements of the background upkeep: table statistics and vacuum.

use sqlx::PgPool;

/// A table's dead rows and rows inserted since the statistics were last reset.
pub async fn dead_and_inserted(pool: &PgPool, table: &str) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as(
        "select coalesce(max(n_dead_tup), 0), coalesce(max(n_tup_ins), 0)
         from pg_stat_user_tables where relid = $1::regclass",
    )
    .bind(table)
    .fetch_one(pool)
    .await
}

/// Vacuums `table` (one of the message tables, named by the caller's constant), skipping it while
/// another node vacuums it. VACUUM refuses a transaction block; raw_sql sends it alone.
pub async fn vacuum(pool: &PgPool, table: &str) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(&format!("vacuum (skip_locked) {table}")).execute(pool).await.map(|_| ())
}
