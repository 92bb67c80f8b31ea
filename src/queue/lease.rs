//! Lease ids and peek refs: opaque, signed handles on a message.
//!
//! A lease id names a message, the delivery it was issued for (the message's `attempts` then) and the
//! queue, under an HMAC with the server key, so the database is never asked about a forged one, an
//! ack can be permissive (any genuine lease of the message deletes it), and a retry can tell whether
//! the lease is still the current one. A ref is the same without a delivery number.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use uuid::Uuid;

use crate::ids::{MessageId, QueueId};

const LEASE_TAG: u8 = b'L';
const REF_TAG: u8 = b'R';
const MAC_LEN: usize = 16;
const ENCODED_LEN: usize = 1 + 16 + 4 + MAC_LEN;

#[derive(Clone)]
pub struct Signer {
    /// HMAC-SHA256 already keyed: each lease id clones it instead of hashing the key again.
    keyed: Hmac<Sha256>,
}

/// What a genuine lease id says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub message_id: MessageId,
    pub attempt: i32,
}

impl Signer {
    pub fn new(key: Vec<u8>) -> Self {
        Self { keyed: Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length") }
    }

    pub fn lease_id(&self, queue: QueueId, message: MessageId, attempt: i32) -> String {
        self.encode(LEASE_TAG, queue, message, attempt)
    }

    pub fn peek_ref(&self, queue: QueueId, message: MessageId) -> String {
        self.encode(REF_TAG, queue, message, 0)
    }

    /// The lease a lease id stands for, if it was issued by this service for `queue`.
    pub fn open_lease(&self, queue: QueueId, lease_id: &str) -> Option<Lease> {
        self.decode(LEASE_TAG, queue, lease_id).map(|(message_id, attempt)| Lease { message_id, attempt })
    }

    pub fn open_ref(&self, queue: QueueId, peek_ref: &str) -> Option<MessageId> {
        self.decode(REF_TAG, queue, peek_ref).map(|(id, _)| id)
    }

    fn mac(&self, tag: u8, queue: QueueId, message: MessageId, attempt: i32) -> Hmac<Sha256> {
        let mut mac = self.keyed.clone();
        mac.update(&[tag]);
        mac.update(queue.0.as_bytes());
        mac.update(message.0.as_bytes());
        mac.update(&attempt.to_be_bytes());
        mac
    }

    fn encode(&self, tag: u8, queue: QueueId, message: MessageId, attempt: i32) -> String {
        let mut raw = Vec::with_capacity(ENCODED_LEN);
        raw.push(tag);
        raw.extend_from_slice(message.0.as_bytes());
        raw.extend_from_slice(&attempt.to_be_bytes());
        raw.extend_from_slice(&self.mac(tag, queue, message, attempt).finalize().into_bytes()[..MAC_LEN]);
        B64URL.encode(raw)
    }

    fn decode(&self, tag: u8, queue: QueueId, text: &str) -> Option<(MessageId, i32)> {
        if text.len() > 64 {
            return None;
        }
        let raw = B64URL.decode(text).ok()?;
        if raw.len() != ENCODED_LEN || raw[0] != tag {
            return None;
        }
        let message = MessageId(Uuid::from_slice(&raw[1..17]).ok()?);
        let attempt = i32::from_be_bytes(raw[17..21].try_into().ok()?);
        // verify_truncated_left compares in constant time, so a tag cannot be guessed byte by byte.
        self.mac(tag, queue, message, attempt).verify_truncated_left(&raw[21..]).ok()?;
        Some((message, attempt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> Signer {
        Signer::new(b"0123456789abcdef0123456789abcdef".to_vec())
    }

    #[test]
    fn a_lease_id_opens_for_its_queue_only() {
        let (queue, other, message) = (QueueId::new(), QueueId::new(), MessageId::new());
        let id = signer().lease_id(queue, message, 3);
        assert_eq!(signer().open_lease(queue, &id), Some(Lease { message_id: message, attempt: 3 }));
        assert_eq!(signer().open_lease(other, &id), None);
        assert_eq!(Signer::new(b"another key".to_vec()).open_lease(queue, &id), None);
    }

    #[test]
    fn forged_or_mangled_lease_ids_do_not_open() {
        let (queue, message) = (QueueId::new(), MessageId::new());
        let id = signer().lease_id(queue, message, 1);
        let mut forged = B64URL.decode(&id).unwrap();
        forged[20] = 9; // claim another attempt
        assert_eq!(signer().open_lease(queue, &B64URL.encode(&forged)), None);
        assert_eq!(signer().open_lease(queue, "not a lease"), None);
        assert_eq!(signer().open_lease(queue, ""), None);
        // A ref is not a lease id.
        assert_eq!(signer().open_lease(queue, &signer().peek_ref(queue, message)), None);
    }
}
