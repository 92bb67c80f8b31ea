//! The sweep of leases that ran out: a message whose lease runs out without an answer is made claimable
//! again by the node that next sweeps (its lease stays current for an ack, an extension or a retry until
//! it is claimed again), and whoever waits on its queue is woken. Claims walk only messages that wait,
//! so this is what brings a lease that ran out back to them.

use super::Engine;
use crate::store;

/// Messages made claimable per statement; a sweep that finds this many goes on at once.
const SWEEP_BATCH: i64 = 1000;

impl Engine {
    pub(super) async fn sweep_leases_that_ran_out(&self) -> Result<(), sqlx::Error> {
        let floors = &self.delivery.floors;
        loop {
            let bound = floors.bound();
            let swept = store::messages::sweep_ran_out(&self.pool, floors.running(), SWEEP_BATCH).await?;
            floors.swept(bound, swept.first_running);
            if !swept.queues.is_empty() {
                self.metrics.leases_ran_out.inc_by(swept.count as u64);
                store::messages::wake(&self.pool, &swept.queues, true).await?;
            }
            if (swept.count as i64) < SWEEP_BATCH {
                return Ok(());
            }
        }
    }
}
