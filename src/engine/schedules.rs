//! Schedules: a tenant's changes to them, and the loop every node runs that fires the due ones. A due
//! schedule is taken by one node (its row held for `HOLD`), its tick's message published as any publish
//! is (the account's publish rate and the queue's quota apply), and the tick recorded only while the node
//! still holds it. A node that dies mid-fire leaves the tick to another once the hold runs out; the tick's
//! message carries an idempotency key made from the tick, so a tick fired twice is stored once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Timelike, Utc};
use tokio_util::sync::CancellationToken;

use super::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, ScheduleId};
use crate::queue::message::{ContentType, MessageKey, NewMessage};
use crate::queue::schedule::{self, Cadence};
use crate::queue::Invalid;
use crate::store;
use crate::store::owned::OwnedQueue;
use crate::store::schedules::{Fired, Schedule};

/// A node holds a schedule it fires for this long; a tick refused for a while (the account's publish rate)
/// is tried again once it runs out.
pub const HOLD: Duration = Duration::from_secs(10);
/// Schedules a node takes at once.
const BATCH: i64 = 500;
/// The longest a node waits before it looks again: schedules made or changed on other nodes are seen
/// within it.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// Schedules an account may have.
pub const MAX_SCHEDULES_PER_ACCOUNT: i64 = 1_000;

/// What a tenant sets on a schedule; on an update, None keeps what is there.
#[derive(Debug, Default)]
pub struct ScheduleInput {
    pub queue: Option<OwnedQueue>,
    pub cron: Option<String>,
    pub interval_seconds: Option<i64>,
    pub time_zone: Option<String>,
    pub message: Option<NewMessage>,
    /// Some(None) removes the template.
    pub idempotency_key: Option<Option<String>>,
    pub paused: Option<bool>,
}

/// The cadence a stored schedule fires on.
pub fn cadence_of(s: &Schedule) -> Result<Cadence, Invalid> {
    match (&s.cron, s.interval_seconds) {
        (Some(cron), _) => Cadence::cron(cron, &s.time_zone),
        (None, Some(seconds)) => Cadence::every(seconds, s.anchor_at),
        (None, None) => Err(crate::queue::invalid("a schedule needs cron or interval_seconds")),
    }
}

impl Engine {
    /// A new schedule of the account; `input` names its queue, cadence and message.
    pub async fn create_schedule(&self, account: AccountId, input: ScheduleInput) -> ApiResult<Schedule> {
        let queue = input.queue.ok_or_else(|| ApiError::invalid("queue_id is required"))?;
        let message = input.message.ok_or_else(|| ApiError::invalid("message is required"))?;
        if store::schedules::count(&self.pool, account).await? >= MAX_SCHEDULES_PER_ACCOUNT {
            return Err(ApiError::new(
                Kind::QueueQuota,
                format!(
                    "this account has reached its quota of {MAX_SCHEDULES_PER_ACCOUNT} schedules; delete one before \
                     creating another"
                ),
            ));
        }
        // Whole seconds, so that an interval's ticks fall on them.
        let now = Utc::now().with_nanosecond(0).unwrap_or_else(Utc::now);
        let mut s = Schedule {
            id: ScheduleId::new(),
            queue,
            cron: None,
            time_zone: "UTC".into(),
            interval_seconds: None,
            anchor_at: now,
            content_type: message.content_type.code(),
            body: message.body.to_vec(),
            delay_seconds: message.delay_seconds.map(|d| d as i32),
            idempotency_key: None,
            paused: input.paused.unwrap_or(false),
            next_run_at: None,
            last_run_at: None,
            last_error: None,
            runs: 0,
            created_at: now,
            modified_at: now,
        };
        apply_cadence(&mut s, input.cron, input.interval_seconds, input.time_zone)?;
        if let Some(template) = input.idempotency_key.flatten() {
            schedule::check_key_template(&template)?;
            s.idempotency_key = Some(template);
        }
        Ok(store::schedules::create(&self.pool, &s).await?)
    }

    /// Changes what `input` sets on the account's schedule; None when it has no such schedule.
    pub async fn update_schedule(
        &self,
        account: AccountId,
        id: ScheduleId,
        input: ScheduleInput,
    ) -> ApiResult<Option<(Schedule, Schedule)>> {
        let Some(before) = store::schedules::get(&self.pool, account, id).await? else { return Ok(None) };
        let mut s = before.clone();
        if let Some(queue) = input.queue {
            s.queue = queue;
        }
        if let Some(m) = input.message {
            s.content_type = m.content_type.code();
            s.body = m.body.to_vec();
            s.delay_seconds = m.delay_seconds.map(|d| d as i32);
        }
        if let Some(template) = input.idempotency_key {
            if let Some(t) = &template {
                schedule::check_key_template(t)?;
            }
            s.idempotency_key = template;
        }
        let changes_cadence = input.cron.is_some() || input.interval_seconds.is_some() || input.time_zone.is_some();
        if changes_cadence {
            // A new cadence counts from now; naming one kind drops the other.
            let (cron, interval) = match (input.cron, input.interval_seconds) {
                (None, None) => (s.cron.take(), s.interval_seconds.take()),
                given => given,
            };
            s.cron = None;
            s.interval_seconds = None;
            s.anchor_at = Utc::now().with_nanosecond(0).unwrap_or_else(Utc::now);
            let zone = input.time_zone.or_else(|| cron.is_some().then(|| before.time_zone.clone()));
            apply_cadence(&mut s, cron, interval, zone)?;
        }
        match input.paused {
            Some(true) => s.paused = true,
            Some(false) if s.paused => {
                // Resumed: it goes on from now, without the ticks it missed while paused.
                s.paused = false;
                s.next_run_at = cadence_of(&s)?.next_after(Utc::now());
            }
            _ => {}
        }
        Ok(store::schedules::save(&self.pool, &s).await?.map(|after| (before, after)))
    }

    pub async fn schedule(&self, account: AccountId, id: ScheduleId) -> ApiResult<Option<Schedule>> {
        Ok(store::schedules::get(&self.pool, account, id).await?)
    }

    pub async fn schedules(&self, account: AccountId, limit: i64, offset: i64) -> ApiResult<(Vec<Schedule>, i64)> {
        Ok(store::schedules::list(&self.pool, account, limit, offset).await?)
    }

    pub async fn delete_schedule(&self, account: AccountId, id: ScheduleId) -> ApiResult<bool> {
        Ok(store::schedules::delete(&self.pool, account, id).await?)
    }

    /// Fires due schedules until `stop`: when one is due, takes a batch, fires each and records them;
    /// otherwise sleeps until the next is due (at most `LOOK_EVERY`, one query a second when idle).
    pub async fn fire_schedules(self: Arc<Self>, stop: CancellationToken) {
        loop {
            let wait = match store::schedules::next_due(&self.pool).await {
                Ok(Some(due)) if due <= Utc::now() => match self.fire_due().await {
                    Ok(true) => continue,
                    Ok(false) => Duration::ZERO,
                    Err(err) => {
                        tracing::warn!(error = %err, "firing due schedules failed; will retry");
                        LOOK_EVERY
                    }
                },
                Ok(Some(due)) => (due - Utc::now()).to_std().unwrap_or(Duration::ZERO).min(LOOK_EVERY),
                Ok(None) => LOOK_EVERY,
                Err(err) => {
                    tracing::warn!(error = %err, "looking for due schedules failed; will retry");
                    LOOK_EVERY
                }
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(wait.max(Duration::from_millis(5))) => {}
            }
        }
    }

    /// Takes a batch of due schedules, fires their ticks (one publish per queue, so that a queue's ticks
    /// share a statement) and records them in one statement; true when the batch was full.
    async fn fire_due(&self) -> Result<bool, sqlx::Error> {
        let taken = store::schedules::take_due(&self.pool, self.node, BATCH, HOLD.as_secs_f64()).await?;
        let full = taken.len() as i64 == BATCH;
        let now = Utc::now();
        let mut fired = Vec::with_capacity(taken.len());
        let mut per_queue: HashMap<OwnedQueue, Vec<(Fired, NewMessage)>> = HashMap::new();
        for s in taken {
            match tick_of(s, now) {
                Ok((queue, tick, message)) => per_queue.entry(queue).or_default().push((tick, message)),
                Err(unfireable) => fired.push(unfireable),
            }
        }
        let published = per_queue.into_iter().map(|(queue, ticks)| async move {
            let (mut ticks, messages): (Vec<Fired>, Vec<NewMessage>) = ticks.into_iter().unzip();
            if self.standing.refusal(queue.account()).is_some() {
                // A suspended account's schedules wait, as its deliveries do; tried again as the hold runs out.
                self.metrics.schedule_ticks.with_label_values(&["deferred"]).inc_by(ticks.len() as u64);
                return Vec::new();
            }
            let outcome = self.publish(queue, messages).await;
            let label = match &outcome {
                Ok(_) => "published",
                Err(err) if matches!(err.kind, Kind::RateLimited | Kind::Unavailable) => "deferred",
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
                // Held back past a second by the account's publish rate, or the database away: tried again
                // once the hold runs out.
                Err(err) if matches!(err.kind, Kind::RateLimited | Kind::Unavailable) => Vec::new(),
                Err(err) => {
                    // The queue is full (or went away): these ticks are skipped, and the schedules say why.
                    for t in &mut ticks {
                        t.stored = false;
                        t.error = Some(format!("tick at {} not published: {}", t.tick.to_rfc3339(), err.message));
                    }
                    ticks
                }
            }
        });
        fired.extend(futures_util::future::join_all(published).await.into_iter().flatten());
        let recorded = store::schedules::fired(&self.pool, self.node, &fired).await?;
        if recorded < fired.len() as u64 {
            // Changed by their tenants, or taken over after the hold ran out: the rows say what is next.
            tracing::info!(changed = fired.len() as u64 - recorded, "schedules changed while they fired");
        }
        Ok(full)
    }
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
    };
    Ok((s.queue, Fired { id: s.id, tick, next, stored: true, error: None }, message))
}

/// Sets the cadence of `s` from what was given (exactly one of cron and interval), and its next run from now.
fn apply_cadence(
    s: &mut Schedule,
    cron: Option<String>,
    interval_seconds: Option<i64>,
    time_zone: Option<String>,
) -> Result<(), Invalid> {
    let cadence = match (cron, interval_seconds) {
        (Some(cron), None) => {
            let zone = time_zone.unwrap_or_else(|| "UTC".into());
            let cadence = Cadence::cron(&cron, &zone)?;
            s.cron = Some(cron.trim().to_owned());
            s.time_zone = zone;
            cadence
        }
        (None, Some(seconds)) => {
            if time_zone.as_deref().is_some_and(|z| z != "UTC") {
                return Err(crate::queue::invalid("time_zone applies to cron schedules; an interval counts seconds"));
            }
            let cadence = Cadence::every(seconds, s.anchor_at)?;
            s.interval_seconds = Some(seconds);
            s.time_zone = "UTC".into();
            cadence
        }
        (Some(_), Some(_)) => {
            return Err(crate::queue::invalid("give either cron or interval_seconds, not both"));
        }
        (None, None) => return Err(crate::queue::invalid("cron or interval_seconds is required")),
    };
    s.next_run_at = cadence.next_after(Utc::now());
    if s.next_run_at.is_none() {
        return Err(crate::queue::invalid("cron never matches a date to come (such as the 30th of February)"));
    }
    Ok(())
}

/// The next `n` runs of a schedule, for its view: none while it is paused.
pub fn next_runs(s: &Schedule, n: usize) -> Vec<DateTime<Utc>> {
    match (s.paused, s.next_run_at, cadence_of(s)) {
        (false, Some(next), Ok(cadence)) => {
            let mut runs = vec![next];
            runs.extend(cadence.next_runs(next, n.saturating_sub(1)));
            runs
        }
        _ => Vec::new(),
    }
}
