//! Message endpoints: publish (single and batch), pull, ack/retry, lease extension, peek and purge by ref.

mod ack;
mod extend;
mod inspect;
mod publish;
mod pull;
mod view;

pub use ack::ack;
pub use extend::extend;
pub use inspect::{peek, purge, RefItem};
pub use publish::{publish, publish_batch};
pub use pull::pull;

use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::AccountId;
use crate::store::{self, consumers::DeliveryTarget};

use super::queues::queue_id;

/// The queue's delivery settings, or a 404 for a queue the account does not have.
pub(super) async fn delivery_target(state: &Engine, account: AccountId, raw_queue: &str) -> ApiResult<DeliveryTarget> {
    let id = queue_id(raw_queue)?;
    store::consumers::delivery_target(&state.pool, account, id).await?.ok_or_else(ApiError::queue_not_found)
}
