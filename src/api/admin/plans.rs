//! The operator's plans: named sets of limits that accounts are on. A plan sets some limits; the others are
//! the node's configured ones (the SKIPLOCK_* variables), which the `default` plan starts with.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::extract::{Operated, Read, Write};
use crate::api::envelope::{ok, ApiJson};
use crate::api::views::timestamp;
use crate::engine::limits::Limits;
use crate::engine::Engine;
use crate::error::ApiResult;
use crate::queue::plan::LimitSet;
use crate::store::plans::PlanRow;

type Data = web::Data<Engine>;

/// A plan as the operator sees it.
#[derive(Serialize)]
pub struct PlanView {
    name: String,
    /// The limits the plan sets.
    limits: Value,
    /// Every limit an account on the plan is held to, those the plan leaves out filled in from the
    /// answering node's configuration.
    effective_limits: Limits,
    /// How many accounts are on it.
    accounts: i64,
    created_on: String,
    modified_on: String,
}

impl PlanView {
    fn new(state: &Engine, row: PlanRow) -> Self {
        let set = LimitSet::stored(&row.limits).0;
        Self {
            effective_limits: state.plans.configured().overlaid(&set),
            limits: set.to_json(),
            name: row.name,
            accounts: row.accounts,
            created_on: timestamp(row.created_at),
            modified_on: timestamp(row.modified_at),
        }
    }
}

pub async fn list(state: Data, _: Operated<Read>) -> ApiResult<HttpResponse> {
    let plans: Vec<_> = state.plans().await?.into_iter().map(|row| PlanView::new(&state, row)).collect();
    Ok(ok(plans))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreatePlan {
    name: String,
    #[serde(default = "no_limits")]
    limits: Value,
}

fn no_limits() -> Value {
    Value::Object(Map::new())
}

pub async fn create(state: Data, _: Operated<Write>, body: ApiJson<CreatePlan>) -> ApiResult<HttpResponse> {
    let row = state.create_plan(&body.0.name, &body.0.limits).await?;
    Ok(ok(PlanView::new(&state, row)))
}

pub async fn get(state: Data, _: Operated<Read>, name: web::Path<String>) -> ApiResult<HttpResponse> {
    let row = state.plan(&name).await?;
    Ok(ok(PlanView::new(&state, row)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdatePlan {
    /// A JSON merge patch of the plan's limits: a value sets a limit, null removes it.
    #[serde(default = "no_limits")]
    limits: Value,
}

pub async fn update(
    state: Data,
    _: Operated<Write>,
    name: web::Path<String>,
    body: ApiJson<UpdatePlan>,
) -> ApiResult<HttpResponse> {
    let row = state.update_plan(&name, &body.0.limits).await?;
    Ok(ok(PlanView::new(&state, row)))
}

pub async fn delete(state: Data, _: Operated<Write>, name: web::Path<String>) -> ApiResult<HttpResponse> {
    state.delete_plan(&name).await?;
    Ok(ok(Value::Null))
}
