//! Database set-up: how the service's pools are built, the migrations, and the readiness check.
//! Below everything that uses a connection, so the publisher and the API depend on it, not on startup.

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::{Executor, PgPool};

/// The schema's migrations. Migrations applied by a newer release are passed over rather than refused:
/// during a rolling upgrade the previous release's nodes start (and migrate) against the schema the next
/// one has already expanded (docs/deploy.md, "Upgrading").
pub static MIGRATOR: sqlx::migrate::Migrator =
    sqlx::migrate::Migrator { ignore_missing: true, ..sqlx::migrate!("./migrations") };

/// A pool of `size` connections to `url`.
pub async fn connect(url: &str, size: u32) -> Result<PgPool, sqlx::Error> {
    pool_options(size).connect(url).await
}

/// A connection idle for longer than this is checked with a round trip before use: the database may
/// have restarted meanwhile.
pub const CHECK_IDLE_CONNECTIONS_AFTER: Duration = Duration::from_secs(1);

/// How the service's pools are built.
pub fn pool_options(size: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(size)
        // While the database is unreachable, requests fail with a 503 after this long.
        .acquire_timeout(Duration::from_secs(3))
        // No idle or lifetime reaping: sqlx 0.8's reaper task can spin forever at 100% CPU after its
        // idle count races below zero between threads (launchbadge/sqlx#3645, seen here in a test).
        // Connections are few and long-lived anyway.
        .idle_timeout(None)
        .max_lifetime(None)
        // sqlx checks a connection with a round trip before handing it out, by default every time: a
        // round trip more per statement. Only a connection idle for a while (the database may have
        // restarted meanwhile) is checked; a broken busy one fails its statement and is then dropped
        // (sqlx checks every connection given back).
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                // An idle connection is checked with a round trip that also asks whether the server still
                // takes writes; one that reports read-only (its server was demoted) is discarded.
                if meta.idle_for > CHECK_IDLE_CONNECTIONS_AFTER {
                    return writable(&mut *conn).await;
                }
                Ok(true)
            })
        })
        // No JIT compilation: every statement here is short, but the planner overestimates a few (the
        // queue gauges' walk), and compiling those takes longer than running them.
        .after_connect(|conn, _| {
            Box::pin(async move {
                // Named, so that a node can tell the service's transactions from any other client's
                // (`horizon::writers_since`); and no JIT.
                conn.execute("set jit = off").await?;
                conn.execute(format!("set application_name = '{}'", super::horizon::APPLICATION_NAME).as_str()).await?;
                // After a failover the address may still lead to the old primary, now a standby: a
                // connection that can only read is refused, so requests fail with a 503 until it moves.
                if !writable(&mut *conn).await? {
                    return Err(sqlx::Error::Io(std::io::Error::other(
                        "the database is read-only (a standby, or a primary being demoted)",
                    )));
                }
                Ok(())
            })
        })
}

/// Whether the server behind a connection accepts writes: not in recovery, not read-only by default.
pub async fn writable(conn: impl sqlx::PgExecutor<'_>) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select not pg_is_in_recovery() and current_setting('default_transaction_read_only') = 'off' as "writable!""#
    )
    .fetch_one(conn)
    .await
}

/// The readiness check: the database answers and accepts writes.
pub async fn ping(pool: &PgPool) -> Result<bool, sqlx::Error> {
    writable(pool).await
}
