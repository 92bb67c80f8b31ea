//! Flow control per key: the limits a consumer sets for each key of its queue's messages, and those an
//! account sets for one key over them. At most `parallelism` messages of a key are let go at once, and at
//! most `rate` per `period` seconds, evenly spaced; the rest wait, neither failed nor counted as attempts.

use serde::{Deserialize, Serialize};

use super::{in_range, invalid, Invalid};

pub const MAX_PARALLELISM: i64 = 10_000;
pub const MAX_RATE: i64 = 10_000;
/// The longest period a rate may be given over: a day, in seconds.
pub const MAX_PERIOD_SECONDS: i64 = 86_400;
/// The period of a rate given without one, as QStash's.
pub const DEFAULT_PERIOD_SECONDS: i64 = 1;

/// Limits as the client sends them.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowLimitsInput {
    pub parallelism: Option<i64>,
    pub rate: Option<i64>,
    pub period: Option<i64>,
}

/// Validated limits; `None`: no limit (a consumer's) or the consumer's (a key's).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlowLimits {
    pub parallelism: Option<i64>,
    pub rate: Option<i64>,
    pub period: Option<i64>,
}

impl FlowLimits {
    /// Checks each given limit's range, naming it as `{prefix}parallelism` and so on. A period needs a
    /// rate when `own_rate_needed` (a consumer's limits); a key's period may apply to its consumer's rate.
    pub fn parse(prefix: &str, input: &FlowLimitsInput, own_rate_needed: bool) -> Result<Self, Invalid> {
        let limit = |name: &str, value: Option<i64>, max: i64, unit: &str| {
            value.map(|v| in_range(&format!("{prefix}{name}"), v, 1, max, unit)).transpose()
        };
        let limits = FlowLimits {
            parallelism: limit("parallelism", input.parallelism, MAX_PARALLELISM, "")?,
            rate: limit("rate", input.rate, MAX_RATE, " messages per period")?,
            period: limit("period", input.period, MAX_PERIOD_SECONDS, " seconds")?,
        };
        if own_rate_needed && limits.period.is_some() && limits.rate.is_none() {
            return Err(invalid(format!("{prefix}period applies to a rate: give {prefix}rate with it")));
        }
        Ok(limits)
    }

    /// A consumer's limits as stored: a rate's period filled in.
    pub fn with_default_period(self) -> Self {
        FlowLimits { period: self.period.or(self.rate.map(|_| DEFAULT_PERIOD_SECONDS)), ..self }
    }

    pub fn is_none(&self) -> bool {
        *self == FlowLimits::default()
    }
}

/// Why a key's next message is not let go now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldBy {
    Paused,
    Parallelism,
    Rate,
}

impl HeldBy {
    /// Why a key with `waiting` messages held back waits: its pause, else its parallelism when that many
    /// are let go, else its rate (the next may go at a time still ahead).
    pub fn of(waiting: i64, paused: bool, released: i64, parallelism: Option<i64>, rate_ahead: bool) -> Option<Self> {
        if waiting == 0 && !paused {
            None
        } else if paused {
            Some(HeldBy::Paused)
        } else if parallelism.is_some_and(|p| released >= p) {
            Some(HeldBy::Parallelism)
        } else if rate_ahead {
            Some(HeldBy::Rate)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked_and_named() {
        let input = FlowLimitsInput { parallelism: Some(0), ..Default::default() };
        let err = FlowLimits::parse("settings.flow_control.", &input, true).unwrap_err();
        assert!(err.message.starts_with("settings.flow_control.parallelism must be between 1 and 10000"), "{err}");
        let input = FlowLimitsInput { period: Some(60), ..Default::default() };
        let err = FlowLimits::parse("settings.flow_control.", &input, true).unwrap_err();
        assert!(err.message.contains("settings.flow_control.rate"), "{err}");
        assert!(FlowLimits::parse("", &input, false).is_ok(), "a key's period may apply to its consumer's rate");
        let input = FlowLimitsInput { rate: Some(10), ..Default::default() };
        let limits = FlowLimits::parse("", &input, true).unwrap().with_default_period();
        assert_eq!(limits, FlowLimits { parallelism: None, rate: Some(10), period: Some(1) });
    }

    #[test]
    fn a_held_key_says_why() {
        assert_eq!(HeldBy::of(0, false, 2, Some(2), false), None, "nothing waits");
        assert_eq!(HeldBy::of(3, true, 0, None, false), Some(HeldBy::Paused));
        assert_eq!(HeldBy::of(0, true, 0, None, false), Some(HeldBy::Paused), "a paused key holds what comes");
        assert_eq!(HeldBy::of(3, false, 2, Some(2), true), Some(HeldBy::Parallelism));
        assert_eq!(HeldBy::of(3, false, 1, Some(2), true), Some(HeldBy::Rate));
    }
}
