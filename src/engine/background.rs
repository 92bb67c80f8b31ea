//! Every periodic task a node runs besides serving: the list in one place, each given to
//! `spawn_periodic`. The work is idempotent across nodes (sweeps claim rows with SKIP LOCKED, each count
//! delta is folded once, a vacuum another node runs is skipped), so any number of nodes run it all.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::maintenance::{self, MessageTable, TableVacuum};
use super::periodic::{spawn_periodic, Pace};
use super::rotation::Rotation;
use super::{backlog, deletion, events, gauges, quotas, shares, standing, Engine};
use crate::store;

/// The cadences an operator may set.
#[derive(Debug, Clone, Copy)]
pub struct Cadences {
    /// How often messages past their retention are looked for.
    pub retention_sweep: Duration,
    /// How often the activity counters are written (the dashboard's chart).
    pub activity_flush: Duration,
    /// At least how long between two refreshes of the per-queue gauges.
    pub queue_gauges: Duration,
    /// Queues with their own gauge series.
    pub max_queue_series: usize,
    /// How the message generations turn.
    pub rotation: Rotation,
    /// How long webhook attempts are kept, and how many per consumer.
    pub attempts: super::attempts::Keeping,
}

/// How often a node reads how far back the service's running transactions reach: its floors lag the
/// claims by about this much.
const BOUND_EVERY: Duration = Duration::from_millis(100);
/// How often leases that ran out are swept: a message whose lease runs out is claimable again within this.
const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// How often a node tries a turn of the message generations' rotation.
const ROTATE_EVERY: Duration = Duration::from_secs(1);
/// How often the cleanup horizon's holder is looked for.
const HORIZON_EVERY: Duration = Duration::from_secs(10);

/// How often the flow keys holding messages back are looked at: a key's message whose rate's time came
/// while none of its messages left is let go within this.
const FLOW_EVERY: Duration = Duration::from_secs(1);

/// How often the queue count deltas' size is looked at; readers add the unfolded ones, so a fold bounds
/// the work of a read rather than how fresh it is.
const FOLD_EVERY: Duration = Duration::from_secs(1);
/// The deltas' size on disk past which a node folds them without waiting for the rotation's turn.
const FOLD_ABOVE_BYTES: i64 = 1 << 20;

impl Engine {
    /// Starts the node's background work on `tasks`; it stops with `stop`.
    pub fn spawn_background(self: &Arc<Self>, tasks: &mut JoinSet<()>, cadences: Cadences, stop: &CancellationToken) {
        let max = cadences.max_queue_series;
        self.periodic(
            tasks,
            "refreshing queue gauges",
            Pace::Spaced(cadences.queue_gauges),
            stop,
            move |e| async move { gauges::refresh(&e.metrics, &e.pool, max).await },
        );
        let keeping = cadences.attempts;
        self.periodic(
            tasks,
            "the retention upkeep",
            Pace::Every(cadences.retention_sweep),
            stop,
            move |e| async move { maintenance::retention_turn(&e.pool, &e.activity, keeping).await },
        );
        self.periodic(tasks, "letting flow keys go", Pace::Every(FLOW_EVERY), stop, |e| async move {
            e.release_due_flows().await
        });
        for table in MessageTable::ALL {
            // Each table on a loop of its own: a long vacuum of the bodies must not hold back the next
            // one of `messages`, whose dead index entries every claim walks.
            let vacuum = Arc::new(TableVacuum::new(table));
            self.periodic(tasks, "vacuuming a message table", Pace::Every(maintenance::VACUUM_EVERY), stop, move |e| {
                let vacuum = vacuum.clone();
                async move { vacuum.run_if_due(&e.pool, maintenance::VACUUM_DEAD_ROWS).await.map(|_| ()) }
            });
        }
        self.periodic(
            tasks,
            "reading how far back running writes reach",
            Pace::Every(BOUND_EVERY),
            stop,
            |e| async move {
                let bound = store::horizon::writers_since(&e.pool).await?;
                e.delivery.floors.set_bound(bound);
                Ok::<_, sqlx::Error>(())
            },
        );
        self.periodic(tasks, "sweeping leases that ran out", Pace::Every(SWEEP_EVERY), stop, |e| async move {
            e.sweep_leases_that_ran_out().await
        });
        let rotation = cadences.rotation;
        self.periodic(tasks, "turning the message generations", Pace::Every(ROTATE_EVERY), stop, move |e| async move {
            e.rotate(rotation).await.map(|_| ())
        });
        self.periodic(tasks, "watching the cleanup horizon", Pace::Every(HORIZON_EVERY), stop, |e| async move {
            e.watch_horizon().await
        });
        self.periodic(
            tasks,
            "reading the refused accounts",
            Pace::Every(standing::STANDING_EVERY),
            stop,
            |e| async move { e.refresh_standing().await },
        );
        self.periodic(tasks, "reading the quotas used", Pace::Every(quotas::QUOTAS_EVERY), stop, |e| async move {
            e.refresh_quotas().await
        });
        let stopping = stop.clone();
        self.periodic(tasks, "deleting accounts", Pace::Every(deletion::DELETION_EVERY), stop, move |e| {
            let stopping = stopping.clone();
            async move { e.delete_accounts(&stopping).await }
        });
        self.periodic(tasks, "reading the plans", Pace::Every(standing::STANDING_EVERY), stop, |e| async move {
            e.refresh_plans().await
        });
        self.periodic(
            tasks,
            "sharing rates between nodes",
            Pace::Every(shares::EXCHANGE_EVERY),
            stop,
            |e| async move { e.exchange_rate_shares().await },
        );
        self.periodic(tasks, "folding queue counts", Pace::Every(FOLD_EVERY), stop, |e| async move {
            if let Some(folded) = store::counts::fold_if_over(&e.pool, FOLD_ABOVE_BYTES).await? {
                super::usage::count_folded(&e.metrics, &folded);
            }
            Ok::<_, sqlx::Error>(())
        });
        self.periodic(tasks, "counting queue backlogs", Pace::Spaced(backlog::FRESH_FOR), stop, |e| async move {
            e.backlog.refresh(&e.pool).await
        });
        // Tables grow by publishes, so a node looks only after it stored some: the node that fills them
        // analyzes them, and an idle node makes no query.
        let published_at_last_look = Arc::new(AtomicU64::new(self.metrics.published.get()));
        let statistics = Pace::Every(maintenance::STATISTICS_EVERY);
        self.periodic(tasks, "refreshing planner statistics", statistics, stop, move |e| {
            let last = published_at_last_look.clone();
            async move {
                let published = e.metrics.published.get();
                if published != last.load(Ordering::Relaxed) {
                    maintenance::refresh_statistics(&e.pool).await?;
                    last.store(published, Ordering::Relaxed);
                }
                Ok::<_, sqlx::Error>(())
            }
        });
        self.periodic(tasks, "flushing queue activity", Pace::Every(cadences.activity_flush), stop, |e| async move {
            e.activity.flush(&e.pool).await
        });
        // What was counted since the last flush is written once more on the way out.
        let (engine, stopped) = (self.clone(), stop.clone());
        tasks.spawn(async move {
            stopped.cancelled().await;
            let _ = engine.activity.flush(&engine.pool).await;
        });
        self.periodic(tasks, "publishing events", Pace::Every(events::PUBLISH_EVERY), stop, |e| async move {
            e.publish_events().await
        });
        self.periodic(tasks, "watching backlog thresholds", Pace::Every(events::BACKLOG_EVERY), stop, |e| async move {
            e.check_backlog_thresholds().await
        });
        self.periodic(
            tasks,
            "disabling consumers failing too long",
            Pace::Every(events::BACKLOG_EVERY),
            stop,
            |e| async move { e.disable_failing_consumers().await },
        );
        tasks.spawn(super::redrive::run(self.pool.clone(), self.metrics.clone(), stop.clone()));
        tasks.spawn(self.clone().fire_schedules(stop.clone()));
        if let Some(listener) = self.wakeups.start_listening(self.pool.clone(), stop.clone()) {
            tasks.spawn(async move {
                let _ = listener.await;
            });
        }
        let (wakeups, stopped) = (self.wakeups.clone(), stop.clone());
        tasks.spawn(async move {
            stopped.cancelled().await;
            wakeups.stop_waits();
        });
    }

    /// `spawn_periodic` with the engine handed to each run.
    fn periodic<F, Fut, E>(
        self: &Arc<Self>,
        tasks: &mut JoinSet<()>,
        what: &'static str,
        pace: Pace,
        stop: &CancellationToken,
        task: F,
    ) where
        F: Fn(Arc<Engine>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let engine = self.clone();
        spawn_periodic(tasks, what, pace, stop.clone(), move || task(engine.clone()));
    }
}
