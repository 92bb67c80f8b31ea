//! Sealing the stored secrets under the current key: at every node's start, those stored in the clear (so a
//! deployment that sets a key for the first time has its secrets sealed before it serves), and by
//! `skiplock secrets rotate`, every one not under the current key (so that, once every node holds the new
//! key, every secret moves to it; a node's start does not, or the first node to start with a new key
//! would lock out the nodes not yet given it). A node without a key refuses a database whose secrets are
//! sealed, since it could sign nothing.

use sqlx::PgPool;

use crate::auth::sealing::{Keyring, Purpose, SealError, SEALED};
use crate::store::sealing::{self as store, StoredSecrets};

/// Consumers sealed again per statement.
const BATCH: i64 = 500;

/// What a pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sealed {
    /// Webhook consumers whose secrets were sealed again under the current key.
    pub consumers: u64,
    /// Whether the lease key was.
    pub lease_key: bool,
}

/// Which stored secrets a pass seals again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reseal {
    /// Those in the clear (a node's start).
    Clear,
    /// Every one not under the current key (a rotation).
    All,
}

/// Seals the stored secrets `which` selects with `keys`' current key; with no current key, checks that no
/// secret is sealed. Safe beside running nodes and other passes: each value is replaced only if unchanged.
pub async fn seal_at_rest(pool: &PgPool, keys: &Keyring, which: Reseal) -> anyhow::Result<Sealed> {
    let mut sealed = Sealed::default();
    // Values that start with this are left as they are; None (no key): only sealed ones are looked at.
    let kept = match which {
        Reseal::Clear => keys.current_prefix().map(|_| SEALED.to_owned()),
        Reseal::All => keys.current_prefix(),
    };
    if let Some(stored) = store::server_key_as_stored(pool).await? {
        let stays = match which {
            Reseal::Clear => stored.starts_with(SEALED.as_bytes()) || keys.current_id().is_none(),
            Reseal::All => keys.is_current(&stored),
        };
        if !stays {
            let plain = keys.open(Purpose::LeaseKey, &stored)?;
            sealed.lease_key = store::reseal_server_key(pool, &stored, &keys.seal(Purpose::LeaseKey, &plain)).await?;
        }
    }
    loop {
        let found = store::consumers_to_seal(pool, kept.as_deref(), BATCH).await?;
        if kept.is_none() {
            // Without a key a sealed secret cannot be opened: say under which key it is.
            for stored in found.iter().take(1) {
                keys.open_text(Purpose::WebhookSecret, &stored.signing_secret)?;
                if let Some(previous) = &stored.previous_signing_secret {
                    keys.open_text(Purpose::WebhookSecret, previous)?;
                }
            }
            return Ok(sealed);
        }
        if found.is_empty() {
            return Ok(sealed);
        }
        // A consumer whose secret was rotated meanwhile has it sealed under the current key already.
        for stored in &found {
            sealed.consumers += u64::from(reseal(pool, keys, stored).await?);
        }
    }
}

/// Seals one consumer's secrets again; false if they changed since they were read (a rotation).
async fn reseal(pool: &PgPool, keys: &Keyring, stored: &StoredSecrets) -> anyhow::Result<bool> {
    let open = |value: &str| -> Result<String, SealError> {
        let plain = keys.open_text(Purpose::WebhookSecret, value)?;
        Ok(keys.seal_text(Purpose::WebhookSecret, &plain))
    };
    let current = open(&stored.signing_secret)?;
    let previous = stored.previous_signing_secret.as_deref().map(open).transpose()?;
    Ok(store::reseal_consumer(pool, stored, (&current, previous.as_deref())).await?)
}
