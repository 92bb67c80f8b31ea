//! Authentication: the token format and its argon2id hash, the verification cache, scopes, and the
//! `Authed` extractor that handlers name in their signatures.

pub mod extractor;
pub mod token;
pub mod verifier;

pub use extractor::{Authed, Gate, QueuesRead, QueuesReadWrite, QueuesWrite, TokenOnly, TokensWrite};
pub use token::{Scope, Token};
pub use verifier::{Principal, Verifier};
