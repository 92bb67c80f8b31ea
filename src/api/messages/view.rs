//! A message as pull and peek show it.

use serde::Serialize;

use crate::ids::MessageId;
use crate::queue::message::{ContentType, ExtraMetadata, PulledBody};
use crate::store::messages::StoredMessage;

/// A message as pull and peek show it; pull adds its lease id, peek its ref.
#[derive(Serialize)]
pub(super) struct MessageView<'a> {
    id: MessageId,
    body: PulledBody<'a>,
    attempts: i32,
    timestamp_ms: i64,
    metadata: MessageMetadata<'a>,
    #[serde(flatten)]
    handle: Handle,
}

#[derive(Serialize)]
pub(super) enum Handle {
    #[serde(rename = "lease_id")]
    Lease(String),
    #[serde(rename = "ref")]
    Ref(String),
}

#[derive(Serialize)]
struct MessageMetadata<'a> {
    #[serde(rename = "CF-Content-Type")]
    content_type: &'static str,
    #[serde(rename = "CF-sourceMessageSource")]
    source: &'static str,
    #[serde(flatten)]
    extra: Option<ExtraMetadata<'a>>,
}

impl<'a> MessageView<'a> {
    pub(super) fn of(m: &'a StoredMessage, handle: Handle) -> Self {
        let content_type = ContentType::from_code(m.content_type);
        MessageView {
            id: m.published_id,
            body: PulledBody { content_type, bytes: &m.body },
            attempts: m.attempts,
            timestamp_ms: m.published_at.timestamp_millis(),
            metadata: MessageMetadata {
                content_type: content_type.as_str(),
                source: "api",
                extra: ExtraMetadata::of(m.dead_letter_origin(), m.ordering_key.as_deref(), m.flow_key.as_deref()),
            },
            handle,
        }
    }
}
