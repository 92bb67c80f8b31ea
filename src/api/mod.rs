//! The HTTP surface: Cloudflare's `/client/v4` routes, health checks and the dashboard's files.
//! Handlers parse, authorize, call the store and shape the envelope; rules live in `queue`.

pub mod accounts;
pub mod admin;
pub mod assets;
pub mod attempts;
pub mod audit;
pub mod client;
pub mod consumers;
pub mod envelope;
pub mod extract;
pub mod flow;
pub mod messages;
pub mod observe;
pub mod paging;
pub mod queues;
pub mod redrive;
pub mod schedules;
pub mod stats;
pub mod subscriptions;
pub mod tokens;
pub mod topics;
pub mod usage;
pub mod views;

use actix_web::{web, HttpResponse};
use serde_json::json;

use crate::engine::Engine;
use crate::error::{ApiError, Kind};

/// One path and its methods. GET routes answer HEAD too; any other method is a 405 that names the
/// allowed ones.
macro_rules! resource {
    ($path:expr; $($method:ident => $handler:expr),+ $(,)?) => {{
        let allowed: &'static [&'static str] = &[$(resource!(@name $method)),+];
        let mut resource = web::resource($path);
        $(resource = resource!(@add resource, $method, $handler);)+
        resource.default_service(web::to(move |req: actix_web::HttpRequest| method_not_allowed(req, allowed)))
    }};
    (@name get) => { "GET, HEAD" };
    (@name post) => { "POST" };
    (@name put) => { "PUT" };
    (@name patch) => { "PATCH" };
    (@name delete) => { "DELETE" };
    (@add $resource:ident, get, $handler:expr) => {
        $resource.route(web::get().to($handler)).route(web::head().to($handler))
    };
    (@add $resource:ident, $method:ident, $handler:expr) => { $resource.route(web::$method().to($handler)) };
}

/// Routes nest by path prefix: actix matches each pattern with a dynamic segment by a regex, tried in
/// order, so a flat list of full paths runs a regex per route for every request; nested, a request
/// meets two or three.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(resource!("/healthz"; get => healthz))
        .service(resource!("/readyz"; get => readyz))
        .service(resource!("/openapi.json"; get => openapi))
        .service(
            web::scope("/client/v4")
                .service(resource!("/user/tokens/verify"; get => tokens::verify))
                .service(resource!("/user"; get => accounts::user))
                .service(resource!("/memberships"; get => accounts::memberships))
                .service(resource!("/accounts"; get => accounts::list))
                .service(web::scope("/accounts/{account_id}").configure(account_routes))
                .default_service(web::to(no_such_endpoint)),
        );
}

/// The operator API's routes, served on the admin address with the dashboard (whose operator view they
/// feed) and the health checks.
pub fn admin_routes(cfg: &mut web::ServiceConfig) {
    cfg.service(resource!("/healthz"; get => healthz))
        .service(resource!("/readyz"; get => readyz))
        .service(resource!("/openapi.json"; get => admin_openapi))
        .service(
            web::scope("/admin/v1")
                .service(resource!("/accounts"; get => admin::accounts::list, post => admin::accounts::create))
                .service(resource!("/accounts/{account_id}";
                    get => admin::accounts::get, patch => admin::accounts::update, delete => admin::accounts::delete))
                .service(resource!("/accounts/{account_id}/deletion"; get => admin::accounts::deletion))
                .service(resource!("/audit_logs"; get => audit::list_all))
                .service(resource!("/usage"; get => usage::export))
                .service(resource!("/plans"; get => admin::plans::list, post => admin::plans::create))
                .service(resource!("/plans/{plan_name}";
                    get => admin::plans::get, patch => admin::plans::update, delete => admin::plans::delete))
                .service(resource!("/accounts/{account_id}/suspend"; post => admin::accounts::suspend))
                .service(resource!("/accounts/{account_id}/resume"; post => admin::accounts::resume))
                .service(resource!("/accounts/{account_id}/tokens";
                    get => admin::tokens::list, post => admin::tokens::create))
                .service(resource!("/accounts/{account_id}/tokens/{token_id}"; delete => admin::tokens::revoke))
                .default_service(web::to(no_such_endpoint)),
        );
}

fn account_routes(cfg: &mut web::ServiceConfig) {
    // A queue's routes first: publishes, pulls and acks are nearly every request, and each route tried
    // before theirs is a regex run on them.
    cfg.service(web::scope("/queues/{queue_id}").configure(queue_routes))
        .service(resource!(""; get => accounts::get))
        .service(resource!("/limits"; get => accounts::limits))
        .service(resource!("/audit_logs"; get => audit::list))
        .service(resource!("/usage"; get => usage::account))
        .service(resource!("/tokens"; get => tokens::list, post => tokens::create))
        .service(resource!("/tokens/{token_id}"; delete => tokens::revoke))
        .service(resource!("/stats/queues"; get => stats::all_queues))
        .service(resource!("/queues"; get => queues::list, post => queues::create))
        .service(resource!("/schedules"; get => schedules::list, post => schedules::create))
        .service(resource!("/schedules/{schedule_id}";
            get => schedules::get, patch => schedules::update, delete => schedules::delete))
        .service(resource!("/schedules/{schedule_id}/pause"; post => schedules::pause))
        .service(resource!("/schedules/{schedule_id}/resume"; post => schedules::resume))
        .service(resource!("/event_subscriptions/subscriptions";
            get => subscriptions::list, post => subscriptions::create))
        .service(resource!("/event_subscriptions/subscriptions/{subscription_id}";
            get => subscriptions::get, patch => subscriptions::update, delete => subscriptions::delete))
        .service(resource!("/topics"; get => topics::list, post => topics::create))
        .service(web::scope("/topics/{topic_id}").configure(topic_routes))
        .default_service(web::to(no_such_endpoint));
}

fn topic_routes(cfg: &mut web::ServiceConfig) {
    cfg.service(resource!(""; get => topics::get, delete => topics::delete))
        .service(resource!("/bindings"; get => topics::bindings, post => topics::bind))
        .service(resource!("/bindings/{binding_id}"; delete => topics::unbind))
        .service(resource!("/messages"; post => topics::publish))
        .service(resource!("/route"; post => topics::route))
        .default_service(web::to(no_such_endpoint));
}

fn queue_routes(cfg: &mut web::ServiceConfig) {
    cfg.service(resource!("";
            get => queues::get, put => queues::replace, patch => queues::patch, delete => queues::delete))
        .service(resource!("/messages"; post => messages::publish))
        .service(resource!("/messages/batch"; post => messages::publish_batch))
        .service(resource!("/messages/pull"; post => messages::pull))
        .service(resource!("/messages/ack"; post => messages::ack))
        .service(resource!("/messages/extend"; post => messages::extend))
        .service(resource!("/messages/peek"; post => messages::peek))
        .service(resource!("/messages/purge"; post => messages::purge))
        .service(resource!("/metrics"; get => queues::metrics))
        .service(resource!("/stats"; get => stats::one_queue))
        .service(resource!("/purge"; get => queues::purge_status, post => queues::purge))
        .service(resource!("/redrive"; get => redrive::list, post => redrive::start))
        .service(resource!("/redrive/{redrive_id}"; get => redrive::get, delete => redrive::cancel))
        .service(resource!("/consumers"; get => consumers::list, post => consumers::create))
        .service(resource!("/consumers/{consumer_id}";
            get => consumers::get, put => consumers::update, delete => consumers::delete))
        .service(resource!("/consumers/{consumer_id}/rotate_secret"; post => consumers::rotate_secret))
        .service(resource!("/consumers/{consumer_id}/attempts"; get => attempts::of_consumer))
        .service(resource!("/consumers/{consumer_id}/test"; post => attempts::test_send))
        .service(resource!("/messages/{message_id}/attempts"; get => attempts::of_message))
        .service(resource!("/flow_keys"; get => flow::list))
        .service(resource!("/flow_keys/{flow_key}"; get => flow::get, put => flow::put, delete => flow::delete))
        .service(resource!("/flow_keys/{flow_key}/pause"; post => flow::pause))
        .service(resource!("/flow_keys/{flow_key}/resume"; post => flow::resume))
        .default_service(web::to(no_such_endpoint));
}

async fn method_not_allowed(req: actix_web::HttpRequest, allowed: &'static [&'static str]) -> HttpResponse {
    let allow = allowed.join(", ");
    let error = ApiError::new(
        Kind::MethodNotAllowed,
        format!("{} is not allowed on {}; use {allow}", req.method(), req.path()),
    );
    let mut response = actix_web::ResponseError::error_response(&error);
    response.headers_mut().insert(
        actix_web::http::header::ALLOW,
        actix_web::http::header::HeaderValue::from_str(&allow).expect("method names are valid header text"),
    );
    response
}

/// The OpenAPI document of this API.
async fn openapi() -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(include_str!("../../openapi/openapi.json"))
}

/// The OpenAPI document of the operator API.
async fn admin_openapi() -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(include_str!("../../openapi/admin.json"))
}

pub async fn no_such_endpoint(req: actix_web::HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::new(Kind::NoRoute, format!("No route for that URI: {} {}", req.method(), req.path())))
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// Ready when the database answers within a second and accepts writes; recovers by itself when it is
/// back (or a new primary answers at its address).
async fn readyz(state: web::Data<Engine>) -> HttpResponse {
    let check = tokio::time::timeout(std::time::Duration::from_secs(1), crate::store::pool::ping(&state.pool));
    match check.await.unwrap_or(Err(sqlx::Error::PoolTimedOut)) {
        Ok(true) => HttpResponse::Ok().json(json!({"status": "ready"})),
        Ok(false) => {
            tracing::warn!("readiness check: the database is read-only");
            HttpResponse::ServiceUnavailable().json(json!({"status": "unavailable", "error": "database read-only"}))
        }
        Err(err) => {
            tracing::warn!(error = %err, "readiness check: database unreachable");
            HttpResponse::ServiceUnavailable().json(json!({"status": "unavailable", "error": "database unreachable"}))
        }
    }
}
