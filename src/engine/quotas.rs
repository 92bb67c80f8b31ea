//! Quotas per plan, as this node enforces them: which accounts have used up a quota (`queue::quota`).
//! Every few seconds each node reads what the accounts it has served with quotas have used (the folded
//! usage, and the bytes their queues store), so an account is held within seconds of reaching a quota,
//! and let go when it resets or frees bytes. Accounts without quotas cost nothing here.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::AccountId;
use crate::queue::plan::Limits;
use crate::queue::quota::{self, Exceeded, Quota, Used};
use crate::store;

/// How often each node reads what its accounts with quotas have used.
pub const QUOTAS_EVERY: Duration = Duration::from_secs(5);

/// A crossing told: the account, the quota, the percent and the start of its period.
type Told = (AccountId, Quota, i16, DateTime<Utc>);

#[derive(Default)]
pub struct Quotas {
    /// Accounts with quotas this node served since its last read; read again at the next.
    served: Mutex<HashSet<AccountId>>,
    /// What each account with quotas that this node serves has used, as last read; held against its
    /// limits at each request, so that a quota raised or removed lets it go at once.
    used: RwLock<HashMap<AccountId, Used>>,
    /// The crossings this node has recorded (or found recorded), by account, quota, percent and period,
    /// so that each is written once.
    told: Mutex<HashSet<Told>>,
}

impl Quotas {
    fn refusal(&self, account: AccountId, limits: &Limits, adds_bytes: bool) -> Option<Exceeded> {
        let used = *self.used.read().expect("quotas lock").get(&account)?;
        quota::exceeded(limits, &used, Utc::now()).into_iter().find(|e| adds_bytes || e.quota.holds_reads())
    }
}

/// An account's standing against its quotas, as the tenant sees it.
#[derive(Debug, Clone)]
pub struct QuotaStanding {
    pub used: Used,
    pub day_resets_at: DateTime<Utc>,
    pub month_resets_at: DateTime<Utc>,
}

impl Engine {
    /// Refuses a request of `account` that would add operations (`adds_bytes`: and stored bytes) while it
    /// has used up a quota that holds it, with a 429 that says which and when it resets.
    pub fn check_quotas(&self, account: AccountId, adds_bytes: bool) -> ApiResult<()> {
        let limits = self.limits_of(account);
        if !quota::any(&limits) {
            return Ok(());
        }
        self.quotas.served.lock().expect("quotas lock").insert(account);
        match self.quotas.refusal(account, &limits, adds_bytes) {
            None => Ok(()),
            Some(exceeded) => {
                self.metrics.quota_refusals.with_label_values(&[exceeded.quota.name()]).inc();
                let wait = exceeded.resets_at.map_or(60, |at| (at - Utc::now()).num_seconds().max(1) as u64);
                Err(ApiError::new(Kind::QuotaExceeded, exceeded.message()).after(wait))
            }
        }
    }

    /// Reads again what the accounts served since the last read, and those held back, have used; another
    /// account is forgotten until its next request.
    pub async fn refresh_quotas(&self) -> Result<(), sqlx::Error> {
        let now = Utc::now();
        let mut accounts: HashSet<AccountId> = std::mem::take(&mut *self.quotas.served.lock().expect("quotas lock"));
        let held = self
            .quotas
            .used
            .read()
            .expect("quotas lock")
            .iter()
            .filter_map(|(account, used)| {
                let over = !quota::exceeded(&self.limits_of(*account), used, now).is_empty();
                over.then_some(*account)
            })
            .collect::<Vec<_>>();
        accounts.extend(held);
        let accounts: Vec<AccountId> = accounts.into_iter().collect();
        let used = if accounts.is_empty() {
            Vec::new()
        } else {
            store::usage::quota_used(&self.pool, &accounts, quota::day_start(now), quota::month_start(now)).await?
        };
        for (account, used) in &used {
            self.tell_crossings(*account, used, now).await?;
        }
        *self.quotas.used.write().expect("quotas lock") = used.into_iter().collect();
        Ok(())
    }

    /// Records `quota.warning` at 80% of a quota and `quota.exceeded` at 100%, once per quota and period
    /// across the nodes, for the account's subscriptions that ask for them.
    async fn tell_crossings(&self, account: AccountId, used: &Used, now: DateTime<Utc>) -> Result<(), sqlx::Error> {
        for crossing in quota::crossings(&self.limits_of(account), used, now) {
            let key = (account, crossing.quota, crossing.percent, crossing.period_start);
            if self.quotas.told.lock().expect("quotas lock").contains(&key) {
                continue;
            }
            let event = if crossing.percent >= 100 { "quota.exceeded" } else { "quota.warning" };
            let resets_at = match crossing.quota {
                Quota::OperationsPerDay => Some(quota::next_day(now)),
                Quota::OperationsPerMonth => Some(quota::next_month(now)),
                Quota::StoredBytes => None,
            };
            let payload = serde_json::json!({
                "quota": crossing.quota.name(),
                "percent": crossing.percent,
                "limit": crossing.limit,
                "used": crossing.used,
                "resetsAt": resets_at.map(crate::queue::event::timestamp),
            });
            let name = crossing.quota.name();
            store::events::record_quota(
                &self.pool,
                account,
                name,
                crossing.period_start,
                crossing.percent,
                event,
                &payload,
            )
            .await?;
            let mut told = self.quotas.told.lock().expect("quotas lock");
            // Crossings of periods past are forgotten, so that the set stays as small as the accounts held.
            told.retain(|(_, _, _, period_start)| *period_start >= quota::month_start(now));
            told.insert(key);
        }
        Ok(())
    }

    /// What the account has used of its quotas now (folded usage), and when each resets.
    pub async fn quota_standing(&self, account: AccountId) -> ApiResult<QuotaStanding> {
        let now = Utc::now();
        let used = store::usage::quota_used(&self.pool, &[account], quota::day_start(now), quota::month_start(now))
            .await?
            .pop()
            .map(|(_, used)| used)
            .unwrap_or_default();
        Ok(QuotaStanding { used, day_resets_at: quota::next_day(now), month_resets_at: quota::next_month(now) })
    }
}
