//! The Cloudflare response envelope, and the JSON body extractor that turns every decoding failure into
//! a clear 4xx.

use std::future::Future;
use std::pin::Pin;

use actix_web::error::PayloadError;
use actix_web::http::header::CONTENT_LENGTH;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, Kind};

/// The largest request body accepted (publishes of plans with larger messages excepted): a full batch of
/// Cloudflare's sizes whose text is all six-byte `\u` escapes still fits.
pub const MAX_REQUEST_BYTES: usize = 2 * 1024 * 1024;
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Cloudflare's success envelope, serialized straight from the result (no intermediate JSON tree: a
/// pull answer holds up to 100 bodies).
#[derive(Serialize)]
struct Envelope<T, I> {
    success: bool,
    errors: [(); 0],
    messages: [(); 0],
    result: T,
    #[serde(skip_serializing_if = "Option::is_none")]
    result_info: Option<I>,
}

pub fn ok(result: impl Serialize) -> HttpResponse {
    HttpResponse::Ok().json(Envelope::<_, ResultInfo> {
        success: true,
        errors: [],
        messages: [],
        result,
        result_info: None,
    })
}

/// A 201 with the envelope, for an object the request created.
pub fn created(result: impl Serialize) -> HttpResponse {
    HttpResponse::Created().json(Envelope::<_, ResultInfo> {
        success: true,
        errors: [],
        messages: [],
        result,
        result_info: None,
    })
}

pub use super::paging::ResultInfo;

pub fn ok_list(result: impl Serialize, info: ResultInfo) -> HttpResponse {
    HttpResponse::Ok().json(Envelope { success: true, errors: [], messages: [], result, result_info: Some(info) })
}

/// A JSON request body. An empty body reads as `{}`, so endpoints whose fields are all optional
/// accept a bare POST.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for ApiJson<T> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        let body = RawBody::from_request(req, payload);
        Box::pin(async move { decode(&body.await?.0).map(ApiJson) })
    }
}

/// A request body as received, for endpoints that decode it with `decode` into values borrowing from
/// it (publish keeps message bodies as slices of the request instead of copying each one). An empty
/// body reads as `{}`.
pub struct RawBody(pub web::Bytes);

impl FromRequest for RawBody {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        let bytes = web::Bytes::from_request(req, payload);
        Box::pin(async move {
            let bytes = within_time(bytes).await?.map_err(|e| match e.as_error::<PayloadError>() {
                Some(PayloadError::Overflow) => too_large(MAX_REQUEST_BYTES),
                _ if e.to_string().contains("overflow") => too_large(MAX_REQUEST_BYTES),
                _ => unreadable(e),
            })?;
            Ok(RawBody::of(bytes))
        })
    }
}

/// A publish's request body. Its limit is its account's plan's, known only once the caller is: a body
/// that says it is within the limit every plan allows is read at once, beside the authentication, as any
/// other; a larger one, or one of unknown length, waits for the handler to say how much it may read, so that
/// a body larger than the caller's plan allows is refused before it is read.
pub enum PublishBody {
    Read(RawBody),
    Waiting(Option<usize>, web::Payload),
}

impl FromRequest for PublishBody {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        if declared.is_some_and(|length| length <= MAX_REQUEST_BYTES) {
            let body = RawBody::from_request(req, payload);
            return Box::pin(async move { body.await.map(PublishBody::Read) });
        }
        let waiting = web::Payload::from_request(req, payload);
        Box::pin(async move { Ok(PublishBody::Waiting(declared, waiting.await.map_err(unreadable)?)) })
    }
}

impl PublishBody {
    /// The body, if it is at most `limit` bytes.
    pub async fn within(self, limit: usize) -> Result<RawBody, ApiError> {
        let (declared, payload) = match self {
            PublishBody::Read(body) => return Ok(body),
            PublishBody::Waiting(declared, payload) => (declared, payload),
        };
        if declared.is_some_and(|length| length > limit) {
            return Err(too_large(limit));
        }
        let bytes = within_time(payload.to_bytes_limited(limit)).await?.map_err(|_| too_large(limit))?;
        Ok(RawBody::of(bytes.map_err(unreadable)?))
    }
}

impl RawBody {
    /// An empty body reads as `{}`.
    fn of(bytes: web::Bytes) -> Self {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return RawBody(web::Bytes::from_static(b"{}"));
        }
        RawBody(bytes)
    }
}

/// The largest publish request an account whose batches may total `batch_bytes` may send: a batch whose
/// text is all six-byte `\u` escapes, with room for the rest of the request.
pub fn publish_request_bytes(batch_bytes: usize) -> usize {
    MAX_REQUEST_BYTES.max(batch_bytes * 6 + 64 * 1024)
}

/// A client that sends its body too slowly holds a connection; cut it off.
async fn within_time<T>(read: impl Future<Output = T>) -> Result<T, ApiError> {
    tokio::time::timeout(BODY_TIMEOUT, read).await.map_err(|_| {
        ApiError::new(Kind::BodyTimeout, format!("the request body took longer than {BODY_TIMEOUT:?} to arrive"))
    })
}

fn unreadable(e: impl std::fmt::Display) -> ApiError {
    ApiError::invalid(format!("could not read the request body: {e}"))
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(Kind::BatchTooLarge, format!("the request body is larger than {limit} bytes"))
}

/// Decodes a request body in one pass when it is valid; only a body that fails is read again, to tell
/// malformed JSON from a value of the wrong type and to name where the problem is.
pub fn decode<'a, T: Deserialize<'a>>(text: &'a [u8]) -> Result<T, ApiError> {
    // Every request body is an object; serde would otherwise read some structs from arrays.
    if text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        if let Ok(value) = serde_json::from_slice(text) {
            return Ok(value);
        }
    }
    Err(explain_failure::<T>(text))
}

fn explain_failure<'a, T: Deserialize<'a>>(text: &'a [u8]) -> ApiError {
    let malformed =
        |e: serde_json::Error| ApiError::new(Kind::MalformedJson, format!("malformed JSON in the request body: {e}"));
    // Check the syntax of the whole body first, so a truncated document is reported as malformed
    // rather than as whatever type error the typed decoding meets first.
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(text) {
        return malformed(e);
    }
    if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return ApiError::invalid("invalid request body: expected a JSON object");
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(_) => match de.end() {
            Err(e) => malformed(e),
            // The plain decoder refused what the path-tracking one took: report it plainly.
            Ok(()) => match serde_json::from_slice::<T>(text) {
                Err(e) => ApiError::invalid(format!("invalid request body: {e}")),
                Ok(_) => ApiError::invalid("invalid request body"),
            },
        },
        Err(err) => {
            let path = err.path().to_string();
            let inner = err.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                malformed(inner)
            } else if path == "." {
                ApiError::invalid(format!("invalid request body: {inner}"))
            } else {
                ApiError::invalid(format!("invalid request body at {path}: {inner}"))
            }
        }
    }
}
