//! Settings: each is a command-line option and an environment variable, declared once below with its
//! default and range, so that parsing, validation and `skiplock --help` have one source. A bad value
//! stops the process at start with a message naming it.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use ipnet::IpNet;

use crate::auth::sealing::Keyring;
use crate::engine::attempts::Keeping;
use crate::engine::limits::Limits;
use crate::engine::rotation::Rotation;

/// The settings as clap reads them (milliseconds and counts), before they become `Settings`.
#[derive(Debug, Clone, Args)]
pub struct SettingsArgs {
    /// PostgreSQL connection URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// API and dashboard address.
    #[arg(long, env = "SKIPLOCK_BIND", default_value = "127.0.0.1:8787")]
    bind: SocketAddr,
    /// Operator API address (`/admin/v1`, with the dashboard's operator view); keep it private.
    #[arg(long, env = "SKIPLOCK_ADMIN_BIND", default_value = "127.0.0.1:9788")]
    admin_bind: SocketAddr,
    /// Prometheus /metrics address.
    #[arg(long, env = "SKIPLOCK_METRICS_BIND", default_value = "127.0.0.1:9787")]
    metrics_bind: SocketAddr,
    /// Networks exempt from the webhook address guard, comma-separated (for example 127.0.0.0/8,::1/128).
    #[arg(long, env = "SKIPLOCK_WEBHOOK_ALLOW_CIDRS", value_delimiter = ',', value_parser = parse_network)]
    webhook_allow_cidrs: Vec<Option<IpNet>>,
    /// Networks of the operator's proxies, comma-separated: their `X-Forwarded-For` names the client's
    /// address (tokens' address conditions); from anyone else it is ignored.
    #[arg(long, env = "SKIPLOCK_TRUSTED_PROXIES", value_delimiter = ',', value_parser = parse_network)]
    trusted_proxies: Vec<Option<IpNet>>,
    /// How long a webhook receiver has to answer, in milliseconds.
    #[arg(long, env = "SKIPLOCK_WEBHOOK_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(100..=600_000))]
    webhook_timeout_ms: u64,
    /// How long webhook attempts are kept in the attempt log, in hours.
    #[arg(long, env = "SKIPLOCK_WEBHOOK_ATTEMPTS_HOURS", default_value_t = 72,
          value_parser = clap::value_parser!(u32).range(1..=8_760))]
    webhook_attempts_hours: u32,
    /// The most webhook attempts kept per consumer; older ones are pruned first.
    #[arg(long, env = "SKIPLOCK_WEBHOOK_ATTEMPTS_PER_CONSUMER", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(10..=10_000_000))]
    webhook_attempts_per_consumer: u32,
    /// Queues with their own /metrics series; the rest are summed as queue=_other.
    #[arg(long, env = "SKIPLOCK_METRICS_MAX_QUEUES", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(0..=100_000))]
    metrics_max_queues: u64,
    /// How often the per-queue gauges are recomputed, in milliseconds.
    #[arg(long, env = "SKIPLOCK_QUEUE_GAUGES_EVERY_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    queue_gauges_every_ms: u64,
    /// Requests per second per account, across the nodes (0: none); this and the limits below are those
    /// of the accounts whose plan leaves them out (docs/operations.md, "Plans and limits").
    #[arg(long, env = "SKIPLOCK_RATE_LIMIT", default_value_t = Limits::default().rate_per_second,
          value_parser = clap::value_parser!(u32).range(0..=10_000_000))]
    rate_limit: u32,
    /// Requests above the rate an account may make at once.
    #[arg(long, env = "SKIPLOCK_RATE_BURST", default_value_t = Limits::default().rate_burst,
          value_parser = clap::value_parser!(u32).range(0..=10_000_000))]
    rate_burst: u32,
    /// Messages published per second per account, across the nodes (0: none, the default); a faster
    /// publish waits up to a second for its share (its answer says how long), and beyond that gets a 429.
    #[arg(long, env = "SKIPLOCK_PUBLISH_RATE_LIMIT", default_value_t = Limits::default().publish_rate_per_second,
          value_parser = clap::value_parser!(u32).range(0..=100_000_000))]
    publish_rate_limit: u32,
    /// Queues per account.
    #[arg(long, env = "SKIPLOCK_MAX_QUEUES", default_value_t = Limits::default().max_queues_per_account,
          value_parser = clap::value_parser!(i64).range(0..=1_000_000))]
    max_queues: i64,
    /// Bytes of messages waiting per queue.
    #[arg(long, env = "SKIPLOCK_MAX_BACKLOG_BYTES", default_value_t = Limits::default().max_backlog_bytes_per_queue,
          value_parser = clap::value_parser!(i64).range(0..=i64::MAX / 2))]
    max_backlog_bytes: i64,
    /// Long-polling pulls waiting at once per account on each node (above it: 429).
    #[arg(long, env = "SKIPLOCK_MAX_WAITING_PULLS", default_value_t = Limits::default().max_waiting_pulls,
          value_parser = clap::value_parser!(i64).range(0..=1_000_000))]
    max_waiting_pulls: i64,
    /// The largest message body in bytes (Cloudflare's 128 KB by default; up to 1 MiB).
    #[arg(long, env = "SKIPLOCK_MAX_MESSAGE_BYTES", default_value_t = Limits::default().max_message_bytes,
          value_parser = clap::value_parser!(i64).range(1_000..=1_048_576))]
    max_message_bytes: i64,
    /// The longest retention a queue may be given, in seconds (Cloudflare's 14 days by default).
    #[arg(long, env = "SKIPLOCK_MAX_RETENTION_SECONDS", default_value_t = Limits::default().max_retention_seconds,
          value_parser = clap::value_parser!(i64).range(60..=1_209_600))]
    max_retention_seconds: i64,
    /// The key that seals webhook signing secrets and the lease key at rest: 32 bytes in base64
    /// (`skiplock secrets new-key` makes one). Without it they are stored in the clear.
    #[arg(long, env = "SKIPLOCK_SECRET_KEY", hide_env_values = true)]
    secret_key: Option<String>,
    /// A file holding SKIPLOCK_SECRET_KEY instead (a mounted secret, say).
    #[arg(long, env = "SKIPLOCK_SECRET_KEY_FILE", conflicts_with = "secret_key")]
    secret_key_file: Option<std::path::PathBuf>,
    /// Earlier keys, comma-separated, which open secrets sealed under them while `skiplock secrets rotate`
    /// seals them again under the current key.
    #[arg(long, env = "SKIPLOCK_PREVIOUS_SECRET_KEYS", value_delimiter = ',', hide_env_values = true)]
    previous_secret_keys: Vec<String>,
    /// How long a generation of the message tables stays current before an empty one takes its place,
    /// in milliseconds (docs/operations.md, "A held snapshot").
    #[arg(long, env = "SKIPLOCK_GENERATION_EVERY_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    generation_every_ms: u64,
    /// Database connections per process (and up to 4 more for publishes).
    #[arg(long, env = "SKIPLOCK_DB_POOL_SIZE", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    db_pool_size: u32,
    /// Log filter (tracing EnvFilter syntax).
    #[arg(long, env = "SKIPLOCK_LOG", default_value = "info,sqlx=warn", value_parser = parse_log_filter)]
    log: String,
    /// Log format.
    #[arg(long, env = "SKIPLOCK_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
}

fn parse_network(raw: &str) -> Result<Option<IpNet>, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    raw.parse().map(Some).map_err(|_| format!("{raw:?} is not a network like 10.0.0.0/8"))
}

fn parse_log_filter(raw: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(raw).map(|_| raw.to_owned()).map_err(|e| format!("not a log filter: {e}"))
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub database_url: String,
    pub bind: SocketAddr,
    pub admin_bind: SocketAddr,
    pub metrics_bind: SocketAddr,
    pub webhook_allow_cidrs: Vec<IpNet>,
    pub trusted_proxies: Vec<IpNet>,
    pub webhook_timeout: Duration,
    /// How long the webhook attempt log keeps attempts, and how many per consumer.
    pub webhook_attempts: Keeping,
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
    /// How the message generations turn.
    pub rotation: Rotation,
    pub secret_key: Option<SecretKey>,
    pub previous_secret_keys: Vec<SecretKey>,
}

/// Where a sealing key comes from (never shown by `Debug`).
#[derive(Clone)]
pub enum SecretKey {
    Given(String),
    File(std::path::PathBuf),
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretKey::Given(_) => f.write_str("Given(…)"),
            SecretKey::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

impl Settings {
    /// The node's keys for secrets at rest, from the settings; an error says what is wrong with them.
    pub fn keyring(&self) -> anyhow::Result<Keyring> {
        let current = self.secret_key.as_ref().map(SecretKey::read).transpose()?;
        let previous = self.previous_secret_keys.iter().map(SecretKey::read).collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Keyring::new(current.as_deref(), &previous)?)
    }
}

impl SecretKey {
    fn read(&self) -> anyhow::Result<String> {
        match self {
            SecretKey::Given(key) => Ok(key.clone()),
            SecretKey::File(path) => std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("SKIPLOCK_SECRET_KEY_FILE {}: {e}", path.display())),
        }
    }
}

impl From<SettingsArgs> for Settings {
    fn from(a: SettingsArgs) -> Self {
        Self {
            database_url: a.database_url,
            bind: a.bind,
            admin_bind: a.admin_bind,
            metrics_bind: a.metrics_bind,
            webhook_allow_cidrs: a.webhook_allow_cidrs.into_iter().flatten().collect(),
            trusted_proxies: a.trusted_proxies.into_iter().flatten().collect(),
            webhook_timeout: Duration::from_millis(a.webhook_timeout_ms),
            webhook_attempts: Keeping {
                days: f64::from(a.webhook_attempts_hours) / 24.0,
                per_consumer: a.webhook_attempts_per_consumer.into(),
            },
            metrics_max_queues: a.metrics_max_queues as usize,
            queue_gauges_every: Duration::from_millis(a.queue_gauges_every_ms),
            limits: Limits {
                rate_per_second: a.rate_limit,
                rate_burst: a.rate_burst,
                publish_rate_per_second: a.publish_rate_limit,
                max_queues_per_account: a.max_queues,
                max_backlog_bytes_per_queue: a.max_backlog_bytes,
                max_waiting_pulls: a.max_waiting_pulls,
                max_message_bytes: a.max_message_bytes,
                max_retention_seconds: a.max_retention_seconds,
                // Quotas are a plan's business: a node sets none of its own.
                max_operations_per_day: 0,
                max_operations_per_month: 0,
                max_stored_bytes: 0,
            },
            db_pool_size: a.db_pool_size,
            log_filter: a.log,
            log_json: a.log_format == "json",
            retention_sweep_every: Duration::from_secs(30),
            activity_flush_every: Duration::from_secs(2),
            rotation: Rotation { every: Duration::from_millis(a.generation_every_ms), ..Rotation::default() },
            secret_key: a.secret_key.map(SecretKey::Given).or(a.secret_key_file.map(SecretKey::File)),
            previous_secret_keys: a.previous_secret_keys.into_iter().map(SecretKey::Given).collect(),
        }
    }
}

/// A parser of the settings alone, for callers that build a node without the command line (tests).
#[derive(clap::Parser)]
struct SettingsOnly {
    #[command(flatten)]
    settings: SettingsArgs,
}

impl Settings {
    /// The settings from `args` (options as on the command line), then the environment, then the defaults.
    pub fn from_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::Parser;
        let program = std::iter::once(std::ffi::OsString::from("skiplock"));
        let parsed = SettingsOnly::try_parse_from(program.chain(args.into_iter().map(Into::into)))?;
        Ok(parsed.settings.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_when_only_the_database_is_given() {
        let s = Settings::from_args(["--database-url", "postgres://x"]).unwrap();
        assert_eq!(s.bind.to_string(), "127.0.0.1:8787");
        assert_eq!(s.metrics_bind.to_string(), "127.0.0.1:9787");
        assert_eq!(s.admin_bind.to_string(), "127.0.0.1:9788");
        assert_eq!(s.limits, Limits::default());
        assert_eq!(s.webhook_timeout, Duration::from_secs(30));
    }

    #[test]
    fn invalid_values_name_the_setting() {
        let err = |args: &[&str]| Settings::from_args(args).unwrap_err().to_string();
        assert!(err(&["--database-url", "x", "--bind", "nope"]).contains("--bind"));
        assert!(err(&["--database-url", "x", "--webhook-allow-cidrs", "127.0.0.1/8,bad"]).contains("bad"));
        assert!(err(&["--database-url", "x", "--db-pool-size", "0"]).contains("--db-pool-size"));
        assert!(err(&["--database-url", "x", "--log-format", "xml"]).contains("--log-format"));
        let cidrs =
            Settings::from_args(["--database-url", "x", "--webhook-allow-cidrs", "127.0.0.0/8,::1/128"]).unwrap();
        assert_eq!(cidrs.webhook_allow_cidrs.len(), 2);
    }
}
