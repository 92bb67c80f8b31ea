//! Authentication: the token format and its argon2id hash, issuing tokens, scopes, and the verification
//! cache. The `Authed` extractor that handlers name in their signatures is the API's (`api::extract`).

pub mod failures;
pub mod token;
pub mod verifier;

pub use token::{Scope, Token};
pub use verifier::{Principal, Verifier};

use sqlx::PgPool;

use crate::ids::{AccountId, TokenId};

/// Creates a token and returns its text, the only time it is ever shown.
pub async fn issue(
    pool: &PgPool,
    account: AccountId,
    name: &str,
    scopes: &[Scope],
) -> Result<(TokenId, String), sqlx::Error> {
    let token = Token::generate();
    let text = token.to_text();
    let id = token.id;
    let hash = tokio::task::spawn_blocking(move || token.hash_secret()).await.expect("argon2 does not panic");
    let names: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
    crate::store::tokens::insert(pool, account, id, name, &names, &hash).await?;
    Ok((id, text))
}

/// Scopes named in a request or on the command line, each once.
pub fn parse_scopes(raw: &[String]) -> Result<Vec<Scope>, String> {
    if raw.is_empty() {
        return Err("scopes must name at least one of queues_read, queues_write, tokens_write".into());
    }
    let mut scopes: Vec<Scope> = raw
        .iter()
        .map(|s| {
            Scope::parse(s).ok_or_else(|| format!("unknown scope {s:?}: use queues_read, queues_write or tokens_write"))
        })
        .collect::<Result<_, _>>()?;
    scopes.sort_by_key(|s| s.as_str());
    scopes.dedup();
    Ok(scopes)
}
