//! Lease ids come back from clients in every ack: opening one must never panic, and nothing but a
//! lease id this key signed for this queue may open.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skiplock::ids::{MessageId, QueueId};
use skiplock::queue::lease::Signer;
use uuid::Uuid;

fuzz_target!(|data: &[u8]| {
    let signer = Signer::new(b"fuzzing key, fixed so that crashes reproduce".to_vec());
    let queue = QueueId(Uuid::from_u128(7));
    if let Ok(text) = std::str::from_utf8(data) {
        if let Some(lease) = signer.open_lease(queue, text) {
            // Only a genuine id opens: it must be exactly what the signer would issue.
            assert_eq!(signer.lease_id(queue, lease.message_id, lease.attempt), text);
        }
        let _ = signer.open_ref(queue, text);
    }
    let _ = MessageId(Uuid::nil());
});
