//! The operator's tokens: what they may do (read, write) and issuing one. They reach the operator API
//! alone; the first one is made on the command line (`skiplock operator token create`).

use sqlx::PgPool;

use super::token::{Token, TokenKind};
use crate::ids::TokenId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorScope {
    /// Read accounts, tokens and their state.
    Read,
    /// Create, change, suspend and resume accounts; issue and revoke their tokens.
    Write,
}

impl OperatorScope {
    pub const ALL: [OperatorScope; 2] = [OperatorScope::Read, OperatorScope::Write];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == raw)
    }
}

/// Who a verified operator token speaks for.
#[derive(Debug, Clone)]
pub struct Operator {
    pub token_id: TokenId,
    pub scopes: Vec<OperatorScope>,
}

impl Operator {
    pub fn has(&self, scope: OperatorScope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// Creates an operator token and returns its text, the only time it is ever shown.
pub async fn issue_operator(
    pool: &PgPool,
    name: &str,
    scopes: &[OperatorScope],
) -> Result<(TokenId, String), sqlx::Error> {
    let token = Token::generate(TokenKind::Operator);
    let (id, text) = (token.id, token.to_text());
    let hash = tokio::task::spawn_blocking(move || token.hash_secret()).await.expect("argon2 does not panic");
    let names: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
    crate::store::operators::insert(pool, id, name, &names, &hash).await?;
    Ok((id, text))
}

/// Operator scopes named on the command line, each once.
pub fn parse_operator_scopes(raw: &[String]) -> Result<Vec<OperatorScope>, String> {
    let mut scopes: Vec<OperatorScope> = raw
        .iter()
        .map(|s| OperatorScope::parse(s.trim()).ok_or_else(|| format!("unknown scope {s:?}: use read or write")))
        .collect::<Result<_, _>>()?;
    scopes.sort_by_key(|s| s.as_str());
    scopes.dedup();
    if scopes.is_empty() {
        return Err("scopes must name read, write or both".into());
    }
    Ok(scopes)
}
