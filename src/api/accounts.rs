//! Who a token is: the account endpoints clients call to find their account from a token alone
//! (`/memberships`, `/accounts`), and `/user`, which an account's token cannot use.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::json;

use super::envelope::{ok, ok_list};
use super::paging::Paging;
use super::views::timestamp;
use crate::api::extract::{Authed, TokenOnly};
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::AccountId;
use crate::store::{self, accounts::AccountRow};

type Data = web::Data<Engine>;

/// Cloudflare's Account object, with the settings every account here has.
#[derive(Serialize)]
struct AccountView {
    id: AccountId,
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    settings: serde_json::Value,
    created_on: String,
}

impl AccountView {
    fn new(row: &AccountRow) -> Self {
        Self {
            id: row.id,
            name: row.name.clone(),
            kind: "standard",
            settings: json!({
                "enforce_twofactor": false,
                "api_access_enabled": null,
                "use_account_custom_ns_by_default": false,
                "abuse_contact_email": null,
            }),
            created_on: timestamp(row.created_at),
        }
    }
}

async fn own_account(state: &Engine, account: AccountId) -> ApiResult<AccountRow> {
    // The token was just verified, so its account exists unless it was deleted a moment ago.
    store::accounts::get(&state.pool, account)
        .await?
        .ok_or_else(|| ApiError::new(Kind::Unauthorized, "invalid or revoked API token"))
}

/// `GET /accounts`: the token's one account, paged as any list (page 2 is empty), so that the SDKs'
/// auto-pagination ends.
pub async fn list(state: Data, auth: Authed<TokenOnly>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let paging = Paging::of(&req)?;
    let account = own_account(&state, auth.account_id()).await?;
    let (page, info) = paging.page_of(vec![AccountView::new(&account)]);
    Ok(ok_list(page, info))
}

/// `GET /accounts/{account_id}`.
pub async fn get(state: Data, auth: Authed<TokenOnly>) -> ApiResult<HttpResponse> {
    Ok(ok(AccountView::new(&own_account(&state, auth.account_id()).await?)))
}

/// `GET /accounts/{id}/limits` (a skiplock extension): the account's plan and every limit it is held to,
/// and what it has used of its quotas, so that a client can pace itself and a user can see why a request
/// was held back. The limits are those this node enforces, so that what the answer says is what the next
/// request meets.
pub async fn limits(state: Data, auth: Authed<TokenOnly>) -> ApiResult<HttpResponse> {
    let account = own_account(&state, auth.account_id()).await?;
    let limits = state.limits_of(auth.account_id());
    let standing = state.quota_standing(auth.account_id()).await?;
    // A quota of 0 is none: shown as null, so that a client never reads it as a limit of nothing.
    let limit = |value: i64| (value > 0).then_some(value);
    let quotas = json!({
        "operations_today": {
            "used": standing.used.operations_today,
            "limit": limit(limits.max_operations_per_day),
            "resets_at": timestamp(standing.day_resets_at),
        },
        "operations_this_month": {
            "used": standing.used.operations_this_month,
            "limit": limit(limits.max_operations_per_month),
            "resets_at": timestamp(standing.month_resets_at),
        },
        "stored_bytes": { "used": standing.used.stored_bytes, "limit": limit(limits.max_stored_bytes) },
    });
    Ok(ok(json!({ "plan": account.plan, "limits": limits, "quotas": quotas })))
}

/// `GET /memberships`: the token's account as an accepted membership, the shape wrangler reads; paged as
/// `GET /accounts`.
pub async fn memberships(state: Data, auth: Authed<TokenOnly>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let paging = Paging::of(&req)?;
    let account = own_account(&state, auth.account_id()).await?;
    let scopes: Vec<&str> = auth.principal.scopes.iter().map(|s| s.as_str()).collect();
    let membership = json!({
        "id": account.id,
        "status": "accepted",
        "api_access_enabled": null,
        "account": AccountView::new(&account),
        "roles": [],
        "permissions": {"queues": {"read": scopes.contains(&"queues_read"), "write": scopes.contains(&"queues_write")}},
    });
    let (page, info) = paging.page_of(vec![membership]);
    Ok(ok_list(page, info))
}

/// `GET /user`: tokens here belong to accounts, and Cloudflare answers those with 9109 (wrangler's
/// `whoami` expects it and then lists the memberships).
pub async fn user(_auth: Authed<TokenOnly>) -> ApiResult<HttpResponse> {
    Err(ApiError::new(
        Kind::NotAUserToken,
        "Valid user-level authentication not found: this token belongs to an account, not a user",
    ))
}
