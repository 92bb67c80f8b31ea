//! One way to run background work on a cadence until the node stops: every periodic loop of the engine
//! (vacuum, count folding, sweeps, gauges, backlog figures, activity) is a task given to `spawn_periodic`.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How often a periodic task runs.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// Every so often; a run that overran its slot is followed by the next one a full interval later,
    /// not at once.
    Every(Duration),
    /// At least this long after the last run ended, and long enough that the task takes at most a
    /// twentieth of the time (a task that reads more as the data grows backs off by itself).
    Spaced(Duration),
}

impl Pace {
    /// How long to wait after a run that took `took`.
    pub fn wait_after(self, took: Duration) -> Duration {
        match self {
            Pace::Every(every) if took < every => every - took,
            Pace::Every(every) => every,
            Pace::Spaced(floor) => floor.max(took * 20),
        }
    }
}

/// Runs `task` on `pace` until `stop`, logging a failure under `what` and trying again at the next turn.
/// The first run is at once.
pub fn spawn_periodic<F, Fut, E>(
    tasks: &mut JoinSet<()>,
    what: &'static str,
    pace: Pace,
    stop: CancellationToken,
    task: F,
) where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    tasks.spawn(run_periodic(what, pace, stop, task));
}

/// The loop `spawn_periodic` runs, for a caller that spawns it itself.
pub async fn run_periodic<F, Fut, E>(what: &'static str, pace: Pace, stop: CancellationToken, mut task: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display + Send + 'static,
{
    loop {
        let started = Instant::now();
        if let Err(err) = task().await {
            tracing::warn!(error = %err, "{what} failed; will retry");
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pace.wait_after(started.elapsed())) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spaced_task_backs_off_when_it_runs_long() {
        let pace = Pace::Spaced(Duration::from_secs(1));
        assert_eq!(pace.wait_after(Duration::from_millis(10)), Duration::from_secs(1));
        assert_eq!(pace.wait_after(Duration::from_millis(100)), Duration::from_secs(2));
    }

    #[test]
    fn a_task_every_interval_keeps_its_cadence_and_never_runs_back_to_back() {
        let pace = Pace::Every(Duration::from_secs(5));
        assert_eq!(pace.wait_after(Duration::from_secs(1)), Duration::from_secs(4));
        assert_eq!(pace.wait_after(Duration::from_secs(9)), Duration::from_secs(5));
    }
}
