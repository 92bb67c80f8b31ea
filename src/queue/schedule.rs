//! Schedules' rules: when a schedule fires (a five-field cron expression or an `@hourly`-style name in an
//! IANA time zone, or a fixed interval), which tick fires after an outage, and the idempotency key each
//! tick's message is stored under.

use std::str::FromStr;

use chrono::{DateTime, Duration, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;

use super::message::MessageKey;
use super::{in_range, invalid, Invalid};

/// The shortest interval: a second.
pub const MIN_INTERVAL_SECONDS: i64 = 1;
/// The longest interval: a year.
pub const MAX_INTERVAL_SECONDS: i64 = 366 * 86_400;
/// The times `next_runs` shows.
pub const NEXT_RUNS: usize = 5;
/// What an idempotency key template may name.
pub const TICK: &str = "{tick}";
pub const SCHEDULE_ID: &str = "{schedule_id}";
/// The longest idempotency key template (a key is at most 128 characters, and `{tick}` grows by 7).
pub const MAX_TEMPLATE_CHARS: usize = 100;

/// When a schedule fires.
#[derive(Debug, Clone)]
pub enum Cadence {
    /// A cron expression, read in `zone`.
    Cron { expression: String, cron: Box<Cron>, zone: Tz },
    /// Every `seconds`, counted from `anchor` (when the schedule was made or its cadence last changed).
    Every { seconds: i64, anchor: DateTime<Utc> },
}

impl Cadence {
    /// A cron cadence: five fields (minute, hour, day of month, month, day of week), or one of `@yearly`,
    /// `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`, in the IANA time zone `zone`.
    pub fn cron(expression: &str, zone: &str) -> Result<Self, Invalid> {
        let expression = expression.trim();
        let fields = expression.split_whitespace().count();
        let named = expression.starts_with('@');
        if !(named && fields == 1 || !named && fields == 5) {
            return Err(invalid(format!(
                "cron must be five fields (minute hour day-of-month month day-of-week) or a name such as @hourly, \
                 got {expression:?}"
            )));
        }
        // croner knows @daily by that name only.
        let parsed = if expression.eq_ignore_ascii_case("@midnight") { "@daily" } else { expression };
        let cron = Cron::from_str(parsed)
            .map_err(|err| invalid(format!("cron {expression:?} is not a cron expression: {err}")))?;
        Ok(Cadence::Cron { expression: expression.to_owned(), cron: Box::new(cron), zone: time_zone(zone)? })
    }

    /// An interval cadence of `seconds`, its first tick `seconds` after `anchor`.
    pub fn every(seconds: i64, anchor: DateTime<Utc>) -> Result<Self, Invalid> {
        let seconds = in_range("interval_seconds", seconds, MIN_INTERVAL_SECONDS, MAX_INTERVAL_SECONDS, " seconds")?;
        Ok(Cadence::Every { seconds, anchor })
    }

    /// The first tick strictly after `after`; None for a cron expression that never matches again (the
    /// 30th of February).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Cadence::Cron { cron, zone, .. } => {
                // Whole seconds: the expression's minutes, not the fraction of a second it was asked at.
                let after = after.with_nanosecond(0).unwrap_or(after);
                let next = cron.find_next_occurrence(&after.with_timezone(zone), false).ok()?;
                Some(next.with_timezone(&Utc).with_nanosecond(0).unwrap_or(next.with_timezone(&Utc)))
            }
            Cadence::Every { seconds, anchor } => {
                let elapsed = (after - *anchor).num_seconds().max(-1);
                let ticks = elapsed.div_euclid(*seconds) + 1;
                Some(*anchor + Duration::seconds(ticks * seconds))
            }
        }
    }

    /// The next `n` ticks after `after`.
    pub fn next_runs(&self, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let mut runs = Vec::with_capacity(n);
        let mut at = after;
        while runs.len() < n {
            match self.next_after(at) {
                Some(next) => {
                    runs.push(next);
                    at = next;
                }
                None => break,
            }
        }
        runs
    }

    /// The tick to fire when `due` came and `now` is later: the latest tick at or before `now`, so that
    /// after an outage a schedule fires once for the ticks it missed, not once per tick.
    pub fn latest_due(&self, due: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Cadence::Every { seconds, .. } if now > due => {
                due + Duration::seconds((now - due).num_seconds().div_euclid(*seconds) * seconds)
            }
            Cadence::Every { .. } => due,
            Cadence::Cron { .. } => {
                let mut latest = due;
                // Bounded: a minutely schedule after a year's outage walks half a million ticks at most
                // once, and the tick after it is where the schedule goes on.
                while let Some(next) = self.next_after(latest).filter(|next| *next <= now) {
                    latest = next;
                }
                latest
            }
        }
    }
}

/// An IANA time zone name, such as `Europe/Berlin` or `UTC`.
pub fn time_zone(raw: &str) -> Result<Tz, Invalid> {
    raw.parse::<Tz>()
        .map_err(|_| invalid(format!("time_zone must be an IANA time zone name such as Europe/Berlin, got {raw:?}")))
}

/// Checks an idempotency key template: the key it makes for any tick must be a valid key.
pub fn check_key_template(template: &str) -> Result<(), Invalid> {
    if template.len() > MAX_TEMPLATE_CHARS {
        return Err(invalid(format!(
            "idempotency_key may be at most {MAX_TEMPLATE_CHARS} characters, got {}",
            template.len()
        )));
    }
    if !template.contains(TICK) {
        // Without it every tick would have one key, and all but the first within the window be dropped.
        return Err(invalid(format!("idempotency_key must contain {TICK}, so that each tick has a key of its own")));
    }
    let longest = key_for(template, &"0".repeat(32), DateTime::<Utc>::MAX_UTC);
    MessageKey::parse("idempotency_key", &longest).map(|_| ()).map_err(|_| {
        invalid(format!(
            "idempotency_key must make keys of 1-128 printable ASCII characters without space once {TICK} (the \
             tick's Unix seconds) and {SCHEDULE_ID} are filled in, got {template:?}"
        ))
    })
}

/// The idempotency key of one tick's message: the template with `{tick}` and `{schedule_id}` filled in,
/// or `schedule:<id>:<tick>` without one, so that a tick fired twice (by a node that died before it
/// could record the tick) is stored once within the queue's idempotency window.
pub fn tick_key(template: Option<&str>, schedule: &str, tick: DateTime<Utc>) -> String {
    key_for(template.unwrap_or("schedule:{schedule_id}:{tick}"), schedule, tick)
}

fn key_for(template: &str, schedule: &str, tick: DateTime<Utc>) -> String {
    template.replace(TICK, &tick.timestamp().to_string()).replace(SCHEDULE_ID, schedule)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn runs(c: &Cadence, after: &str, n: usize) -> Vec<String> {
        c.next_runs(at(after), n).into_iter().map(|t| t.format("%Y-%m-%dT%H:%MZ").to_string()).collect()
    }

    #[test]
    fn a_daily_berlin_time_moves_in_utc_with_daylight_saving() {
        let c = Cadence::cron("0 3 * * *", "Europe/Berlin").unwrap();
        // Summer time starts 2026-03-29: 03:00 is UTC+1 before, UTC+2 after.
        assert_eq!(
            runs(&c, "2026-03-27T12:00:00Z", 3),
            ["2026-03-28T02:00Z", "2026-03-29T01:00Z", "2026-03-30T01:00Z"]
        );
        // Ends 2026-10-25.
        assert_eq!(
            runs(&c, "2026-10-23T12:00:00Z", 3),
            ["2026-10-24T01:00Z", "2026-10-25T02:00Z", "2026-10-26T02:00Z"]
        );
    }

    #[test]
    fn a_time_skipped_or_repeated_by_daylight_saving_fires_once_that_day() {
        // New York, 2026-03-08: 02:30 does not exist; 2026-11-01: 01:30 happens twice.
        let skipped = Cadence::cron("30 2 * * *", "America/New_York").unwrap();
        let days: Vec<String> = runs(&skipped, "2026-03-07T12:00:00Z", 3).iter().map(|t| t[..10].to_owned()).collect();
        assert_eq!(days, ["2026-03-08", "2026-03-09", "2026-03-10"], "{:?}", runs(&skipped, "2026-03-07T12:00:00Z", 3));
        let repeated = Cadence::cron("30 1 * * *", "America/New_York").unwrap();
        let ticks = runs(&repeated, "2026-10-31T12:00:00Z", 3);
        let days: Vec<&str> = ticks.iter().map(|t| &t[..10]).collect();
        assert_eq!(days, ["2026-11-01", "2026-11-02", "2026-11-03"], "{ticks:?}");
        // Its first occurrence, 01:30 EDT (UTC-4).
        assert_eq!(ticks[0], "2026-11-01T05:30Z");
    }

    #[test]
    fn names_and_intervals() {
        let midnight = Cadence::cron("@midnight", "UTC").unwrap();
        assert_eq!(runs(&midnight, "2026-01-01T10:15:00Z", 1), ["2026-01-02T00:00Z"]);
        let hourly = Cadence::cron("@hourly", "UTC").unwrap();
        assert_eq!(runs(&hourly, "2026-01-01T10:15:00Z", 2), ["2026-01-01T11:00Z", "2026-01-01T12:00Z"]);
        let every = Cadence::every(90, at("2026-01-01T00:00:00Z")).unwrap();
        assert_eq!(
            every.next_runs(at("2026-01-01T00:00:00Z"), 2),
            [at("2026-01-01T00:01:30Z"), at("2026-01-01T00:03:00Z")]
        );
        assert_eq!(every.next_after(at("2026-01-01T00:01:30Z")), Some(at("2026-01-01T00:03:00Z")));
    }

    #[test]
    fn after_an_outage_the_latest_missed_tick_fires_once() {
        let minutely = Cadence::cron("* * * * *", "UTC").unwrap();
        assert_eq!(
            minutely.latest_due(at("2026-01-01T00:00:00Z"), at("2026-01-01T01:30:30Z")),
            at("2026-01-01T01:30:00Z")
        );
        let every = Cadence::every(60, at("2026-01-01T00:00:00Z")).unwrap();
        assert_eq!(
            every.latest_due(at("2026-01-01T00:01:00Z"), at("2026-01-01T01:30:30Z")),
            at("2026-01-01T01:30:00Z")
        );
        assert_eq!(
            every.latest_due(at("2026-01-01T00:01:00Z"), at("2026-01-01T00:01:00Z")),
            at("2026-01-01T00:01:00Z")
        );
    }

    #[test]
    fn bad_input_names_the_field() {
        for (cron, zone, field) in [
            ("* * * *", "UTC", "cron"),
            ("* * * * * *", "UTC", "cron"),
            ("61 * * * *", "UTC", "cron"),
            ("@fortnightly", "UTC", "cron"),
            ("0 3 * * *", "Mars/Olympus", "time_zone"),
        ] {
            let err = Cadence::cron(cron, zone).unwrap_err();
            assert!(err.message.starts_with(field), "{cron} {zone}: {}", err.message);
        }
        let err = Cadence::every(0, Utc::now()).unwrap_err();
        assert!(err.message.starts_with("interval_seconds"), "{}", err.message);
        assert!(check_key_template("nightly-{tick}").is_ok());
        assert!(check_key_template("has space {tick}").is_err());
        assert!(check_key_template("no-tick").is_err());
        assert_eq!(tick_key(None, "s1", at("2026-01-01T00:00:00Z")), "schedule:s1:1767225600");
    }
}
