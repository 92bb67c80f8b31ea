//! Token endpoints: verify (any valid token), and create/list/revoke (scope `tokens_write`). The body of
//! a create and the view of a token are shared with the operator API, which issues tokens on an
//! account's behalf.

use actix_web::{web, HttpRequest, HttpResponse};
use std::net::IpAddr;

use chrono::{DateTime, SubsecRound, Utc};
use ipnet::IpNet;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};

use super::envelope::{ok, ok_list, ApiJson};
use super::paging::Paging;
use super::views::timestamp;
use crate::api::extract::{Authed, PathId, TokenOnly, TokensWrite};
use crate::auth::{issue_within, parse_scopes, Scope};
use crate::engine::audit::{Actor, Change};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, TokenId};
use crate::store::{self, tokens::TokenRow, tokens::Validity};

type Data = web::Data<Engine>;

pub async fn verify(auth: Authed<TokenOnly>) -> HttpResponse {
    let scopes: Vec<&str> = auth.principal.scopes.iter().map(|s| s.as_str()).collect();
    // `account_id` and `scopes` are skiplock's additions: they let a client (the dashboard) start from a
    // token alone.
    ok(json!({
        "id": auth.principal.token_id,
        "status": "active",
        "account_id": auth.principal.account_id,
        "scopes": scopes,
        "not_before": auth.principal.not_before.map(timestamp),
        "expires_on": auth.principal.expires_on.map(timestamp),
    }))
}

/// A token to create: its name, scopes and, as Cloudflare's tokens, when and from where it may be used.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    name: Option<String>,
    scopes: Option<Vec<String>>,
    not_before: Option<String>,
    expires_on: Option<String>,
    #[serde(default, deserialize_with = "object")]
    condition: Option<Condition>,
}

/// Cloudflare's `condition` of a token.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    #[serde(default, deserialize_with = "object")]
    request_ip: Option<RequestIpInput>,
}

/// An object, or null: a derived struct would also read an array of its fields in order.
fn object<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    let Some(fields) = Option::<serde_json::Map<String, Value>>::deserialize(d)? else { return Ok(None) };
    T::deserialize(Value::Object(fields)).map(Some).map_err(serde::de::Error::custom)
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RequestIpInput {
    #[serde(rename = "in")]
    allowed: Option<Vec<String>>,
    #[serde(rename = "not_in")]
    refused: Option<Vec<String>>,
}

/// The most networks a token's condition lists on each side.
const MAX_NETWORKS: usize = 100;

/// Networks as a token's condition names them (`10.0.0.0/8`, or one address), normalized; a 400
/// naming `field` otherwise.
fn networks(field: &str, raw: Option<Vec<String>>) -> ApiResult<Vec<String>> {
    let raw = raw.unwrap_or_default();
    if raw.len() > MAX_NETWORKS {
        return Err(ApiError::invalid(format!("{field} may list at most {MAX_NETWORKS} networks")));
    }
    raw.iter()
        .map(|text| {
            let net = text.parse::<IpNet>().or_else(|_| text.parse::<IpAddr>().map(IpNet::from));
            net.map(|n| n.trunc().to_string()).map_err(|_| {
                ApiError::invalid(format!("{field}: {text:?} is not a network like 198.51.100.0/24 or an address"))
            })
        })
        .collect()
}

impl CreateToken {
    /// The name, scopes and validity asked for, each checked; a 400 naming what to fix.
    pub fn checked(self, now: DateTime<Utc>) -> ApiResult<(String, Vec<Scope>, Validity)> {
        let name = self.name.unwrap_or_default();
        if name.trim().is_empty() || name.chars().count() > 120 || name.chars().any(char::is_control) {
            return Err(ApiError::invalid("name is required: 1-120 characters, no control characters"));
        }
        let scopes = parse_scopes(self.scopes.as_deref().unwrap_or_default()).map_err(ApiError::invalid)?;
        let request_ip = self.condition.unwrap_or_default().request_ip.unwrap_or_default();
        let validity = Validity {
            not_before: self.not_before.as_deref().map(|t| instant("not_before", t)).transpose()?,
            expires_on: self.expires_on.as_deref().map(|t| instant("expires_on", t)).transpose()?,
            request_ip_in: networks("condition.request_ip.in", request_ip.allowed)?,
            request_ip_not_in: networks("condition.request_ip.not_in", request_ip.refused)?,
        };
        if validity.expires_on.is_some_and(|expires| expires <= now) {
            return Err(ApiError::invalid("expires_on must be in the future"));
        }
        if let (Some(start), Some(end)) = (validity.not_before, validity.expires_on) {
            if start >= end {
                return Err(ApiError::invalid("not_before must be before expires_on"));
            }
        }
        Ok((name, scopes, validity))
    }
}

/// An RFC 3339 time such as 2027-01-01T00:00:00Z, to the microsecond PostgreSQL keeps (so that the
/// checks below hold for what is stored).
fn instant(field: &str, raw: &str) -> ApiResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(raw)
        .map(|t| t.with_timezone(&Utc).trunc_subsecs(6))
        .map_err(|_| ApiError::invalid(format!("{field} must be an RFC 3339 time such as 2027-01-01T00:00:00Z")))
}

/// A token as the lists show it; at its creation, with its text (`token`), the only time it is shown.
pub fn token_view(row: &TokenRow, text: Option<&str>) -> Value {
    let expired = row.expires_on.is_some_and(|expires| expires <= Utc::now());
    let mut view = json!({
        "id": row.id,
        "name": row.name,
        "status": if expired { "expired" } else { "active" },
        "scopes": row.scopes,
        "created_on": timestamp(row.created_at),
        "not_before": row.not_before.map(timestamp),
        "expires_on": row.expires_on.map(timestamp),
    });
    if !row.request_ip_in.is_empty() || !row.request_ip_not_in.is_empty() {
        view["condition"] = json!({"request_ip": {"in": row.request_ip_in, "not_in": row.request_ip_not_in}});
    }
    if let Some(text) = text {
        view["token"] = json!(text);
    }
    view
}

/// Issues `account` a token named `name` with `scopes`, usable within `v`: its view, with its text.
pub async fn issue_for(
    state: &Engine,
    account: AccountId,
    name: &str,
    scopes: &[Scope],
    v: Validity,
) -> ApiResult<Value> {
    let (id, text) = issue_within(&state.pool, account, name, scopes, v).await?;
    let row = store::tokens::find_active(&state.pool, id).await?.ok_or_else(|| ApiError::not_found("token"))?;
    Ok(token_view(&row, Some(&text)))
}

pub async fn create(state: Data, auth: Authed<TokensWrite>, body: ApiJson<CreateToken>) -> ApiResult<HttpResponse> {
    let (name, scopes, validity) = body.0.checked(Utc::now())?;
    // A token can only hand out what it holds itself.
    if let Some(extra) = scopes.iter().find(|s| !auth.principal.has(**s)) {
        return Err(ApiError::new(
            Kind::MissingScope,
            format!("this token cannot grant the {} scope it does not hold itself", extra.as_str()),
        ));
    }
    let view = issue_for(&state, auth.account_id(), &name, &scopes, validity).await?;
    state.audit(auth.account_id(), &auth.actor, token_created(&view)).await;
    Ok(ok(view))
}

/// A token's creation as the audit log records it: its view without its text.
pub fn token_created(view: &Value) -> Change {
    let mut recorded = view.clone();
    if let Some(fields) = recorded.as_object_mut() {
        fields.remove("token");
    }
    Change::new("token", view["id"].as_str().unwrap_or_default(), "token.create").to(recorded)
}

/// A page of the account's tokens (`page`, `per_page`; 20 by default, as Cloudflare's).
pub async fn list(state: Data, auth: Authed<TokensWrite>, req: HttpRequest) -> ApiResult<HttpResponse> {
    list_of(&state, auth.account_id(), &req).await
}

/// A page of `account`'s tokens.
pub async fn list_of(state: &Engine, account: AccountId, req: &HttpRequest) -> ApiResult<HttpResponse> {
    let paging = Paging::of(req)?;
    let (rows, total) = store::tokens::list(&state.pool, account, paging.per_page, paging.offset()).await?;
    let tokens: Vec<_> = rows.iter().map(|r| token_view(r, None)).collect();
    let info = paging.info(tokens.len(), total);
    Ok(ok_list(tokens, info))
}

pub async fn revoke(state: Data, auth: Authed<TokensWrite>, id: PathId<TokenId>) -> ApiResult<HttpResponse> {
    revoke_of(&state, auth.account_id(), &auth.actor, id.0).await
}

/// Revokes `account`'s token `id` for `actor`; a 404 when it has no such active token.
pub async fn revoke_of(state: &Engine, account: AccountId, actor: &Actor, id: TokenId) -> ApiResult<HttpResponse> {
    if !store::tokens::revoke(&state.pool, account, id).await? {
        return Err(ApiError::not_found("token"));
    }
    state.audit(account, actor, Change::new("token", id, "token.revoke")).await;
    Ok(ok(json!({ "id": id })))
}
