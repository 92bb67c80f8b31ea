//! The composition root: builds a whole node for given roles (the HTTP app, the dispatcher and every
//! background task, all stopped by one cancellation token). The command line and the tests use it alike.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use actix_web::{web, App, HttpServer};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::activity::Activity;
use crate::api::{self, envelope::MAX_REQUEST_BYTES};
use crate::auth::{Gate, Verifier};
use crate::backlog::BacklogCache;
use crate::config::Settings;
use crate::delivery::Delivery;
use crate::dispatch::client::WebhookClient;
use crate::dispatch::guard::AddressGuard;
use crate::dispatch::{DispatchSettings, Dispatcher};
use crate::limits::{Limits, RateLimiter};
use crate::maintenance;
use crate::metrics::{self, Metrics};
use crate::publisher::Publisher;
use crate::queue::lease::Signer;
use crate::state::AppState;
use crate::wakeups::Wakeups;

/// What the parts of one node share: the pool, the metrics and activity counters, the backlog cache,
/// the delivery core and the wake-ups (one LISTEN connection per node).
#[derive(Clone)]
pub struct Shared {
    pub pool: PgPool,
    pub metrics: Arc<Metrics>,
    pub activity: Arc<Activity>,
    pub backlog: Arc<BacklogCache>,
    pub delivery: Arc<Delivery>,
    pub wakeups: Arc<Wakeups>,
}

impl Shared {
    pub fn new(pool: PgPool) -> Self {
        Self::with_metrics(pool, Arc::new(Metrics::default()))
    }

    /// Parts whose events count in `metrics`.
    pub fn with_metrics(pool: PgPool, metrics: Arc<Metrics>) -> Self {
        let activity = Arc::new(Activity::new(metrics.clone()));
        let backlog = Arc::new(BacklogCache::default());
        let delivery = Arc::new(Delivery::new(pool.clone(), activity.clone(), backlog.clone()));
        let wakeups = Arc::new(Wakeups::new(metrics.clone()));
        Self { pool, metrics, activity, backlog, delivery, wakeups }
    }
}

/// The roles a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// The HTTP API and the dashboard.
    Api,
    /// Webhook delivery.
    Dispatcher,
}

/// A webhook dispatcher on `shared`'s pool.
pub async fn dispatcher(
    shared: &Shared,
    settings: DispatchSettings,
    guard: AddressGuard,
) -> Result<Dispatcher, sqlx::Error> {
    let signer = Signer::new(crate::store::server_key(&shared.pool).await?);
    let client = WebhookClient::new(guard, settings.timeout, settings.max_in_flight);
    let parts = (shared.activity.clone(), shared.delivery.clone(), shared.wakeups.clone());
    Ok(Dispatcher::new(shared.pool.clone(), signer, client, settings, parts))
}

/// A running node: every background task of its roles, its HTTP app and dispatcher, all stopped by one
/// token.
pub struct Node {
    pub shared: Shared,
    /// Where the API listens, when the node runs it.
    pub api_addr: Option<SocketAddr>,
    pub metrics_addr: SocketAddr,
    tasks: tokio::task::JoinSet<()>,
    stop: CancellationToken,
}

impl Node {
    /// Builds and starts the whole service for `roles` on `pool`.
    pub async fn start(
        settings: &Settings,
        roles: &[Role],
        pool: PgPool,
        stop: CancellationToken,
    ) -> anyhow::Result<Node> {
        let shared = Shared::new(pool.clone());
        let mut tasks = tokio::task::JoinSet::new();
        let metrics_server = metrics::serve(shared.metrics.clone(), pool.clone(), settings.metrics_bind)?;
        let metrics_addr = metrics_server.addr;
        let metrics_stop = stop.clone();
        let metrics_handle = metrics_server.server.handle();
        tasks.spawn(async move {
            metrics_stop.cancelled().await;
            metrics_handle.stop(true).await;
        });
        tasks.spawn(async move {
            let _ = metrics_server.server.await;
        });
        tasks.spawn(metrics::run_queue_gauges(
            shared.metrics.clone(),
            pool.clone(),
            settings.metrics_max_queues,
            settings.queue_gauges_every,
            stop.clone(),
        ));
        let (flusher, flush_pool, flush_stop, every) =
            (shared.activity.clone(), pool.clone(), stop.clone(), settings.activity_flush_every);
        tasks.spawn(async move { flusher.run(flush_pool, every, flush_stop).await });
        tasks.spawn(maintenance::run(
            pool.clone(),
            shared.activity.clone(),
            settings.retention_sweep_every,
            stop.clone(),
        ));
        for table in maintenance::MessageTable::ALL {
            tasks.spawn(maintenance::run_vacuum(pool.clone(), table, stop.clone()));
        }
        tasks.spawn(maintenance::run_count_folding(pool.clone(), stop.clone()));
        let (backlog, backlog_pool, backlog_stop) = (shared.backlog.clone(), pool.clone(), stop.clone());
        tasks.spawn(async move { backlog.run(backlog_pool, backlog_stop).await });
        tasks.spawn(maintenance::run_statistics(pool.clone(), shared.activity.clone(), stop.clone()));
        tasks.spawn(crate::redrive::run(pool.clone(), shared.metrics.clone(), stop.clone()));
        let wakeups = shared.wakeups.clone();
        wakeups.set_max_per_account(settings.limits.max_waiting_pulls);
        if let Some(listener) = wakeups.start_listening(pool.clone(), stop.clone()) {
            tasks.spawn(async move {
                let _ = listener.await;
            });
        }
        let waits_stop = stop.clone();
        tasks.spawn(async move {
            waits_stop.cancelled().await;
            wakeups.stop_waits();
        });
        if roles.contains(&Role::Dispatcher) {
            let dispatch = DispatchSettings { timeout: settings.webhook_timeout, ..DispatchSettings::default() };
            let guard = AddressGuard::new(settings.webhook_allow_cidrs.clone());
            let dispatcher = dispatcher(&shared, dispatch, guard).await?;
            tracing::info!("dispatching webhooks");
            tasks.spawn(crate::dispatch::run(Arc::new(dispatcher), stop.clone()));
        }
        let mut api_addr = None;
        if roles.contains(&Role::Api) {
            let app = Application::build(&shared, settings.bind, settings.limits).await?;
            api_addr = Some(app.local_addr());
            tracing::info!(address = %app.local_addr(), "serving the API");
            let app_stop = stop.clone();
            tasks.spawn(async move {
                if let Err(err) = app.run_until_stopped(app_stop.clone()).await {
                    tracing::error!(error = %err, "the API server failed");
                }
                // The node stops with its API.
                app_stop.cancel();
            });
        }
        Ok(Node { shared, api_addr, metrics_addr, tasks, stop })
    }

    /// Waits until the node is stopped and every task has finished.
    pub async fn wait(mut self) {
        self.stop.cancelled().await;
        while self.tasks.join_next().await.is_some() {}
        self.shared.pool.close().await;
    }
}

/// The HTTP app, bound and ready to run.
pub struct Application {
    server: actix_web::dev::Server,
    local_addr: SocketAddr,
}

impl Application {
    /// Binds `bind` (port 0 picks a free port, as tests do) and builds the app on `pool`.
    pub async fn build(shared: &Shared, bind: SocketAddr, limits: Limits) -> anyhow::Result<Self> {
        let pool = shared.pool.clone();
        let gate = web::Data::new(Gate {
            verifier: Verifier::new(pool.clone()),
            rate: RateLimiter::requests(&limits),
            limits,
        });
        let state = web::Data::new(AppState {
            signer: Signer::new(crate::store::server_key(&pool).await?),
            publisher: Publisher::start(pool.clone(), shared.wakeups.clone()),
            delivery: shared.delivery.clone(),
            wakeups: shared.wakeups.clone(),
            backlog: shared.backlog.clone(),
            activity: shared.activity.clone(),
            limits,
            publish_rate: RateLimiter::messages(&limits),
            pool,
        });
        let listener = TcpListener::bind(bind)?;
        let local_addr = listener.local_addr()?;
        let metrics = web::Data::new(state.activity.metrics.clone());
        let server = HttpServer::new(move || {
            App::new()
                .wrap_fn(crate::metrics::observe_request)
                .wrap_fn(crate::telemetry::request_span)
                .app_data(state.clone())
                .app_data(gate.clone())
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
