//! Reading the audit log, in Cloudflare's audit-log shape and filters: an account's own with its token
//! (`GET /accounts/{id}/audit_logs`), and every account's with an operator token
//! (`GET /admin/v1/audit_logs`, filtered by `account_id`).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::{json, Value};

use super::admin::extract::{Operated, Read};
use super::envelope::ok_list;
use super::extract::{Authed, TokenOnly};
use super::paging::{only_known, param, query_pairs, time_param, Paging};
use super::views::timestamp;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::AccountId;
use crate::store::audit::{AuditFilter, AuditRow};

type Data = web::Data<Engine>;

/// One entry, as Cloudflare's audit logs show one.
#[derive(Serialize)]
struct AuditView {
    id: String,
    action: Value,
    actor: Value,
    interface: &'static str,
    metadata: Value,
    #[serde(rename = "oldValueJson")]
    old_value_json: Option<Value>,
    #[serde(rename = "newValueJson")]
    new_value_json: Option<Value>,
    owner: Value,
    resource: Value,
    when: String,
}

impl AuditView {
    fn new(row: AuditRow) -> Self {
        let parse = |text: Option<String>| text.and_then(|t| serde_json::from_str(&t).ok());
        Self {
            id: row.id.to_string(),
            action: json!({ "type": row.action, "result": true }),
            actor: json!({ "id": row.actor_id.simple().to_string(), "type": row.actor_type, "ip": row.actor_ip }),
            interface: "API",
            metadata: json!({ "request_id": row.request_id }),
            old_value_json: parse(row.old_value),
            new_value_json: parse(row.new_value),
            owner: json!({ "id": row.account_id }),
            resource: json!({ "type": row.resource_type, "id": row.resource_id }),
            when: timestamp(row.at),
        }
    }
}

/// The filters both reads take; `extra` names the one more the read allows (the operator's `account_id`).
fn filter<'a>(pairs: &'a [(String, String)], extra: &[&str]) -> ApiResult<(AuditFilter<'a>, Paging)> {
    let known = ["since", "before", "action.type", "direction", "page", "per_page"];
    let mut all: Vec<&str> = known.to_vec();
    all.extend(extra);
    only_known(pairs, &all)?;
    let param = |key: &str| param(pairs, key);
    let time = |key: &str| time_param(pairs, key);
    let oldest_first = match param("direction") {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(other) => return Err(ApiError::invalid(format!("direction must be asc or desc, got {other:?}"))),
    };
    let filter = AuditFilter {
        account: None,
        since: time("since")?,
        before: time("before")?,
        action: param("action.type"),
        oldest_first,
    };
    Ok((filter, Paging::parse(pairs)?))
}

async fn page(state: &Engine, filter: &AuditFilter<'_>, paging: Paging) -> ApiResult<HttpResponse> {
    let (rows, total) = state.audit_logs(filter, paging.per_page, paging.offset()).await?;
    let views: Vec<AuditView> = rows.into_iter().map(AuditView::new).collect();
    let info = paging.info(views.len(), total);
    Ok(ok_list(views, info))
}

/// `GET /accounts/{id}/audit_logs`: the account's own entries, newest first.
pub async fn list(state: Data, auth: Authed<TokenOnly>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let pairs = query_pairs(&req)?;
    let (mut filter, paging) = filter(&pairs, &[])?;
    filter.account = Some(auth.account_id());
    page(&state, &filter, paging).await
}

/// `GET /admin/v1/audit_logs`: every account's entries, or one account's with `account_id`.
pub async fn list_all(state: Data, _: Operated<Read>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let pairs = query_pairs(&req)?;
    let (mut filter, paging) = filter(&pairs, &["account_id"])?;
    if let Some((_, raw)) = pairs.iter().find(|(k, _)| k == "account_id") {
        let account = raw.parse::<AccountId>().map_err(|e| ApiError::invalid(format!("account_id: {e}")))?;
        filter.account = Some(account);
    }
    page(&state, &filter, paging).await
}
