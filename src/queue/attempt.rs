//! A webhook attempt's outcome as the attempt log names it, an endpoint's health, and the circuit breaker's
//! rule: after `OPEN_AFTER` failures in a row an endpoint gets one probe batch at a growing interval.

use std::time::Duration;

use serde::Serialize;

use super::event::EventType;
use super::{invalid, Invalid};

/// How one POST to an endpoint ended: the class of failure a user looks for first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// A 2xx whose body was read (the actions in it may still retry messages).
    Success,
    Timeout,
    /// The connection was refused or reset.
    Refused,
    Dns,
    Tls,
    /// The address guard would not let the request reach the address.
    AddressGuard,
    /// A 3xx: redirects are never followed.
    Redirect,
    /// A 4xx (429 included).
    ClientError,
    /// A 5xx or any other status.
    ServerError,
    /// A 2xx whose body could not be read as an answer, or a connection lost while reading it.
    InvalidAnswer,
    /// Any other failure to reach the endpoint.
    Connect,
}

impl AttemptOutcome {
    pub const ALL: [Self; 11] = [
        Self::Success,
        Self::Timeout,
        Self::Refused,
        Self::Dns,
        Self::Tls,
        Self::AddressGuard,
        Self::Redirect,
        Self::ClientError,
        Self::ServerError,
        Self::InvalidAnswer,
        Self::Connect,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Timeout => "timeout",
            Self::Refused => "refused",
            Self::Dns => "dns",
            Self::Tls => "tls",
            Self::AddressGuard => "address_guard",
            Self::Redirect => "redirect",
            Self::ClientError => "client_error",
            Self::ServerError => "server_error",
            Self::InvalidAnswer => "invalid_answer",
            Self::Connect => "connect",
        }
    }

    /// The outcome named `raw`, for the attempt log's filter (`field` names it in the error).
    pub fn parse(field: &str, raw: &str) -> Result<Self, Invalid> {
        Self::ALL.into_iter().find(|o| o.as_str() == raw).ok_or_else(|| {
            let names: Vec<_> = Self::ALL.iter().map(|o| o.as_str()).collect();
            invalid(format!("{field} must be one of {}, got {raw:?}", names.join(", ")))
        })
    }

    /// The outcome of an answer with HTTP `status` that was read (`readable`: a 2xx whose body parsed).
    pub fn of_status(status: u16, readable: bool) -> Self {
        match status {
            200..=299 if readable => Self::Success,
            200..=299 => Self::InvalidAnswer,
            300..=399 => Self::Redirect,
            400..=499 => Self::ClientError,
            _ => Self::ServerError,
        }
    }

    pub fn is_success(self) -> bool {
        self == Self::Success
    }
}

/// Failures in a row after which the endpoint's circuit opens.
pub const OPEN_AFTER: i32 = 5;
/// The events a change of an endpoint's failures in a row from `before` to `after` fires: recovered when an
/// open circuit saw a success (`succeeded`), failing when the circuit opened (again).
pub fn circuit_events(before: i32, after: i32, succeeded: bool) -> Vec<EventType> {
    let was_open = before >= OPEN_AFTER;
    let mut events = Vec::new();
    if was_open && succeeded {
        events.push(EventType::ConsumerRecovered);
    }
    if after >= OPEN_AFTER && (!was_open || succeeded) {
        events.push(EventType::ConsumerFailing);
    }
    events
}

/// The first wait before a probe once the circuit opened; each failed probe doubles it.
pub const FIRST_PROBE_AFTER: Duration = Duration::from_secs(5);
/// The longest wait between two probes.
pub const MAX_PROBE_AFTER: Duration = Duration::from_secs(300);

/// How long after its last failure an endpoint that failed `failures` times in a row gets its next batch:
/// None while its circuit is closed.
pub fn probe_after(failures: i32) -> Option<Duration> {
    if failures < OPEN_AFTER {
        return None;
    }
    let doublings = (failures - OPEN_AFTER).min(16) as u32;
    Some(FIRST_PROBE_AFTER.saturating_mul(1 << doublings).min(MAX_PROBE_AFTER))
}

/// An endpoint's health as the consumer object shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthState {
    /// Its last attempt succeeded, or it has had none.
    Healthy,
    /// Its last attempt failed; past `OPEN_AFTER` in a row it gets probes only.
    Failing,
    /// It failed for its consumer's `disable_after_hours`: no deliveries, not even probes, until a test
    /// send succeeds.
    Disabled,
}

impl HealthState {
    pub fn of(consecutive_failures: i32, disabled: bool) -> Self {
        if disabled {
            Self::Disabled
        } else if consecutive_failures > 0 {
            Self::Failing
        } else {
            Self::Healthy
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_circuit_fires_failing_once_as_it_opens_and_recovered_as_it_closes() {
        use EventType::{ConsumerFailing, ConsumerRecovered};
        assert_eq!(circuit_events(0, OPEN_AFTER - 1, false), vec![]);
        assert_eq!(circuit_events(OPEN_AFTER - 1, OPEN_AFTER, false), vec![ConsumerFailing]);
        assert_eq!(circuit_events(OPEN_AFTER, OPEN_AFTER + 3, false), vec![], "still failing: no new event");
        assert_eq!(circuit_events(OPEN_AFTER + 3, 0, true), vec![ConsumerRecovered]);
        assert_eq!(circuit_events(OPEN_AFTER - 1, 0, true), vec![], "it never opened");
        assert_eq!(circuit_events(OPEN_AFTER, OPEN_AFTER, true), vec![ConsumerRecovered, ConsumerFailing]);
    }

    #[test]
    fn the_probe_interval_grows_from_seconds_to_minutes() {
        assert_eq!(probe_after(OPEN_AFTER - 1), None);
        assert_eq!(probe_after(OPEN_AFTER), Some(Duration::from_secs(5)));
        assert_eq!(probe_after(OPEN_AFTER + 1), Some(Duration::from_secs(10)));
        assert_eq!(probe_after(OPEN_AFTER + 5), Some(Duration::from_secs(160)));
        assert_eq!(probe_after(OPEN_AFTER + 6), Some(MAX_PROBE_AFTER));
        assert_eq!(probe_after(i32::MAX), Some(MAX_PROBE_AFTER));
    }

    #[test]
    fn statuses_name_their_class_and_names_parse_back() {
        assert_eq!(AttemptOutcome::of_status(200, true), AttemptOutcome::Success);
        assert_eq!(AttemptOutcome::of_status(204, false), AttemptOutcome::InvalidAnswer);
        assert_eq!(AttemptOutcome::of_status(302, false), AttemptOutcome::Redirect);
        assert_eq!(AttemptOutcome::of_status(429, false), AttemptOutcome::ClientError);
        assert_eq!(AttemptOutcome::of_status(503, false), AttemptOutcome::ServerError);
        for outcome in AttemptOutcome::ALL {
            assert_eq!(AttemptOutcome::parse("outcome", outcome.as_str()), Ok(outcome));
        }
        assert!(AttemptOutcome::parse("outcome", "nope").unwrap_err().message.contains("outcome must be one of"));
    }
}
