//! The rotation of the message generations (`store::generations`): the space of messages that are gone
//! is reclaimed by truncating a whole young generation once it holds nothing, which no snapshot held open
//! elsewhere in the database can hold back, where vacuum can reclaim nothing while one lives
//! (docs/design-notes.md, "Delivery beside a held snapshot"); the queue count deltas take the same turns.
//! Every node turns it; one at a time does.

use std::time::Duration;

use super::Engine;
use crate::store::counts;
use crate::store::generations::{self, Generation};

/// How the generations turn.
#[derive(Debug, Clone, Copy)]
pub struct Rotation {
    /// How long a generation stays current before an empty one takes its place.
    pub every: Duration,
    /// How long a draining generation waits before its remaining messages move to the old generation
    /// (a message that lives that long is one that waits: delayed far ahead, or in a backlog).
    pub move_after: Duration,
    /// A draining generation holding more messages than this is a backlog being consumed: it is left to
    /// drain rather than copied.
    pub most_moved: i64,
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation { every: Duration::from_secs(10), move_after: Duration::from_secs(30), most_moved: 10_000 }
    }
}

/// Messages moved per statement.
const MOVE_BATCH: i64 = 1_000;
/// How long a truncation or a move waits for the generation's tables before trying again at the next turn.
const LOCK_TIMEOUT_MS: u32 = 20;

/// What one turn did.
#[derive(Debug, PartialEq)]
pub enum Turn {
    /// Another node turns the rotation now.
    Busy,
    Nothing,
    Switched {
        to: i16,
    },
    Truncated(i16),
    Moved {
        from: i16,
        count: u64,
    },
}

impl Engine {
    /// One turn of the rotation: a draining generation that holds nothing is truncated; one that has
    /// drained long enough has its last few messages moved to the old generation; and a current one old
    /// enough gives way to an empty one.
    pub async fn rotate(&self, rotation: Rotation) -> Result<Turn, sqlx::Error> {
        self.fold_count_deltas().await?;
        let mut tx = self.pool.begin().await?;
        let Some(young) = generations::take(&mut tx).await? else { return Ok(Turn::Busy) };
        let state = |s: &str| young.iter().find(|g| g.state == s).cloned();
        let turn = match (state("current"), state("draining"), state("empty")) {
            (_, Some(draining), _) => self.drain(&mut tx, &draining, rotation).await?,
            (Some(current), None, Some(empty)) if current.age_seconds >= rotation.every.as_secs_f64() => {
                generations::switch(&mut tx, current.gen, empty.gen).await?;
                Turn::Switched { to: empty.gen }
            }
            _ => Turn::Nothing,
        };
        tx.commit().await?;
        Ok(turn)
    }

    /// The count deltas' half of the clock's other 10 s step is written to no more: folded and truncated
    /// once (`store::counts::fold_and_truncate`), in a transaction of its own, so that the half's lock
    /// and the usage it adds are not held through the generations' turn. Any node can try at once: the
    /// lock lets one fold, and the others find the half in use, or empty.
    async fn fold_count_deltas(&self) -> Result<(), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let folded = counts::fold_and_truncate(&mut tx, LOCK_TIMEOUT_MS).await?;
        tx.commit().await?;
        if let Some((_, usage)) = folded {
            super::usage::count_folded(&self.metrics, &usage);
        }
        Ok(())
    }

    async fn drain(
        &self,
        tx: &mut sqlx::PgConnection,
        draining: &Generation,
        rotation: Rotation,
    ) -> Result<Turn, sqlx::Error> {
        if generations::truncate_if_empty(tx, draining.gen, LOCK_TIMEOUT_MS).await? {
            return Ok(Turn::Truncated(draining.gen));
        }
        if draining.age_seconds < rotation.move_after.as_secs_f64()
            || generations::holds(tx, draining.gen, rotation.most_moved).await? > rotation.most_moved
        {
            return Ok(Turn::Nothing);
        }
        let count = generations::move_to_old(tx, draining.gen, MOVE_BATCH, LOCK_TIMEOUT_MS).await?;
        Ok(Turn::Moved { from: draining.gen, count })
    }
}
