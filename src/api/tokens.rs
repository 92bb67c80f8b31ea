//! Token endpoints: verify (any valid token), and create/list/revoke (scope `tokens_write`).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::json;

use super::envelope::{ok, ok_list, ApiJson};
use super::paging::Paging;
use super::views::timestamp;
use crate::api::extract::{Authed, PathId, TokenOnly, TokensWrite};
use crate::auth::{issue, parse_scopes};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::TokenId;
use crate::store;

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
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    name: Option<String>,
    scopes: Option<Vec<String>>,
}

pub async fn create(state: Data, auth: Authed<TokensWrite>, body: ApiJson<CreateToken>) -> ApiResult<HttpResponse> {
    let body = body.0;
    let name = body.name.unwrap_or_default();
    if name.trim().is_empty() || name.chars().count() > 120 || name.chars().any(char::is_control) {
        return Err(ApiError::invalid("name is required: 1-120 characters, no control characters"));
    }
    let scopes = parse_scopes(body.scopes.as_deref().unwrap_or_default()).map_err(ApiError::invalid)?;
    // A token can only hand out what it holds itself.
    if let Some(extra) = scopes.iter().find(|s| !auth.principal.has(**s)) {
        return Err(ApiError::new(
            Kind::MissingScope,
            format!("this token cannot grant the {} scope it does not hold itself", extra.as_str()),
        ));
    }
    let (id, text) = issue(&state.pool, auth.account_id(), &name, &scopes).await?;
    let row = store::tokens::find_active(&state.pool, id).await?.ok_or_else(|| ApiError::not_found("token"))?;
    Ok(ok(json!({
        "id": id,
        "name": row.name,
        "scopes": row.scopes,
        "created_on": timestamp(row.created_at),
        "token": text,
    })))
}

/// A page of the account's tokens (`page`, `per_page`; 20 by default, as Cloudflare's).
pub async fn list(state: Data, auth: Authed<TokensWrite>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let paging = Paging::of(&req)?;
    let (rows, total) = store::tokens::list(&state.pool, auth.account_id(), paging.per_page, paging.offset()).await?;
    let tokens: Vec<_> = rows
        .iter()
        .map(|r| json!({"id": r.id, "name": r.name, "scopes": r.scopes, "created_on": timestamp(r.created_at)}))
        .collect();
    let info = paging.info(tokens.len(), total);
    Ok(ok_list(tokens, info))
}

pub async fn revoke(state: Data, auth: Authed<TokensWrite>, id: PathId<TokenId>) -> ApiResult<HttpResponse> {
    let id = id.0;
    if !store::tokens::revoke(&state.pool, auth.account_id(), id).await? {
        return Err(ApiError::not_found("token"));
    }
    Ok(ok(json!({ "id": id })))
}
