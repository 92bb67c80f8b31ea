//! The redrive runner, one per node: takes running redrive tasks by a lease on their row and moves
//! their messages batch by batch (see `store::redrive::step`). A task whose node died is taken up by
//! another node once its lease runs out; a node that stops gives its tasks back at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::PgPool;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::store::redrive::{self, Held, Step};

/// How long a node holds a task without renewing it; every batch renews it, so only a dead or stuck
/// node lets it run out.
pub const LEASE: Duration = Duration::from_secs(5);
/// Messages moved per transaction when no rate is set.
const BATCH: i64 = 500;
/// Tasks one node works on at once.
const MAX_TASKS: usize = 8;
/// How often a node looks for tasks to take.
const POLL: Duration = Duration::from_millis(500);
/// How long to wait when every message left is in flight, or the database failed.
const IDLE: Duration = Duration::from_secs(1);

/// Runs until `stop`: takes tasks no node holds and works on each until it is done, cancelled or lost.
pub async fn run(pool: PgPool, metrics: Arc<Metrics>, stop: CancellationToken) {
    let mut running: JoinSet<()> = JoinSet::new();
    loop {
        while running.len() < MAX_TASKS {
            match redrive::take(&pool, LEASE.as_secs_f64()).await {
                Ok(Some(held)) => {
                    running.spawn(work(pool.clone(), held, metrics.clone(), stop.clone()));
                }
                Ok(None) => break,
                Err(err) => {
                    tracing::warn!(error = %err, "taking a redrive task failed; will retry");
                    break;
                }
            }
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(POLL) => {}
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    while running.join_next().await.is_some() {}
}

/// Moves one task's messages, a batch per transaction, at most `rate_per_second` a second.
async fn work(pool: PgPool, held: Held, metrics: Arc<Metrics>, stop: CancellationToken) {
    let rate = held.rate_per_second.map(|r| i64::from(r.max(1)));
    let limit = rate.map_or(BATCH, |r| r.min(BATCH));
    tracing::info!(redrive_id = %held.id, "working on a redrive task");
    loop {
        if stop.is_cancelled() {
            if let Err(err) = redrive::release(&pool, held).await {
                tracing::warn!(error = %err, "giving a redrive task back failed; its lease will run out");
            }
            return;
        }
        let started = Instant::now();
        let wait = match redrive::step(&pool, held, limit, LEASE.as_secs_f64()).await {
            Ok(Step::Lost) => return,
            Ok(Step::Moved { moved, selected, finished }) => {
                metrics.redriven.inc_by(moved as u64);
                if finished {
                    tracing::info!(redrive_id = %held.id, "redrive task finished");
                    return;
                }
                match rate {
                    _ if selected == 0 => IDLE,
                    Some(rate) => {
                        Duration::from_secs_f64(selected as f64 / rate as f64).saturating_sub(started.elapsed())
                    }
                    None => Duration::ZERO,
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, redrive_id = %held.id, "a redrive batch failed; will retry");
                IDLE
            }
        };
        if !wait.is_zero() {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}
