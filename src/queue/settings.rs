//! Queue names and queue settings, with Cloudflare's defaults and ranges.

use serde::{Deserialize, Serialize};

use super::{in_range, invalid, Invalid};

/// The longest delay of any kind (publish, queue delivery delay, retry, backoff cap, webhook answer):
/// 24 hours, since Cloudflare raised it from 12 in 2026.
pub const MAX_DELAY_SECONDS: i64 = 86_400;
pub const DEFAULT_RETENTION_SECONDS: i64 = 345_600;
pub const MIN_RETENTION_SECONDS: i64 = 60;
pub const MAX_RETENTION_SECONDS: i64 = 1_209_600;
pub const DEFAULT_IDEMPOTENCY_WINDOW_SECONDS: i64 = 300;
pub const MAX_IDEMPOTENCY_WINDOW_SECONDS: i64 = 604_800;

/// A queue name: 1-63 characters of `a-z0-9-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueName(String);

impl QueueName {
    pub fn parse(field: &str, raw: &str) -> Result<Self, Invalid> {
        let valid_chars = raw.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if raw.is_empty() || raw.len() > 63 || !valid_chars {
            return Err(invalid(format!(
                "{field} must be 1-63 characters of lowercase letters, digits and '-', got {raw:?}"
            )));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Settings as the client sends them: every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSettingsInput {
    pub delivery_delay: Option<i64>,
    pub delivery_paused: Option<bool>,
    pub message_retention_period: Option<i64>,
    pub idempotency_window: Option<i64>,
}

/// Where Cloudflare keeps a queue's data. Set at creation and shown as given; a self-hosted
/// deployment keeps every queue in the operator's own database whatever it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jurisdiction {
    Eu,
    Us,
    Fedramp,
}

impl Jurisdiction {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "eu" => Ok(Self::Eu),
            "us" => Ok(Self::Us),
            "fedramp" => Ok(Self::Fedramp),
            _ => Err(invalid(format!("jurisdiction must be one of eu, us, fedramp, got {raw:?}"))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Eu => "eu",
            Self::Us => "us",
            Self::Fedramp => "fedramp",
        }
    }
}

/// Cloudflare keeps a dead-letter queue in its source queue's jurisdiction: one elsewhere (or a queue
/// without a jurisdiction beside one with) is refused, naming both.
pub fn check_dead_letter_jurisdiction(
    queue: &str,
    queue_jurisdiction: Option<&str>,
    dead_letter_queue: &str,
    dead_letter_jurisdiction: Option<&str>,
) -> Result<(), Invalid> {
    if queue_jurisdiction == dead_letter_jurisdiction {
        return Ok(());
    }
    let describe = |j: Option<&str>| j.map_or_else(|| "no jurisdiction".to_owned(), |j| format!("jurisdiction {j}"));
    Err(invalid(format!(
        "dead_letter_queue '{dead_letter_queue}' is in {} but queue '{queue}' is in {}; a dead-letter queue must \
         be in the same jurisdiction as its source queue",
        describe(dead_letter_jurisdiction),
        describe(queue_jurisdiction),
    )))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueueSettings {
    pub delivery_delay: i64,
    pub delivery_paused: bool,
    pub message_retention_period: i64,
    /// skiplock's extension: how long the queue remembers publishers' idempotency keys (0: not at all).
    pub idempotency_window: i64,
}

impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            delivery_delay: 0,
            delivery_paused: false,
            message_retention_period: DEFAULT_RETENTION_SECONDS,
            idempotency_window: DEFAULT_IDEMPOTENCY_WINDOW_SECONDS,
        }
    }
}

impl QueueSettings {
    /// Cloudflare's defaults, keeping messages no longer than `max_retention` seconds (a plan's longest).
    pub fn defaults_within(max_retention: i64) -> Self {
        let defaults = Self::default();
        Self { message_retention_period: defaults.message_retention_period.min(max_retention), ..defaults }
    }

    /// Refuses a retention longer than the account's plan allows.
    pub fn check_retention(&self, max_retention: i64) -> Result<(), Invalid> {
        let retention = self.message_retention_period;
        if retention > max_retention {
            return Err(invalid(format!(
                "settings.message_retention_period is {retention} seconds; this account's plan keeps messages \
                 at most {max_retention} seconds"
            )));
        }
        Ok(())
    }

    /// Applies `input` over `self`: fields the input omits keep their current value. A PUT passes
    /// the defaults as `self`, a PATCH the stored settings.
    pub fn apply(self, input: &QueueSettingsInput) -> Result<Self, Invalid> {
        let delivery_delay = match input.delivery_delay {
            Some(d) => in_range("settings.delivery_delay", d, 0, MAX_DELAY_SECONDS, " seconds")?,
            None => self.delivery_delay,
        };
        let message_retention_period = match input.message_retention_period {
            Some(r) => in_range(
                "settings.message_retention_period",
                r,
                MIN_RETENTION_SECONDS,
                MAX_RETENTION_SECONDS,
                " seconds",
            )?,
            None => self.message_retention_period,
        };
        let idempotency_window = match input.idempotency_window {
            Some(w) => in_range("settings.idempotency_window", w, 0, MAX_IDEMPOTENCY_WINDOW_SECONDS, " seconds")?,
            None => self.idempotency_window,
        };
        Ok(Self {
            delivery_delay,
            delivery_paused: input.delivery_paused.unwrap_or(self.delivery_paused),
            message_retention_period,
            idempotency_window,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plans_longest_retention_bounds_the_default_and_refuses_longer() {
        let day = QueueSettings::defaults_within(86_400);
        assert_eq!(day.message_retention_period, 86_400);
        assert_eq!(QueueSettings::defaults_within(MAX_RETENTION_SECONDS), QueueSettings::default());
        assert!(day.check_retention(86_400).is_ok());
        let err = QueueSettings::default().check_retention(86_400).unwrap_err();
        assert!(err.message.contains("settings.message_retention_period") && err.message.contains("86400"));
    }

    #[test]
    fn names_allow_lowercase_digits_and_dashes_only() {
        assert!(QueueName::parse("queue_name", "orders-2").is_ok());
        assert!(QueueName::parse("queue_name", "").is_err());
        assert!(QueueName::parse("queue_name", "Orders").is_err());
        assert!(QueueName::parse("queue_name", "a_b").is_err());
        assert!(QueueName::parse("queue_name", &"a".repeat(63)).is_ok());
        assert!(QueueName::parse("queue_name", &"a".repeat(64)).is_err());
    }

    #[test]
    fn omitted_settings_keep_the_base_values() {
        let base = QueueSettings { delivery_delay: 7, ..Default::default() };
        let input = QueueSettingsInput { delivery_paused: Some(true), ..Default::default() };
        let applied = base.apply(&input).unwrap();
        assert_eq!(applied.delivery_delay, 7);
        assert!(applied.delivery_paused);
    }

    #[test]
    fn a_dead_letter_queue_is_in_its_source_queues_jurisdiction() {
        assert!(check_dead_letter_jurisdiction("q", Some("eu"), "dlq", Some("eu")).is_ok());
        assert!(check_dead_letter_jurisdiction("q", None, "dlq", None).is_ok());
        let err = check_dead_letter_jurisdiction("q", Some("eu"), "dlq", Some("us")).unwrap_err();
        assert!(err.message.contains("jurisdiction us") && err.message.contains("jurisdiction eu"), "{}", err.message);
        let err = check_dead_letter_jurisdiction("q", None, "dlq", Some("fedramp")).unwrap_err();
        assert!(err.message.contains("fedramp") && err.message.contains("no jurisdiction"), "{}", err.message);
    }

    #[test]
    fn out_of_range_settings_name_the_field() {
        let input = QueueSettingsInput { message_retention_period: Some(59), ..Default::default() };
        let err = QueueSettings::default().apply(&input).unwrap_err();
        assert!(err.message.contains("settings.message_retention_period"), "{}", err.message);
    }
}
