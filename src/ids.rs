//! Typed ids, parsed at the edge. On the wire an id is 32 lowercase hex characters (a UUID without
//! dashes), as Cloudflare's are.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};
use uuid::Uuid;

macro_rules! typed_id {
    ($name:ident, $what:literal) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, sqlx::Type)]
        #[sqlx(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            pub const WHAT: &'static str = $what;

            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0.simple())
            }
        }

        impl FromStr for $name {
            type Err = MalformedId;
            fn from_str(s: &str) -> Result<Self, MalformedId> {
                parse_hex_id(s).map(Self).ok_or(MalformedId($what))
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    };
}

typed_id!(AccountId, "account id");
typed_id!(TokenId, "token id");
typed_id!(QueueId, "queue id");
typed_id!(ConsumerId, "consumer id");
typed_id!(MessageId, "message id");
typed_id!(RedriveId, "redrive id");
typed_id!(ScheduleId, "schedule id");
typed_id!(SubscriptionId, "subscription id");
typed_id!(TopicId, "topic id");
typed_id!(BindingId, "binding id");

#[derive(Debug, thiserror::Error)]
#[error("malformed {0}: expected 32 lowercase hexadecimal characters")]
pub struct MalformedId(pub &'static str);

fn parse_hex_id(s: &str) -> Option<Uuid> {
    if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    Uuid::try_parse(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_as_32_hex_characters() {
        let id = QueueId::new();
        let text = id.to_string();
        assert_eq!(text.len(), 32);
        assert_eq!(text.parse::<QueueId>().unwrap(), id);
    }

    #[test]
    fn dashed_or_short_ids_are_rejected() {
        let dashed = Uuid::new_v4().to_string();
        assert!(dashed.parse::<QueueId>().is_err());
        assert!("abc".parse::<QueueId>().is_err());
        assert!("zz".repeat(16).parse::<QueueId>().is_err());
        assert!(QueueId::new().to_string().to_uppercase().parse::<QueueId>().is_err(), "lowercase only");
    }
}
