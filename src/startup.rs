//! The composition root: builds a whole node for given roles (the HTTP app, the dispatcher and every
//! background task, all stopped by one cancellation token). The command line and the tests use it alike.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use actix_web::{web, App, HttpServer};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::api::client::TrustedProxies;
use crate::api::{self, envelope::MAX_REQUEST_BYTES};
use crate::config::Settings;
use crate::dispatch::client::WebhookClient;
use crate::dispatch::guard::AddressGuard;
use crate::dispatch::{DispatchSettings, Dispatcher};
use crate::engine::background::Cadences;
use crate::engine::sealing::Reseal;
use crate::engine::Engine;
use crate::metrics::Metrics;

/// The roles a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// The HTTP API and the dashboard.
    Api,
    /// Webhook delivery.
    Dispatcher,
}

/// A webhook dispatcher on `engine`.
pub fn dispatcher(engine: &Arc<Engine>, settings: DispatchSettings, guard: AddressGuard) -> Dispatcher {
    let client = WebhookClient::new(guard, settings.timeout, settings.max_in_flight);
    Dispatcher::new(engine.clone(), client, settings)
}

/// A running node: every background task of its roles, its HTTP app and dispatcher, all stopped by one
/// token.
pub struct Node {
    pub engine: Arc<Engine>,
    /// Where the API listens, when the node runs it.
    pub api_addr: Option<SocketAddr>,
    /// Where the operator API listens, when the node runs the API.
    pub admin_addr: Option<SocketAddr>,
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
        let keys = settings.keyring()?;
        // Secrets go under the current key before the node serves (and a database whose secrets this node
        // cannot open is refused here, saying which key it needs).
        let sealed = crate::engine::sealing::seal_at_rest(&pool, &keys, Reseal::Clear).await?;
        match keys.current_id() {
            Some(key) => tracing::info!(key, consumers = sealed.consumers, "webhook secrets sealed at rest"),
            None => tracing::warn!("SKIPLOCK_SECRET_KEY is not set: webhook signing secrets are stored in the clear"),
        }
        let engine = Engine::new(pool.clone(), Arc::new(Metrics::default()), settings.limits, keys).await?;
        let limits = &settings.limits;
        // Every limit in force, said once, so that one holding a tenant back is never a surprise.
        tracing::info!(
            requests_per_second = limits.rate_per_second,
            request_burst = limits.rate_burst,
            published_per_second = limits.publish_rate_per_second,
            queues_per_account = limits.max_queues_per_account,
            backlog_bytes_per_queue = limits.max_backlog_bytes_per_queue,
            waiting_pulls = limits.max_waiting_pulls,
            message_bytes = limits.max_message_bytes,
            retention_seconds = limits.max_retention_seconds,
            "limits per account where its plan sets none (0: none; rates across the nodes)"
        );
        let mut tasks = tokio::task::JoinSet::new();
        let metrics_server = api::observe::serve(engine.metrics.clone(), pool.clone(), settings.metrics_bind)?;
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
        let cadences = Cadences {
            retention_sweep: settings.retention_sweep_every,
            activity_flush: settings.activity_flush_every,
            queue_gauges: settings.queue_gauges_every,
            max_queue_series: settings.metrics_max_queues,
            rotation: settings.rotation,
            attempts: settings.webhook_attempts,
        };
        engine.spawn_background(&mut tasks, cadences, &stop);
        let dispatch = DispatchSettings { timeout: settings.webhook_timeout, ..DispatchSettings::default() };
        let guard = AddressGuard::new(settings.webhook_allow_cidrs.clone());
        let dispatcher = Arc::new(dispatcher(&engine, dispatch, guard));
        // Test sends go out through the node's dispatcher, which an API-only node builds for them alone.
        engine.attempt_log.set_test_sender(dispatcher.clone());
        if roles.contains(&Role::Dispatcher) {
            tracing::info!("dispatching webhooks");
            tasks.spawn(crate::dispatch::run(dispatcher, stop.clone()));
        }
        let (mut api_addr, mut admin_addr) = (None, None);
        if roles.contains(&Role::Api) {
            let proxies = TrustedProxies(settings.trusted_proxies.clone());
            let app = Application::build(&engine, settings.bind, api::routes, proxies.clone())?;
            api_addr = Some(app.local_addr());
            tracing::info!(address = %app.local_addr(), "serving the API");
            let admin = Application::build(&engine, settings.admin_bind, api::admin_routes, proxies)?;
            admin_addr = Some(admin.local_addr());
            tracing::info!(address = %admin.local_addr(), "serving the operator API");
            for (app, what) in [(app, "the API server"), (admin, "the operator API server")] {
                let app_stop = stop.clone();
                tasks.spawn(async move {
                    if let Err(err) = app.run_until_stopped(app_stop.clone()).await {
                        tracing::error!(error = %err, "{what} failed");
                    }
                    // The node stops with its API.
                    app_stop.cancel();
                });
            }
        }
        Ok(Node { engine, api_addr, admin_addr, metrics_addr, tasks, stop })
    }

    /// Waits until the node is stopped and every task has finished.
    pub async fn wait(mut self) {
        self.stop.cancelled().await;
        while self.tasks.join_next().await.is_some() {}
        self.engine.pool.close().await;
    }
}

/// The HTTP app, bound and ready to run.
pub struct Application {
    server: actix_web::dev::Server,
    local_addr: SocketAddr,
}

impl Application {
    /// Binds `bind` (port 0 picks a free port, as tests do) and builds the app of `routes` on `engine`,
    /// with the dashboard's files for any other path; `proxies` are believed on the client's address.
    pub fn build(
        engine: &Arc<Engine>,
        bind: SocketAddr,
        routes: fn(&mut web::ServiceConfig),
        proxies: TrustedProxies,
    ) -> anyhow::Result<Self> {
        let state = web::Data::from(engine.clone());
        let listener = TcpListener::bind(bind)?;
        let local_addr = listener.local_addr()?;
        let metrics = web::Data::new(engine.metrics.clone());
        let proxies = web::Data::new(proxies);
        let server = HttpServer::new(move || {
            App::new()
                .wrap_fn(api::observe::observe_request)
                .wrap_fn(crate::telemetry::request_span)
                .app_data(state.clone())
                .app_data(metrics.clone())
                .app_data(proxies.clone())
                .app_data(web::PayloadConfig::new(MAX_REQUEST_BYTES))
                .configure(routes)
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
