//! Authentication: the token format and its argon2id hash, issuing tokens, scopes, the books of
//! accounts' and the operator's tokens, and the verification cache. The extractors that handlers name in
//! their signatures are the API's (`api::extract`, `api::admin::extract`).

pub mod books;
pub mod failures;
pub mod operator;
pub mod sealing;
pub mod token;
pub mod verifier;

pub use books::{AccountTokens, OperatorTokens, Principal};
pub use operator::{Operator, OperatorScope};
pub use token::{Scope, Token, TokenKind};
pub use verifier::Verifier;

use sqlx::PgPool;

use crate::ids::{AccountId, TokenId};
use crate::store::tokens::Validity;

/// Creates a token usable at any time and returns its text, the only time it is ever shown.
pub async fn issue(
    pool: &PgPool,
    account: AccountId,
    name: &str,
    scopes: &[Scope],
) -> Result<(TokenId, String), sqlx::Error> {
    issue_within(pool, account, name, scopes, Validity::default()).await
}

/// Creates a token usable within `validity` and returns its text, the only time it is ever shown.
pub async fn issue_within(
    pool: &PgPool,
    account: AccountId,
    name: &str,
    scopes: &[Scope],
    validity: Validity,
) -> Result<(TokenId, String), sqlx::Error> {
    let token = Token::generate(TokenKind::Account);
    let text = token.to_text();
    let id = token.id;
    let hash = tokio::task::spawn_blocking(move || token.hash_secret()).await.expect("argon2 does not panic");
    let names: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
    crate::store::tokens::insert(pool, account, id, name, &names, &hash, validity).await?;
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
