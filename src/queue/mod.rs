//! Domain rules with no HTTP and no SQL: an account's standing, plan and limits, names, settings and
//! their ranges, message content and limits, delay precedence, schedules' cadences, and the signed lease ids
//! and refs handed to clients.

pub mod account;
pub mod answer;
pub mod attempt;
pub mod consumer;
pub mod event;
pub mod flow;
pub mod lease;
pub mod message;
pub mod plan;
pub mod quota;
pub mod schedule;
pub mod settings;
pub mod topic;

/// A rule broken by the caller's input, with a message that says what to fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{message}")]
pub struct Invalid {
    pub kind: InvalidKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidKind {
    Value,
    Delay,
    MessageTooLarge,
    BatchTooLarge,
    TooManyMessages,
}

pub(crate) fn invalid(message: impl Into<String>) -> Invalid {
    Invalid { kind: InvalidKind::Value, message: message.into() }
}

/// Checks that `value` lies in `min..=max`, naming the field in the message.
pub(crate) fn in_range(field: &str, value: i64, min: i64, max: i64, unit: &str) -> Result<i64, Invalid> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(invalid(format!("{field} must be between {min} and {max}{unit}, got {value}")))
    }
}
