//! Consumers: their two kinds, their settings with per-kind defaults and ranges.

use serde::{Deserialize, Serialize};

use super::flow::{FlowLimits, FlowLimitsInput};
use super::settings::MAX_DELAY_SECONDS;
use super::{in_range, invalid, Invalid};

/// The longest `disable_after_hours`: 30 days.
pub const MAX_DISABLE_AFTER_HOURS: i64 = 720;
/// The server's ceiling for a webhook consumer's batches in flight (`max_concurrency: null`).
pub const MAX_CONCURRENCY: i64 = 250;
/// The most consumers one queue may have: a publish to it writes a row for each.
pub const MAX_CONSUMERS_PER_QUEUE: usize = 8;
/// Cloudflare's defaults, for a queue pulled or acked without a consumer and a pull consumer's lease.
pub const DEFAULT_MAX_RETRIES: i32 = 3;
pub const DEFAULT_VISIBILITY_TIMEOUT_MS: i64 = 30_000;
/// The longest lease a pull, a consumer setting or an extension may ask for: 12 hours.
pub const MAX_VISIBILITY_TIMEOUT_MS: i64 = 43_200_000;
/// The longest a long-polling pull may wait for a message: 20 seconds.
pub const MAX_WAIT_TIME_MS: i64 = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsumerKind {
    HttpPull,
    Webhook,
}

impl ConsumerKind {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "http_pull" => Ok(Self::HttpPull),
            "webhook" => Ok(Self::Webhook),
            "worker" => {
                Err(invalid("type 'worker' needs Cloudflare Workers; skiplock consumers are 'http_pull' or 'webhook'"))
            }
            other => Err(invalid(format!("type must be 'http_pull' or 'webhook', got {other:?}"))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::HttpPull => "http_pull",
            Self::Webhook => "webhook",
        }
    }
}

/// Settings as the client sends them. `max_concurrency` distinguishes "absent" from an explicit null.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerSettingsInput {
    pub batch_size: Option<i64>,
    pub max_retries: Option<i64>,
    pub retry_delay: Option<i64>,
    pub max_wait_time_ms: Option<i64>,
    #[serde(default, deserialize_with = "explicit_null")]
    pub max_concurrency: Option<Option<i64>>,
    pub visibility_timeout_ms: Option<i64>,
    pub retry_backoff: Option<String>,
    pub retry_delay_max: Option<i64>,
    pub flow_control: Option<FlowLimitsInput>,
    pub disable_after_hours: Option<i64>,
}

fn explicit_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<i64>>, D::Error> {
    Option::<i64>::deserialize(d).map(Some)
}

/// Validated settings. Fields that do not apply to a kind are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConsumerSettings {
    pub batch_size: i64,
    pub max_retries: i64,
    pub retry_delay: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait_time_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visibility_timeout_ms: Option<i64>,
    /// Webhook only; `null` on the wire means the server's maximum.
    #[serde(skip)]
    pub max_concurrency: Option<i64>,
    /// skiplock's extension: how retries without an explicit delay wait. Shown only when not constant,
    /// so a default consumer looks exactly like Cloudflare's.
    #[serde(flatten, skip_serializing_if = "RetryPolicy::is_constant")]
    pub retry: RetryPolicy,
    /// skiplock's extension: the limits of flow control for each key of the queue's messages. Shown only
    /// when set, as `flow_control`.
    #[serde(rename = "flow_control", skip_serializing_if = "FlowLimits::is_none")]
    pub flow: FlowLimits,
    /// skiplock's extension, webhook only: a consumer whose endpoint has failed this many hours in a row is
    /// disabled. Off (and not shown) unless set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_after_hours: Option<i64>,
}

/// How long a retried message waits when the retry names no delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RetryPolicy {
    #[serde(rename = "retry_backoff")]
    pub backoff: Backoff,
    /// The cap of exponential backoff, in seconds.
    #[serde(rename = "retry_delay_max")]
    pub max_delay: i64,
    #[serde(skip)]
    pub base_delay: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backoff {
    Constant,
    Exponential,
}

impl Backoff {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "constant" => Ok(Self::Constant),
            "exponential" => Ok(Self::Exponential),
            other => Err(invalid(format!("settings.retry_backoff must be constant or exponential, got {other:?}"))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Constant => "constant",
            Self::Exponential => "exponential",
        }
    }
}

impl RetryPolicy {
    pub fn constant(base_delay: i64) -> Self {
        Self { backoff: Backoff::Constant, max_delay: MAX_DELAY_SECONDS, base_delay }
    }

    fn is_constant(&self) -> bool {
        self.backoff == Backoff::Constant
    }

    /// The delay before delivery number `attempts + 1`. Exponential backoff doubles the base delay with
    /// each delivery made, caps it at `max_delay`, and draws the wait uniformly from its upper half
    /// (jitter), so retries of a failed batch spread out instead of returning together.
    pub fn delay_after(&self, attempts: i32, jitter: f64) -> i64 {
        match self.backoff {
            Backoff::Constant => self.base_delay,
            Backoff::Exponential => {
                let doublings = attempts.clamp(1, 32) - 1;
                let full = (self.base_delay as f64 * 2f64.powi(doublings)).min(self.max_delay as f64);
                (full * (0.5 + 0.5 * jitter.clamp(0.0, 1.0))).round() as i64
            }
        }
    }
}

impl ConsumerSettings {
    pub fn defaults(kind: ConsumerKind) -> Self {
        match kind {
            ConsumerKind::HttpPull => Self {
                batch_size: 5,
                max_retries: DEFAULT_MAX_RETRIES as i64,
                retry_delay: 0,
                max_wait_time_ms: None,
                visibility_timeout_ms: Some(DEFAULT_VISIBILITY_TIMEOUT_MS),
                max_concurrency: None,
                retry: RetryPolicy::constant(0),
                flow: FlowLimits::default(),
                disable_after_hours: None,
            },
            ConsumerKind::Webhook => Self {
                batch_size: 10,
                max_retries: DEFAULT_MAX_RETRIES as i64,
                retry_delay: 0,
                max_wait_time_ms: Some(5_000),
                visibility_timeout_ms: None,
                max_concurrency: None,
                retry: RetryPolicy::constant(0),
                flow: FlowLimits::default(),
                disable_after_hours: None,
            },
        }
    }

    /// Validates `input` for `kind`; omitted fields take the kind's defaults (consumer updates are
    /// full overwrites, as in Cloudflare).
    pub fn from_input(kind: ConsumerKind, input: &ConsumerSettingsInput) -> Result<Self, Invalid> {
        let mut s = Self::defaults(kind);
        let field = |name: &str| format!("settings.{name}");
        if let Some(v) = input.batch_size {
            s.batch_size = in_range(&field("batch_size"), v, 1, 100, "")?;
        }
        if let Some(v) = input.max_retries {
            s.max_retries = in_range(&field("max_retries"), v, 0, 100, "")?;
        }
        if let Some(v) = input.retry_delay {
            s.retry_delay = in_range(&field("retry_delay"), v, 0, MAX_DELAY_SECONDS, " seconds")?;
        }
        s.retry.base_delay = s.retry_delay;
        if let Some(raw) = &input.retry_backoff {
            s.retry.backoff = Backoff::parse(raw)?;
        }
        if let Some(v) = input.retry_delay_max {
            if s.retry.backoff != Backoff::Exponential {
                return Err(invalid("settings.retry_delay_max applies only with retry_backoff exponential"));
            }
            s.retry.max_delay = in_range(&field("retry_delay_max"), v, 1, MAX_DELAY_SECONDS, " seconds")?;
        }
        if s.retry.backoff == Backoff::Exponential && s.retry.base_delay == 0 {
            return Err(invalid(
                "settings.retry_backoff exponential needs a retry_delay of at least 1 second as its base",
            ));
        }
        if let Some(flow) = &input.flow_control {
            s.flow = FlowLimits::parse("settings.flow_control.", flow, true)?.with_default_period();
        }
        let only_for = |name: &str, other: ConsumerKind| {
            invalid(format!("settings.{name} applies to {} consumers only", other.as_str()))
        };
        match kind {
            ConsumerKind::HttpPull => {
                if input.max_wait_time_ms.is_some() {
                    return Err(only_for("max_wait_time_ms", ConsumerKind::Webhook));
                }
                if input.disable_after_hours.is_some() {
                    return Err(only_for("disable_after_hours", ConsumerKind::Webhook));
                }
                if matches!(input.max_concurrency, Some(Some(_))) {
                    return Err(only_for("max_concurrency", ConsumerKind::Webhook));
                }
                if let Some(v) = input.visibility_timeout_ms {
                    s.visibility_timeout_ms =
                        Some(in_range(&field("visibility_timeout_ms"), v, 1, MAX_VISIBILITY_TIMEOUT_MS, " ms")?);
                }
            }
            ConsumerKind::Webhook => {
                if input.visibility_timeout_ms.is_some() {
                    return Err(only_for("visibility_timeout_ms", ConsumerKind::HttpPull));
                }
                if let Some(v) = input.max_wait_time_ms {
                    s.max_wait_time_ms = Some(in_range(&field("max_wait_time_ms"), v, 0, 30_000, " ms")?);
                }
                if let Some(Some(v)) = input.max_concurrency {
                    s.max_concurrency = Some(in_range(&field("max_concurrency"), v, 1, MAX_CONCURRENCY, "")?);
                }
                if let Some(v) = input.disable_after_hours {
                    let hours = in_range(&field("disable_after_hours"), v, 1, MAX_DISABLE_AFTER_HOURS, " hours")?;
                    s.disable_after_hours = Some(hours);
                }
            }
        }
        Ok(s)
    }

    /// How many times a message may be delivered before it is dead-lettered or deleted.
    pub fn max_deliveries(&self) -> i32 {
        self.max_retries as i32 + 1
    }
}

/// A webhook URL: absolute http or https, with a host, parsed by the `url` crate the delivery client
/// uses, so a URL accepted here is one the client can send to. Where it may connect is checked at
/// delivery time, not here. Stored as the client will send it (normalised by the parser).
pub fn parse_webhook_url(raw: &str) -> Result<String, Invalid> {
    let wrong =
        |why: &str| invalid(format!("url must be an absolute http or https URL with a host ({why}), got {raw:?}"));
    if raw.len() > 2048 || !raw.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(wrong("at most 2048 characters of printable ASCII; international names in punycode"));
    }
    let url = url::Url::parse(raw).map_err(|e| wrong(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(wrong("the scheme must be http or https"));
    }
    // The parser reads `http:///path` as the host `path`; the writer meant no host at all.
    let after_scheme = raw.split_once("://").map_or("", |(_, rest)| rest);
    if url.host_str().is_none_or(str::is_empty) || after_scheme.starts_with('/') {
        return Err(wrong("it has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(wrong("credentials do not belong in it"));
    }
    Ok(url.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_differ_by_kind() {
        assert_eq!(ConsumerSettings::defaults(ConsumerKind::HttpPull).batch_size, 5);
        assert_eq!(ConsumerSettings::defaults(ConsumerKind::Webhook).batch_size, 10);
        assert_eq!(ConsumerSettings::defaults(ConsumerKind::Webhook).max_wait_time_ms, Some(5000));
    }

    #[test]
    fn settings_of_the_other_kind_are_refused() {
        let input = ConsumerSettingsInput { max_wait_time_ms: Some(10), ..Default::default() };
        assert!(ConsumerSettings::from_input(ConsumerKind::HttpPull, &input).is_err());
        let input = ConsumerSettingsInput { visibility_timeout_ms: Some(10), ..Default::default() };
        assert!(ConsumerSettings::from_input(ConsumerKind::Webhook, &input).is_err());
    }

    #[test]
    fn exponential_backoff_doubles_from_the_base_up_to_the_cap() {
        let policy = RetryPolicy { backoff: Backoff::Exponential, max_delay: 100, base_delay: 10 };
        let full: Vec<i64> = (1..=6).map(|attempts| policy.delay_after(attempts, 1.0)).collect();
        assert_eq!(full, [10, 20, 40, 80, 100, 100]);
        assert_eq!(policy.delay_after(3, 0.0), 20, "jitter keeps at least half");
        assert_eq!(RetryPolicy::constant(7).delay_after(5, 0.3), 7);
    }

    #[test]
    fn backoff_settings_are_checked() {
        let input = |backoff: &str, base: i64, max: Option<i64>| ConsumerSettingsInput {
            retry_backoff: Some(backoff.into()),
            retry_delay: Some(base),
            retry_delay_max: max,
            ..Default::default()
        };
        let ok = ConsumerSettings::from_input(ConsumerKind::Webhook, &input("exponential", 5, Some(600))).unwrap();
        assert_eq!(ok.retry, RetryPolicy { backoff: Backoff::Exponential, max_delay: 600, base_delay: 5 });
        assert!(ConsumerSettings::from_input(ConsumerKind::Webhook, &input("linear", 5, None)).is_err());
        assert!(ConsumerSettings::from_input(ConsumerKind::Webhook, &input("exponential", 0, None)).is_err());
        assert!(ConsumerSettings::from_input(ConsumerKind::Webhook, &input("constant", 5, Some(60))).is_err());
    }

    #[test]
    fn webhook_urls_must_be_http_with_a_host() {
        assert!(parse_webhook_url("https://example.com/hook").is_ok());
        assert!(parse_webhook_url("ftp://example.com").is_err());
        assert!(parse_webhook_url("http:///path").is_err());
        assert!(parse_webhook_url("http://a b").is_err());
        assert!(parse_webhook_url("http://user:pw@example.com/").is_err());
        assert!(parse_webhook_url("https://exa mple.com/").is_err());
        // What the client would send: the parser's form.
        assert_eq!(parse_webhook_url("HTTPS://Example.COM").unwrap(), "https://example.com/");
    }
}
