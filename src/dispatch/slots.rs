//! The upkeep of the dispatch slots this node holds (`engine::slots`): their rows are held for a lease's
//! length and renewed well before it runs out, and a slot that lay idle for `LINGER` is given back, for
//! another node to take. A node that dies stops renewing: its slots come free when their hold runs out.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::Dispatcher;
use crate::engine::slots::LINGER;
use crate::ids::ConsumerId;
use crate::store;

/// How often idle slots are looked for.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(1);

impl Dispatcher {
    /// Gives back the slots idle for `LINGER` (or over their consumer's `max_concurrency`) and, when due,
    /// renews the others; forgets those another node took meanwhile.
    pub(super) async fn keep_slots(&self, max: &HashMap<ConsumerId, i32>, renew: bool) -> Result<(), sqlx::Error> {
        let pools: Vec<_> = self.slots.lock().expect("slots lock").values().cloned().collect();
        let idle_since = Instant::now() - LINGER;
        let (mut consumers, mut numbers) = (Vec::new(), Vec::new());
        for pool in &pools {
            // A consumer no longer active here (deleted, paused) has a max of 0: all its free slots go.
            let max = max.get(&pool.consumer).copied().unwrap_or(0);
            for slot in pool.idle(idle_since, max) {
                consumers.push(pool.consumer);
                numbers.push(slot);
            }
        }
        if !numbers.is_empty() {
            store::dispatch::give_back_slots(&self.engine.pool, self.node, &consumers, &numbers).await?;
        }
        // An active consumer's pool stays even when it holds nothing: its worker may be taking a slot from
        // the database right now, into this pool, and a pool dropped meanwhile would leave that slot held
        // with no one to use, renew or give it back until its hold ran out (delivery stalled for a lease).
        self.slots.lock().expect("slots lock").retain(|id, pool| pool.held() > 0 || max.contains_key(id));
        if renew {
            let held: Vec<(ConsumerId, i32)> =
                pools.iter().flat_map(|p| p.all().into_iter().map(|slot| (p.consumer, slot))).collect();
            if held.is_empty() {
                return Ok(());
            }
            let (consumers, numbers): (Vec<_>, Vec<_>) = held.iter().copied().unzip();
            let hold_ms = self.lease().as_millis() as i64;
            let kept =
                store::dispatch::renew_slots(&self.engine.pool, self.node, &consumers, &numbers, hold_ms).await?;
            for pool in &pools {
                let lost: Vec<i32> = held
                    .iter()
                    .filter(|(c, slot)| *c == pool.consumer && !kept.contains(&(*c, *slot)))
                    .map(|(_, slot)| *slot)
                    .collect();
                if !lost.is_empty() {
                    tracing::warn!(consumer = %pool.consumer, slots = ?lost, "dispatch slots were taken by another node after their hold ran out");
                    pool.lost(&lost);
                }
            }
        }
        Ok(())
    }

    /// Gives back every slot this node holds (the dispatcher stopping, its deliveries over).
    pub(super) async fn give_back_all_slots(&self) {
        let pools: Vec<_> = self.slots.lock().expect("slots lock").drain().map(|(_, pool)| pool).collect();
        let held: Vec<(ConsumerId, i32)> =
            pools.iter().flat_map(|p| p.all().into_iter().map(|slot| (p.consumer, slot))).collect();
        let (consumers, numbers): (Vec<_>, Vec<_>) = held.into_iter().unzip();
        if let Err(err) = store::dispatch::give_back_slots(&self.engine.pool, self.node, &consumers, &numbers).await {
            tracing::warn!(error = %err, "giving dispatch slots back failed; their hold runs out by itself");
        }
    }
}
