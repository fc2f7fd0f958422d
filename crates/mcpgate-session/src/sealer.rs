//! The sealer: the state behind sealed session ids, shared by every session of a table —
//! the key ring (swapped whole on reload), the lifetime of a stateless upstream's ids, and
//! the ids this replica saw deleted. The operations on sessions are in `sealed.rs`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use dashmap::DashMap;
use mcpgate_seal::KeyRing;

/// The key ring (swapped whole on reload) and what bounds stateless upstreams' ids.
#[derive(Default)]
pub(crate) struct Sealer {
    pub(crate) ring: ArcSwapOption<KeyRing>,
    /// Seconds a sealed id of a stateless upstream opens for.
    pub(crate) stateless_lifetime: std::sync::atomic::AtomicU64,
    /// Stateless upstreams' sealed ids ended by a DELETE here, until they expire anyway.
    pub(crate) ended: DashMap<Arc<str>, u64>,
}

pub(crate) fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Sealer {
    pub(crate) fn is_on(&self) -> bool {
        self.ring.load().is_some()
    }

    /// A DELETE ended session `sid`: when its upstream keeps no session (`until` is its
    /// id's expiry), this replica refuses the id from now on.
    pub(crate) fn forget(&self, sid: &Arc<str>, until: Option<u64>) {
        if let Some(until) = until {
            self.ended.insert(sid.clone(), until);
        }
    }

    /// Drops the records of ended ids that have expired anyway.
    pub(crate) fn prune(&self) {
        let now = now_s();
        self.ended.retain(|_, until| *until > now);
    }
}
