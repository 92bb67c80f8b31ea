//! The JSON shapes of queues and consumers, as Cloudflare's clients expect them.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{json, Value};

use crate::ids::{ConsumerId, QueueId};
use crate::queue::attempt::{probe_after, HealthState};
use crate::queue::consumer::ConsumerKind;
use crate::queue::settings::QueueSettings;
use crate::store::attempts::HealthRow;
use crate::store::consumers::ConsumerRow;
use crate::store::queues::{Backlog, QueueRow};

pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

#[derive(Serialize)]
pub struct QueueView {
    pub queue_id: QueueId,
    pub queue_name: String,
    pub created_on: String,
    pub modified_on: String,
    pub producers: Vec<Value>,
    pub producers_total_count: usize,
    pub consumers: Vec<ConsumerView>,
    pub consumers_total_count: usize,
    pub settings: QueueSettings,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jurisdiction: Option<String>,
}

impl QueueView {
    /// The view with its webhook consumers' endpoint health from `health`.
    pub fn with_health(mut self, health: &[HealthRow]) -> Self {
        self.consumers = self.consumers.into_iter().map(|c| c.with_health(health)).collect();
        self
    }

    pub fn new(queue: &QueueRow, consumers: &[ConsumerRow]) -> Self {
        let consumers: Vec<ConsumerView> =
            consumers.iter().filter(|c| c.queue_id == queue.id).map(ConsumerView::new).collect();
        Self {
            queue_id: queue.id,
            queue_name: queue.name.clone(),
            created_on: timestamp(queue.created_at),
            modified_on: timestamp(queue.modified_at),
            producers: vec![],
            producers_total_count: 0,
            consumers_total_count: consumers.len(),
            consumers,
            settings: queue.settings(),
            jurisdiction: queue.jurisdiction.clone(),
        }
    }
}

#[derive(Serialize)]
pub struct ConsumerView {
    pub consumer_id: ConsumerId,
    #[serde(rename = "type")]
    pub kind: ConsumerKind,
    pub queue_id: QueueId,
    pub queue_name: String,
    pub created_on: String,
    pub dead_letter_queue: String,
    pub settings: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Only in the answer to a create or a rotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// A webhook consumer's endpoint health, where the answer carries it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthView>,
}

/// A webhook endpoint's health: its state, its failures in a row, and its circuit breaker.
#[derive(Serialize)]
pub struct HealthView {
    pub state: HealthState,
    pub consecutive_failures: i32,
    pub failing_since: Option<String>,
    pub last_success_at: Option<String>,
    pub last_failure: Option<Value>,
    /// `open` once the failures in a row reach the breaker's threshold: one probe batch at a time.
    pub circuit: &'static str,
    pub next_probe_at: Option<String>,
    /// When it was disabled for failing its consumer's `disable_after_hours`; null while enabled.
    pub disabled_at: Option<String>,
}

impl HealthView {
    pub fn new(row: &HealthRow) -> Self {
        let probe = probe_after(row.consecutive_failures);
        let next_probe = probe
            .zip(row.last_failure_at)
            .and_then(|(after, at)| chrono::Duration::from_std(after).ok().map(|after| timestamp(at + after)));
        let last_failure = row.last_failure_at.map(|at| {
            json!({
                "at": timestamp(at),
                "outcome": row.last_failure_outcome,
                "status": row.last_failure_status,
                "error": row.last_failure_error,
            })
        });
        Self {
            state: HealthState::of(row.consecutive_failures, row.disabled_at.is_some()),
            consecutive_failures: row.consecutive_failures,
            failing_since: row.failing_since.map(timestamp),
            last_success_at: row.last_success_at.map(timestamp),
            last_failure,
            circuit: if probe.is_some() { "open" } else { "closed" },
            next_probe_at: next_probe.filter(|_| row.disabled_at.is_none()),
            disabled_at: row.disabled_at.map(timestamp),
        }
    }
}

impl ConsumerView {
    pub fn new(row: &ConsumerRow) -> Self {
        let kind = row.kind();
        let settings = row.settings();
        let mut settings_json = serde_json::to_value(settings).expect("settings serialize");
        if kind == ConsumerKind::Webhook {
            settings_json["max_concurrency"] = json!(settings.max_concurrency);
        }
        Self {
            consumer_id: row.id,
            kind,
            queue_id: row.queue_id,
            queue_name: row.queue_name.clone(),
            created_on: timestamp(row.created_at),
            dead_letter_queue: row.dead_letter_queue.clone(),
            settings: settings_json,
            url: row.url.clone(),
            signing_secret: None,
            health: None,
        }
    }

    /// The view with its endpoint's health from `health` (healthy when it has had no attempt), for a
    /// webhook consumer.
    pub fn with_health(mut self, health: &[HealthRow]) -> Self {
        if self.kind == ConsumerKind::Webhook {
            let row = health.iter().find(|h| h.consumer_id == self.consumer_id.0).cloned().unwrap_or_default();
            self.health = Some(HealthView::new(&row));
        }
        self
    }
}

/// Backlog figures as publish and pull answers carry them.
#[derive(Serialize)]
pub struct BacklogMetrics {
    backlog_count: i64,
    backlog_bytes: i64,
    oldest_message_timestamp_ms: i64,
}

impl From<&Backlog> for BacklogMetrics {
    fn from(backlog: &Backlog) -> Self {
        BacklogMetrics {
            backlog_count: backlog.count,
            backlog_bytes: backlog.bytes,
            oldest_message_timestamp_ms: backlog.oldest.map(|t| t.timestamp_millis()).unwrap_or(0),
        }
    }
}
