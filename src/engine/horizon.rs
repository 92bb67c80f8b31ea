//! Watching the cleanup horizon: a snapshot held open elsewhere in the database (a `pg_dump`, a report, a
//! session idle in a transaction, a standby's query with `hot_standby_feedback`, a lagging replication
//! slot) keeps every row version the service leaves behind from being removed. Delivery keeps its pace
//! beside one (`floors`), but tables grow while it lasts, so the node says who holds it: the
//! `skiplock_cleanup_horizon_*` gauges, and a warning in the log that names the holder (docs/operations.md).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Engine;
use crate::store;

/// A holder older than this is named in the log.
const WARN_AFTER_SECONDS: f64 = 60.0;
/// The same holder is named again at most this often.
const WARN_AGAIN_AFTER: Duration = Duration::from_secs(300);

/// The last holder named in the log (its pid and name), and when.
#[derive(Default)]
pub struct HorizonWatch {
    last_warned: Mutex<Option<Named>>,
}

type Named = (Option<i32>, Option<String>, Instant);

impl Engine {
    pub(super) async fn watch_horizon(&self) -> Result<(), sqlx::Error> {
        let holder = store::horizon::oldest_holder(&self.pool).await?;
        let (age, xid_age) = holder.as_ref().map_or((0.0, 0), |h| (h.age_seconds.unwrap_or(0.0), h.xid_age));
        self.metrics.horizon_age.set(age as i64);
        self.metrics.horizon_xid_age.set(i64::from(xid_age));
        let Some(h) = holder.filter(|_| age >= WARN_AFTER_SECONDS) else { return Ok(()) };
        let mut last = self.horizon.last_warned.lock().expect("horizon lock");
        let same = last
            .as_ref()
            .is_some_and(|(pid, name, at)| *pid == h.pid && *name == h.name && at.elapsed() < WARN_AGAIN_AFTER);
        if !same {
            tracing::warn!(
                kind = %h.kind,
                pid = ?h.pid,
                application = h.name.as_deref().unwrap_or(""),
                client = h.client_addr.as_deref().unwrap_or(""),
                state = h.state.as_deref().unwrap_or(""),
                held_for_seconds = age.round(),
                xid_age = h.xid_age,
                "a snapshot held open is keeping vacuum from cleaning up: the tables grow until it ends \
                 (see docs/operations.md, \"A held snapshot\")"
            );
            *last = Some((h.pid, h.name.clone(), Instant::now()));
        }
        Ok(())
    }
}
