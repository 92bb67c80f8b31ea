//! Settings: defaults, overridden by environment variables, validated once at start-up so a bad value
//! stops the process with a message instead of surfacing later.

use std::net::SocketAddr;
use std::time::Duration;

use ipnet::IpNet;

use crate::limits::Limits;

pub const ENV_HELP: &str = "\
Environment:
  DATABASE_URL                  PostgreSQL connection URL (required)
  SKIPLOCK_BIND                 API and dashboard address            [default: 127.0.0.1:8787]
  SKIPLOCK_METRICS_BIND         Prometheus /metrics address          [default: 127.0.0.1:9787]
  SKIPLOCK_WEBHOOK_ALLOW_CIDRS  networks exempt from the webhook address guard, comma-separated
                                (for example 127.0.0.0/8,::1/128)    [default: none]
  SKIPLOCK_WEBHOOK_TIMEOUT_MS   how long a webhook receiver has to answer [default: 30000]
  SKIPLOCK_METRICS_MAX_QUEUES   queues with their own /metrics series; the rest are summed
                                as queue=_other                       [default: 500]
  SKIPLOCK_QUEUE_GAUGES_EVERY_MS how often the per-queue gauges are recomputed [default: 10000]
  SKIPLOCK_RATE_LIMIT           requests per second per account on each node (0: none) [default: 5000]
  SKIPLOCK_RATE_BURST           requests above the rate an account may make at once     [default: 10000]
  SKIPLOCK_MAX_QUEUES           queues per account                                      [default: 1000]
  SKIPLOCK_MAX_BACKLOG_BYTES    bytes of messages waiting per queue                     [default: 25000000000]
  SKIPLOCK_MAX_WAITING_PULLS    long-polling pulls waiting at once per account on each node [default: 1000]
  SKIPLOCK_DB_POOL_SIZE         database connections per process, and up to 4 for publishes [default: 16]
  SKIPLOCK_LOG                  log filter (tracing EnvFilter syntax) [default: info,sqlx=warn]
  SKIPLOCK_LOG_FORMAT           text or json                          [default: text]";

#[derive(Debug, Clone)]
pub struct Settings {
    pub database_url: String,
    pub bind: SocketAddr,
    pub metrics_bind: SocketAddr,
    pub webhook_allow_cidrs: Vec<IpNet>,
    pub webhook_timeout: Duration,
    pub metrics_max_queues: usize,
    pub queue_gauges_every: Duration,
    pub limits: Limits,
    pub db_pool_size: u32,
    pub log_filter: String,
    pub log_json: bool,
    /// How often expired messages are looked for.
    pub retention_sweep_every: Duration,
    /// How often the activity counters are written to the database (the dashboard's chart).
    pub activity_flush_every: Duration,
}

#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(String);

impl Settings {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let database_url = get("DATABASE_URL")
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ConfigError("DATABASE_URL is not set; point it at a PostgreSQL database".into()))?;
        let addr = |key: &str, default: &str| -> Result<SocketAddr, ConfigError> {
            let raw = get(key).unwrap_or_else(|| default.to_owned());
            raw.parse().map_err(|_| ConfigError(format!("{key}={raw:?} is not an address like 127.0.0.1:8787")))
        };
        let webhook_allow_cidrs = get("SKIPLOCK_WEBHOOK_ALLOW_CIDRS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<IpNet>().map_err(|_| {
                    ConfigError(format!("SKIPLOCK_WEBHOOK_ALLOW_CIDRS: {s:?} is not a network like 10.0.0.0/8"))
                })
            })
            .collect::<Result<_, _>>()?;
        // Every numeric setting: an integer in a range, named in the message when it is not.
        let number = |key: &str, default: i64, min: i64, max: i64| -> Result<i64, ConfigError> {
            let raw = get(key).unwrap_or_else(|| default.to_string());
            raw.parse::<i64>()
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| ConfigError(format!("{key}={raw:?} must be a number from {min} to {max}")))
        };
        let millis = |key: &str, default: i64, min: i64, max: i64| {
            number(key, default, min, max).map(|ms| Duration::from_millis(ms as u64))
        };
        let db_pool_size = number("SKIPLOCK_DB_POOL_SIZE", 16, 1, 1000)? as u32;
        let webhook_timeout = millis("SKIPLOCK_WEBHOOK_TIMEOUT_MS", 30_000, 100, 600_000)?;
        let metrics_max_queues = number("SKIPLOCK_METRICS_MAX_QUEUES", 500, 0, 100_000)? as usize;
        let queue_gauges_every = millis("SKIPLOCK_QUEUE_GAUGES_EVERY_MS", 10_000, 100, 3_600_000)?;
        let defaults = Limits::default();
        let limits = Limits {
            rate_per_second: number("SKIPLOCK_RATE_LIMIT", defaults.rate_per_second.into(), 0, 10_000_000)? as u32,
            rate_burst: number("SKIPLOCK_RATE_BURST", defaults.rate_burst.into(), 0, 10_000_000)? as u32,
            max_queues_per_account: number("SKIPLOCK_MAX_QUEUES", defaults.max_queues_per_account, 0, 1_000_000)?,
            max_backlog_bytes_per_queue: number(
                "SKIPLOCK_MAX_BACKLOG_BYTES",
                defaults.max_backlog_bytes_per_queue,
                0,
                i64::MAX / 2,
            )?,
            max_waiting_pulls: number("SKIPLOCK_MAX_WAITING_PULLS", defaults.max_waiting_pulls, 0, 1_000_000)?,
        };
        let log_json = match get("SKIPLOCK_LOG_FORMAT").as_deref() {
            None | Some("text") => false,
            Some("json") => true,
            Some(other) => return Err(ConfigError(format!("SKIPLOCK_LOG_FORMAT={other:?} must be text or json"))),
        };
        let log_filter = get("SKIPLOCK_LOG").unwrap_or_else(|| "info,sqlx=warn".into());
        tracing_subscriber::EnvFilter::try_new(&log_filter)
            .map_err(|e| ConfigError(format!("SKIPLOCK_LOG={log_filter:?} is not a log filter: {e}")))?;
        Ok(Self {
            database_url,
            bind: addr("SKIPLOCK_BIND", "127.0.0.1:8787")?,
            metrics_bind: addr("SKIPLOCK_METRICS_BIND", "127.0.0.1:9787")?,
            webhook_allow_cidrs,
            webhook_timeout,
            metrics_max_queues,
            queue_gauges_every,
            limits,
            db_pool_size,
            log_filter,
            log_json,
            retention_sweep_every: Duration::from_secs(30),
            activity_flush_every: Duration::from_secs(2),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        Settings::from_lookup(|k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn defaults_apply_when_only_the_database_is_given() {
        let s = settings(&[("DATABASE_URL", "postgres://x")]).unwrap();
        assert_eq!(s.bind.to_string(), "127.0.0.1:8787");
        assert_eq!(s.metrics_bind.to_string(), "127.0.0.1:9787");
        assert!(s.webhook_allow_cidrs.is_empty());
    }

    #[test]
    fn invalid_values_name_the_variable() {
        assert!(settings(&[]).unwrap_err().to_string().contains("DATABASE_URL"));
        let err = settings(&[("DATABASE_URL", "postgres://x"), ("SKIPLOCK_BIND", "nope")]).unwrap_err();
        assert!(err.to_string().contains("SKIPLOCK_BIND"));
        let err = settings(&[("DATABASE_URL", "x"), ("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.1/8,bad")]).unwrap_err();
        assert!(err.to_string().contains("bad"));
    }
}
