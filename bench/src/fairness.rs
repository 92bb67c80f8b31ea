//! The fairness figure of ordered delivery (run with W2o): one key with a deep backlog, published first,
//! beside many short keys; one consumer pulls 100 at a time and acks each batch before the next pull.
//! The figure is the pulls it takes until every short key's messages have all come: with pulls that take
//! the keys in turn, each short key gets a message in every pull, so about as many pulls as a short key
//! has messages. Every key's order is checked on the way, and a broken order fails the bench.

use std::collections::HashMap;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::api_load::Api;
use crate::http::Connection;

/// The shape of the run.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Messages of the one deep key.
    pub big: u64,
    /// Short keys, and the messages of each.
    pub small_keys: u64,
    pub per_small: u64,
}

impl Shape {
    pub const ISSUE: Shape = Shape { big: 100_000, small_keys: 100, per_small: 10 };
}

/// What the run measured.
#[derive(Debug, Clone)]
pub struct Fairness {
    pub shape: Shape,
    /// Pulls until every short key's messages had all been delivered.
    pub pulls: u64,
    /// Of the deep key's messages, how many came in those pulls.
    pub big_delivered: u64,
    /// Messages the first pull brought, and how many of them were the short keys'.
    pub first_pull: (usize, usize),
}

impl Fairness {
    pub fn json(&self) -> Value {
        json!({
            "big_key_messages": self.shape.big, "small_keys": self.shape.small_keys,
            "messages_per_small_key": self.shape.per_small, "batch_size": 100,
            "pulls_until_small_keys_done": self.pulls, "big_key_delivered_meanwhile": self.big_delivered,
            "first_pull_messages": self.first_pull.0, "first_pull_small": self.first_pull.1,
        })
    }
}

/// Publishes the deep key's messages (batches of 100, four at a time: a batch's messages keep their
/// array order, batches sent at once have none between them), then the short keys' (one batch after
/// another, each batch one message of every key, so a key's order runs across batches); then pulls.
pub async fn measure(api: &Api, queue: &str, shape: Shape) -> anyhow::Result<Fairness> {
    publish_big(api, queue, shape.big).await?;
    publish_small(api, queue, shape).await?;
    pull_until_small_done(api, queue, shape).await
}

async fn publish_big(api: &Api, queue: &str, count: u64) -> anyhow::Result<()> {
    api.publish_numbered(queue, count.div_ceil(100), move |batch| {
        let messages: Vec<(String, String)> =
            (0..100.min(count - batch * 100)).map(|i| ("big".to_owned(), format!("big-{batch}-{i}"))).collect();
        batch_body(&messages)
    })
    .await
}

async fn publish_small(api: &Api, queue: &str, shape: Shape) -> anyhow::Result<()> {
    let messages: Vec<(String, String)> = (0..shape.per_small)
        .flat_map(|seq| (0..shape.small_keys).map(move |key| (format!("s{key}"), format!("s{key}-{seq}"))))
        .collect();
    let mut connection = Connection::open(&api.host).await?;
    for batch in messages.chunks(100) {
        publish(api, &mut connection, queue, batch).await?;
    }
    Ok(())
}

/// One batch of (ordering key, body) pairs.
async fn publish(
    api: &Api,
    connection: &mut Connection,
    queue: &str,
    messages: &[(String, String)],
) -> anyhow::Result<()> {
    let answer = connection.send(&api.request(queue, "/batch", batch_body(messages).as_bytes())).await?;
    if answer.status != 200 {
        bail!("fairness publish: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
    }
    Ok(())
}

/// The JSON of a batch of (ordering key, body) text messages.
fn batch_body(messages: &[(String, String)]) -> String {
    let messages: Vec<Value> =
        messages.iter().map(|(key, body)| json!({"body": body, "content_type": "text", "ordering_key": key})).collect();
    json!({ "messages": messages }).to_string()
}

/// Where each key's delivery has got to, and what broke its order.
#[derive(Default)]
struct Order {
    /// Short key -> the sequence number its next message must have.
    small_next: HashMap<String, u64>,
    /// Deep key's batch -> the index its next message must have.
    big_next: HashMap<u64, u64>,
    small_done: u64,
    big_delivered: u64,
    violations: Vec<String>,
}

impl Order {
    /// Checks one delivered message: its `metadata.ordering_key` is the key it was published with, and
    /// it is the next of its key (of its batch, for the deep key).
    fn delivered(&mut self, body: &str, key: Option<&str>) {
        let Some((name, rest)) = body.split_once('-') else {
            self.violations.push(format!("a message never published: {body:?}"));
            return;
        };
        if key != Some(name) {
            self.violations.push(format!("{body} came with ordering_key {key:?}"));
        }
        if name == "big" {
            let (batch, index) = rest.split_once('-').unwrap_or((rest, ""));
            let (Ok(batch), Ok(index)) = (batch.parse::<u64>(), index.parse::<u64>()) else {
                self.violations.push(format!("a message never published: {body:?}"));
                return;
            };
            let next = self.big_next.entry(batch).or_insert(0);
            if index != *next {
                self.violations.push(format!("{body} came when message {next} of its batch was due"));
            }
            *next = index + 1;
            self.big_delivered += 1;
        } else {
            let Ok(seq) = rest.parse::<u64>() else {
                self.violations.push(format!("a message never published: {body:?}"));
                return;
            };
            let next = self.small_next.entry(name.to_owned()).or_insert(0);
            if seq != *next {
                self.violations.push(format!("{body} came when {name}-{next} was due"));
            }
            *next = seq + 1;
            self.small_done += 1;
        }
    }
}

async fn pull_until_small_done(api: &Api, queue: &str, shape: Shape) -> anyhow::Result<Fairness> {
    let small_total = shape.small_keys * shape.per_small;
    // Each pull brings a message at least, and each message comes once (acked, with leases far longer
    // than the run): past this, something is delivered again and again.
    let give_up = shape.big + small_total + 1;
    let mut connection = Connection::open(&api.host).await?;
    let pull = api.request(queue, "/pull", br#"{"batch_size":100,"visibility_timeout_ms":60000}"#);
    let mut order = Order::default();
    let (mut pulls, mut first_pull) = (0, (0, 0));
    while order.small_done < small_total {
        if pulls == give_up {
            bail!(
                "fairness: after {pulls} pulls, more than there are messages, only {} of the short keys' {small_total} messages had come",
                order.small_done
            );
        }
        let answer = connection.send(&pull).await?;
        if answer.status != 200 {
            bail!("fairness pull: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
        }
        pulls += 1;
        let pulled: Value = serde_json::from_slice(&answer.body).context("a pull answer")?;
        let messages = pulled["result"]["messages"].as_array().cloned().unwrap_or_default();
        if messages.is_empty() {
            bail!(
                "fairness: pull {pulls} came back empty with {} short-key messages still due",
                small_total - order.small_done
            );
        }
        let small_before = order.small_done;
        let mut keys_in_pull: HashMap<String, &str> = HashMap::new();
        let mut acks = Vec::with_capacity(messages.len());
        for m in &messages {
            let body = m["body"].as_str().unwrap_or_default();
            let key = m["metadata"]["ordering_key"].as_str();
            order.delivered(body, key);
            // The key the message was published with, whatever the answer says.
            let published_key = body.split_once('-').map_or(body, |(name, _)| name);
            if let Some(other) = keys_in_pull.insert(published_key.to_owned(), body) {
                order
                    .violations
                    .push(format!("pull {pulls} brought two messages of key {published_key}: {other} and {body}"));
            }
            acks.push(json!({"lease_id": m["lease_id"]}));
        }
        if pulls == 1 {
            first_pull = (messages.len(), (order.small_done - small_before) as usize);
        }
        let ack = json!({ "acks": acks }).to_string();
        let answer = connection.send(&api.request(queue, "/ack", ack.as_bytes())).await?;
        if answer.status != 200 {
            bail!("fairness ack: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
        }
    }
    if !order.violations.is_empty() {
        bail!(
            "ordered delivery broke its order in the fairness run ({} violations in {pulls} pulls):\n{}",
            order.violations.len(),
            order.violations.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(Fairness { shape, pulls, big_delivered: order.big_delivered, first_pull })
}
