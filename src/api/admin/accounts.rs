//! The operator's accounts: create (with a first token), list, get, rename, suspend and resume.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::extract::{Operated, Read, Write};
use crate::api::envelope::{ok, ok_list, ApiJson};
use crate::api::extract::PathId;
use crate::api::paging::{query_pairs, Paging};
use crate::api::tokens::issue_for;
use crate::api::views::timestamp;
use crate::auth::Scope;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::AccountId;
use crate::queue::account::{account_name, status_reason, AccountStatus};
use crate::store::accounts::{self, AccountFilter, AccountRow};

type Data = web::Data<Engine>;

/// An account as the operator sees it.
#[derive(Serialize)]
pub struct AccountView {
    id: AccountId,
    name: String,
    status: AccountStatus,
    /// The operator's reason for the status, when one was given.
    status_reason: Option<String>,
    status_changed_on: Option<String>,
    created_on: String,
}

impl AccountView {
    fn new(row: AccountRow) -> Self {
        Self {
            id: row.id,
            name: row.name,
            status: row.status,
            status_reason: row.status_reason,
            status_changed_on: row.status_changed_at.map(timestamp),
            created_on: timestamp(row.created_at),
        }
    }
}

/// A page of the accounts (`page`, `per_page`), filtered by `name` (contains, any case) and `status`.
pub async fn list(state: Data, _: Operated<Read>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let pairs = query_pairs(&req)?;
    if let Some((unknown, _)) =
        pairs.iter().find(|(k, _)| !["name", "status", "page", "per_page"].contains(&k.as_str()))
    {
        return Err(ApiError::invalid(format!(
            "unknown query parameter {unknown:?}: use name, status, page, per_page"
        )));
    }
    let paging = Paging::parse(&pairs)?;
    let param = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    let filter = AccountFilter { name: param("name"), status: param("status").map(AccountStatus::parse).transpose()? };
    let (rows, total) = accounts::list(&state.pool, &filter, paging.per_page, paging.offset()).await?;
    let views: Vec<_> = rows.into_iter().map(AccountView::new).collect();
    let info = paging.info(views.len(), total);
    Ok(ok_list(views, info))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateAccount {
    name: Option<String>,
}

/// Creates an account and its first token, with every scope; the token's text is shown this once.
pub async fn create(state: Data, _: Operated<Write>, body: ApiJson<CreateAccount>) -> ApiResult<HttpResponse> {
    let name = account_name(body.0.name.as_deref().unwrap_or_default())?;
    let id = accounts::create(&state.pool, name).await?;
    let token = issue_for(&state, id, "owner", &Scope::ALL, Default::default()).await?;
    let account = accounts::get(&state.pool, id).await?.ok_or_else(|| ApiError::not_found("account"))?;
    Ok(ok(json!({ "account": AccountView::new(account), "token": token })))
}

pub async fn get(state: Data, _: Operated<Read>, id: PathId<AccountId>) -> ApiResult<HttpResponse> {
    found(accounts::get(&state.pool, id.0).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateAccount {
    name: Option<String>,
}

/// Changes what the body names (today: the name).
pub async fn update(
    state: Data,
    _: Operated<Write>,
    id: PathId<AccountId>,
    body: ApiJson<UpdateAccount>,
) -> ApiResult<HttpResponse> {
    let Some(name) = body.0.name else { return found(accounts::get(&state.pool, id.0).await?) };
    found(accounts::rename(&state.pool, id.0, account_name(&name)?).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suspend {
    reason: Option<String>,
}

/// Suspends the account: its requests are refused (403) and its long polls and webhook deliveries stop,
/// on every node within about a second; nothing of it is deleted. Suspending it again changes only the
/// reason.
pub async fn suspend(
    state: Data,
    _: Operated<Write>,
    id: PathId<AccountId>,
    body: ApiJson<Suspend>,
) -> ApiResult<HttpResponse> {
    let reason = body.0.reason.as_deref().map(status_reason).transpose()?;
    let row = accounts::set_status(&state.pool, id.0, AccountStatus::Suspended, reason).await?;
    state.refresh_standing().await?;
    found(row)
}

/// Resumes a suspended account: it is served again as it was.
pub async fn resume(state: Data, _: Operated<Write>, id: PathId<AccountId>) -> ApiResult<HttpResponse> {
    let row = accounts::set_status(&state.pool, id.0, AccountStatus::Active, None).await?;
    state.refresh_standing().await?;
    found(row)
}

fn found(row: Option<AccountRow>) -> ApiResult<HttpResponse> {
    row.map(|row| ok(AccountView::new(row))).ok_or_else(|| ApiError::not_found("account"))
}
