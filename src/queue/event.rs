//! Events of an account's queues and the subscriptions that receive them: the event types, the sources a
//! subscription may name, the checks on a subscription, and the envelope an event is published in
//! (Cloudflare's: `type`, `source`, `payload`, `metadata`).

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

use super::{invalid, Invalid};

/// What happened, as a subscription's `events` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// A webhook consumer's endpoint failed `attempt::OPEN_AFTER` times in a row: its circuit opened.
    ConsumerFailing,
    /// A failing endpoint answered again: its circuit closed.
    ConsumerRecovered,
    /// A webhook consumer failed for its `disable_after_hours` and was disabled.
    ConsumerDisabled,
    /// Messages ran out of deliveries (one event per batch moved, not per message).
    MessagesDeadLettered,
    /// The queue's backlog rose over the subscription's threshold.
    BacklogOverThreshold,
    /// A redrive out of the queue finished.
    RedriveFinished,
    /// The account used 80% of a quota of its plan (an event of the account, not of a queue).
    QuotaWarning,
    /// The account used up a quota of its plan.
    QuotaExceeded,
}

impl EventType {
    pub const ALL: [Self; 8] = [
        Self::ConsumerFailing,
        Self::ConsumerRecovered,
        Self::ConsumerDisabled,
        Self::MessagesDeadLettered,
        Self::BacklogOverThreshold,
        Self::RedriveFinished,
        Self::QuotaWarning,
        Self::QuotaExceeded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConsumerFailing => "consumer.failing",
            Self::ConsumerRecovered => "consumer.recovered",
            Self::ConsumerDisabled => "consumer.disabled",
            Self::MessagesDeadLettered => "messages.dead_lettered",
            Self::BacklogOverThreshold => "backlog.over_threshold",
            Self::RedriveFinished => "redrive.finished",
            Self::QuotaWarning => "quota.warning",
            Self::QuotaExceeded => "quota.exceeded",
        }
    }

    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        Self::ALL.into_iter().find(|e| e.as_str() == raw).ok_or_else(|| {
            invalid(format!("events: unknown event type {raw:?}; the types are {}", Self::names().join(", ")))
        })
    }

    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|e| e.as_str()).collect()
    }
}

/// The source types a subscription may name: one queue, or every queue of the account.
pub const ONE_QUEUE: &str = "queues.queue";
pub const EVERY_QUEUE: &str = "queues";
/// The only destination: a queue of the account.
pub const DESTINATION_QUEUE: &str = "queues.queue";

/// The longest subscription name.
pub const MAX_NAME: usize = 255;
/// The version of the envelope and payloads; a change that breaks a reader raises it.
pub const SCHEMA_VERSION: i64 = 1;

/// Checks a subscription's name.
pub fn check_name(name: &str) -> Result<String, Invalid> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return Err(invalid(format!("name must be 1 to {MAX_NAME} characters")));
    }
    Ok(name.to_owned())
}

/// Checks a source's type: skiplock's own, or a 400 that names them (Cloudflare's product sources, `kv`
/// or `r2` say, have nothing here to come from).
pub fn check_source_type(raw: &str) -> Result<&'static str, Invalid> {
    [ONE_QUEUE, EVERY_QUEUE].into_iter().find(|t| *t == raw).ok_or_else(|| {
        invalid(format!(
            "source.type {raw:?} is not an event source of this server; the sources are {ONE_QUEUE:?} \
             (with queue_name or queue_id) and {EVERY_QUEUE:?} (every queue of the account)"
        ))
    })
}

/// Checks the event types of a subscription of `source_type` with `threshold`: at least one, none twice,
/// a backlog threshold exactly when the backlog event is asked for, and that only of one queue.
pub fn check_events(raw: &[String], source_type: &str, threshold: Option<i64>) -> Result<Vec<EventType>, Invalid> {
    if raw.is_empty() {
        return Err(invalid(format!("events must name at least one event type: {}", EventType::names().join(", "))));
    }
    let mut events = Vec::with_capacity(raw.len());
    for r in raw {
        let e = EventType::parse(r)?;
        if events.contains(&e) {
            return Err(invalid(format!("events names {r:?} twice")));
        }
        events.push(e);
    }
    let backlog = events.contains(&EventType::BacklogOverThreshold);
    let of_account = events.iter().any(|e| matches!(e, EventType::QuotaWarning | EventType::QuotaExceeded));
    if of_account && source_type != EVERY_QUEUE {
        return Err(invalid(format!(
            "quota.warning and quota.exceeded are events of the account: use a {EVERY_QUEUE:?} source"
        )));
    }
    match threshold {
        Some(t) if t < 1 => Err(invalid(format!("source.backlog_threshold must be at least 1, got {t}"))),
        Some(_) if !backlog => Err(invalid(
            "source.backlog_threshold is set but events does not name backlog.over_threshold; add the event or \
             leave the threshold out",
        )),
        None if backlog => Err(invalid("backlog.over_threshold needs source.backlog_threshold (a number of messages)")),
        _ if backlog && source_type != ONE_QUEUE => Err(invalid(format!(
            "backlog.over_threshold is an event of one queue: use a {ONE_QUEUE:?} source with queue_name"
        ))),
        _ => Ok(events),
    }
}

/// A time as events give it: RFC 3339 in UTC, to the millisecond.
pub fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// What an envelope is made of, besides the payload.
pub struct Occurred<'a> {
    pub event: &'a str,
    pub account: &'a str,
    pub subscription: &'a str,
    /// The queue it happened to; None for an event of the account (a quota's).
    pub queue: Option<(&'a str, &'a str)>,
    pub at: DateTime<Utc>,
}

/// The message an event is published as: Cloudflare's envelope, its type prefixed with the product
/// (`skiplock.queues.`) as Cloudflare prefixes its own (`cf.kv.`).
pub fn envelope(o: &Occurred<'_>, payload: Value) -> Value {
    json!({
        "type": format!("skiplock.queues.{}", o.event),
        "source": match o.queue {
            Some((id, name)) => json!({"type": ONE_QUEUE, "queueId": id, "queueName": name}),
            None => json!({"type": EVERY_QUEUE}),
        },
        "payload": payload,
        "metadata": {
            "accountId": o.account,
            "eventSubscriptionId": o.subscription,
            "eventSchemaVersion": SCHEMA_VERSION,
            "eventTimestamp": timestamp(o.at),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_parse_back_and_an_unknown_one_names_the_list() {
        for e in EventType::ALL {
            assert_eq!(EventType::parse(e.as_str()), Ok(e));
        }
        let err = EventType::parse("queue.exploded").unwrap_err().message;
        assert!(err.contains("consumer.failing") && err.contains("redrive.finished"), "{err}");
    }

    #[test]
    fn the_backlog_event_needs_its_threshold_and_one_queue() {
        let backlog = vec!["backlog.over_threshold".to_owned()];
        assert!(check_events(&backlog, ONE_QUEUE, None).is_err());
        assert!(check_events(&backlog, ONE_QUEUE, Some(0)).is_err());
        assert!(check_events(&backlog, EVERY_QUEUE, Some(10)).is_err());
        assert_eq!(check_events(&backlog, ONE_QUEUE, Some(10)), Ok(vec![EventType::BacklogOverThreshold]));
        let failing = vec!["consumer.failing".to_owned()];
        assert!(check_events(&failing, ONE_QUEUE, Some(10)).is_err(), "a threshold without its event");
        assert!(check_events(&[], EVERY_QUEUE, None).is_err());
        assert!(check_events(&[failing[0].clone(), failing[0].clone()], EVERY_QUEUE, None).is_err());
    }

    #[test]
    fn the_envelope_is_cloudflares() {
        let at = DateTime::parse_from_rfc3339("2026-11-30T08:00:00Z").unwrap().with_timezone(&Utc);
        let o =
            Occurred { event: "consumer.failing", account: "a", subscription: "s", queue: Some(("q", "orders")), at };
        let e = envelope(&o, json!({"consecutiveFailures": 5}));
        assert_eq!(e["type"], "skiplock.queues.consumer.failing");
        assert_eq!(e["source"]["queueName"], "orders");
        assert_eq!(e["metadata"]["eventTimestamp"], "2026-11-30T08:00:00.000Z");
        assert_eq!(e["metadata"]["eventSchemaVersion"], 1);
        let quota = envelope(&Occurred { event: "quota.warning", queue: None, ..o }, json!({}));
        assert_eq!(quota["source"], json!({"type": "queues"}), "an event of the account names no queue");
    }

    #[test]
    fn quota_events_are_the_accounts() {
        let quota = vec!["quota.exceeded".to_owned()];
        assert!(check_events(&quota, ONE_QUEUE, None).unwrap_err().message.contains("events of the account"));
        assert_eq!(check_events(&quota, EVERY_QUEUE, None), Ok(vec![EventType::QuotaExceeded]));
    }
}
