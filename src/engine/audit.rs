//! The audit log: who changed what in an account's configuration, from where, and how. The HTTP layers
//! say who asks (`Actor`) and what changed (`Change`) once a change is made; the entry is written after
//! it, so a change never waits on or fails for its entry, and an entry that cannot be written is logged.
//! Messages published, pulled or acked are not audited: the message path writes nothing here.

use std::net::IpAddr;

use serde_json::Value;
use uuid::Uuid;

use super::Engine;
use crate::error::ApiResult;
use crate::ids::AccountId;
use crate::store::{self, audit::AuditFilter, audit::AuditRow, audit::NewEntry};

/// How long entries are kept.
pub const KEPT_DAYS: i32 = 90;
/// Entries pruned per statement.
const PRUNE_BATCH: i64 = 5_000;

/// Who made a change: an account's token or an operator's, from which address, in which request.
#[derive(Debug, Clone)]
pub struct Actor {
    pub operator: bool,
    pub token_id: Uuid,
    pub ip: Option<IpAddr>,
    pub request_id: Option<String>,
}

/// What changed: the resource, the action (`queue.create`, `account.suspend`, ...), and its settings
/// before and after where there are any (as the API shows them, so never a secret).
#[derive(Debug, Clone)]
pub struct Change {
    pub resource_type: &'static str,
    pub resource_id: Option<String>,
    pub action: &'static str,
    pub old_value: Option<Value>,
    pub new_value: Option<Value>,
}

impl Change {
    pub fn new(resource_type: &'static str, resource_id: impl ToString, action: &'static str) -> Self {
        let resource_id = Some(resource_id.to_string());
        Self { resource_type, resource_id, action, old_value: None, new_value: None }
    }

    pub fn from(mut self, old: impl serde::Serialize) -> Self {
        self.old_value = serde_json::to_value(old).ok();
        self
    }

    pub fn to(mut self, new: impl serde::Serialize) -> Self {
        self.new_value = serde_json::to_value(new).ok();
        self
    }
}

impl Engine {
    /// Records `change` to `account`'s configuration, made by `actor`.
    pub async fn audit(&self, account: AccountId, actor: &Actor, change: Change) {
        let entry = NewEntry {
            account,
            actor_type: if actor.operator { "operator" } else { "token" },
            actor_id: actor.token_id,
            actor_ip: actor.ip.map(|ip| ip.to_string()),
            request_id: actor.request_id.as_deref(),
            resource_type: change.resource_type,
            resource_id: change.resource_id,
            action: change.action,
            old_value: change.old_value.as_ref(),
            new_value: change.new_value.as_ref(),
        };
        if let Err(error) = store::audit::record(&self.pool, &entry).await {
            tracing::error!(%error, %account, action = change.action, "an audit log entry was not written");
        }
    }

    /// A page of the entries that pass `filter`, and how many pass in all.
    pub async fn audit_logs(
        &self,
        filter: &AuditFilter<'_>,
        limit: i64,
        offset: i64,
    ) -> ApiResult<(Vec<AuditRow>, i64)> {
        Ok(store::audit::list(&self.pool, filter, limit, offset).await?)
    }
}

/// Deletes entries older than `KEPT_DAYS`; part of the retention upkeep.
pub async fn prune(pool: &sqlx::PgPool) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    loop {
        let gone = store::audit::prune(pool, KEPT_DAYS, PRUNE_BATCH).await?;
        total += gone;
        if gone < PRUNE_BATCH as u64 {
            return Ok(total);
        }
    }
}
