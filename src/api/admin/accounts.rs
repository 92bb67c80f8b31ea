//! The operator's accounts: create (with a first token), list, get, change (name, plan, own limits),
//! suspend, resume and delete.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::extract::{Operated, Read, Write};
use crate::api::envelope::{ok, ok_list, ApiJson};
use crate::api::extract::PathId;
use crate::api::paging::{query_pairs, Paging};
use crate::api::tokens::{issue_for, token_created};
use crate::api::views::timestamp;
use crate::auth::Scope;
use crate::engine::accounts::AccountUpdate;
use crate::engine::audit::Change;
use crate::engine::limits::Limits;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::AccountId;
use crate::queue::account::{account_name, status_reason, AccountStatus};
use crate::queue::plan::LimitSet;
use crate::store::accounts::{self, AccountFilter, AccountRow};
use crate::store::deletion::DeletionRow;

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
    plan: String,
    /// The limits set for this account alone, over its plan's.
    limit_overrides: Value,
    /// Every limit the account is held to: the node's, its plan's over them, its own over those.
    limits: Limits,
}

impl AccountView {
    fn new(state: &Engine, row: AccountRow) -> Self {
        let overrides = LimitSet::stored(&row.limit_overrides).0;
        Self {
            limits: state.plans.resolve(&row.plan, &overrides),
            limit_overrides: overrides.to_json(),
            plan: row.plan,
            id: row.id,
            name: row.name,
            status: row.status,
            status_reason: row.status_reason,
            status_changed_on: row.status_changed_at.map(timestamp),
            created_on: timestamp(row.created_at),
        }
    }
}

/// A page of the accounts (`page`, `per_page`), filtered by `name` (contains, any case), `status` and
/// `plan`.
pub async fn list(state: Data, _: Operated<Read>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let pairs = query_pairs(&req)?;
    if let Some((unknown, _)) =
        pairs.iter().find(|(k, _)| !["name", "status", "plan", "page", "per_page"].contains(&k.as_str()))
    {
        return Err(ApiError::invalid(format!(
            "unknown query parameter {unknown:?}: use name, status, plan, page, per_page"
        )));
    }
    let paging = Paging::parse(&pairs)?;
    let param = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    let filter = AccountFilter {
        name: param("name"),
        status: param("status").map(AccountStatus::parse).transpose()?,
        plan: param("plan"),
    };
    let (rows, total) = accounts::list(&state.pool, &filter, paging.per_page, paging.offset()).await?;
    let views: Vec<_> = rows.into_iter().map(|row| AccountView::new(&state, row)).collect();
    let info = paging.info(views.len(), total);
    Ok(ok_list(views, info))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateAccount {
    name: Option<String>,
    /// The plan it is on; the default plan when left out.
    plan: Option<String>,
    /// Limits for this account alone, over its plan's.
    limit_overrides: Option<Value>,
}

/// Creates an account and its first token, with every scope; the token's text is shown this once.
pub async fn create(state: Data, operated: Operated<Write>, body: ApiJson<CreateAccount>) -> ApiResult<HttpResponse> {
    let body = body.0;
    let name = account_name(body.name.as_deref().unwrap_or_default())?;
    let id = state.create_account(name, body.plan.as_deref(), body.limit_overrides.as_ref()).await?;
    let token = issue_for(&state, id, "owner", &Scope::ALL, Default::default()).await?;
    let account = accounts::get(&state.pool, id).await?.ok_or_else(|| ApiError::not_found("account"))?;
    let view = AccountView::new(&state, account);
    state.audit(id, &operated.actor, Change::new("account", id, "account.create").to(&view)).await;
    state.audit(id, &operated.actor, token_created(&token)).await;
    Ok(ok(json!({ "account": view, "token": token })))
}

pub async fn get(state: Data, _: Operated<Read>, id: PathId<AccountId>) -> ApiResult<HttpResponse> {
    found(&state, accounts::get(&state.pool, id.0).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateAccount {
    name: Option<String>,
    plan: Option<String>,
    /// A JSON merge patch of the account's own limits: a value sets a limit, null removes it.
    limit_overrides: Option<Value>,
}

/// Changes what the body names: the name, the plan, the account's own limits. A change of limits is
/// enforced on every node within about a second.
pub async fn update(
    state: Data,
    operated: Operated<Write>,
    id: PathId<AccountId>,
    body: ApiJson<UpdateAccount>,
) -> ApiResult<HttpResponse> {
    let body = body.0;
    let update = AccountUpdate {
        name: body.name.as_deref().map(account_name).transpose()?,
        plan: body.plan.as_deref(),
        limit_overrides: body.limit_overrides.as_ref(),
    };
    let (before, after) = state.update_account(id.0, update).await?.ok_or_else(|| ApiError::not_found("account"))?;
    let change = Change::new("account", id.0, "account.update").from(changed_part(&before)).to(changed_part(&after));
    state.audit(id.0, &operated.actor, change).await;
    found(&state, Some(after))
}

/// What an update can change, as the audit log records it before and after.
fn changed_part(row: &AccountRow) -> Value {
    json!({ "name": row.name, "plan": row.plan, "limit_overrides": row.limit_overrides })
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
    operated: Operated<Write>,
    id: PathId<AccountId>,
    body: ApiJson<Suspend>,
) -> ApiResult<HttpResponse> {
    let reason = body.0.reason.as_deref().map(status_reason).transpose()?;
    let row = accounts::set_status(&state.pool, id.0, AccountStatus::Suspended, reason).await?;
    if row.is_some() {
        let change =
            Change::new("account", id.0, "account.suspend").to(json!({ "status": "suspended", "reason": reason }));
        state.audit(id.0, &operated.actor, change).await;
    }
    state.refresh_standing().await?;
    changed_status(&state, id.0, row).await
}

/// Resumes a suspended account: it is served again as it was.
pub async fn resume(state: Data, operated: Operated<Write>, id: PathId<AccountId>) -> ApiResult<HttpResponse> {
    let row = accounts::set_status(&state.pool, id.0, AccountStatus::Active, None).await?;
    if row.is_some() {
        let change = Change::new("account", id.0, "account.resume").to(json!({ "status": "active" }));
        state.audit(id.0, &operated.actor, change).await;
    }
    state.refresh_standing().await?;
    changed_status(&state, id.0, row).await
}

/// The account whose status changed; an account deleted (or being deleted) keeps its status.
async fn changed_status(state: &Engine, id: AccountId, row: Option<AccountRow>) -> ApiResult<HttpResponse> {
    if row.is_none() && accounts::exists(&state.pool, id).await? {
        return Err(ApiError::new(
            Kind::Conflict,
            "the account is deleted or being deleted; it can no longer be suspended or resumed",
        ));
    }
    found(state, row)
}

/// A deletion as the operator follows it.
#[derive(Serialize)]
pub struct DeletionView {
    account_id: AccountId,
    /// `deleting` while its data is removed, `deleted` once it all is.
    status: AccountStatus,
    started_on: Option<String>,
    finished_on: Option<String>,
    deleted_queues: i64,
    deleted_messages: i64,
    remaining_queues: i64,
    remaining_messages: i64,
}

impl DeletionView {
    fn new(account_id: AccountId, row: DeletionRow) -> ApiResult<Self> {
        if !matches!(row.status, AccountStatus::Deleting | AccountStatus::Deleted) {
            return Err(ApiError::not_found("deletion of this account (it is not being deleted)"));
        }
        Ok(Self {
            account_id,
            status: row.status,
            started_on: row.started_at.map(timestamp),
            finished_on: row.finished_at.map(timestamp),
            deleted_queues: row.deleted_queues,
            deleted_messages: row.deleted_messages,
            remaining_queues: row.remaining_queues,
            remaining_messages: row.remaining_messages,
        })
    }
}

/// Deletes the account: its tokens at once, its requests refused on every node within about a second,
/// its queues and messages by a background task on any node. Asking again answers how far it went.
pub async fn delete(state: Data, operated: Operated<Write>, id: PathId<AccountId>) -> ApiResult<HttpResponse> {
    let deletion = state.delete_account(id.0).await?;
    state.audit(id.0, &operated.actor, Change::new("account", id.0, "account.delete")).await;
    Ok(ok(DeletionView::new(id.0, deletion)?))
}

/// How far the account's deletion went.
pub async fn deletion(state: Data, _: Operated<Read>, id: PathId<AccountId>) -> ApiResult<HttpResponse> {
    Ok(ok(DeletionView::new(id.0, state.deletion(id.0).await?)?))
}

fn found(state: &Engine, row: Option<AccountRow>) -> ApiResult<HttpResponse> {
    row.map(|row| ok(AccountView::new(state, row))).ok_or_else(|| ApiError::not_found("account"))
}
