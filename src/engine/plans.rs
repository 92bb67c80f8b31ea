//! The limits in force for each account, as this node knows them: the node's configured limits, overlaid
//! by the account's plan and then by its own overrides. Each node reads the limits' version every second
//! and the plans and the accounts with limits of their own only when it moved (the node that made the
//! change at once), so a change is enforced on every node within about a second.

use std::collections::HashMap;
use std::sync::RwLock;

use serde_json::Value;

use super::limits::Limits;
use super::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::AccountId;
use crate::queue::plan::{plan_name, LimitSet, DEFAULT_PLAN};
use crate::store::{self, plans::PlanDeleted, plans::PlanRow};

pub struct PlanBook {
    /// The node's own limits (its SKIPLOCK_* variables), under every plan.
    configured: Limits,
    book: RwLock<Book>,
}

#[derive(Default)]
struct Book {
    /// The version these were read at; None before the first read.
    version: Option<i64>,
    default: Option<Limits>,
    plans: HashMap<String, LimitSet>,
    /// Accounts whose limits are not the default plan's.
    accounts: HashMap<AccountId, Limits>,
}

impl PlanBook {
    pub fn new(configured: Limits) -> Self {
        Self { configured, book: RwLock::default() }
    }

    /// The limits in force for `account`.
    pub fn of(&self, account: AccountId) -> Limits {
        let book = self.book.read().expect("plans lock");
        book.accounts.get(&account).copied().or(book.default).unwrap_or(self.configured)
    }

    /// The limits of an account on `plan` with `overrides`, as this node would enforce them.
    pub fn resolve(&self, plan: &str, overrides: &LimitSet) -> Limits {
        let book = self.book.read().expect("plans lock");
        let on_plan = book.plans.get(plan).map_or(self.configured, |set| self.configured.overlaid(set));
        on_plan.overlaid(overrides)
    }

    /// The node's own limits, under every plan.
    pub fn configured(&self) -> Limits {
        self.configured
    }

    fn version(&self) -> Option<i64> {
        self.book.read().expect("plans lock").version
    }
}

/// A stored set of limits, a value the rules no longer take left out and logged.
fn stored(what: &str, raw: &Value) -> LimitSet {
    let (set, error) = LimitSet::stored(raw);
    if let Some(error) = error {
        tracing::warn!(%error, what, "stored limits break the rules; those values are left out");
    }
    set
}

impl Engine {
    /// Reads the plans and the accounts' own limits again if they changed since this node last read them.
    pub async fn refresh_plans(&self) -> Result<(), sqlx::Error> {
        let version = store::plans::version(&self.pool).await?;
        if self.plans.version() == Some(version) {
            return Ok(());
        }
        let (version, plans, accounts) = store::plans::book(&self.pool).await?;
        let plans: HashMap<String, LimitSet> =
            plans.into_iter().map(|(name, limits)| (name.clone(), stored(&format!("plan {name}"), &limits))).collect();
        let configured = self.plans.configured;
        let on_plan = |plan: &str| plans.get(plan).map_or(configured, |set| configured.overlaid(set));
        let accounts = accounts
            .into_iter()
            .map(|own| {
                let overrides = stored(&format!("account {}", own.account), &own.overrides);
                (own.account, on_plan(&own.plan).overlaid(&overrides))
            })
            .collect();
        let default = Some(on_plan(DEFAULT_PLAN));
        *self.plans.book.write().expect("plans lock") = Book { version: Some(version), default, plans, accounts };
        Ok(())
    }

    /// The limits in force for `account`.
    pub fn limits_of(&self, account: AccountId) -> Limits {
        self.plans.of(account)
    }

    pub async fn plans(&self) -> ApiResult<Vec<PlanRow>> {
        Ok(store::plans::list(&self.pool).await?)
    }

    pub async fn plan(&self, name: &str) -> ApiResult<PlanRow> {
        store::plans::get(&self.pool, name).await?.ok_or_else(plan_not_found)
    }

    /// Makes a plan with `limits` (an object of some of the limits).
    pub async fn create_plan(&self, name: &str, limits: &Value) -> ApiResult<PlanRow> {
        let name = plan_name(name)?;
        let limits = LimitSet::parse("limits", limits)?;
        if !store::plans::create(&self.pool, name, &limits.to_json()).await? {
            return Err(ApiError::new(Kind::Conflict, format!("a plan named {name:?} exists already")));
        }
        self.refresh_plans().await?;
        self.plan(name).await
    }

    /// Changes a plan's limits by a JSON merge patch (a value sets a limit, null removes it). Every
    /// account on the plan is held to the new limits on every node within about a second.
    pub async fn update_plan(&self, name: &str, patch: &Value) -> ApiResult<PlanRow> {
        let plan = self.plan(name).await?;
        let limits = stored(&format!("plan {name}"), &plan.limits).patched("limits", patch)?;
        if !store::plans::set_limits(&self.pool, name, &limits.to_json()).await? {
            return Err(plan_not_found());
        }
        self.refresh_plans().await?;
        self.plan(name).await
    }

    /// Deletes a plan no account is on (the default plan never).
    pub async fn delete_plan(&self, name: &str) -> ApiResult<()> {
        match store::plans::delete(&self.pool, name).await? {
            PlanDeleted::Deleted => Ok(self.refresh_plans().await?),
            PlanDeleted::NotFound => Err(plan_not_found()),
            PlanDeleted::InUse if name == DEFAULT_PLAN => {
                Err(ApiError::new(Kind::Conflict, "the default plan cannot be deleted; change its limits instead"))
            }
            PlanDeleted::InUse => Err(ApiError::new(
                Kind::Conflict,
                format!("accounts are on the plan {name:?}; move them to another plan before deleting it"),
            )),
        }
    }
}

fn plan_not_found() -> ApiError {
    ApiError::not_found("plan")
}
