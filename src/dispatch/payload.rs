//! The body of a webhook delivery: the queue, the consumer and each message with its lease id, bodies
//! embedded by content type.

use serde::Serialize;
use serde_json::value::RawValue;

use super::WebhookConsumer;
use crate::ids::{ConsumerId, QueueId};
use crate::queue::lease::Signer;
use crate::queue::message::{ContentType, ExtraMetadata, PulledBody};
use crate::store::messages::StoredMessage;

/// The signed-for body of a delivery of `messages`, and their ids as the body names them.
pub(super) fn encode(signer: &Signer, c: &WebhookConsumer, messages: &[StoredMessage]) -> (Vec<u8>, Vec<String>) {
    let ids: Vec<String> = messages.iter().map(|m| m.published_id.to_string()).collect();
    let items: Vec<DeliveredMessage<'_>> = messages
        .iter()
        .zip(&ids)
        .map(|(m, id)| {
            let content_type = ContentType::from_code(m.content_type);
            let body = match content_type {
                // Stored JSON bodies are the JSON text the producer sent: embed it byte for byte.
                ContentType::Json => {
                    WebhookBody::Json(std::str::from_utf8(&m.body).ok().and_then(|t| serde_json::from_str(t).ok()))
                }
                other => WebhookBody::Encoded(PulledBody { content_type: other, bytes: &m.body }),
            };
            DeliveredMessage {
                id,
                timestamp_ms: m.published_at.timestamp_millis(),
                attempts: m.attempts,
                content_type: content_type.as_str(),
                body,
                lease_id: signer.lease_id(c.queue.id(), m.id, m.attempts),
                metadata: ExtraMetadata::of(m.dead_letter_origin(), m.ordering_key.as_deref(), m.flow_key.as_deref()),
            }
        })
        .collect();
    let delivery = Payload { queue: &c.queue_name, queue_id: c.named_queue, consumer_id: c.id, messages: items };
    (serde_json::to_vec(&delivery).expect("a delivery serializes"), ids)
}

/// The body of a delivery request.
#[derive(Serialize)]
struct Payload<'a> {
    queue: &'a str,
    queue_id: QueueId,
    consumer_id: ConsumerId,
    messages: Vec<DeliveredMessage<'a>>,
}

#[derive(Serialize)]
struct DeliveredMessage<'a> {
    id: &'a str,
    timestamp_ms: i64,
    attempts: i32,
    content_type: &'static str,
    body: WebhookBody<'a>,
    lease_id: String,
    /// Only for a dead-lettered or keyed message, so other payloads are unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<ExtraMetadata<'a>>,
}

/// A body in a webhook delivery: `json` embedded as the JSON text the producer sent (null if it were
/// ever unreadable), `text` as a string, `bytes` as base64.
#[derive(Serialize)]
#[serde(untagged)]
enum WebhookBody<'a> {
    Json(Option<&'a RawValue>),
    Encoded(PulledBody<'a>),
}
