//! Tokens on an account's behalf: the operator issues, lists and revokes them as the account's own
//! token endpoints do, any scope and validity allowed.

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::Utc;

use super::extract::{Operated, Read, Write};
use crate::api::envelope::{ok, ApiJson};
use crate::api::extract::PathId;
use crate::api::tokens::{issue_for, list_of, revoke_of, token_created, CreateToken};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, TokenId};
use crate::queue::account::AccountStatus;
use crate::store;

type Data = web::Data<Engine>;

pub async fn create(
    state: Data,
    operated: Operated<Write>,
    account: PathId<AccountId>,
    body: ApiJson<CreateToken>,
) -> ApiResult<HttpResponse> {
    let row = store::accounts::get(&state.pool, account.0).await?.ok_or_else(|| ApiError::not_found("account"))?;
    if matches!(row.status, AccountStatus::Deleting | AccountStatus::Deleted) {
        return Err(ApiError::new(Kind::Conflict, "the account is deleted or being deleted; it can have no token"));
    }
    let account = row.id;
    let (name, scopes, validity) = body.0.checked(Utc::now())?;
    let view = issue_for(&state, account, &name, &scopes, validity).await?;
    state.audit(account, &operated.actor, token_created(&view)).await;
    Ok(ok(view))
}

pub async fn list(
    state: Data,
    _: Operated<Read>,
    account: PathId<AccountId>,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    list_of(&state, existing(&state, account.0).await?, &req).await
}

pub async fn revoke(
    state: Data,
    operated: Operated<Write>,
    account: PathId<AccountId>,
    id: PathId<TokenId>,
) -> ApiResult<HttpResponse> {
    revoke_of(&state, existing(&state, account.0).await?, &operated.actor, id.0).await
}

/// The account, when it exists; a 404 otherwise.
async fn existing(state: &Engine, account: AccountId) -> ApiResult<AccountId> {
    if store::accounts::exists(&state.pool, account).await? {
        Ok(account)
    } else {
        Err(ApiError::not_found("account"))
    }
}
