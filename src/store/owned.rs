//! Tenancy as a type. An `OwnedQueue` is a queue with the account that owns it, made only in `store/`
//! where that pair was read from the database: by a look-up scoped to the account (`Owners::resolve`),
//! or from a row that carries both (a webhook consumer the dispatcher read). Every store function that
//! reads or writes a queue's messages, consumers or leases takes one, so none can be handed a bare queue
//! id that its caller forgot to check against the account.

use std::collections::HashMap;
use std::sync::Mutex;

use sqlx::PgExecutor;

use crate::ids::{AccountId, QueueId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnedQueue {
    account: AccountId,
    queue: QueueId,
}

impl OwnedQueue {
    /// Only `store/` vouches for a pair.
    pub(in crate::store) fn vouched(account: AccountId, queue: QueueId) -> Self {
        OwnedQueue { account, queue }
    }

    /// A pair for the unit tests of the layers above, which have no database to vouch for it.
    #[cfg(test)]
    pub fn for_tests(account: AccountId, queue: QueueId) -> Self {
        OwnedQueue { account, queue }
    }

    pub fn account(&self) -> AccountId {
        self.account
    }

    pub fn id(&self) -> QueueId {
        self.queue
    }
}

/// The most owners a node remembers; past it, the memory starts again (a look-up costs one query).
const CAPACITY: usize = 100_000;

/// Which account owns each queue, as this node has read it. A queue never changes hands, so an answer
/// stays true for as long as the queue exists, and a statement on a queue deleted since finds nothing:
/// the owner is read once per queue, not once per request.
#[derive(Default)]
pub struct Owners {
    known: Mutex<HashMap<QueueId, AccountId>>,
}

impl Owners {
    /// The account's queue `queue`, or None when it has no such queue (another account's is None too).
    pub async fn resolve(
        &self,
        db: impl PgExecutor<'_>,
        account: AccountId,
        queue: QueueId,
    ) -> Result<Option<OwnedQueue>, sqlx::Error> {
        let known = self.known.lock().expect("owners lock").get(&queue).copied();
        let owner = match known {
            Some(owner) => Some(owner),
            None => {
                let owner = sqlx::query_scalar!(
                    r#"select account_id as "account_id: AccountId" from queues where id = $1 and parent_queue_id is null"#,
                    queue.0
                )
                .fetch_optional(db)
                .await?;
                if let Some(owner) = owner {
                    let mut known = self.known.lock().expect("owners lock");
                    if known.len() >= CAPACITY {
                        known.clear();
                    }
                    known.insert(queue, owner);
                }
                owner
            }
        };
        Ok((owner == Some(account)).then(|| OwnedQueue::vouched(account, queue)))
    }

    /// Forgets a queue this node deleted, so that its next request here is a 404 without a statement.
    pub fn forget(&self, queue: QueueId) {
        self.known.lock().expect("owners lock").remove(&queue);
    }
}
