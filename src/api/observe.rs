//! The request metrics middleware and the `/metrics` listener, served on an address of its own.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::{web, App, HttpResponse, HttpServer};
use sqlx::PgPool;

use crate::metrics::Metrics;

/// Counts and times every request under its route pattern (never the raw path, whose ids would
/// explode the label set).
pub fn observe_request<S, B>(
    req: ServiceRequest,
    srv: &S,
) -> impl Future<Output = Result<ServiceResponse<B>, actix_web::Error>> + 'static
where
    S: actix_web::dev::Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
    S::Future: 'static,
    B: MessageBody,
{
    let metrics = req.app_data::<web::Data<Arc<Metrics>>>().cloned();
    let method = req.method().to_string();
    let started = Instant::now();
    let response = srv.call(req);
    async move {
        let response = response.await?;
        if let Some(metrics) = metrics {
            // After routing, the pattern comes from the resource that matched, without matching the
            // path against every pattern again.
            let route = response.request().match_pattern().unwrap_or_else(|| "unmatched".into());
            let status = format!("{}xx", response.status().as_u16() / 100);
            metrics.http_requests.with_label_values(&[&method, &route, &status]).inc();
            metrics.http_duration.with_label_values(&[&method, &route]).observe(started.elapsed().as_secs_f64());
        }
        Ok(response)
    }
}

/// The metrics server and the address it listens on.
pub struct MetricsServer {
    pub server: actix_web::dev::Server,
    pub addr: std::net::SocketAddr,
}

/// Serves `/metrics` on its own address, so it can be firewalled apart from the API.
pub fn serve(metrics: Arc<Metrics>, pool: PgPool, bind: std::net::SocketAddr) -> std::io::Result<MetricsServer> {
    let data = web::Data::new((metrics, pool));
    let listener = std::net::TcpListener::bind(bind)?;
    let addr = listener.local_addr()?;
    let server = HttpServer::new(move || {
        App::new().app_data(data.clone()).route(
            "/metrics",
            web::get().to(|data: web::Data<(Arc<Metrics>, PgPool)>| async move {
                HttpResponse::Ok()
                    .content_type("text/plain; version=0.0.4; charset=utf-8")
                    .body(data.0.render(Some(&data.1)))
            }),
        )
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(2)
    .listen(listener)?
    .run();
    Ok(MetricsServer { server, addr })
}
