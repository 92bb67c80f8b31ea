//! Plans and limits: what an account is held to, and the rules for a plan's name and values. A plan sets
//! some limits; those it leaves out come from the node's configuration, and an account's own overrides go
//! over its plan's.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::message;
use super::settings::{MAX_RETENTION_SECONDS, MIN_RETENTION_SECONDS};
use super::{invalid, Invalid};

/// The limits in force for an account.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Limits {
    /// Requests per second per account, across the nodes (0: unlimited).
    pub rate_per_second: u32,
    /// How many requests above the rate an account may make at once.
    pub rate_burst: u32,
    /// Messages published per second per account, across the nodes (0: unlimited, the default: a cap
    /// nobody set would hold a lone tenant back silently). An account publishing faster is held back, so
    /// that it cannot take the service from the others; hosted deployments set one in their plans.
    pub publish_rate_per_second: u32,
    pub max_queues_per_account: i64,
    pub max_backlog_bytes_per_queue: i64,
    /// Long-polling pulls waiting at once per account on each node.
    pub max_waiting_pulls: i64,
    /// The largest message body, in bytes: Cloudflare's 128 KB by default, up to 1 MiB (SQS's limit).
    pub max_message_bytes: i64,
    /// The longest a queue of the account may keep a message (its `message_retention_period`), in seconds.
    pub max_retention_seconds: i64,
    /// Quotas (`quota`), 0 for none: operations per UTC day and month, in Cloudflare's model, and the
    /// bytes the account's queues may store in all. Plans set them; a node's own default is none.
    pub max_operations_per_day: i64,
    pub max_operations_per_month: i64,
    pub max_stored_bytes: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            rate_per_second: 5_000,
            rate_burst: 10_000,
            publish_rate_per_second: 0,
            max_queues_per_account: 1_000,
            max_backlog_bytes_per_queue: 25_000_000_000,
            max_waiting_pulls: 1_000,
            max_message_bytes: message::MAX_MESSAGE_BYTES as i64,
            max_retention_seconds: MAX_RETENTION_SECONDS,
            max_operations_per_day: 0,
            max_operations_per_month: 0,
            max_stored_bytes: 0,
        }
    }
}

impl Limits {
    /// The sizes a publish is held to. A batch's bodies, published or delivered to a webhook, may total
    /// Cloudflare's 256 KB, or one message of the largest size the plan allows.
    pub fn sizes(&self) -> message::Sizes {
        let largest = self.max_message_bytes as usize;
        message::Sizes { message: largest, batch: message::MAX_BATCH_BYTES.max(largest) }
    }
}

/// One limit a plan may set: its name, its range (the same as its SKIPLOCK_* variable's), and where it goes.
struct Field {
    name: &'static str,
    min: i64,
    max: i64,
    set: fn(&mut Limits, i64),
}

const FIELDS: [Field; 11] = [
    Field { name: "rate_per_second", min: 0, max: 10_000_000, set: |l, v| l.rate_per_second = v as u32 },
    Field { name: "rate_burst", min: 0, max: 10_000_000, set: |l, v| l.rate_burst = v as u32 },
    Field {
        name: "publish_rate_per_second",
        min: 0,
        max: 100_000_000,
        set: |l, v| l.publish_rate_per_second = v as u32,
    },
    Field { name: "max_queues_per_account", min: 0, max: 1_000_000, set: |l, v| l.max_queues_per_account = v },
    Field {
        name: "max_backlog_bytes_per_queue",
        min: 0,
        max: i64::MAX / 2,
        set: |l, v| l.max_backlog_bytes_per_queue = v,
    },
    Field { name: "max_waiting_pulls", min: 0, max: 1_000_000, set: |l, v| l.max_waiting_pulls = v },
    Field {
        name: "max_message_bytes",
        min: message::MIN_MESSAGE_BYTES_LIMIT as i64,
        max: message::MAX_MESSAGE_BYTES_LIMIT as i64,
        set: |l, v| l.max_message_bytes = v,
    },
    Field {
        name: "max_retention_seconds",
        min: MIN_RETENTION_SECONDS,
        max: MAX_RETENTION_SECONDS,
        set: |l, v| l.max_retention_seconds = v,
    },
    Field { name: "max_operations_per_day", min: 0, max: i64::MAX / 2, set: |l, v| l.max_operations_per_day = v },
    Field { name: "max_operations_per_month", min: 0, max: i64::MAX / 2, set: |l, v| l.max_operations_per_month = v },
    Field { name: "max_stored_bytes", min: 0, max: i64::MAX / 2, set: |l, v| l.max_stored_bytes = v },
];

/// Some of the limits, as a plan or an account's overrides set them; the others come from below.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct LimitSet(BTreeMap<&'static str, i64>);

impl LimitSet {
    /// Reads a set from an object of limits (`what` names it in the messages), every value checked.
    pub fn parse(what: &str, raw: &Value) -> Result<Self, Invalid> {
        Self::default().patched(what, raw)
    }

    /// This set with `patch` applied as a JSON merge patch: a value sets a limit, null removes it.
    pub fn patched(&self, what: &str, patch: &Value) -> Result<Self, Invalid> {
        let Some(patch) = patch.as_object() else {
            return Err(invalid(format!(
                "{what} must be an object of limits, such as {{\"publish_rate_per_second\": 1000}}"
            )));
        };
        let mut set = self.clone();
        for (key, value) in patch {
            let field = field(what, key)?;
            if value.is_null() {
                set.0.remove(field.name);
                continue;
            }
            let value = value.as_i64().filter(|v| (field.min..=field.max).contains(v)).ok_or_else(|| {
                invalid(format!(
                    "{what}.{} must be a whole number from {} to {}, got {value}",
                    field.name, field.min, field.max
                ))
            })?;
            set.0.insert(field.name, value);
        }
        Ok(set)
    }

    /// A set as stored: a value the rules no longer accept is left out (and logged by the caller).
    pub fn stored(raw: &Value) -> (Self, Option<Invalid>) {
        let Some(object) = raw.as_object() else { return (Self::default(), Some(invalid("not an object"))) };
        let mut set = Self::default();
        let mut error = None;
        for (key, value) in object {
            match set.patched("limits", &Value::Object(Map::from_iter([(key.clone(), value.clone())]))) {
                Ok(next) => set = next,
                Err(e) => error = Some(e),
            }
        }
        (set, error)
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("limits serialize")
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Limits {
    /// These limits with those `set` sets in their place.
    pub fn overlaid(mut self, set: &LimitSet) -> Self {
        for (name, value) in &set.0 {
            if let Some(field) = FIELDS.iter().find(|f| f.name == *name) {
                (field.set)(&mut self, *value);
            }
        }
        self
    }
}

fn field(what: &str, key: &str) -> Result<&'static Field, Invalid> {
    FIELDS.iter().find(|f| f.name == key).ok_or_else(|| {
        let names: Vec<_> = FIELDS.iter().map(|f| f.name).collect();
        invalid(format!("{what} has no limit named {key:?}; the limits are {}", names.join(", ")))
    })
}

/// The plan every account is on unless it names another; it cannot be deleted.
pub const DEFAULT_PLAN: &str = "default";

/// A plan's name: 1-63 lowercase letters, digits, `-` and `_`, starting with a letter or digit.
pub fn plan_name(raw: &str) -> Result<&str, Invalid> {
    let mut chars = raw.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !first_ok || !rest_ok || raw.len() > 63 {
        return Err(invalid(format!(
            "plan: a plan's name must be 1-63 lowercase letters, digits, '-' and '_', starting with a letter or digit, got {raw:?}"
        )));
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_set_overlays_only_what_it_sets_and_a_patch_removes_with_null() {
        let set =
            LimitSet::parse("limits", &json!({"publish_rate_per_second": 2000, "max_queues_per_account": 5})).unwrap();
        let limits = Limits::default().overlaid(&set);
        assert_eq!((limits.publish_rate_per_second, limits.max_queues_per_account), (2000, 5));
        assert_eq!(limits.rate_per_second, Limits::default().rate_per_second);
        let patched = set.patched("limits", &json!({"max_queues_per_account": null, "rate_burst": 7})).unwrap();
        assert_eq!(patched.to_json(), json!({"publish_rate_per_second": 2000, "rate_burst": 7}));
    }

    #[test]
    fn bad_values_name_the_field_and_what_is_allowed() {
        let unknown = LimitSet::parse("limits", &json!({"speed": 1})).unwrap_err().message;
        assert!(unknown.contains("\"speed\"") && unknown.contains("publish_rate_per_second"), "{unknown}");
        let range = LimitSet::parse("limit_overrides", &json!({"rate_burst": -1})).unwrap_err().message;
        assert!(range.contains("limit_overrides.rate_burst must be a whole number from 0 to"), "{range}");
        assert!(LimitSet::parse("limits", &json!({"rate_burst": 1.5})).is_err());
        assert!(LimitSet::parse("limits", &json!({"rate_burst": "3"})).is_err());
        assert!(LimitSet::parse("limits", &json!([1])).unwrap_err().message.contains("must be an object"));
        assert!(LimitSet::parse("limits", &json!({"max_queues_per_account": 2_000_000})).is_err());
    }

    #[test]
    fn a_stored_value_out_of_range_is_left_out_and_said() {
        let (set, error) = LimitSet::stored(&json!({"rate_burst": -5, "max_waiting_pulls": 3}));
        assert_eq!(set.to_json(), json!({"max_waiting_pulls": 3}));
        assert!(error.is_some());
    }

    #[test]
    fn plan_names_are_checked() {
        assert_eq!(plan_name("pro-2026_eu"), Ok("pro-2026_eu"));
        for bad in ["", "Pro", "-pro", "pro plan", &"p".repeat(64)] {
            assert!(plan_name(bad).is_err(), "{bad:?}");
        }
    }
}
