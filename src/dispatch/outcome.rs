//! What a delivery came to: the receiver's reply read into one decision per message, the kind of
//! outcome (a metrics label) and why a failed batch is retried.

use std::collections::HashMap;

use super::client::{self, Failure, Reply};
use crate::queue::answer::{self, Decision};
use crate::queue::attempt::AttemptOutcome;
use crate::queue::settings::MAX_DELAY_SECONDS;

/// How a delivery ended, as the `skiplock_webhook_deliveries_total` label names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutcomeKind {
    #[default]
    Ok,
    HttpError,
    Timeout,
    ConnectError,
    /// The address guard refused the destination.
    Refused,
    InvalidAnswer,
}

impl From<Failure> for OutcomeKind {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Timeout => Self::Timeout,
            Failure::ConnectError | Failure::Dns | Failure::Tls | Failure::ConnectionRefused | Failure::Unreadable => {
                Self::ConnectError
            }
            Failure::Refused => Self::Refused,
        }
    }
}

impl OutcomeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::HttpError => "http_error",
            Self::Timeout => "timeout",
            Self::ConnectError => "connect_error",
            Self::Refused => "refused",
            Self::InvalidAnswer => "invalid_answer",
        }
    }
}

/// What one delivery came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub kind: OutcomeKind,
    pub delivered: usize,
    pub acked: usize,
    pub retried: usize,
    /// Why the whole batch was retried, when it was.
    pub failure: Option<String>,
    /// The attempt's class, as the attempt log records it (None when no attempt was made).
    pub attempt: Option<AttemptOutcome>,
}

/// A reply read: the outcome, a decision per message id, the failure and the least retry delay, and
/// what the attempt log keeps of it.
pub(super) struct Reading<'a> {
    pub kind: OutcomeKind,
    pub decisions: HashMap<&'a str, Decision>,
    pub failure: Option<String>,
    pub floor: i64,
    pub attempt: AttemptOutcome,
    pub status: Option<u16>,
    /// The start of the answer's body.
    pub response: Option<String>,
}

/// How much of an answer's body the attempt log keeps.
pub const KEPT_RESPONSE_BYTES: usize = 1024;

/// The first `KEPT_RESPONSE_BYTES` of `body` as text, cut at a character's boundary.
fn start_of(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(KEPT_RESPONSE_BYTES)]).into_owned();
    let mut end = text.len().min(KEPT_RESPONSE_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

impl From<Failure> for AttemptOutcome {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Timeout => Self::Timeout,
            Failure::ConnectError => Self::Connect,
            Failure::Refused => Self::AddressGuard,
            Failure::Dns => Self::Dns,
            Failure::Tls => Self::Tls,
            Failure::ConnectionRefused => Self::Refused,
            Failure::Unreadable => Self::InvalidAnswer,
        }
    }
}

/// Reads the receiver's reply for the batch of `id_refs`: a 2xx applies its actions (Cloudflare's
/// precedence), anything else retries the whole batch, a 429 no sooner than its Retry-After.
pub(super) fn read<'a>(reply: Reply, id_refs: &[&'a str]) -> Reading<'a> {
    let (status, response, failed) = match &reply {
        Reply::Answered { status, body, .. } => (Some(*status), Some(start_of(body)), None),
        Reply::Failed { kind, .. } => (None, None, Some(*kind)),
    };
    let (kind, decisions, failure, floor) = match reply {
        Reply::Answered { status, truncated: true, .. } if (200..300).contains(&status) => (
            OutcomeKind::InvalidAnswer,
            retry_all(id_refs),
            Some(format!("HTTP {status} with an answer over {} bytes", client::MAX_ANSWER_BYTES)),
            0,
        ),
        Reply::Answered { status, body, .. } if (200..300).contains(&status) => match answer::parse(&body) {
            Ok(actions) => (OutcomeKind::Ok, answer::resolve(actions.as_deref().unwrap_or_default(), id_refs), None, 0),
            Err(why) => (OutcomeKind::InvalidAnswer, retry_all(id_refs), Some(format!("HTTP {status} with {why}")), 0),
        },
        Reply::Answered { status: 429, retry_after, .. } => {
            let wait = retry_after.map_or(0, |s| s.min(MAX_DELAY_SECONDS as u64) as i64);
            (OutcomeKind::HttpError, retry_all(id_refs), Some("HTTP 429".into()), wait)
        }
        Reply::Answered { status, .. } => {
            (OutcomeKind::HttpError, retry_all(id_refs), Some(format!("HTTP {status}")), 0)
        }
        Reply::Failed { kind, reason } => (OutcomeKind::from(kind), retry_all(id_refs), Some(reason), 0),
    };
    let attempt = failed.map_or_else(
        || AttemptOutcome::of_status(status.unwrap_or_default(), kind == OutcomeKind::Ok),
        AttemptOutcome::from,
    );
    Reading { kind, decisions, failure, floor, attempt, status, response }
}

fn retry_all<'a>(ids: &[&'a str]) -> HashMap<&'a str, Decision> {
    ids.iter().map(|id| (*id, Decision::Retry(None))).collect()
}
