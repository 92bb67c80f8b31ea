//! The operator's changes to an account that the engine holds it to: its plan and its own limits, read
//! again at once on the node that made the change (the others read them within about a second).

use serde_json::Value;

use super::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::AccountId;
use crate::queue::plan::{plan_name, LimitSet};
use crate::store::{self, accounts::AccountChange, accounts::AccountRow};

/// What the operator asks to change: each part given is changed, the others kept.
#[derive(Debug, Default)]
pub struct AccountUpdate<'a> {
    pub name: Option<&'a str>,
    pub plan: Option<&'a str>,
    /// A JSON merge patch of the account's own limits: a value sets a limit, null removes it.
    pub limit_overrides: Option<&'a Value>,
}

impl Engine {
    /// Makes an account on `plan` (the default plan when None) with its own `limit_overrides`.
    pub async fn create_account(
        &self,
        name: &str,
        plan: Option<&str>,
        limit_overrides: Option<&Value>,
    ) -> ApiResult<AccountId> {
        let plan = plan.map(plan_name).transpose()?.unwrap_or(crate::queue::plan::DEFAULT_PLAN);
        let overrides = limit_overrides.map(|raw| LimitSet::parse("limit_overrides", raw)).transpose()?;
        let mut tx = self.pool.begin().await?;
        let id = store::accounts::create(&mut *tx, name, plan).await.map_err(|e| no_such_plan(e, plan))?;
        if let Some(overrides) = overrides.filter(|o| !o.is_empty()) {
            let change = AccountChange { limit_overrides: Some(&overrides.to_json()), ..Default::default() };
            store::accounts::update(&mut *tx, id, &change).await?;
        }
        tx.commit().await?;
        self.refresh_plans().await?;
        Ok(id)
    }

    /// Changes an account: the account as it was and as it is now, or None when there is no such account.
    pub async fn update_account(
        &self,
        id: AccountId,
        update: AccountUpdate<'_>,
    ) -> ApiResult<Option<(AccountRow, AccountRow)>> {
        let plan = update.plan.map(plan_name).transpose()?;
        let Some(before) = store::accounts::get(&self.pool, id).await? else { return Ok(None) };
        let overrides = match update.limit_overrides {
            None => None,
            Some(patch) => {
                let current = LimitSet::stored(&before.limit_overrides).0;
                Some(current.patched("limit_overrides", patch)?.to_json())
            }
        };
        let change = AccountChange { name: update.name, plan, limit_overrides: overrides.as_ref() };
        let after = store::accounts::update(&self.pool, id, &change)
            .await
            .map_err(|e| no_such_plan(e, plan.unwrap_or_default()))?;
        if plan.is_some() || overrides.is_some() {
            self.refresh_plans().await?;
        }
        Ok(after.map(|after| (before, after)))
    }
}

/// A plan the account was to be put on that does not exist is the caller's to fix.
fn no_such_plan(error: sqlx::Error, plan: &str) -> ApiError {
    match &error {
        sqlx::Error::Database(e) if e.is_foreign_key_violation() => {
            ApiError::invalid(format!("plan: there is no plan named {plan:?}; create it first (POST /admin/v1/plans)"))
        }
        _ => error.into(),
    }
}
