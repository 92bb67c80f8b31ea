//! Firing schedules: the loop every node runs. A node takes the schedules due within the coming `LEAD`
//! ahead of time (each row held for it until `HOLD` after its tick), waits for each tick, publishes its
//! message as any publish is (the account's publish rate and the queue's quota apply) and records the tick
//! only while it still holds the row. Several taken batches fire at once, so that ten thousand schedules
//! due in one second commit within it. A node that dies leaves its ticks to another once the holds run
//! out; a tick's message carries an idempotency key made from the tick, so a tick fired twice is stored
//! once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::schedules::cadence_of;
use super::Engine;
use crate::error::Kind;
use crate::queue::message::{ContentType, MessageKey, NewMessage, MAX_BATCH_MESSAGES};
use crate::queue::schedule;
use crate::store;
use crate::store::owned::OwnedQueue;
use crate::store::schedules::{Fired, Schedule};

/// How long after its tick a node holds a schedule it took; a tick refused meanwhile (the account's
/// publish rate) is tried again once the hold runs out, and a node that died is replaced then.
pub const HOLD: Duration = Duration::from_secs(10);
/// A node takes schedules due within this long ahead, so that taking them costs nothing at their tick.
const LEAD: Duration = Duration::from_secs(2);
/// Schedules a node takes at once.
const BATCH: i64 = 500;
/// Batches a node fires at once.
const FIRING_AT_ONCE: usize = 32;
/// The longest a node waits before it looks again: schedules made or changed on other nodes are seen
/// within it.
const LOOK_EVERY: Duration = Duration::from_secs(1);

impl Engine {
    /// Fires due schedules until `stop`: takes batches as they come within `LEAD` of their ticks and fires
    /// each in a task of its own; otherwise sleeps until the next is that close (at most `LOOK_EVERY`, one
    /// query a second when idle).
    pub async fn fire_schedules(self: Arc<Self>, stop: CancellationToken) {
        let mut firing = JoinSet::new();
        loop {
            while firing.try_join_next().is_some() {}
            let wait = if firing.len() >= FIRING_AT_ONCE {
                // Enough at once: the next batch is taken when one of these is done.
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = firing.join_next() => continue,
                }
            } else {
                match self.take_batch().await {
                    Ok(Taken::Batch(batch, full)) => {
                        firing.spawn(self.clone().fire(batch));
                        if full {
                            continue;
                        }
                        Duration::ZERO
                    }
                    Ok(Taken::NextIn(wait)) => wait.min(LOOK_EVERY),
                    Err(err) => {
                        tracing::warn!(error = %err, "taking due schedules failed; will retry");
                        LOOK_EVERY
                    }
                }
            };
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(wait.max(Duration::from_millis(5))) => {}
            }
        }
        // A node stopping fires what it took (within `LEAD`) rather than leave it to another node once the
        // holds run out.
        while firing.join_next().await.is_some() {}
    }

    /// Takes a batch of the schedules due within `LEAD`, or says how long until one will be.
    async fn take_batch(&self) -> Result<Taken, sqlx::Error> {
        let lead = chrono::Duration::from_std(LEAD).unwrap_or_default();
        match store::schedules::next_due(&self.pool).await? {
            Some(due) if due <= Utc::now() + lead => {
                let taken =
                    store::schedules::take_due(&self.pool, self.node, BATCH, LEAD.as_secs_f64(), HOLD.as_secs_f64())
                        .await?;
                let full = taken.len() as i64 == BATCH;
                Ok(if taken.is_empty() { Taken::NextIn(Duration::ZERO) } else { Taken::Batch(taken, full) })
            }
            Some(due) => Ok(Taken::NextIn((due - Utc::now() - lead).to_std().unwrap_or_default())),
            None => Ok(Taken::NextIn(LOOK_EVERY)),
        }
    }

    /// Fires a taken batch: each tick at its time, those of one moment together.
    async fn fire(self: Arc<Self>, mut taken: Vec<Schedule>) {
        taken.sort_by_key(|s| s.next_run_at);
        while let Some(first) = taken.first() {
            if let Some(wait) = first.next_run_at.and_then(|due| (due - Utc::now()).to_std().ok()) {
                tokio::time::sleep(wait).await;
            }
            let now = Utc::now();
            let due_now = taken.partition_point(|s| s.next_run_at.is_none_or(|due| due <= now)).max(1);
            let ticks: Vec<Schedule> = taken.drain(..due_now).collect();
            if let Err(err) = self.fire_ticks(ticks).await {
                // Their holds run out and they are taken again, by this node or another.
                tracing::warn!(error = %err, "firing schedules failed; they will be taken again");
            }
        }
    }

    /// Publishes the ticks of schedules due now that this node still holds (a queue's ticks together, so
    /// that they share statements) and records them in one statement.
    async fn fire_ticks(&self, taken: Vec<Schedule>) -> Result<(), sqlx::Error> {
        // Paused, changed or deleted since they were taken: not fired.
        let ids: Vec<_> = taken.iter().map(|s| s.id).collect();
        let held: HashSet<_> = store::schedules::still_held(&self.pool, self.node, &ids).await?.into_iter().collect();
        let now = Utc::now();
        let mut fired = Vec::with_capacity(taken.len());
        let mut per_queue: HashMap<OwnedQueue, Vec<(Fired, NewMessage)>> = HashMap::new();
        for s in taken.into_iter().filter(|s| held.contains(&s.id)) {
            match tick_of(s, now) {
                Ok((queue, tick, message)) => per_queue.entry(queue).or_default().push((tick, message)),
                Err(unfireable) => fired.push(unfireable),
            }
        }
        // A publish of at most a batch's messages, so that a queue's ticks get past any account's publish
        // rate (whose burst is at least a batch), some now and the rest once their holds run out.
        let mut publishes = Vec::new();
        for (queue, mut ticks) in per_queue {
            while !ticks.is_empty() {
                let rest = ticks.split_off(ticks.len().min(MAX_BATCH_MESSAGES));
                publishes.push((queue, std::mem::replace(&mut ticks, rest)));
            }
        }
        let published = publishes.into_iter().map(|(queue, ticks)| self.publish_ticks(queue, ticks));
        fired.extend(futures_util::future::join_all(published).await.into_iter().flatten());
        let recorded = store::schedules::fired(&self.pool, self.node, &fired).await?;
        if recorded < fired.len() as u64 {
            // Changed by their tenants, or taken over after the hold ran out: the rows say what is next.
            tracing::info!(changed = fired.len() as u64 - recorded, "schedules changed while they fired");
        }
        Ok(())
    }

    /// Publishes one queue's ticks; answers those to record (none when they are to be tried again).
    async fn publish_ticks(&self, queue: OwnedQueue, ticks: Vec<(Fired, NewMessage)>) -> Vec<Fired> {
        let (mut ticks, messages): (Vec<Fired>, Vec<NewMessage>) = ticks.into_iter().unzip();
        if self.standing.refusal(queue.account()).is_some() {
            // A suspended account's schedules wait, as its deliveries do; tried again as the hold runs out.
            self.metrics.schedule_ticks.with_label_values(&["deferred"]).inc_by(ticks.len() as u64);
            return Vec::new();
        }
        let outcome = self.publish(queue, messages).await;
        let label = match &outcome {
            Ok(_) => "published",
            Err(err) if matches!(err.kind, Kind::RateLimited | Kind::QuotaExceeded | Kind::Unavailable) => "deferred",
            Err(_) => "failed",
        };
        self.metrics.schedule_ticks.with_label_values(&[label]).inc_by(ticks.len() as u64);
        match outcome {
            Ok(_) => {
                let lag = self.metrics.schedule_lag.with_label_values::<&str>(&[]);
                for t in &ticks {
                    lag.observe((Utc::now() - t.tick).to_std().unwrap_or_default().as_secs_f64());
                }
                ticks
            }
            // Held back past a second by the account's publish rate, or the database away: tried again once
            // the hold runs out.
            Err(err) if matches!(err.kind, Kind::RateLimited | Kind::QuotaExceeded | Kind::Unavailable) => Vec::new(),
            Err(err) => {
                // The queue is full (or went away): these ticks are skipped, and the schedules say why.
                for t in &mut ticks {
                    t.stored = false;
                    t.error = Some(format!("tick at {} not published: {}", t.tick.to_rfc3339(), err.message));
                }
                ticks
            }
        }
    }
}

/// What a look for due schedules found.
enum Taken {
    /// Schedules taken, and whether the batch was full (more may be due).
    Batch(Vec<Schedule>, bool),
    /// None due within `LEAD`; look again after this long.
    NextIn(Duration),
}

/// A held schedule's tick, the latest due (after an outage, the ticks missed fire once), as it will be
/// recorded once published, and its message; or, for a schedule that cannot fire, its record saying why.
fn tick_of(s: Schedule, now: DateTime<Utc>) -> Result<(OwnedQueue, Fired, NewMessage), Fired> {
    let due = s.next_run_at.unwrap_or(now);
    let cadence = cadence_of(&s)
        // Not reachable through the API, which checks what it stores; a row changed by hand is let be.
        .map_err(|err| Fired { id: s.id, tick: due, next: None, stored: false, error: Some(err.message) })?;
    let tick = cadence.latest_due(due, now);
    let next = cadence.next_after(tick);
    let key = schedule::tick_key(s.idempotency_key.as_deref(), &s.id.to_string(), tick);
    let message = NewMessage {
        content_type: ContentType::from_code(s.content_type),
        body: Bytes::from(s.body),
        delay_seconds: s.delay_seconds.map(i64::from),
        idempotency_key: MessageKey::parse("idempotency_key", &key).ok(),
        ordering_key: None,
        flow_key: None,
    };
    Ok((s.queue, Fired { id: s.id, tick, next, stored: true, error: None }, message))
}
