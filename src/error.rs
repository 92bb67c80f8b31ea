//! `ApiError`: the one table of error kind -> HTTP status -> Cloudflare code, and the envelope every
//! failure is answered with. Internal causes are logged, never shown to the client.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Bad input the caller can fix: a 400 with a Cloudflare code where one fits.
    #[error("{message}")]
    BadRequest { code: u32, message: String },
    #[error("{0}")]
    PayloadTooLarge(String, u32),
    /// A rate limit or a full queue: retry after this many seconds.
    #[error("{0}")]
    TooManyRequests(String, u64),
    #[error("{0}")]
    RequestTimeout(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    /// A user-level endpoint asked with an account's token.
    #[error("Valid user-level authentication not found: this token belongs to an account, not a user")]
    NotAUserToken,
    #[error("{0}")]
    QuotaExceeded(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    NotFound(String, u32),
    /// A conflict that retrying cannot fix (a duplicate name, a second consumer).
    #[error("{0}")]
    Conflict(String, u32),
    /// A conflict that may clear by itself (a paused queue).
    #[error("{0}")]
    ConflictRetryable(String, u32),
    /// The database cannot be reached or is shutting down, or a transaction lost a conflict:
    /// nothing was applied and a retry will do.
    #[error("the database is unavailable; retry shortly")]
    Unavailable(String),
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

pub mod codes {
    /// Cloudflare's routing codes: clients read 10000 as an authentication failure, so a path that is
    /// not served answers these instead.
    pub const NO_ROUTE: u32 = 7000;
    pub const INVALID_OBJECT_ID: u32 = 7003;
    /// What Cloudflare answers on user-level endpoints to a token owned by an account.
    pub const NOT_A_USER_TOKEN: u32 = 9109;
    pub const GENERIC: u32 = 10000;
    pub const QUEUE_NOT_FOUND: u32 = 10104;
    pub const UNAUTHORIZED: u32 = 10106;
    pub const MALFORMED_ID: u32 = 10107;
    pub const INVALID_DELAY: u32 = 10202;
    pub const MESSAGE_TOO_LARGE: u32 = 10204;
    pub const BATCH_TOO_LARGE: u32 = 10205;
    pub const TOO_MANY_MESSAGES: u32 = 10206;
    pub const INVALID_BODY: u32 = 10207;
    pub const MALFORMED_JSON: u32 = 10208;
    pub const DUPLICATE_NAME: u32 = 11009;
    pub const DELIVERY_PAUSED: u32 = 11010;
    pub const NO_PULL_CONSUMER: u32 = 11011;
    pub const CONSUMER_EXISTS: u32 = 11012;
    pub const RATE_LIMITED: u32 = 11013;
    pub const QUOTA_EXCEEDED: u32 = 11014;
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::BadRequest { code: codes::INVALID_BODY, message: message.into() }
    }
    pub fn bad_request_code(code: u32, message: impl Into<String>) -> Self {
        Self::BadRequest { code, message: message.into() }
    }
    pub fn queue_not_found() -> Self {
        Self::NotFound("queue not found".into(), codes::QUEUE_NOT_FOUND)
    }
    pub fn not_found(what: &str) -> Self {
        Self::NotFound(format!("{what} not found"), codes::GENERIC)
    }
    /// Cloudflare's answer to a path whose identifier is malformed or names nothing this token can see.
    pub fn no_route_to(path: &str) -> Self {
        Self::NotFound(
            format!("Could not route to {path}, perhaps your object identifier is invalid?"),
            codes::INVALID_OBJECT_ID,
        )
    }

    fn code(&self) -> u32 {
        match self {
            Self::BadRequest { code, .. } => *code,
            Self::PayloadTooLarge(_, code)
            | Self::NotFound(_, code)
            | Self::Conflict(_, code)
            | Self::ConflictRetryable(_, code) => *code,
            Self::Unauthorized(_) | Self::Forbidden(_) => codes::UNAUTHORIZED,
            Self::NotAUserToken => codes::NOT_A_USER_TOKEN,
            Self::TooManyRequests(..) => codes::RATE_LIMITED,
            Self::QuotaExceeded(_) => codes::QUOTA_EXCEEDED,
            Self::MethodNotAllowed(_) => codes::GENERIC,
            Self::RequestTimeout(_) => codes::GENERIC,
            Self::Unavailable(_) | Self::Internal(_) => codes::GENERIC,
        }
    }

    /// The SDKs retry 408/409/429/5xx; answers that a retry cannot fix say so.
    fn retry_cannot_help(&self) -> bool {
        !matches!(
            self,
            Self::ConflictRetryable(..)
                | Self::TooManyRequests(..)
                | Self::RequestTimeout(_)
                | Self::Unavailable(_)
                | Self::Internal(_)
        )
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        Self::from_database(&err)
    }
}

impl From<crate::publisher::PublishError> for ApiError {
    fn from(err: crate::publisher::PublishError) -> Self {
        match err {
            crate::publisher::PublishError::Database(db) => Self::from_database(&db),
            crate::publisher::PublishError::Stopped => Self::Unavailable("the service is shutting down".into()),
        }
    }
}

impl ApiError {
    pub fn from_database(err: &sqlx::Error) -> Self {
        let sqlstate = match err {
            sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
            _ => None,
        };
        let unavailable = || Self::Unavailable(err.to_string());
        match (err, sqlstate.as_deref()) {
            (
                sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed,
                _,
            ) => unavailable(),
            // Serialization failures and deadlocks: nothing was applied and a retry will succeed.
            (_, Some("40001" | "40P01")) => unavailable(),
            // The database shutting down or starting (admin_shutdown, crash_shutdown, cannot_connect_now).
            (_, Some("57P01" | "57P02" | "57P03")) => unavailable(),
            // Text PostgreSQL cannot store, such as a NUL character.
            (_, Some("22021" | "22P05")) => {
                Self::bad_request("text in the request cannot be stored: NUL characters are not allowed")
            }
            _ => Self::Internal(anyhow::anyhow!("database error: {err}")),
        }
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(err: crate::store::StoreError) -> Self {
        use crate::store::StoreError;
        match err {
            StoreError::DuplicateQueueName(name) => {
                Self::Conflict(format!("a queue named '{name}' already exists in this account"), codes::DUPLICATE_NAME)
            }
            StoreError::ConsumerExists => Self::Conflict(
                "this queue already has a consumer; delete it before adding another".into(),
                codes::CONSUMER_EXISTS,
            ),
            StoreError::QueueGone => Self::queue_not_found(),
            StoreError::Database(db) => db.into(),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::PayloadTooLarge(..) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::TooManyRequests(..) => StatusCode::TOO_MANY_REQUESTS,
            Self::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::Forbidden(_) | Self::QuotaExceeded(_) | Self::NotAUserToken => StatusCode::FORBIDDEN,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::NotFound(..) => StatusCode::NOT_FOUND,
            Self::Conflict(..) | Self::ConflictRetryable(..) => StatusCode::CONFLICT,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            Self::Internal(cause) => tracing::error!(error = ?cause, "request failed"),
            Self::Unavailable(cause) => tracing::warn!(error = %cause, "database unavailable"),
            _ => {}
        }
        let mut response = HttpResponse::build(self.status_code());
        if self.retry_cannot_help() {
            response.insert_header(("x-should-retry", "false"));
        }
        match self {
            Self::Unavailable(_) => {
                response.insert_header((header::RETRY_AFTER, "1"));
            }
            Self::TooManyRequests(_, seconds) => {
                response.insert_header((header::RETRY_AFTER, seconds.max(&1).to_string()));
            }
            _ => {}
        }
        response.json(json!({
            "success": false,
            "errors": [{"code": self.code(), "message": self.to_string()}],
            "messages": [],
            "result": null,
        }))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
