//! The HTTP surface: Cloudflare's `/client/v4` routes, health checks and the dashboard's files.
//! Handlers parse, authorize, call the store and shape the envelope; rules live in `queue`.

pub mod assets;
pub mod consumers;
pub mod envelope;
pub mod messages;
pub mod queues;
pub mod stats;
pub mod tokens;
pub mod views;

use actix_web::{web, HttpResponse};
use serde_json::json;

use crate::error::{codes, ApiError};
use crate::state::AppState;

pub fn routes(cfg: &mut web::ServiceConfig) {
    let queue = "/accounts/{account_id}/queues/{queue_id}";
    cfg.route("/healthz", web::get().to(healthz)).route("/readyz", web::get().to(readyz)).service(
        web::scope("/client/v4")
            .route("/user/tokens/verify", web::get().to(tokens::verify))
            .route("/accounts/{account_id}/tokens", web::post().to(tokens::create))
            .route("/accounts/{account_id}/tokens", web::get().to(tokens::list))
            .route("/accounts/{account_id}/tokens/{token_id}", web::delete().to(tokens::revoke))
            .route("/accounts/{account_id}/stats/queues", web::get().to(stats::all_queues))
            .route("/accounts/{account_id}/queues", web::post().to(queues::create))
            .route("/accounts/{account_id}/queues", web::get().to(queues::list))
            .route(queue, web::get().to(queues::get))
            .route(queue, web::put().to(queues::replace))
            .route(queue, web::patch().to(queues::patch))
            .route(queue, web::delete().to(queues::delete))
            .route(&format!("{queue}/metrics"), web::get().to(queues::metrics))
            .route(&format!("{queue}/stats"), web::get().to(stats::one_queue))
            .route(&format!("{queue}/purge"), web::post().to(queues::purge))
            .route(&format!("{queue}/purge"), web::get().to(queues::purge_status))
            .route(&format!("{queue}/consumers"), web::post().to(consumers::create))
            .route(&format!("{queue}/consumers"), web::get().to(consumers::list))
            .route(&format!("{queue}/consumers/{{consumer_id}}"), web::get().to(consumers::get))
            .route(&format!("{queue}/consumers/{{consumer_id}}"), web::put().to(consumers::update))
            .route(&format!("{queue}/consumers/{{consumer_id}}"), web::delete().to(consumers::delete))
            .route(
                &format!("{queue}/consumers/{{consumer_id}}/rotate_secret"),
                web::post().to(consumers::rotate_secret),
            )
            .route(&format!("{queue}/messages"), web::post().to(messages::publish))
            .route(&format!("{queue}/messages/batch"), web::post().to(messages::publish_batch))
            .route(&format!("{queue}/messages/pull"), web::post().to(messages::pull))
            .route(&format!("{queue}/messages/ack"), web::post().to(messages::ack))
            .route(&format!("{queue}/messages/peek"), web::post().to(messages::peek))
            .route(&format!("{queue}/messages/purge"), web::post().to(messages::purge))
            .default_service(web::to(no_such_endpoint)),
    );
}

pub async fn no_such_endpoint(req: actix_web::HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound(format!("no such endpoint: {} {}", req.method(), req.path()), codes::GENERIC))
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// Ready when the database answers within a second; recovers by itself when it is back.
async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    let check = tokio::time::timeout(std::time::Duration::from_secs(1), sqlx::query("select 1").execute(&state.pool));
    match check.await.unwrap_or(Err(sqlx::Error::PoolTimedOut)) {
        Ok(_) => HttpResponse::Ok().json(json!({"status": "ready"})),
        Err(err) => {
            tracing::warn!(error = %err, "readiness check: database unreachable");
            HttpResponse::ServiceUnavailable().json(json!({"status": "unavailable", "error": "database unreachable"}))
        }
    }
}
