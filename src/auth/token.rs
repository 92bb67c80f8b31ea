//! Tokens: an account's `skl_<token id>_<secret>` and an operator's `sko_<token id>_<secret>`. The id
//! finds the row; only an argon2id hash of the secret is stored. The prefix makes a leaked token
//! recognisable to secret scanners, and tells which API it can reach.

use argon2::password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::ids::TokenId;

const SECRET_LEN: usize = 43; // 32 random bytes, base64url without padding

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    QueuesRead,
    QueuesWrite,
    TokensWrite,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::QueuesRead, Scope::QueuesWrite, Scope::TokensWrite];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::QueuesRead => "queues_read",
            Self::QueuesWrite => "queues_write",
            Self::TokensWrite => "tokens_write",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == raw)
    }
}

/// Whose a token is: an account's (the tenant API) or the operator's (the operator API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Account,
    Operator,
}

impl TokenKind {
    fn prefix(self) -> &'static str {
        match self {
            TokenKind::Account => "skl_",
            TokenKind::Operator => "sko_",
        }
    }
}

/// A token as the client holds it.
pub struct Token {
    pub kind: TokenKind,
    pub id: TokenId,
    pub secret: String,
}

impl Token {
    pub fn generate(kind: TokenKind) -> Self {
        let mut bytes = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut bytes);
        Self { kind, id: TokenId::new(), secret: B64URL.encode(bytes) }
    }

    pub fn parse(text: &str) -> Option<Self> {
        let (kind, rest) = [TokenKind::Account, TokenKind::Operator]
            .into_iter()
            .find_map(|kind| text.strip_prefix(kind.prefix()).map(|rest| (kind, rest)))?;
        if rest.len() != 32 + 1 + SECRET_LEN || !rest.is_char_boundary(32) {
            return None;
        }
        let (id, secret) = rest.split_at(32);
        let secret = secret.strip_prefix('_')?;
        if !secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return None;
        }
        Some(Self { kind, id: id.parse().ok()?, secret: secret.to_owned() })
    }

    pub fn to_text(&self) -> String {
        format!("{}{}_{}", self.kind.prefix(), self.id, self.secret)
    }

    /// The argon2id PHC string to store. CPU-heavy: call from a blocking thread.
    pub fn hash_secret(&self) -> String {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(self.secret.as_bytes(), &salt)
            .expect("argon2 hashes any secret with default parameters")
            .to_string()
    }

    /// CPU-heavy: call from a blocking thread.
    pub fn matches(&self, stored_hash: &str) -> bool {
        PasswordHash::new(stored_hash)
            .map(|hash| Argon2::default().verify_password(self.secret.as_bytes(), &hash).is_ok())
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_token_parses_back_and_matches_its_hash() {
        let token = Token::generate(TokenKind::Account);
        let text = token.to_text();
        assert!(text.starts_with("skl_"));
        let parsed = Token::parse(&text).unwrap();
        assert_eq!((parsed.id, parsed.kind), (token.id, TokenKind::Account));
        let hash = token.hash_secret();
        assert!(hash.starts_with("$argon2id$"));
        assert!(parsed.matches(&hash));
        assert!(!Token::generate(TokenKind::Account).matches(&hash));
        let operator = Token::generate(TokenKind::Operator).to_text();
        assert!(operator.starts_with("sko_"));
        assert_eq!(Token::parse(&operator).unwrap().kind, TokenKind::Operator);
    }

    #[test]
    fn malformed_tokens_do_not_parse() {
        let text = Token::generate(TokenKind::Account).to_text();
        assert!(Token::parse(&text[..text.len() - 1]).is_none());
        assert!(Token::parse(&text.replacen("skl_", "sk_", 1)).is_none());
        assert!(Token::parse("").is_none());
        assert!(Token::parse(&format!("skl_{}", "é".repeat(40))).is_none());
    }
}
