//! Message content: the three content types, how bodies are stored and encoded for consumers, the
//! size limits, and delay precedence.

use std::fmt;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use bytes::Bytes;
use serde_json::value::RawValue;

use super::settings::MAX_DELAY_SECONDS;
use super::{invalid, Invalid, InvalidKind};
use crate::ids::ConsumerId;

/// Cloudflare's limits, a plan's unless it sets another largest message.
pub const MAX_MESSAGE_BYTES: usize = 128_000;
pub const MAX_BATCH_BYTES: usize = 256_000;
/// The range a plan's largest message may be set in: up to 1 MiB, SQS's limit since 2025.
pub const MIN_MESSAGE_BYTES_LIMIT: usize = 1_000;
pub const MAX_MESSAGE_BYTES_LIMIT: usize = 1_048_576;

/// The sizes a publish is held to, as its account's plan sets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    pub message: usize,
    pub batch: usize,
}

impl Default for Sizes {
    fn default() -> Self {
        Self { message: MAX_MESSAGE_BYTES, batch: MAX_BATCH_BYTES }
    }
}
pub const MAX_BATCH_MESSAGES: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentType {
    Json,
    Text,
    Bytes,
}

impl ContentType {
    /// `field` names the value in the error message.
    pub fn parse(field: impl fmt::Display, raw: Option<&str>) -> Result<Self, Invalid> {
        match raw {
            None | Some("json") => Ok(Self::Json),
            Some("text") => Ok(Self::Text),
            Some("bytes") => Ok(Self::Bytes),
            Some("v8") => {
                Err(invalid(format!("{field} 'v8' is only available to Workers producers; use json, text or bytes")))
            }
            Some(other) => Err(invalid(format!("{field} must be json, text or bytes, got {other:?}"))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Text => "text",
            Self::Bytes => "bytes",
        }
    }

    /// The code stored in `message_bodies.content_type`.
    pub fn code(self) -> i16 {
        match self {
            Self::Json => 0,
            Self::Text => 1,
            Self::Bytes => 2,
        }
    }

    pub fn from_code(code: i16) -> Self {
        match code {
            1 => Self::Text,
            2 => Self::Bytes,
            _ => Self::Json,
        }
    }
}

/// A message ready to store: its bytes, content type and delay (`None`: the queue's delivery delay,
/// applied where the queue's settings are read, in the same statement that stores the message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    pub content_type: ContentType,
    pub body: Bytes,
    pub delay_seconds: Option<i64>,
    pub idempotency_key: Option<MessageKey>,
    /// Messages with one key are delivered in publish order, one at a time.
    pub ordering_key: Option<MessageKey>,
    /// Messages with one key are let go within the limits of flow control for it (`queue::flow`).
    pub flow_key: Option<MessageKey>,
}

/// A publisher's key for one message, an idempotency, ordering or flow key: 1-128 characters of printable
/// ASCII without space.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MessageKey(String);

pub const MAX_KEY_CHARS: usize = 128;

impl MessageKey {
    pub fn parse(field: impl fmt::Display, raw: &str) -> Result<Self, Invalid> {
        if raw.is_empty() || raw.len() > MAX_KEY_CHARS || !raw.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err(invalid(format!(
                "{field} must be 1-{MAX_KEY_CHARS} characters, each printable ASCII without space (0x21-0x7E), got {raw:?}"
            )));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where a published message is in the request, to name it in error messages: `message`, or
/// `messages[3]` in a batch. Formatted only when there is an error to report.
#[derive(Debug, Clone, Copy)]
pub enum Field {
    Message,
    Batch(usize),
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Message => f.write_str("message"),
            Field::Batch(i) => write!(f, "messages[{i}]"),
        }
    }
}

/// One message as published.
pub struct PublishInput<'a> {
    pub field: Field,
    /// The body exactly as the client wrote it, so a `json` body keeps its bytes (key order, number
    /// spelling) as Cloudflare keeps them.
    pub body: Option<&'a RawValue>,
    pub content_type: Option<&'a str>,
    pub delay_seconds: Option<i64>,
    pub idempotency_key: Option<&'a str>,
    pub ordering_key: Option<&'a str>,
    pub flow_control_key: Option<&'a str>,
}

/// Turns a published message into stored bytes, applying the size limit and delay precedence:
/// the message's delay, else the batch's, else (None) the queue's. `request` is the request body the
/// input was decoded from: a `json` body, or a `text` one without escapes, is stored as a slice of it
/// rather than copied (copies of bodies were a sixth of the service's time under batch publishes).
pub fn prepare(
    input: PublishInput<'_>,
    batch_delay: Option<i64>,
    request: &Bytes,
    sizes: Sizes,
) -> Result<NewMessage, Invalid> {
    let field = input.field;
    let content_type = ContentType::parse(format_args!("{field}.content_type"), input.content_type)?;
    let body = input.body.ok_or_else(|| invalid(format!("{field}.body is required")))?;
    let string = || -> Option<Bytes> {
        match serde_json::from_str::<&str>(body.get()) {
            Ok(plain) => Some(share(request, plain.as_bytes())),
            // A string with escapes has to be unescaped into a buffer of its own.
            Err(_) => serde_json::from_str::<String>(body.get()).ok().map(Bytes::from),
        }
    };
    let bytes = match content_type {
        ContentType::Json => share(request, body.get().as_bytes()),
        ContentType::Text => {
            string().ok_or_else(|| invalid(format!("{field}.body must be a string for content_type text")))?
        }
        ContentType::Bytes => {
            let text = string()
                .ok_or_else(|| invalid(format!("{field}.body must be a base64 string for content_type bytes")))?;
            BASE64
                .decode(text)
                .map(Bytes::from)
                .map_err(|e| invalid(format!("{field}.body must be base64 for content_type bytes: {e}")))?
        }
    };
    if bytes.len() > sizes.message {
        return Err(Invalid {
            kind: InvalidKind::MessageTooLarge,
            message: format!("{field}.body is {} bytes; a message may be at most {}", bytes.len(), sizes.message),
        });
    }
    let delay_seconds = match input.delay_seconds {
        Some(d) => Some(check_delay(format_args!("{field}.delay_seconds"), d)?),
        None => batch_delay,
    };
    let idempotency_key =
        input.idempotency_key.map(|k| MessageKey::parse(format_args!("{field}.idempotency_key"), k)).transpose()?;
    let ordering_key =
        input.ordering_key.map(|k| MessageKey::parse(format_args!("{field}.ordering_key"), k)).transpose()?;
    let flow_key = input.flow_control_key.map(|k| flow_key(field, k)).transpose()?;
    Ok(NewMessage { content_type, body: bytes, delay_seconds, idempotency_key, ordering_key, flow_key })
}

/// A flow key: a message key that a URL path can name (`.` and `..` are path steps to a URL parser, even
/// percent-encoded), since its limits are set at `.../flow_keys/{key}`.
fn flow_key(field: Field, raw: &str) -> Result<MessageKey, Invalid> {
    if matches!(raw, "." | "..") {
        return Err(invalid(format!("{field}.flow_control_key cannot be {raw:?}: a URL path cannot name it")));
    }
    MessageKey::parse(format_args!("{field}.flow_control_key"), raw)
}

/// `part` as a slice of `request` when it lies within it, else a copy.
fn share(request: &Bytes, part: &[u8]) -> Bytes {
    let within = request.as_ptr_range();
    if within.start <= part.as_ptr() && part.as_ptr_range().end <= within.end {
        request.slice_ref(part)
    } else {
        Bytes::copy_from_slice(part)
    }
}

pub fn check_delay(field: impl fmt::Display, seconds: i64) -> Result<i64, Invalid> {
    if (0..=MAX_DELAY_SECONDS).contains(&seconds) {
        Ok(seconds)
    } else {
        Err(Invalid {
            kind: InvalidKind::Delay,
            message: format!("{field} must be between 0 and {MAX_DELAY_SECONDS} seconds, got {seconds}"),
        })
    }
}

/// Checks a whole batch against the count and total size limits.
pub fn check_batch(messages: &[NewMessage], sizes: Sizes) -> Result<(), Invalid> {
    if messages.len() > MAX_BATCH_MESSAGES {
        return Err(Invalid {
            kind: InvalidKind::TooManyMessages,
            message: format!("a batch may hold at most {MAX_BATCH_MESSAGES} messages, got {}", messages.len()),
        });
    }
    let total: usize = messages.iter().map(|m| m.body.len()).sum();
    if total > sizes.batch {
        return Err(Invalid {
            kind: InvalidKind::BatchTooLarge,
            message: format!("the batch's bodies total {total} bytes; a batch may be at most {}", sizes.batch),
        });
    }
    Ok(())
}

/// How many of the leading bodies of `sizes` one delivery takes within `budget` bytes: at least one,
/// however large, so that a message larger than the budget still goes, alone.
pub fn within_bytes(sizes: impl IntoIterator<Item = usize>, budget: usize) -> usize {
    let mut total = 0;
    let taken = sizes.into_iter().take_while(|size| {
        total += size;
        total <= budget
    });
    taken.count().max(1)
}

/// A stored body as pull and peek return it: `text` as a string, `json` and `bytes` as base64 (as
/// Cloudflare does). It serializes straight from the stored bytes, with no copy in between.
#[derive(Debug, Clone, Copy)]
pub struct PulledBody<'a> {
    pub content_type: ContentType,
    pub bytes: &'a [u8],
}

impl serde::Serialize for PulledBody<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.content_type {
            // Text bodies were stored from JSON strings, so they are UTF-8.
            ContentType::Text => match std::str::from_utf8(self.bytes) {
                Ok(text) => serializer.serialize_str(text),
                Err(_) => serializer.serialize_str(&String::from_utf8_lossy(self.bytes)),
            },
            ContentType::Json | ContentType::Bytes => {
                serializer.collect_str(&base64::display::Base64Display::new(self.bytes, &BASE64))
            }
        }
    }
}

/// Where a dead-lettered message came from, as its `metadata` shows it: the source queue's name (absent
/// once that queue is deleted), the consumer that gave up on it, and when it was dead-lettered.
#[derive(Debug, serde::Serialize)]
pub struct DeadLetterOrigin<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter_source_queue: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter_source_consumer: Option<ConsumerId>,
    pub dead_lettered_at_ms: i64,
}

impl<'a> DeadLetterOrigin<'a> {
    /// None for a message that was never dead-lettered (or was before sources were recorded).
    pub fn of(
        source: Option<&'a str>,
        consumer: Option<ConsumerId>,
        at: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Option<Self> {
        at.map(|at| DeadLetterOrigin {
            dead_letter_source_queue: source,
            dead_letter_source_consumer: consumer,
            dead_lettered_at_ms: at.timestamp_millis(),
        })
    }
}

/// skiplock's additions to a delivered message's metadata: where a dead-lettered message came from, and
/// its ordering key. A message with neither has Cloudflare's metadata only.
#[derive(Debug, serde::Serialize)]
pub struct ExtraMetadata<'a> {
    #[serde(flatten)]
    pub dead_letter: Option<DeadLetterOrigin<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_control_key: Option<&'a str>,
}

impl<'a> ExtraMetadata<'a> {
    /// None when there is nothing to add.
    pub fn of(
        dead_letter: Option<DeadLetterOrigin<'a>>,
        ordering_key: Option<&'a str>,
        flow_control_key: Option<&'a str>,
    ) -> Option<Self> {
        (dead_letter.is_some() || ordering_key.is_some() || flow_control_key.is_some()).then_some(ExtraMetadata {
            dead_letter,
            ordering_key,
            flow_control_key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn raw(value: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&value).unwrap()
    }

    fn prepare(input: PublishInput<'_>, batch_delay: Option<i64>) -> Result<NewMessage, Invalid> {
        super::prepare(input, batch_delay, &Bytes::new(), Sizes::default())
    }

    fn input<'a>(body: &'a RawValue, ct: Option<&'a str>, delay: Option<i64>) -> PublishInput<'a> {
        PublishInput {
            field: Field::Message,
            body: Some(body),
            content_type: ct,
            delay_seconds: delay,
            idempotency_key: None,
            ordering_key: None,
            flow_control_key: None,
        }
    }

    #[test]
    fn delay_precedence_is_message_then_batch_then_queue() {
        let body = raw(json!(1));
        assert_eq!(prepare(input(&body, None, Some(3)), Some(5)).unwrap().delay_seconds, Some(3));
        assert_eq!(prepare(input(&body, None, None), Some(5)).unwrap().delay_seconds, Some(5));
        assert_eq!(prepare(input(&body, None, None), None).unwrap().delay_seconds, None, "the queue's");
        assert_eq!(prepare(input(&body, None, Some(0)), Some(5)).unwrap().delay_seconds, Some(0));
    }

    #[test]
    fn bodies_are_stored_by_content_type() {
        let text = raw(json!("héllo"));
        assert_eq!(prepare(input(&text, Some("text"), None), None).unwrap().body, "héllo".as_bytes());
        let b64 = raw(json!("AAEC"));
        assert_eq!(prepare(input(&b64, Some("bytes"), None), None).unwrap().body, vec![0, 1, 2]);
        let obj = raw(json!({"a": 1}));
        assert_eq!(prepare(input(&obj, None, None), None).unwrap().body, &br#"{"a":1}"#[..]);
        let escaped = raw(json!("a\"b"));
        assert_eq!(prepare(input(&escaped, Some("text"), None), None).unwrap().body, "a\"b".as_bytes());
    }

    #[test]
    fn bodies_within_the_request_are_slices_of_it() {
        let request = Bytes::from_static(br#"{"body": {"a": 1}, "text": "plain"}"#);
        let text = std::str::from_utf8(&request).unwrap();
        let json: &RawValue = serde_json::from_str(&text[9..17]).unwrap();
        let stored = super::prepare(input(json, None, None), None, &request, Sizes::default()).unwrap().body;
        assert_eq!(stored, &br#"{"a": 1}"#[..]);
        assert_eq!(stored.as_ptr(), request[9..].as_ptr(), "not copied");
        let plain: &RawValue = serde_json::from_str(&text[27..34]).unwrap();
        let stored = super::prepare(input(plain, Some("text"), None), None, &request, Sizes::default()).unwrap().body;
        assert_eq!((stored.as_ref(), stored.as_ptr()), (&b"plain"[..], request[28..].as_ptr()));
    }

    #[test]
    fn wrong_bodies_and_delays_are_refused() {
        let obj = raw(json!({"a": 1}));
        assert!(prepare(input(&obj, Some("text"), None), None).is_err());
        let bad = raw(json!("not base64!"));
        assert!(prepare(input(&bad, Some("bytes"), None), None).is_err());
        let err = prepare(input(&obj, None, Some(86_401)), None).unwrap_err();
        assert_eq!(err.kind, InvalidKind::Delay);
        assert!(err.message.contains("message.delay_seconds"), "{}", err.message);
        assert_eq!(prepare(input(&obj, None, Some(86_400)), None).unwrap().delay_seconds, Some(86_400), "24 hours");
        assert!(prepare(input(&obj, Some("v8"), None), None).unwrap_err().message.contains("v8"));
    }

    #[test]
    fn message_keys_are_printable_ascii_without_space() {
        for good in ["a", "order-42", "~!#", &"k".repeat(MAX_KEY_CHARS)] {
            assert!(MessageKey::parse("k", good).is_ok(), "{good:?}");
        }
        for bad in ["", "with space", "tab\t", "é", &"k".repeat(MAX_KEY_CHARS + 1)] {
            let err = MessageKey::parse("messages[2].idempotency_key", bad).unwrap_err();
            assert!(err.message.starts_with("messages[2].idempotency_key"), "{bad:?}: {}", err.message);
        }
    }

    #[test]
    fn oversized_messages_are_refused() {
        let big = raw(Value::String("x".repeat(MAX_MESSAGE_BYTES + 1)));
        let err = prepare(input(&big, Some("text"), None), None).unwrap_err();
        assert_eq!(err.kind, InvalidKind::MessageTooLarge);
        // A plan that allows larger messages takes it, and a batch of one such message.
        let sizes = Sizes { message: 1_048_576, batch: 1_048_576 };
        assert!(super::prepare(input(&big, Some("text"), None), None, &Bytes::new(), sizes).is_ok());
        let half = raw(Value::String("x".repeat(600_000)));
        let stored = super::prepare(input(&half, Some("text"), None), None, &Bytes::new(), sizes).unwrap();
        assert!(check_batch(std::slice::from_ref(&stored), sizes).is_ok());
        let err = check_batch(&[stored.clone(), stored], sizes).unwrap_err();
        assert_eq!(err.kind, InvalidKind::BatchTooLarge);
        assert!(err.message.contains("total 1200000 bytes; a batch may be at most 1048576"), "{}", err.message);
    }

    #[test]
    fn a_delivery_takes_the_leading_bodies_within_its_bytes() {
        assert_eq!(within_bytes([100, 100, 100], 250), 2);
        assert_eq!(within_bytes([100, 150, 1], 250), 2, "stops at the first that does not fit, keeping order");
        assert_eq!(within_bytes([300, 1], 250), 1, "a body larger than the budget goes alone");
        assert_eq!(within_bytes([1; 10], 250), 10);
    }

    #[test]
    fn pulled_bodies_are_text_or_base64() {
        let view = |content_type, bytes: &[u8]| serde_json::to_string(&PulledBody { content_type, bytes }).unwrap();
        assert_eq!(view(ContentType::Text, "h\"é\n".as_bytes()), r#""h\"é\n""#);
        assert_eq!(view(ContentType::Bytes, &[0, 1, 2]), r#""AAEC""#);
        assert_eq!(view(ContentType::Json, br#"{"a":1}"#), r#""eyJhIjoxfQ==""#);
        let err = prepare(
            PublishInput {
                field: Field::Batch(3),
                body: None,
                content_type: Some("text"),
                delay_seconds: None,
                idempotency_key: None,
                ordering_key: None,
                flow_control_key: None,
            },
            None,
        );
        assert!(err.unwrap_err().message.starts_with("messages[3].body"));
    }
}
