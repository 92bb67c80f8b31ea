//! The dashboard's static files, from `web/`, embedded in the binary (read from disk in debug builds,
//! so edits show on reload). Unknown paths fall through to the API's JSON 404.

use actix_web::{http::header, HttpRequest, HttpResponse};
use rust_embed::RustEmbed;

use crate::error::ApiError;

#[derive(RustEmbed)]
#[folder = "web/"]
struct Assets;

/// The dashboard may load only its own files and call only this server.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

pub async fn asset(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let path = req.path().trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    let readable = req.method() == actix_web::http::Method::GET || req.method() == actix_web::http::Method::HEAD;
    match Assets::get(path).filter(|_| readable) {
        Some(file) => Ok(HttpResponse::Ok()
            .content_type(file.metadata.mimetype())
            .insert_header((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
            .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
            .insert_header((header::REFERRER_POLICY, "no-referrer"))
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .body(file.data.into_owned())),
        None => super::no_such_endpoint(req).await,
    }
}
