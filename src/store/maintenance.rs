//! The statements of the background upkeep: table statistics and vacuum.

use sqlx::PgPool;

/// A table's dead rows, and the rows inserted since it was last vacuumed by anyone (any node, autovacuum
/// or an operator).
pub async fn dead_and_inserted_since_vacuum(pool: &PgPool, table: &str) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as(
        "select coalesce(max(n_dead_tup), 0), coalesce(max(n_ins_since_vacuum), 0)
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

/// Of `tables`, those whose files now hold at least twice the pages they held when last vacuumed or
/// analyzed, and at least `min_pages` more. The files' sizes are current, where the statistics views
/// lag by up to a second.
pub async fn outgrown_statistics(pool: &PgPool, tables: &[&str], min_pages: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "select c.relname::text from pg_class c
         where c.oid = any($1::text[]::regclass[])
           and pg_relation_size(c.oid) / current_setting('block_size')::int8 >= 2 * c.relpages::int8 + $2",
    )
    .bind(tables)
    .bind(min_pages)
    .fetch_all(pool)
    .await
}

/// Gathers `table`'s planner statistics again (a table named by the caller's constant), skipping it
/// while another node or autovacuum does.
pub async fn analyze(pool: &PgPool, table: &str) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(&format!("analyze (skip_locked) {table}")).execute(pool).await.map(|_| ())
}
