//! Quotas: the operations an account may use per UTC day and month, and the bytes it may store, as its
//! plan sets them (0: none); which one a request would go past, and when it resets.

use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};

use super::plan::Limits;

/// One of the quotas a plan may set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quota {
    OperationsPerDay,
    OperationsPerMonth,
    StoredBytes,
}

impl Quota {
    /// The limit's name, as plans set it.
    pub fn name(self) -> &'static str {
        match self {
            Quota::OperationsPerDay => "max_operations_per_day",
            Quota::OperationsPerMonth => "max_operations_per_month",
            Quota::StoredBytes => "max_stored_bytes",
        }
    }

    /// Whether a request that adds no stored bytes (a pull, an ack) is held to it.
    pub fn holds_reads(self) -> bool {
        !matches!(self, Quota::StoredBytes)
    }
}

/// What an account has used of its quotas, as last read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Used {
    pub operations_today: i64,
    pub operations_this_month: i64,
    pub stored_bytes: i64,
}

/// A quota used up: which, its limit, and when it resets (None: stored bytes, freed by consuming).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exceeded {
    pub quota: Quota,
    pub limit: i64,
    pub resets_at: Option<DateTime<Utc>>,
}

impl Exceeded {
    /// What the 429 says.
    pub fn message(&self) -> String {
        let what = match self.quota {
            Quota::OperationsPerDay => "daily operations",
            Quota::OperationsPerMonth => "monthly operations",
            Quota::StoredBytes => "stored bytes",
        };
        match self.resets_at {
            Some(at) => format!(
                "quota_exceeded: this account has used its {what} quota ({} of its plan, {}); \
                 it resets at {}",
                self.limit,
                self.quota.name(),
                at.format("%Y-%m-%dT%H:%M:%SZ")
            ),
            None => format!(
                "quota_exceeded: this account stores its {what} quota ({} of its plan, {}); \
                 publish again once consumers have acked enough messages",
                self.limit,
                self.quota.name()
            ),
        }
    }
}

/// Whether the account has any quota to be held to.
pub fn any(limits: &Limits) -> bool {
    limits.max_operations_per_day > 0 || limits.max_operations_per_month > 0 || limits.max_stored_bytes > 0
}

/// The quotas `used` has reached, the one that resets last first (what a client must wait for).
pub fn exceeded(limits: &Limits, used: &Used, now: DateTime<Utc>) -> Vec<Exceeded> {
    let mut over = Vec::new();
    let reached = |limit: i64, used: i64| limit > 0 && used >= limit;
    if reached(limits.max_stored_bytes, used.stored_bytes) {
        over.push(Exceeded { quota: Quota::StoredBytes, limit: limits.max_stored_bytes, resets_at: None });
    }
    if reached(limits.max_operations_per_month, used.operations_this_month) {
        let quota = Quota::OperationsPerMonth;
        over.push(Exceeded { quota, limit: limits.max_operations_per_month, resets_at: Some(next_month(now)) });
    }
    if reached(limits.max_operations_per_day, used.operations_today) {
        let quota = Quota::OperationsPerDay;
        over.push(Exceeded { quota, limit: limits.max_operations_per_day, resets_at: Some(next_day(now)) });
    }
    over
}

/// A share of a quota an account crossed: 80 or 100 percent of it, in the period from `period_start`
/// (stored bytes have no period: a crossing is told once a day at most).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crossing {
    pub quota: Quota,
    pub percent: i16,
    pub period_start: DateTime<Utc>,
    pub limit: i64,
    pub used: i64,
}

/// The percents of its quotas that `used` has reached: 80, and 100 as well once a quota is used up.
pub fn crossings(limits: &Limits, used: &Used, now: DateTime<Utc>) -> Vec<Crossing> {
    let quotas = [
        (Quota::OperationsPerDay, limits.max_operations_per_day, used.operations_today, day_start(now)),
        (Quota::OperationsPerMonth, limits.max_operations_per_month, used.operations_this_month, month_start(now)),
        (Quota::StoredBytes, limits.max_stored_bytes, used.stored_bytes, day_start(now)),
    ];
    let mut crossed = Vec::new();
    for (quota, limit, used, period_start) in quotas {
        for percent in [80i16, 100] {
            // Whole-number arithmetic: 80% of a limit of 10 is 8 operations, not 7.999.
            if limit > 0 && used as i128 * 100 >= limit as i128 * percent as i128 {
                crossed.push(Crossing { quota, percent, period_start, limit, used });
            }
        }
    }
    crossed
}

/// The start of the UTC day of `now`.
pub fn day_start(now: DateTime<Utc>) -> DateTime<Utc> {
    Utc.from_utc_datetime(&now.date_naive().and_hms_opt(0, 0, 0).expect("midnight exists"))
}

/// The start of the UTC month of `now`.
pub fn month_start(now: DateTime<Utc>) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0).single().expect("a month's first day exists")
}

pub fn next_day(now: DateTime<Utc>) -> DateTime<Utc> {
    day_start(now) + Duration::days(1)
}

pub fn next_month(now: DateTime<Utc>) -> DateTime<Utc> {
    // The 28th plus four days is always in the next month.
    month_start(month_start(now) + Duration::days(32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_quota_is_reached_at_its_limit_and_resets_at_the_next_utc_day_or_month() {
        let limits = Limits { max_operations_per_day: 100, max_operations_per_month: 1_000, ..Limits::default() };
        let now = at("2026-12-31T23:59:59Z");
        let under = Used { operations_today: 99, operations_this_month: 999, stored_bytes: 1 << 40 };
        assert!(exceeded(&limits, &under, now).is_empty(), "no stored-bytes quota: any amount");
        let over = exceeded(&limits, &Used { operations_today: 100, operations_this_month: 1_000, ..under }, now);
        let quotas: Vec<Quota> = over.iter().map(|e| e.quota).collect();
        assert_eq!(quotas, [Quota::OperationsPerMonth, Quota::OperationsPerDay]);
        assert_eq!(over[0].resets_at, Some(at("2027-01-01T00:00:00Z")));
        assert_eq!(over[1].resets_at, Some(at("2027-01-01T00:00:00Z")));
        assert!(over[1].message().contains("daily operations quota (100"), "{}", over[1].message());
        assert_eq!(next_month(at("2026-01-31T12:00:00Z")), at("2026-02-01T00:00:00Z"));
        assert_eq!(next_day(at("2026-02-28T00:00:00Z")), at("2026-03-01T00:00:00Z"));
        assert!(!any(&Limits::default()), "no quota unless a plan sets one");
    }

    #[test]
    fn a_quota_is_crossed_at_80_and_at_100_percent_once_per_period() {
        let limits = Limits { max_operations_per_day: 10, max_operations_per_month: 1_000, ..Limits::default() };
        let now = at("2026-11-30T12:00:00Z");
        assert!(crossings(&limits, &Used { operations_today: 7, ..Used::default() }, now).is_empty());
        let at_80 = crossings(&limits, &Used { operations_today: 8, operations_this_month: 8, ..Used::default() }, now);
        assert_eq!(at_80.len(), 1);
        assert_eq!(
            (at_80[0].quota, at_80[0].percent, at_80[0].period_start),
            (Quota::OperationsPerDay, 80, at("2026-11-30T00:00:00Z"))
        );
        let all =
            crossings(&limits, &Used { operations_today: 10, operations_this_month: 1_000, ..Used::default() }, now);
        let percents: Vec<(Quota, i16)> = all.iter().map(|c| (c.quota, c.percent)).collect();
        assert_eq!(
            percents,
            [
                (Quota::OperationsPerDay, 80),
                (Quota::OperationsPerDay, 100),
                (Quota::OperationsPerMonth, 80),
                (Quota::OperationsPerMonth, 100)
            ]
        );
        assert_eq!(all[2].period_start, at("2026-11-01T00:00:00Z"));
    }

    #[test]
    fn stored_bytes_hold_publishes_only_and_free_up_as_messages_go() {
        let limits = Limits { max_stored_bytes: 1_000, ..Limits::default() };
        let now = at("2026-11-30T12:00:00Z");
        let over = exceeded(&limits, &Used { stored_bytes: 1_000, ..Used::default() }, now);
        assert_eq!(over.len(), 1);
        assert!(!over[0].quota.holds_reads());
        assert_eq!(over[0].resets_at, None);
        assert!(over[0].message().contains("acked"), "{}", over[0].message());
    }
}
