//! Schedules: a tenant's changes to them (their cadence checked, their next run set) and their views.
//! The loop that fires them is in `firing.rs`.

use chrono::{DateTime, Timelike, Utc};

use super::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, ScheduleId};
use crate::queue::message::NewMessage;
use crate::queue::schedule::{self, Cadence};
use crate::queue::Invalid;
use crate::store;
use crate::store::owned::OwnedQueue;
use crate::store::schedules::Schedule;

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
