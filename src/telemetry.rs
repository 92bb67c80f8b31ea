//! Tracing set-up (text or JSON lines, filtered by `SKIPLOCK_LOG`) and the per-request span.

use std::future::Future;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::HttpMessage;
use tracing::Instrument;
use tracing_subscriber::EnvFilter;

/// `filter` was validated with the rest of the settings.
pub fn init(filter: &str, json: bool) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
}

/// Runs each request in a span carrying a request id (the caller's `x-request-id` when it is sane,
/// else a new one, echoed in the answer), its route, and the account and queue once they are known.
/// One line is logged per request. Headers are never logged, so tokens never are.
pub fn request_span<S, B>(
    req: ServiceRequest,
    srv: &S,
) -> impl Future<Output = Result<ServiceResponse<B>, actix_web::Error>> + 'static
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
    S::Future: 'static,
    B: MessageBody,
{
    let request_id = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .map(str::to_owned)
        // From the thread's generator, not the OS: no system call per request.
        .unwrap_or_else(|| format!("{:032x}", rand::random::<u128>()));
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let span = tracing::info_span!(
        "request",
        request_id = %request_id,
        method = %req.method(),
        path = %req.path(),
        account_id = tracing::field::Empty,
        queue_id = tracing::field::Empty,
    );
    let started = Instant::now();
    let response = srv.call(req).instrument(span.clone());
    async move {
        let mut response = response.await?;
        if let Ok(value) = HeaderValue::from_str(&request_id) {
            response.headers_mut().insert(HeaderName::from_static(REQUEST_ID), value);
        }
        let status = response.status().as_u16();
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        span.in_scope(|| tracing::info!(status, elapsed_ms, "request"));
        Ok(response)
    }
}

const REQUEST_ID: &str = "x-request-id";

/// The request's id, for the handlers that record it (the audit log).
#[derive(Debug, Clone)]
pub struct RequestId(pub String);
