//! Building and running the service: the database pool, migrations, the HTTP server and the
//! background tasks, all stopped by one cancellation token.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, App, HttpServer};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, Executor, PgPool};
use tokio_util::sync::CancellationToken;

use crate::activity::Activity;
use crate::api::{self, envelope::MAX_REQUEST_BYTES};
use crate::config::Settings;
use crate::dispatch::client::WebhookClient;
use crate::dispatch::guard::AddressGuard;
use crate::dispatch::{DispatchSettings, Dispatcher};
use crate::limits::Limits;
use crate::queue::lease::Signer;
use crate::state::AppState;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

pub async fn connect(settings: &Settings) -> Result<PgPool, sqlx::Error> {
    pool_options(settings.db_pool_size).connect(&settings.database_url).await
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
                if meta.idle_for > CHECK_IDLE_CONNECTIONS_AFTER {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        // No JIT compilation: every statement here is short, but the planner overestimates a few
        // (the queue gauges' walk over each queue's leased and delayed messages), and compiling those
        // took 0.5 to 0.8 s a time under load, more than running them.
        .after_connect(|conn, _| Box::pin(async move { conn.execute("set jit = off").await.map(|_| ()) }))
}

/// The webhook dispatcher for this node, as configured.
pub async fn dispatcher(pool: PgPool, settings: &Settings, activity: Arc<Activity>) -> Result<Dispatcher, sqlx::Error> {
    let signer = Signer::new(crate::store::server_key(&pool).await?);
    let dispatch = DispatchSettings { timeout: settings.webhook_timeout, ..DispatchSettings::default() };
    let guard = AddressGuard::new(settings.webhook_allow_cidrs.clone());
    let client = WebhookClient::new(guard, dispatch.timeout, dispatch.max_in_flight);
    Ok(Dispatcher::new(pool, signer, client, dispatch, activity))
}

/// The HTTP app, bound and ready to run.
pub struct Application {
    server: actix_web::dev::Server,
    local_addr: SocketAddr,
}

impl Application {
    /// Binds `bind` (port 0 picks a free port, as tests do) and builds the app on `pool`.
    pub async fn build(
        pool: PgPool,
        bind: SocketAddr,
        activity: Arc<Activity>,
        limits: Limits,
    ) -> anyhow::Result<Self> {
        let state = web::Data::new(AppState::load(pool, activity, limits).await?);
        let listener = TcpListener::bind(bind)?;
        let local_addr = listener.local_addr()?;
        let metrics = web::Data::new(state.activity.metrics.clone());
        let server = HttpServer::new(move || {
            App::new()
                .wrap_fn(crate::metrics::observe_request)
                .wrap_fn(crate::telemetry::request_span)
                .app_data(state.clone())
                .app_data(metrics.clone())
                .app_data(web::PayloadConfig::new(MAX_REQUEST_BYTES))
                .configure(api::routes)
                .default_service(web::to(api::assets::asset))
        })
        .disable_signals()
        .shutdown_timeout(10)
        // Slow clients: the request head must arrive within 5 s; bodies are bounded by the JSON reader.
        .client_request_timeout(std::time::Duration::from_secs(5))
        .keep_alive(std::time::Duration::from_secs(75))
        .listen(listener)?
        .run();
        Ok(Self { server, local_addr })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves until `stop` is cancelled, then stops accepting and lets in-flight requests finish.
    pub async fn run_until_stopped(self, stop: CancellationToken) -> std::io::Result<()> {
        let handle = self.server.handle();
        tokio::spawn(async move {
            stop.cancelled().await;
            handle.stop(true).await;
        });
        self.server.await
    }
}

/// Cancels `stop` on SIGTERM or SIGINT.
pub fn cancel_on_signals(stop: CancellationToken) {
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler installs");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutting down");
        stop.cancel();
    });
}
