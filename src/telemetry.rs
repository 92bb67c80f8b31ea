//! Tracing set-up: text or JSON lines, filtered by `SKIPLOCK_LOG`.

use tracing_subscriber::EnvFilter;

/// `filter` was validated with the rest of the settings.
pub fn init(filter: &str, json: bool) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
}
