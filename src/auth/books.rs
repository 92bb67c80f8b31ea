//! The books of tokens a verifier reads: accounts' tokens, which reach the tenant API, and the operator's,
//! which reach the operator API. Each says which tokens it holds (by their prefix), how to find one by id,
//! and who a verified one speaks for.

use std::future::Future;
use std::net::IpAddr;

use chrono::{DateTime, Utc};
use ipnet::IpNet;
use sqlx::PgPool;

use super::operator::{Operator, OperatorScope};
use super::token::{Scope, TokenKind};
use crate::ids::{AccountId, TokenId};
use crate::store;

/// A token's row as a verifier needs it: the hash to check the secret against, and who it speaks for.
pub struct Entry<P> {
    pub secret_hash: String,
    pub principal: P,
}

pub trait TokenBook: Send + Sync + 'static {
    /// Who a verified token speaks for.
    type Principal: Clone + Send + Sync + 'static;
    /// The tokens this book holds; a token of another kind is not looked up.
    const KIND: TokenKind;
    /// The token's entry, unless it is unknown or revoked.
    fn find(
        pool: &PgPool,
        id: TokenId,
    ) -> impl Future<Output = Result<Option<Entry<Self::Principal>>, sqlx::Error>> + Send;
}

/// Who an account's verified token speaks for.
#[derive(Debug, Clone)]
pub struct Principal {
    pub account_id: AccountId,
    pub token_id: TokenId,
    pub scopes: Vec<Scope>,
    /// The token is refused before this time.
    pub not_before: Option<DateTime<Utc>>,
    /// The token is refused from this time.
    pub expires_on: Option<DateTime<Utc>>,
    /// Where the token may be used from.
    pub request_ip: RequestIp,
}

impl Principal {
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    /// Why the token cannot be used at `now`, when it cannot: expired, or not valid yet.
    pub fn refused_at(&self, now: DateTime<Utc>) -> Option<String> {
        let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match (self.not_before, self.expires_on) {
            (_, Some(expires)) if now >= expires => Some(format!("this API token expired at {}", at(expires))),
            (Some(start), _) if now < start => Some(format!("this API token is not valid before {}", at(start))),
            _ => None,
        }
    }
}

/// Cloudflare's `condition.request_ip` of a token: the networks it may be used from (any, when None)
/// and those it may not.
#[derive(Debug, Clone, Default)]
pub struct RequestIp {
    pub allowed: Option<Vec<IpNet>>,
    pub refused: Vec<IpNet>,
}

impl RequestIp {
    /// The networks as stored (checked when the token was made; one unreadable allows nothing).
    fn stored(allowed: &[String], refused: &[String]) -> Self {
        let parse = |nets: &[String]| nets.iter().filter_map(|n| n.parse().ok()).collect::<Vec<IpNet>>();
        Self { allowed: (!allowed.is_empty()).then(|| parse(allowed)), refused: parse(refused) }
    }

    /// Whether a request from `client` may use the token; a request with no known address may only when
    /// the token names no networks.
    pub fn admits(&self, client: Option<IpAddr>) -> bool {
        let Some(ip) = client else { return self.allowed.is_none() && self.refused.is_empty() };
        self.allowed.as_ref().is_none_or(|nets| nets.iter().any(|n| n.contains(&ip)))
            && !self.refused.iter().any(|n| n.contains(&ip))
    }
}

/// Accounts' tokens (`skl_`).
pub struct AccountTokens;

impl TokenBook for AccountTokens {
    type Principal = Principal;
    const KIND: TokenKind = TokenKind::Account;

    async fn find(pool: &PgPool, id: TokenId) -> Result<Option<Entry<Principal>>, sqlx::Error> {
        Ok(store::tokens::find_active(pool, id).await?.map(|row| Entry {
            principal: Principal {
                account_id: row.account_id,
                token_id: row.id,
                scopes: row.scopes.iter().filter_map(|s| Scope::parse(s)).collect(),
                not_before: row.not_before,
                expires_on: row.expires_on,
                request_ip: RequestIp::stored(&row.request_ip_in, &row.request_ip_not_in),
            },
            secret_hash: row.secret_hash,
        }))
    }
}

/// The operator's tokens (`sko_`).
pub struct OperatorTokens;

impl TokenBook for OperatorTokens {
    type Principal = Operator;
    const KIND: TokenKind = TokenKind::Operator;

    async fn find(pool: &PgPool, id: TokenId) -> Result<Option<Entry<Operator>>, sqlx::Error> {
        Ok(store::operators::find_active(pool, id).await?.map(|row| Entry {
            principal: Operator {
                token_id: row.id,
                scopes: row.scopes.iter().filter_map(|s| OperatorScope::parse(s)).collect(),
            },
            secret_hash: row.secret_hash,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_used_from_the_networks_it_allows_and_not_from_those_it_refuses() {
        let nets = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let any = RequestIp::stored(&[], &[]);
        assert!(any.admits(ip("203.0.113.9")) && any.admits(None));
        let office = RequestIp::stored(&nets(&["198.51.100.0/24"]), &nets(&["198.51.100.7/32"]));
        assert!(office.admits(ip("198.51.100.8")));
        assert!(!office.admits(ip("198.51.100.7")) && !office.admits(ip("203.0.113.9")) && !office.admits(None));
        let not_there = RequestIp::stored(&[], &nets(&["2001:db8::/32"]));
        assert!(not_there.admits(ip("203.0.113.9")) && !not_there.admits(ip("2001:db8::1")));
        let unreadable = RequestIp::stored(&nets(&["nonsense"]), &[]);
        assert!(!unreadable.admits(ip("203.0.113.9")), "an unreadable allow-list admits nothing");
    }
}
