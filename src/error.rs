//! `ApiError`: what went wrong (a `Kind`) and a message that says what to fix. `Kind::row` is the one
//! table of kind -> HTTP status, Cloudflare code and whether a retry can help; call sites name a kind,
//! never a number. Internal causes are logged, never shown to the client.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde_json::json;

use crate::queue::account::AccountStatus;

/// Every kind of failure the API answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    InvalidInput,
    MalformedJson,
    InvalidDelay,
    MalformedQueueId,
    /// A malformed consumer or token id in the path.
    MalformedObjectId,
    MessageTooLarge,
    BatchTooLarge,
    TooManyMessages,
    Unauthorized,
    MissingScope,
    /// A user-level endpoint asked with an account's token.
    NotAUserToken,
    QueueQuota,
    QueueNotFound,
    /// Another object of the account (a consumer, a token) that does not exist.
    NotFound,
    /// A path no route serves.
    NoRoute,
    /// A path naming another account or a malformed account id.
    NoRouteToObject,
    MethodNotAllowed,
    BodyTimeout,
    DuplicateQueueName,
    ConsumerExists,
    NoPullConsumer,
    DeliveryPaused,
    /// A second redrive task for a queue that has one running, or a redrive of a queue into itself.
    RedriveConflict,
    /// An operator's change the current state refuses: a plan name taken, a plan accounts are on, a deleted
    /// account suspended, resumed or given a token.
    Conflict,
    RateLimited,
    QueueFull,
    /// A quota of the account's plan is used up (`queue::quota`): a retry helps only once it resets.
    QuotaExceeded,
    /// The account is suspended by the operator.
    AccountSuspended,
    /// A token used outside its `not_before`..`expires_on` window.
    TokenOutsideWindow,
    /// A token used from an address its `condition.request_ip` refuses.
    AddressRefused,
    /// The database cannot be reached, is shutting down, or a transaction lost a conflict: nothing was
    /// applied.
    Unavailable,
    Internal,
}

/// One row of the table.
pub struct Row {
    pub status: StatusCode,
    /// Cloudflare's error code.
    pub code: u32,
    /// The SDKs retry 408/409/429/5xx; answers that a retry cannot fix say so with `x-should-retry`.
    pub retry_can_help: bool,
}

impl Kind {
    pub fn row(self) -> Row {
        use StatusCode as S;
        let (status, code, retry_can_help) = match self {
            Kind::InvalidInput => (S::BAD_REQUEST, 10207, false),
            Kind::MalformedJson => (S::BAD_REQUEST, 10208, false),
            Kind::InvalidDelay => (S::BAD_REQUEST, 10202, false),
            Kind::MalformedQueueId => (S::BAD_REQUEST, 10107, false),
            Kind::MalformedObjectId => (S::BAD_REQUEST, 7003, false),
            Kind::MessageTooLarge => (S::PAYLOAD_TOO_LARGE, 10204, false),
            Kind::BatchTooLarge => (S::PAYLOAD_TOO_LARGE, 10205, false),
            Kind::TooManyMessages => (S::PAYLOAD_TOO_LARGE, 10206, false),
            Kind::Unauthorized => (S::UNAUTHORIZED, 10106, false),
            Kind::MissingScope => (S::FORBIDDEN, 10106, false),
            Kind::NotAUserToken => (S::FORBIDDEN, 9109, false),
            Kind::QueueQuota => (S::FORBIDDEN, 11014, false),
            Kind::QueueNotFound => (S::NOT_FOUND, 10104, false),
            Kind::NotFound => (S::NOT_FOUND, 10000, false),
            Kind::NoRoute => (S::NOT_FOUND, 7000, false),
            Kind::NoRouteToObject => (S::NOT_FOUND, 7003, false),
            Kind::MethodNotAllowed => (S::METHOD_NOT_ALLOWED, 10000, false),
            Kind::BodyTimeout => (S::REQUEST_TIMEOUT, 10000, true),
            Kind::DuplicateQueueName => (S::CONFLICT, 11009, false),
            Kind::ConsumerExists => (S::CONFLICT, 11012, false),
            Kind::NoPullConsumer => (S::CONFLICT, 11011, false),
            Kind::DeliveryPaused => (S::CONFLICT, 11010, true),
            Kind::RedriveConflict => (S::CONFLICT, 11015, false),
            Kind::Conflict => (S::CONFLICT, 10000, false),
            Kind::RateLimited => (S::TOO_MANY_REQUESTS, 11013, true),
            Kind::QueueFull => (S::TOO_MANY_REQUESTS, 11013, true),
            Kind::QuotaExceeded => (S::TOO_MANY_REQUESTS, 11017, false),
            Kind::AccountSuspended => (S::FORBIDDEN, 11016, false),
            Kind::TokenOutsideWindow => (S::UNAUTHORIZED, 10001, false),
            Kind::AddressRefused => (S::FORBIDDEN, 9109, false),
            Kind::Unavailable => (S::SERVICE_UNAVAILABLE, 10000, true),
            Kind::Internal => (S::INTERNAL_SERVER_ERROR, 10000, true),
        };
        Row { status, code, retry_can_help }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub kind: Kind,
    /// Shown to the client.
    pub message: String,
    /// Seconds for the `Retry-After` header.
    pub retry_after: Option<u64>,
    /// Logged, never shown.
    cause: Option<anyhow::Error>,
}

impl ApiError {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), retry_after: None, cause: None }
    }

    /// Bad input the caller can fix.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Kind::InvalidInput, message)
    }

    pub fn queue_not_found() -> Self {
        Self::new(Kind::QueueNotFound, "queue not found")
    }

    /// Every request of a suspended account gets this, until the operator resumes it.
    pub fn account_suspended() -> Self {
        Self::new(
            Kind::AccountSuspended,
            "account_suspended: this account is suspended; its requests are refused and its deliveries stopped \
             until the operator resumes it",
        )
    }

    /// Every request of an account being deleted gets this: its tokens are gone.
    pub fn account_deleted() -> Self {
        Self::new(Kind::Unauthorized, "account_deleted: this account is deleted; its tokens no longer work")
    }

    /// Why a refused account's requests are refused.
    pub fn account_refused(status: AccountStatus) -> Self {
        match status {
            AccountStatus::Deleting | AccountStatus::Deleted => Self::account_deleted(),
            AccountStatus::Active | AccountStatus::Suspended => Self::account_suspended(),
        }
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(Kind::NotFound, format!("{what} not found"))
    }

    /// Cloudflare's answer to a path whose identifier is malformed or names nothing this token can see.
    pub fn no_route_to(path: &str) -> Self {
        Self::new(
            Kind::NoRouteToObject,
            format!("Could not route to {path}, perhaps your object identifier is invalid?"),
        )
    }

    pub fn unavailable(cause: impl std::fmt::Display) -> Self {
        let mut err = Self::new(Kind::Unavailable, "the database is unavailable; retry shortly").after(1);
        err.cause = Some(anyhow::anyhow!("{cause}"));
        err
    }

    pub fn internal(cause: anyhow::Error) -> Self {
        Self { cause: Some(cause), ..Self::new(Kind::Internal, "internal error") }
    }

    /// Asks the client to wait this many seconds (at least one) before retrying.
    pub fn after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds.max(1));
        self
    }

    pub fn code(&self) -> u32 {
        self.kind.row().code
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        Self::from_database(&err)
    }
}

impl ApiError {
    pub fn from_database(err: &sqlx::Error) -> Self {
        let sqlstate = match err {
            sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
            _ => None,
        };
        match (err, sqlstate.as_deref()) {
            (
                sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed,
                _,
            ) => Self::unavailable(err),
            // Serialization failures and deadlocks: nothing was applied and a retry will succeed.
            (_, Some("40001" | "40P01")) => Self::unavailable(err),
            // The database shutting down or starting (admin_shutdown, crash_shutdown, cannot_connect_now).
            (_, Some("57P01" | "57P02" | "57P03")) => Self::unavailable(err),
            // A write reached a read-only server (a standby during a failover): nothing was applied.
            (_, Some("25006")) => Self::unavailable(err),
            // Text PostgreSQL cannot store, such as a NUL character.
            (_, Some("22021" | "22P05")) => {
                Self::invalid("text in the request cannot be stored: NUL characters are not allowed")
            }
            _ => Self::internal(anyhow::anyhow!("database error: {err}")),
        }
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(err: crate::store::StoreError) -> Self {
        use crate::store::StoreError;
        match err {
            StoreError::DuplicateQueueName(name) => {
                Self::new(Kind::DuplicateQueueName, format!("a queue named '{name}' already exists in this account"))
            }
            StoreError::ConsumerExists => Self::new(
                Kind::ConsumerExists,
                format!(
                    "this queue has {} consumers, the most a queue may have; delete one before adding another",
                    crate::queue::consumer::MAX_CONSUMERS_PER_QUEUE
                ),
            ),
            StoreError::QueueGone => Self::queue_not_found(),
            StoreError::Database(db) => db.into(),
        }
    }
}

impl From<crate::queue::Invalid> for ApiError {
    fn from(err: crate::queue::Invalid) -> Self {
        match err.kind {
            crate::queue::InvalidKind::Value => ApiError::invalid(err.message),
            crate::queue::InvalidKind::Delay => ApiError::new(Kind::InvalidDelay, err.message),
            crate::queue::InvalidKind::MessageTooLarge => ApiError::new(Kind::MessageTooLarge, err.message),
            crate::queue::InvalidKind::BatchTooLarge => ApiError::new(Kind::BatchTooLarge, err.message),
            crate::queue::InvalidKind::TooManyMessages => ApiError::new(Kind::TooManyMessages, err.message),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.kind.row().status
    }

    fn error_response(&self) -> HttpResponse {
        match (self.kind, &self.cause) {
            (Kind::Internal, Some(cause)) => tracing::error!(error = ?cause, "request failed"),
            (Kind::Unavailable, Some(cause)) => tracing::warn!(error = %cause, "database unavailable"),
            _ => {}
        }
        let row = self.kind.row();
        let mut response = HttpResponse::build(row.status);
        if !row.retry_can_help {
            response.insert_header(("x-should-retry", "false"));
        }
        if let Some(seconds) = self.retry_after {
            response.insert_header((header::RETRY_AFTER, seconds.to_string()));
        }
        response.json(json!({
            "success": false,
            "errors": [{"code": row.code, "message": self.message}],
            "messages": [],
            "result": null,
        }))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_4xx_but_the_retryable_ones_says_not_to_retry() {
        let retryable = [Kind::BodyTimeout, Kind::DeliveryPaused, Kind::RateLimited, Kind::QueueFull];
        for kind in [Kind::InvalidInput, Kind::QueueNotFound, Kind::DuplicateQueueName, Kind::NoRoute] {
            assert!(!kind.row().retry_can_help, "{kind:?}");
        }
        for kind in retryable {
            assert!(kind.row().status.is_client_error() && kind.row().retry_can_help, "{kind:?}");
        }
        assert!(Kind::Unavailable.row().retry_can_help && Kind::Internal.row().retry_can_help);
    }
}
