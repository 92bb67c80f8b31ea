//! Secrets sealed at rest: webhook signing secrets and the key that signs lease ids are stored encrypted
//! under a key the operator provides (XChaCha20-Poly1305, a random nonce per value), each value naming
//! the key that sealed it, so that a copy of the database (a backup, a replica, a support dump) signs
//! nothing, and a key can be replaced while nodes run (`skiplock secrets rotate`).
//!
//! A sealed value is `sealed:v1:<key id>:<base64 of nonce and ciphertext>`. A key id is the first eight
//! bytes of the key's SHA-256, in hex: derived, so the operator gives keys alone.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};

const PREFIX: &str = SEALED;
/// What every sealed value starts with.
pub const SEALED: &str = "sealed:v1:";
const NONCE_BYTES: usize = 24;

/// What a sealed value is, bound into its ciphertext so that one kind cannot be passed off as another.
#[derive(Debug, Clone, Copy)]
pub enum Purpose {
    WebhookSecret,
    LeaseKey,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::WebhookSecret => b"skiplock webhook signing secret",
            Purpose::LeaseKey => b"skiplock lease key",
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("a secret key must be 32 bytes in base64 (`skiplock secrets new-key` makes one): {0}")]
    BadKey(String),
    #[error(
        "the database holds secrets sealed under key {0}, which this node does not have: set \
         SKIPLOCK_SECRET_KEY to it, or list it in SKIPLOCK_PREVIOUS_SECRET_KEYS while a rotation runs"
    )]
    UnknownKey(String),
    #[error("a sealed secret under key {0} does not open: it was altered, or sealed for another purpose")]
    Corrupt(String),
}

struct Key {
    id: String,
    cipher: XChaCha20Poly1305,
}

impl Key {
    fn parse(encoded: &str) -> Result<Key, SealError> {
        let bytes = BASE64.decode(encoded.trim()).map_err(|e| SealError::BadKey(e.to_string()))?;
        if bytes.len() != 32 {
            return Err(SealError::BadKey(format!("got {} bytes", bytes.len())));
        }
        let id = hex::encode(&Sha256::digest(&bytes)[..8]);
        Ok(Key { id, cipher: XChaCha20Poly1305::new_from_slice(&bytes).expect("32 bytes") })
    }
}

/// The keys of a node: the current one, which seals, and earlier ones, which only open (during a rotation).
/// Without a current key nothing is sealed, and values stored in the clear are read as they are.
#[derive(Default)]
pub struct Keyring {
    current: Option<Key>,
    previous: Vec<Key>,
}

impl Keyring {
    /// A ring from base64 keys: `current` seals and opens, `previous` open.
    pub fn new(current: Option<&str>, previous: &[String]) -> Result<Keyring, SealError> {
        let current = current.map(Key::parse).transpose()?;
        let previous =
            previous.iter().filter(|k| !k.trim().is_empty()).map(|k| Key::parse(k)).collect::<Result<_, _>>()?;
        Ok(Keyring { current, previous })
    }

    /// A new random key, in base64.
    pub fn new_key() -> String {
        BASE64.encode(XChaCha20Poly1305::generate_key(&mut OsRng))
    }

    /// The current key's id, if the ring has one.
    pub fn current_id(&self) -> Option<&str> {
        self.current.as_ref().map(|k| k.id.as_str())
    }

    /// `plain` sealed under the current key; as it is when the ring has none.
    pub fn seal(&self, purpose: Purpose, plain: &[u8]) -> Vec<u8> {
        let Some(key) = &self.current else { return plain.to_vec() };
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let sealed = key
            .cipher
            .encrypt(&nonce, Payload { msg: plain, aad: purpose.label() })
            .expect("sealing a secret in memory cannot fail");
        let mut body = nonce.to_vec();
        body.extend(sealed);
        format!("{PREFIX}{}:{}", key.id, BASE64.encode(body)).into_bytes()
    }

    /// A text secret sealed, as text.
    pub fn seal_text(&self, purpose: Purpose, plain: &str) -> String {
        String::from_utf8(self.seal(purpose, plain.as_bytes())).expect("sealed values are ASCII")
    }

    /// A stored value opened: a sealed one by the key that sealed it, one stored in the clear as it is.
    pub fn open(&self, purpose: Purpose, stored: &[u8]) -> Result<Vec<u8>, SealError> {
        let Some(rest) = stored.strip_prefix(PREFIX.as_bytes()) else { return Ok(stored.to_vec()) };
        let rest = std::str::from_utf8(rest).map_err(|_| SealError::Corrupt("?".into()))?;
        let (id, body) = rest.split_once(':').ok_or_else(|| SealError::Corrupt("?".into()))?;
        let key = self.keys().find(|k| k.id == id).ok_or_else(|| SealError::UnknownKey(id.to_owned()))?;
        let body = BASE64.decode(body).map_err(|_| SealError::Corrupt(id.to_owned()))?;
        if body.len() < NONCE_BYTES {
            return Err(SealError::Corrupt(id.to_owned()));
        }
        let (nonce, sealed) = body.split_at(NONCE_BYTES);
        key.cipher
            .decrypt(XNonce::from_slice(nonce), Payload { msg: sealed, aad: purpose.label() })
            .map_err(|_| SealError::Corrupt(id.to_owned()))
    }

    /// A stored text secret opened.
    pub fn open_text(&self, purpose: Purpose, stored: &str) -> Result<String, SealError> {
        let plain = self.open(purpose, stored.as_bytes())?;
        String::from_utf8(plain).map_err(|_| SealError::Corrupt(self.current_id().unwrap_or("?").to_owned()))
    }

    /// Whether a stored value is as the current key would store it: sealed under it, or, for a ring
    /// without one, anything.
    pub fn is_current(&self, stored: &[u8]) -> bool {
        match &self.current {
            None => true,
            Some(key) => stored.starts_with(format!("{PREFIX}{}:", key.id).as_bytes()),
        }
    }

    /// What a stored value sealed under the current key starts with, for statements that find the others;
    /// None for a ring without one.
    pub fn current_prefix(&self) -> Option<String> {
        self.current.as_ref().map(|k| format!("{PREFIX}{}:", k.id))
    }

    fn keys(&self) -> impl Iterator<Item = &Key> {
        self.current.iter().chain(&self.previous)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(current: &str, previous: &[&str]) -> Keyring {
        Keyring::new(Some(current), &previous.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn a_sealed_secret_opens_with_its_key_and_shows_nothing_of_itself() {
        let key = Keyring::new_key();
        let ring = ring(&key, &[]);
        let sealed = ring.seal_text(Purpose::WebhookSecret, "whsec_abc");
        assert!(sealed.starts_with("sealed:v1:") && !sealed.contains("whsec_abc"), "{sealed}");
        assert_ne!(sealed, ring.seal_text(Purpose::WebhookSecret, "whsec_abc"), "a nonce per value");
        assert_eq!(ring.open_text(Purpose::WebhookSecret, &sealed).unwrap(), "whsec_abc");
        assert!(ring.is_current(sealed.as_bytes()));
        assert!(matches!(ring.open_text(Purpose::LeaseKey, &sealed), Err(SealError::Corrupt(_))));
        let mut altered = sealed.clone().into_bytes();
        let last = altered.len() - 3;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        assert!(matches!(ring.open(Purpose::WebhookSecret, &altered), Err(SealError::Corrupt(_))));
    }

    #[test]
    fn a_rotation_opens_with_the_previous_key_and_seals_with_the_new() {
        let (old, new) = (Keyring::new_key(), Keyring::new_key());
        let sealed = ring(&old, &[]).seal_text(Purpose::WebhookSecret, "s");
        let rotating = ring(&new, &[&old]);
        assert!(!rotating.is_current(sealed.as_bytes()));
        assert_eq!(rotating.open_text(Purpose::WebhookSecret, &sealed).unwrap(), "s");
        let unknown = ring(&new, &[]).open_text(Purpose::WebhookSecret, &sealed).unwrap_err();
        assert!(matches!(unknown, SealError::UnknownKey(_)));
        assert!(unknown.to_string().contains("SKIPLOCK_SECRET_KEY"), "{unknown}");
        assert!(matches!(Keyring::default().open_text(Purpose::WebhookSecret, &sealed), Err(SealError::UnknownKey(_))));
    }

    #[test]
    fn values_in_the_clear_are_read_as_they_are_and_bad_keys_are_refused() {
        assert_eq!(ring(&Keyring::new_key(), &[]).open_text(Purpose::WebhookSecret, "whsec_x").unwrap(), "whsec_x");
        assert_eq!(Keyring::default().seal_text(Purpose::WebhookSecret, "whsec_x"), "whsec_x");
        assert!(matches!(Keyring::new(Some("c2hvcnQ="), &[]), Err(SealError::BadKey(_))));
        assert!(matches!(Keyring::new(Some("not base64!"), &[]), Err(SealError::BadKey(_))));
    }
}
