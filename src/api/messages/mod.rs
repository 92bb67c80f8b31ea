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
pub use publish::{prepare_batch, publish, publish_batch, say_held_back, PublishMessage};
pub use pull::pull;
